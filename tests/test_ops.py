"""Op correctness on the tpu device against CPU PyTorch: forward results and
autograd input gradients, plus in-place/out= forms and optimizer steps. Every
test also asserts that no op fell back to the CPU."""
import math

import pytest
import torch
import torch.nn.functional as F

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

DEV = torch.device("tpu")

TOL = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float64: dict(rtol=1e-7, atol=1e-7),
    torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
}


@pytest.fixture(autouse=True)
def no_cpu_fallback(request):
    torchtpu.debug.reset_metrics()
    yield
    allowed = set(getattr(request.node.get_closest_marker("allow_fallback"), "args", ()))
    fallbacks = {k: v for k, v in torchtpu.debug.metrics()["cpu_fallbacks"].items() if k not in allowed}
    assert fallbacks == {}, f"ops fell back to CPU: {fallbacks}"


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


# ---- factories ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_empty(dtype):
    x = torch.empty(2, 3, 4, dtype=dtype, device=DEV)
    assert x.shape == (2, 3, 4) and x.dtype == dtype and x.device.type == "tpu"
    y = torch.empty_strided((2, 3), (1, 2), dtype=dtype, device=DEV)
    assert y.shape == (2, 3) and y.stride() == (1, 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.bool])
@pytest.mark.parametrize("name", ["zeros", "ones"])
def test_zeros_ones(name, dtype):
    f = getattr(torch, name)
    _close(f(3, 5, dtype=dtype, device=DEV), f(3, 5, dtype=dtype), None, None)


@pytest.mark.parametrize("value,dtype", [(2.5, None), (7, torch.int64), (True, torch.bool), (-1.5, torch.bfloat16)])
def test_full(value, dtype):
    _close(torch.full((4, 2), value, dtype=dtype, device=DEV), torch.full((4, 2), value, dtype=dtype), None, None)


@pytest.mark.parametrize("args,kw", [
    ((10,), {}), ((2, 11, 3), {}), ((10, -3, -2), {}), ((0.0, 1.0, 0.1), {}), ((-1.5, 2.25, 0.5), {}),
    ((5,), dict(dtype=torch.float32)), ((0, 1, 0.25), dict(dtype=torch.float64)), ((3, 9), dict(dtype=torch.int32)),
])
def test_arange(args, kw):
    _close(torch.arange(*args, **kw, device=DEV), torch.arange(*args, **kw), None, None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rand(dtype):
    torch.manual_seed(0)
    x = torch.rand(200, 500, dtype=dtype, device=DEV)
    assert x.shape == (200, 500) and x.dtype == dtype and x.device.type == "tpu"
    c = x.float().cpu()
    assert c.min() >= 0 and c.max() < 1
    assert abs(c.mean() - 0.5) < 0.01 and abs(c.var() - 1 / 12) < 0.005
    assert (c < 0.25).float().mean().sub(0.25).abs() < 0.01
    torch.manual_seed(0)
    torch.testing.assert_close(torch.rand(200, 500, dtype=dtype, device=DEV).cpu(), x.cpu(), rtol=0, atol=0)
    assert not torch.equal(torch.rand(200, 500, dtype=dtype, device=DEV).cpu(), x.cpu())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_randn(dtype):
    torch.manual_seed(3)
    x = torch.randn(400, 500, dtype=dtype, device=DEV)
    assert x.shape == (400, 500) and x.dtype == dtype
    c = x.float().cpu()
    assert abs(c.mean()) < 0.01 and abs(c.std() - 1) < 0.01
    assert abs((c.abs() < 1).float().mean() - 0.6827) < 0.01
    torch.manual_seed(3)
    torch.testing.assert_close(torch.randn(400, 500, dtype=dtype, device=DEV).cpu(), x.cpu(), rtol=0, atol=0)


def test_like_factories():
    x = r(3, 4).to(DEV)
    _close(torch.zeros_like(x), torch.zeros(3, 4), None, None)
    _close(torch.ones_like(x, dtype=torch.int64), torch.ones(3, 4, dtype=torch.int64), None, None)
    _close(torch.full_like(x, 3.5), torch.full((3, 4), 3.5), None, None)
    _close(torch.empty_like(x).fill_(2), torch.full((3, 4), 2.0), None, None)
    torch.manual_seed(1)
    u = torch.rand_like(torch.empty(100, 100, device=DEV))
    assert u.device.type == "tpu" and u.shape == (100, 100)
    c = u.cpu()
    assert c.min() >= 0 and c.max() < 1 and abs(c.mean() - 0.5) < 0.02
    n = torch.randn_like(torch.empty(100, 100, device=DEV)).cpu()
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03


# ---- copies -----------------------------------------------------------------------------------------------

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.int8, torch.uint8,
          torch.bool, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_roundtrip(dtype):
    x = r(5, 7, dtype=dtype, lo=0 if dtype == torch.uint8 else None)
    t = x.to(DEV)
    assert t.dtype == dtype and t.device.type == "tpu"
    torch.testing.assert_close(t.cpu(), x, rtol=0, atol=0)
    # non-contiguous views both ways
    torch.testing.assert_close(t.t().cpu(), x.t(), rtol=0, atol=0)
    torch.testing.assert_close(t[1:4, ::2].cpu(), x[1:4, ::2], rtol=0, atol=0)
    d = torch.zeros(7, 5, dtype=dtype, device=DEV)
    d.copy_(x.t())
    torch.testing.assert_close(d.cpu(), x.t().contiguous(), rtol=0, atol=0)


@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", [torch.float32, torch.bfloat16, torch.int64, torch.int8, torch.bool, torch.float16])
def test_to_dtype_on_device(src, dst):
    x = r(4, 6, dtype=src, lo=0 if src == torch.uint8 else None)
    if src.is_floating_point:
        x = x * 3  # includes non-integers: float->int truncates toward zero
    out = x.to(DEV).to(dst)
    _close(out, x.to(dst), 0, 0)


def test_copy_between_dtypes_and_devices():
    x = r(3, 4)
    d = torch.empty(3, 4, dtype=torch.float16, device=DEV)
    d.copy_(x)  # cpu f32 -> tpu f16
    torch.testing.assert_close(d.cpu(), x.half(), rtol=0, atol=0)
    h = torch.empty(3, 4, dtype=torch.float64)
    h.copy_(d)  # tpu f16 -> cpu f64
    torch.testing.assert_close(h, x.half().double(), rtol=0, atol=0)
    e = torch.empty(4, 3, dtype=torch.int32, device=DEV)
    e.copy_(d.t() * 10)  # tpu f16 view -> tpu i32
    torch.testing.assert_close(e.cpu(), (x.half().t() * 10).int(), rtol=0, atol=0)


# ---- elementwise ------------------------------------------------------------------------------------------

BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2.5), "sub_alpha": lambda a, b: torch.sub(a, b, alpha=-2),
    "maximum": torch.maximum, "minimum": torch.minimum, "rsub": lambda a, b: torch.rsub(a, b),
}


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((5,), ())])
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_float(name, shapes):
    check(BINARY[name], r(*shapes[0]), r(*shapes[1], seed=1) + 0.1)


