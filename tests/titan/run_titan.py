"""TorchTitan's llama3 debug model trained on the tpu device against the CPU.

    python tests/titan/run_titan.py [--configs 1proc,fsdp2,...] [--steps 5] [--site DIR] [--workdir DIR]

TorchTitan (PyPI torchtitan==0.3.0, tests/titan/requirements-titan.txt,
installed with --no-deps in DIR, put on PYTHONPATH by --site) runs unchanged
through its own entry point, torchtitan.train.main(), under torchrun, with its
stock "llama3_debugmodel" config (complex RoPE, FlexAttention with a
block-causal document mask, fused AdamW, the llama3 init) and command line
overrides only:

- a generated local dataset and tokenizer (assets.py; nothing downloaded),
  a short sequence and batch (--training.seq-len 64, --training.local-batch-size 2);
- one seed checkpoint, made once by TorchTitan itself on the CPU
  (--checkpoint.create-seed-checkpoint) and loaded by every run
  (--checkpoint.initial-load-path, --checkpoint.load-only), so the tpu run and
  its CPU reference start from the same weights;
- per configuration (CONFIGS): processes, FSDP2 / TP degrees, torch.compile,
  activation checkpointing, parameter dtype.

Each configuration runs on tpu, then on the CPU (PyTorch's own kernels) with
the same arguments, except torch.compile: the CPU reference of a compiled
configuration runs uncompiled (Inductor's CPU FlexAttention has no backward in
PyTorch 2.13; the math is the same). Per step it compares TorchTitan's logged
loss and grad norm; it prints one JSON line per configuration (losses, step
times, torchtpu's counters: CPU fallbacks, compiled programs, abandoned
captures) and exits non-zero if a configuration failed or differed.

The worker (titan_worker.py) documents each shim of TorchTitan's own
assumptions. Multi-process runs use torchrun with TORCHTPU_CPU_DEVICES unset
(each process's XLA:CPU client exposes one device per local rank) and the
c10d backend TorchTitan picks for the device, tpu_dist.
"""
import argparse
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import assets  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
# Where `make test` installs requirements-titan.txt (beside the venv's own packages).
DEFAULT_SITE = os.environ.get("TITAN_SITE", os.path.join(ROOT, ".venv", "titan-site"))
DEFAULT_WORKDIR = os.environ.get("TITAN_WORKDIR", os.path.join(tempfile.gettempdir(), "torchtpu-titan"))

# TorchTitan's ParallelismConfig.spmd_backend defaults to "spmd_types"; with
# PyTorch 2.13 its FSDP path fails on every device, the CPU included
# (fully_shard(..., dp_mesh_dims=...) raises "When dp_mesh_dims is provided,
# all parameters must be DTensors on the full SPMD mesh"), so multi-process
# configurations select TorchTitan's DTensor path for model-parallel axes.
PARTIAL_DTENSOR = ["--parallelism.spmd-backend", "partial_dtensor"]
FP32 = ["--training.mixed-precision-param", "float32"]

# name: (processes, TorchTitan arguments, activation checkpointing subcommand)
CONFIGS = {
    "1proc": (1, FP32, "none"),
    "1proc_sac": (1, FP32, "selective"),  # the debug model's own default
    "1proc_fullac": (1, FP32, "full"),
    "1proc_compile": (1, FP32 + ["--compile.enable"], "none"),
    "1proc_compile_sac": (1, FP32 + ["--compile.enable"], "selective"),
    "1proc_compile_fullac": (1, FP32 + ["--compile.enable"], "full"),
    "1proc_bf16": (1, [], "none"),  # stock mixed precision: bfloat16 parameters (FSDP2's policy)
    "fsdp2": (2, FP32 + PARTIAL_DTENSOR, "none"),
    "fsdp2_compile": (2, FP32 + PARTIAL_DTENSOR + ["--compile.enable"], "none"),
    "fsdp2_sac": (2, FP32 + PARTIAL_DTENSOR, "selective"),
    "tp2": (2, FP32 + PARTIAL_DTENSOR + ["--parallelism.tensor-parallel-degree", "2",
                                         "--parallelism.data-parallel-shard-degree", "1"], "none"),
    # The stock debug model's own settings (bfloat16 parameters, selective activation checkpointing) under FSDP2.
    "fsdp2_stock": (2, PARTIAL_DTENSOR, "selective"),
    "fsdp2_stock_compile": (2, PARTIAL_DTENSOR + ["--compile.enable"], "selective"),
    "tp2_compile": (2, FP32 + PARTIAL_DTENSOR + ["--parallelism.tensor-parallel-degree", "2",
                                                 "--parallelism.data-parallel-shard-degree", "1",
                                                 "--compile.enable"], "none"),
}

