"""Sorting and order statistics on the device against the CPU, in every mode:
sort (stable, descending, NaN order, -0.0), argsort/msort, topk, kthvalue,
median/nanmedian, cummax/cummin, logcumsumexp, 16-bit floats, integers and
bool, 0-d, empty and non-contiguous inputs, gradients, and no CPU fallback."""
import pytest
import torch

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

NAN, INF = float("nan"), float("inf")
G = torch.Generator().manual_seed(0)
X = torch.randn(5, 7, 6, generator=G)
# Ties, NaN, infinities and signed zeros, in several positions.
SPECIAL = torch.tensor([[3.0, NAN, -0.0, 1.0, 0.0, -INF, 1.0, NAN, INF, 3.0],
                        [0.0, 0.0, -0.0, 2.0, 2.0, NAN, -1.0, -1.0, 5.0, 4.0]])
INTS = torch.randint(-3, 4, (4, 9), generator=G)


def check(fn, *args, tol=None, exact_sign=False):
    """fn on the device against the CPU; every output (values and indices)."""
    expected = fn(*args)
    got = fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])
    exp_leaves = expected if isinstance(expected, tuple) else (expected,)
    got_leaves = got if isinstance(got, tuple) else (got,)
    for g, e in zip(got_leaves, exp_leaves):
        g = g.cpu()
        assert g.dtype == e.dtype and g.shape == e.shape, (g, e)
        kw = {} if tol is None else dict(rtol=tol, atol=tol)
        torch.testing.assert_close(g, e, equal_nan=True, **kw)
        if exact_sign and e.is_floating_point():
            assert torch.equal(torch.signbit(g), torch.signbit(e))


@pytest.fixture(autouse=True)
def no_fallback():
    torchtpu.debug.reset_metrics()
    yield
    torchtpu.synchronize()
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sort_each_dim(dim, descending):
    check(lambda t: torch.sort(t, dim=dim, descending=descending, stable=True), X)
    check(lambda t: torch.sort(t, dim, descending), X.transpose(0, 2))  # non-contiguous
    check(lambda t: torch.sort(t, dim=dim, descending=descending, stable=True), X.bfloat16())
    check(lambda t: torch.argsort(t, dim=dim, descending=descending, stable=True), X.half())


@pytest.mark.parametrize("descending", [False, True])
def test_sort_nan_ties_signed_zero(descending):
    # NaN sorts above everything (first when descending); equal values, -0.0
    # and 0.0 included, keep their order.
    check(lambda t: torch.sort(t, dim=1, descending=descending, stable=True), SPECIAL, exact_sign=True)
    check(lambda t: torch.sort(t, dim=1, descending=descending, stable=True), INTS)
    check(lambda t: torch.sort(t, dim=1, descending=descending, stable=True), INTS.int())
    check(lambda t: torch.sort(t, dim=0, descending=descending, stable=True), INTS > 0)
    check(lambda t: torch.msort(t), SPECIAL.t())


def test_sort_edges_and_out():
    check(lambda t: torch.sort(t), torch.tensor(2.5))
    check(lambda t: torch.sort(t, 0, True), torch.tensor(7))
    check(lambda t: torch.sort(t, 1), torch.empty(3, 0))
    check(lambda t: torch.sort(t, 0), torch.ones(1, 4))
    v, i = torch.empty(0, device="tpu"), torch.empty(0, dtype=torch.long, device="tpu")
    r = torch.sort(X.to("tpu"), dim=1, stable=True, out=(v, i))
    assert r[0] is v and r[1] is i
    e = torch.sort(X, dim=1, stable=True)
    assert torch.equal(v.cpu(), e[0]) and torch.equal(i.cpu(), e[1])
    with pytest.raises(RuntimeError, match="dtype"):
        torch.sort(X.to("tpu"), out=(torch.empty(0, dtype=torch.long, device="tpu"), i))
    with pytest.raises(IndexError):
        torch.sort(X.to("tpu"), 3)


def test_quantile_sorts_on_device():
    q = torch.tensor([0.0, 0.25, 0.5, 1.0])
    check(lambda t, q: torch.quantile(t, q, dim=1), X, q)
    check(lambda t, q: torch.nanquantile(t, q, dim=1), SPECIAL, q)


