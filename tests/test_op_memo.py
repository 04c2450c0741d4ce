"""An op called again with identical arguments (the same op, layouts,
aliasing and numbers) reuses the graph its earlier call built
(csrc/aten/op_memo.h): foreach ops (an optimizer's step) and every other op
whose kernel builds one graph. The memo may only change how much host work a
call costs: every result here is compared with the CPU's and, exactly, with
the same calls with the memo off, in every mode, while what would change the
graph (a new layout, aliasing, dtype, an integer or special value, a storage
with no value yet, the default dtype, the matmul precision) changes it, and
what a graph cannot replay (random draws, device-side checks, data-dependent
shapes) still runs its kernel."""
import pytest
import torch

import torchtpu
from torchtpu import _C, debug

DEV = torch.device("tpu")
MODES = ["debug", "strict", "fused"]


@pytest.fixture(params=MODES)
def mode(request):
    old = torchtpu.get_eager_mode()
    torchtpu.set_eager_mode(request.param)
    yield request.param
    torchtpu.set_eager_mode(old)


@pytest.fixture
def memo_on():
    was = _C._op_memo()
    _C._set_op_memo(True)
    yield
    _C._set_op_memo(was)


def hits():
    return debug.metrics()["op_memo"]["hits"]


def params(device, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(4, 3), (5,), (), (2, 3, 2), (0, 3), (6, 4)]
    ps = [torch.nn.Parameter(torch.randn(s, generator=g).to(device)) for s in shapes]
    # A transposed (non-contiguous) parameter.
    ps.append(torch.nn.Parameter(torch.randn(3, 5, generator=g).to(device).t()))
    return ps


def train(device, memo, opt_cls, steps=6, **kw):
    """Optimizer steps with a schedule that changes the learning rate every
    step; gradients differ per step. Returns the parameters on the CPU."""
    _C._set_op_memo(memo)
    ps = params(device)
    opt = opt_cls(ps, lr=0.05, foreach=True, **kw)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + 0.37 * s))
    g = torch.Generator().manual_seed(1)
    for i in range(steps):
        for p in ps:
            if i == 3 and p.dim() == 1:
                p.grad = None  # skipped by this step: its step count falls behind the others'
            else:
                p.grad = torch.randn(p.shape, generator=g).to(device)
        opt.step()
        sched.step()
    return [p.detach().cpu() for p in ps]


@pytest.mark.parametrize("opt_cls,kw", [(torch.optim.AdamW, {}), (torch.optim.Adam, {"amsgrad": True}),
                                        (torch.optim.SGD, {"momentum": 0.9, "nesterov": True}),
                                        (torch.optim.RMSprop, {"momentum": 0.5})],
                         ids=["adamw", "adam_amsgrad", "sgd_nesterov", "rmsprop"])
def test_optimizer_steps_equal_memo_off_and_cpu(mode, memo_on, opt_cls, kw):
    before = hits()
    on = train(DEV, True, opt_cls, **kw)
    assert hits() > before, "later steps reuse the graphs of earlier ones"
    off = train(DEV, False, opt_cls, **kw)
    cpu = train("cpu", True, opt_cls, **kw)
    for a, b, c in zip(on, off, cpu):
        assert torch.equal(a, b)
        torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-6)


def lists(shapes, seed, dtype=torch.float32, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(s, generator=g) + 0.5).to(dtype).to(device) for s in shapes]


SHAPES = [(3, 4), (5,), (), (2, 3)]


def both(fn, *lists_):
    """fn over copies of the lists on the CPU and on the device; the
    device's first lists, read back, and the CPU's."""
    cpu = [[t.clone() for t in l] for l in lists_]
    dev = [[t.to(DEV) for t in l] for l in lists_]
    fn(*cpu)
    fn(*dev)
    return [t.cpu() for t in dev[0]], cpu[0]