@pytest.mark.parametrize("da,db", [
    (torch.int64, torch.float32), (torch.int32, torch.int64), (torch.bfloat16, torch.float32),
    (torch.float16, torch.int64), (torch.bool, torch.int32), (torch.uint8, torch.int8), (torch.bool, torch.float32),
])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "eq", "lt", "ge"])
def test_binary_promotion(op, da, db):
    a = r(3, 4, dtype=da, lo=0 if da == torch.uint8 else None)
    b = r(4, dtype=db, seed=2, lo=1 if not db.is_floating_point and db != torch.bool else None, hi=9)
    if op == "sub" and torch.bool in (da, db):
        check_raises(torch.sub, a, b)
    else:
        check(getattr(torch, op), a, b, grad=False)


@pytest.mark.parametrize("scalar", [2, -3, 0.5, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.int8])
@pytest.mark.parametrize("op", ["add", "mul", "div", "sub", "rsub", "gt", "ne", "pow"])
def test_scalar_ops(op, dtype, scalar):
    x = r(3, 5, dtype=dtype, lo=1, hi=4) if op == "pow" else r(3, 5, dtype=dtype)
    f = (lambda x: torch.rsub(x, scalar)) if op == "rsub" else (lambda x: getattr(torch, op)(x, scalar))
    invalid = (op in ("sub", "rsub") and scalar is True) or (
        op == "pow" and not dtype.is_floating_point and type(scalar) is int and scalar < 0)
    if invalid:
        check_raises(f, x)
        return
    check(f, x, grad=False)
    if op in ("add", "mul", "sub"):
        check(lambda x: {"add": lambda: scalar + x, "mul": lambda: scalar * x, "sub": lambda: scalar - x}[op](), x,
              grad=False)


def test_scalar_ops_grad():
    check(lambda x: (x * 2.5 + 1) / 3 - 0.25 * x, r(4, 5))
    check(lambda x: 2 / x, r(4, 5, lo=0.5, hi=2.0))


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
def test_compare(op, dtype):
    a = r(4, 5, dtype=dtype, lo=-2, hi=2) if not dtype.is_floating_point else r(4, 5, dtype=dtype).round()
    b = r(5, dtype=dtype, seed=3, lo=-2, hi=2) if not dtype.is_floating_point else r(5, dtype=dtype, seed=3).round()
    check(getattr(torch, op), a, b, grad=False)
    check(lambda x: getattr(torch, op)(x, 0), a, grad=False)


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
                                "bitwise_xor", "add", "mul", "eq"])
def test_bool_ops(op):
    check(getattr(torch, op), r(4, 5, dtype=torch.bool), r(4, 5, dtype=torch.bool, seed=9), grad=False)


def test_bool_unary_and_ops():
    a, b = r(4, 5, dtype=torch.bool), r(4, 5, dtype=torch.bool, seed=9)
    check(lambda a, b: (a & b, a | b, a ^ b, ~a, torch.logical_not(a), a.sum(), a.any(), a.all()), a, b, grad=False)
    check(lambda x: torch.logical_and(x, x > 0.2), r(4, 5), grad=False)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32])
@pytest.mark.parametrize("op", ["div", "div_trunc", "div_floor", "floor_divide", "remainder", "fmod"])
def test_division(op, dtype):
    a = torch.tensor([7, -7, 7, -7, 0, 9, -9, 5, 13, -1], dtype=dtype)
    b = torch.tensor([2, 2, -2, -2, 3, 4, 4, -3, 5, 3], dtype=dtype)
    f = {
        "div": torch.div, "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
        "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"), "floor_divide": torch.floor_divide,
        "remainder": torch.remainder, "fmod": torch.fmod,
    }[op]
    check(f, a, b, grad=False)
    check(lambda a: f(a, 3), a, grad=False)
    check(lambda a: f(a, -2), a, grad=False)