@pytest.mark.parametrize("largest", [True, False])
def test_topk(largest):
    check(lambda t: torch.topk(t, 3, dim=1, largest=largest), X)
    check(lambda t: torch.topk(t, 2, dim=0, largest=largest), X.transpose(0, 1))
    no_ties = torch.tensor([[NAN, 3.0, -1.0, INF, 0.5], [2.0, -INF, NAN, 7.0, -3.0]])
    check(lambda t: torch.topk(t, 4, largest=largest), no_ties)  # NaN largest
    check(lambda t: torch.topk(t, 6, largest=largest), X.bfloat16())
    check(lambda t: torch.topk(t, 1, largest=largest), torch.tensor(2.0))
    check(lambda t: torch.topk(t, 0, largest=largest), X)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.topk(X.to("tpu"), 7, dim=0)


def test_kthvalue_and_median_values_and_indices():
    check(lambda t: torch.kthvalue(t, 3, 1), X)
    distinct = (torch.randperm(210, generator=G).reshape(5, 7, 6) / 8).half()  # ties may pick another index
    check(lambda t: torch.kthvalue(t, 2, 0, True), distinct)
    check(lambda t: torch.kthvalue(t, 1), torch.tensor(4.0))
    check(lambda t: torch.median(t, 1), X)
    check(lambda t: torch.median(t, -1, True), X)
    check(lambda t: torch.nanmedian(t, 2), X.transpose(0, 2))
    # NaN: median gives the first NaN (value and index), nanmedian skips them.
    rows = torch.tensor([[3.0, NAN, 1.0, NAN, 2.0], [NAN, NAN, NAN, NAN, NAN], [4.0, 1.0, 2.0, 8.0, 0.5]])
    check(lambda t: torch.median(t, 1), rows)
    check(lambda t: torch.nanmedian(t, 1), rows[[0, 2]])
    # An all-NaN row: NaN (the CPU's nth_element may name any of its indices).
    assert torch.nanmedian(rows.to("tpu"), 1).values.cpu()[1].isnan()
    # Integers with ties: the middle of the stable order, as the CPU.
    check(lambda t: torch.median(t, 1), INTS)
    check(lambda t: torch.median(t), INTS)
    check(lambda t: torch.median(t), SPECIAL)
    check(lambda t: torch.nanmedian(t), SPECIAL)
    check(lambda t: torch.nanmedian(t), torch.full((3,), NAN))
    check(lambda t: torch.median(t), torch.empty(0))
    check(lambda t: torch.median(t, 0), torch.tensor(1.5))
    check(lambda t: torch.median(t, 1), torch.empty(0, 3))
    with pytest.raises(IndexError, match="non-zero size"):
        torch.median(torch.empty(3, 0, device="tpu"), 1)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.kthvalue(X.to("tpu"), 8, 1)


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
def test_cummax_cummin(op):
    check(lambda t: op(t, 1), X)
    check(lambda t: op(t, 0), X.transpose(0, 2))
    check(lambda t: op(t, 1), SPECIAL, exact_sign=True)  # NaN takes over, ties take the later index
    check(lambda t: op(t, 1), INTS)
    check(lambda t: op(t, 0), INTS > 0)
    check(lambda t: op(t, 0), X[0, 0].bfloat16())
    check(lambda t: op(t, 0), torch.tensor(3.0))
    check(lambda t: op(t, 1), torch.empty(2, 0))
    check(lambda t: op(t, 0), torch.arange(40.0).sin())  # several log steps


def test_logcumsumexp():
    check(lambda t: torch.logcumsumexp(t, 1), X)
    check(lambda t: torch.logcumsumexp(t, 0), X.transpose(0, 2))
    check(lambda t: torch.logcumsumexp(t, 1), SPECIAL)
    check(lambda t: torch.logcumsumexp(t, 0), torch.tensor([-INF, -INF, INF, INF, 1.0, NAN, 2.0]))
    check(lambda t: torch.logcumsumexp(t, 0), (X[0, :, 0] * 30).bfloat16())
    check(lambda t: torch.logcumsumexp(t, 0), torch.tensor(0.5))
    check(lambda t: torch.logcumsumexp(t, 0), torch.empty(0))
    out = torch.empty(0, device="tpu")
    torch.logcumsumexp(X.to("tpu"), 2, out=out)
    torch.testing.assert_close(out.cpu(), torch.logcumsumexp(X, 2))


