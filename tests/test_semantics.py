"""PyTorch's semantics at the edges, in every mode, against the CPU: 0-d
reductions, NaN propagation, 64-bit integer scalars, arguments PyTorch
refuses, and device-side checks (indices, targets, integer division by zero)
raised at the op (Debug) or at the next sync point (Strict, Fused)."""
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

DEV = torch.device("tpu")
NAN = float("nan")


def same(fn, *args):
    """fn on the device equals fn on the CPU (values, dtype, shape; NaN == NaN)."""
    expected = fn(*args)
    got = fn(*[a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args])
    exp = expected if isinstance(expected, (tuple, list)) else (expected,)
    out = got if isinstance(got, (tuple, list)) else (got,)
    for e, g in zip(exp, out):
        g = g.cpu()
        assert g.dtype == e.dtype and g.shape == e.shape, (g, e)
        torch.testing.assert_close(g, e, equal_nan=True, rtol=1e-5, atol=1e-6)


def raises_like_cpu(fn, *args, match=None):
    """The CPU raises; the device raises the same exception type, at the op or
    at the next sync point."""
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(type(cpu.value), match=match):
        r = fn(*[a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args])
        if isinstance(r, torch.Tensor):
            r.cpu()
        torchtpu.synchronize()


def exact(fn, *args):
    """fn on the device equals fn on the CPU bit for bit (16-bit results)."""
    expected = fn(*args)
    got = fn(*[a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args]).cpu()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)


HALF_SCALAR_OPS = {
    "mul_scalar": lambda x, y, z: x * 0.7,
    "rmul_scalar": lambda x, y, z: 0.3 * x,
    "div_scalar": lambda x, y, z: x / 0.3,
    "div_0d_float32": lambda x, y, z: x / torch.tensor(0.7).to(x.device),
    "addcmul": lambda x, y, z: torch.addcmul(x, y, z, value=0.7),
    "addcdiv": lambda x, y, z: torch.addcdiv(x, y, z, value=-0.3),
    "addcmul_": lambda x, y, z: x.clone().addcmul_(y, z, value=1.7),
    "ldexp": lambda x, y, z: torch.ldexp(x, torch.tensor(3).to(x.device)),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(HALF_SCALAR_OPS))
def test_16bit_ops_compute_in_float32_as_the_cpu(name, dtype):
    """PyTorch's CPU kernels compute these in float32 for 16-bit inputs (a
    Python number stays a float32 value) and round once."""
    g = torch.Generator().manual_seed(5)
    x, y, z = ((torch.randn(257, generator=g) * 9).to(dtype) for _ in range(3))
    z = torch.where(z.abs() < 0.1, 1.0, z).to(dtype)
    exact(HALF_SCALAR_OPS[name], x, y, z)



@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.float32])
@pytest.mark.parametrize("args", [(0.0, -8.000001, -4.0), (0.5, 5.7, 1.9), (-3, 7, 2), (2.9, -4.2, -1.1)])
def test_arange_with_float_bounds_sizes_as_the_cpu(args, dtype):
    expected = torch.arange(*args, dtype=dtype)
    got = torch.arange(*args, dtype=dtype, device=DEV).cpu()
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32])
@pytest.mark.parametrize("args", [(0, 1, 10), (-3.3, 7.9, 17), (5, -5, 1), (2, 2, 4), (0, 100, 1001), (3.7, -2.2, 64),
                                  (1, 2, 0)])