@pytest.mark.parametrize("values", [
    [[0.3, -0.7, 1.5, 0.25], [0.4, -0.9, 2.5, 0.125], [1.0, 0.0, 2.0, -1.0], [0.11, 0.22, 0.33, 0.44]],
    [[0.3] * 4, [0.45] * 4, [0.6, 0.7, 0.8, 0.9], [float("nan"), float("inf"), -0.5, 3.0]],
], ids=["distinct", "equal_then_distinct"])
def test_changing_scalar_lists(mode, memo_on, values):
    """A ScalarList whose values change each call (Adam's step sizes): equal
    values, distinct ones, values kernels may treat specially, NaN and Inf."""
    for i, v in enumerate(values):
        got, want = both(lambda a, b, c: torch._foreach_addcdiv_(a, b, c, v), lists(SHAPES, i),
                         lists(SHAPES, i + 10), lists(SHAPES, i + 20))
        for x, y in zip(got, want):
            torch.testing.assert_close(x, y, equal_nan=True)


@pytest.mark.parametrize("values", [[0.3, 0.7, 1.0, 2.0, 0.0, -0.5, 1.7, float("nan")]])
def test_changing_scalar(mode, memo_on, values):
    for op in (torch._foreach_mul_, torch._foreach_add_):
        for i, v in enumerate(values):
            got, want = both(lambda a: op(a, v), lists(SHAPES, i))
            for x, y in zip(got, want):
                torch.testing.assert_close(x, y, equal_nan=True)
    for i, v in enumerate(values):
        got, want = both(lambda a, b: torch._foreach_lerp_(a, b, v), lists(SHAPES, i), lists(SHAPES, i + 5))
        for x, y in zip(got, want):
            torch.testing.assert_close(x, y, equal_nan=True)


def test_integer_scalars_and_dtypes(mode, memo_on):
    for dtype in (torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float64):
        for v in (3, 5, -2, 7):
            got, want = both(lambda a: torch._foreach_add_(a, v), lists(SHAPES, v, dtype))
            for x, y in zip(got, want):
                torch.testing.assert_close(x, y)


def test_aliasing_and_layout_change_the_graph(mode, memo_on):
    for _ in range(3):  # recorded, then reused
        got, want = both(lambda a, b: torch._foreach_add_(a, b, alpha=0.5), lists(SHAPES, 0), lists(SHAPES, 1))
        for x, y in zip(got, want):
            torch.testing.assert_close(x, y)
    # The same shapes, now each tensor added to itself.
    for _ in range(2):
        got, want = both(lambda a: torch._foreach_add_(a, a, alpha=0.5), lists(SHAPES, 2))
        for x, y in zip(got, want):
            torch.testing.assert_close(x, y)
    # The same shapes, one of them a transposed view of a larger storage,
    # another a view at an offset.
    for _ in range(2):
        base_t = torch.rand(4, 3) + 0.5
        base_o = torch.rand(7) + 0.5
        cpu = [base_t.t(), base_o[2:], torch.rand(()) + 0.5, torch.rand(2, 3) + 0.5]
        dev_bases = (base_t.to(DEV), base_o.to(DEV))
        dev = [dev_bases[0].t(), dev_bases[1][2:], cpu[2].to(DEV), cpu[3].to(DEV)]
        other = lists([(3, 4), (5,), (), (2, 3)], 3)
        torch._foreach_mul_(cpu, other)
        torch._foreach_mul_(dev, [t.to(DEV) for t in other])
        for x, y in zip(dev, cpu):
            torch.testing.assert_close(x.cpu(), y)
        torch.testing.assert_close(dev_bases[1].cpu(), base_o)


def test_destination_without_a_value_yet(mode, memo_on):
    """A storage that was never written reads as nothing: its graph differs
    from one that holds a value."""
    src = lists(SHAPES, 4)
    for _ in range(2):
        dst = [torch.empty(s, device=DEV) for s in SHAPES]
        torch._foreach_copy_(dst, [t.to(DEV) for t in src])
        for x, y in zip(dst, src):
            assert torch.equal(x.cpu(), y)
        torch._foreach_copy_(dst, [(t * 2).to(DEV) for t in src])
        for x, y in zip(dst, src):
            assert torch.equal(x.cpu(), y * 2)