def grads(fn, x):
    a = x.clone().requires_grad_()
    b = x.to("tpu").requires_grad_()
    ga, = torch.autograd.grad(sum(t.sum() for t in fn(a) if t.is_floating_point()), a)
    gb, = torch.autograd.grad(sum(t.sum() for t in fn(b) if t.is_floating_point()), b)
    torch.testing.assert_close(gb.cpu(), ga)


@pytest.mark.parametrize("fn", [
    lambda t: torch.sort(t, 0), lambda t: torch.topk(t, 1, 0), lambda t: torch.kthvalue(t, 1, 0),
    lambda t: torch.median(t, 0), lambda t: torch.nanmedian(t, 0), lambda t: torch.cummax(t, 0),
    lambda t: torch.cummin(t, 0), lambda t: torch.max(t, 0), lambda t: torch.min(t, 0),
    lambda t: torch.max(t, 0, True),
])
def test_gradients_including_0d(fn):
    grads(fn, X[:, :, 0])
    grads(fn, torch.tensor(1.25))  # 0-d: the backward scatters into a 0-d tensor


def test_scatter_into_0d():
    check(lambda s, i, v: torch.scatter(s, 0, i, v), torch.tensor(1.0), torch.tensor(0), torch.tensor(5.0))
    check(lambda s, i, v: torch.scatter_add(s, 0, i, v), torch.tensor(1.0), torch.tensor([0]), torch.tensor([5.0]))
    s = torch.tensor(1.0, device="tpu")
    s.scatter_add_(0, torch.tensor(0, device="tpu"), torch.tensor(2.0, device="tpu"))
    assert s.item() == 3.0


def test_mode_matches_the_cpu_sort():
    # Up to 16 elements the CPU's insertion sort is replayed, NaN included.
    g = torch.Generator().manual_seed(1)
    ties = torch.randint(-2, 3, (40, 9), generator=g).float()
    ties[torch.rand(40, 9, generator=g) < 0.15] = NAN
    check(lambda t: torch.mode(t, 1), ties)
    check(lambda t: torch.mode(t, 0, True), ties[:16])
    check(lambda t: torch.mode(t, 1), INTS)
    check(lambda t: torch.mode(t, 1), INTS > 0)
    check(lambda t: torch.mode(t), X.bfloat16())
    check(lambda t: torch.mode(t, 1), X.transpose(1, 2))
    check(lambda t: torch.mode(t), torch.tensor(3.0))
    check(lambda t: torch.mode(t, 1), torch.empty(0, 2))
    v, i = torch.empty(0, device="tpu"), torch.empty(0, dtype=torch.long, device="tpu")
    torch.mode(ties.to("tpu"), 1, out=(v, i))
    e = torch.mode(ties, 1)
    torch.testing.assert_close(v.cpu(), e.values, equal_nan=True)
    assert torch.equal(i.cpu(), e.indices)
    with pytest.raises(IndexError, match="non-zero size"):
        torch.mode(torch.empty(2, 0, device="tpu"), 1)


