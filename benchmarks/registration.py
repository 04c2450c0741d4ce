"""What the registration layer costs and changes. Prints JSON lines:
- the median cost per op (Strict mode, wall time of a batch of ops with the
  final synchronize) of a functional, an in-place and an out= elementwise op;
- per training step of the GPT-style decoder in Strict and Fused mode: device
  executions, donated buffers and op calls counted by the kernels.

Run it against two builds (PYTHONPATH pointing at each package) to compare
them: the counts must match, the per-op cost should.
"""
import json
import statistics
import time

import torch

import torchtpu
from torchtpu import debug
from torchtpu.testing.models import CharData, TinyGPT


def emit(bench, mode, metric, value, unit):
    print(json.dumps(dict(bench=bench, mode=mode, metric=metric, value=round(value, 3), unit=unit)), flush=True)


def per_op_us(form, ops=2000, repeats=7):
    x = torch.randn(64, device="tpu")
    y = torch.randn(64, device="tpu")
    z = torch.empty(64, device="tpu")
    run = {
        "functional": lambda: torch.add(x, y),
        "inplace": lambda: x.add_(y),
        "out": lambda: torch.add(x, y, out=z),
    }[form]
    for _ in range(200):
        run()
    torchtpu.synchronize()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(ops):
            run()
        torchtpu.synchronize()
        samples.append((time.perf_counter() - t0) / ops * 1e6)
    return statistics.median(samples)


def step_counts(mode, steps=5):
    torch.manual_seed(0)
    data = CharData()
    model = TinyGPT(data.vocab, width=64, layers=2, heads=4, max_len=32).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    with torchtpu.eager_mode(mode):
        def step():
            x, y = data.batch(4, 32, gen)
            loss = model(x.to("tpu"), y.to("tpu"))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss.item()
        step()
        step()
        debug.reset_metrics()
        for _ in range(steps):
            step()
        m = debug.metrics()
    emit("decoder_step", mode, "executions", m["executions"] / steps, "per step")
    emit("decoder_step", mode, "donated_buffers", m["donated_buffers"] / steps, "per step")
    emit("decoder_step", mode, "op_calls", sum(m["ops"].values()) / steps, "per step")


def main():
    with torchtpu.eager_mode("strict"):
        for form in ("functional", "inplace", "out"):
            emit("add", "strict", f"{form}_per_op", per_op_us(form), "us")
    for mode in ("strict", "fused"):
        step_counts(mode)


if __name__ == "__main__":
    main()
