"""Grid sampling and antialiased resizing on the device against the CPU, in
every mode: grid_sample in 2-D and 3-D for every interpolation and padding
mode and align_corners, with the input and grid gradients; non-finite grid
coordinates resolved as each CPU kernel resolves them; antialiased bilinear
and bicubic interpolation (down- and upsampling, explicit scales, a NaN
outside a window), forward and backward; 16-bit grid sampling; no CPU
fallback."""
import itertools

import pytest
import torch
import torch.nn.functional as F

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

GEN = torch.Generator().manual_seed(0)


@pytest.fixture(autouse=True)
def no_fallback():
    GEN.manual_seed(0)
    torchtpu.debug.reset_metrics()
    yield
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def both(fn, *args):
    """fn on CPU copies and device copies of args (leaves with gradients);
    returns (cpu out, device out, cpu leaves, device leaves)."""
    cpu = [a.clone().requires_grad_() for a in args]
    dev = [a.to("tpu").requires_grad_() for a in args]
    return fn(*cpu), fn(*dev), cpu, dev


def close(got, want, tol):
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=tol, atol=tol, equal_nan=True)


# Bicubic is 2-D only (PyTorch raises for 3-D; see test_grid_sample_errors).
@pytest.mark.parametrize("dims,mode,padding,align", [
    (d, m, p, a) for d, m, p, a in itertools.product([2, 3], ["bilinear", "nearest", "bicubic"],
                                                     ["zeros", "border", "reflection"], [False, True])
    if not (d == 3 and m == "bicubic")])
def test_grid_sample(dims, mode, padding, align):
    spatial, out = ((5, 6), (4, 7)) if dims == 2 else ((3, 4, 5), (2, 3, 4))
    x = torch.randn(2, 3, *spatial, generator=GEN)
    grid = torch.rand(2, *out, dims, generator=GEN) * 2.6 - 1.3  # some points outside [-1, 1]
    fn = lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align)
    want, got, cpu, dev = both(fn, x, grid)
    close(got, want, 1e-5)
    g = torch.randn(want.shape, generator=GEN)
    want.backward(g)
    got.backward(g.to("tpu"))
    close(dev[0].grad, cpu[0].grad, 1e-5)
    # Grid gradients: float32 sums of ~1e2 terms, on both sides ~1e-5 from the float64 truth.
    close(dev[1].grad, cpu[1].grad, 1e-4)


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_nonfinite_coordinates(dims, padding):
    # NaN and +-inf coordinates: 2-D (the CPU's vectorized kernel) clamps NaN
    # to 0, 3-D (its scalar kernel) to the last pixel; zeros padding gives NaN
    # in 2-D bilinear and 0 in 3-D.
    spatial = (4, 5) if dims == 2 else (3, 4, 5)
    x = torch.randn(1, 2, *spatial, generator=GEN)
    pts = [[v] + [0.3] * (dims - 1) for v in (float("nan"), float("inf"), -float("inf"))]
    pts += [[0.3] * (dims - 1) + [float("nan")]]
    grid = torch.tensor(pts).reshape(1, *([1] * (dims - 1)), len(pts), dims)
    for mode in ["bilinear", "nearest"] + (["bicubic"] if dims == 2 else []):
        want = F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=False)
        got = F.grid_sample(x.to("tpu"), grid.to("tpu"), mode=mode, padding_mode=padding, align_corners=False)
        close(got, want, 1e-6)


def test_grid_sample_non_contiguous_and_single_pixel():
    x = torch.randn(2, 6, 3, 4, generator=GEN).transpose(2, 3)  # [2, 6, 4, 3], non-contiguous
    grid = (torch.rand(2, 5, 4, 2, generator=GEN) * 2 - 1)[:, ::2]
    for align in (False, True):
        want = F.grid_sample(x, grid, align_corners=align)
        close(F.grid_sample(x.to("tpu"), grid.to("tpu"), align_corners=align), want, 1e-5)
    one = torch.randn(1, 2, 1, 1, generator=GEN)  # a 1x1 input: reflection spans are empty
    grid = torch.rand(1, 3, 3, 2, generator=GEN) * 4 - 2
    for padding in ("zeros", "border", "reflection"):
        want = F.grid_sample(one, grid, padding_mode=padding, align_corners=True)
        close(F.grid_sample(one.to("tpu"), grid.to("tpu"), padding_mode=padding, align_corners=True), want, 1e-6)


