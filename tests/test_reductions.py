"""var/std (and their _mean forms), norm, nansum, prod, count_nonzero,
aminmax, argmax/argmin, any/all and equal on the device against the CPU, in
every mode: out= forms, 0-d, empty, non-contiguous, 16-bit floats, NaN/Inf,
and no CPU fallback."""
import pytest
import torch

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

G = torch.Generator().manual_seed(0)
X = torch.randn(4, 5, 3, generator=G)
NAN = torch.tensor([[1.0, float("nan"), -2.0], [float("inf"), 0.5, -float("inf")], [0.0, -0.0, 3.0]])


def same(fn, *args, tol=1e-5):
    expected = fn(*args)
    got = fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])
    if isinstance(expected, torch.Tensor):
        got, expected = [got], [expected]
    for g, e in zip(got, expected):
        g = g.cpu()
        assert g.dtype == e.dtype and g.shape == e.shape, (g, e)
        torch.testing.assert_close(g, e, equal_nan=True, rtol=tol, atol=tol)


def out_like(t, dtype=None):
    return torch.empty(0, dtype=dtype or t.dtype, device=t.device)


@pytest.mark.parametrize("correction", [0, 1, 2.5])
def test_var_std_and_their_means(correction):
    torchtpu.debug.reset_metrics()
    for x in (X, X.transpose(0, 2), X.bfloat16(), NAN, torch.tensor(2.0)):
        tol = 1.6e-2 if x.dtype == torch.bfloat16 else 1e-5
        for dim in (None, 0, (0, -1)):
            if x.dim() == 0 and dim not in (None, 0):
                continue
            for kd in (False, True):
                same(lambda t: torch.var_mean(t, dim, correction=correction, keepdim=kd), x, tol=tol)
                same(lambda t: torch.std_mean(t, dim, correction=correction, keepdim=kd), x, tol=tol)
        same(lambda t: torch.var(t, 0, correction=correction, out=out_like(t)), x, tol=tol)
        same(lambda t: torch.std(t, correction=correction, out=out_like(t)), x, tol=tol)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def test_norm_out_and_dist():
    torchtpu.debug.reset_metrics()
    for p in (1, 2, 3.5, float("inf")):
        same(lambda t: torch.norm(t, p, dim=[0, 2], out=out_like(t)), X)
        same(lambda a, b: torch.dist(a, b, p), X, X.flip(0))
    same(lambda t: torch.nn.functional.pairwise_distance(t[0], t[1]), X)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def test_nansum_prod_count_nonzero():
    torchtpu.debug.reset_metrics()
    ints = torch.randint(-3, 4, (4, 5), generator=G)
    for fn in (lambda t: torch.nansum(t), lambda t: torch.nansum(t, 1, keepdim=True),
               lambda t: torch.nansum(t, 0, out=out_like(t, torch.float32 if t.is_floating_point() else torch.int64)),
               lambda t: torch.prod(t), lambda t: torch.prod(t, 1, keepdim=True),
               lambda t: torch.prod(t, 0, out=out_like(t, torch.float32 if t.is_floating_point() else torch.int64)),
               lambda t: torch.count_nonzero(t), lambda t: torch.count_nonzero(t, dim=1)):
        for x in (NAN, NAN.t(), ints, ints.int(), ints > 0):
            same(fn, x)
    same(lambda t: torch.prod(t, dtype=torch.float64), X[0])
    same(lambda t: torch.nansum(t.bfloat16()), NAN, tol=1.6e-2)
    same(lambda t: torch.prod(t, 1), X.bfloat16()[:, :, 0], tol=1.6e-2)
    same(lambda t: torch.prod(t), torch.tensor(3.0))
    same(lambda t: torch.prod(t, 0), torch.empty(0, 2))
    same(lambda t: torch.nansum(t), torch.empty(0))
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def test_extremes_and_logical_out_forms():
    torchtpu.debug.reset_metrics()
    for x in (X, NAN, torch.randint(-3, 4, (4, 5), generator=G), torch.tensor(1.5)):
        same(lambda t: torch.aminmax(t), x)
        same(lambda t: torch.aminmax(t, dim=0, keepdim=True), x)
        same(lambda t: torch.aminmax(t, out=(out_like(t), out_like(t))), x)
        same(lambda t: torch.argmax(t, 0, out=out_like(t, torch.int64)), x)
        same(lambda t: torch.argmin(t, out=out_like(t, torch.int64)), x)
        same(lambda t: torch.max(t, out=out_like(t)), x)
        same(lambda t: torch.min(t, out=out_like(t)), x)
        same(lambda t: torch.all(t, 0, out=out_like(t, torch.bool)), x)
        same(lambda t: torch.any(t, out=out_like(t, torch.bool)), x)
        same(lambda t: torch.any(t, dim=(0,), keepdim=True), x)
    same(lambda t: torch.all(t), torch.tensor([1, 2], dtype=torch.uint8))  # uint8 in, uint8 out
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}
    with pytest.raises(RuntimeError, match="aminmax"):
        torch.aminmax(torch.empty(0, device="tpu"))


