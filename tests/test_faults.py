"""Faults at the edges of the runtime: out of memory (refused at allocation,
or reported by XLA when a program runs), errors of one thread's queued work
kept from the others, the bounded executor queue, fork, and interpreter exit
while threads still issue work. Values are checked against the CPU; a case
that could crash or hang runs in a subprocess with a timeout."""
import gc
import inspect
import os
import subprocess
import sys
import threading
import time

import pytest
import torch

import torchtpu
from torchtpu import _C

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))


def line():
    """The caller's line number, for matching the line an error names."""
    return inspect.currentframe().f_back.f_lineno


def run_python(code, timeout=120):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return r


@pytest.fixture
def oom_at_execution():
    """Turns off the allocation check, so that XLA reports the out-of-memory
    when the program runs."""
    _C._set_memory_capacity(0)
    yield
    _C._set_memory_capacity(-1)


# ---- out of memory at allocation --------------------------------------------

def test_allocation_larger_than_the_device_raises_at_the_users_line(each_mode):
    with pytest.raises(torch.OutOfMemoryError) as e:
        where = line() + 1
        torch.empty(1 << 40, device="tpu")
    msg = str(e.value)
    assert isinstance(e.value, RuntimeError)
    assert "aten::empty" in msg and "4.00 TiB" in msg and f"{HERE}:{where}" in msg, msg

    with pytest.raises(torch.OutOfMemoryError) as e:
        where = line() + 1
        torch.randn(1 << 38, device="tpu")
    assert "1.00 TiB" in str(e.value) and f"{HERE}:{where}" in str(e.value), str(e.value)

    a, b = torch.ones(1 << 20, 1, device="tpu"), torch.ones(1, 1 << 20, device="tpu")
    with pytest.raises(torch.OutOfMemoryError) as e:
        where = line() + 1
        a @ b
    assert "aten::mm" in str(e.value) and "4.00 TiB" in str(e.value) and f"{HERE}:{where}" in str(e.value)

    # Nothing was queued: no later sync point raises it again, and the
    # device keeps working.
    torchtpu.synchronize()
    assert (a[:3, 0] * 2).sum().item() == 6.0


def test_allocation_check_counts_the_bytes_live_tensors_hold(each_mode):
    gc.collect()
    held = _C._memory_held(0)
    _C._set_memory_capacity(held + (1 << 20))  # 1 MiB more than held now
    try:
        first = torch.ones(150_000, device="tpu")  # 600 kB
        with pytest.raises(torch.OutOfMemoryError, match="aten::add"):
            first + 1  # another 600 kB does not fit
        del first
        second = torch.ones(150_000, device="tpu").add_(1)  # the first one's bytes are free again
        assert second.sum().item() == 300_000.0
    finally:
        _C._set_memory_capacity(-1)
    assert _C._memory_held(0) == held + 600_000


