"""nn.functional.ctc_loss on the device against the CPU, in every mode: padded
and concatenated targets, int-list and tensor lengths (CPU length tensors
too), every reduction, zero_infinity, impossible alignments (inf), empty
targets and inputs, another blank, float64, gradients, the CPU's errors, and
no CPU fallback."""
import pytest
import torch
import torch.nn.functional as F

import torchtpu
from torchtpu import debug

pytestmark = pytest.mark.usefixtures("each_mode")


def batch(T, B, C, S, dtype=torch.float32, seed=0, blank=0):
    g = torch.Generator().manual_seed(seed)
    lp = torch.randn(T, B, C, generator=g, dtype=dtype).log_softmax(2)
    low, high = (1, C) if blank == 0 else (0, C - 1)
    targets = torch.randint(low, high, (B, S), generator=g)
    return lp, targets


def both(lp, targets, in_lens, tgt_lens, tol=1e-5, **kw):
    """Loss and input gradient on the CPU and the device agree."""
    results = []
    for dev in ("cpu", "tpu"):
        x = lp.detach().to(dev).requires_grad_()
        mv = lambda v: v.to(dev) if isinstance(v, torch.Tensor) and not getattr(v, "_stay_on_cpu", False) else v
        loss = F.ctc_loss(x, targets.to(dev), mv(in_lens), mv(tgt_lens), **kw)
        torch.autograd.grad(loss.sum() if loss.dim() else loss, x)  # checks backward runs
        x.grad = None
        loss = F.ctc_loss(x, targets.to(dev), mv(in_lens), mv(tgt_lens), **kw)
        (loss.sum() if loss.dim() else loss).backward()
        results.append((loss.detach().cpu(), x.grad.cpu()))
    (l_cpu, g_cpu), (l_dev, g_dev) = results
    torch.testing.assert_close(l_dev, l_cpu, rtol=tol, atol=tol, equal_nan=True)
    torch.testing.assert_close(g_dev, g_cpu, rtol=tol, atol=tol, equal_nan=True)


def no_fallback():
    torchtpu.synchronize()
    assert debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("concatenated", [False, True])
def test_ctc_loss_matches_the_cpu(reduction, concatenated):
    debug.reset_metrics()
    lp, targets = batch(12, 4, 6, 5)
    in_lens, tgt_lens = [12, 11, 7, 12], [5, 3, 0, 1]
    if concatenated:
        targets = torch.cat([targets[b, :n] for b, n in enumerate(tgt_lens)])
    both(lp, targets, in_lens, tgt_lens, reduction=reduction)
    no_fallback()


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_impossible_alignments_and_empty_inputs(zero_infinity):
    """An input shorter than its target (and one of no frames) has likelihood
    0: the loss is inf (0 with zero_infinity) and its gradient NaN (0)."""
    debug.reset_metrics()
    lp, targets = batch(6, 4, 5, 3)
    both(lp, targets, [6, 1, 0, 0], [3, 2, 0, 2], reduction="none", zero_infinity=zero_infinity)
    no_fallback()


def test_tensor_lengths_repeats_blank_and_float64():
    debug.reset_metrics()
    lp, targets = batch(10, 3, 6, 4, dtype=torch.float64)
    targets[0] = torch.tensor([2, 2, 3, 3])  # repeated labels need a blank between them
    cpu_lengths = torch.tensor([10, 9, 8])
    cpu_lengths._stay_on_cpu = True
    both(lp, targets, cpu_lengths, torch.tensor([4, 2, 3]), tol=1e-10, reduction="none")
    both(lp, targets, torch.tensor([10, 9, 8]), torch.tensor([4, 2, 3]), tol=1e-10, reduction="sum")
    lp, targets = batch(10, 3, 6, 4, blank=5)
    both(lp, targets, [10, 10, 4], [4, 1, 2], blank=5, reduction="none")
    no_fallback()


def test_long_sequences():
    debug.reset_metrics()
    lp, targets = batch(60, 8, 20, 15, seed=3)
    both(lp, targets, [60, 55, 50, 45, 40, 35, 30, 25], [15, 12, 10, 8, 6, 4, 1, 0], tol=1e-4)
    no_fallback()


def test_the_cpu_errors():
    lp, targets = batch(6, 2, 5, 3)
    for args, match in [(([6, 7], [3, 3]), "at most 6"), (([6], [3, 3]), "input_lengths must be of size"),
                        (([6, 6], [3, 4]), "at least 4"), (([6, 6], [3, -1]), "at least 0")]:
        for dev in ("cpu", "tpu"):
            with pytest.raises(RuntimeError, match=match):
                F.ctc_loss(lp.to(dev), targets.to(dev), *args)
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="blank must be in label range"):
            F.ctc_loss(lp.to(dev), targets.to(dev), [6, 6], [3, 3], blank=5)
        with pytest.raises(RuntimeError, match="not implemented for 'BFloat16'"):
            F.ctc_loss(lp.bfloat16().to(dev), targets.to(dev), [6, 6], [3, 3])
