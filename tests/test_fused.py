"""Fused Eager: ops are deferred and materialized as one program at sync
points, loop boundaries and the size limit. Fusion is asserted by counting
graphs, executions and outputs; values against the CPU."""
import io
import math
import os

import pytest
import torch

import torchtpu
from torchtpu import _C, debug
from torchtpu.testing.models import CharData, TinyGPT

HERE = os.path.abspath(__file__)


@pytest.fixture(autouse=True)
def fused():
    previous = torchtpu.get_eager_mode()
    max_ops = _C._fused_max_ops()
    torchtpu.set_eager_mode("fused")
    yield
    _C._set_fused_max_ops(max_ops)
    torchtpu.set_eager_mode(previous)


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def chain(x):
    for i in range(10):
        x = (x * 1.5 + i).sin()
    return x


def test_a_chain_of_ops_is_one_program():
    a = rand(8, 16)
    x = a.to("tpu")
    torchtpu.synchronize()
    debug.reset_metrics()
    y = chain(x)
    assert _C._fused_pending_ops(0) == 30
    assert debug.metrics()["executions"] == 0  # nothing ran yet
    out = y.cpu()
    m = debug.metrics()
    assert m["executions"] == 1 and m["fused_graphs"] == 1 and m["fused_ops"] == 30
    # Only the live result is an output; the 29 dead intermediates get none.
    assert m["fused_outputs"] == 1
    torch.testing.assert_close(out, chain(a), rtol=1e-5, atol=1e-5)


def test_live_intermediates_are_outputs():
    x = rand(4, 4).to("tpu")
    torchtpu.synchronize()
    debug.reset_metrics()
    keep = x * 2
    y = (keep + 1).exp()
    del y
    torchtpu.synchronize()
    assert debug.metrics()["fused_outputs"] == 1  # `keep` only; y died
    torch.testing.assert_close(keep.cpu(), x.cpu() * 2)


def test_every_value_dead_runs_nothing():
    x = rand(4).to("tpu")
    torchtpu.synchronize()
    debug.reset_metrics()
    y = x + 1
    del y
    torchtpu.synchronize()
    m = debug.metrics()
    assert m["fused_graphs"] == 1 and m["executions"] == 0 and m["fused_outputs"] == 0


def _sync_points(t):
    yield "item", lambda: t.sum().item()
    yield "cpu", lambda: t.cpu()
    yield "tolist", lambda: t.tolist()
    yield "print", lambda: print(t)
    yield "bool", lambda: bool((t.sum() > -1e9))
    yield "save", lambda: torch.save(t, io.BytesIO())
    yield "synchronize", torchtpu.synchronize


@pytest.mark.parametrize("name", ["item", "cpu", "tolist", "print", "bool", "save", "synchronize"])
def test_sync_points_materialize(name, capsys):
    a = rand(3, 5)
    t = a.to("tpu")
    torchtpu.synchronize()
    t.mul_(3).add_(1)
    assert _C._fused_pending_ops(0) == 2
    dict(_sync_points(t))[name]()
    assert _C._fused_pending_ops(0) == 0
    torch.testing.assert_close(t.cpu(), a * 3 + 1)


def test_end_of_backward_is_a_sync_point():
    w = rand(6, 3).to("tpu").requires_grad_()
    x = rand(4, 6).to("tpu")
    torchtpu.synchronize()
    debug.reset_metrics()
    loss = (x @ w).tanh().sum()
    loss.backward()
    # backward() materialized forward and backward together, unasked.
    assert _C._fused_pending_ops(0) == 0
    assert debug.metrics()["fused_graphs"] == 1
    wc = w.detach().cpu().requires_grad_()
    (x.cpu() @ wc).tanh().sum().backward()
    torch.testing.assert_close(w.grad.cpu(), wc.grad, rtol=1e-5, atol=1e-6)


def test_views_and_in_place_writes_fuse():
    a = rand(6, 6)
    t = a.to("tpu")
    t[1:3].mul_(2)
    t[:, 0] = 7.0
    t.t()[2].add_(1)
    b = a.clone()
    b[1:3].mul_(2)
    b[:, 0] = 7.0
    b.t()[2].add_(1)
    torch.testing.assert_close(t.cpu(), b)