def test_linspace_matches_the_cpu_bit_for_bit(args, dtype):
    torchtpu.debug.reset_metrics()
    expected = torch.linspace(*args, dtype=dtype)
    got = torch.linspace(*args, dtype=dtype, device=DEV).cpu()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if dtype in (torch.float16, torch.bfloat16):
        # The CPU's own 16-bit values depend on the processor: with native
        # float16 arithmetic (AVX512-FP16) its intermediate products round
        # the other way. Within one unit in the last place of the larger end.
        top = torch.tensor(float(max(abs(args[0]), abs(args[1]))), dtype=dtype)
        ulp = (torch.nextafter(top, torch.tensor(float("inf"), dtype=dtype)) - top).float()
        assert ((got.float() - expected.float()).abs() <= ulp).all(), (got, expected)
    else:
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_multiplying_by_a_mask_keeps_nan_and_signed_zero(dtype):
    """x * mask is inf * 0 = NaN and -3 * 0 = -0.0 where the mask is False, as
    on the CPU, also when the mask is converted to float in the same program."""
    x = torch.tensor([math.inf, 2.0, NAN, -3.0, -math.inf]).to(dtype)
    m = torch.tensor([False, True, False, False, True])
    exact(lambda a, b: a * b, x, m)
    exact(lambda a, b: b * a, x, m)
    exact(lambda a, b: a * b.to(a.dtype), x, m)
    exact(lambda a, b: (a * b.to(a.dtype)).sum().reshape(1), x, m)
    exact(lambda a, b: torch.where(b, a, a * b.to(a.dtype)), x, m)
    got, expected = (x.to(DEV) * m.to(DEV)).cpu(), x * m  # assert_close takes -0.0 == 0.0: check the signs
    numbers = ~expected.isnan()
    assert torch.equal(torch.signbit(got[numbers]), torch.signbit(expected[numbers]))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.float16, torch.float32])
def test_native_dropout_backward_result_dtype_and_values(dtype):
    g = torch.tensor([1, 2, 0, 3, 1]).to(dtype)
    mask = torch.tensor([True, False, True, True, False])
    exact(lambda a, m: torch.ops.aten.native_dropout_backward(a, m, 1.7), g, mask)


def test_assert_async_is_a_device_side_check():
    torch.ops.aten._assert_async(torch.tensor([2.5], device=DEV))
    torch.ops.aten._assert_async(torch.tensor(True, device=DEV))
    torchtpu.synchronize()
    with pytest.raises(RuntimeError, match="boom"):
        torch.ops.aten._assert_async.msg(torch.tensor(0, device=DEV), "boom")
        torchtpu.synchronize()
    with pytest.raises(RuntimeError, match="more than one value"):
        torch.ops.aten._assert_async(torch.ones(2, device=DEV))
    assert "aten::_assert_async" not in torchtpu.debug.metrics()["cpu_fallbacks"]


@pytest.mark.parametrize("fn", [torch.quantile, torch.nanquantile])
def test_quantile_with_a_device_q_checks_its_range(fn):
    x = torch.tensor([3.0, -1.0, float("nan"), 7.0, 0.5])
    same(lambda t, q: fn(t, q, dim=0, keepdim=True), x, torch.tensor([0.0, 0.25, 1.0]))
    for bad in ([0.5, float("nan")], [1.5], [-0.1, 0.2]):
        raises_like_cpu(lambda t, q: fn(t, q), x, torch.tensor(bad), match="range")



@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool])
@pytest.mark.parametrize("fn", [torch.isneginf, torch.isposinf, torch.isinf, torch.isfinite])
def test_infinity_tests_native(fn, dtype):
    torchtpu.debug.reset_metrics()
    x = torch.tensor([1.0, -math.inf, math.inf, NAN, 0.0, -2.0])
    x = x.to(dtype) if dtype.is_floating_point else torch.tensor([1, 0, 3, 0, 1, 1]).to(dtype)
    exact(fn, x)
    exact(fn, x[::2])
    exact(fn, x[0])
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def test_causal_attention_runs_without_cpu_fallback():
    torchtpu.debug.reset_metrics()
    q, k, v = (torch.randn(2, 3, 5, 8) for _ in range(3))
    same(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), q, k, v)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