def test_remainder_float_neg_and_grad():
    a, b = r(6, 7) * 5, r(6, 7, seed=5) * 3
    b = torch.where(b.abs() < 0.5, torch.full_like(b, 1.5), b)
    check(torch.remainder, a, b, grad=False)
    check(lambda a: torch.remainder(a, -1.5), a)
    check(lambda a, b: a // b, a, b, grad=False)


def test_hand_computed_int_division():
    a = torch.tensor([-7, 7, -8], device=DEV)
    assert (a // 2).cpu().tolist() == [-4, 3, -4]
    assert (a % 3).cpu().tolist() == [2, 1, 1]
    assert (a % -3).cpu().tolist() == [-1, -2, -2]
    assert torch.div(a, 2, rounding_mode="trunc").cpu().tolist() == [-3, 3, -4]
    assert (a / 2).cpu().tolist() == [-3.5, 3.5, -4.0]


@pytest.mark.parametrize("case", ["tt", "ts2", "ts3", "ts_half", "ts_neg", "st", "int_int", "int_float"])
def test_pow(case):
    x = r(4, 5, lo=0.5, hi=2.0)
    if case == "tt":
        check(torch.pow, x, r(4, 5, seed=1, lo=-2, hi=2))
    elif case == "ts2":
        check(lambda x: x ** 2, r(4, 5))
    elif case == "ts3":
        check(lambda x: x ** 3, r(4, 5))
    elif case == "ts_half":
        check(lambda x: x ** 0.5, x)
    elif case == "ts_neg":
        check(lambda x: x ** -1.5, x)
    elif case == "st":
        check(lambda x: 2.0 ** x, r(4, 5))
    elif case == "int_int":
        check(lambda a, b: a ** b, r(4, 5, dtype=torch.int64, lo=-3, hi=4), r(4, 5, dtype=torch.int64, lo=0, hi=4),
              grad=False)
        check(lambda a: a ** 2, r(4, 5, dtype=torch.int32), grad=False)
    else:
        check(lambda a: a ** 0.5, r(4, 5, dtype=torch.int64, lo=0, hi=9), grad=False)
        check(lambda a: a ** 2.0, r(4, 5, dtype=torch.int64), grad=False)


def test_where():
    c = r(4, 5) > 0
    check(torch.where, c, r(4, 5, seed=1), r(5, seed=2))
    check(lambda c, x: torch.where(c, x, 0.0), c, r(4, 5))
    check(lambda c, x: torch.where(c, x, 2), c, r(4, 5, dtype=torch.int64), grad=False)
    check(lambda c, a, b: torch.where(c, a, b), c, r(4, 5, dtype=torch.int32), r(4, 5, seed=3), grad=False)
    check(lambda x: torch.where(x > 0, x, x * 0.1), r(4, 5))


@pytest.mark.parametrize("case", ["both", "min", "max", "tensor", "tensor_min", "int"])
def test_clamp(case):
    x = r(5, 6) * 2
    if case == "both":
        check(lambda x: x.clamp(-0.5, 0.7), x)
    elif case == "min":
        check(lambda x: x.clamp(min=0.1), x)
        check(lambda x: x.clamp_min(0.1), x)
    elif case == "max":
        check(lambda x: x.clamp(max=-0.1), x)
        check(lambda x: x.clamp_max(-0.1), x)
    elif case == "tensor":
        check(lambda x, lo, hi: x.clamp(lo, hi), x, r(6, seed=1) - 1, r(5, 1, seed=2) + 1)
    elif case == "tensor_min":
        check(lambda x, lo: torch.clamp(x, min=lo), x, r(5, 6, seed=1))
    else:
        check(lambda x: x.clamp(-3, 4), r(5, 6, dtype=torch.int64), grad=False)
        check(lambda x: x.clamp(-2.5, 3.5), r(5, 6, dtype=torch.int64), grad=False)


ACTS = {
    "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "exp": torch.exp, "abs": torch.abs, "neg": torch.neg,
    "log": lambda x: torch.log(x.abs() + 0.1), "sqrt": lambda x: torch.sqrt(x.abs() + 0.1),
    "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.1),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(ACTS))
def test_unary(name, dtype):
    check(ACTS[name], r(6, 7, dtype=dtype) * 2)


@pytest.mark.parametrize("name", ["abs", "neg", "relu"])
def test_unary_int(name):
    check(ACTS[name], r(6, 7, dtype=torch.int64), grad=False)


@pytest.mark.parametrize("name", ["exp", "sqrt", "log", "sigmoid", "tanh", "rsqrt"])
def test_unary_int_promotes(name):
    check(getattr(torch, name), r(6, 7, dtype=torch.int64, lo=1, hi=9), grad=False)


def test_relu_at_zero_grad():
    check(F.relu, torch.tensor([-1.0, 0.0, 0.0, 2.0]))
    check(torch.abs, torch.tensor([-1.0, 0.0, 2.0]))


# ---- matmul family ----------------------------------------------------------------------------------------

MM_TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["mm", "bmm", "addmm", "addmm_ab", "addmm_bcast", "dot", "mv", "linear", "linear_nb",
                                  "matmul_bcast", "matmul_1d2d", "matmul_2d1d", "matmul_3d2d", "matmul_1d1d"])
def test_matmul(case):
    f, args = {
        "mm": (torch.mm, (r(5, 7), r(7, 3))),
        "bmm": (torch.bmm, (r(4, 5, 7), r(4, 7, 3))),
        "addmm": (torch.addmm, (r(5, 3), r(5, 7), r(7, 3))),
        "addmm_ab": (lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=-2.0), (r(5, 3), r(5, 7), r(7, 3))),
        "addmm_bcast": (lambda c, a, b: torch.addmm(c, a, b, alpha=3), (r(3), r(5, 7), r(7, 3))),
        "dot": (torch.dot, (r(9), r(9, seed=1))),
        "mv": (torch.mv, (r(5, 7), r(7))),
        "linear": (F.linear, (r(2, 5, 7), r(4, 7), r(4))),
        "linear_nb": (F.linear, (r(2, 5, 7), r(4, 7))),
        "matmul_bcast": (torch.matmul, (r(2, 1, 5, 7), r(3, 7, 4))),
        "matmul_1d2d": (torch.matmul, (r(7), r(7, 4))),
        "matmul_2d1d": (torch.matmul, (r(5, 7), r(7))),
        "matmul_3d2d": (torch.matmul, (r(3, 5, 7), r(7, 4))),
        "matmul_1d1d": (torch.matmul, (r(7), r(7, seed=1))),
    }[case]
    check(f, *args, **MM_TOL)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_matmul_low_precision(dtype):
    check(torch.matmul, r(3, 8, 16, dtype=dtype), r(16, 4, dtype=dtype), rtol=2e-2, atol=5e-2)


def test_matmul_int():
    check(torch.mm, r(4, 5, dtype=torch.int64), r(5, 3, dtype=torch.int64), grad=False)


# ---- reductions -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [{}, dict(dim=1), dict(dim=(0, 2)), dict(dim=-1, keepdim=True), dict(dim=(1,), keepdim=True),
                                dict(dim=0, dtype=torch.float64)])
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_sum_mean(op, kw):
    check(lambda x: getattr(torch, op)(x, **kw), r(3, 4, 5), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.uint8, torch.int8])
