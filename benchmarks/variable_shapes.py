"""Training with a padding collator: batch lengths vary (multiples of 8), as
DataCollatorWithPadding(pad_to_multiple_of=8) gives. A small GPT-2 (width 64,
2 layers, batch 4) trains with AdamW on the same sequence of batches in each
system, each in its own process with a cold compilation cache: PyTorch CPU
eager, Fused Eager with bucketing (the default) and without, Strict Eager, and
torch.compile(backend="tpu") with bucketing and without; and, for reference,
torch.compile(backend="aot_eager") on the CPU: what Dynamo and AOTAutograd
themselves cost here, before any backend compiles. The "-dynamic" systems
compile with dynamic=True (symbolic sizes from the first call on, so Dynamo
traces each frame once instead of once static and once dynamic). Prints one
JSON line per system: wall time
(compilation included) and its ratio to the CPU's, compilations, the steady
step time, whether the losses equal the CPU's (relative 1e-5; over hundreds
of AdamW steps rounding differences grow in any system) and, for a bucketed
system, how far its losses are from the same system's without buckets.

With --rss-steps N, each system then runs N more steps of random lengths and
reports its resident memory before and after them (warm: every bucket seen)
and their mean step time (warm_step_ms).

With --repeat N, the systems run N times in turn and each reports its run of
median wall time (and every run's time), which steadies the ratios on a
loaded machine.

  python benchmarks/variable_shapes.py [--steps 300] [--max-len 256] [--systems cpu,fused,...] [--rss-steps 1000]
                                       [--repeat 3]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEMS = ["cpu", "fused", "fused-nobuckets", "strict", "compiled", "compiled-nobuckets", "cpu-compiled",
           "compiled-dynamic", "cpu-compiled-dynamic"]


def _rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(system, steps, max_len, seed=0, rss_steps=0):
    system = system.replace("-nobuckets", "")
    dynamic = True if system.endswith("-dynamic") else None
    system = system.replace("-dynamic", "")
    import torch
    torch.set_num_threads(1)
    on_cpu = system.startswith("cpu")
    if not on_cpu:
        import torchtpu
        torchtpu.set_eager_mode("strict" if system == "strict" else "fused")
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging
    logging.set_verbosity_error()
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=max_len, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg)
    device = "cpu" if on_cpu else "tpu"
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(seed + 1)
    lengths = (torch.randint(1, max_len // 8 + 1, (steps,), generator=g) * 8).tolist()

    def step(ids):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    if system == "compiled":
        run = torch.compile(step, backend="tpu", dynamic=dynamic)
    elif system == "cpu-compiled":
        run = torch.compile(step, backend="aot_eager", dynamic=dynamic)
    else:
        run = step
    losses, times, seen = [], [], set()
    start = time.perf_counter()
    for n in lengths:
        ids = torch.randint(0, 256, (4, n), generator=g)
        t0 = time.perf_counter()
        losses.append(run(ids.to(device)).item())
        dt = time.perf_counter() - t0
        if n in seen:
            times.append(dt)
        seen.add(n)
    total = time.perf_counter() - start
    if rss_steps:
        rss = [_rss_mb()]
        warm = time.perf_counter()
        for i in range(rss_steps):
            n = int(torch.randint(1, max_len // 8 + 1, (1,), generator=g)) * 8
            run(torch.randint(0, 256, (4, n), generator=g).to(device)).item()
            if i == rss_steps // 2:
                rss.append(_rss_mb())
        warm = time.perf_counter() - warm
        rss.append(_rss_mb())
    out = {"losses": losses, "total_s": total, "lengths": len(set(lengths)),
           "steady_ms": 1000 * sorted(times)[len(times) // 2] if times else None}
    if rss_steps:
        out["rss_mb"] = [round(x, 1) for x in rss]
        out["warm_step_ms"] = round(1000 * warm / rss_steps, 2)
    if not on_cpu:
        import torchtpu
        m = torchtpu.debug.metrics()
        out["compilations"] = m["compilations"]
        out["compile_s"] = round(m["compile_seconds"], 2)
        out["by_cause"] = m["compilations_by_cause"]
        out["buckets"] = {k: v for k, v in m["buckets"].items()}
    print("RESULT " + json.dumps(out), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--rss-steps", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1, help="runs per system, in rounds; the median is reported")
    ap.add_argument("--child")
    a = ap.parse_args()
    if a.child:
        child(a.child, a.steps, a.max_len, rss_steps=a.rss_steps)
        return
    systems = a.systems.split(",")
    runs = {system: [] for system in systems}
    errors = {}
    for _ in range(a.repeat):  # rounds: a drift in the machine's speed touches every system alike
        for system in systems:
            if system in errors:
                continue
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, TORCHTPU_CACHE_DIR=cache, OMP_NUM_THREADS="1",
                           TORCHTPU_BUCKETS="off" if system.endswith("-nobuckets")
                           else os.environ.get("TORCHTPU_BUCKETS", "pow2"))
                r = subprocess.run([sys.executable, __file__, "--child", system, "--steps", str(a.steps),
                                    "--max-len", str(a.max_len), "--rss-steps", str(a.rss_steps)],
                                   capture_output=True, text=True, env=env)
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
            if r.returncode != 0 or not line:
                errors[system] = r.stderr[-2000:]
                continue
            runs[system].append(json.loads(line[0][7:]))
    results = {}
    for system in systems:
        if system in errors:
            print(json.dumps({"bench": "variable_shapes", "mode": system, "error": errors[system]}), flush=True)
            continue
        # The run of median wall time stands for the system.
        results[system] = sorted(runs[system], key=lambda x: x["total_s"])[len(runs[system]) // 2]
        res, cpu = results[system], results.get("cpu")
        exact = results.get(system.replace("-nobuckets", "") + "-nobuckets")
        row = {"bench": "variable_shapes", "mode": system, "steps": a.steps, "lengths": res["lengths"],
               "metric": "total_s", "value": round(res["total_s"], 2), "unit": "s",
               "steady_step_ms": res["steady_ms"] and round(res["steady_ms"], 2)}
        if a.repeat > 1:
            row["runs_s"] = [round(x["total_s"], 2) for x in runs[system]]
        if cpu:
            row["vs_cpu"] = round(res["total_s"] / cpu["total_s"], 2)
            worst = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(res["losses"], cpu["losses"]))
            row["loss_max_rel_diff"] = worst
            row["losses_equal"] = worst <= 1e-5
            over = [i for i, (x, y) in enumerate(zip(res["losses"], cpu["losses"]))
                    if abs(x - y) > 1e-5 * max(abs(y), 1e-12)]
            row["first_step_over_1e-5"] = over[0] if over else None
        if exact and exact is not res:
            row["loss_max_rel_diff_vs_nobuckets"] = max(
                abs(x - y) / max(abs(y), 1e-12) for x, y in zip(res["losses"], exact["losses"]))
        if "rss_mb" in res:
            row["rss_mb"] = res["rss_mb"]  # before the extra steps, halfway, after
            row["rss_growth"] = round(res["rss_mb"][-1] / res["rss_mb"][0] - 1, 4)
            row["warm_step_ms"] = res["warm_step_ms"]  # the mean of the extra steps (every bucket seen)
        for k in ("compilations", "compile_s", "by_cause", "buckets"):
            if k in res:
                row[k] = res[k]
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
