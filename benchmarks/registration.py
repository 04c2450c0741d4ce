"""What the registration layer costs and changes. Prints JSON lines:
- the median cost per op (Strict mode, wall time of a batch of ops with the
  final synchronize) of a functional, an in-place and an out= elementwise op;
- the cost of the two ways to derive a functional form from an out= kernel,
  each over a direct out= call of the same kernel, in alternating batches:
  PyTorch's (its CompositeExplicitAutogradNonFunctional kernel runs the meta
  function and at::empty, then calls .out; heaviside still takes that path)
  and this project's (the out= kernel with an undefined out; maximum);
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


def derivation_us(rounds=15, ops=1000):
    """Per-op cost of each functional form over its own out= call (same kernel,
    out preallocated), in alternating batches."""
    x = torch.randn(64, device="tpu")
    y = torch.randn(64, device="tpu")
    o = torch.empty(64, device="tpu")
    forms = {
        "pytorch_derived": lambda: torch.heaviside(x, y),
        "pytorch_derived_out": lambda: torch.heaviside(x, y, out=o),
        "derived_here": lambda: torch.maximum(x, y),
        "derived_here_out": lambda: torch.maximum(x, y, out=o),
    }
    for f in forms.values():
        for _ in range(300):
            f()
    torchtpu.synchronize()
    samples = {k: [] for k in forms}
    for _ in range(rounds):
        for k, f in forms.items():
            t0 = time.perf_counter()
            for _ in range(ops):
                f()
            torchtpu.synchronize()
            samples[k].append((time.perf_counter() - t0) / ops * 1e6)
    return {k: statistics.median(v) for k, v in samples.items()}


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
        d = derivation_us()
        for k, v in d.items():
            emit("functional_form", "strict", f"{k}_per_op", v, "us")
        for k in ("pytorch_derived", "derived_here"):
            emit("functional_form", "strict", f"{k}_overhead_over_out", d[k] - d[k + "_out"], "us")
    for mode in ("strict", "fused"):
        step_counts(mode)


if __name__ == "__main__":
    main()