def test_sum_int(dtype):
    x = r(3, 4, 5, dtype=dtype, lo=0 if dtype == torch.uint8 else None)
    check(lambda x: (x.sum(), x.sum(1), x.sum(dim=(0, 2), keepdim=True), x.sum(dtype=torch.float32),
                     x.sum(0, dtype=torch.int32)), x, grad=False)
    check(lambda x: x.mean(dtype=torch.float32), x, grad=False)
    check(lambda x: x.float().mean(0), x, grad=False)


def test_sum_low_precision():
    x = r(8, 64, dtype=torch.bfloat16)
    check(lambda x: (x.sum(1), x.mean(), x.sum(0, dtype=torch.float32)), x, rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_max_min(dtype):
    x = r(4, 6, 5, dtype=dtype) if dtype.is_floating_point else r(4, 6, 5, dtype=dtype, lo=-100, hi=100)
    g = dtype.is_floating_point
    check(lambda x: (x.max(), x.min()), x, grad=g)
    check(lambda x: (torch.max(x, 1), torch.min(x, -1, keepdim=True)), x, grad=g)
    check(lambda x: (x.amax(), x.amax(1), x.amax((0, 2), keepdim=True), x.amin(-1)), x, grad=g)
    check(lambda x: (x.argmax(), x.argmax(1), x.argmin(-1, keepdim=True), x.argmin()), x, grad=False)


def test_max_ties_indices():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, 2.0]])
    out = check(lambda x: (x.max(1), x.min(1), x.argmax(1), x.argmin(1)), x, grad=False)
    assert out[1].cpu().tolist() == [1, 0]


def test_extreme_ties_grad():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, 2.0], [5.0, 5.0, 5.0, 5.0]])
    check(lambda x: x.amax(1), x)
    check(lambda x: x.amin(0), x)
    check(lambda x: x.max(), x)
    check(lambda x: x.min(), x)
    check(lambda x: x.max(1).values, x)
    check(torch.maximum, x, torch.tensor([[1.0, 0.0, 3.0, 0.0], [2.0, 3.0, -2.0, 2.0], [5.0, 4.0, 6.0, 5.0]]))
    check(lambda x: x.clamp(min=2.0, max=3.0), x)


def test_max_bool_and_any_all():
    x = r(4, 5, dtype=torch.bool)
    check(lambda x: (x.max(), x.any(1), x.all(0), x.any(), x.all()), x, grad=False)


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("kw", [{}, dict(dim=1), dict(dim=(0, 2), keepdim=True), dict(dim=-1, correction=0),
                                dict(unbiased=False), dict(dim=0, correction=2)])
def test_var_std(op, kw):
    check(lambda x: getattr(torch, op)(x, **kw), r(4, 5, 6) * 3 + 1, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw", [{}, dict(p=1), dict(p=3, dim=1), dict(p=float("inf"), dim=0),
                                dict(p=2, dim=(0, 1), keepdim=True), dict(p=-float("inf"))])
def test_norm(kw):
    x = r(4, 5) * 2
    check(lambda x: torch.norm(x, **kw), x, rtol=1e-5, atol=1e-5)
    if "dim" in kw:
        check(lambda x: torch.linalg.vector_norm(x, ord=kw["p"], dim=kw["dim"], keepdim=kw.get("keepdim", False)),
              x, rtol=1e-5, atol=1e-5)


def test_norm_zero_grad():
    check(lambda x: torch.norm(x), torch.zeros(3, 4))
    check(lambda x: torch.linalg.vector_norm(x, dim=1), torch.tensor([[0.0, 0.0], [3.0, 4.0]]))


# ---- nn ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax(op, dim):
    x = r(3, 4, 5) * 4
    check(lambda x: getattr(F, op)(x, dim=dim), x)
    check(lambda x: getattr(torch, op)(x, dim, dtype=torch.float64), x, rtol=1e-6, atol=1e-6)


