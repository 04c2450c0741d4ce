"""Op correctness on the tpu device against CPU PyTorch: factories, copies,
elementwise, matmul and reductions, forward results and autograd input
gradients. Every test also asserts that no op fell back to the CPU
(torchtpu.testing.ops has the checks; test_ops_nn.py the rest)."""
import pytest
import torch
import torch.nn.functional as F

from torchtpu.testing.ops import DEV, check, check_raises, r, _close

pytestmark = pytest.mark.usefixtures("each_mode", "no_cpu_fallback")

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
