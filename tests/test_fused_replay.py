"""Fused Eager's replay: a graph cut once is recorded; while the next ops are
the recorded ones they take their recorded places and the recorded program
runs at the cut, without building the graph. Replay is asserted by counts
(ops replayed, recorded graphs given up, compilations) and results against
the CPU and against the same run with replay off, exactly."""
import threading

import pytest
import torch

import torchtpu
from torchtpu import _C, debug
from torchtpu.testing.models import CharData, TinyGPT


@pytest.fixture(autouse=True)
def fused():
    previous = torchtpu.get_eager_mode()
    torchtpu.set_eager_mode("fused")
    yield
    _C._set_fused_replay(True)
    torchtpu.set_eager_mode(previous)


def rand(*shape, seed=0, dtype=torch.float32):
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    if dtype.is_floating_point:
        return t.to(dtype)
    return (t * 10).to(dtype)


def counts():
    m = debug.metrics()
    return m["fused_replayed_ops"], m["fused_replay_misses"], m["fused_ops"], m["compilations"]


def body(x, w, variant="base"):
    """Five ops and a read; `variant` changes the first, a middle or the last op."""
    a = x + 1 if variant != "first" else x - 1
    b = a * w
    c = b.neg() if variant != "middle" else b.abs()
    d = torch.maximum(c, a)
    e = d + w if variant != "last" else d - w
    return e


def run_body(device, variant="base", dtype=torch.float32):
    x = rand(4, 8, seed=1, dtype=dtype).to(device)
    w = rand(4, 8, seed=2, dtype=dtype).to(device)
    return body(x, w, variant).cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64,
                                   torch.int32])
def test_a_repeated_graph_is_replayed_with_the_cpu_results(dtype):
    expect = run_body("cpu", dtype=dtype)
    for _ in range(2):
        run_body("tpu", dtype=dtype)
    debug.reset_metrics()
    for _ in range(3):
        assert torch.equal(run_body("tpu", dtype=dtype), expect)
    replayed, misses, ops, compiled = counts()
    assert replayed == ops == 15 and misses == 0 and compiled == 0


@pytest.mark.parametrize("variant,replayed", [("first", 0), ("middle", 2), ("last", 4)])
def test_an_op_that_differs_builds_the_rest_of_the_graph(variant, replayed):
    for _ in range(2):
        run_body("tpu")
    debug.reset_metrics()
    assert torch.equal(run_body("tpu", variant), run_body("cpu", variant))
    got_replayed, misses, ops, _ = counts()
    # The first op differing: no recording starts with it, nothing is replayed.
    assert (got_replayed, misses) == (replayed, 0 if variant == "first" else 1)
    # The recorded graph is still there for the ops that match it again.
    debug.reset_metrics()
    assert torch.equal(run_body("tpu"), run_body("cpu"))
    assert counts()[:3] == (5, 0, 5)


def test_a_graph_cut_earlier_or_later_than_recorded():
    x0, w0 = rand(3, 5, seed=3), rand(3, 5, seed=4)
    x, w = x0.to("tpu"), w0.to("tpu")

    def step(extra, early):
        y = (x * w).exp()
        if early:
            y.cpu()  # a sync point before the recorded cut
        z = y - w
        if extra:
            z = z * 2  # an op past the recorded cut
        return z.cpu()

    for _ in range(2):
        step(False, False)
    for extra, early in ((True, False), (False, True), (False, False)):
        debug.reset_metrics()
        cpu = ((x0 * w0).exp() - w0) * (2 if extra else 1)
        torch.testing.assert_close(step(extra, early), cpu, rtol=1e-6, atol=1e-6)
        misses = debug.metrics()["fused_replay_misses"]
        assert misses == (1 if extra or early else 0), (extra, early, misses)


def test_an_output_dying_before_the_cut_changes_the_program():
    x0 = rand(6, seed=5)
    x = x0.to("tpu")

    def step(keep):
        a = x * 3
        b = a + 1
        if not keep:
            del a  # one output fewer at the cut: the recorded program does not fit
            return b.cpu(), None
        return b.cpu(), a.cpu()

    for _ in range(2):
        step(True)
    debug.reset_metrics()
    b, _ = step(False)
    torch.testing.assert_close(b, x0 * 3 + 1)
    assert debug.metrics()["fused_replay_misses"] == 1
    b, a = step(True)
    torch.testing.assert_close(a, x0 * 3)
    torch.testing.assert_close(b, x0 * 3 + 1)


