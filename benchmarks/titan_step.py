"""TorchTitan's llama3 debug model, stock settings (bfloat16 parameters,
selective activation checkpointing, FlexAttention, complex RoPE), FSDP2 on
two processes: the step time of Fused Eager and of torch.compile on tpu
against PyTorch CPU eager, in one run (tests/titan/run_titan.py drives
TorchTitan's own entry point; install tests/titan/requirements-titan.txt
first, as `make test` does).

    python benchmarks/titan_step.py [--steps 12] [--seq-len 256] [--batch 2] [--rounds 3]

The paths take turns, one run each per round, so a change in the machine's
load during the benchmark affects every path alike. Prints, per path, the
median step time over every round's steps (each run's first two steps
left out), its ratio to the CPU's, the per-round medians (the spread) and
the first round's losses (the three paths agree to bfloat16 precision).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "titan"))
import run_titan  # noqa: E402


def step_times(result, skip=2):
    return [s["seconds"] for s in result["steps"][skip:]]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--site", default=run_titan.DEFAULT_SITE)
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "torchtpu-titan-bench"))
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    run_titan.prepare(a.workdir, a.site, a.seq_len, a.batch)
    common = dict(workdir=a.workdir, site=a.site, steps=a.steps, seq_len=a.seq_len, batch=a.batch, timeout=1800)
    fused = {"TORCHTPU_EAGER_MODE": "fused"}
    paths = {
        "cpu eager": ("cpu", "fsdp2_stock", None),
        "tpu fused": ("tpu", "fsdp2_stock", fused),
        # TorchTitan compiles each transformer block; the rest of the step (FSDP2's hooks, the loss, the
        # optimizer) runs eagerly, in Fused Eager here.
        "tpu compiled": ("tpu", "fsdp2_stock_compile", fused),
    }
    runs = {name: [] for name in paths}
    for _ in range(a.rounds):
        for name, (device, config, env) in paths.items():
            runs[name].append(run_titan.run(device, config, extra_env=env, **common))
    medians = {name: statistics.median([t for r in rs for t in step_times(r)]) for name, rs in runs.items()}
    cpu = medians["cpu eager"]
    for name, rs in runs.items():
        metrics = rs[0]["metrics"] or {}
        print(json.dumps({"path": name, "median_step_s": round(medians[name], 4),
                          "speed_vs_cpu": round(cpu / medians[name], 3),
                          "round_medians_s": [round(statistics.median(step_times(r)), 4) for r in rs],
                          "losses": [round(s["loss"], 5) for s in rs[0]["steps"]],
                          "programs_per_step": round(metrics.get("executions", 0) / a.steps, 1),
                          "cpu_fallbacks": metrics.get("cpu_fallbacks")}), flush=True)


if __name__ == "__main__":
    main()