def test_off_builds_every_call(mode):
    was = _C._op_memo()
    _C._set_op_memo(False)
    try:
        before = hits()
        for i in range(3):
            a = [t.to(DEV) for t in lists(SHAPES, i)]
            torch._foreach_mul_(a, 0.5)
        assert hits() == before
    finally:
        _C._set_op_memo(was)


def test_cpu_scalar_tensors_are_not_memoized(mode, memo_on):
    """A CPU 0-d tensor's value is read on the host: each call builds."""
    before = hits()
    for v in (0.5, 1.5, 2.5):
        got, want = both(lambda a: torch._foreach_mul_(a, torch.tensor(v)), lists(SHAPES, 0))
        for x, y in zip(got, want):
            torch.testing.assert_close(x, y)
    assert hits() == before


def test_which_tensors_share_a_storage(mode, memo_on):
    """The same shapes and storages, paired differently: [p, q] + [p, q]
    against [p, q] + [q, p]."""
    for swap in (False, False, True, True, False):
        cpu = lists([(3, 2), (3, 2)], 7)
        dev = [t.to(DEV) for t in cpu]
        torch._foreach_add_(cpu, cpu[::-1] if swap else cpu, alpha=0.25)
        torch._foreach_add_(dev, dev[::-1] if swap else dev, alpha=0.25)
        for x, y in zip(dev, cpu):
            torch.testing.assert_close(x.cpu(), y)


def test_a_storage_never_written(mode, memo_on):
    """A storage never written reads as zeros (no parameter): its graph is
    not the one of a storage that holds a value, whichever came first."""
    src = lists(SHAPES, 4)

    def run(memo):
        _C._set_op_memo(memo)
        out = []
        for empty in (False, False, True, False, True):
            dst = [torch.empty(s, device=DEV) for s in SHAPES]
            if not empty:
                torch._foreach_copy_(dst, [t.to(DEV) for t in src])
            torch._foreach_add_(dst, [t.to(DEV) for t in src])
            out.append([t.cpu() for t in dst])
        return out

    on, off = run(True), run(False)
    for a, b in zip(on, off):
        for x, y in zip(a, b):
            assert torch.equal(x, y)
    for x, y in zip(on[0], src):
        assert torch.equal(x, 2 * y)


# Ops other than foreach ops.

def small_model(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(6, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 16),
        torch.nn.Softmax(dim=-1), torch.nn.Linear(16, 3)).to(device)


def train_model(device, memo, steps=5):
    _C._set_op_memo(memo)
    model = small_model(device)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(3)
    losses = []
    for _ in range(steps):
        x = torch.randn(8, 6, generator=g).to(device)
        y = torch.randint(0, 3, (8,), generator=g).to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach().cpu())
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_training_equal_memo_off_and_cpu(mode, memo_on):
    before = hits()
    on = train_model(DEV, True)
    reused = hits() - before
    off = train_model(DEV, False)
    cpu = train_model("cpu", True)
    assert reused > 5 * 7, "forward and backward ops reuse graphs, not only the optimizer's foreach ops"
    for a, b, c in zip(on[0] + on[1], off[0] + off[1], cpu[0] + cpu[1]):
        assert torch.equal(a, b)
        torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-5)


def test_layouts_and_out_tensors(mode, memo_on):
    a = torch.rand(4, 5)
    b = torch.rand(4, 5)
    col = a.t().contiguous().t()  # the same values, column-major
    for layout in ("row", "row", "col", "col", "row"):
        x = a if layout == "row" else col
        xd = a.to(DEV) if layout == "row" else a.t().contiguous().to(DEV).t()
        got = torch.add(xd, b.to(DEV), alpha=0.5)
        want = torch.add(x, b, alpha=0.5)
        assert got.stride() == want.stride()
        torch.testing.assert_close(got.cpu(), want)
    for shape in [(4, 5), (4, 5), (2,), (4, 5), (0,), (4, 5)]:
        out = torch.empty(shape, device=DEV)
        torch.mul(a.to(DEV), b.to(DEV), out=out)
        assert out.shape == (4, 5)
        torch.testing.assert_close(out.cpu(), a * b)


