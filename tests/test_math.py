"""Special and transcendental math ops on the device against the CPU, in every
mode: int/bool promotion, 16-bit floats, 0-d, empty, non-contiguous and
NaN/Inf inputs, out= and in-place forms, and no CPU fallback."""
import math

import pytest
import torch

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

TOL = {torch.float32: 2e-6, torch.bfloat16: 1.6e-2, torch.float16: 1e-3, torch.float64: 1e-12}


def same(fn, *args, rtol=None, atol=1e-5):
    expected = fn(*args)
    got = fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])
    if isinstance(expected, tuple):
        for g, e in zip(got, expected):
            check(g.cpu(), e, rtol, atol)
    else:
        check(got.cpu(), expected, rtol, atol)


def check(got, expected, rtol, atol):
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got, expected)
    rtol = TOL.get(expected.dtype, 0) if rtol is None else rtol
    atol = atol if expected.is_floating_point() else 0
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=rtol, atol=atol)


def assert_native():
    torchtpu.synchronize()
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


G = torch.Generator().manual_seed(0)
X = torch.empty(6, 5).uniform_(-9, 9, generator=G)
UNIT = torch.empty(6, 5).uniform_(-1, 1, generator=G)
PROB = torch.empty(6, 5).uniform_(0, 1, generator=G)
SPECIAL = torch.tensor([0.0, -0.0, 1.0, -1.0, 0.5, float("nan"), float("inf"), -float("inf"), 1e-30, 1e30])
INTS = torch.tensor([-3, -1, 0, 1, 2, 7])
BOOLS = torch.tensor([True, False, True])

UNARY = {
    "acos": (torch.acos, UNIT), "asin": (torch.asin, UNIT), "atan": (torch.atan, X),
    "acosh": (torch.acosh, X.abs() + 1), "asinh": (torch.asinh, X), "atanh": (torch.atanh, UNIT),
    "cosh": (torch.cosh, X), "sinh": (torch.sinh, X), "tan": (torch.tan, X), "log10": (torch.log10, X.abs()),
    "exp2": (torch.exp2, X), "erfc": (torch.erfc, X), "erfinv": (torch.erfinv, UNIT), "frac": (torch.frac, X),
    "sinc": (torch.sinc, X), "lgamma": (torch.lgamma, X), "digamma": (torch.digamma, X), "i0": (torch.i0, X),
    "i0e": (torch.special.i0e, X), "i1": (torch.special.i1, X), "i1e": (torch.special.i1e, X),
    "ndtri": (torch.special.ndtri, PROB), "log_ndtr": (torch.special.log_ndtr, X * 3),
    "entr": (torch.special.entr, X), "angle": (torch.angle, X), "signbit": (torch.signbit, X),
    "logit": (torch.logit, PROB), "logit_eps": (lambda t: torch.logit(t, eps=0.2), PROB),
    "nan_to_num": (torch.nan_to_num, SPECIAL), "nan_to_num_args": (
        lambda t: torch.nan_to_num(t, nan=1.5, posinf=2.0, neginf=-3.0), SPECIAL),
    "round_3": (lambda t: torch.round(t, decimals=3), X), "round_-1": (lambda t: torch.round(t, decimals=-1), X * 10),
    "trigamma": (lambda t: torch.polygamma(1, t), X), "polygamma3": (lambda t: torch.polygamma(3, t), X),
    "conj_physical": (lambda t: torch.conj_physical(t, out=torch.empty_like(t)), X),
}
FLOAT32_ONLY = {"ndtri", "log_ndtr", "conj_physical"}
for _name in ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
              "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
              "spherical_bessel_j0", "airy_ai"):
    UNARY[_name] = (getattr(torch.special, _name), X)
    FLOAT32_ONLY.add(_name)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float32_and_edges(name):
    fn, x = UNARY[name]
    torchtpu.debug.reset_metrics()
    rtol = 1e-5 if name in ("polygamma3", "trigamma", "digamma", "lgamma") else None
    same(fn, x, rtol=rtol)
    same(fn, x.t() if x.dim() == 2 else x[::2], rtol=rtol)  # non-contiguous
    same(fn, x.flatten()[0].clone(), rtol=rtol)  # 0-d
    same(fn, x[:0], rtol=rtol)  # empty
    if name not in ("polygamma3",):
        same(fn, SPECIAL, rtol=rtol)
    assert_native()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_unary_16bit_compute_in_float32(dtype):
    torchtpu.debug.reset_metrics()
    for name in sorted(set(UNARY) - FLOAT32_ONLY):
        fn, x = UNARY[name]
        same(fn, x.to(dtype), rtol=2 * TOL[dtype], atol=1e-3)
    assert_native()