REDUCTIONS_0D = {
    "sum": lambda t, k: torch.sum(t, dim=0, keepdim=k),
    "sum_neg": lambda t, k: torch.sum(t, dim=-1, keepdim=k),
    "mean": lambda t, k: torch.mean(t, dim=0, keepdim=k),
    "amax": lambda t, k: torch.amax(t, dim=0, keepdim=k),
    "amin": lambda t, k: torch.amin(t, dim=0, keepdim=k),
    "all": lambda t, k: torch.all(t, dim=0, keepdim=k),
    "any": lambda t, k: torch.any(t, dim=0, keepdim=k),
    "nanmean": lambda t, k: torch.nanmean(t, dim=0, keepdim=k),
    "logsumexp": lambda t, k: torch.logsumexp(t, dim=0, keepdim=k),
    "vector_norm": lambda t, k: torch.linalg.vector_norm(t, dim=0, keepdim=k),
    "max_dim": lambda t, k: tuple(torch.max(t, dim=0, keepdim=k)),
    "argmax": lambda t, k: torch.argmax(t, dim=0, keepdim=k),
    "var": lambda t, k: torch.var(t, dim=0, keepdim=k, correction=0),
    "std_mean": lambda t, k: tuple(torch.std_mean(t, dim=0, keepdim=k, correction=0)),
    "normalize": lambda t, k: F.normalize(t, dim=0),
    "cosine_similarity": lambda t, k: F.cosine_similarity(t, t, dim=0),
}


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", sorted(REDUCTIONS_0D))
def test_reduction_over_dim0_of_0d(name, keepdim):
    same(lambda t: REDUCTIONS_0D[name](t, keepdim), torch.tensor(1.5))


@pytest.mark.parametrize("dims", [(0, 0), (1, -1)])
def test_repeated_reduction_dim_raises(dims):
    raises_like_cpu(lambda x: x.sum(dims), torch.ones(2, 3), match="appears multiple times")


def test_reduction_dim_out_of_range_raises():
    raises_like_cpu(lambda x: x.sum(1), torch.tensor(1.0))
    raises_like_cpu(lambda x: x.argmax(2), torch.tensor(1.0))


def test_cat_of_0d_raises():
    raises_like_cpu(lambda a: torch.cat([a, a]), torch.tensor(1.0), match="zero-dimensional")
    out = torch.empty(2, device=DEV)
    with pytest.raises(RuntimeError, match="zero-dimensional"):
        torch.cat([torch.tensor(1.0, device=DEV)] * 2, out=out)


NAN_A = torch.tensor([1.0, NAN, 3.0, NAN, -0.0, math.inf])
NAN_B = torch.tensor([NAN, 2.0, 1.0, NAN, 0.0, NAN])


@pytest.mark.parametrize("op", [torch.maximum, torch.minimum, torch.fmax, torch.fmin, torch.max, torch.min])
def test_binary_extremes_propagate_nan_like_cpu(op):
    same(op, NAN_A, NAN_B)
    same(op, NAN_B, NAN_A)


@pytest.mark.parametrize("fn", [
    lambda x: x.amax(), lambda x: x.amin(), lambda x: x.max(), lambda x: x.min(),
    lambda x: tuple(x.max(0)), lambda x: tuple(x.min(0)), lambda x: x.argmax(), lambda x: x.argmin(),
    lambda x: x.view(2, 3).argmax(1), lambda x: x.view(2, 3).argmin(1),
    lambda x: x.sign(), lambda x: x.sgn(), lambda x: torch.relu(x),
    lambda x: x.clamp(min=0.5), lambda x: x.clamp(max=0.5), lambda x: x.clamp(NAN, 1.0),
    lambda x: x.clamp(max=NAN), lambda x: x.clamp(min=torch.full_like(x, NAN)),
])
def test_unary_nan_semantics_like_cpu(fn):
    same(fn, NAN_A)


def test_sign_of_negative_zero_and_nan():
    same(torch.sign, torch.tensor([-0.0, 0.0, NAN, -2.0, 3.0]))


BIG = [2**53 + 1, 2**60 + 3, -(2**62) - 5, 2**63 - 1]