def test_loop_without_sync_points_is_cut_at_its_period():
    """A loop that never syncs hits the size limit once; then its period is
    found and every later graph repeats, so compiling stops."""
    _C._set_fused_max_ops(64)
    a = rand(16)
    x = a.to("tpu")
    ref = a.clone()
    torchtpu.synchronize()
    debug.reset_metrics()
    for i in range(600):
        x = x * 0.999 + 0.01
        ref = ref * 0.999 + 0.01
        if i == 300:
            compiled_by_300 = debug.metrics()["compilations"]
    compiled = debug.metrics()["compilations"]
    cuts = debug.metrics()["fused_cuts"]
    torch.testing.assert_close(x.cpu(), ref, rtol=1e-4, atol=1e-5)
    assert cuts["size"] == 1 and cuts["loop"] >= 15, cuts
    assert compiled == compiled_by_300 <= 3, (compiled_by_300, compiled)


def test_training_loop_compiles_nothing_in_steady_state(capsys):
    """TinyGPT with AdamW, a cosine learning-rate schedule, loss.item() every
    step and a print inside forward: after warm-up no step compiles, and
    the losses match the CPU."""
    data = CharData()
    g = torch.Generator().manual_seed(3)
    batches = [data.batch(4, 16, g) for _ in range(12)]

    class Printing(TinyGPT):
        def forward(self, idx, targets=None):
            out = super().forward(idx, targets)
            print("loss", out)
            return out

    def train(device):
        torch.manual_seed(0)
        model = Printing(data.vocab, width=32, layers=2, heads=4, max_len=16).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=len(batches))
        losses, compiles = [], []
        for x, y in batches:
            loss = model(x.to(device), y.to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
            if device == "tpu":
                compiles.append(debug.metrics()["compilations"])
        return losses, compiles

    cpu_losses, _ = train("cpu")
    debug.reset_metrics()
    tpu_losses, compiles = train("tpu")
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-5)
    assert compiles[3] > 0 and compiles[-1] == compiles[3], compiles
    assert debug.metrics()["cpu_fallbacks"] == {}


def test_mode_switch_materializes_pending_work():
    a = rand(5)
    t = a.to("tpu")
    t.add_(2)
    assert _C._fused_pending_ops(0) == 1
    torchtpu.set_eager_mode("strict")
    assert _C._fused_pending_ops(0) == 0
    torch.testing.assert_close(t.cpu(), a + 2)


# ---- errors of deferred work -------------------------------------------------

@pytest.fixture
def oom_at_execution():
    """Turns off the allocation check, so XLA reports the out-of-memory when
    the program runs (tests/test_faults.py covers the check itself)."""
    _C._set_memory_capacity(0)
    yield
    _C._set_memory_capacity(-1)


def test_error_of_deferred_work_names_the_op_and_line(oom_at_execution):
    for mode in ("strict", "fused"):
        torchtpu.set_eager_mode(mode)
        z = torch.zeros(2 ** 38, device="tpu")  # 1 TiB: fails when it runs
        line = z.__class__ and __import__("inspect").currentframe().f_lineno - 1
        with pytest.raises(torch.OutOfMemoryError) as e:
            z.sum().item()
        msg = str(e.value)
        assert "aten::zero_" in msg and f"{HERE}:{line}" in msg, msg
        del z
        torchtpu.synchronize()  # the error was raised once; nothing is left


def test_error_is_raised_at_the_next_sync_point(oom_at_execution):
    z = torch.zeros(2 ** 38, device="tpu")
    z.add_(1)  # still deferred: no error yet
    with pytest.raises(torch.OutOfMemoryError):
        torchtpu.synchronize()
    torchtpu.synchronize()
    # The device keeps working after the error.
    assert (torch.ones(3, device="tpu") * 2).sum().item() == 6


def test_debug_mode_raises_at_the_op(oom_at_execution):
    torchtpu.set_eager_mode("debug")
    with pytest.raises(torch.OutOfMemoryError, match="aten::zero_"):
        torch.zeros(2 ** 38, device="tpu")


# ---- donation -----------------------------------------------------------------

@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_in_place_update_reuses_the_buffer(mode):
    torchtpu.set_eager_mode(mode)
    p = rand(1000).to("tpu")
    before = _C._storage_address(p)
    debug.reset_metrics()
    p.mul_(0.5).add_(1.0)
    assert _C._storage_address(p) == before
    assert debug.metrics()["donated_buffers"] >= 1
    torch.testing.assert_close(p.cpu(), rand(1000) * 0.5 + 1)


def test_a_buffer_still_in_use_is_not_donated():
    torchtpu.set_eager_mode("strict")
    p = rand(100).to("tpu")
    alias = p.view(10, 10)  # same storage: the in-place write is seen by both
    q = p.clone()
    before_q = _C._storage_address(q)
    p.add_(1)
    torch.testing.assert_close(alias.cpu().flatten(), rand(100) + 1)
    assert _C._storage_address(q) == before_q
    torch.testing.assert_close(q.cpu(), rand(100))


