"""Streams and events on tpu: non-blocking copies from pinned memory run on
the copy queue (returning at once; programs that read the tensor wait for
it), other copies stay synchronous; events record both queues, query
without waiting, and time the device's work. Values against the CPU."""
import time

import pytest
import torch

import torchtpu
from torchtpu import _C

dev = "tpu"


@pytest.mark.usefixtures("each_mode")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool], ids=str)
def test_pinned_non_blocking_copy_is_queued_and_read_in_order(dtype):
    src = (torch.arange(1000) % 7).to(dtype).pin_memory()
    before = _C._async_uploads()
    side = torch.tpu.Stream()
    with torch.tpu.stream(side):
        x = src.to(dev, non_blocking=True)
    assert _C._async_uploads() == before + 1
    y = x.to(torch.float32) * 2 + 1  # reads the copy: waits for it
    torch.testing.assert_close(y.cpu(), src.to(torch.float32) * 2 + 1)
    assert torch.equal(x.cpu(), src)


@pytest.mark.usefixtures("each_mode")
def test_other_copies():
    before = _C._async_uploads()
    pageable = torch.randn(3, 5)
    a = pageable.to(dev, non_blocking=True)  # pageable memory: a synchronous copy, as on CUDA
    assert _C._async_uploads() == before
    pageable.add_(1)  # the copy is complete: changing the source does not reach the device
    torch.testing.assert_close(a.cpu(), pageable - 1)
    b = torch.arange(6, dtype=torch.int32).to(dev, dtype=torch.float32, non_blocking=True)  # staged privately
    assert _C._async_uploads() == before + 1
    torch.testing.assert_close(b.cpu(), torch.arange(6.0))
    target = torch.zeros(4, 4).to(dev)
    target[1:3].copy_(torch.ones(2, 4).pin_memory(), non_blocking=True)  # into a view: through a program
    want = torch.zeros(4, 4)
    want[1:3] = 1
    torch.testing.assert_close(target.cpu(), want)
    empty = torch.empty(0, 3).pin_memory().to(dev, non_blocking=True)
    assert empty.shape == (0, 3) and empty.cpu().numel() == 0


def timed_matmuls(start, end, n, count):
    """Records `start`, issues `count` matmuls of n x n, records `end`;
    returns (when it began, seconds spent issuing)."""
    a = torch.randn(n, n).to(dev)
    torchtpu.synchronize()
    t0 = time.perf_counter()
    start.record()
    x = a
    for _ in range(count):
        x = torch.tanh(x @ a)
    end.record()
    return t0, time.perf_counter() - t0


def test_events_query_and_time_device_work():
    torchtpu.set_eager_mode("strict")
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    t0, issued = timed_matmuls(start, end, 700, 30)
    done_at_once = end.query()
    end.synchronize()
    wall = time.perf_counter() - t0
    assert end.query() and start.query()
    elapsed = start.elapsed_time(end)
    # Done at once only if issuing took most of the time (else the queue was still busy).
    assert not done_at_once or issued > 0.5 * wall
    assert 0.3 * wall * 1000 <= elapsed <= wall * 1000 + 5, (elapsed, wall)
    assert torch.tpu.current_stream().query()
    back_to_back = [torch.tpu.Event(enable_timing=True) for _ in range(2)]
    for e in back_to_back:
        e.record()
    assert 0 <= back_to_back[0].elapsed_time(back_to_back[1]) < 50


def test_event_errors():
    with pytest.raises(RuntimeError, match="enable_timing"):
        a, b = torch.tpu.Event(), torch.tpu.Event()
        a.record()
        b.record()
        a.elapsed_time(b)
    with pytest.raises(RuntimeError, match="recorded"):
        torch.tpu.Event(enable_timing=True).elapsed_time(torch.tpu.Event(enable_timing=True))
    assert torch.tpu.Event().query()  # never recorded: nothing to wait for


def test_stream_api():
    s = torch.tpu.Stream()
    ev = s.record_event()
    ev.synchronize()
    s.wait_event(ev)
    torch.tpu.default_stream().wait_stream(s)
    s.synchronize()
    assert s.query()
    x = torch.ones(3).pin_memory().to(dev, non_blocking=True)
    x.record_stream(s)  # memory stays valid: the value lives while anything reads it
    del x
    torchtpu.synchronize()


