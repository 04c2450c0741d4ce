"""Ranks as threads of one process (torchtpu.distributed.thread_group): each
collective is one XLA program of StableHLO collectives run on all the ranks'
devices at once. Needs four devices: run in a child process with
TORCHTPU_CPU_DEVICES=4 (this process's client has its own device count)."""
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(r'''
    import datetime, threading, time
    import torch, torch.distributed as dist
    import torchtpu
    from torchtpu.distributed import thread_group, collective_programs

    N = 4
    check = torch.testing.assert_close

    def inp(r, shape, dtype):
        n = max(1, torch.Size(shape).numel())
        t = (torch.arange(n, dtype=torch.float64) % 5 + 2 * r - 3).to(dtype)[: torch.Size(shape).numel()]
        return t.reshape(shape)

    def run_ranks(fn, name, timeout=30):
        errors, threads = {}, []
        def body(r):
            try:
                fn(r, thread_group(r, N, name=name, timeout=datetime.timedelta(seconds=timeout)),
                   torch.device("tpu", r))
            except Exception as e:
                errors[r] = e
        threads = [threading.Thread(target=body, args=(r,)) for r in range(N)]
        [t.start() for t in threads]
        [t.join(120) for t in threads]
        assert not any(t.is_alive() for t in threads), "a rank hung"
        return errors

    REDUCE = {dist.ReduceOp.SUM: lambda s: s.sum(0), dist.ReduceOp.MAX: lambda s: s.max(0).values,
              dist.ReduceOp.MIN: lambda s: s.min(0).values, dist.ReduceOp.PRODUCT: lambda s: s.prod(0),
              dist.ReduceOp.AVG: lambda s: s.sum(0) / N}
    counted = []

    def collectives(r, pg, dev):
        n = empty = 0
        for dtype in (torch.float32, torch.bfloat16, torch.int32):
            for shape in ((4, 3), (), (0, 2)):
                stack = torch.stack([inp(q, shape, dtype) for q in range(N)]).double()
                for op, ref in REDUCE.items():
                    if op == dist.ReduceOp.AVG and not dtype.is_floating_point:
                        continue
                    x = inp(r, shape, dtype).to(dev)
                    if len(shape) == 2:
                        x = x.t().contiguous().t()  # non-contiguous
                    dist.all_reduce(x, op=op, group=pg)
                    check(x.cpu(), ref(stack).to(dtype))
                    n += 1
                    empty += x.numel() == 0
            out = torch.empty(N * 6, dtype=dtype, device=dev)
            dist.all_gather_into_tensor(out, inp(r, (6,), dtype).to(dev), group=pg)
            check(out.cpu(), torch.cat([inp(q, (6,), dtype) for q in range(N)]))
            rs = torch.empty(2, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(rs, inp(r, (2 * N,), dtype).to(dev), group=pg)
            check(rs.cpu(), torch.stack([inp(q, (2 * N,), dtype) for q in range(N)]).double().sum(0)
                  .to(dtype)[2 * r: 2 * r + 2])
            a2a = torch.empty(2 * N, dtype=dtype, device=dev)
            dist.all_to_all_single(a2a, inp(r, (2 * N,), dtype).to(dev), group=pg)
            check(a2a.cpu(), torch.cat([inp(q, (2 * N,), dtype)[2 * r: 2 * r + 2] for q in range(N)]))
            b = inp(r, (3,), dtype).to(dev)
            dist.broadcast(b, 2, group=pg)
            check(b.cpu(), inp(2, (3,), dtype))
            outs = [torch.empty(3, dtype=dtype, device=dev) for _ in range(N)]
            dist.all_gather(outs, inp(r, (3,), dtype).to(dev), group=pg)
            for q in range(N):
                check(outs[q].cpu(), inp(q, (3,), dtype))
            n += 5
        x = inp(r, (3,), torch.float32).to(dev)
        dist.reduce(x, 1, group=pg)
        if r == 1:
            check(x.cpu(), torch.stack([inp(q, (3,), torch.float32) for q in range(N)]).sum(0))
        dist.barrier(group=pg)
        counted.append((n + 2, empty + 1))  # the barrier and empty tensors run no program

    before = torchtpu.debug.metrics()["distributed"]
    errors = run_ranks(collectives, "collectives")
    assert not errors, errors
    after = torchtpu.debug.metrics()["distributed"]
    per_rank, no_program = counted[0]
    # One program per collective for all four ranks.
    assert after["collectives"] - before["collectives"] == N * per_rank
    assert after["device_programs"] - before["device_programs"] == per_rank - no_program, after
    assert after["host_staged"] == before["host_staged"]
    texts = "\n".join(collective_programs())
    for op in ("stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter", "stablehlo.all_to_all"):
        assert op in texts, op
    assert "mhlo.num_replicas = 4" in texts and "replica_groups = dense<[[0, 1, 2, 3]]>" in texts

    # Ranks that issue different collectives all raise, naming each side.
    def mismatch(r, pg, dev):
        if r == 3:
            dist.all_gather_into_tensor(torch.empty(8, device=dev), torch.ones(2, device=dev), group=pg)
        else:
            dist.all_reduce(torch.ones(4, 4, device=dev), group=pg)
    errors = run_ranks(mismatch, "mismatch")
    assert sorted(errors) == [0, 1, 2, 3], errors
    for e in errors.values():
        assert isinstance(e, RuntimeError) and "rank 0: all_reduce(sum) float32[4, 4]" in str(e) \
            and "rank 3: all_gather float32[2]" in str(e), e

    # A rank that never issues the collective: the others raise at the timeout.
    def absent(r, pg, dev):
        if r != 0:
            dist.all_reduce(torch.ones(2, device=dev), group=pg)
    start = time.monotonic()
    errors = run_ranks(absent, "absent", timeout=2)
    assert sorted(errors) == [1, 2, 3] and "rank(s) 0 did not reach collective #1" in str(errors[1]), errors
    assert time.monotonic() - start < 30

    # Unsupported between thread ranks: a clear error, no hang.
    def p2p(r, pg, dev):
        if r == 0:
            dist.send(torch.ones(2, device=dev), 1, group=pg)
    errors = run_ranks(p2p, "p2p")
    assert "send is not supported between ranks that are threads" in str(errors[0]), errors
    print("THREADS OK", after)
''')


def test_thread_ranks_run_stablehlo_collectives(tmp_path):
    env = dict(os.environ, TORCHTPU_CPU_DEVICES="4", OMP_NUM_THREADS="1")
    env.pop("LOCAL_WORLD_SIZE", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "THREADS OK" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-5000:]