def test_softmax_extreme_and_low_precision():
    x = torch.tensor([[1000.0, 0.0, -1000.0], [-float("inf"), 1.0, 2.0]])
    check(lambda x: (F.softmax(x, 1), F.log_softmax(x, 1)), x, grad=False)
    check(lambda x: F.softmax(x, -1), r(4, 33, dtype=torch.bfloat16) * 3)
    check(lambda x: F.log_softmax(x, -1), r(4, 33, dtype=torch.float16) * 3, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("case", ["affine", "no_affine", "weight_only", "2d_shape", "bf16"])
def test_layer_norm(case):
    x = r(3, 5, 8) * 2 + 1
    if case == "affine":
        check(lambda x, w, b: F.layer_norm(x, (8,), w, b), x, r(8, seed=1), r(8, seed=2), rtol=1e-4, atol=1e-4)
    elif case == "no_affine":
        check(lambda x: F.layer_norm(x, (8,)), x, rtol=1e-4, atol=1e-4)
    elif case == "weight_only":
        check(lambda x, w: F.layer_norm(x, (8,), w, eps=1e-3), x, r(8, seed=1), rtol=1e-4, atol=1e-4)
    elif case == "2d_shape":
        check(lambda x, w, b: F.layer_norm(x, (5, 8), w, b), x, r(5, 8, seed=1), r(5, 8, seed=2), rtol=1e-4, atol=1e-4)
    else:
        check(lambda x, w, b: F.layer_norm(x, (8,), w, b), x.bfloat16(), r(8, seed=1).bfloat16(),
              r(8, seed=2).bfloat16(), rtol=3e-2, atol=5e-2)


def test_layer_norm_module():
    torch.manual_seed(0)
    m = torch.nn.LayerNorm(6)
    with torch.no_grad():
        m.weight.normal_()
        m.bias.normal_()
    x = r(4, 6)
    check(lambda x, w, b: F.layer_norm(x, (6,), w, b, m.eps), x, m.weight, m.bias, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("padding_idx", [None, 0, 3, -1])
def test_embedding(padding_idx):
    idx = torch.tensor([[0, 3, 1, 3], [4, 0, 2, 3]])
    check(lambda w, i: F.embedding(i, w, padding_idx=padding_idx), r(5, 6), idx)


def test_embedding_module_padding_zero_grad():
    emb = torch.nn.Embedding(6, 4, padding_idx=2).to(DEV)
    out = emb(torch.tensor([2, 2, 1], device=DEV))
    out.sum().backward()
    g = emb.weight.grad.cpu()
    assert torch.equal(g[2], torch.zeros(4)) and torch.equal(g[1], torch.ones(4))
    assert torch.equal(out[0].detach().cpu(), torch.zeros(4))


@pytest.mark.parametrize("kw", [dict(), dict(reduction="sum"), dict(reduction="none"), dict(ignore_index=2),
                                dict(ignore_index=-100), dict(weight=True), dict(weight=True, reduction="sum"),
                                dict(weight=True, ignore_index=1), dict(label_smoothing=0.1),
                                dict(label_smoothing=0.2, weight=True), dict(label_smoothing=0.1, ignore_index=2),
                                dict(label_smoothing=0.1, reduction="none")])
def test_cross_entropy(kw):
    logits = r(8, 5) * 2
    target = torch.tensor([0, 2, 4, 1, 2, 3, -100, 2])
    if kw.get("ignore_index", -100) != -100:
        target = torch.where(target == -100, torch.tensor(kw["ignore_index"]), target)
    w = r(5, lo=0.5, hi=2.0) if kw.pop("weight", False) else None
    kw = dict(kw)
    # class weights are not differentiable: pass them as a closure, not an input
    check(lambda x, t: F.cross_entropy(x, t, weight=None if w is None else w.to(x.device), **kw), logits, target,
          rtol=1e-5, atol=1e-5)


def test_cross_entropy_prob_target():
    logits, probs = r(6, 4) * 2, F.softmax(r(6, 4, seed=3), 1)
    check(lambda x, p: F.cross_entropy(x, p), logits, probs, rtol=1e-5, atol=1e-5)
    check(lambda x, p: F.cross_entropy(x, p, reduction="none", label_smoothing=0.1), logits, probs,
          rtol=1e-5, atol=1e-5)


def test_cross_entropy_3d_and_nll():
    logits = r(2, 5, 3) * 2
    target = torch.tensor([[0, 4, 1], [2, 2, 3]])
    check(lambda x, t: F.cross_entropy(x, t), logits, target, rtol=1e-5, atol=1e-5)
    check(lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, reduction="sum"), r(6, 4), torch.tensor([0, 1, 2, 3, 0, 1]),
          rtol=1e-5, atol=1e-5)


def test_cross_entropy_hand_computed():
    x = torch.tensor([[0.0, 0.0]], device=DEV)
    assert math.isclose(F.cross_entropy(x, torch.tensor([1], device=DEV)).item(), math.log(2), rel_tol=1e-6)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_train(p):
    torch.manual_seed(0)
    x = (torch.rand(256, 256) + 0.5).to(DEV).requires_grad_()
    y = F.dropout(x, p=p, training=True)
    assert y.device.type == "tpu"
    yc, xc = y.detach().cpu(), x.detach().cpu()
    kept = yc != 0
    assert abs((~kept).float().mean().item() - p) < 0.01
    torch.testing.assert_close(yc[kept], xc[kept] / (1 - p))
    y.backward(torch.ones_like(y))
    g = x.grad.cpu()
    torch.testing.assert_close(g, kept.float() / (1 - p))
    torch.manual_seed(0)
    y2 = F.dropout(x.detach(), p=p, training=True).cpu()
    torch.testing.assert_close(y2, yc, rtol=0, atol=0)


def test_dropout_eval_and_edge():
    x = r(8, 9)
    check(lambda x: F.dropout(x, 0.5, training=False), x)
    m = torch.nn.Dropout(0.3).eval()
    check(m, x)
    check(lambda x: F.dropout(x, 0.0, training=True), x)
    check(lambda x: F.dropout(x, 1.0, training=True), x)


# ---- shape ops --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["cat0", "cat1", "cat_neg", "cat_mixed", "stack0", "stack_last", "cat_empty"])
def test_cat_stack(case):
    a, b, c = r(2, 3), r(2, 3, seed=1), r(4, 3, seed=2)
    if case == "cat0":
        check(lambda a, b, c: torch.cat([a, b, c]), a, b, c)
    elif case == "cat1":
        check(lambda a, b: torch.cat([a, b, a], 1), a, b)
    elif case == "cat_neg":
        check(lambda a, b: torch.cat((a.t(), b.t()), -1), a, b)
    elif case == "cat_mixed":
        check(lambda a, b: torch.cat([a, b]), a, r(2, 3, dtype=torch.int64), grad=False)
        check(lambda a, b: torch.cat([a, b]), a.bfloat16(), b, grad=False)
    elif case == "stack0":
        check(lambda a, b: torch.stack([a, b]), a, b)
    elif case == "stack_last":
        check(lambda a, b: torch.stack([a, b, a], dim=-1), a, b)
    else:
        check(lambda a, e: torch.cat([a, e]), a, torch.empty(0, 3))


@pytest.mark.parametrize("case", ["reshape", "view", "permute", "transpose", "t_contig", "flatten", "unsqueeze",
                                  "expand", "chain", "view_of_view", "narrow", "split", "chunk", "unbind", "squeeze"])
def test_views(case):
    x = r(2, 3, 4)
    f = {
        "reshape": lambda x: x.reshape(4, 6) * 2,
        "view": lambda x: x.view(6, 4) + 1,
        "permute": lambda x: x.permute(2, 0, 1) * 1,
        "transpose": lambda x: x.transpose(0, 2).contiguous(),
        "t_contig": lambda x: x.transpose(1, 2).contiguous().view(2, 12),
        "flatten": lambda x: x.flatten(1).exp(),
        "unsqueeze": lambda x: x.unsqueeze(1).unsqueeze(-1).sum(0),
        "expand": lambda x: x[:, :1].expand(2, 5, 4) * 3,
        "chain": lambda x: x.permute(1, 0, 2).reshape(3, 8)[:, 1::2].t(),
        "view_of_view": lambda x: x[1].view(12)[3:9].view(2, 3),
        "narrow": lambda x: x.narrow(2, 1, 2) * x.narrow(2, 0, 2),
        "split": lambda x: x.split([1, 3], dim=2),
        "chunk": lambda x: x.chunk(3, 1),
        "unbind": lambda x: x.unbind(0),
        "squeeze": lambda x: x[:, :1].squeeze(1) + x.unsqueeze(0).squeeze()[:, 0],
    }[case]
    check(f, x)


def test_view_aliasing_writes():
    xc = r(4, 6)
    xt = xc.to(DEV)
    for x in (xc, xt):
        v = x.view(6, 4)
        v[1] = 7.0
        x.t()[2].mul_(0)
        x[:, 3:5].add_(1)
    torch.testing.assert_close(xt.cpu(), xc)


# ---- indexing ---------------------------------------------------------------------------------------------

IDX = torch.tensor([2, 0, 3, 3])
IDX_NEG = torch.tensor([-1, 0, -3])


@pytest.mark.parametrize("case", ["slice", "step", "neg_slice", "int", "idx", "idx_dim1", "idx2", "idx_neg",
                                  "idx_2d", "mask", "mask_row", "ellipsis", "none", "idx_slice_idx", "scalar_idx"])
def test_getitem(case):
    x = r(5, 4, 3)
    f = {
        "slice": lambda x: x[1:4],
        "step": lambda x: x[::2, 1:, ::2],
        "neg_slice": lambda x: x[-3:-1, :-1],
        "int": lambda x: x[2, -1],
        "idx": lambda x: x[IDX.to(x.device)],
        "idx_dim1": lambda x: x[:, IDX[:3].clamp(max=3).to(x.device)],
        "idx2": lambda x: x[IDX.to(x.device), torch.tensor([0, 1, 3, 2], device=x.device)],
        "idx_neg": lambda x: x[IDX_NEG.to(x.device)],
        "idx_2d": lambda x: x[torch.tensor([[0, 1], [4, 2]], device=x.device)],
        "mask": lambda x: x[x > 0.3],
        "mask_row": lambda x: x[torch.tensor([True, False, True, True, False], device=x.device)],
        "ellipsis": lambda x: x[..., 1],
        "none": lambda x: x[None, 1:3, None],
        "idx_slice_idx": lambda x: x[IDX.to(x.device), 1:3, torch.tensor([0, 2, 1, 0], device=x.device)],
        "scalar_idx": lambda x: x[torch.tensor(1, device=x.device)],
    }[case]
    check(f, x)


@pytest.mark.parametrize("case", ["idx_scalar", "idx_tensor", "idx_bcast", "mask_zero", "mask_tensor", "slice_set",
                                  "idx2_set", "accumulate", "int_dtype", "neg_idx"])
def test_setitem(case):
    def f(x, v):
        x = x.clone()
        d = x.device
        if case == "idx_scalar":
            x[torch.tensor([0, 3], device=d)] = 2.5
        elif case == "idx_tensor":
            x[torch.tensor([1, 4], device=d)] = v
        elif case == "idx_bcast":
            x[torch.tensor([1, 4], device=d)] = v[0]
        elif case == "mask_zero":
            x[x > 0.2] = 0
        elif case == "mask_tensor":
            x[x[:, 0] > 0] = v[0]
        elif case == "slice_set":
            x[1:3, ::2] = v[:, :2]
        elif case == "idx2_set":
            x[torch.tensor([0, 2, 4], device=d), torch.tensor([1, 1, 0], device=d)] = v[0, :3]
        elif case == "accumulate":
            x.index_put_((torch.tensor([1, 1], device=d),), v * 1, accumulate=True)
        elif case == "neg_idx":
            x[torch.tensor([-1, -5], device=d)] = v
        else:
            x = (x * 10).long()
            x[torch.tensor([0, 2], device=d)] = 9
        return x
    check(f, r(5, 3), r(2, 3, seed=1), grad=case != "int_dtype")


def test_masked_fill():
    x = r(4, 5)
    m = r(4, 5, seed=2) > 0
    check(lambda x, m: x.masked_fill(m, -1.5), x, m)
    check(lambda x, m: x.masked_fill(m[0], float("-inf")), x, m)
    check(lambda x, m, v: x.masked_fill(m, v), x, m, torch.tensor(3.0))
    check(lambda x, m: x.masked_fill(m, 7), r(4, 5, dtype=torch.int64), m, grad=False)
    check(lambda x, m: x.clone().masked_fill_(m, 0.0), x, m)


@pytest.mark.parametrize("diag", [0, 1, -1, 3, -4])
@pytest.mark.parametrize("op", ["triu", "tril"])
def test_triu_tril(op, diag):
    check(lambda x: getattr(torch, op)(x, diag), r(4, 6))
    check(lambda x: getattr(torch, op)(x, diag), r(2, 5, 3))
    check(lambda x: getattr(x.clone(), op + "_")(diag), r(4, 4, dtype=torch.int64), grad=False)


def test_gather_scatter():
    x = r(4, 5)
    i1 = torch.tensor([[0, 1, 1], [3, 0, 2], [4, 4, 0], [2, 1, 3]])
    check(lambda x, i: torch.gather(x, 1, i), x, i1)
    i0 = torch.tensor([[0, 1, 3, 2, 0], [3, 2, 1, 0, 1]])
    check(lambda x, i: torch.gather(x, 0, i), x, i0)
    check(lambda x, i: torch.gather(x, -1, i), x, i1)
    # scatter without duplicate targets, so the result is deterministic
    iu = torch.tensor([[0, 1, 2], [3, 4, 0], [1, 2, 3], [4, 0, 1]])
    check(lambda x, i, s: torch.scatter(x, 1, i, s), x, iu, r(4, 3, seed=1))
    check(lambda x, i: torch.scatter(x, 1, i, 2.5), x, iu)
    check(lambda x, i, s: x.clone().scatter_(1, i, s), x, iu, r(4, 3, seed=1))
    check(lambda x, i, s: torch.scatter_add(x, 1, i, s), x, i1, r(4, 3, seed=1))
    check(lambda x, i, s: torch.scatter_add(x, 0, i, s), x, i0, r(2, 5, seed=3))
    check(lambda x, i, s: x.clone().scatter_add_(0, i, s), x, i0, r(2, 5, seed=3))
    check(lambda x, i, s: torch.scatter_add(x, 1, i, s), r(4, 5, dtype=torch.int64), i1,
          r(4, 3, dtype=torch.int64), grad=False)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dim):
    x = r(4, 5, 3)
    idx = torch.tensor([2, 0, 2, 1])
    check(lambda x, i: torch.index_select(x, dim, i), x, idx)
    check(lambda x, i: x.index_select(dim, i), r(4, 5, 3, dtype=torch.int32), idx, grad=False)