@pytest.mark.parametrize("big", BIG)
def test_int64_scalars_keep_64_bits(big):
    x = torch.tensor([1, 2, -3], dtype=torch.int64)
    same(lambda t: t + big, x)
    same(lambda t: t - big, x)
    same(lambda t: t * 3 + big, x)
    same(lambda t: t == big, x)
    same(lambda t: torch.where(t > 1, t, big), x)
    same(lambda t: t.masked_fill(t > 1, big), x)
    same(lambda t: t.clamp(min=big), x)
    same(lambda t: t.clone().fill_(big), x)
    got = torch.full((3,), big, device=DEV, dtype=torch.int64).cpu()
    assert got.tolist() == [big] * 3


def test_int64_tensor_with_big_values_equals_scalar():
    x = torch.tensor([2**53 + 1, 2**53 + 2])
    same(lambda t: t == 2**53 + 1, x)


def test_masked_select_of_0d_is_1d():
    same(torch.masked_select, torch.tensor(2.0), torch.tensor(True))
    same(torch.masked_select, torch.tensor(2.0), torch.tensor(False))


def test_batch_norm_eval_with_zero_running_var_uses_eps():
    x = torch.randn(4, 3, 5, generator=torch.Generator().manual_seed(0))
    same(lambda t, m, v: F.batch_norm(t, m, v, training=False, eps=1e-3), x, torch.zeros(3), torch.zeros(3))
    same(lambda t, m, v: F.batch_norm(t, m, v, training=False), x, torch.zeros(3), torch.zeros(3))


@pytest.mark.parametrize("op", [
    lambda a, b: a // b, lambda a, b: a % b, lambda a, b: torch.fmod(a, b),
    lambda a, b: torch.div(a, b, rounding_mode="trunc"), lambda a, b: torch.div(a, b, rounding_mode="floor"),
])
def test_integer_division_by_zero_raises(op):
    a = torch.tensor([5, -6, 7])
    raises_like_cpu(op, a, torch.tensor([1, 0, 2]), match="ZeroDivisionError")
    raises_like_cpu(lambda t: op(t, 0), a, match="ZeroDivisionError")
    same(op, a, torch.tensor([2, -4, 3]))  # the check does not fire on valid input


