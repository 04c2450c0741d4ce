"""Runtime stress program. Prints JSON lines like the other benchmarks and
exits non-zero when a check fails (a hang becomes a failure through a
watchdog):
- queue: many large ops queued without a sync point (Strict and Fused): the
  issue time, the latency of the sync point that ends them, peak memory;
- threads: 8 threads in each mode, half of them issuing work that runs out
  of memory on the device among valid work: every thread gets exactly its
  own errors, valid threads none, and all values match the CPU;
- workers: forked children are refused at their first device use (while a
  thread keeps the device busy), spawned workers compute on the device.
`--quick` runs a short version (tests/test_faults.py runs it).
"""
import argparse
import faulthandler
import json
import multiprocessing as mp
import os
import resource
import sys
import threading
import time

import torch

import torchtpu
from torchtpu import _C

FAILURES = []


def emit(metric, value, unit, mode="-", **extra):
    print(json.dumps(dict(bench="stress", mode=mode, metric=metric, value=round(value, 3), unit=unit, **extra)),
          flush=True)


def check(ok, what):
    if not ok:
        FAILURES.append(what)
        print(json.dumps(dict(bench="stress", failure=what)), flush=True)


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def queue_phase(mode, ops):
    torchtpu.set_eager_mode(mode)
    # Fused mode cuts the chain into graphs of this many ops (one compile).
    max_ops = _C._fused_max_ops()
    _C._set_fused_max_ops(200)
    x = torch.zeros(1024, 1024, device="tpu")  # 4 MiB per op
    torchtpu.synchronize()
    peak_pending = 0
    t0 = time.perf_counter()
    for i in range(ops):
        x = x + 1
        if i % 100 == 0:
            peak_pending = max(peak_pending, _C._queue_state()["pending_ops"])
    t1 = time.perf_counter()
    corner = x[0, :4].tolist()
    t2 = time.perf_counter()
    check(corner == [float(ops)] * 4, f"queue {mode}: got {corner}, expected {float(ops)}")
    limits = _C._queue_state()
    check(peak_pending <= limits["max_ops"] + 1, f"queue {mode}: {peak_pending} programs pending")
    emit("queue_issue_s", t1 - t0, "s", mode, ops=ops)
    emit("queue_sync_s", t2 - t1, "s", mode, ops=ops)
    emit("queue_peak_pending_programs", peak_pending, "programs", mode, limit=limits["max_ops"])
    emit("peak_rss", peak_rss_mib(), "MiB", mode)
    _C._set_fused_max_ops(max_ops)


def thread_phase(mode, threads, rounds):
    torchtpu.set_eager_mode(mode)
    _C._set_memory_capacity(0)  # the device (XLA) reports the out-of-memory
    errors = [0] * threads
    other = [[] for _ in range(threads)]
    start = threading.Barrier(threads)

    def failing_work():
        z = torch.zeros(2 ** 38, device="tpu")  # 1 TiB, kept alive: Fused mode must compute it
        return z, z[:4] + 1

    def work(k):
        try:
            t = torch.full((64,), float(k), device="tpu")
            ref = torch.full((64,), float(k))
            # Computed before the failing work: in Fused mode the values of
            # one program share its fate.
            torchtpu.synchronize()
            start.wait()
            for r in range(rounds):
                if k % 2 == 1:
                    try:
                        z, y = failing_work()
                        if r % 2 == 0:
                            y.sum().item()  # a sync point that depends on it
                        else:
                            torchtpu.synchronize()  # the issuing thread's sync point
                    except torch.OutOfMemoryError as e:
                        if "failing_work" in str(e):
                            errors[k] += 1
                        else:
                            other[k].append("OOM without its line: " + str(e)[:300])
                for _ in range(20):
                    t = t * 0.5 + k
                    ref = ref * 0.5 + k
                if not torch.allclose(t.cpu(), ref):
                    other[k].append("wrong values")
                torchtpu.synchronize()  # nothing left for this thread
        except Exception as e:  # counted below
            other[k].append(repr(e)[:300])

    t0 = time.perf_counter()
    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    _C._set_memory_capacity(-1)
    expected = [rounds if k % 2 == 1 else 0 for k in range(threads)]
    check(errors == expected, f"threads {mode}: errors per thread {errors}, expected {expected}")
    check(not any(other), f"threads {mode}: unexpected {other}")
    emit("threads_own_errors", sum(errors), "errors", mode, threads=threads, expected=sum(expected))
    emit("threads_wall_s", wall, "s", mode, threads=threads, rounds=rounds)


def spawned_square(i):
    import torchtpu  # noqa: F401  (a spawned worker imports it itself)
    return (torch.full((2,), float(i), device="tpu") ** 2).sum().item()


def worker_phase(children):
    torchtpu.set_eager_mode("strict")
    stop = threading.Event()

    def busy():
        y = torch.ones(256, 256, device="tpu")
        while not stop.is_set():
            y = (y @ y) * (1 / 256)

    th = threading.Thread(target=busy)
    th.start()
    refused = 0
    for _ in range(children):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                torch.ones(2, device="tpu")
                msg = b"no error"
            except RuntimeError as e:
                msg = b"refused" if "Cannot re-initialize torchtpu in forked subprocess" in str(e) else b"other"
            os.write(w, msg)
            os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            got = f.read()
        os.waitpid(pid, 0)
        refused += got == b"refused"
    stop.set()
    th.join()
    check(refused == children, f"fork: {refused} of {children} children refused")
    emit("fork_children_refused", refused, "children", expected=children)
    t0 = time.perf_counter()
    with mp.get_context("spawn").Pool(2) as pool:
        got = pool.map(spawned_square, range(4))
    check(got == [0.0, 2.0, 8.0, 18.0], f"spawn: got {got}")
    emit("spawn_workers_s", time.perf_counter() - t0, "s", workers=2)
    check((torch.ones(3, device="tpu") * 2).sum().item() == 6.0, "parent after fork and spawn")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="a short run (for the test suite)")
    args = ap.parse_args()
    faulthandler.dump_traceback_later(300 if args.quick else 1800, exit=True)
    ops = 1000 if args.quick else 10_000
    for mode in ("strict", "fused"):
        queue_phase(mode, ops)
    for mode in ("strict", "fused", "debug"):
        thread_phase(mode, threads=8, rounds=2 if args.quick else 10)
    worker_phase(children=2 if args.quick else 8)
    emit("failures", len(FAILURES), "checks")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