# Relative differences allowed against the CPU, per parameter dtype. float32
# losses agree to ~1e-7 here; TorchTitan's grad norm (a sum over all
# parameters) varies by ~1e-4 between two CPU runs of different parallelism.
TOLERANCE = {"float32": {"loss": 1e-5, "grad_norm": 1e-3}, "bfloat16": {"loss": 1e-3, "grad_norm": 1e-2}}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(device, site, workdir, result, extra_env=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TORCHTPU_CACHE_DIR", os.path.join(workdir, "torchtpu-cache"))
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(workdir, "inductor-cache"))
    env["HF_HOME"] = os.path.join(workdir, "hf")  # the datasets cache of the local JSON dataset
    env["HF_DATASETS_OFFLINE"] = "1"
    env["HF_HUB_OFFLINE"] = "1"
    env["LOG_RANK"] = "0"
    env["TITAN_DEVICE"] = device
    env["TITAN_RESULT"] = result
    # torchrun's ranks each see one XLA:CPU device per local rank only when this is unset.
    env.pop("TORCHTPU_CPU_DEVICES", None)
    if device == "cpu":  # the reference is PyTorch alone: no torchtpu through torch's device autoload
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    env.update(extra_env or {})
    return env


def _common_args(workdir, steps, seq_len, batch):
    return ["--module", "llama3", "--config", "llama3_debugmodel",
            "--hf-assets-path", os.path.join(workdir, "tokenizer"),
            "--dataloader.dataset-path", os.path.join(workdir, "data"),
            "--training.local-batch-size", str(batch), "--training.seq-len", str(seq_len),
            "--training.steps", str(steps), "--debug.seed", "42"]


def _torchrun(nproc, args, env, log, timeout):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
           "--master-port", str(_free_port()), os.path.join(HERE, "titan_worker.py")] + args
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        start = time.perf_counter()
        proc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
    return proc.returncode, time.perf_counter() - start


def _tail(log, n=40):
    with open(log) as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    return "\n".join(lines[-n:])


def prepare(workdir, site, seq_len=64, batch=2, timeout=600):
    """The dataset, the tokenizer and TorchTitan's seed checkpoint (made on the CPU)."""
    assets.make_dataset(os.path.join(workdir, "data"))
    assets.make_tokenizer(os.path.join(workdir, "tokenizer"))
    seed = os.path.join(workdir, "seed", "checkpoint", "step-0")
    if not os.path.isdir(seed):
        log = os.path.join(workdir, "seed.log")
        args = _common_args(workdir, 1, seq_len, batch) + [
            "--dump-folder", os.path.join(workdir, "seed"),
            "--checkpoint.enable", "--checkpoint.create-seed-checkpoint", "activation-checkpoint:none"]
        rc, _ = _torchrun(1, args, _env("cpu", site, workdir, ""), log, timeout)
        if rc != 0 or not os.path.isdir(seed):
            raise RuntimeError(f"seed checkpoint failed (rc={rc}), {log}:\n{_tail(log)}")
    return seed


def run(device, name, workdir, site, steps=5, seq_len=64, batch=2, timeout=900, extra_env=None, reuse=False):
    """One configuration on one device: {"steps": [...], "metrics": {...}, "wall_s": ...}.
    Raises RuntimeError with the log's tail if TorchTitan fails."""
    nproc, extra, ac = CONFIGS[name]
    if device == "cpu":
        extra = [a for a in extra if a != "--compile.enable"]
    args = _common_args(workdir, steps, seq_len, batch) + extra + [
        "--checkpoint.enable", "--checkpoint.initial-load-path", os.path.join(workdir, "seed", "checkpoint", "step-0"),
        "--checkpoint.load-only"]
    key = hashlib.sha1(json.dumps([device, nproc, args, ac, extra_env or {}]).encode()).hexdigest()[:10]
    # A CPU reference depends on its arguments only (compiled configurations share their uncompiled one's).
    tag = f"cpu-ref-{key}" if device == "cpu" else f"{device}-{name}-{key}"
    result, log = os.path.join(workdir, tag + ".jsonl"), os.path.join(workdir, tag + ".log")
    if not (reuse and os.path.exists(result)):
        if os.path.exists(result):
            os.remove(result)
        args += ["--dump-folder", os.path.join(workdir, tag), f"activation-checkpoint:{ac}"]
        rc, wall = _torchrun(nproc, args, _env(device, site, workdir, result, extra_env), log, timeout)
        if rc != 0:
            raise RuntimeError(f"{device} {name} failed (rc={rc}), {log}:\n{_tail(log)}")
    else:
        wall = None
    out = {"steps": [], "metrics": None, "wall_s": wall, "log": log}
    with open(result) as f:
        for line in f:
            record = json.loads(line)
            if "torchtpu_metrics" in record:
                out["metrics"] = record["torchtpu_metrics"]
            else:
                out["steps"].append(record)
    if len(out["steps"]) != steps:
        raise RuntimeError(f"{device} {name}: {len(out['steps'])} of {steps} steps logged, {log}:\n{_tail(log)}")
    return out