def make_job(device, seed=0):
    torch.manual_seed(seed)
    data = CharData()
    model = TinyGPT(data.vocab, width=32, layers=2, heads=4, max_len=16).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0 / (1 + i))  # a new learning rate every step
    gen = torch.Generator().manual_seed(seed)
    batches = [data.batch(4, 16, gen) for _ in range(8)]
    return model, opt, sched, batches


def train(device, steps, print_every=0, items=None):
    model, opt, sched, batches = make_job(device)
    losses = []
    for i in range(steps):
        x, y = batches[i % len(batches)]
        loss = model(x.to(device), y.to(device))
        if print_every and i % print_every == 0:
            items.append(loss.detach().clone().cpu())  # a sync point inside the step
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_a_training_step_is_replayed_exactly_as_built():
    debug.reset_metrics()
    losses, params = train("tpu", 8)
    replayed, misses, ops, compiled = counts()
    assert replayed > ops // 2 and misses == 0
    _C._set_fused_replay(False)
    debug.reset_metrics()
    losses_off, params_off = train("tpu", 8)
    assert debug.metrics()["fused_replayed_ops"] == 0
    assert losses == losses_off
    for p, q in zip(params, params_off):
        assert torch.equal(p, q)
    cpu_losses, cpu_params = train("cpu", 8)
    torch.testing.assert_close(losses, cpu_losses, rtol=1e-4, atol=1e-5)
    for p, q in zip(params, cpu_params):  # Adam's updates scale float rounding near zero gradients
        torch.testing.assert_close(p, q, rtol=1e-2, atol=1e-3)


def test_print_and_item_inside_replayed_steps():
    items = []
    losses, _ = train("tpu", 6, print_every=1, items=items)
    cpu_items = []
    cpu_losses, _ = train("cpu", 6, print_every=1, items=cpu_items)
    torch.testing.assert_close(losses, cpu_losses, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.stack(items), torch.stack(cpu_items), rtol=1e-4, atol=1e-5)
    debug.reset_metrics()
    train("tpu", 4, print_every=1, items=[])
    assert debug.metrics()["fused_replayed_ops"] > 0


def test_a_new_shape_mid_run_builds_its_graph():
    for n in (4, 4, 4, 7, 4, 7, 7):
        x0 = rand(n, 5, seed=n)
        out = (x0.to("tpu").softmax(-1) * 2).sum(0).cpu()
        torch.testing.assert_close(out, (x0.softmax(-1) * 2).sum(0), rtol=1e-6, atol=1e-6)
    debug.reset_metrics()
    x0 = rand(7, 5, seed=7)
    (x0.to("tpu").softmax(-1) * 2).sum(0).cpu()
    assert debug.metrics()["fused_replayed_ops"] == debug.metrics()["fused_ops"] > 0


def test_two_threads_each_replay_their_own_steps():
    results, errors = {}, []

    def worker(k):
        try:
            x0, w0 = rand(5, 6, seed=10 + k), rand(5, 6, seed=20 + k)
            x, w = x0.to("tpu"), w0.to("tpu").requires_grad_()
            out = []
            for i in range(12):
                y = ((x * w).tanh() * (i + 1)).sum()
                y.backward()  # autograd's thread issues the backward ops
                out.append((y.item(), w.grad.cpu()))
                w.grad = None
            results[k] = out
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    debug.reset_metrics()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert debug.metrics()["fused_replayed_ops"] > 0
    for k in range(2):
        x0, w0 = rand(5, 6, seed=10 + k), rand(5, 6, seed=20 + k).requires_grad_()
        for i, (value, grad) in enumerate(results[k]):
            y = ((x0 * w0).tanh() * (i + 1)).sum()
            y.backward()
            assert value == pytest.approx(y.item(), rel=1e-5)
            torch.testing.assert_close(grad, w0.grad, rtol=1e-5, atol=1e-6)
            w0.grad = None


def test_a_mode_switch_between_steps():
    expect = run_body("cpu")
    for mode in ("fused", "fused", "strict", "fused", "debug", "fused", "fused"):
        torchtpu.set_eager_mode(mode)
        assert torch.equal(run_body("tpu"), expect)
    debug.reset_metrics()
    assert torch.equal(run_body("tpu"), expect)
    assert counts()[:2] == (5, 0)


def test_switching_replay_off_mid_graph_builds_the_rest(capfd):
    x0, w0 = rand(4, 8, seed=1), rand(4, 8, seed=2)
    for _ in range(2):
        run_body("tpu")
    x, w = x0.to("tpu"), w0.to("tpu")
    a = x + 1
    b = a * w
    _C._set_fused_replay(False)
    c = b.neg()
    d = torch.maximum(c, a)
    e = d + w
    assert torch.equal(e.cpu(), body(x0, w0))


