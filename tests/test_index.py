"""gather, the scatter family, take/put_, index_select/add/copy/fill/reduce,
eye and linalg.cross on the device against the CPU, in every mode: 0-d and
int32 indices, every reduction with and without self, 16-bit floats,
NaN/Inf, out= and in-place forms, device-side range checks, and no CPU
fallback."""
import pytest
import torch

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

G = torch.Generator().manual_seed(0)
X = torch.randn(4, 5, generator=G)
NAN = torch.tensor([[1.0, float("nan"), -2.0], [float("inf"), 0.5, -float("inf")]])


def same(fn, *args, tol=1e-5):
    expected = fn(*args)
    got = fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])
    if isinstance(expected, torch.Tensor):
        got, expected = [got], [expected]
    for g, e in zip(got, expected):
        g = g.cpu()
        assert g.dtype == e.dtype and g.shape == e.shape, (g, e)
        torch.testing.assert_close(g, e, equal_nan=True, rtol=tol, atol=tol)


def no_fallback():
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def test_gather_and_scatter_take_int32_and_int64_indices():
    torchtpu.debug.reset_metrics()
    idx = torch.tensor([[0, 4, 1], [3, 3, 2]])
    for i in (idx, idx.int()):
        same(lambda t, j: torch.gather(t, 1, j), X, i)
        same(lambda t, j: t.scatter(1, j, -1.0), X, i[:, :1])
        same(lambda t, j: t.scatter_add(1, j, torch.ones(2, 3, device=t.device)), X, i)
        same(lambda t, j: t.scatter_reduce(1, j, torch.full((2, 3), 2.0, device=t.device), "prod"), X, i)
    same(lambda t, j: torch.gather(t, 1, j, out=torch.empty(0, device=t.device)), X, idx)
    no_fallback()


def test_zero_dim_self_index_and_src():
    torchtpu.debug.reset_metrics()
    s = torch.tensor(3.0)
    same(lambda t: t.index_add(0, torch.tensor([0], device=t.device), torch.tensor(2.0, device=t.device)), s)
    same(lambda t: t.index_select(0, torch.tensor(0, device=t.device)), s)
    same(lambda t: t.scatter_add(0, torch.tensor([0, 0], device=t.device), torch.tensor([2.0, 4.0], device=t.device)), s)
    same(lambda t: t.scatter_add(0, torch.tensor(0, device=t.device), torch.tensor(2.0, device=t.device)), s)
    same(lambda t: t.gather(0, torch.tensor([0, 0], device=t.device)), s)
    same(lambda t: t.scatter_reduce(0, torch.tensor([0, 0], device=t.device),
                                    torch.tensor([2.0, 4.0], device=t.device), "mean"), s)
    same(lambda t: t.index_fill(0, torch.tensor([0], device=t.device), 2.0), s)
    same(lambda t: t.index_copy(0, torch.tensor([0], device=t.device), torch.tensor(2.0, device=t.device)), s)
    same(lambda t: t.mean(0, keepdim=True), s)
    no_fallback()


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    torchtpu.debug.reset_metrics()
    idx = torch.tensor([[0, 0, 2, 2, 2], [1, 4, 1, 4, 1]])
    src = torch.randn(2, 5, generator=G) * 3
    f = lambda t, s: t.scatter_reduce(1, idx.to(t.device), s, reduce, include_self=include_self)
    same(f, X[:2], src)
    same(f, X[:2].t().contiguous().t(), src)  # non-contiguous self
    same(f, X[:2].bfloat16(), src.bfloat16(), tol=1.6e-2)
    same(f, torch.randint(-9, 9, (2, 5)), torch.randint(-9, 9, (2, 5)))
    same(f, NAN[:, :3].repeat(1, 2)[:, :5], src)
    same(lambda t, s: t.clone().scatter_reduce_(1, idx.to(t.device), s, reduce, include_self=include_self), X[:2], src)
    out = lambda t, s: torch.scatter_reduce(t, 1, idx.to(t.device), s, reduce, include_self=include_self,
                                            out=torch.empty(0, device=t.device))
    same(out, X[:2], src)
    no_fallback()


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(reduce, include_self):
    torchtpu.debug.reset_metrics()
    src = torch.randn(4, 3, generator=G)
    for idx in (torch.tensor([0, 2, 0, 2]), torch.tensor([1, 1, 1, 3], dtype=torch.int32)):
        f = lambda t, s: t.index_reduce(1, idx.to(t.device), s.t(), reduce, include_self=include_self)
        same(f, X[:3], src)
        same(f, torch.randint(-9, 9, (3, 5)), torch.randint(-9, 9, (4, 3)))
    no_fallback()


