"""Mixed-precision training of the GPT-style decoder (TinyGPT) on tpu:
float32, bfloat16 autocast, and float16 autocast with a GradScaler, from the
same initial weights and batches, in Fused Eager. Prints the loss curve of
each run, the largest gap to the float32 curve, and the median step time of
each as a ratio to float32, all measured in this run.

    python benchmarks/amp.py [--steps 60] [--mode fused]
"""
import argparse
import json
import statistics
import time

import torch

import torchtpu
from torchtpu.testing.models import CharData, TinyGPT


def train(kind, steps, mode, every):
    torch.manual_seed(0)
    torchtpu.set_eager_mode(mode)
    device = torchtpu.get_device()
    data = CharData()
    model = TinyGPT(data.vocab, width=64, layers=4, heads=4, max_len=32).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    scaler = torch.amp.GradScaler("tpu", enabled=kind == "float16")
    dtype = {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}[kind]
    gen = torch.Generator().manual_seed(0)
    curve, times = [], []
    for step in range(1, steps + 1):
        start = time.perf_counter()
        x, y = data.batch(8, 32, gen)
        with torch.autocast("tpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if step == 1 or step % every == 0:
            curve.append(round(loss.item(), 4))
        torchtpu.synchronize()
        times.append(time.perf_counter() - start)
    return curve, statistics.median(times[5:]) * 1000


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--mode", default="fused", choices=["debug", "strict", "fused"])
    p.add_argument("--every", type=int, default=5)
    a = p.parse_args()
    runs = {k: train(k, a.steps, a.mode, a.every) for k in ("float32", "bfloat16", "float16")}
    base_curve, base_ms = runs["float32"]
    for kind, (curve, ms) in runs.items():
        gap = max(abs(c - b) / b for c, b in zip(curve, base_curve))
        print(json.dumps({"run": kind, "mode": a.mode, "loss_curve": curve, "max_rel_gap_to_fp32": round(gap, 4),
                          "step_ms": round(ms, 2), "step_time_vs_fp32": round(ms / base_ms, 3)}))


if __name__ == "__main__":
    main()
