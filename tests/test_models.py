"""Models train on the device as on the CPU: same seed, same losses (float32,
relative 1e-4), in Debug and Strict modes."""
import copy

import pytest
import torch

import torchtpu
from torchtpu.testing.models import MLP, CharData, TinyGPT


def _train(model, batches, device, steps, opt_cls, **opt_kw):
    model = copy.deepcopy(model).to(device)
    opt = opt_cls(model.parameters(), **opt_kw)
    losses = []
    for x, y, loss_fn in batches[:steps]:
        loss = loss_fn(model, x.to(device), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def _mlp_batches(n):
    g = torch.Generator().manual_seed(1)
    ce = lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y)
    return [(torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g), ce) for _ in range(n)]


def _gpt_batches(data, n):
    g = torch.Generator().manual_seed(2)
    out = []
    for _ in range(n):
        x, y = data.batch(4, 16, g)
        out.append((x, y, lambda m, a, b: m(a, b)))
    return out


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
@pytest.mark.parametrize("opt", ["sgd", "adamw"])
def test_mlp_matches_cpu(mode, opt):
    torch.manual_seed(0)
    model = MLP()
    batches = _mlp_batches(5)
    cls, kw = (torch.optim.SGD, dict(lr=0.1, momentum=0.9)) if opt == "sgd" else (torch.optim.AdamW, dict(lr=1e-2))
    cpu_losses, cpu_model = _train(model, batches, "cpu", 5, cls, **kw)
    with torchtpu.eager_mode(mode):
        tpu_losses, tpu_model = _train(model, batches, "tpu", 5, cls, **kw)
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-6)
    for (name, p_cpu), p_tpu in zip(cpu_model.named_parameters(), tpu_model.parameters()):
        torch.testing.assert_close(p_tpu.detach().cpu(), p_cpu.detach(), rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_decoder_matches_cpu(mode):
    torch.manual_seed(0)
    data = CharData()
    model = TinyGPT(data.vocab, width=32, layers=2, heads=4, max_len=16)
    batches = _gpt_batches(data, 5)
    cpu_losses, _ = _train(model, batches, "cpu", 5, torch.optim.AdamW, lr=3e-3)
    torchtpu.debug.reset_metrics()
    with torchtpu.eager_mode(mode):
        tpu_losses, _ = _train(model, batches, "tpu", 5, torch.optim.AdamW, lr=3e-3)
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-6)
    assert cpu_losses[-1] < cpu_losses[0]
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def test_training_step_compiles_once():
    """A repeated training step reuses its executables: step 3 compiles nothing."""
    torch.manual_seed(0)
    data = CharData()
    model = TinyGPT(data.vocab, width=32, layers=2, heads=4, max_len=16).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = _gpt_batches(data, 3)
    for i, (x, y, fn) in enumerate(batches):
        if i == 2:
            torchtpu.debug.reset_metrics()
        loss = fn(model, x.to("tpu"), y.to("tpu"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
    m = torchtpu.debug.metrics()
    assert m["compilations"] == 0, m["compilations"]
    assert m["executions"] > 100 and m["cache_hits"] == m["executions"]