def test_index_select_add_copy_fill():
    torchtpu.debug.reset_metrics()
    i = torch.tensor([3, 0, 3])
    same(lambda t: t.index_select(1, i.to(t.device)), X)
    same(lambda t: t.index_select(1, i.int().to(t.device)), X.bfloat16())
    same(lambda t: torch.index_select(t, 0, i.to(t.device), out=torch.empty(0, device=t.device)), X)
    same(lambda t: t.index_select(0, torch.tensor([], dtype=torch.long, device=t.device)), X)
    same(lambda t: t.index_add(1, i.to(t.device), torch.ones(4, 3, device=t.device), alpha=2), X)
    same(lambda t: t.index_copy(0, torch.tensor([2, 0], device=t.device), torch.zeros(2, 5, device=t.device)), X)
    same(lambda t: t.index_fill(1, torch.tensor([-1, 0], device=t.device), float("nan")), X)
    same(lambda t: t.index_fill(0, torch.tensor([1], device=t.device), torch.tensor(7.0)), X)  # CPU 0-d value
    same(lambda t: t.t().index_fill(1, torch.tensor([2], device=t.device), -1), torch.randint(0, 5, (4, 5)))
    no_fallback()


def test_take_and_put():
    torchtpu.debug.reset_metrics()
    idx = torch.tensor([[0, -1], [7, -20]])
    same(lambda t: torch.take(t, idx.to(t.device)), X)
    same(lambda t: torch.take(t.t(), idx.to(t.device)), X)  # non-contiguous: logical order
    same(lambda t: t.clone().put_(idx.to(t.device), torch.ones(2, 2, device=t.device), accumulate=True), X)
    same(lambda t: t.clone().put_(torch.tensor([1, 19], device=t.device), torch.zeros(2, device=t.device)), X)
    no_fallback()


def test_out_of_range_indices_raise():
    x = X.to("tpu")
    for fn, exc in [
        (lambda: torch.gather(x, 1, torch.tensor([[5]], device="tpu")), RuntimeError),
        (lambda: x.scatter(1, torch.tensor([[-1]], device="tpu"), 1.0), RuntimeError),
        (lambda: x.scatter_reduce(1, torch.tensor([[9]], device="tpu"), x, "amax"), RuntimeError),
        (lambda: torch.take(x, torch.tensor([20], device="tpu")), IndexError),
        (lambda: x.index_fill(0, torch.tensor([4], device="tpu"), 1.0), IndexError),
        (lambda: x.index_reduce(0, torch.tensor([4], device="tpu"), x[:1], "prod"), IndexError),
        (lambda: x.index_copy(0, torch.tensor([-1], device="tpu"), x[:1]), IndexError),
        (lambda: torch.tensor(3.0, device="tpu").index_select(0, torch.tensor([1], device="tpu")), IndexError),
    ]:
        with pytest.raises(exc):
            fn().cpu()
    assert torch.gather(x, 1, torch.tensor([[4]], device="tpu")).item() == X[0, 4].item()  # later ops still work


def test_shape_and_dtype_errors_match_the_cpu():
    for t in (X, X.to("tpu")):
        i = torch.tensor([[0]], device=t.device)
        with pytest.raises(RuntimeError, match="int32/int64"):
            torch.gather(t, 1, i.float())
        with pytest.raises(RuntimeError, match="reduce argument"):
            t.scatter_reduce(1, i, t, "foo")
        with pytest.raises(RuntimeError, match="same scalar type|same dtype|dtype"):
            t.index_add(0, torch.tensor([0], device=t.device), t[:1].double())
        with pytest.raises(RuntimeError, match="Index to scalar"):
            torch.tensor(1.0, device=t.device).index_select(0, torch.tensor([0, 0], device=t.device))


