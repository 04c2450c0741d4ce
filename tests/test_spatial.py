"""Spatial nn ops on the device against the CPU, in every mode: reflection and
replication padding (negative pads too), nearest / linear / cubic upsampling
(source indices picked exactly as the CPU picks them, for every layout rule),
adaptive max pooling with its indices, max unpooling, unfold / fold and
channel_shuffle; forward and backward, 16-bit, empty batch, non-contiguous,
NaN/Inf, and no CPU fallback."""
import pytest
import torch
import torch.nn.functional as F

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

GEN = torch.Generator().manual_seed(0)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=GEN).to(dtype)


def same(fn, x, *extra, tol=1e-5, grad=True):
    """fn(x, *extra) on the CPU and the device: values, and the gradient of x."""
    xc = x.clone().requires_grad_(grad)
    xd = x.to("tpu").requires_grad_(grad)
    expected = fn(xc, *extra)
    got = fn(xd, *[e.to("tpu") if isinstance(e, torch.Tensor) else e for e in extra])
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got.detach().cpu(), expected.detach(), equal_nan=True, rtol=tol, atol=tol)
    if grad:
        g = randn(*expected.shape, dtype=expected.dtype)
        expected.backward(g)
        got.backward(g.to("tpu"))
        torch.testing.assert_close(xd.grad.cpu(), xc.grad, equal_nan=True, rtol=tol * 10, atol=tol * 10)


@pytest.fixture(autouse=True)
def no_fallback():
    GEN.manual_seed(0)
    torchtpu.debug.reset_metrics()
    yield
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("shape,pad", [
    ((2, 5), (1, 3)), ((0, 3, 4), (2, 1)), ((2, 3, 6), (-2, 4)), ((2, 3, 6), (4, -5)),
    ((1, 3, 4, 5), (1, 2, 3, 0)), ((1, 3, 4, 4), (-1, 1, -2, 1)), ((3, 4, 5), (2, -1, 0, 3)),
    ((1, 2, 3, 4, 5), (1, 1, 2, 0, 1, 2)), ((2, 3, 4, 5), (-1, 2, 1, -2, 2, 1))])
def test_edge_padding(mode, shape, pad):
    same(lambda t: F.pad(t, pad, mode=mode), randn(*shape))


def test_edge_padding_dtypes_and_layouts():
    x = randn(2, 3, 6, 5)
    same(lambda t: F.pad(t, (2, 1, 1, 3), mode="reflect"), x.transpose(2, 3))  # non-contiguous
    same(lambda t: F.pad(t, (2, 1, 1, 3), mode="replicate"), x.bfloat16(), tol=1e-2)
    same(lambda t: F.pad(t, (3, 1), mode="reflect"), torch.randint(-9, 9, (2, 3, 5)), grad=False)
    x[0, 1, 2, :2] = torch.tensor([float("nan"), float("inf")])
    same(lambda t: F.pad(t, (3, 4, 2, 2), mode="reflect"), x)
    same(lambda t: F.pad(t, (3, 4, 2, 2), mode="replicate"), x)


