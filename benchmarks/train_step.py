"""Training-step benchmark: the GPT-style decoder at two sizes and a CNN, in
Debug, Strict and Fused Eager and PyTorch CPU eager, all in this run. Prints
one JSON line per result:
- step_time per mode (median ms over the timed steps; the modes take turns in
  blocks of steps) and ratios between modes;
- compiles per step in steady state (Fused, after warm-up, over 100 steps with
  a cosine learning-rate schedule);
- Fused Eager's replay: ops replayed per step, the device's time in a step,
  and the host's cost per op ((step time - device time) / ops);
- time to the first step with a cold and a warm disk cache (fresh processes);
- resident memory at step 100 and step 1000 (Fused), and the peak.

    python benchmarks/train_step.py            # everything (a few minutes)
    python benchmarks/train_step.py --quick    # fewer steps
    python benchmarks/train_step.py --compiled # torch.compile(backend="tpu") against the eager modes,
                                               # PyTorch CPU eager and Inductor on the CPU
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import torchtpu
from torchtpu import debug
from torchtpu.testing import models

DECODERS = {
    "decoder_small": dict(width=64, layers=4, batch=4, seq=32),
    "decoder_large": dict(width=128, layers=4, batch=8, seq=64),
}


def emit(bench, mode, metric, value, unit, **extra):
    print(json.dumps(dict(bench=bench, mode=mode, metric=metric, value=round(value, 3), unit=unit, **extra)),
          flush=True)


class Job:
    """One model, its optimizer and a stream of batches on one device;
    `backend`: the model and the optimizer step compiled with it."""

    def __init__(self, name, device, schedule_steps=0, backend=None):
        torch.manual_seed(0)
        self.device = device
        gen = torch.Generator().manual_seed(0)
        if name == "cnn":
            self.model = models.SmallCNN().to(device)
            self.batch = lambda: models.cnn_batch(16, gen)
            self.loss = lambda x, y: torch.nn.functional.cross_entropy(self.model(x), y)
        else:
            shape = DECODERS[name]
            data = models.CharData()
            self.model = models.TinyGPT(data.vocab, width=shape["width"], layers=shape["layers"], heads=4,
                                        max_len=shape["seq"]).to(device)
            self.batch = lambda: data.batch(shape["batch"], shape["seq"], gen)
            self.loss = lambda x, y: self.model(x, y)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.sched = (torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=schedule_steps)
                      if schedule_steps else None)
        self.opt_step = self.opt.step
        if backend:
            model = torch.compile(self.model, backend=backend)
            if name == "cnn":
                self.loss = lambda x, y: torch.nn.functional.cross_entropy(model(x), y)
            else:
                self.loss = lambda x, y: model(x, y)
            self.opt_step = torch.compile(self.opt.step, backend=backend)

    def step(self):
        x, y = self.batch()
        loss = self.loss(x.to(self.device), y.to(self.device))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt_step()
        if self.sched:
            self.sched.step()
        return loss.item()


def set_mode(mode):
    """The eager mode a benchmark mode runs in (compiled graphs: Strict around them)."""
    if not mode.startswith("cpu"):
        torchtpu.set_eager_mode("strict" if mode == "compiled" else mode)


def step_times_ms(name, modes, steps, rounds=5, warmup=3):
    """Median step time per mode. The modes take turns in `rounds` blocks of
    steps (one job per mode), so a change in the machine's load during the
    run affects every mode alike; the first step of a block, which follows a
    mode switch, is not timed."""
    jobs = {}
    for mode in modes:
        set_mode(mode)
        backend = {"compiled": "tpu", "cpu_inductor": "inductor"}.get(mode)
        jobs[mode] = Job(name, "cpu" if mode.startswith("cpu") else "tpu", backend=backend)
        for _ in range(warmup):
            jobs[mode].step()
    total = {m: max(3, steps // 4) if m == "debug" else steps for m in modes}  # Debug is slow
    per_round = {m: max(1, n // rounds) for m, n in total.items()}
    times = {m: [] for m in modes}
    for _ in range(rounds):
        for mode in modes:
            set_mode(mode)
            jobs[mode].step()
            for _ in range(per_round[mode]):
                t0 = time.perf_counter()
                jobs[mode].step()
                times[mode].append((time.perf_counter() - t0) * 1e3)
    return {m: statistics.median(v) for m, v in times.items()}


def steady_compiles(name, steps):
    torchtpu.set_eager_mode("fused")
    job = Job(name, "tpu", schedule_steps=steps + 10)
    for _ in range(5):
        job.step()
    before = debug.metrics()["compilations"]
    for _ in range(steps):
        job.step()
    return (debug.metrics()["compilations"] - before) / steps


def replay_host_cost(name, steps):
    """Fused Eager's replayed step: its time, the device's part of it (the
    programs' spans from launch to completion, from a trace of other steps),
    and the host's cost per op, (step - device) / ops."""
    torchtpu.set_eager_mode("fused")
    job = Job(name, "tpu")
    for _ in range(5):
        job.step()
    debug.reset_metrics()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        job.step()
        times.append((time.perf_counter() - t0) * 1e3)
    m = debug.metrics()
    ops, replayed = m["fused_ops"] / steps, m["fused_replayed_ops"] / steps
    path = tempfile.mktemp(suffix=".json")
    traced = 10
    with debug.trace(path):
        for _ in range(traced):
            job.step()
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    os.unlink(path)
    # The device is busy while any program runs: programs queued behind one
    # another overlap from launch to completion, so their union counts.
    busy, end = 0.0, float("-inf")
    for b, d in sorted((e["ts"], e["dur"]) for e in events if e.get("cat") == "device"):
        busy += max(0.0, b + d - max(b, end))
        end = max(end, b + d)
    device_ms = busy / 1e3 / traced
    step_ms = statistics.median(times)
    return dict(step_ms=step_ms, device_ms=device_ms, ops=ops, replayed=replayed,
                host_us_per_op=(step_ms - device_ms) * 1e3 / ops)


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def memory_flatness(name, steps):
    torchtpu.set_eager_mode("fused")
    job = Job(name, "tpu", schedule_steps=steps)
    at = {}
    for i in range(1, steps + 1):
        job.step()
        if i in (100, steps):
            at[i] = rss_mb()
    return at[100], at[steps]


def first_step_child(name, mode):
    """Runs in a fresh process: seconds from the model being ready to the
    first step's loss."""
    torchtpu.set_eager_mode(mode)
    job = Job(name, "tpu")
    torchtpu.synchronize()
    t0 = time.perf_counter()
    job.step()
    print(json.dumps(dict(first_step_s=time.perf_counter() - t0, compilations=debug.metrics()["compilations"])))


def first_step(name, mode):
    cache = tempfile.mkdtemp(prefix="torchtpu-bench-cache-")
    env = dict(os.environ, TORCHTPU_CACHE_DIR=cache, TORCHTPU_CACHE="1")
    out = []
    for _ in ("cold", "warm"):
        r = subprocess.run([sys.executable, __file__, "--first-step-child", name, mode], env=env,
                           capture_output=True, text=True, check=True)
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--models", default="decoder_small,decoder_large,cnn")
    p.add_argument("--first-step-child", nargs=2, metavar=("MODEL", "MODE"))
    p.add_argument("--compiled", action="store_true",
                   help="torch.compile(backend='tpu') against Fused, Strict, CPU eager and Inductor on the CPU")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.first_step_child:
        first_step_child(*args.first_step_child)
        return
    steps = args.steps or (5 if args.quick else 40)
    names = args.models.split(",")
    if args.compiled:
        for name in names:
            extra = DECODERS.get(name, {})
            t = step_times_ms(name, ("compiled", "fused", "strict", "cpu_eager", "cpu_inductor"), steps, warmup=4)
            for mode, ms in t.items():
                emit(name, mode, "step_time", ms, "ms", **extra)
            for other in ("strict", "fused", "cpu_eager", "cpu_inductor"):
                emit(name, f"compiled_vs_{other}", "speedup", t[other] / t["compiled"], "x", **extra)
        return
    for name in names:
        extra = DECODERS.get(name, {})
        t = step_times_ms(name, ("debug", "strict", "fused", "cpu_eager"), steps)
        for mode, ms in t.items():
            emit(name, mode, "step_time", ms, "ms", **extra)
        emit(name, "fused_vs_strict", "speedup", t["strict"] / t["fused"], "x", **extra)
        emit(name, "fused_vs_cpu_eager", "speedup", t["cpu_eager"] / t["fused"], "x", **extra)
        emit(name, "strict_vs_debug", "speedup", t["debug"] / t["strict"], "x", **extra)
        emit(name, "fused", "compiles_per_step", steady_compiles(name, 20 if args.quick else 100), "1/step",
             **extra)
        if name != "cnn":
            r = replay_host_cost(name, 20 if args.quick else 100)
            emit(name, "fused", "replayed_ops_per_step", r["replayed"], "ops", ops_per_step=r["ops"], **extra)
            emit(name, "fused", "device_time", r["device_ms"], "ms", step_ms=r["step_ms"], **extra)
            emit(name, "fused", "host_per_op", r["host_us_per_op"], "us", goal=1.0, **extra)
        for mode in ("strict", "fused"):
            cold, warm = first_step(name, mode)
            emit(name, mode, "first_step_cold", cold["first_step_s"] * 1e3, "ms", compilations=cold["compilations"])
            emit(name, mode, "first_step_warm", warm["first_step_s"] * 1e3, "ms", compilations=warm["compilations"])
            emit(name, mode, "warm_vs_cold_first_step", cold["first_step_s"] / warm["first_step_s"], "x")
    if "decoder_small" in names:
        total = 200 if args.quick else 1000
        r100, rend = memory_flatness("decoder_small", total)
        emit("decoder_small", "fused", "rss_step_100", r100, "MiB")
        emit("decoder_small", "fused", f"rss_step_{total}", rend, "MiB")
        emit("decoder_small", "fused", "rss_growth", (rend / r100 - 1) * 100, "%")
    emit("process", "all", "peak_rss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "MiB")


if __name__ == "__main__":
    main()
