"""The GPU path, checked and timed: torchtpu on XLA's GPU PJRT plugin
(TORCHTPU_PJRT_PLUGIN) against PyTorch's own CUDA and CPU results.

Correctness: a set of ops and the training of the test decoder and CNN, in
every eager mode, compared with the CPU. Speed: the decoder's training step
and a bf16 matrix product, torchtpu (Strict, Fused) against PyTorch CUDA
eager, in one run. One JSON line per result; exits non-zero on a mismatch.

    TORCHTPU_PJRT_PLUGIN=/path/to/xla_cuda_plugin.so python benchmarks/gpu_check.py
"""
import json
import statistics
import sys
import time

import torch

import torchtpu
from torchtpu.testing import models

FAILED = []


def emit(**kw):
    print(json.dumps(kw), flush=True)


def close(name, got, want, rtol, atol):
    got = got.detach().cpu().float()
    want = want.detach().cpu().float()
    ok = got.shape == want.shape and torch.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    err = (got - want).abs().max().item() if got.shape == want.shape and got.numel() else 0.0
    emit(check=name, ok=bool(ok), max_abs_err=err)
    if not ok:
        FAILED.append(name)


def op_checks(dev):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 96, generator=g)
    b = torch.randn(96, 48, generator=g)
    x = torch.randn(4, 3, 16, 16, generator=g)
    w = torch.randn(8, 3, 3, 3, generator=g)
    idx = torch.randint(0, 64, (100,), generator=g)
    cases = {
        "matmul": (lambda a, b: a @ b, (a, b), 1e-4, 1e-4),
        "matmul_bf16": (lambda a, b: (a.bfloat16() @ b.bfloat16()).float(), (a, b), 2e-2, 2e-1),
        "softmax": (lambda a: torch.softmax(a, -1), (a,), 1e-5, 1e-6),
        "layer_norm": (lambda a: torch.nn.functional.layer_norm(a, (96,)), (a,), 1e-4, 1e-5),
        "conv2d": (lambda x, w: torch.nn.functional.conv2d(x, w, padding=1), (x, w), 1e-4, 1e-4),
        "sum_mean_var": (lambda a: torch.stack([a.sum(), a.mean(), a.var()]), (a,), 1e-4, 1e-4),
        "sort": (lambda a: torch.sort(a, -1).values, (a,), 0, 0),
        "cumsum": (lambda a: a.cumsum(0), (a,), 1e-4, 1e-4),
        "index_select": (lambda a, i: a[i], (a, idx), 0, 0),
        "index_add": (lambda a, i: torch.zeros(64, 96, device=a.device).index_add(0, i[:64], a), (a, idx),
                      1e-5, 1e-5),
        "nonfinite": (lambda a: torch.where(a > 0, a / 0, a.log()), (a,), 0, 0),
        "int64_ops": (lambda i: (i * 3 + 7) // 2 % 5, (idx,), 0, 0),
    }
    for name, (fn, args, rtol, atol) in cases.items():
        want = fn(*args)
        try:
            got = fn(*[t.to(dev) for t in args])
            close(f"op:{name}", got, want, rtol, atol)
        except Exception as e:  # a failure to run is a failed check, with its message
            emit(check=f"op:{name}", ok=False, error=f"{type(e).__name__}: {e}"[:400])
            FAILED.append(f"op:{name}")


def train(name, device, steps):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    if name == "cnn":
        model = models.SmallCNN().to(device)
        batch = lambda: models.cnn_batch(16, gen)
        loss_fn = lambda x, y: torch.nn.functional.cross_entropy(model(x), y)
    else:
        data = models.CharData()
        model = models.TinyGPT(data.vocab, width=64, layers=2, heads=4, max_len=32).to(device)
        batch = lambda: data.batch(4, 32, gen)
        loss_fn = lambda x, y: model(x, y)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(steps):
        x, y = batch()
        loss = loss_fn(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return torch.tensor(losses)


class Job:
    """A decoder training step on one device, for timing."""

    def __init__(self, device, width, layers, batch, seq):
        torch.manual_seed(0)
        self.device = device
        self.gen = torch.Generator().manual_seed(0)
        self.data = models.CharData()
        self.shape = (batch, seq)
        self.model = models.TinyGPT(self.data.vocab, width=width, layers=layers, heads=4, max_len=seq).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)

    def step(self):
        x, y = self.data.batch(*self.shape, self.gen)
        loss = self.model(x.to(self.device), y.to(self.device))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.item()


def step_times(width, layers, batch, seq, steps=20, rounds=3):
    jobs = {}
    modes = ["strict", "fused"] + (["cuda_eager"] if torch.cuda.is_available() else [])
    for m in modes:
        if m != "cuda_eager":
            torchtpu.set_eager_mode(m)
        jobs[m] = Job("cuda" if m == "cuda_eager" else "tpu", width, layers, batch, seq)
        for _ in range(3):
            jobs[m].step()
    times = {m: [] for m in modes}
    for _ in range(rounds):
        for m in modes:
            if m != "cuda_eager":
                torchtpu.set_eager_mode(m)
            jobs[m].step()
            for _ in range(steps // rounds):
                t0 = time.perf_counter()
                jobs[m].step()
                times[m].append((time.perf_counter() - t0) * 1e3)
    med = {m: statistics.median(v) for m, v in times.items()}
    shape = f"w{width}_l{layers}_b{batch}_s{seq}"
    for m, v in med.items():
        emit(bench="decoder_step", shape=shape, mode=m, ms=round(v, 3))
    if "cuda_eager" in med:
        for m in ("strict", "fused"):
            emit(bench="decoder_step", shape=shape, ratio=f"cuda_eager/{m}",
                 value=round(med["cuda_eager"] / med[m], 3))


def matmul_tflops(n=8192, reps=10):
    out = {}
    for name, dev in (("tpu", "tpu"), ("cuda", "cuda")):
        if dev == "cuda" and not torch.cuda.is_available():
            continue
        a = torch.randn(n, n, dtype=torch.bfloat16).to(dev)
        b = torch.randn(n, n, dtype=torch.bfloat16).to(dev)
        sync = torchtpu.synchronize if dev == "tpu" else torch.cuda.synchronize
        for _ in range(3):
            c = a @ b
        sync()
        t0 = time.perf_counter()
        for _ in range(reps):
            c = a @ b
        sync()
        dt = (time.perf_counter() - t0) / reps
        out[name] = 2 * n ** 3 / dt / 1e12
        emit(bench="matmul_bf16", n=n, device=name, tflops=round(out[name], 1))
    if len(out) == 2:
        emit(bench="matmul_bf16", ratio="tpu/cuda", value=round(out["tpu"] / out["cuda"], 3))


def main():
    emit(platform=torchtpu.platform(), plugin=torchtpu.plugin(), torch=torch.__version__)
    for mode in ("debug", "strict", "fused"):
        torchtpu.set_eager_mode(mode)
        op_checks("tpu")
        for name in ("decoder", "cnn"):
            want = train(name, "cpu", 5)
            got = train(name, "tpu", 5)
            close(f"train:{name}:{mode}", got, want, 2e-3, 2e-4)
    torchtpu.set_eager_mode("strict")
    step_times(64, 4, 4, 32)
    if torchtpu.platform() != "cpu":
        step_times(512, 8, 16, 256)
    matmul_tflops(8192 if torchtpu.platform() != "cpu" else 512)
    emit(summary="gpu_check", failed=FAILED)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
