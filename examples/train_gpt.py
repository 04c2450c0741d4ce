"""The demo: train a small GPT-style decoder on the tpu device (Fused Eager by
default), printing loss and speed: on a terminal as a progress bar with the
loss, steps per second and the time left; otherwise (a log, a pipe) one line
every ten steps. Unchanged PyTorch training code; only the device differs.

    python examples/train_gpt.py [--steps N] [--mode debug|strict|fused]
"""
import argparse
import sys
import time

import torch

import torchtpu
from torchtpu.testing.models import CharData, TinyGPT


def main(steps=60, batch=8, seq=32, mode="fused"):
    torch.manual_seed(0)
    device = torchtpu.get_device()
    torchtpu.set_eager_mode(mode)
    data = CharData()
    model = TinyGPT(data.vocab, width=64, layers=4, heads=4, max_len=seq).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    print(f"torchtpu demo: TinyGPT ({sum(p.numel() for p in model.parameters())} parameters) on {device}, "
          f"platform {torchtpu.platform()}, mode {torchtpu.get_eager_mode()}")
    losses = []
    bar = sys.stdout.isatty()
    start = time.perf_counter()
    window = start
    for step in range(1, steps + 1):
        x, y = data.batch(batch, seq, gen)
        loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step == 1 or step % 10 == 0:
            value = loss.item()
            losses.append(value)
            now = time.perf_counter()
            done = 1 if step == 1 else 10
            rate = done / (now - window)
            window = now
            if bar:
                filled = 30 * step // steps
                left = (steps - step) / rate
                print(f"\r[{'#' * filled}{'.' * (30 - filled)}] step {step}/{steps}  loss {value:.4f}  "
                      f"{rate:.2f} steps/s  {left:.0f}s left ", end="", flush=True)
            else:
                print(f"step {step:4d}  loss {value:.4f}  {rate:.2f} steps/s")
    if bar:
        print()
    total = time.perf_counter() - start
    m = torchtpu.debug.metrics()
    print(f"trained {steps} steps in {total:.1f}s ({steps / total:.2f} steps/s); "
          f"compilations {m['compilations']}, executions {m['executions']}, "
          f"cpu fallbacks {sum(m['cpu_fallbacks'].values())}")
    if not losses[-1] < losses[0]:
        raise SystemExit(f"loss did not decrease: {losses[0]:.4f} -> {losses[-1]:.4f}")
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--mode", default="fused", choices=["debug", "strict", "fused"])
    a = p.parse_args()
    main(steps=a.steps, mode=a.mode)