def test_mode_of_long_slices():
    # Beyond 16 elements the CPU's introsort picks among the positions of the
    # mode: the value must match, the index must hold that value.
    torchtpu.debug.reset_metrics()
    for x in (torch.randint(0, 4, (3, 40), generator=G), torch.randn(5, 33, generator=G).round(),
              torch.randint(-3, 3, (2, 17, 3), generator=G).float()):
        dim = 1
        exp = torch.mode(x, dim)
        for got in (torch.mode(x.to("tpu"), dim),
                    torch.mode(x.to("tpu"), dim, out=(torch.empty(0, dtype=x.dtype, device="tpu"),
                                                      torch.empty(0, dtype=torch.long, device="tpu")))):
            assert torch.equal(got.values.cpu(), exp.values)
            picked = torch.gather(x, dim, got.indices.cpu().unsqueeze(dim)).squeeze(dim)
            assert torch.equal(picked, exp.values)
    torchtpu.synchronize()
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_and_bucketize(right):
    bnd = torch.tensor([-1.0, 0.0, 0.0, 2.5, 7.0, INF])
    vals = torch.tensor([[-2.0, 0.0, 2.5, 9.0], [NAN, -0.0, 7.0, INF]])
    check(lambda b, v: torch.searchsorted(b, v, right=right), bnd, vals)
    check(lambda b, v: torch.searchsorted(b, v, side="right" if right else "left", out_int32=True), bnd, vals)
    check(lambda b, v: torch.bucketize(v, b, right=right), bnd, vals)
    check(lambda b: torch.bucketize(2, b, right=right), bnd)
    check(lambda b: torch.searchsorted(b, 0.5, right=right), bnd)
    # Row-wise boundaries, an int boundary with float values, a sorter.
    rows = torch.sort(torch.randn(3, 8, generator=G), 1).values
    check(lambda b, v: torch.searchsorted(b, v, right=right), rows, torch.randn(3, 5, generator=G))
    check(lambda b, v: torch.searchsorted(b, v, right=right), torch.arange(10), torch.tensor([2.5, 3.0, -1.0]))
    perm = torch.randperm(8, generator=G)
    unsorted = rows[0][perm]
    check(lambda b, v, s: torch.searchsorted(b, v, sorter=s, right=right), unsorted, torch.randn(7, generator=G),
          torch.argsort(unsorted))
    # Unsorted boundaries and NaN boundaries: the CPU's binary search steps.
    check(lambda b, v: torch.searchsorted(b, v, right=right), torch.tensor([3.0, NAN, 1.0, 2.0, NAN]),
          torch.tensor([0.0, 1.5, 2.0, 3.0, NAN]))
    check(lambda b, v: torch.searchsorted(b, v), torch.empty(0), torch.tensor([1.0]))
    check(lambda b, v: torch.searchsorted(b, v), bnd, torch.empty(0, 3))
    out = torch.empty(0, dtype=torch.long, device="tpu")
    torch.bucketize(vals.to("tpu"), bnd.to("tpu"), right=right, out=out)
    assert torch.equal(out.cpu(), torch.bucketize(vals, bnd, right=right))
    with pytest.raises(RuntimeError, match="opposites"):
        torch.searchsorted(bnd.to("tpu"), vals.to("tpu"), right=True, side="left")
    with pytest.raises(RuntimeError, match="1 dimension"):
        torch.bucketize(vals.to("tpu"), rows.to("tpu"))


def test_isin():
    e = torch.tensor([[1.0, NAN, -0.0], [3.0, 2.5, INF]])
    t = torch.tensor([0.0, NAN, 3.0, INF, 7.0])
    for invert in (False, True):
        check(lambda a, b: torch.isin(a, b, invert=invert), e, t)
        check(lambda a, b: torch.isin(a, b, invert=invert), INTS, torch.tensor([1, -2]))
        check(lambda a, b: torch.isin(a, b, invert=invert), INTS, torch.tensor([1.5, 2.0]))  # promoted
        check(lambda a: torch.isin(a, 2, invert=invert), INTS)
        check(lambda b: torch.isin(3.0, b, invert=invert), t)
        check(lambda a, b: torch.isin(a, b, invert=invert), e, torch.empty(0))
        check(lambda a, b: torch.isin(a, b, invert=invert), X.half(), X[0, 0].half())
    with pytest.raises(RuntimeError, match="Unsupported input type"):
        torch.isin(INTS.to("tpu") > 0, torch.tensor([True], device="tpu"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_histc(dtype):
    x = (X * 4).to(dtype)
    check(lambda t: torch.histc(t, 10, -5, 5), x)
    check(lambda t: torch.histc(t, 7), x)  # edges from the data
    check(lambda t: torch.histc(t, 3, 0, 0), torch.full((4,), 2.0, dtype=dtype))  # equal extremes widened by 1
    check(lambda t: torch.histc(t, 4, -1, 1), torch.tensor([NAN, -1.0, 1.0, 0.5, 2.0, -INF], dtype=dtype))
    check(lambda t: torch.histc(t, 5), torch.tensor(2.0, dtype=dtype))
    check(lambda t: torch.histc(t, 5, 0, 1), torch.empty(0, dtype=dtype))
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(x.to("tpu"), 3, 2, 1)


def _same_unique(fn, x):
    want = fn(x)
    got = fn(x.to("tpu"))
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want):
        g = g.cpu()
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape)
        torch.testing.assert_close(g, w, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16])