def test_index_add_masked_select():
    x, src, idx = r(5, 3), r(4, 3, seed=1), torch.tensor([0, 2, 2, 4])
    check(lambda x, s, i: x.index_add(0, i, s, alpha=-1.5), x, src, idx)
    check(lambda x, s: x.clone().index_add_(1, torch.tensor([2, 0, 2, 1], device=x.device), s), x, r(5, 4, seed=2))
    check(lambda x, m: torch.masked_select(x, m), x, r(3, seed=4) > 0)
    check(lambda x, m, s: x.masked_scatter(m, s), x, r(5, 3, seed=5) > 0, r(16, seed=6))
    check(lambda x: (torch.isnan(x.log()), torch.sgn(x), torch.isnan(x.long())), x, grad=False)


def test_nll_loss_2d():
    x, t = r(2, 4, 3, 5), torch.tensor([[[0, 1, 3, 2, 1], [3, 3, 0, 1, 2], [1, 2, 0, 0, 3]]] * 2)
    w = r(4, lo=0.5, hi=2.0)
    for kw in (dict(), dict(reduction="none"), dict(reduction="sum", ignore_index=3), dict(weight=w),
               dict(weight=w, reduction="none", ignore_index=0)):
        check(lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, **{k: v.to(x.device) if k == "weight" else v
                                                                for k, v in kw.items()}), x, t, rtol=1e-5, atol=1e-5)