def test_generic_torch_stream_and_event():
    """torch.Stream / torch.Event / torch.accelerator on "tpu" (the device guard)."""
    s = torch.Stream(device="tpu")
    assert s.device_index == torch.tpu.current_device() and s.stream_id != 0
    with s:
        assert torch.accelerator.current_stream().stream_id == s.stream_id
    assert torch.accelerator.current_stream().stream_id == 0
    start, end = torch.Event(device="tpu", enable_timing=True), torch.Event(device="tpu", enable_timing=True)
    t0, _ = timed_matmuls(start, end, 400, 10)
    end.synchronize()
    wall = (time.perf_counter() - t0) * 1000
    assert end.query()
    assert 0 <= start.elapsed_time(end) <= wall + 5
    plain = torch.Event(device="tpu")
    assert plain.query()  # never recorded
    plain.record()
    plain.synchronize()
    assert s.query()
    s.synchronize()


def test_timed_events_are_ordered_as_recorded_even_when_completions_are_stamped_out_of_order():
    """The devices' completion callbacks may stamp the work before a later
    event a moment before the work before an earlier one: elapsed_time
    between events recorded in order is never negative, and a recording
    that finished first does not keep a chain of the ones before it."""
    from torchtpu.device_module import _Timed

    class Stamped:  # a recorded marker with a given completion time
        def __init__(self, ns, done=False):
            self.ns, self.done = ns, done

        def time_ns(self):
            return self.ns

        def query(self):
            return self.done

    saved = _Timed.last
    try:
        _Timed.last = None
        a, b, c = _Timed(Stamped(5_000)), _Timed(Stamped(4_966)), _Timed(Stamped(9_000))
        assert b.time_ns() - a.time_ns() == 0 and c.time_ns() - a.time_ns() == 4_000
        d = _Timed(Stamped(10_000, done=True))
        e = _Timed(Stamped(12_000))
        assert d.time is not None and e.before is d and d.before is None
        assert e.time_ns() - d.time_ns() == 2_000
    finally:
        _Timed.last = saved


def test_events_without_timing_do_not_cut_fused_programs():
    """FSDP2's pattern: events recorded between ops (torch.tpu.Event, a
    stream's record_event, torch.Event) and waited on by streams leave the
    step one program; a query or synchronize is the sync point."""
    with torchtpu.eager_mode("fused"):
        torchtpu.synchronize()
        before = torchtpu.debug.metrics()["fused_graphs"]
        x = torch.arange(6, dtype=torch.float32).to(dev)
        ref = torch.arange(6, dtype=torch.float32)
        side = torch.tpu.Stream()
        events = []
        for i in range(4):
            x = x * 2 + i
            ref = ref * 2 + i
            if i % 3 == 1:
                e = side.record_event()
            else:
                e = torch.tpu.Event() if i % 3 == 0 else torch.Event(device="tpu")
                e.record()
            torch.tpu.current_stream().wait_event(e)
            events.append(e)
        assert _C._fused_pending_ops(0) > 0  # nothing was cut
        assert torchtpu.debug.metrics()["fused_graphs"] == before
        events[1].synchronize()  # the sync point: queues the pending program and waits
        assert _C._fused_pending_ops(0) == 0
        assert torchtpu.debug.metrics()["fused_graphs"] == before + 1
        assert all(e.query() for e in events)
        torch.testing.assert_close(x.cpu(), ref)
        # A query that must answer queues the pending work too, so a polling loop ends.
        y = x + 1
        e = torch.tpu.Event()
        e.record()
        deadline = time.monotonic() + 30
        while not e.query():
            assert time.monotonic() < deadline
        torch.testing.assert_close(y.cpu(), ref + 1)
        # A timed event still cuts: its time is when the work before it finished.
        z = y * 3
        t = torch.tpu.Event(enable_timing=True)
        t.record()
        assert _C._fused_pending_ops(0) == 0
        torch.testing.assert_close(z.cpu(), (ref + 1) * 3)
