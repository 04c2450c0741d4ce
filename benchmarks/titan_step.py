"""TorchTitan's llama3 debug model, stock settings (bfloat16 parameters,
selective activation checkpointing, FlexAttention, complex RoPE), FSDP2 on
two processes: the step time of Fused Eager and of torch.compile on tpu
against PyTorch CPU eager, in one run (tests/titan/run_titan.py drives
TorchTitan's own entry point; install tests/titan/requirements-titan.txt
first, as `make test` does).

    python benchmarks/titan_step.py [--steps 12] [--seq-len 256] [--batch 2]

Prints the median step time (steps after the first two) of each path and
the ratios to the CPU's; the losses of the three runs are printed too (they
agree to bfloat16 precision).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "titan"))
import run_titan  # noqa: E402


def median_step(result, skip=2):
    times = [s["seconds"] for s in result["steps"][skip:]]
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--site", default=run_titan.DEFAULT_SITE)
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "torchtpu-titan-bench"))
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    run_titan.prepare(a.workdir, a.site, a.seq_len, a.batch)
    common = dict(workdir=a.workdir, site=a.site, steps=a.steps, seq_len=a.seq_len, batch=a.batch, timeout=1800)
    fused = {"TORCHTPU_EAGER_MODE": "fused"}
    runs = {
        "cpu eager": run_titan.run("cpu", "fsdp2_stock", **common),
        "tpu fused": run_titan.run("tpu", "fsdp2_stock", extra_env=fused, **common),
        # TorchTitan compiles each transformer block; the rest of the step (FSDP2's hooks, the loss, the
        # optimizer) runs eagerly, in Fused Eager here.
        "tpu compiled": run_titan.run("tpu", "fsdp2_stock_compile", extra_env=fused, **common),
    }
    cpu = median_step(runs["cpu eager"])
    for name, r in runs.items():
        t = median_step(r)
        print(json.dumps({"path": name, "median_step_s": round(t, 4), "speed_vs_cpu": round(cpu / t, 3),
                          "losses": [round(s["loss"], 5) for s in r["steps"]],
                          "programs_per_step": round((r["metrics"] or {}).get("executions", 0) / a.steps, 1),
                          "cpu_fallbacks": (r["metrics"] or {}).get("cpu_fallbacks")}), flush=True)


if __name__ == "__main__":
    main()
