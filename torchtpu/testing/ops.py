"""Checks of an op on the tpu device against CPU PyTorch, for tests:
`check` runs a function on CPU tensors and on copies moved to the device and
compares the outputs (dtype, shape, values at the dtype's tolerance) and the
input gradients under a fixed random cotangent; `check_raises` expects the
device to raise the CPU's error type; `r` draws reproducible inputs."""
import torch

DEV = torch.device("tpu")

TOL = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float64: dict(rtol=1e-7, atol=1e-7),
    torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
}


def _flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    if hasattr(out, "_fields"):  # torch.return_types
        return [t for o in tuple(out) for t in _flat(o)]
    return [out]


def _to_dev(a, grad):
    if isinstance(a, torch.Tensor):
        c = a.detach().clone()
        t = a.detach().to(DEV)
        if grad and a.is_floating_point():
            c.requires_grad_()
            t.requires_grad_()
        return c, t
    if isinstance(a, (list, tuple)):
        pairs = [_to_dev(x, grad) for x in a]
        return type(a)(p[0] for p in pairs), type(a)(p[1] for p in pairs)
    return a, a


def _leaves(a):
    if isinstance(a, torch.Tensor):
        return [a] if a.requires_grad else []
    if isinstance(a, (list, tuple)):
        return [t for x in a for t in _leaves(x)]
    return []


def _close(got, want, rtol, atol):
    if isinstance(want, torch.Tensor):
        assert got.device.type == "tpu", f"result on {got.device}"
        assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
        assert got.shape == want.shape, f"shape {tuple(got.shape)} != {tuple(want.shape)}"
        kw = TOL.get(want.dtype, dict(rtol=0, atol=0)) if rtol is None else dict(rtol=rtol, atol=atol)
        torch.testing.assert_close(got.cpu(), want, equal_nan=True, **kw)
    else:
        assert got == want


def check(fn, *cpu_args, grad=True, rtol=None, atol=None, grad_rtol=None, grad_atol=None):
    """Runs fn on CPU args and on copies moved to tpu; compares outputs and,
    when grad, the input gradients under a fixed random cotangent."""
    c_args, t_args = zip(*[_to_dev(a, grad) for a in cpu_args]) if cpu_args else ((), ())
    c_out, t_out = _flat(fn(*c_args)), _flat(fn(*t_args))
    assert len(c_out) == len(t_out)
    for g, w in zip(t_out, c_out):
        _close(g, w, rtol, atol)
    if not grad:
        return t_out
    c_leaves, t_leaves = _leaves(c_args), _leaves(t_args)
    diff = [(c, t) for c, t in zip(c_out, t_out)
            if isinstance(c, torch.Tensor) and c.requires_grad and c.is_floating_point()]
    assert c_leaves and diff, "grad=True but nothing to differentiate"
    gen = torch.Generator().manual_seed(1234)
    c_loss = t_loss = 0
    for c, t in diff:
        cot = torch.randn(c.shape, generator=gen, dtype=torch.float32).to(c.dtype)
        c_loss = c_loss + (c.float() * cot.float()).sum()
        t_loss = t_loss + (t.float() * cot.float().to(DEV)).sum()
    c_grads = torch.autograd.grad(c_loss, c_leaves, allow_unused=True)
    t_grads = torch.autograd.grad(t_loss, t_leaves, allow_unused=True)
    for g, w in zip(t_grads, c_grads):
        if w is None:
            assert g is None or not g.cpu().any()
            continue
        _close(g, w, grad_rtol if grad_rtol is not None else rtol, grad_atol if grad_atol is not None else atol)
    return t_out


def check_raises(fn, *cpu_args):
    """fn raises on CPU, and raises the same error type on tpu."""
    import pytest

    with pytest.raises(Exception) as want:
        fn(*cpu_args)
    with pytest.raises(want.type):
        fn(*[a.to(DEV) if isinstance(a, torch.Tensor) else a for a in cpu_args])


def r(*shape, dtype=torch.float32, seed=0, lo=None, hi=None):
    g = torch.Generator().manual_seed(seed + 7 * len(shape) + sum(shape))
    if dtype.is_floating_point:
        x = torch.randn(shape, generator=g)
        if lo is not None:
            x = torch.rand(shape, generator=g) * (hi - lo) + lo
        return x.to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    lo = -10 if lo is None else lo
    hi = 10 if hi is None else hi
    return torch.randint(lo, hi, shape, generator=g).to(dtype)