def test_unary_integer_and_bool_inputs():
    torchtpu.debug.reset_metrics()
    for name in ("acos", "exp2", "sinc", "lgamma", "digamma", "i0", "entr", "angle", "signbit", "logit", "erfinv",
                 "nan_to_num", "trigamma", "bessel_j0"):
        fn, _ = UNARY[name]
        same(fn, INTS)
        same(fn, BOOLS)
    assert_native()


def test_float_only_ops_refuse_integers_as_the_cpu():
    for fn in (torch.frac, lambda t: torch.round(t, decimals=2), lambda t: torch.hypot(t, t)):
        with pytest.raises(NotImplementedError):
            fn(INTS)
        with pytest.raises(NotImplementedError):
            fn(INTS.to("tpu"))
    for fn in (torch.special.ndtri, torch.special.bessel_j0, torch.special.airy_ai):
        with pytest.raises(NotImplementedError):
            fn(PROB.to("tpu", torch.bfloat16))


def test_inplace_and_out_forms():
    torchtpu.debug.reset_metrics()
    for name in ("acos", "tan", "erfinv", "digamma", "lgamma", "sinc", "frac", "logit", "exp2"):
        x = UNARY[name][1]
        expected = getattr(x.clone(), name + "_")()
        got = getattr(x.to("tpu"), name + "_")()
        check(got.cpu(), expected, 1e-5, 1e-5)
        out = torch.empty(1, device="tpu")
        getattr(torch, name)(x.to("tpu"), out=out)
        check(out.cpu(), expected, 1e-5, 1e-5)
    with pytest.raises(RuntimeError, match="can't be cast"):
        INTS.to("tpu").acos_()
    m, e = torch.frexp(SPECIAL.to("tpu"))
    em, ee = torch.frexp(SPECIAL)
    check(m.cpu(), em, 0, 0)
    check(e.cpu(), ee, 0, 0)
    assert_native()


def test_frexp_every_float_dtype_and_subnormals():
    x = torch.tensor([3.0, -0.375, 1e-40, -2e-45, 6e4, 1.0, 0.0])
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        same(torch.frexp, x.to(dtype), rtol=0, atol=0)