def test_allocation_inside_backward_raises_oom_naming_the_forward_line(each_mode):
    class Huge(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            Huge.where = line() + 1
            return x * 2  # the backward op's site

        @staticmethod
        def backward(ctx, g):
            return g * 2 + torch.zeros(1 << 40, device="tpu")[:1]

    x = torch.ones(1, device="tpu", requires_grad=True)
    y = Huge.apply(x)
    with pytest.raises(torch.OutOfMemoryError) as e:
        y.sum().backward()
    assert "4.00 TiB" in str(e.value) and f"{HERE}:{Huge.where}" in str(e.value), str(e.value)
    (x * 3).sum().backward()
    assert x.grad.item() == 3.0


# ---- out of memory reported by XLA ------------------------------------------

def test_oom_of_queued_work_is_raised_once_at_the_first_dependent_sync_point(each_mode, oom_at_execution):
    other = torch.ones(4, device="tpu") * 3
    torchtpu.synchronize()
    if each_mode == "debug":
        with pytest.raises(torch.OutOfMemoryError) as e:
            where = line() + 1
            torch.zeros(2 ** 38, device="tpu")
        assert "aten::zero_" in str(e.value) and f"{HERE}:{where}" in str(e.value)
        torchtpu.synchronize()  # raised once, at the op
        return
    where = line() + 1
    z = torch.zeros(2 ** 38, device="tpu")
    y = z[:2] + 1
    # Unrelated reads do not raise it. (In Fused mode a new op on `other`
    # would join the failing program: values of one program share its fate.)
    assert other.tolist() == [3.0] * 4
    if each_mode == "strict":
        assert other.sum().item() == 12.0
    with pytest.raises(torch.OutOfMemoryError) as e:
        y.sum().item()
    msg = str(e.value)
    assert isinstance(e.value, RuntimeError)
    assert "aten::zero_" in msg and f"{HERE}:{where}" in msg and "1099511627776 bytes" in msg, msg
    torchtpu.synchronize()  # not raised again
    assert (other * 2).sum().item() == 24.0


def test_oom_of_queued_work_is_raised_at_synchronize_of_the_issuing_thread(each_mode, oom_at_execution):
    if each_mode == "debug":
        with pytest.raises(torch.OutOfMemoryError):
            torch.zeros(2 ** 38, device="tpu")
    else:
        z = torch.zeros(2 ** 38, device="tpu")
        z.add_(1)
        with pytest.raises(torch.OutOfMemoryError, match="aten::zero_"):
            torchtpu.synchronize()
    torchtpu.synchronize()
    assert (torch.ones(3, device="tpu") * 2).sum().item() == 6.0


def test_oom_inside_a_fused_training_step_is_raised_once_with_its_line(oom_at_execution):
    torchtpu.set_eager_mode("fused")
    try:
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 4)
        x = torch.randn(16, 8)
        dev_model = torch.nn.Linear(8, 4).to("tpu")
        dev_model.load_state_dict(model.state_dict())
        opt = torch.optim.SGD(dev_model.parameters(), lr=0.1)
        xd = x.to("tpu")
        # A step whose graph cannot run: its loss raises, once.
        where = line() + 1
        big = torch.zeros(2 ** 38, device="tpu")  # kept alive: an output of the step's program
        loss = dev_model(xd).sum() + big[0]
        loss.backward()
        opt.step()
        with pytest.raises(torch.OutOfMemoryError) as e:
            loss.item()
        assert f"{HERE}:{where}" in str(e.value) and "aten::zero_" in str(e.value), str(e.value)
        torchtpu.synchronize()
        del big
        # A fresh model trains normally afterwards, against the CPU.
        fresh = torch.nn.Linear(8, 4).to("tpu")
        fresh.load_state_dict(model.state_dict())
        opt = torch.optim.SGD(fresh.parameters(), lr=0.1)
        cpu_opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            fresh(xd).square().sum().backward()
            opt.step()
            cpu_opt.zero_grad()
            model(x).square().sum().backward()
            cpu_opt.step()
        torch.testing.assert_close(fresh.weight.cpu(), model.weight, rtol=1e-4, atol=1e-5)
    finally:
        torchtpu.set_eager_mode("strict")


# ---- errors go to the thread that depends on them ------------------------------

