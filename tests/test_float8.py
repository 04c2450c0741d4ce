"""float8 tensors on tpu (float8_e4m3fn, float8_e5m2 and their fnuz variants)
against the CPU, in every mode: storage and copies, casts from and to every
float dtype (float8_e4m3fn saturating at +-448, as PyTorch casts), the ops
PyTorch's CPU kernels define for them, torch._scaled_mm (per tensor and per
row), and the CPU's NotImplementedError for the rest."""
import pytest
import torch

import torchtpu
from torchtpu import debug

pytestmark = pytest.mark.usefixtures("each_mode")

F8 = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]
VALUES = torch.tensor([[0.3, -1.7, 448.0, 1e6], [float("nan"), float("inf"), -0.0, 1e-3],
                       [2.5, 3.25, -100.0, 7.0], [0.01, -0.02, 60000.0, -1e-5]])


def same(got, expected):
    """Equal values (float8 compared as float32; NaN equals NaN)."""
    got = got.cpu()
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got, expected)
    if expected.dtype in F8:
        got, expected = got.float(), expected.float()
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", F8, ids=str)
def test_storage_and_casts(dtype):
    x = VALUES.to(dtype)
    same(VALUES.to("tpu").to(dtype), x)  # cast on the device
    same(x.to("tpu"), x)  # copies keep the bits
    for other in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        same(VALUES.to(other).to("tpu").to(dtype), VALUES.to(other).to(dtype))
        same(x.to("tpu").to(other), x.to(other))
    finite = x.float().isfinite()
    same(x.to("tpu").to(torch.int32)[finite], x.to(torch.int32)[finite])
    same(x.to("tpu").bool(), x.bool())
    for other in F8:
        same(x.to("tpu").to(other), x.to(other))
    assert x.to("tpu")[0, 0].item() == x[0, 0].item()
    t = torch.zeros(2, 3, dtype=dtype, device="tpu")
    same(t, torch.zeros(2, 3, dtype=dtype))
    same(torch.ones(3, dtype=dtype, device="tpu"), torch.ones(3, dtype=dtype))


@pytest.mark.parametrize("dtype", F8, ids=str)
def test_the_ops_the_cpu_defines(dtype):
    debug.reset_metrics()
    x = VALUES.to(dtype)
    d = x.to("tpu")
    i = torch.tensor([2, 0])
    mask = torch.tensor([True, False, True, False])[:, None]
    cases = [
        lambda t: t.clone(), lambda t: t.t().contiguous(), lambda t: torch.cat([t, t[:1]]),
        lambda t: t.index_select(0, i.to(t.device)), lambda t: t[i.to(t.device)], lambda t: t.flip(0),
        lambda t: t.repeat(2, 1), lambda t: torch.nn.functional.pad(t, (1, 2)), lambda t: t.clone().fill_(1.5),
        lambda t: t.clone().zero_(), lambda t: t == t.t(), lambda t: t != 0, lambda t: t.isnan(),
        lambda t: t.abs(), lambda t: t * t.flip(0), lambda t: t @ t.t(),
        lambda t: torch.where(mask.to(t.device), t, t.flip(0)),
        lambda t: t.clone().index_put_((i.to(t.device),), torch.tensor(1.0).to(t.dtype).to(t.device)),
        lambda t: t.view(torch.uint8),
    ]
    for fn in cases:
        same(fn(d), fn(x))
    torchtpu.synchronize()
    assert debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("dtype", F8, ids=str)
def test_the_cpu_refuses_the_rest(dtype):
    x = VALUES.to(dtype)
    for fn in (lambda t: t + t, lambda t: -t, lambda t: t.sum(), lambda t: t < t, lambda t: t * 1.5,
               lambda t: torch.arange(3, dtype=t.dtype, device=t.device), lambda t: t.sort()):
        for t in (x, x.to("tpu")):
            with pytest.raises(NotImplementedError, match="not implemented for 'Float8"):
                r = fn(t)
                if isinstance(r, torch.Tensor):
                    r.cpu()


@pytest.mark.parametrize("out_dtype", [None, torch.float32, torch.bfloat16, torch.float8_e4m3fn])
def test_scaled_mm(out_dtype):
    debug.reset_metrics()
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(16, 32, generator=g) * 4).to(torch.float8_e4m3fn)
    b = (torch.randn(24, 32, generator=g) * 4).to(torch.float8_e5m2).t()  # column-major, as cuBLAS takes it
    bias = torch.randn(24, generator=g)
    scales = [(torch.tensor(0.5), torch.tensor(2.0)),
              (torch.rand(16, 1, generator=g) + 0.5, torch.rand(1, 24, generator=g) + 0.5)]
    for sa, sb in scales:
        kw = dict(out_dtype=out_dtype)
        if out_dtype == torch.float8_e4m3fn:
            kw["scale_result"] = torch.tensor(8.0)
        elif out_dtype is not None:
            kw["bias"] = bias.to(out_dtype)
        expected = torch._scaled_mm(a, b, sa, sb, **kw)
        got = torch._scaled_mm(a.to("tpu"), b.to("tpu"), sa.to("tpu"), sb.to("tpu"),
                               **{k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in kw.items()})
        assert got.dtype == expected.dtype
        tol = {torch.bfloat16: 2e-2, torch.float8_e4m3fn: 0.13}.get(expected.dtype, 1e-5)
        torch.testing.assert_close(got.cpu().float(), expected.float(), rtol=tol, atol=tol)
    with pytest.raises(ValueError, match="Invalid scaling configuration"):
        torch._scaled_mm(a.to("tpu"), b.to("tpu"), torch.ones(3, device="tpu"), torch.ones(3, device="tpu"))
    torchtpu.synchronize()
    assert debug.metrics()["cpu_fallbacks"] == {}