def test_edge_padding_errors():
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        F.pad(randn(1, 2, 3).to("tpu"), (3, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="Expected 2D or 3D"):
        torch.ops.aten.reflection_pad1d(randn(1, 0, 3).to("tpu"), [1, 1])


SIZES = [(4, 8), (5, 3), (3, 7), (7, 7), (2, 41), (6, 70), (1, 5), (9, 1)]


@pytest.mark.parametrize("mode,dims", [("nearest", 1), ("nearest", 2), ("nearest", 3), ("nearest-exact", 1),
                                       ("nearest-exact", 2), ("nearest-exact", 3), ("linear", 1),
                                       ("bilinear", 2), ("bicubic", 2), ("trilinear", 3)])
def test_interpolate(mode, dims):
    nearest = mode.startswith("nearest")
    # (Large 3-D reductions sum thousands of terms per gradient element, in an
    # order XLA picks: they are left to the OpInfo sweep's tolerances.)
    for isz, osz in [(4, 8), (5, 3), (3, 7), (7, 7)] if dims == 3 else SIZES:
        x = randn(2, 3, *[isz] * dims)
        for ac in [None] if nearest else [False, True]:
            same(lambda t: F.interpolate(t, size=[osz] * dims, mode=mode, align_corners=ac), x)
            for sf in (2.0, 1.7, 0.6):
                for rsf in (False, True):
                    if int(isz * sf) < 1:
                        continue
                    same(lambda t: F.interpolate(t, scale_factor=sf, mode=mode, align_corners=ac,
                                                 recompute_scale_factor=rsf), x)
        same(lambda t: F.interpolate(t, size=[osz] * dims, mode=mode), x.bfloat16(), tol=1e-2)
        same(lambda t: F.interpolate(t, size=[osz] * dims, mode=mode), x.half(), tol=1e-2)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic"])
def test_interpolate_2d_layouts(mode):
    # The CPU's vectorized kernels (channels-last with C > 3, or small outputs)
    # and its generic kernel pick nearest pixels with different roundings.
    # The channels-last bilinear kernel rounds its weights its own way.
    tol = 1e-5 if mode.startswith("nearest") else 1e-4
    for isz, osz in [(2, 41), (3, 200), (41, 83), (6, 70)]:
        x = randn(1, 5, isz, isz + 1)
        same(lambda t: F.interpolate(t, size=[osz, osz + 3], mode=mode), x, tol=tol)
        same(lambda t: F.interpolate(t, size=[osz, osz + 3], mode=mode),
             x.contiguous(memory_format=torch.channels_last), tol=tol)
    same(lambda t: F.interpolate(t, scale_factor=1.5, mode=mode), randn(2, 3, 6, 8).transpose(2, 3))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", ["small output", "large output", "channels-last C>3", "C=3 on one thread"])
def test_bilinear_16_bit_rounds_as_the_cpu_kernel_it_takes(dtype, case):
    """The CPU's vectorized bilinear kernel (channels-last with C > 3, height +
    width of the output at most 128, or 3 channels on one thread) computes
    16-bit inputs in float and rounds once; its generic kernel rounds the
    weights to the dtype. Each case matches the CPU exactly but for rare
    float-order ties, never more than one ulp."""
    shape, size = {"small output": ((2, 3, 37, 41), (73, 29)), "large output": ((2, 3, 37, 41), (128, 100)),
                   "channels-last C>3": ((1, 5, 16, 16), (70, 90)), "C=3 on one thread": ((1, 3, 16, 16), (20, 130))}[case]
    x = randn(*shape, dtype=dtype)
    if case == "channels-last C>3":
        x = x.contiguous(memory_format=torch.channels_last)
    threads = torch.get_num_threads()
    if case == "C=3 on one thread":
        torch.set_num_threads(1)
    try:
        for ac in (False, True):
            want = F.interpolate(x, size=size, mode="bilinear", align_corners=ac)
            got = F.interpolate(x.to("tpu"), size=size, mode="bilinear", align_corners=ac).cpu()
            assert (got == want).float().mean() >= 0.999, (got != want).sum()
            ulp = torch.finfo(dtype).eps * want.float().abs().clamp(min=1)
            assert ((got.float() - want.float()).abs() <= ulp).all()
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic"])
def test_interpolate_nonfinite_and_empty(mode):
    x = randn(1, 2, 4, 5)
    x[0, 0, 1, 2] = float("inf")
    x[0, 1, 3, 0] = float("nan")
    same(lambda t: F.interpolate(t, size=[7, 3], mode=mode), x)
    same(lambda t: F.interpolate(t, size=[5, 5], mode=mode), x)
    same(lambda t: F.interpolate(t, size=[7, 3], mode=mode), randn(0, 2, 4, 5))


def test_interpolate_uint8_nearest():
    x = torch.randint(0, 255, (1, 3, 5, 7), dtype=torch.uint8)
    same(lambda t: F.interpolate(t, size=[9, 4], mode="nearest"), x, grad=False)


def test_nearest_exact_index_rounding():
    # Sizes where the CPU's float rounding puts a source index on the other
    # side of an integer than exact arithmetic would.
    for isz, osz in [(2, 41), (2, 47), (4, 82), (2, 83)]:
        x = torch.arange(isz, dtype=torch.float32).view(1, 1, isz)
        same(lambda t: F.interpolate(t, size=osz, mode="nearest-exact"), x)
        same(lambda t: F.interpolate(t.view(1, 1, 1, isz), size=(1, osz), mode="nearest-exact"), x)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_adaptive_max_pool(dims):
    fn = getattr(F, f"adaptive_max_pool{dims}d")
    for shape in [(2, 3) + (7, 5, 6)[:dims], (3,) + (6, 6, 4)[:dims]]:
        for osz in (1, 2, 3, 5, 7):
            x = randn(*shape)
            x.view(-1)[::5] = x.view(-1)[2]  # ties: the first maximum wins
            x.view(-1)[7::13] = float("nan")
            same(lambda t: fn(t, osz), x)
            xc, xd = x, x.to("tpu")
            assert torch.equal(fn(xd, osz, return_indices=True)[1].cpu(), fn(xc, osz, return_indices=True)[1])
    same(lambda t: fn(t, 2), randn(*(2, 3) + (4, 5, 6)[:dims], dtype=torch.bfloat16), tol=2e-2)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_max_unpool(dims):
    pool, unpool = getattr(F, f"max_pool{dims}d"), getattr(F, f"max_unpool{dims}d")
    for shape in [(2, 3) + (6, 4, 6)[:dims], (3,) + (4, 6, 4)[:dims]]:
        for k, s in [(2, 2), (2, 1), (3, 2)]:
            y, i = pool(randn(*shape), k, s, return_indices=True)
            try:
                unpool(y, i, k, s)
            except RuntimeError:
                continue  # the default output size does not hold every index
            same(lambda t, idx: unpool(t, idx, k, s), y, i)
            same(lambda t, idx: unpool(t, idx, k, s), y.bfloat16(), i, tol=1e-2)


def test_max_unpool_invalid_index():
    y = torch.ones(1, 1, 2, 2, device="tpu")
    idx = torch.tensor([[[[0, 1], [2, 99]]]], device="tpu")
    with pytest.raises(RuntimeError, match="invalid max index"):
        F.max_unpool2d(y, idx, 2).cpu()


@pytest.mark.parametrize("shape,k,d,p,s", [((2, 3, 7, 6), 2, 1, 0, 1), ((2, 3, 7, 6), (3, 2), (1, 2), (1, 0), (2, 1)),
                                           ((3, 8, 8), 3, 2, 2, 3), ((0, 2, 5, 5), 2, 1, 1, 2)])
def test_unfold_fold(shape, k, d, p, s):
    x = randn(*shape)
    same(lambda t: F.unfold(t, k, d, p, s), x)
    same(lambda t: F.unfold(t, k, d, p, s), x.bfloat16(), tol=1e-2)
    cols = F.unfold(x, k, d, p, s)
    same(lambda t: F.fold(t, shape[-2:], k, d, p, s), cols)


def test_channel_shuffle():
    for shape, g in [((2, 6, 3, 3), 3), ((1, 4, 5), 2), ((2, 8, 2, 2, 2), 4)]:
        same(lambda t: F.channel_shuffle(t, g), randn(*shape), grad=False)
        same(lambda t: F.channel_shuffle(t, g), torch.randint(0, 9, shape), grad=False)


@pytest.mark.parametrize("shape,kernel,out", [((2, 3, 9, 11), (2, 3), (5, 4)), ((3, 8, 7), (3, 2), (4, 5)),
                                              ((2, 2, 7, 8, 9), (2, 3, 2), (4, 3, 5)), ((1, 1, 5, 5), (2, 2), (1, 1))])
def test_fractional_max_pool_with_given_samples(shape, kernel, out):
    """fractional_max_pool2d/3d with the caller's random samples: the CPU's window starts, values and indices
    (NaN taking the window), and the gradient; no CPU fallback. With no samples given, the device draws them."""
    torchtpu.debug.reset_metrics()
    g = torch.Generator().manual_seed(0)
    nd = len(kernel)
    f = torch.nn.functional.fractional_max_pool2d if nd == 2 else torch.nn.functional.fractional_max_pool3d
    x = torch.randn(*shape, generator=g)
    x.view(-1)[3] = float("nan")
    samples = torch.rand(shape[0] if len(shape) == nd + 2 else 1, shape[-nd - 1], nd, generator=g)
    xc, xd = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    v, i = f(xc, kernel, output_size=out, return_indices=True, _random_samples=samples)
    vd, id_ = f(xd, kernel, output_size=out, return_indices=True, _random_samples=samples.to("tpu"))
    torch.testing.assert_close(vd.cpu(), v, equal_nan=True)
    assert torch.equal(id_.cpu(), i)
    grad = torch.randn(v.shape, generator=g)
    v.backward(grad)
    vd.backward(grad.to("tpu"))
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)
    drawn = f(x.to("tpu"), kernel, output_size=out)
    assert drawn.shape == v.shape
    torchtpu.synchronize()
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}
