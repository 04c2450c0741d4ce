"""The runtime under concurrency and failure: threads issuing ops while the
mode changes, errors raised inside backward, out= tensors that alias an
input (tests/test_faults.py has out of memory, fork, exit and the queue). Values are checked against the
CPU; a hang fails the test through a subprocess timeout."""
import subprocess
import sys
import threading

import pytest
import torch

import torchtpu
from torchtpu import _C


@pytest.fixture(autouse=True)
def restore_mode():
    previous = torchtpu.get_eager_mode()
    yield
    torchtpu.set_eager_mode(previous)


def run_python(code, timeout=180):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip().splitlines()


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_out_that_aliases_an_input_and_must_grow_raises(mode):
    torchtpu.set_eager_mode(mode)
    x, y = torch.ones(3, 1), torch.ones(3, 4)
    with pytest.raises(RuntimeError):  # PyTorch refuses it too
        torch.add(x, y, out=x)
    xd, yd = x.to("tpu"), y.to("tpu")
    with pytest.raises(RuntimeError, match=r"aten::add.*output with shape \[3, 1\] doesn.t match the broadcast shape"):
        torch.add(xd, yd, out=xd)
    assert torch.equal(xd.cpu(), x)  # left as it was
    # A separate out= tensor grows as on the CPU.
    out, out_d = torch.empty(0), torch.empty(0, device="tpu")
    torch.add(x * 2, y, out=out)
    torch.add(xd * 2, yd, out=out_d)
    assert torch.equal(out_d.cpu(), out)


def test_ops_on_another_thread_while_the_mode_changes():
    """A worker thread computes while the main thread switches modes; no
    value is lost between a flush and the switch."""
    x = torch.randn(64, generator=torch.Generator().manual_seed(0))
    expected = x.clone()
    for i in range(1000):
        expected = expected * 0.5 + i
    got, failures = [], []

    def work():
        try:
            t = x.to("tpu")
            for i in range(1000):
                t = t * 0.5 + i
            got.append(t.cpu())
        except Exception as e:  # reported below
            failures.append(e)

    th = threading.Thread(target=work)
    th.start()
    modes = ["fused", "strict", "debug"]
    i = 0
    while th.is_alive():
        torchtpu.set_eager_mode(modes[i % 3])
        i += 1
    th.join()
    assert not failures, failures
    assert torch.allclose(got[0], expected)


def test_error_inside_backward_in_debug_mode_while_another_thread_issues_ops():
    """An op in backward fails (out of memory) in Debug Eager while another
    thread keeps the device busy: the error names the op, nothing hangs, and
    the device keeps working."""
    lines = run_python(
        "import threading, torch, torchtpu\n"
        "torchtpu.set_eager_mode('debug')\n"
        "torchtpu._C._set_memory_capacity(0)  # XLA reports it when the op runs\n"
        "class Huge(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        return x * 2\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return g * 2 + torch.zeros(2 ** 38, device='tpu')[:1]\n"
        "stop = threading.Event()\n"
        "def busy():\n"
        "    y = torch.ones(8, device='tpu')\n"
        "    while not stop.is_set():\n"
        "        y = (y + 1) * 0.5\n"
        "t = threading.Thread(target=busy)\n"
        "t.start()\n"
        "x = torch.ones(1, device='tpu', requires_grad=True)\n"
        "for _ in range(3):\n"
        "    try:\n"
        "        Huge.apply(x).sum().backward()\n"
        "    except torch.OutOfMemoryError as e:\n"
        "        print('oom', 'aten::zero_' in str(e))\n"
        "stop.set()\n"
        "t.join()\n"
        "print((torch.ones(3, device='tpu') * 2).sum().item())\n")
    assert lines[-4:] == ["oom True"] * 3 + ["6.0"], lines


def test_backward_that_raises_does_not_stop_later_backward_flushes():
    torchtpu.set_eager_mode("fused")

    class Fails(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("backward fails")

    w = torch.ones(4, device="tpu", requires_grad=True)
    with pytest.raises(ValueError):
        # The multiply's backward runs on the device first, then Fails'.
        (Fails.apply(w * 3) * 2).sum().backward()
    torchtpu.synchronize()
    w.grad = None
    (w * w).sum().backward()
    assert _C._fused_pending_ops(0) == 0  # the end of backward flushed
    assert torch.equal(w.grad.cpu(), torch.full((4,), 2.0))


def test_an_error_raised_by_a_storage_address_read_is_raised_once():
    torchtpu.set_eager_mode("strict")
    _C._set_memory_capacity(0)  # XLA reports it when the op runs
    try:
        z = torch.zeros(2 ** 38, device="tpu")
    finally:
        _C._set_memory_capacity(-1)
    with pytest.raises(torch.OutOfMemoryError):
        _C._storage_address(z)
    del z
    torchtpu.synchronize()  # raised once already