def test_eye_and_cross():
    torchtpu.debug.reset_metrics()
    for dt in (torch.float32, torch.bool, torch.int32):
        got = torch.eye(3, 4, dtype=dt, device="tpu").cpu()
        assert torch.equal(got, torch.eye(3, 4, dtype=dt))
    assert torch.eye(0, device="tpu").shape == (0, 0)
    a, b = torch.randn(4, 3, generator=G), torch.randn(1, 3, generator=G)
    same(lambda x, y: torch.linalg.cross(x, y), a, b)
    same(lambda x, y: torch.cross(x.t(), y.t(), dim=0), a, b.expand(4, 3))
    same(lambda x, y: torch.linalg.cross(x, y), a.bfloat16(), b.bfloat16(), tol=1.6e-2)
    no_fallback()


def test_trace_nonzero_masked_select_repeat_interleave():
    torchtpu.debug.reset_metrics()
    for x in (X, X.bfloat16(), torch.randint(-5, 5, (4, 3)), X[:, :0]):
        same(lambda t: t.trace(), x, tol=1.6e-2)
    m = torch.tensor([[True, False, True], [False, False, True]])
    for x in (m, NAN, torch.tensor(0.0), torch.tensor(2), torch.zeros(2, 0), NAN.t()):
        same(lambda t: torch.nonzero(t), x)
        same(lambda t: torch.argwhere(t), x)
        same(lambda t: torch.nonzero_static(t, size=4, fill_value=-7), x)
    same(lambda t: torch.nonzero(t, out=torch.empty(0, dtype=torch.long, device=t.device)), m)
    same(lambda t, k: torch.masked_select(t, k), NAN[:2], m)
    same(lambda t, k: torch.masked_select(t, k), NAN[:2].bfloat16(), m[0])  # broadcast mask
    same(lambda t, k: torch.masked_select(t, k), torch.tensor(3.0), torch.tensor(True))
    for r in (torch.tensor([2, 0, 1]), torch.tensor([0, 3], dtype=torch.int32), torch.tensor([], dtype=torch.long)):
        same(lambda t: torch.repeat_interleave(t), r)
    same(lambda t: torch.repeat_interleave(t, output_size=3), torch.tensor([2, 0, 1]))
    no_fallback()
    with pytest.raises(RuntimeError, match="negative"):
        torch.repeat_interleave(torch.tensor([2, -1], device="tpu")).cpu()


def test_narrow_copy_and_unfold_backward():
    torchtpu.debug.reset_metrics()
    same(lambda t: torch.narrow_copy(t, 1, -3, 2), X)
    same(lambda t: torch.narrow_copy(t.t(), 0, 1, 0), X)
    for size, step in ((2, 1), (3, 2), (1, 3)):
        g = torch.randn(4, (5 - size) // step + 1, size, generator=G)
        same(lambda t: torch.ops.aten.unfold_backward(t, [4, 5], 1, size, step), g)
    y = X.clone().requires_grad_()
    yd = X.to("tpu").requires_grad_()
    (y.unfold(0, 2, 1) ** 2).sum().backward()
    (yd.unfold(0, 2, 1) ** 2).sum().backward()
    torch.testing.assert_close(yd.grad.cpu(), y.grad)
    no_fallback()


def test_matrix_products_with_bias():
    torchtpu.debug.reset_metrics()
    b1, b2 = torch.randn(3, 2, 4, generator=G), torch.randn(3, 4, 5, generator=G)
    bias = torch.randn(2, 5, generator=G)
    same(lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2), bias, b1, b2)
    same(lambda c, a, b: torch.addbmm(c, a, b, beta=0.5, alpha=2), bias, b1, b2)
    same(lambda c, a, b: torch.baddbmm(c, a, b, beta=0), torch.full((2, 5), float("nan")), b1, b2)  # beta 0: ignored
    same(lambda c, a, b: torch.baddbmm(c, a, b), bias.bfloat16(), b1.bfloat16(), b2.bfloat16(), tol=1.6e-2)
    same(lambda c, a, b: torch.addmv(c, a, b, alpha=-1), bias[0, :2], b1[0], b2[0, :, 0])
    same(lambda c, a, b: c.clone().addmv_(a, b), bias[0, :2], b1[0], b2[0, :, 0])
    same(lambda a, b: torch.vdot(a, b), b2[0, 0], b2[1, 0])
    ints = torch.randint(-3, 4, (2, 3, 3), generator=G)
    same(lambda c, a, b: torch.baddbmm(c, a, b, alpha=2), ints[0], ints, ints)
    no_fallback()
