"""Each model of the zoo trains 5 steps on the device and on the CPU from the
same initial weights, in Debug, Strict and Fused mode: the same losses, the
same gradients at every step and the same final weights and buffers (float32,
relative 1e-4), the same parameter sharing, and no op on the CPU fallback.

The optimizer is SGD with momentum and weight decay: Adam divides by the
gradient's running magnitude, which turns the rounding noise of an exactly
zero gradient (an attention key bias has one) into lr-sized steps on both
devices, so final weights could not be compared."""
import copy
import os
import sys

import pytest
import torch

import torchtpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo import ZOO  # noqa: E402

STEPS = 5


def _to(tree, device):
    if isinstance(tree, tuple):
        return tuple(_to(t, device) for t in tree)
    return tree.to(device)


def _train(model, batches, loss_fn, device):
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=0.01)
    losses, grads = [], []
    for x, y in batches:
        loss = loss_fn(model, _to(x, device), _to(y, device))
        opt.zero_grad()
        loss.backward()
        grads.append([p.grad.detach().cpu().clone() for p in model.parameters()])
        opt.step()
        losses.append(loss.item())
    return model, losses, grads


def _sharing(model):
    """For each parameter (in named_parameters(remove_duplicate=False)
    order), the index of the first name bound to the same object."""
    first, out = {}, []
    for i, (_, p) in enumerate(model.named_parameters(remove_duplicate=False)):
        out.append(first.setdefault(id(p), i))
    return out


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
@pytest.mark.parametrize("name", sorted(ZOO))
def test_model_trains_as_on_cpu(name, mode):
    build, batches_of, loss_fn = ZOO[name]
    torch.manual_seed(0)
    model = build()
    batches = batches_of(STEPS)
    cpu_model, cpu_losses, cpu_grads = _train(model, batches, loss_fn, "cpu")
    torchtpu.debug.reset_metrics()
    with torchtpu.eager_mode(mode):
        tpu_model, tpu_losses, tpu_grads = _train(model, batches, loss_fn, "tpu")
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}
    assert _sharing(tpu_model) == _sharing(cpu_model) == _sharing(model)
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-6)
    names = [n for n, _ in cpu_model.named_parameters()]
    for step, (tpu_step, cpu_step) in enumerate(zip(tpu_grads, cpu_grads)):
        for n, g_tpu, g_cpu in zip(names, tpu_step, cpu_step):
            # Relative to the tensor's largest gradient: elements near zero
            # carry the rounding of the others.
            atol = 1e-4 * g_cpu.abs().max().item() + 1e-7
            torch.testing.assert_close(g_tpu, g_cpu, rtol=1e-4, atol=atol,
                                       msg=lambda m: f"step {step}, grad of {n}: {m}")
    for (n, p_cpu), p_tpu in zip(cpu_model.named_parameters(), tpu_model.parameters()):
        torch.testing.assert_close(p_tpu.detach().cpu(), p_cpu.detach(), rtol=1e-4, atol=1e-5, msg=n)
    for (n, b_cpu), b_tpu in zip(cpu_model.named_buffers(), tpu_model.buffers()):
        torch.testing.assert_close(b_tpu.cpu(), b_cpu, rtol=1e-4, atol=1e-5, msg=n)
