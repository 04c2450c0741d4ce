"""bfloat16 / float16 ops computed as PyTorch's CPU kernels do (float32
"opmath", one rounding): each result is compared with the CPU's, exactly."""
import pytest
import torch
import torch.nn.functional as F

import torchtpu  # noqa: F401

LOW = [torch.bfloat16, torch.float16]


def _pair(*ts):
    return ts, tuple(t.to("tpu") for t in ts)


def _same(cpu, dev):
    torch.testing.assert_close(dev.cpu(), cpu, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("scalar", [3.141592653589793, 0.6931471805599453, 6.283185307179586])
def test_mul_div_by_scalar_keep_the_scalar_in_float32(each_mode, dtype, scalar):
    torch.manual_seed(0)
    x = (torch.randn(4096) * 50).to(dtype)
    d = x.to("tpu")
    _same(x * scalar, d * scalar)
    _same(x / scalar, d / scalar)
    # A float32 0-d tensor operand is also read unrounded.
    s = torch.tensor(scalar)
    _same(x * s, d * s.to("tpu"))


@pytest.mark.parametrize("dtype", LOW)
def test_conv_transpose_bias_grad_sums_in_float32(each_mode, dtype):
    torch.manual_seed(0)
    x, w, b = torch.randn(1, 1, 4, 5, 2).to(dtype), torch.randn(1, 1, 4, 3, 1).to(dtype), torch.tensor([3.3], dtype=dtype)
    grads = []
    for dev in ("cpu", "tpu"):
        bb = b.to(dev).detach().requires_grad_()
        y = F.conv_transpose3d(x.to(dev), w.to(dev), bb, stride=2, padding=1, output_padding=1, dilation=(2, 3, 2))
        y.sum().backward()
        grads.append(bb.grad.cpu())
    assert grads[0].item() == 336.0  # 336 ones: a 16-bit running sum would stop at 256
    _same(grads[0], grads[1])


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_log_softmax_like_cpu(each_mode, dtype, dim):
    torch.manual_seed(0)
    x = (torch.randn(40, 5) * 4).to(dtype)
    _same(torch.log_softmax(x, dim), torch.log_softmax(x.to("tpu"), dim))
    out = torch.empty(40, 5, dtype=dtype, device="tpu")
    torch.log_softmax(x.to("tpu"), dim, out=out)
    _same(torch.log_softmax(x, dim), out)


@pytest.mark.parametrize("dtype", LOW)
def test_group_norm_rounds_once(each_mode, dtype):
    torch.manual_seed(0)
    (x, w, b), (dx, dw, db) = _pair((torch.randn(4, 6, 50) * 3 + 1).to(dtype), torch.randn(6).to(dtype),
                                    torch.randn(6).to(dtype))
    for c, d in zip(torch.native_group_norm(x, w, b, 4, 6, 50, 2, 0.5),
                    torch.native_group_norm(dx, dw, db, 4, 6, 50, 2, 0.5)):
        _same(c, d)
    # float32 contraction in XLA may move an element by one 16-bit ulp.
    torch.testing.assert_close(F.group_norm(dx, 3, dw, db, eps=1e-5).cpu(), F.group_norm(x, 3, w, b, eps=1e-5))


@pytest.mark.parametrize("dtype", LOW)
def test_batch_norm_training_like_cpu(each_mode, dtype):
    torch.manual_seed(0)
    ts = ((torch.randn(5, 5, 5) * 3 + 1).to(dtype), torch.randn(5).to(dtype), torch.randn(5).to(dtype),
          torch.randn(5).to(dtype), torch.rand(5).to(dtype))
    (x, w, b, rm, rv), (dx, dw, db, drm, drv) = _pair(*ts)
    cpu = torch.native_batch_norm(x, w, b, rm, rv, True, 0.5, 0.6)
    dev = torch.native_batch_norm(dx, dw, db, drm, drv, True, 0.5, 0.6)
    for c, d in zip(cpu, dev):
        _same(c, d)
    g = torch.randn(5, 5, 5).to(dtype)
    gc = torch.ops.aten.native_batch_norm_backward(g, x, w, rm, rv, cpu[1], cpu[2], True, 0.6, [True] * 3)
    gd = torch.ops.aten.native_batch_norm_backward(g.to("tpu"), dx, dw, drm, drv, dev[1], dev[2], True, 0.6, [True] * 3)
    for c, d in zip(gc[1:], gd[1:]):
        _same(c, d)
    # The input gradient is exact up to float32 contraction in XLA: one 16-bit ulp.
    torch.testing.assert_close(gd[0].cpu(), gc[0])


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_nll_loss_sums_in_float32(each_mode, dtype, reduction):
    """The weighted 16-bit losses and weights are summed in float32 and rounded
    once (CUDA's accumulation): equal to the CPU's float32 result rounded."""
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(300, 7, generator=g) * 3).to(dtype)
    t = torch.randint(0, 7, (300,), generator=g)
    w = torch.rand(7, generator=g).to(dtype)
    expected = F.nll_loss(x.float(), t, weight=w.float(), reduction=reduction).to(dtype)
    got = F.nll_loss(x.to("tpu"), t.to("tpu"), weight=w.to("tpu"), reduction=reduction)
    assert got.dtype == dtype
    _same(expected, got)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float64])
def test_out_of_a_wider_dtype_gets_the_result_rounded_first(each_mode, dtype, out_dtype):
    # The CPU computes in the inputs' dtype (its float32 opmath, rounded to
    # it) and then casts to out=: a float64 out holds the 16-bit result.
    torch.manual_seed(0)
    x = (torch.randn(1024) * 30).to(dtype).abs()
    ops = [torch.sqrt, torch.exp, torch.sin, lambda a, out: torch.pow(a, 1.5, out=out),
           lambda a, out: torch.pow(a, 3, out=out), lambda a, out: torch.mul(a, 2.5, out=out)]
    for fn in ops:
        want = fn(x, out=torch.empty(1024, dtype=out_dtype))
        got = torch.empty(1024, dtype=out_dtype, device="tpu")
        fn(x.to("tpu"), out=got)
        _same(want, got)