def test_grid_sample_empty_batch_and_grid():
    for x, grid in [(torch.randn(0, 2, 3, 4), torch.zeros(0, 2, 2, 2)), (torch.randn(1, 2, 3, 4), torch.zeros(1, 0, 2, 2))]:
        want, got, cpu, dev = both(lambda a, g: F.grid_sample(a, g, align_corners=False), x, grid)
        close(got, want, 0)
        want.sum().backward()
        got.sum().backward()
        close(dev[0].grad, cpu[0].grad, 0)


def test_grid_sample_errors():
    x, grid = torch.randn(1, 1, 2, 2, 2, device="tpu"), torch.zeros(1, 1, 1, 1, 3, device="tpu")
    with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D input"):
        F.grid_sample(x, grid, mode="bicubic", align_corners=False)
    with pytest.raises(RuntimeError, match="same batch size"):
        torch.grid_sampler_2d(torch.zeros(2, 1, 3, 3, device="tpu"), torch.zeros(1, 2, 2, 2, device="tpu"), 0, 0,
                              False)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("dims", [2, 3])
def test_grid_sample_16_bit_is_the_float32_result_rounded_once(dtype, mode, padding, dims):
    """16-bit grid sampling runs on the device in float32 and rounds once,
    compared with the CPU's float32 result rounded to the dtype. (The CPU's
    own 16-bit kernels round every step, the sampling coordinates too, which
    moves taps; past 2^15 elements a plane the 2-D kernel's 16-bit gather
    offsets wrap and it reads outside its input.)"""
    if dims == 3 and mode == "bicubic":
        return
    shape = (2, 3, 5, 6) if dims == 2 else (2, 2, 3, 4, 5)
    grid_shape = (2, 4, 7, 2) if dims == 2 else (2, 3, 4, 5, 3)
    x = torch.randn(shape, generator=GEN).to(dtype)
    grid = (torch.rand(grid_shape, generator=GEN) * 2.4 - 1.2).to(dtype)
    g = torch.randn(shape[:2] + grid_shape[1:-1], generator=GEN).to(dtype)
    fn = lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=padding, align_corners=False)
    xc, gc = x.float().requires_grad_(), grid.float().requires_grad_()
    want = fn(xc, gc)
    want.backward(g.float())
    xd, gd = x.to("tpu").requires_grad_(), grid.to("tpu").requires_grad_()
    got = fn(xd, gd)
    got.backward(g.to("tpu"))
    assert got.dtype == dtype and xd.grad.dtype == dtype and gd.grad.dtype == dtype
    # float32 sums in another order may round to the neighbouring 16-bit value
    tol = dict(rtol=2 ** -7 if dtype == torch.bfloat16 else 2 ** -10, atol=1e-5)
    torch.testing.assert_close(got.cpu(), want.to(dtype), **tol)
    torch.testing.assert_close(xd.grad.cpu(), xc.grad.to(dtype), **tol)
    torch.testing.assert_close(gd.grad.cpu().float(), gc.grad.to(dtype).float(), rtol=tol["rtol"],
                               atol=2 ** -8 * gc.grad.abs().max().item())


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("shape,size", [((2, 3, 8, 9), (3, 4)), ((1, 2, 5, 7), (12, 20)), ((2, 1, 16, 3), (5, 7)),
                                        ((1, 1, 1, 1), (1, 1)), ((1, 2, 6, 6), (6, 3))])
@pytest.mark.parametrize("align", [False, True])
def test_antialias_interpolate(mode, shape, size, align):
    x = torch.randn(shape, generator=GEN)
    fn = lambda t: F.interpolate(t, size=size, mode=mode, align_corners=align, antialias=True)
    want, got, cpu, dev = both(fn, x)
    close(got, want, 1e-5)
    g = torch.randn(want.shape, generator=GEN)
    want.backward(g)
    got.backward(g.to("tpu"))
    close(dev[0].grad, cpu[0].grad, 1e-5)


def test_antialias_scales_and_nonfinite():
    # Explicit scale factors (a dim whose size does not change is left alone
    # by the CPU's forward pass) and a NaN that only its own window sees.
    x = torch.randn(1, 2, 3, 10, generator=GEN)
    for sf in [(1.2, 0.7), (1.0, 2.5), (1.3, 0.45)]:
        fn = lambda t: F.interpolate(t, scale_factor=sf, mode="bilinear", antialias=True,
                                     recompute_scale_factor=False)
        close(fn(x.to("tpu")), fn(x), 1e-5)
    x[0, 0, 1, 0] = float("nan")
    x[0, 1, 2, 9] = float("inf")
    fn = lambda t: F.interpolate(t, size=(3, 3), mode="bilinear", antialias=True)
    close(fn(x.to("tpu")), fn(x), 1e-5)