def _rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def compare(name, tpu, cpu):
    dtype = "bfloat16" if "--training.mixed-precision-param" not in CONFIGS[name][1] else "float32"
    tol = TOLERANCE[dtype]
    loss_diff = max(_rel(t["loss"], c["loss"]) for t, c in zip(tpu["steps"], cpu["steps"]))
    grad_diff = max(_rel(t["grad_norm"], c["grad_norm"]) for t, c in zip(tpu["steps"], cpu["steps"]))

    def step_time(r):  # the median step after the first (which compiles)
        return statistics.median(s["seconds"] for s in r["steps"][1:]) if len(r["steps"]) > 1 else None

    metrics = tpu["metrics"] or {}
    fallbacks = metrics.get("cpu_fallbacks") or {}
    abandoned = (metrics.get("compiled") or {}).get("abandoned", 0)
    problems = []
    if loss_diff > tol["loss"]:
        problems.append(f"loss differs from the CPU by {loss_diff:.3g} (relative) > {tol['loss']}")
    if grad_diff > tol["grad_norm"]:
        problems.append(f"grad norm differs from the CPU by {grad_diff:.3g} (relative) > {tol['grad_norm']}")
    if fallbacks:
        problems.append(f"ops ran on the CPU fallback: {fallbacks}")
    if "--compile.enable" in CONFIGS[name][1] and abandoned:
        # torch.compile graphs that torchtpu could not capture run eagerly (with a warning): same values, no program.
        problems.append(f"{abandoned} torch.compile graph(s) abandoned their capture and ran eagerly")
    return {
        "config": name, "processes": CONFIGS[name][0], "param_dtype": dtype,
        "tpu_loss": [s["loss"] for s in tpu["steps"]], "cpu_loss": [s["loss"] for s in cpu["steps"]],
        "tpu_grad_norm": [s["grad_norm"] for s in tpu["steps"]], "cpu_grad_norm": [s["grad_norm"] for s in cpu["steps"]],
        "max_rel_loss_diff": loss_diff, "max_rel_grad_norm_diff": grad_diff,
        "tpu_step_s": step_time(tpu), "cpu_step_s": step_time(cpu),
        "tpu_first_step_s": tpu["steps"][0]["seconds"], "cpu_first_step_s": cpu["steps"][0]["seconds"],
        "tpu_metrics": tpu["metrics"],
        "problems": problems, "ok": not problems,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default="1proc", help=f"comma-separated, or 'all': {', '.join(CONFIGS)}")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--site", default=DEFAULT_SITE, help="where requirements-titan.txt is installed (--target)")
    p.add_argument("--workdir", default=DEFAULT_WORKDIR)
    p.add_argument("--eager-mode", default=None, help="TORCHTPU_EAGER_MODE for the tpu runs (debug, strict, fused)")
    p.add_argument("--timeout", type=int, default=900, help="seconds per TorchTitan run")
    p.add_argument("--reuse-cpu", action="store_true", help="reuse CPU reference results of earlier runs in workdir")
    a = p.parse_args(argv)

    names = list(CONFIGS) if a.configs == "all" else a.configs.split(",")
    for name in names:
        if name not in CONFIGS:
            p.error(f"unknown configuration {name!r}; known: {', '.join(CONFIGS)}")
    os.makedirs(a.workdir, exist_ok=True)
    prepare(a.workdir, a.site, a.seq_len, a.batch)
    tpu_env = {"TORCHTPU_EAGER_MODE": a.eager_mode} if a.eager_mode else None
    failed = 0
    for name in names:
        try:
            tpu = run("tpu", name, a.workdir, a.site, a.steps, a.seq_len, a.batch, a.timeout, tpu_env)
            cpu = run("cpu", name, a.workdir, a.site, a.steps, a.seq_len, a.batch, a.timeout, reuse=a.reuse_cpu)
            summary = compare(name, tpu, cpu)
            summary["eager_mode"] = a.eager_mode or "default"
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            summary = {"config": name, "ok": False, "error": str(e)}
        failed += not summary["ok"]
        print(json.dumps(summary), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