BINARY = {
    "xlogy": torch.xlogy, "xlog1py": torch.special.xlog1py, "hypot": torch.hypot, "nextafter": torch.nextafter,
    "copysign": torch.copysign, "fmax": torch.fmax, "fmin": torch.fmin, "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2, "heaviside": torch.heaviside, "zeta": torch.special.zeta,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ops(name):
    fn = BINARY[name]
    torchtpu.debug.reset_metrics()
    a = torch.cat([X.flatten(), SPECIAL, torch.zeros(4)])
    b = torch.cat([X.flip(0).flatten(), SPECIAL.flip(0), torch.tensor([0.0, -1.0, float("nan"), 2.0])])
    if name == "zeta":
        a, b = a.abs() + 1, b
    same(fn, a, b, rtol=1e-5)
    same(fn, a[:6].view(2, 3), b[:3])  # broadcast
    same(fn, a[:0], b[:0])
    if name not in ("zeta", "heaviside"):
        same(fn, a.bfloat16(), b.bfloat16())
    if name in ("xlogy", "copysign", "fmax", "fmin", "heaviside"):
        same(fn, INTS, INTS.flip(0))
    if name in ("xlogy", "xlog1py", "copysign", "fmax", "zeta"):
        same(fn, a[:5], torch.tensor(2.5))  # CPU scalar operand
    assert_native()


def test_polygamma_orders_and_mvlgamma():
    torchtpu.debug.reset_metrics()
    for n in range(6):
        same(lambda t: torch.polygamma(n, t), X, rtol=1e-5)
    same(lambda t: torch.mvlgamma(t, 3), X.abs() + 1.5, rtol=1e-5)
    same(lambda t: torch.mvlgamma(t, 1, out=torch.empty_like(t)), X.abs() + 1, rtol=1e-5)
    assert_native()


def test_logit_backward_and_clamp_tensor_out():
    torchtpu.debug.reset_metrics()
    for eps in (None, 0.25):
        g = torch.randn(6, 5, generator=G)
        expected = torch.ops.aten.logit_backward(g, PROB, eps)
        got = torch.ops.aten.logit_backward(g.to("tpu"), PROB.to("tpu"), eps)
        check(got.cpu(), expected, 1e-5, 1e-5)
    lo, hi = -X.abs(), X.abs()
    for fn in (lambda t, l, h: torch.clamp(t, l, h, out=torch.empty_like(t)),
               lambda t, l, h: torch.clamp_min(t, l, out=torch.empty_like(t)),
               lambda t, l, h: torch.clamp_max(t, h, out=torch.empty_like(t))):
        same(fn, X.flip(0), lo, hi)
    assert_native()


def test_zeta_and_polygamma_far_below_zero():
    """Integer x with q far below zero sums about -q terms (one device loop), in
    float64 for float32 inputs as the CPU does (the sum cancels heavily)."""
    torchtpu.debug.reset_metrics()
    q = torch.tensor([-17.5, -20.25, -40.5, -100.5, -1000.5, -16.25, 2.0, 5.0, 1e6, 1e9, -3.0, 0.0,
                      float("inf"), -float("inf"), float("nan")])
    for x in (2.0, 3.0, 4.0, 4.5):
        same(torch.special.zeta, torch.full_like(q, x), q, rtol=1e-6, atol=0)
        same(torch.special.zeta, torch.full_like(q, x).double(), q.double(), rtol=1e-12, atol=0)
    near = torch.tensor([-40.3, -17.7, -16.5, -250.25, -1000.9, 3.5])
    for n in (2, 3, 4):
        same(lambda t: torch.polygamma(n, t), near, rtol=1e-6, atol=0)
        same(lambda t: torch.polygamma(n, t), near.double(), rtol=1e-12, atol=0)
    assert_native()


def test_digamma_next_to_its_poles():
    """The reflection's tangent takes the distance to the nearest integer,
    so values next to the poles keep their digits (PyTorch's reference inputs
    reach -6.99997)."""
    torchtpu.debug.reset_metrics()
    offsets = torch.tensor([1e-5, 3e-5, -3e-5, -1e-5, 1e-3, -1e-3, 0.25, -0.5])
    poles = -torch.arange(0, 60, dtype=torch.float64)[:, None]
    for dt, rtol in ((torch.float32, 1e-5), (torch.float64, 1e-10)):
        x = (poles + offsets.double()).flatten().to(dt)
        same(torch.digamma, x, rtol=rtol, atol=0)
        same(lambda t: torch.polygamma(1, t), x, rtol=rtol, atol=0)
    same(torch.digamma, torch.tensor([-6.99997, -1.0, -2.0, 0.0, -0.0]), rtol=1e-5, atol=0)
    assert_native()


def test_incomplete_gamma_at_huge_a():
    """a around x far beyond what the series and the continued fraction
    reach (Temme's expansion): float64 against the CPU's float64, and float32
    against the float64 result (the CPU's float32 kernel loses digits here)."""
    torchtpu.debug.reset_metrics()
    a = torch.tensor([1e4, 2e4, 1e5, 3e5, 1e6, 1e8, 1e10, 1e12, 1e20, 1e30], dtype=torch.float64)
    ratio = torch.tensor([0.9, 0.999, 1 - 1e-6, 1.0, 1 + 1e-6, 1.001, 1.1, 0.0, 1e-300, 10.0], dtype=torch.float64)
    aa, xx = torch.meshgrid(a, ratio, indexing="ij")
    xx = aa * xx
    for fn in (torch.igamma, torch.igammac):
        same(fn, aa, xx, rtol=1e-9, atol=1e-12)
        a32, x32 = aa.float(), xx.float()
        reference = fn(a32.double(), x32.double()).float()  # the float32 arguments, computed in float64
        got = fn(a32.to("tpu"), x32.to("tpu")).cpu()
        torch.testing.assert_close(got, reference, rtol=1e-5, atol=1e-6, equal_nan=True)
    assert_native()


def test_airy_ai_far_out_on_the_negative_axis():
    """The phase 2/3 (-x)^1.5 is rounded as the CPU rounds it, so the
    oscillating tail matches (PyTorch's reference inputs reach -13437.7)."""
    torchtpu.debug.reset_metrics()
    x = torch.cat([-torch.logspace(0, 5, 4000), torch.tensor([-13437.7, -2.09, -2.1, 2.09, 8.4, 100.0, 104.0])])
    same(torch.special.airy_ai, x, rtol=1e-3, atol=1e-3)
    # float64: one ulp of a phase near 2e7 is 4e-9 radians
    same(torch.special.airy_ai, x.double(), rtol=1e-6, atol=1e-9)
    assert_native()


POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
               "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
               "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_orthogonal_polynomials(name):
    """Every degree path of the CPU kernel: negative, 0, 1, the recurrence, the closed forms past degree 4-8,
    the interval ends, non-integer and huge degrees (the Hermite NaN past 128), broadcasting, scalars and
    float64; the recurrence runs on the device as one loop."""
    torchtpu.debug.reset_metrics()
    fn = getattr(torch.special, name)
    x = torch.cat([torch.linspace(-1.5, 1.5, 25), torch.tensor([-1.0, 0.0, 1.0, 0.5, 1e-3, 3.0, -7.0])])
    n = torch.tensor([-3.0, -0.5, 0.0, 0.9, 1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 9.0, 12.0, 40.0, 130.0, 1e30])
    same(fn, x[:, None], n[None, :], rtol=1e-4, atol=1e-4)
    same(fn, x.double()[:, None], n.double()[None, :], rtol=1e-9, atol=1e-9)
    same(lambda t: fn(t, 4), x, rtol=1e-5)  # a Python degree
    same(lambda t: fn(0.25, t), n[:12], rtol=1e-5)  # a Python x
    same(fn, torch.tensor(0.3), torch.tensor(5.0))  # 0-d
    same(fn, x[::2][:, None].expand(-1, 3).t(), torch.tensor([2.0, 7.0, 11.0])[:, None], rtol=1e-4)  # strided
    same(fn, torch.empty(0, 3), torch.tensor([2.0, 3.0, 4.0]))
    same(fn, torch.arange(-2, 3), torch.arange(5))  # integers promote
    same(lambda a, b: fn(a, b, out=torch.empty(7, device=a.device)), x[:7], n[:7], rtol=1e-4, atol=1e-4)
    assert_native()
    with pytest.raises(NotImplementedError):
        fn(x.bfloat16().to("tpu"), n[:1].bfloat16().to("tpu"))


@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac])
def test_incomplete_gamma(fn):
    # Every regime (series, continued fraction, a ~ x large) and every
    # boundary (a or x zero, negative, infinite, NaN), float32, float64 and
    # bfloat16, integers refused, broadcasting, out= and in-place forms.
    torchtpu.debug.reset_metrics()
    vals = torch.tensor([0., 1e-3, 0.1, 0.5, 1, 1.5, 2, 5, 10, 20, 50, 100, 150, 250, 1000, 1e4,
                         float("inf"), float("nan"), -1.])
    a, x = torch.meshgrid(vals, vals, indexing="ij")
    same(fn, a, x, rtol=1e-5, atol=1e-6)
    same(fn, a.double(), x.double(), rtol=1e-8, atol=1e-9)
    same(fn, a.bfloat16(), x.bfloat16())
    same(fn, vals[:6].view(2, 3), vals[3:6])  # broadcast
    same(fn, torch.tensor(2.5), torch.tensor(1.5), rtol=1e-5, atol=1e-6)  # 0-d
    same(fn, vals[:0], vals[:0])  # empty
    same(fn, a.t()[::2], x.t()[::2], rtol=1e-5, atol=1e-6)  # non-contiguous
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):  # as the CPU: no promotion
        fn(torch.arange(1, 7, device="tpu"), torch.arange(6, device="tpu"))
    gen = torch.Generator().manual_seed(5)
    a, x = torch.rand(1000, generator=gen) * 30, torch.rand(1000, generator=gen) * 30
    same(fn, a, x, rtol=1e-5, atol=1e-6)
    same(lambda p, q: fn(p, q, out=torch.empty_like(p)), a[:8], x[:8], rtol=1e-5, atol=1e-6)
    same(lambda p, q: p.clone().igamma_(q) if fn is torch.igamma else p.clone().igammac_(q), a[:8], x[:8],
         rtol=1e-5, atol=1e-6)
    assert_native()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_pow_small_integer_exponents_are_the_cpu_products(dtype):
    # PyTorch's CPU kernel computes x**2, x**3 and x**-2 as products rounded to
    # the dtype after each one (bfloat16 too), not with pow: the device gives
    # the same bits, for int and float exponents, out= and in place.
    torch.manual_seed(0)
    x = torch.randn(257) * 30
    x[:6] = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-30])
    x = x.to(dtype) if dtype.is_floating_point else (x.nan_to_num(0, 0, 0) * 3).to(dtype)
    xt = x[::2]  # a strided input
    for e in (2, 3, 2.0, 3.0, -2.0) + ((-2,) if dtype.is_floating_point else ()):
        want = torch.pow(xt, e)
        got = torch.pow(xt.to("tpu"), e).cpu()
        assert got.dtype == want.dtype, e
        assert torch.equal(got.nan_to_num(1, 2, 3), want.nan_to_num(1, 2, 3)), (dtype, e)
        if want.dtype == x.dtype:
            y = x.to("tpu")
            y.pow_(e)
            assert torch.equal(y.cpu().nan_to_num(1, 2, 3), x.pow(e).nan_to_num(1, 2, 3)), (dtype, e)
    out = torch.empty(129, dtype=torch.float64, device="tpu")
    torch.pow(xt.to("tpu"), 3.0, out=out)
    want = torch.pow(xt, 3.0, out=torch.empty(129, dtype=torch.float64))
    assert torch.equal(out.cpu().nan_to_num(1, 2, 3), want.nan_to_num(1, 2, 3))