def test_errors_of_one_thread_are_not_raised_in_another(each_mode, oom_at_execution):
    issued = threading.Barrier(2)
    checked = threading.Barrier(2)
    seen = {"good": [], "bad": []}
    results = []

    def bad():
        try:
            z = torch.zeros(2 ** 38, device="tpu")
            z.add_(1)
        except torch.OutOfMemoryError:  # Debug mode raises at the op
            seen["bad"].append("at op")
        issued.wait()
        checked.wait()
        for _ in range(2):
            try:
                torchtpu.synchronize()
                seen["bad"].append("clean")
            except torch.OutOfMemoryError:
                seen["bad"].append("oom")

    def good():
        try:
            t = torch.arange(8.0, device="tpu")
            issued.wait()
            for _ in range(20):
                t = t * 0.5 + 1
                results.append(t.sum().item())
            torchtpu.synchronize()
        except Exception as e:  # reported below
            seen["good"].append(repr(e))
        finally:
            checked.wait()

    threads = [threading.Thread(target=bad), threading.Thread(target=good)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert seen["good"] == []
    expected = torch.arange(8.0)
    for r in results:
        expected = expected * 0.5 + 1
        assert r == pytest.approx(expected.sum().item())
    if each_mode == "debug":
        assert seen["bad"] == ["at op", "clean", "clean"]
    else:
        assert seen["bad"] == ["oom", "clean"]


# ---- the executor queue is bounded ---------------------------------------------

LOOP = """
import json, sys, time, torch, torchtpu
from torchtpu import _C


def peak_rss_mib():
    # This process's own peak (VmHWM): ru_maxrss keeps the parent's peak
    # across the vfork and exec that started this process.
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) // 1024


torchtpu.set_eager_mode(sys.argv[1])
a = torch.randn(256, 256, device="tpu") / 16
b = torch.randn(256, 256, device="tpu") / 16
torchtpu.synchronize()
limits = _C._queue_state()
peak_ops = peak_bytes = n = 0
t0 = time.time()
while time.time() - t0 < float(sys.argv[2]):
    c = a @ b
    n += 1
    if n % 64 == 0:
        q = _C._queue_state()
        peak_ops, peak_bytes = max(peak_ops, q["pending_ops"]), max(peak_bytes, q["pending_bytes"])
t1 = time.time()
value = c.sum().item()
print(json.dumps(dict(ops=n, sync_s=time.time() - t1, peak_ops=peak_ops, peak_bytes=peak_bytes,
                      max_ops=limits["max_ops"], max_bytes=limits["max_bytes"],
                      ok=abs(value - (a.cpu() @ b.cpu()).sum().item()) < 1e-2,
                      rss_mib=peak_rss_mib())))
"""


@pytest.mark.parametrize("mode", ["strict", "fused", "debug"])
def test_a_matmul_loop_without_sync_points_syncs_in_bounded_time(mode):
    import json
    r = subprocess.run([sys.executable, "-c", LOOP, mode, "5"], capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["ok"], out
    assert out["peak_ops"] <= out["max_ops"] + 1, out
    assert out["peak_bytes"] <= out["max_bytes"] + 256 * 256 * 4, out
    assert out["sync_s"] < 30, out
    assert out["rss_mib"] < 2048, out


def test_the_queue_is_bounded_by_bytes_of_outputs():
    torchtpu.set_eager_mode("strict")
    state = _C._queue_state()
    _C._set_queue_limits(1000, 4 << 20)  # 4 MiB
    try:
        x = torch.zeros(1 << 18, device="tpu")  # 1 MiB
        peak = 0
        for _ in range(200):
            x = x + 1
            peak = max(peak, _C._queue_state()["pending_bytes"])
        assert x[:4].cpu().tolist() == [200.0] * 4
        assert peak <= (4 << 20) + (1 << 20), peak
    finally:
        _C._set_queue_limits(state["max_ops"], state["max_bytes"])


def test_a_full_queue_does_not_deadlock_threads_switching_modes():
    """A queue of two programs, four threads issuing ops and backward passes
    while the main thread switches modes: everything finishes, values
    match the CPU."""
    state = _C._queue_state()
    _C._set_queue_limits(2, 1 << 30)
    failures, got = [], []
    w_cpu = torch.randn(16, 16, generator=torch.Generator().manual_seed(1))

    def work():
        try:
            w = w_cpu.to("tpu").requires_grad_()
            for _ in range(30):
                (w @ w).sum().backward()
            got.append(w.grad.cpu())
        except Exception as e:  # reported below
            failures.append(e)

    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        modes = ["fused", "strict", "debug"]
        i = 0
        while any(t.is_alive() for t in threads) and i < 100_000:
            torchtpu.set_eager_mode(modes[i % 3])
            i += 1
            time.sleep(0.001)
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
    finally:
        _C._set_queue_limits(state["max_ops"], state["max_bytes"])
        torchtpu.set_eager_mode("strict")
    assert not failures, failures
    w = w_cpu.clone().requires_grad_()
    for _ in range(30):
        (w @ w).sum().backward()
    for g in got:
        torch.testing.assert_close(g, w.grad, rtol=1e-4, atol=1e-3)


# ---- fork ------------------------------------------------------------------------

FORK_MESSAGE = ("Cannot re-initialize torchtpu in forked subprocess. To use torchtpu with multiprocessing, "
                "you must use the 'spawn' start method")


def test_a_forked_child_raises_at_its_first_device_use():
    r = run_python(
        "import os, time, torch, torchtpu\n"
        "x = torch.ones(3, device='tpu') * 2\n"
        "print('parent', x.sum().item(), flush=True)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    for use in (lambda: torch.ones(2, device='tpu'), lambda: x.cpu(), lambda: x + 1,\n"
        "                torchtpu.synchronize):\n"
        "        t0 = time.time()\n"
        "        try:\n"
        "            use()\n"
        "            print('child: no error', flush=True)\n"
        "        except RuntimeError as e:\n"
        "            print('child:', str(e), round(time.time() - t0) == 0, flush=True)\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print('parent', (x * 3).sum().item())\n", timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines == ["parent 6.0"] + [f"child: {FORK_MESSAGE} True"] * 4 + ["parent 18.0"], lines


def test_dataloader_workers_started_by_fork_raise_and_the_parent_is_unaffected():
    r = run_python(
        "import torch, torchtpu\n"
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Touches(Dataset):\n"
        "    def __len__(self):\n"
        "        return 4\n"
        "    def __getitem__(self, i):\n"
        "        return (torch.ones(2, device='tpu') * i).cpu()\n"
        "x = torch.ones(3, device='tpu') * 2\n"
        "try:\n"
        "    list(DataLoader(Touches(), num_workers=2, multiprocessing_context='fork'))\n"
        "    print('no error')\n"
        "except RuntimeError as e:\n"
        "    print('worker error:', 'Cannot re-initialize torchtpu in forked subprocess' in str(e))\n"
        "print('parent', (x * 3).sum().item())\n", timeout=90)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-2:] == ["worker error: True", "parent 18.0"], r.stdout + r.stderr


def test_dataloader_workers_started_by_spawn_use_the_device(tmp_path):
    script = tmp_path / "spawn_workers.py"
    script.write_text(
        "import torch, torchtpu\n"
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Squares(Dataset):\n"
        "    def __len__(self):\n"
        "        return 4\n"
        "    def __getitem__(self, i):\n"
        "        return (torch.full((1,), float(i), device='tpu') ** 2).cpu()\n"
        "if __name__ == '__main__':\n"
        "    loader = DataLoader(Squares(), num_workers=2, multiprocessing_context='spawn')\n"
        "    print([b.tolist() for b in loader])\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[[[0.0]], [[1.0]], [[4.0]], [[9.0]]]", r.stdout + r.stderr


# ---- interpreter exit while a thread issues work ------------------------------

EXIT = """
import sys, threading, time, torch, torchtpu
torchtpu.set_eager_mode(sys.argv[1])
def work():
    w = torch.randn(64, 64, device="tpu", requires_grad=True)
    x = torch.randn(64, 64, device="tpu")
    while True:
        x = torch.tanh(x @ w.detach()) * 0.5
        (x.sum() * w).sum().backward()
threading.Thread(target=work, daemon=True).start()
time.sleep(float(sys.argv[2]))
print("exiting", flush=True)
"""


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_exit_while_a_daemon_thread_issues_ops_is_clean(mode):
    for i in range(10):
        t0 = time.time()
        r = subprocess.run([sys.executable, "-c", EXIT, mode, str(0.3 + 0.1 * i)], capture_output=True, text=True,
                           timeout=60, cwd=ROOT)
        assert r.returncode == 0 and "terminate" not in r.stderr, (i, r.returncode, r.stderr[-2000:])
        assert "Traceback" not in r.stderr, r.stderr[-2000:]  # the thread is stopped, not failed
        assert r.stdout.strip().splitlines()[-1] == "exiting"
        assert time.time() - t0 < 60


def test_main_thread_work_in_late_exit_handlers_still_runs():
    """An exit handler registered before the import runs after torchtpu shut
    down; the main thread's work still runs. (Not a backward pass: PyTorch's
    autograd thread may abort when it ends during interpreter finalization,
    with or without torchtpu.)"""
    r = run_python(
        "import atexit, torch\n"
        "atexit.register(lambda: print('late', (torch.ones(2, device='tpu') * 3).tolist()))\n"
        "import torchtpu\n"
        "print('early', (torch.ones(2, device='tpu') * 2).sum().item())\n", timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-2:] == ["early 4.0", "late [3.0, 3.0]"], r.stdout


# ---- stress ---------------------------------------------------------------------

def test_stress_program_short_run():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "stress.py"), "--quick"],
                       capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert '"metric": "threads_own_errors"' in r.stdout, r.stdout