def test_recompiles_debug_names_the_op_where_replay_stopped(monkeypatch, capfd):
    monkeypatch.setenv("TORCHTPU_DEBUG", "recompiles")
    for _ in range(2):
        run_body("tpu")
    capfd.readouterr()
    run_body("tpu", "middle")
    torch.ones(1, device="tpu").cpu()  # the next op reports what was recorded
    err = capfd.readouterr().err
    assert "fused replay stopped at" in err and "test_fused_replay.py" in err and "abs" in err, err


def test_loop_cut_graphs_are_replayed():
    x0 = rand(16, seed=9)
    _C._set_fused_max_ops(40)
    try:
        x = x0.to("tpu")
        debug.reset_metrics()
        for i in range(300):  # no sync point: the loop detector cuts it
            x = (x * 0.5 + i).sin()
        out = x.cpu()
        m = debug.metrics()
    finally:
        _C._set_fused_max_ops(2000)
    expect = x0
    for i in range(300):
        expect = (expect * 0.5 + i).sin()
    torch.testing.assert_close(out, expect, rtol=1e-5, atol=1e-5)
    assert m["fused_cuts"]["loop"] > 2 and m["fused_replayed_ops"] > m["fused_ops"] // 2


def test_dropout_draws_new_values_in_replayed_steps():
    """Random ops draw new keys every call: replayed steps give exactly the
    values of built ones for the same seed, and differ from step to step."""
    def run():
        torch.manual_seed(3)  # seeds the tpu generator too
        x = torch.ones(64, device="tpu")
        return [torch.nn.functional.dropout(x * 2, 0.5).cpu() for _ in range(6)]

    on = run()
    _C._set_fused_replay(False)
    off = run()
    for a, b in zip(on, off):
        assert torch.equal(a, b)
    assert not torch.equal(on[4], on[5])
    assert set(on[5].unique().tolist()) <= {0.0, 4.0}


# Random op streams: elementwise, in-place (on views too), reductions,
# matmul, copies; sync points; storages dying. Each stream runs with
# variants that differ at the start, stop early or go on, so recorded graphs
# are replayed, switched and given up at every place.
FUZZ_OPS = [
    lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a.sin(), lambda a, b: torch.maximum(a, b),
    lambda a, b: a.mul_(0.5), lambda a, b: b.add_(a.clone()), lambda a, b: a.t().contiguous().t(),
    lambda a, b: a[1:].sum(0, keepdim=True).expand_as(a).clone(), lambda a, b: a.clone(),
    lambda a, b: torch.where(a > b, a, b), lambda a, b: (a[0].add_(1.0), a)[1],
    lambda a, b: torch.cat([a, b])[1:4].clone(), lambda a, b: a.unsqueeze(0).expand(2, 3, 3).sum(0),
    lambda a, b: b.copy_(a.t().clone()), lambda a, b: (a @ b).tanh(), lambda a, b: a.softmax(-1),
]


def fuzz_program(seed, n=12):
    import random
    rng = random.Random(seed)
    return [(rng.randrange(len(FUZZ_OPS)), rng.randrange(4), rng.randrange(4), rng.random() < 0.15,
             rng.random() < 0.1) for _ in range(n)]


def fuzz_run(prog, device, values):
    env = [v.clone().to(device) for v in values]
    outs = []
    for op, i, j, sync, drop in prog:
        r = FUZZ_OPS[op](env[i], env[j])
        env[(i + j) % 4] = r
        if sync:
            outs.append(r.cpu().clone())
        if drop:
            env[j] = env[i]  # the storage env[j] held may die
    return outs + [e.cpu().clone() for e in env]


def fuzz_all(trials):
    out = []
    for trial in range(trials):
        base = fuzz_program(trial)
        variants = [base, base, base, fuzz_program(trial + 1000)[:6] + base[6:], base, base[:8], base,
                    base + base[:3], base]
        values = [rand(3, 3, seed=trial * 10 + k) for k in range(4)]
        out.append([(fuzz_run(v, "tpu", values), fuzz_run(v, "cpu", values)) for v in variants])
    return out


def test_random_op_streams_replay_as_built():
    debug.reset_metrics()
    on = fuzz_all(20)
    m = debug.metrics()
    assert m["fused_replayed_ops"] > m["fused_ops"] // 2 and m["fused_replay_misses"] > 20
    _C._set_fused_replay(False)
    off = fuzz_all(20)
    for trial_on, trial_off in zip(on, off):
        for (got, cpu), (built, _) in zip(trial_on, trial_off):
            for g, c, b in zip(got, cpu, built):
                assert torch.equal(g, b)
                torch.testing.assert_close(g, c, rtol=1e-4, atol=1e-5, equal_nan=True)
