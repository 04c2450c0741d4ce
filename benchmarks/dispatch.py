"""Dispatch cost benchmark. Prints JSON lines:
- the median cost per op of a small cached elementwise op (Strict and Fused
  Eager, and PyTorch CPU eager for reference), measured as wall time of a
  batch of ops including the final synchronize;
- a foreach op over 53 tensors (an optimizer's step has ten): host time per
  tensor (also with the op memo off) in Strict and Fused Eager against the same per-tensor ops issued one
  by one, and PyTorch CPU eager;
- the compile time of a new single-op Strict program: small tensors (the
  lower XLA optimization level) and large ones;
- the GPT-style decoder's training step time in Debug, Strict and PyTorch CPU
  eager, all in this run, and in Strict and Fused with the op memo on and off.
"""
import argparse
import json
import random
import statistics
import time

import torch

import torchtpu
from torchtpu import debug
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


def _memo_off(fn):
    """fn with the op memo off (each foreach call builds its graph)."""
    def run():
        was = torchtpu._C._op_memo()
        torchtpu._C._set_op_memo(False)
        try:
            fn()
        finally:
            torchtpu._C._set_op_memo(was)
    return run


def foreach_us(device, mode, repeats=30, n=53):
    """Host microseconds per tensor of torch._foreach_mul_ over n tensors
    (on tpu: taking the graph of the earlier call, and building it with the
    op memo off), and of the same mul_ issued tensor by tensor (the time to
    issue, not to run)."""
    ps = [torch.randn(64, 64, device=device) for _ in range(n)]
    sync = torchtpu.synchronize if device == "tpu" else (lambda: None)
    ctx = torchtpu.eager_mode(mode) if device == "tpu" else _null()
    out = {}
    with ctx:
        cases = [("foreach", lambda: torch._foreach_mul_(ps, 0.999)),
                 ("one_by_one", lambda: [p.mul_(0.999) for p in ps])]
        if device == "tpu":
            cases.append(("foreach_built", _memo_off(lambda: torch._foreach_mul_(ps, 0.999))))
        for name, fn in cases:
            samples = []
            for r in range(repeats + 3):
                t0 = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - t0) / n * 1e6)
                sync()
            out[name] = statistics.median(samples[3:])
    return out


def strict_compile_ms(large, count=12):
    """Mean compile time of new single-op Strict programs (gelu, a shape no
    cache holds: the row count starts at a random offset), bucketing off."""
    start = random.randrange(100, 9000 - count)
    before = debug.metrics()
    torchtpu._C._set_buckets([])  # every size its own program: what is measured here
    try:
        with torchtpu.eager_mode("strict"):
            for k in range(count):
                rows = (10000 if large else 0) + start + k
                torch.nn.functional.gelu(torch.ones(rows, 7, device="tpu"))
            torchtpu.synchronize()
    finally:
        torchtpu._C._set_buckets([0])
    after = debug.metrics()
    n = after["compilations"] - before["compilations"]
    return (after["compile_seconds"] - before["compile_seconds"]) / max(n, 1) * 1e3


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


def memo_step_ms(mode, steps, width, layers, batch, seq, rounds=6):
    """The decoder's AdamW training step on tpu with the op memo on and off
    (median ms each; blocks of steps take turns, on one model)."""
    torch.manual_seed(0)
    data = CharData()
    model = TinyGPT(data.vocab, width=width, layers=layers, heads=4, max_len=seq).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    x, y = data.batch(batch, seq, gen)

    def step():
        loss = model(x.to("tpu"), y.to("tpu"))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    times = {True: [], False: []}
    was = torchtpu._C._op_memo()
    with torchtpu.eager_mode(mode):
        for _ in range(3):
            step()
        try:
            for _ in range(rounds):
                for on in (True, False):
                    torchtpu._C._set_op_memo(on)  # on: an empty table; calls record when seen again
                    step()
                    step()
                    for _ in range(max(1, steps // rounds)):
                        t0 = time.perf_counter()
                        step()
                        times[on].append((time.perf_counter() - t0) * 1e3)
        finally:
            torchtpu._C._set_op_memo(was)
    return statistics.median(times[True]), statistics.median(times[False])


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
    with torchtpu.eager_mode("fused"):
        fused = per_op_us("tpu", args.ops, args.repeats)
    emit("dispatch", "fused", "per_op", fused, "us", op="add 64xf32")
    cpu_each = foreach_us("cpu", "cpu")
    emit("foreach", "cpu_eager", "per_tensor", cpu_each["foreach"], "us", op="_foreach_mul_ 53x(64x64)")
    for mode in ("strict", "fused"):
        r = foreach_us("tpu", mode)
        emit("foreach", mode, "per_tensor", r["foreach"], "us", op="_foreach_mul_ 53x(64x64)")
        emit("foreach", mode, "per_tensor_one_by_one", r["one_by_one"], "us", op="mul_ 64x64")
        emit("foreach", mode, "per_tensor_memo_off", r["foreach_built"], "us", op="_foreach_mul_ 53x(64x64)")
    emit("compile", "strict", "single_op_small", strict_compile_ms(False), "ms", op="gelu (100..9000)x7")
    emit("compile", "strict", "single_op_large", strict_compile_ms(True), "ms", op="gelu (10100..19000)x7")
    shape = dict(width=64, layers=4, batch=4, seq=32)
    results = {}
    for device, mode in (("tpu", "debug"), ("tpu", "strict"), ("cpu", "cpu_eager")):
        results[mode] = step_ms(device, mode, args.steps, **shape)
        emit("decoder_step", mode, "step_time", results[mode], "ms", **shape)
    emit("decoder_step", "strict_vs_debug", "ratio", results["debug"] / results["strict"], "x")
    emit("decoder_step", "strict_vs_cpu_eager", "ratio", results["strict"] / results["cpu_eager"], "x")
    for mode in ("strict", "fused"):
        on, off = memo_step_ms(mode, max(args.steps, 60), **shape)
        emit("decoder_step", mode, "step_time_memo_on", on, "ms", **shape)
        emit("decoder_step", mode, "step_time_memo_off", off, "ms", **shape)
        emit("decoder_step", mode + "_memo_speedup", "ratio", off / on, "x")


if __name__ == "__main__":
    main()
