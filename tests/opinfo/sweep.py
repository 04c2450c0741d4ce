"""Sweeps PyTorch's op_db on the tpu device against the CPU, under a crash guard.

    python tests/opinfo/sweep.py [--mode strict] [--dtypes float32,bfloat16] [--ops add,mul]

Each op's entries run in a worker process (multiprocessing, spawn). A worker
that dies marks the entry it was running `crash`; one that spends more than
--timeout seconds on a single sample is killed and the entry marked `hang`;
either way a fresh worker goes on with the next entry. Results are merged into
report.json (keyed by mode, op, variant and dtype, so sweeps of different
dtypes or modes add up) and report.md is rewritten from it; --failures writes
the list of crashes, hangs, wrong results and fallbacks with a repro each.
"""
import argparse
import collections
import json
import multiprocessing as mp
import os
import re
import signal
import sys
import tempfile
import time
from multiprocessing.connection import wait

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# This checkout's torchtpu (and its _C.so) before any installed one.
sys.path[:0] = [HERE, ROOT]

import report  # noqa: E402

DTYPE_NAMES = ("float32", "bfloat16", "float16", "int64", "int32", "bool")
VARIANT_NAMES = ("functional", "out", "inplace", "grad", "nonfinite", "reference")
MARK = "=== opinfo entry: "