def test_float_division_by_zero_is_inf():
    same(lambda a, b: a // b, torch.tensor([5.0, -6.0]), torch.tensor([0.0, 0.0]))


X = torch.arange(12.0).reshape(3, 4)

BAD_INDEXING = {
    "gather_neg": lambda x: torch.gather(x, 1, torch.tensor([[0, -1]], device=x.device)),
    "gather_big": lambda x: torch.gather(x, 1, torch.tensor([[0, 4]], device=x.device)),
    "gather_shape": lambda x: torch.gather(x, 1, torch.zeros(4, 1, dtype=torch.long, device=x.device)),
    "scatter_neg": lambda x: x.scatter(1, torch.tensor([[-1]], device=x.device), 1.0),
    "scatter_add_big": lambda x: x.scatter_add(0, torch.tensor([[3]], device=x.device), x[:1, :1]),
    "index_below": lambda x: x[torch.tensor([-4], device=x.device)],
    "index_above": lambda x: x[torch.tensor([3], device=x.device)],
    "index_col": lambda x: x[:, torch.tensor([0, 5], device=x.device)],
    "index_put_above": lambda x: x.index_put((torch.tensor([3], device=x.device),), torch.tensor(1.0, device=x.device)),
    "index_select_neg": lambda x: x.index_select(0, torch.tensor([-1], device=x.device)),
    "index_add_big": lambda x: x.index_add(0, torch.tensor([3], device=x.device), x[:1]),
    "embedding_big": lambda x: F.embedding(torch.tensor([3], device=x.device), x),
    "mask_wrong_length": lambda x: x[torch.tensor([True, False], device=x.device)],
    "where_float_cond": lambda x: torch.where(x, x, x),
    "nll_target_big": lambda x: F.nll_loss(x, torch.tensor([0, 4, 1], device=x.device)),
    "nll_target_neg": lambda x: F.nll_loss(x, torch.tensor([0, -1, 1], device=x.device)),
    "ce_target_big": lambda x: F.cross_entropy(x, torch.tensor([0, 9, 1], device=x.device)),
    "ce_int32_target": lambda x: F.cross_entropy(x, torch.tensor([0, 1, 1], dtype=torch.int32, device=x.device)),
    "nll2d_target_big": lambda x: F.nll_loss(x.view(1, 3, 2, 2), torch.full((1, 2, 2), 3, device=x.device)),
}


@pytest.mark.parametrize("name", sorted(BAD_INDEXING))
def test_bad_indices_raise_like_cpu(name):
    raises_like_cpu(BAD_INDEXING[name], X)


def test_valid_indices_do_not_raise():
    same(lambda x: x[torch.tensor([-3, 2, -1], device=x.device)], X)
    same(lambda x: F.cross_entropy(x, torch.tensor([0, -100, 3], device=x.device)), X)
    same(lambda x: torch.gather(x, 1, torch.tensor([[0, 3]], device=x.device)), X)


def test_device_check_raised_once_at_next_sync(each_mode):
    x = X.to(DEV)
    bad = torch.tensor([0, 7], device=DEV)
    if each_mode == "debug":
        with pytest.raises(IndexError, match="test_semantics.py"):
            x[bad]
    else:
        y = x[bad]  # no sync: no error yet
        del y
        with pytest.raises(IndexError, match="out of bounds"):
            (x * 2).sum().item()
    assert (x * 2).sum().item() == 132.0  # raised once, not again


def test_device_checks_of_unsynced_loop_stay_bounded():
    x = X.to(DEV)
    good = torch.tensor([0, 2], device=DEV)
    for _ in range(200):
        x[good]
    assert x.sum().item() == 66.0
    with pytest.raises(IndexError):  # at the op in Debug mode, else at synchronize()
        for i in range(200):
            x[torch.tensor([0, 3 if i == 150 else 1], device=DEV)]
        torchtpu.synchronize()
    assert x.sum().item() == 66.0


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize("src", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_float_to_int_conversion_like_cpu(src, dtype):
    x = torch.tensor([NAN, math.inf, -math.inf, 300.7, -7.9, 3e9, -3e9, 2.5, -0.5, 1e20]).to(src)
    same(lambda t: t.to(dtype), x)


NONFINITE = torch.tensor([NAN, math.inf, -math.inf, -2.4, -7.95, 3.6, 0.0, -0.0, 5.0, 1e30])


@pytest.mark.parametrize("op", [lambda a, b: a // b, lambda a, b: torch.div(a, b, rounding_mode="floor"),
                                lambda a, b: a % b])
def test_float_floor_division_like_cpu(op):
    a, b = NONFINITE.view(-1, 1), NONFINITE.view(1, -1)
    expected = op(a, b)
    got = op(a.to(DEV), b.to(DEV)).cpu()
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(torch.signbit(got), torch.signbit(expected))


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
@pytest.mark.parametrize("value", [2.0, NAN, math.inf])
def test_softmax_of_0d_and_its_gradient(fn, value):
    same(lambda t: fn(t, 0), torch.tensor(value))
    x = torch.tensor(2.0, requires_grad=True)
    fn(x, 0).backward()
    xd = torch.tensor(2.0, device=DEV, requires_grad=True)
    fn(xd, 0).backward()
    assert xd.grad.cpu().item() == x.grad.item()


def test_gather_from_0d_has_index_shape():
    same(lambda t: torch.gather(t, 0, torch.tensor([0, 0], device=t.device)), torch.tensor(2.0))
    same(lambda t: torch.gather(t, -1, torch.tensor(0, device=t.device)), torch.tensor(2.0))


@pytest.mark.parametrize("op", [lambda s, o: s.ldexp_(o), lambda s, o: s.mul_(o), lambda s, o: torch.mul(s, o, out=s)])
@pytest.mark.parametrize("shapes", [((0, 1, 3), (0, 10, 3)), ((1, 3), (2, 3))])
def test_inplace_result_never_resizes_an_input(op, shapes):
    raises_like_cpu(op, torch.ones(shapes[0]), torch.ones(shapes[1]), match="doesn't match the broadcast shape")


def test_addr_inplace_checks_shapes():
    raises_like_cpu(lambda s, a, b: s.addr_(a, b), torch.tensor(1.0), torch.ones(5), torch.ones(10))
    raises_like_cpu(lambda s, a, b: s.addr_(a, b), torch.zeros(2, 3), torch.ones(3), torch.ones(3))
    same(lambda s, a, b: s.clone().addr_(a, b, beta=2, alpha=3), torch.zeros(2, 3), torch.arange(2.0),
         torch.arange(3.0))


@pytest.mark.parametrize("weight", [0.25, 0.75, -2.0])
def test_lerp_nonfinite_like_cpu(weight):
    a = NONFINITE.view(-1, 1).expand(10, 10)
    b = NONFINITE.view(1, -1).expand(10, 10)
    same(lambda x, y: torch.lerp(x, y, weight), a, b)
    same(lambda x, y, w: torch.lerp(x, y, w), a, b, torch.full((10,), weight))


def test_ignored_nll_rows_add_zero_even_when_nonfinite():
    x = torch.tensor([[NAN, math.inf, -math.inf], [-2.4, -7.9, 3.6]])
    t = torch.tensor([-100, 1])
    for reduction in ("none", "sum", "mean"):
        same(lambda a, b: F.nll_loss(a, b, reduction=reduction), x, t)


def test_dropout_backward_keeps_nan_like_cpu():
    g = torch.tensor([NAN, 1.0, math.inf, 2.0])
    mask = torch.tensor([False, True, False, True])
    same(lambda a, m: torch.ops.aten.native_dropout_backward(a, m, 2.0), g, mask)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_nonfinite_like_cpu(approximate):
    same(lambda t: F.gelu(t, approximate=approximate), NONFINITE)


@pytest.mark.parametrize("shape", [(1, 1), (3, 1, 1), (2, 1), (3, 4)])
@pytest.mark.parametrize("diagonal", [-2, -1, 0, 1])
def test_triangular_masks_of_size_one_dims(shape, diagonal):
    x = torch.arange(1.0, 1.0 + math.prod(shape)).reshape(shape)
    same(lambda t: t.tril(diagonal), x)
    same(lambda t: t.triu(diagonal), x)


def test_masked_scatter_and_masked_select_grad_of_0d():
    same(lambda s, m, src: s.clone().masked_scatter_(m, src), torch.tensor(0.0), torch.tensor(True),
         torch.tensor([5.0]))
    x = torch.tensor(3.0, requires_grad=True)
    torch.masked_select(x, torch.tensor(True)).sum().backward()
    xd = torch.tensor(3.0, device=DEV, requires_grad=True)
    torch.masked_select(xd, torch.tensor(True, device=DEV)).sum().backward()
    assert xd.grad.cpu().item() == x.grad.item() == 1.0


@pytest.mark.parametrize("out", [(5, 7), (1, 1), (3, 3), (8, 8)])
def test_adaptive_avg_pool_nonfinite_stays_in_its_window(out):
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    x[0, 0, 0, 2], x[0, 1, 3, 3], x[1, 0, 5, 5] = math.inf, -math.inf, NAN
    x[1, 2, 0, 0], x[1, 2, 0, 1] = math.inf, -math.inf
    same(lambda t: F.adaptive_avg_pool2d(t, out), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_native_layer_norm_saved_stats_have_input_dtype(dtype):
    x = torch.randn(2, 3, generator=torch.Generator().manual_seed(0)).to(dtype)
    same(lambda t: torch.native_layer_norm(t, (3,), None, None, 1e-5), x)


def test_reductions_over_a_nonempty_dim_of_an_empty_tensor():
    """As the CPU: an empty dim elsewhere gives empty results; an empty
    reduced dim raises IndexError; argmax/argmin refuse bool."""
    z = torch.empty(0, 4)
    zt = z.to("tpu")
    for fn in (lambda t: t.max(1), lambda t: t.min(1, keepdim=True)):
        got, want = fn(zt), fn(z)
        assert got.values.shape == want.values.shape and got.indices.shape == want.indices.shape
    for fn in (lambda t: t.argmax(1), lambda t: t.argmin(1, keepdim=True)):
        assert fn(zt).shape == fn(z).shape and fn(zt).dtype == torch.int64
    for fn in (lambda t: t.max(0), lambda t: t.argmax(0)):
        with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
            fn(z)
        with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
            fn(zt)
    b = torch.tensor([True, False, True])
    for fn in (torch.argmax, torch.argmin):
        with pytest.raises(RuntimeError, match="does not support bool input"):
            fn(b)
        with pytest.raises(RuntimeError, match="does not support bool input"):
            fn(b.to("tpu"))


def test_where_with_a_uint8_condition():
    cond = torch.tensor([1, 0, 3, 0], dtype=torch.uint8)
    a, b = torch.arange(4.0), -torch.arange(4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the CPU's deprecation warning (once per process)
        want = torch.where(cond, a, b)
        got = torch.where(cond.to("tpu"), a.to("tpu"), b.to("tpu"))
    assert torch.equal(got.cpu(), want)


def test_remainder_with_a_number_first_runs_on_the_device():
    torchtpu.debug.reset_metrics()
    x = torch.tensor([2.0, -3.0, 0.0, 7.5, -0.5])
    i = torch.tensor([2, -3, 7, 1])
    got_f, got_i = 5 % x.to("tpu"), torch.remainder(-7, i.to("tpu"))
    torch.testing.assert_close(got_f.cpu(), 5 % x, equal_nan=True)
    assert torch.equal(got_i.cpu(), torch.remainder(-7, i))
    assert "aten::remainder.Scalar_Tensor" not in torchtpu.debug.metrics()["cpu_fallbacks"]


def test_cpu_index_tensors_in_advanced_indexing():
    """As on CUDA: CPU index tensors (and Python sequences) index a tpu tensor."""
    x = torch.arange(60.0).reshape(3, 4, 5)
    i = torch.tensor([1, 0, 4])
    assert torch.equal(x.to("tpu")[(0, 2, 1), (1, 3, 3), i].cpu(), x[(0, 2, 1), (1, 3, 3), i])
    y, ref = x.to("tpu"), x.clone()
    y[torch.tensor([0, 2]), 1] = -1.0
    ref[torch.tensor([0, 2]), 1] = -1.0
    v = torch.arange(10.0).reshape(2, 5)
    y.index_put_((torch.tensor([1, 1]), torch.tensor([2, 2])), v.to("tpu"), accumulate=True)
    ref.index_put_((torch.tensor([1, 1]), torch.tensor([2, 2])), v, accumulate=True)
    assert torch.equal(y.cpu(), ref)
    with pytest.raises(RuntimeError, match="same device"):  # index_select is stricter, as on CUDA
        torch.index_select(x.to("tpu"), 0, torch.tensor([0]))


def test_fractional_max_pool_takes_the_first_n_sample_rows():
    for x, s in ((torch.randn(3, 8, 8), torch.rand(4, 3, 2)), (torch.randn(2, 3, 8, 8), torch.rand(5, 3, 2))):
        want = F.fractional_max_pool2d(x, 2, output_size=4, _random_samples=s, return_indices=True)
        got = F.fractional_max_pool2d(x.to("tpu"), 2, output_size=4, _random_samples=s.to("tpu"), return_indices=True)
        assert torch.equal(got[0].cpu(), want[0]) and torch.equal(got[1].cpu(), want[1])
    x, s = torch.randn(3, 6, 6, 6), torch.rand(2, 3, 3)
    want = F.fractional_max_pool3d(x, 2, output_size=3, _random_samples=s)
    assert torch.equal(F.fractional_max_pool3d(x.to("tpu"), 2, output_size=3, _random_samples=s.to("tpu")).cpu(), want)
    with pytest.raises(RuntimeError, match="no less then input batch size"):
        F.fractional_max_pool2d(torch.randn(2, 3, 8, 8).to("tpu"), 2, output_size=4,
                                _random_samples=torch.rand(1, 3, 2).to("tpu"))