# ---- in-place and out= ------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["add_", "add_alpha_", "mul_", "mul_scalar_", "sub_", "div_", "clamp_", "clamp_t_",
                                  "addcmul_", "addcdiv_", "lerp_s_", "lerp_t_", "relu_", "neg_", "exp_",
                                  "add_bcast_", "add_view_", "pow_", "sqrt_", "mul_int_float_"])
def test_inplace(case):
    y = r(3, 4, seed=1)
    z = r(3, 4, seed=2, lo=0.5, hi=2.0)

    def f(x, y, z):
        x = x.clone()
        {
            "add_": lambda: x.add_(y), "add_alpha_": lambda: x.add_(y, alpha=-0.5), "mul_": lambda: x.mul_(y),
            "mul_scalar_": lambda: x.mul_(3), "sub_": lambda: x.sub_(y, alpha=2), "div_": lambda: x.div_(z),
            "clamp_": lambda: x.clamp_(-0.3, 0.4), "clamp_t_": lambda: x.clamp_(min=y, max=y + 0.5),
            "addcmul_": lambda: x.addcmul_(y, z, value=0.3), "addcdiv_": lambda: x.addcdiv_(y, z, value=-2),
            "lerp_s_": lambda: x.lerp_(y, 0.3), "lerp_t_": lambda: x.lerp_(y, z / 2),
            "relu_": lambda: x.relu_(), "neg_": lambda: x.neg_(), "exp_": lambda: x.exp_(),
            "add_bcast_": lambda: x.add_(y[0]), "add_view_": lambda: x[:, 1:3].add_(y[:, :2]),
            "pow_": lambda: x.pow_(2), "sqrt_": lambda: x.abs_().sqrt_(),
            "mul_int_float_": lambda: x.mul_(y),
        }[case]()
        return x
    check(f, r(3, 4), y, z)