def test_unique_and_unique_consecutive(dtype):
    """Sorted unique, consecutive unique, flat and along each dim, with inverse and counts, against the CPU;
    each NaN is its own value; empty and 0-d inputs; no CPU fallback."""
    torchtpu.debug.reset_metrics()
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 3, (4, 3, 5), generator=g).to(dtype)
    for kw in ({}, {"return_inverse": True}, {"return_counts": True},
               {"return_inverse": True, "return_counts": True}):
        _same_unique(lambda t: torch.unique(t, **kw), x)
        _same_unique(lambda t: torch.unique_consecutive(t, **kw), x)
        for dim in (0, 1, -1):
            _same_unique(lambda t: torch.unique(t, dim=dim, **kw), x)
            _same_unique(lambda t: torch.unique_consecutive(t, dim=dim, **kw), x)
        _same_unique(lambda t: torch.unique(t, **kw), x[:, 1, ::2])  # strided
        _same_unique(lambda t: torch.unique(t, **kw), x.new_tensor(1))  # 0-d
        _same_unique(lambda t: torch.unique(t, **kw), x[:0])
    if dtype == torch.float32:
        y = torch.tensor([2.0, float("nan"), 1.0, float("nan"), -0.0, 0.0, 2.0])
        _same_unique(lambda t: torch.unique(t, return_inverse=True, return_counts=True), y)
        _same_unique(lambda t: torch.unique_consecutive(t, return_counts=True), y)
    torchtpu.synchronize()
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("x", [torch.randn(100, generator=torch.Generator().manual_seed(1)),
                               torch.randn(7, 3, generator=torch.Generator().manual_seed(2)).t(),
                               torch.tensor([1., 1, 1]), torch.empty(0), torch.arange(10.),
                               torch.tensor([0., float("inf"), 2.]), torch.tensor(0.7)])
def test_histogram(x):
    # A bin count over the data's range or a given one (values outside and
    # +-inf skipped), weights, density, and explicit edges; no host sync is
    # needed for the data's extremes.
    torchtpu.debug.reset_metrics()
    w = torch.rand(x.shape, generator=torch.Generator().manual_seed(3))
    for bins, rng, weight, density in [(5, (0., 1.), None, False), (10, (-1., 2.), w, True),
                                       (1, (0., 0.), w, False), (100, (-3., 3.), None, True)]:
        want = torch.histogram(x, bins, range=rng, weight=weight, density=density)
        got = torch.histogram(x.to("tpu"), bins, range=rng, weight=None if weight is None else weight.to("tpu"),
                              density=density)
        for g, e in zip(got, want):
            torch.testing.assert_close(g.cpu(), e, equal_nan=True)
    if torch.isfinite(x).all():
        for g, e in zip(torch.histogram(x.to("tpu"), 7), torch.histogram(x, 7)):
            torch.testing.assert_close(g.cpu(), e)
    edges = torch.tensor([-1., 0., 0.5, 2.])
    for g, e in zip(torch.histogram(x.to("tpu"), edges.to("tpu"), weight=w.to("tpu")),
                    torch.histogram(x, edges, weight=w)):
        torch.testing.assert_close(g.cpu(), e)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def test_histogram_of_non_finite_data_raises_at_the_sync_point():
    # The CPU raises for a range it reads from data holding inf or NaN; the
    # device checks the extremes it computed and raises at the next sync.
    for bad in (float("inf"), float("nan")):
        with pytest.raises(RuntimeError, match="range of the input is not finite"):
            torch.histogram(torch.tensor([0., bad]).to("tpu"), 3)[0].cpu()


@pytest.mark.parametrize("shape,bins", [((50, 2), [3, 4]), ((4, 5, 3), [2, 1, 5]), ((20, 1), [7])])
def test_histogramdd(shape, bins):
    torchtpu.debug.reset_metrics()
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(shape, generator=gen)
    w = torch.rand(shape[:-1], generator=gen)
    for density in (False, True):
        want = torch.histogramdd(x, bins, weight=w, density=density)
        got = torch.histogramdd(x.to("tpu"), bins, weight=w.to("tpu"), density=density)
        torch.testing.assert_close(got.hist.cpu(), want.hist)
        for g, e in zip(got.bin_edges, want.bin_edges):
            torch.testing.assert_close(g.cpu(), e)
    edges = [torch.sort(torch.randn(4, generator=gen)).values for _ in range(shape[-1])]
    want = torch.histogramdd(x, edges)
    got = torch.histogramdd(x.to("tpu"), [e.to("tpu") for e in edges])
    torch.testing.assert_close(got.hist.cpu(), want.hist)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}
