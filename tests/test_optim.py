"""The fused optimizer steps on the device against the CPU's fused kernels, in
every mode: Adam and AdamW (weight decay, amsgrad, maximize, a tensor
learning rate, 16-bit parameters) and SGD (momentum, dampening, Nesterov,
the first step), gradient unscaling and a skipped step when found_inf is
set; each step one device op, no CPU fallback."""
import pytest
import torch

import torchtpu
from torchtpu import debug

pytestmark = pytest.mark.usefixtures("each_mode")


def params_and_grads(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(4, 3), (5,), (2, 2, 2), ()]
    params = [torch.randn(s, generator=g).to(dtype) for s in shapes]
    grads = [[torch.randn(s, generator=g).to(dtype) for s in shapes] for _ in range(3)]
    return params, grads


def run(opt_class, device, params, grads, **kwargs):
    ps = [p.clone().to(device).requires_grad_() for p in params]
    opt = opt_class(ps, fused=True, **kwargs)
    for step in grads:
        for p, gr in zip(ps, step):
            p.grad = gr.to(device)
        opt.step()
    return ps, opt


def check(opt_class, dtype=torch.float32, tol=1e-6, **kwargs):
    debug.reset_metrics()
    params, grads = params_and_grads(dtype)
    want, want_opt = run(opt_class, "cpu", params, grads, **kwargs)
    got, got_opt = run(opt_class, "tpu", params, grads, **kwargs)
    for p, q in zip(got, want):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=tol, atol=tol)
    for sp, sq in zip(got_opt.state.values(), want_opt.state.values()):
        for key in sq:
            torch.testing.assert_close(sp[key].cpu(), sq[key], rtol=tol, atol=tol)
    m = debug.metrics()
    assert m["cpu_fallbacks"] == {}
    fused = [n for n in m["ops"] if n.startswith("aten::_fused_")]
    assert fused and sum(m["ops"][n] for n in fused) == len(grads)  # one device op per step


@pytest.mark.parametrize("opt_class", [torch.optim.Adam, torch.optim.AdamW])
@pytest.mark.parametrize("kwargs", [dict(lr=0.01), dict(lr=0.02, weight_decay=0.1),
                                    dict(lr=0.01, amsgrad=True, weight_decay=0.05),
                                    dict(lr=0.01, maximize=True, betas=(0.8, 0.9), eps=1e-6)])
def test_fused_adam(opt_class, kwargs):
    check(opt_class, **kwargs)


def test_fused_adamw_tensor_lr_and_bfloat16():
    check(torch.optim.AdamW, lr=torch.tensor(0.01), weight_decay=0.1)
    check(torch.optim.AdamW, dtype=torch.bfloat16, tol=1e-2, lr=0.01, weight_decay=0.1)


@pytest.mark.parametrize("kwargs", [dict(lr=0.1), dict(lr=0.1, momentum=0.9),
                                    dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
                                    dict(lr=0.1, momentum=0.8, dampening=0.3, maximize=True)])
def test_fused_sgd(kwargs):
    check(torch.optim.SGD, **kwargs)


def test_grad_scale_and_found_inf():
    params, grads = params_and_grads(torch.float32)
    for found in (0.0, 1.0):
        out = {}
        for device in ("cpu", "tpu"):
            ps = [p.clone().to(device) for p in params]
            gs = [g.clone().to(device) for g in grads[0]]
            ms = [torch.zeros_like(p) for p in ps]
            vs = [torch.zeros_like(p) for p in ps]
            steps = [torch.tensor(1.0, device=device) for _ in ps]
            torch._fused_adamw_(ps, gs, ms, vs, [], steps, lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.01,
                                eps=1e-8, amsgrad=False, maximize=False,
                                grad_scale=torch.tensor(4.0, device=device),
                                found_inf=torch.tensor(found, device=device))
            out[device] = ps + gs + ms + vs
        for a, b in zip(out["tpu"], out["cpu"]):
            torch.testing.assert_close(a.cpu(), b, rtol=1e-6, atol=1e-6)
        if found:  # a skipped step leaves everything as it was
            for a, p in zip(out["tpu"], params):
                torch.testing.assert_close(a.cpu(), p)