def test_inplace_type_rules():
    i = torch.arange(6, device=DEV)
    with pytest.raises(RuntimeError):
        i.add_(torch.ones(6, device=DEV) * 0.5)
    with pytest.raises(RuntimeError):
        torch.ones(3, device=DEV).add_(torch.ones(2, 3, device=DEV))
    f = torch.ones(6, device=DEV)
    f.add_(i)  # float += int is fine
    assert f.cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    h = torch.ones(6, dtype=torch.bfloat16, device=DEV)
    h.mul_(torch.full((6,), 3.0, device=DEV))  # bf16 *= f32 stays bf16
    assert h.dtype == torch.bfloat16 and h.cpu().float().tolist() == [3.0] * 6


@pytest.mark.parametrize("case", ["add", "mul", "sub", "div", "clamp", "addcmul", "addcdiv", "lerp", "mm", "sum",
                                  "add_resize", "where", "pow", "exp"])
def test_out(case):
    a, b = r(3, 4), r(3, 4, seed=1, lo=0.5, hi=2.0)

    def f(a, b, out):
        {
            "add": lambda: torch.add(a, b, alpha=2, out=out), "mul": lambda: torch.mul(a, b, out=out),
            "sub": lambda: torch.sub(a, b, out=out), "div": lambda: torch.div(a, b, out=out),
            "clamp": lambda: torch.clamp(a, -0.5, 0.5, out=out),
            "addcmul": lambda: torch.addcmul(a, a, b, value=0.5, out=out),
            "addcdiv": lambda: torch.addcdiv(a, a, b, value=0.5, out=out),
            "lerp": lambda: torch.lerp(a, b, 0.25, out=out), "mm": lambda: torch.mm(a, b.t(), out=out),
            "sum": lambda: torch.sum(a, 1, out=out), "add_resize": lambda: torch.add(a, b, out=out),
            "where": lambda: torch.where(a > 0, a, b, out=out), "pow": lambda: torch.pow(b, 1.5, out=out),
            "exp": lambda: torch.exp(a, out=out),
        }[case]()
        return out
    shape = {"mm": (3, 3), "sum": (3,), "add_resize": (0,)}.get(case, (3, 4))
    check(f, a, b, torch.zeros(shape), grad=False)


def test_out_dtype_cast():
    out = torch.zeros(3, 4, dtype=torch.float64, device=DEV)
    a, b = r(3, 4), r(3, 4, seed=1)
    torch.add(a.to(DEV), b.to(DEV), out=out)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out.cpu(), (a + b).double())
    with pytest.raises(RuntimeError):
        torch.add(a.to(DEV), b.to(DEV), out=torch.zeros(3, 4, dtype=torch.int64, device=DEV))


# ---- optimizers -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("opt", ["adamw", "sgd"])
def test_optimizer_step(opt, foreach):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    dev = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    dev.load_state_dict(ref.state_dict())
    dev.to(DEV)

    def make(params):
        if opt == "adamw":
            return torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, foreach=foreach)
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=False, foreach=foreach)
    o_ref, o_dev = make(ref.parameters()), make(dev.parameters())
    x, y = r(8, 6), torch.tensor([0, 1, 2, 0, 1, 2, 2, 1])
    for _ in range(3):
        for m, o, xx, yy in ((ref, o_ref, x, y), (dev, o_dev, x.to(DEV), y.to(DEV))):
            o.zero_grad()
            F.cross_entropy(m(xx), yy).backward()
            o.step()
    for (n, p_ref), p_dev in zip(ref.named_parameters(), dev.parameters()):
        assert p_dev.device.type == "tpu"
        torch.testing.assert_close(p_dev.detach().cpu(), p_ref.detach(), rtol=1e-5, atol=1e-5, msg=n)
    assert not torch.equal(ref[0].weight.detach(), dev[0].weight.detach().cpu() * 0)  # params moved


# ---- fallback accounting ----------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:The operator .* has no tpu lowering")
def test_fallback_is_counted():
    """An op without a lowering runs on CPU, matches CPU and is recorded."""
    x = r(4, 5)
    name = None
    def spd(x):
        return x @ x.mT + x.new_ones(4).diag()

    for cand, f in (("aten::linalg_eig", lambda x: torch.linalg.eig(spd(x))[1]),
                    ("aten::_linalg_eigvals", lambda x: torch.linalg.eigvals(spd(x)))):
        torchtpu.debug.reset_metrics()
        out = f(x.to(DEV))
        fb = torchtpu.debug.metrics()["cpu_fallbacks"]
        if fb:
            name = cand
            torch.testing.assert_close(out.cpu(), f(x))
            assert any(cand.split("::")[1] in k for k in fb), fb
            break
    assert name is not None, "expected linalg.eig or eigvals to have no lowering"
    torchtpu.debug.reset_metrics()