def test_numbers_dtypes_and_settings(mode, memo_on):
    x = torch.rand(3, 4)
    for alpha in (0.5, 0.5, 2.0, -1.0, 3):
        torch.testing.assert_close(torch.sub(x.to(DEV), x.to(DEV) * 0.25, alpha=alpha).cpu(),
                                   torch.sub(x, x * 0.25, alpha=alpha))
    i = torch.arange(12).reshape(3, 4)
    for dt in (torch.float32, torch.float64, torch.float32):
        old = torch.get_default_dtype()
        torch.set_default_dtype(dt)
        try:
            got = i.to(DEV) / 7
            assert got.dtype == dt
            torch.testing.assert_close(got.cpu(), i / 7)
        finally:
            torch.set_default_dtype(old)
    m = torch.rand(8, 8) * 3 + 1
    results = []
    for prec in ("highest", "medium", "highest", "medium"):
        old = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(prec)
        try:
            results.append(torch.mm(m.to(DEV), m.to(DEV)).cpu())
        finally:
            torch.set_float32_matmul_precision(old)
    assert torch.equal(results[0], results[2]) and torch.equal(results[1], results[3])
    torch.testing.assert_close(results[0], m @ m)


def test_tuple_results(mode, memo_on):
    for seed in range(3):
        x = lists([(5, 7)], seed)[0]
        v, i = torch.max(x.to(DEV), dim=1)
        torch.testing.assert_close(v.cpu(), x.max(dim=1).values)
        assert torch.equal(i.cpu(), x.max(dim=1).indices)
        s, j = torch.sort(x.to(DEV), dim=0)
        assert torch.equal(s.cpu(), x.sort(dim=0).values) and torch.equal(j.cpu(), x.sort(dim=0).indices)
        out = torch.nn.functional.layer_norm(x.to(DEV), (7,))
        torch.testing.assert_close(out.cpu(), torch.nn.functional.layer_norm(x, (7,)))


def test_random_ops_draw_anew(mode, memo_on):
    x = torch.ones(64, 64, device=DEV)
    torch.manual_seed(5)
    masks = [torch.nn.functional.dropout(x, 0.5).cpu() for _ in range(3)]
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[1], masks[2])
    _C._set_op_memo(False)
    torch.manual_seed(5)
    again = [torch.nn.functional.dropout(x, 0.5).cpu() for _ in range(3)]
    for a, b in zip(masks, again):
        assert torch.equal(a, b)


def test_checks_and_data_dependent_shapes_still_run(mode, memo_on):
    x = torch.rand(6, 3)
    for idx in ([0, 5, 2], [1, 1, 4]):
        got = torch.index_select(x.to(DEV), 0, torch.tensor(idx).to(DEV))
        torch.testing.assert_close(got.cpu(), x[idx])
    with pytest.raises((IndexError, RuntimeError)):
        torch.index_select(x.to(DEV), 0, torch.tensor([0, 9, 2]).to(DEV)).cpu()
    for thr in (0.2, 0.5, 0.8, 0.5):
        got = x.to(DEV)[x.to(DEV) > thr]
        torch.testing.assert_close(got.cpu(), x[x > thr])
        assert torch.equal(torch.nonzero(x.to(DEV) > thr).cpu(), torch.nonzero(x > thr))


def test_a_call_is_recorded_when_its_arguments_repeat(mode, memo_on):
    """A one-shot call pays no recording; the second identical call records
    and the third takes the graph, each with the CPU's values."""
    x, y = torch.rand(13, 17), torch.rand(13, 17) + 0.5
    xd, yd = x.to(DEV), y.to(DEV)
    _C._set_op_memo(False)  # empties the table: another mode's run recorded these calls
    _C._set_op_memo(True)
    debug.reset_metrics()
    seen = []
    for _ in range(3):
        torch.testing.assert_close(torch.atan2(xd, yd).cpu(), torch.atan2(x, y))
        m = debug.metrics()["op_memo"]
        seen.append((m["records"], m["hits"]))
    assert seen[0] == (0, 0) and seen[1][0] == 1 and seen[2] == (1, 1), seen
