"""Distributed benchmark, all in one run:
- DDP training step of the test decoder (decoder_small of train_step.py) at 1,
  2 and 4 processes on tpu with the per-rank batch fixed: median step time,
  and the share of it spent in gradient all_reduce (a comm hook times each
  bucket's all_reduce after the bucket's gradients are computed);
- all_reduce from 1 KB to 64 MB at 2 processes: tpu tensors through tpu_dist
  (on XLA:CPU staged through Gloo on the host) against Gloo on CPU tensors of
  the same group, as bus bandwidth (2 (n-1)/n bytes per rank and second) and
  the ratio of the two times;
- DDP of the same decoder on 4 ranks that are threads of one process over 4
  XLA:CPU devices (torchtpu.distributed.thread_group), in Strict Eager (each
  bucket's all_reduce a program of its own) against Fused Eager (the
  all_reduce joins the backward program that computes the bucket, one
  replicated execution for all ranks), in the same run.
Prints one JSON line per result.

    python benchmarks/distributed.py            # everything (about two minutes)
    python benchmarks/distributed.py --quick    # fewer steps and sizes
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time


def emit(**row):
    print(json.dumps(row), flush=True)


def train_steps(model, data, dev, rank, args, before_step=None):
    """Runs args.warmup + args.steps steps of the decoder (per-rank batch 4,
    AdamW); returns the times of the steps after the warm-up, in seconds.
    before_step(timed) is called before each step."""
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(rank)
    times = []
    for step in range(args.warmup + args.steps):
        x, y = data.batch(4, 32, gen)
        if before_step:
            before_step(step >= args.warmup)
        t0 = time.perf_counter()
        loss = model(x.to(dev), y.to(dev))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    return times


def worker(args):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torchtpu  # noqa: F401
    from torchtpu.testing import models

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("tpu", int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("tpu_dist")

    if args.what == "ddp":
        torch.manual_seed(0)
        data = models.CharData()
        model = DDP(models.TinyGPT(data.vocab, width=64, layers=4, heads=4, max_len=32).to(dev))
        comms = []  # the communication time of each timed step, in seconds

        def timed_allreduce(state, bucket):
            torch.tpu.synchronize()  # the bucket's gradients are computed: time the communication alone
            t0 = time.perf_counter()
            buf = bucket.buffer()
            fut = dist.all_reduce(buf, async_op=True).get_future()
            out = fut.then(lambda f: f.value()[0].div_(world))
            out.wait()
            torch.tpu.synchronize()
            if comms:
                comms[-1] += time.perf_counter() - t0
            return out

        model.register_comm_hook(None, timed_allreduce)
        times = train_steps(model, data, dev, rank, args, lambda timed: comms.append(0.0) if timed else None)
        if rank == 0:
            step_ms, comm_ms = statistics.median(times) * 1e3, statistics.median(comms) * 1e3
            emit(bench="ddp_decoder_small", processes=world, metric="step_time", value=round(step_ms, 2),
                 unit="ms", comm_ms=round(comm_ms, 2), comm_share=round(comm_ms / step_ms, 3),
                 per_rank_batch=4, steps=args.steps)
    else:
        sizes = [1 << k for k in range(10, 27, 2 if not args.quick else 4)]  # 1 KB .. 64 MB
        gloo = dist.new_group(backend="gloo")
        for nbytes in sizes:
            n = nbytes // 4
            row = {}
            for label, device, group in (("tpu_dist", dev, None), ("gloo_cpu", "cpu", gloo)):
                x = torch.ones(n, device=device)
                dist.all_reduce(x, group=group)  # warm-up (and compile)
                if device != "cpu":
                    torch.tpu.synchronize()
                # The same count on every rank: a count by elapsed time would
                # differ between ranks and leave them in different collectives.
                reps = 50 if nbytes <= 1 << 16 else 20 if nbytes <= 1 << 20 else 5
                t0 = time.perf_counter()
                for _ in range(reps):
                    dist.all_reduce(x, group=group)
                if device != "cpu":
                    torch.tpu.synchronize()
                row[label] = (time.perf_counter() - t0) / reps
            if rank == 0:
                bus = lambda t: nbytes * 2 * (world - 1) / world / t / 1e9  # noqa: E731
                emit(bench="all_reduce", processes=world, bytes=nbytes,
                     tpu_dist_us=round(row["tpu_dist"] * 1e6, 1), gloo_cpu_us=round(row["gloo_cpu"] * 1e6, 1),
                     tpu_dist_GBps=round(bus(row["tpu_dist"]), 3), gloo_cpu_GBps=round(bus(row["gloo_cpu"]), 3),
                     tpu_over_gloo_time=round(row["tpu_dist"] / row["gloo_cpu"], 2))
    dist.destroy_process_group()


def threads(args):
    import copy
    import datetime
    import threading

    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torchtpu
    from torchtpu.distributed import thread_group
    from torchtpu.testing import models

    world = 4
    torch.manual_seed(0)
    data = models.CharData()
    base = models.TinyGPT(data.vocab, width=64, layers=4, heads=4, max_len=32)
    results = {}
    for mode in ("strict", "fused"):
        torchtpu.set_eager_mode(mode)
        before = torchtpu.debug.metrics()["distributed"]
        times = {}

        def rank_body(rank):
            dev = torch.device("tpu", rank)
            pg = thread_group(rank, world, name=f"bench_{mode}", timeout=datetime.timedelta(minutes=5))
            model = DDP(copy.deepcopy(base).to(dev), process_group=pg)
            times[rank] = statistics.median(train_steps(model, data, dev, rank, args))

        ranks = [threading.Thread(target=rank_body, args=(r,)) for r in range(world)]
        [t.start() for t in ranks]
        [t.join() for t in ranks]
        after = torchtpu.debug.metrics()["distributed"]
        steps_run = world * (args.warmup + args.steps)
        results[mode] = max(times.values()) * 1e3
        emit(bench="ddp_decoder_small_thread_ranks", mode=mode, ranks=world, metric="step_time",
             value=round(results[mode], 2), unit="ms",
             collective_programs_per_step=round((after["device_programs"] - before["device_programs"]) * world
                                                / steps_run, 2),
             joined_programs_per_step=round((after["fused_programs"] - before["fused_programs"]) * world
                                            / steps_run, 2))
    emit(bench="ddp_decoder_small_thread_ranks", metric="fused_over_strict_step_time",
         value=round(results["fused"] / results["strict"], 2), unit="x")


def launch(nproc, what, args):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", f"--master-port={port}",
           os.path.abspath(__file__), "--worker", what, "--steps", str(args.steps), "--warmup", str(args.warmup)]
    if args.quick:
        cmd.append("--quick")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("TORCHTPU_CPU_DEVICES", None)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    rows = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not rows:
        raise SystemExit(f"{what} at {nproc} processes failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    for line in rows:
        print(line, flush=True)
    return [json.loads(line) for line in rows]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--worker", choices=["ddp", "allreduce", "threads"])
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()
    if args.steps is None:
        args.steps = 5 if args.quick else 20
    if args.worker == "threads":
        return threads(args)
    if args.worker:
        args.what = args.worker
        return worker(args)
    ddp = {n: launch(n, "ddp", args)[0] for n in (1, 2, 4)}
    for n in (2, 4):
        emit(bench="ddp_decoder_small", metric="step_time_ratio", processes=n,
             value=round(ddp[n]["value"] / ddp[1]["value"], 2), unit=f"x the 1-process step")
    launch(2, "allreduce", args)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "threads", "--steps", str(args.steps),
           "--warmup", str(args.warmup)]
    out = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1", TORCHTPU_CPU_DEVICES="4"),
                         capture_output=True, text=True, timeout=1800)
    rows = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not rows:
        raise SystemExit(f"thread ranks failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    print("\n".join(rows), flush=True)


if __name__ == "__main__":
    main()
