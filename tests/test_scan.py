"""cumsum, cumprod, flip and roll on the device against the CPU, in every
mode: every dim, 0-d, empty, non-contiguous, integer/bool promotion, 16-bit
floats, gradients, and no CPU fallback."""
import pytest
import torch

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")


def same(fn, *args, tol=1e-5):
    expected = fn(*args)
    got = fn(*[a.to("tpu") for a in args]).cpu()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=tol, atol=tol)


X = torch.randn(5, 7, 3, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scans_along_each_dim(op, dim):
    torchtpu.debug.reset_metrics()
    same(lambda t: getattr(t, op)(dim), X)
    same(lambda t: getattr(torch, op)(t, dim, dtype=torch.float64), X)
    same(lambda t: getattr(t, op)(dim), X.transpose(0, 2))  # non-contiguous
    same(lambda t: getattr(t, op)(dim), torch.randint(-3, 4, (5, 7, 3)))  # int64, exact
    same(lambda t: getattr(t, op)(dim), X.bfloat16(), tol=1.6e-2)  # float32 accumulation, rounded once
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scan_edges(op):
    same(lambda t: getattr(t, op)(0), torch.tensor(3.0))  # 0-d
    same(lambda t: getattr(t, op)(0), torch.empty(0))
    same(lambda t: getattr(t, op)(0), torch.tensor([True, False, True, True]))  # bool -> int64
    same(lambda t: getattr(t, op)(0), torch.tensor([1.0, float("nan"), float("inf"), -2.0]))
    same(lambda t: getattr(t, op)(0), torch.arange(1, 40, dtype=torch.int32))  # int32 -> int64
    with pytest.raises(IndexError):
        getattr(X.to("tpu"), op)(3)


def test_cumsum_gradient_and_attention_mask_positions():
    y = X.clone().requires_grad_()
    yd = X.to("tpu").requires_grad_()
    (y.cumsum(1) * y).sum().backward()
    (yd.cumsum(1) * yd).sum().backward()
    torch.testing.assert_close(yd.grad.cpu(), y.grad)
    mask = torch.tensor([[1, 1, 1, 0], [0, 1, 1, 1]])  # Hugging Face's position ids from a padding mask
    same(lambda m: (m.cumsum(-1) - 1).masked_fill(m == 0, 1), mask)


def test_flip_and_roll():
    torchtpu.debug.reset_metrics()
    same(lambda t: t.flip(0, 2), X)
    same(lambda t: t.flip(-1), X[:, ::2])
    same(lambda t: t.flip(0), torch.tensor(1.0))
    same(lambda t: t.flip(()), X)
    same(lambda t: t.roll(2, 1), X)
    same(lambda t: t.roll((1, -8), (0, 2)), X)
    same(lambda t: t.roll(5), X)  # flattened
    same(lambda t: t.roll(3), X.transpose(0, 2))
    same(lambda t: t.roll(1, 0), torch.empty(0, 3))
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}
    with pytest.raises(RuntimeError, match="dim .* appears multiple times|multiple times"):
        X.to("tpu").flip(0, 0)
