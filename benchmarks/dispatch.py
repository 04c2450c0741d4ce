"""Dispatch cost benchmark. Prints JSON lines:
- the median cost per op of a small cached elementwise op (Strict mode, and
  PyTorch CPU eager for reference), measured as wall time of a batch of ops
  including the final synchronize;
- the GPT-style decoder's training step time in Debug, Strict and PyTorch CPU
  eager, all in this run.
"""
import argparse
import json
import statistics
import time

import torch

import torchtpu
from torchtpu.testing.models import CharData, TinyGPT


def emit(bench, mode, metric, value, unit, **extra):
    print(json.dumps(dict(bench=bench, mode=mode, metric=metric, value=round(value, 3), unit=unit, **extra)),
          flush=True)


def per_op_us(device, ops, repeats):
    x = torch.randn(64, device=device)
    y = torch.randn(64, device=device)
    sync = torchtpu.synchronize if device == "tpu" else (lambda: None)
    for _ in range(200):
        z = x + y
    sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(ops):
            z = x + y
        sync()
        samples.append((time.perf_counter() - t0) / ops * 1e6)
    del z
    return statistics.median(samples)


def step_ms(device, mode, steps, width, layers, batch, seq):
    torch.manual_seed(0)
    data = CharData()
    model = TinyGPT(data.vocab, width=width, layers=layers, heads=4, max_len=seq).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    batches = [data.batch(batch, seq, gen) for _ in range(steps + 3)]

    def step(x, y):
        loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    ctx = torchtpu.eager_mode(mode) if device == "tpu" else _null()
    with ctx:
        for x, y in batches[:3]:
            step(x, y).item()
        times = []
        for x, y in batches[3:]:
            t0 = time.perf_counter()
            step(x, y).item()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ops", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    torch.set_num_threads(1)
    with torchtpu.eager_mode("strict"):
        strict = per_op_us("tpu", args.ops, args.repeats)
    cpu = per_op_us("cpu", args.ops, args.repeats)
    emit("dispatch", "strict", "per_op", strict, "us", op="add 64xf32")
    emit("dispatch", "cpu_eager", "per_op", cpu, "us", op="add 64xf32")
    emit("dispatch", "strict_vs_cpu", "ratio", strict / cpu, "x")
    shape = dict(width=64, layers=4, batch=4, seq=32)
    results = {}
    for device, mode in (("tpu", "debug"), ("tpu", "strict"), ("cpu", "cpu_eager")):
        results[mode] = step_ms(device, mode, args.steps, **shape)
        emit("decoder_step", mode, "step_time", results[mode], "ms", **shape)
    emit("decoder_step", "strict_vs_debug", "ratio", results["debug"] / results["strict"], "x")
    emit("decoder_step", "strict_vs_cpu_eager", "ratio", results["strict"] / results["cpu_eager"], "x")


if __name__ == "__main__":
    main()