def test_equal():
    torchtpu.debug.reset_metrics()
    x = X.to("tpu")
    assert torch.equal(x, x.clone())
    assert not torch.equal(x, x + 1e-6)
    assert not torch.equal(x, x[:2])
    assert torch.equal(torch.ones(3, device="tpu"), torch.ones(3, dtype=torch.int64, device="tpu"))
    n = NAN.to("tpu")
    assert torch.equal(n, n) == torch.equal(NAN, NAN)
    assert torch.equal(torch.empty(0, device="tpu"), torch.empty(0, device="tpu"))
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32,
                                   torch.int8, torch.uint8, torch.bool])
def test_hash_tensor_matches_the_cpu(dtype):
    """hash_tensor: the xor of each element's 64-bit pattern (floats as float64), over all or some dims."""
    torchtpu.debug.reset_metrics()
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 4, 5, generator=g) * 100).to(dtype)
    if dtype.is_floating_point:
        x[0, 0, 0] = float("nan")
        x[0, 0, 1] = -0.0
    for kw in ({}, {"dim": 1}, {"dim": (0, 2), "keepdim": True}, {"dim": -1}):
        want = torch.hash_tensor(x, **kw)
        got = torch.hash_tensor(x.to("tpu"), **kw).cpu()
        assert got.dtype == torch.uint64 and got.shape == want.shape
        assert torch.equal(got.view(torch.int64), want.view(torch.int64)), kw
    if dtype == torch.int64:  # values past 2**53 keep every bit
        big = torch.tensor([2 ** 62 + 1, -(2 ** 61) - 3, 2 ** 53 + 1])
        assert torch.equal(torch.hash_tensor(big.to("tpu")).cpu().view(torch.int64),
                           torch.hash_tensor(big).view(torch.int64))
    for t in (x[:, :0], x[:, :0].to("tpu")):  # both refuse an empty reduction
        with pytest.raises(RuntimeError, match="Expected reduction dim"):
            torch.hash_tensor(t)
        with pytest.raises(IndexError, match="to have non-zero size"):
            torch.hash_tensor(t, dim=1)
    assert torch.equal(torch.hash_tensor(x[:, :0].to("tpu"), dim=2).cpu().view(torch.int64),
                       torch.hash_tensor(x[:, :0], dim=2).view(torch.int64))
    torchtpu.synchronize()
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def test_sgn_backward_runs_on_the_device():
    torchtpu.debug.reset_metrics()
    x = torch.tensor([-2.0, 0.0, 3.0], device="tpu", requires_grad=True)
    torch.sgn(x).sum().backward()
    assert torch.equal(x.grad.cpu(), torch.zeros(3))
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce(reduce):
    """segment_reduce by lengths and by offsets, along the last dim of those (axis 0 and 1), with empty segments,
    an initial value, NaN, and the gradient (ties and zeros in the data), against the CPU."""
    torchtpu.debug.reset_metrics()
    g = torch.Generator().manual_seed(0)
    data = torch.randn(3, 6, 2, generator=g).round()  # ties and zeros
    data[1, 2, 0] = float("nan")
    lengths = torch.tensor([[2, 0, 4], [1, 3, 2], [6, 0, 0]])
    offsets = torch.cat([torch.zeros(3, 1, dtype=torch.long), lengths.cumsum(1)], 1)
    cases = [dict(lengths=lengths, axis=1), dict(offsets=offsets, axis=1), dict(lengths=lengths, axis=1, initial=2.0),
             dict(lengths=torch.tensor([1, 2, 0]), axis=0, unsafe=True)]
    for kw in cases:
        def run(dev):
            x = data.clone().to(dev).requires_grad_()
            args = {k: (v.to(dev) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
            out = torch.segment_reduce(x, reduce, **args)
            w = torch.arange(out.numel(), dtype=out.dtype, device=dev).view(out.shape) - 3
            out.nan_to_num(0).mul(w).sum().backward()
            return out, x.grad
        for got, want in zip(run("tpu"), run("cpu")):
            torch.testing.assert_close(got.cpu(), want, equal_nan=True, rtol=1e-5, atol=1e-5)
    torchtpu.synchronize()
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}
    with pytest.raises(RuntimeError, match="sum to data.size"):
        torch.segment_reduce(data.to("tpu"), reduce, lengths=torch.tensor([[1, 1, 1]] * 3).to("tpu"), axis=1).cpu()