def test_adamw_step_donates_parameters_and_state():
    torchtpu.set_eager_mode("strict")
    model = torch.nn.Linear(64, 64).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    model(torch.randn(8, 64, device="tpu")).sum().backward()
    opt.step()  # creates the state
    torchtpu.synchronize()
    addresses = [_C._storage_address(p) for p in model.parameters()]
    debug.reset_metrics()
    opt.step()
    torchtpu.synchronize()
    assert [_C._storage_address(p) for p in model.parameters()] == addresses
    assert debug.metrics()["donated_buffers"] >= 3 * len(addresses)


def test_warm_second_run_of_the_demo_compiles_nothing(tmp_path):
    """The demo twice with one cache directory: the second run loads every
    executable from disk."""
    import re
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(HERE))
    env = dict(os.environ, TORCHTPU_CACHE_DIR=str(tmp_path), TORCHTPU_CACHE="1")
    counts = []
    for _ in range(2):
        r = subprocess.run([sys.executable, os.path.join(root, "examples", "train_gpt.py"), "--steps", "12"],
                           env=env, capture_output=True, text=True, timeout=600, cwd=root)
        assert r.returncode == 0, r.stderr
        counts.append(int(re.search(r"compilations (\d+)", r.stdout).group(1)))
    assert counts[0] > 0 and counts[1] == 0, counts


def test_cpp_stack_traces_setting_adds_cpp_frames():
    import subprocess
    import sys
    code = ("import torch, torchtpu; torchtpu._C._set_memory_capacity(0)\n"
            "z = torch.zeros(2 ** 38, device='tpu')\n"
            "try:\n"
            "    z.sum().item()\n"
            "except torch.OutOfMemoryError as e:\n"
            "    print('CPP' if 'C++ frames' in str(e) else 'NOCPP', 'LINE' if '<string>:2' in str(e) else '')\n")
    root = os.path.dirname(os.path.dirname(HERE))
    out = {}
    for flag in ("0", "1"):
        env = dict(os.environ, TORCHTPU_SHOW_CPP_STACKTRACES=flag)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd=root)
        out[flag] = r.stdout.strip().splitlines()[-1]
    assert out == {"0": "NOCPP LINE", "1": "CPP LINE"}, out


@pytest.mark.parametrize("op", ["index", "index_select", "gather", "embedding", "scatter", "index_add"])
def test_debug_mode_catches_a_bad_index(op):
    torchtpu.set_eager_mode("debug")
    x = torch.arange(12.0, device="tpu").reshape(3, 4)
    bad = torch.tensor([0, 5], device="tpu")
    calls = {
        "index": lambda: x[bad],
        "index_select": lambda: x.index_select(1, bad),
        "gather": lambda: x.gather(1, bad.reshape(1, 2)),
        "embedding": lambda: torch.nn.functional.embedding(bad, x),
        "scatter": lambda: x.scatter(0, bad.reshape(2, 1), 1.0),
        "index_add": lambda: x.index_add(1, bad, torch.ones(3, 2, device="tpu")),
    }
    # The CPU's exception type (IndexError, or RuntimeError for gather,
    # scatter and index_add), raised at the op's line.
    expected = IndexError if op in ("index", "index_select", "embedding") else RuntimeError
    with pytest.raises(expected, match=r"index out of (range|bounds).*test_fused.py"):
        calls[op]()
    # In range, the same call works and matches the CPU.
    good = torch.tensor([0, 2], device="tpu")
    bad.copy_(good)
    torch.testing.assert_close(calls[op]().cpu(), {
        "index": lambda: x.cpu()[good.cpu()],
        "index_select": lambda: x.cpu().index_select(1, good.cpu()),
        "gather": lambda: x.cpu().gather(1, good.cpu().reshape(1, 2)),
        "embedding": lambda: torch.nn.functional.embedding(good.cpu(), x.cpu()),
        "scatter": lambda: x.cpu().scatter(0, good.cpu().reshape(2, 1), 1.0),
        "index_add": lambda: x.cpu().index_add(1, good.cpu(), torch.ones(3, 2)),
    }[op]())


def test_work_after_shutdown_still_runs():
    """At interpreter exit the executor stops; ops issued after (by other
    exit handlers) run on the caller instead of waiting forever."""
    import subprocess
    import sys
    code = ("import torch, torchtpu\n"
            "x = torch.ones(4, device='tpu')\n"
            "torchtpu._C._shutdown()\n"
            "print((x * 3).sum().item())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "12.0", r.stderr