def worker_main(conn, mode, log_path, max_samples, threads):
    """Runs the tasks sent on `conn`: (task id, op key, [(variant, dtype)])."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    os.environ["TORCHTPU_EAGER_MODE"] = mode
    import torch
    torch.set_num_threads(threads)
    import torchtpu  # noqa: F401
    import harness
    ops = harness.op_table()
    conn.send(("ready",))
    while True:
        task = conn.recv()
        if task is None:
            return
        task_id, key, pairs = task
        for variant, dtype in pairs:
            conn.send(("begin", key, variant, dtype))
            os.write(2, f"{MARK}{key} {variant} {dtype}\n".encode())
            start = time.time()
            harness.PHASE_HOOK = lambda phase: conn.send(("phase", phase))
            record = harness.run_entry(ops[key], key, variant, dtype,
                                       on_sample=lambda i, desc, line: conn.send(("sample", i, desc, line)),
                                       max_samples=max_samples)
            record["seconds"] = round(time.time() - start, 3)
            conn.send(("entry", record))
        conn.send(("done", task_id))


class Worker:
    def __init__(self, ctx, args, n):
        self.log = os.path.join(args.logdir, f"worker-{n}.log")
        parent, child = ctx.Pipe()
        self.conn = parent
        self.proc = ctx.Process(target=worker_main,
                                args=(child, args.mode, self.log, args.max_samples, args.threads), daemon=True)
        self.proc.start()
        child.close()
        self.ready = False
        self.task = None          # (task id, key, pairs)
        self.done_pairs = []
        self.current = None       # (key, variant, dtype)
        self.sample = None        # (index, description)
        self.since = time.time()

    def log_tail(self, n=4000):
        """The worker's stderr since the start of its current entry."""
        try:
            with open(self.log, "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - n))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        text = text.rsplit(MARK, 1)[-1].split("\n", 1)[-1]
        lines = [ln for ln in text.splitlines() if not ln.startswith(("I0000", "WARNING: All log"))]
        return "\n".join(lines[-12:])

    def kill(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


def make_tasks(args):
    import harness
    ops = harness.op_table()
    keys = sorted(ops)
    if args.ops:
        wanted = args.ops.split(",")
        missing = [k for k in wanted if k not in ops]
        if missing:
            sys.exit(f"unknown op_db entries: {missing}")
        keys = [k for k in keys if k in wanted]
    if args.match:
        keys = [k for k in keys if re.search(args.match, k)]
    redo = done = None
    old = report.load(args.json)["entries"].get(args.mode, {})
    if args.rerun:
        wanted = set(args.rerun.split(","))
        redo = {(r["op"], r["variant"], r["dtype"]) for r in old.values() if r["status"] in wanted}
    if args.resume:
        done = {(r["op"], r["variant"], r["dtype"]) for r in old.values()}
    tasks = []
    for key in keys:
        pairs = harness.entries(ops[key], args.dtypes, args.variants)
        if redo is not None:
            pairs = [(v, d) for v, d in pairs if (key, v, d) in redo]
        if done is not None:
            pairs = [(v, d) for v, d in pairs if (key, v, d) not in done]
        if pairs:
            tasks.append((key, pairs))
    return tasks


def run(args):
    tasks = collections.deque((i, key, pairs) for i, (key, pairs) in enumerate(make_tasks(args)))
    total = sum(len(p) for _, _, p in tasks)
    print(f"{len(tasks)} ops, {total} entries, mode {args.mode}, {args.jobs} workers", flush=True)
    ctx = mp.get_context("spawn")
    results = []
    workers = []
    spawned = [0]

    def spawn():
        spawned[0] += 1
        return Worker(ctx, args, spawned[0])

    def finish(w, status, why):
        key, variant, dtype = w.current
        index, desc, line = w.sample or (None, "", None)
        results.append({"op": key, "variant": variant, "dtype": dtype, "status": status, "samples": 0,
                        "counts": {status: 1}, "fallbacks": {}, "seconds": round(time.time() - w.since, 3),
                        "first": {"index": index, "sample": desc, "detail": why, "python": line}})
        print(f"  {status}: {key} {variant} {dtype} sample {index}: {why.splitlines()[0] if why else ''}",
              flush=True)
        rest = [p for p in w.task[2] if p not in w.done_pairs and p != (variant, dtype)]
        if rest:
            tasks.appendleft((w.task[0], w.task[1], rest))
        w.kill()

    start = time.time()
    last_save = start

    def stop(signum, frame):
        for w in workers:
            w.kill()
        save(args, results, time.time() - start, partial=True)
        sys.exit(f"stopped by signal {signum}")
    signal.signal(signal.SIGTERM, stop)
    for _ in range(min(args.jobs, len(tasks))):
        workers.append(spawn())
    while workers:
        for w in list(workers):
            if w.ready and w.task is None:
                if tasks:
                    w.task = tasks.popleft()
                    w.done_pairs = []
                    w.conn.send(w.task)
                    w.since = time.time()
                else:
                    w.conn.send(None)
                    w.proc.join(10)
                    w.kill()
                    workers.remove(w)
        ready = wait([w.conn for w in workers], timeout=1.0) if workers else []
        for w in list(workers):
            if w.conn in ready:
                try:
                    msg = w.conn.recv()
                except (EOFError, OSError):
                    msg = None
                if msg is None:
                    w.proc.join(5)
                    code = w.proc.exitcode
                    if w.current is None:
                        sys.exit(f"worker failed to start (exit {code}):\n{w.log_tail()}")
                    if getattr(w, "phase", None) == "cpu":  # PyTorch's own CPU kernel died: nothing to compare
                        finish(w, "skip", f"the CPU reference crashes (exit code {code}), not the device")
                    else:
                        finish(w, "crash", f"worker died (exit code {code})\n{w.log_tail()}")
                    workers[workers.index(w)] = spawn()
                    continue
                kind = msg[0]
                if kind == "ready":
                    w.ready = True
                elif kind == "begin":
                    w.current = msg[1:]
                    w.sample = None
                    w.since = time.time()
                elif kind == "sample":
                    w.sample = msg[1:]
                    w.phase = None
                    w.since = time.time()
                elif kind == "phase":
                    w.phase = msg[1]
                elif kind == "entry":
                    results.append(msg[1])
                    w.done_pairs.append((msg[1]["variant"], msg[1]["dtype"]))
                    w.current = None
                    w.sample = None
                    if len(results) % 50 == 0:
                        print(f"  {len(results)}/{total} entries, {time.time() - start:.0f} s", flush=True)
                elif kind == "done":
                    w.task = None
            elif w.ready and w.current is not None and time.time() - w.since > args.timeout:
                finish(w, "hang", f"no progress for {args.timeout:.0f} s")
                workers[workers.index(w)] = spawn()
        if time.time() - last_save > 60:
            save(args, results, time.time() - start, partial=True)
            last_save = time.time()
    elapsed = time.time() - start
    save(args, results, elapsed, partial=False)
    counts = collections.Counter(r["status"] for r in results)
    print(f"done: {len(results)} entries in {elapsed:.0f} s: {dict(counts)}", flush=True)
    return results


def save(args, results, elapsed, partial):
    data = report.load(args.json)
    report.merge(data, args.mode, results, {
        "dtypes": args.dtypes, "variants": args.variants, "seconds": round(elapsed, 1), "jobs": args.jobs,
        "ops": args.ops or args.match or (f"rerun of {args.rerun}" if args.rerun else "all")
        + (" (resumed)" if args.resume else ""),
        "partial": partial, "max_samples": args.max_samples,
        "started": args.started, "finished": time.strftime("%Y-%m-%d %H:%M:%S")})
    report.save(data, args.json, args.md)
    if args.failures:
        report.write_failures(data, args.failures)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", default=os.environ.get("TORCHTPU_EAGER_MODE", "strict"),
                   choices=("debug", "strict", "fused"))
    p.add_argument("--dtypes", default=",".join(DTYPE_NAMES))
    p.add_argument("--variants", default=",".join(VARIANT_NAMES))
    p.add_argument("--ops", default="", help="comma-separated op_db entries (name or name.variant_test_name)")
    p.add_argument("--match", default="", help="regular expression on the entry names")
    p.add_argument("-j", "--jobs", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads per worker")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds one sample may take before 'hang'")
    p.add_argument("--max-samples", type=int, default=None, help="samples per entry (default: all)")
    p.add_argument("--json", default=os.path.join(HERE, "report.json"))
    p.add_argument("--md", default=os.path.join(HERE, "report.md"))
    p.add_argument("--rerun", default="", help="only the entries of report.json with these statuses "
                   "(comma-separated), for this mode")
    p.add_argument("--resume", action="store_true", help="skip the entries report.json already has for this mode")
    p.add_argument("--failures", default="", help="also write the failures list (markdown) here")
    p.add_argument("--logdir", default="")
    args = p.parse_args(argv)
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    args.variants = [v for v in args.variants.split(",") if v]
    for d in args.dtypes:
        if d not in DTYPE_NAMES:
            p.error(f"unknown dtype {d}")
    for v in args.variants:
        if v not in VARIANT_NAMES:
            p.error(f"unknown variant {v}")
    if not os.environ.get("TORCHTPU_CACHE_DIR"):
        os.environ["TORCHTPU_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), "torchtpu-opinfo-cache")
    args.logdir = args.logdir or tempfile.mkdtemp(prefix="torchtpu-opinfo-logs-")
    args.started = time.strftime("%Y-%m-%d %H:%M:%S")
    results = run(args)
    return results


if __name__ == "__main__":
    main()
