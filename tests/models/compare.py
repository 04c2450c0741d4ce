"""Trains a model a few steps on the device and on the CPU from the same
initial weights and compares them (shared by test_zoo and test_hf): the same
losses, the same gradients at every step, the same final weights and buffers
(float32, relative 1e-4), the same parameter sharing, and no op on the CPU
fallback.

The optimizer is SGD with momentum and weight decay: Adam divides by the
gradient's running magnitude, which turns the rounding noise of an exactly
zero gradient (an attention key bias has one) into lr-sized steps on both
devices, so final weights could not be compared."""
import copy

import torch

import torchtpu


def sharing(model):
    """For each parameter (in named_parameters(remove_duplicate=False)
    order), the index of the first name bound to the same object."""
    first, out = {}, []
    for i, (_, p) in enumerate(model.named_parameters(remove_duplicate=False)):
        out.append(first.setdefault(id(p), i))
    return out


def train(model, batches, loss_of, device):
    """A copy of `model` on `device` trained one step per batch;
    loss_of(model, batch, device) gives the loss. Returns the copy, the
    losses and each step's gradients (None where a parameter has none)."""
    model = copy.deepcopy(model).to(device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=0.01)
    losses, grads = [], []
    for batch in batches:
        loss = loss_of(model, batch, device)
        opt.zero_grad()
        loss.backward()
        grads.append([None if p.grad is None else p.grad.detach().cpu().clone() for p in model.parameters()])
        opt.step()
        losses.append(loss.item())
    return model, losses, grads


def assert_trains_as_on_cpu(model, batches, loss_of, mode):
    cpu_model, cpu_losses, cpu_grads = train(model, batches, loss_of, "cpu")
    torchtpu.debug.reset_metrics()
    with torchtpu.eager_mode(mode):
        tpu_model, tpu_losses, tpu_grads = train(model, batches, loss_of, "tpu")
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}
    assert sharing(tpu_model) == sharing(cpu_model) == sharing(model)
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-6)
    names = [n for n, _ in cpu_model.named_parameters()]
    for step, (tpu_step, cpu_step) in enumerate(zip(tpu_grads, cpu_grads)):
        for n, g_tpu, g_cpu in zip(names, tpu_step, cpu_step):
            assert (g_tpu is None) == (g_cpu is None), f"step {step}, grad of {n}"
            if g_cpu is None:
                continue
            # Relative to the tensor's largest gradient: elements near zero
            # carry the rounding of the others.
            atol = 1e-4 * g_cpu.abs().max().item() + 1e-7
            torch.testing.assert_close(g_tpu, g_cpu, rtol=1e-4, atol=atol,
                                       msg=lambda m: f"step {step}, grad of {n}: {m}")
    for (n, p_cpu), p_tpu in zip(cpu_model.named_parameters(), tpu_model.parameters()):
        torch.testing.assert_close(p_tpu.detach().cpu(), p_cpu.detach(), rtol=1e-4, atol=1e-5, msg=n)
    for (n, b_cpu), b_tpu in zip(cpu_model.named_buffers(), tpu_model.buffers()):
        torch.testing.assert_close(b_tpu.cpu(), b_cpu, rtol=1e-4, atol=1e-5, msg=n)
