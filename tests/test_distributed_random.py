"""Random collective sequences on ranks as threads of one process
(torchtpu.distributed.thread_group) in Fused Eager, against the CPU. Needs
four devices: run in a child process with TORCHTPU_CPU_DEVICES=4."""
import os
import subprocess
import sys
import textwrap

import pytest

# Random collective sequences in Fused Eager: every rank issues the same
# collectives, but reads values, runs extra ops and pauses at its own random
# points (or, for `spmd`, all at the same points), so programs are cut in
# different places and run in stages, or together, with other ranks pulled.
# Each value is checked against the same sequence computed on the CPU.
RANDOM = textwrap.dedent(r"""
    import datetime, random, sys, threading, time
    import torch, torch.distributed as dist
    import torchtpu
    from torchtpu.distributed import thread_group
    torchtpu.set_eager_mode("fused")
    N, STEPS = 4, 12
    seed, spmd = int(sys.argv[1]), sys.argv[2] == "spmd"
    rng = random.Random(seed)
    plan = [(rng.choice(["sum", "max", "all_gather", "reduce_scatter", "broadcast"]), rng.choice([4, 8, 16]))
            for _ in range(STEPS)]
    reads = [{i for i in range(STEPS) if rng.random() < 0.3} for _ in range(N)]
    extra = [{i for i in range(STEPS) if rng.random() < 0.3} for _ in range(N)]
    pause = [{i for i in range(STEPS) if rng.random() < 0.15} for _ in range(N)]
    if spmd:
        reads, extra, pause = [reads[0]] * N, [extra[0]] * N, [set()] * N
    torch.manual_seed(seed)
    base = [torch.randn(16) for _ in range(N)]
    from torchtpu.testing.ranks import run_ranks as _run_ranks
    run_ranks = lambda fn, name, timeout=30: _run_ranks(fn, name, N, timeout)

    def step(i, op, n, xs):
        # every rank's result of collective i, given every rank's input
        if op == "sum":
            return [sum(xs)] * N
        if op == "max":
            return [torch.stack(xs).max(0).values] * N
        if op == "all_gather":
            return [torch.cat(xs)[:16]] * N
        if op == "reduce_scatter":
            k = n // N
            return [sum(xs)[r * k:(r + 1) * k].repeat(N) for r in range(N)]
        return [xs[1]] * N

    def update(v, res):
        return torch.cat([res.tanh(), v[res.numel():]]) if res.numel() < 16 else res[:16].tanh()

    ref, vals = [], [b.clone() for b in base]
    for i, (op, n) in enumerate(plan):
        res = step(i, op, n, [vals[r][:n] * (1 + 0.1 * i) + r for r in range(N)])
        vals = [update(vals[r], res[r]) for r in range(N)]
        ref.append(vals)

    def rank(r, pg, dev):
        v, mine = base[r].to(dev), []
        for i, (op, n) in enumerate(plan):
            x = v[:n] * (1 + 0.1 * i) + r
            if op in ("sum", "max"):
                dist.all_reduce(x, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX, group=pg)
                res = x
            elif op == "all_gather":
                res = torch.empty(n * N, device=dev)
                dist.all_gather_into_tensor(res, x, group=pg)
                res = res[:16]
            elif op == "reduce_scatter":
                res = torch.empty(n // N, device=dev)
                dist.reduce_scatter_tensor(res, x, group=pg)
                res = res.repeat(N)
            else:
                dist.broadcast(x, 1, group=pg)
                res = x
            if i in extra[r]:
                (res * 3).exp().sum()
            v = update(v, res)
            mine.append(v)
            if i in pause[r]:
                time.sleep(0.15)
            if i in reads[r]:
                torch.testing.assert_close(v.cpu(), ref[i][r], rtol=1e-4, atol=1e-4)
        for i in range(STEPS):
            torch.testing.assert_close(mine[i].cpu(), ref[i][r], rtol=1e-4, atol=1e-4)

    errors = run_ranks(rank, "random")
    assert not errors, errors
    d = torchtpu.debug.metrics()["distributed"]
    assert d["fused_programs"] > 0 if spmd else d["staged_programs"] > 0, d
    print("RANDOM OK")
""")


@pytest.mark.parametrize("seed,kind,max_ops", [(1, "mpmd", None), (2, "spmd", None), (3, "mpmd", "3")],
                         ids=["mpmd", "spmd", "mpmd_cut_every_3_ops"])
def test_thread_ranks_random_collective_sequences_match_the_cpu(seed, kind, max_ops):
    env = dict(os.environ, TORCHTPU_CPU_DEVICES="4", OMP_NUM_THREADS="1")
    env.pop("LOCAL_WORLD_SIZE", None)
    if max_ops:
        env["TORCHTPU_FUSED_MAX_OPS"] = max_ops
    script = RANDOM
    proc = subprocess.run([sys.executable, "-c", script, str(seed), kind], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0 and "RANDOM OK" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-5000:]
