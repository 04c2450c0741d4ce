"""Ranks as threads of one process (torchtpu.distributed.thread_group): each
collective is one XLA program of StableHLO collectives run on all the ranks'
devices at once; in Fused Eager it is a node of the rank's program, which
goes on past it. Needs four devices: run in a child process with
TORCHTPU_CPU_DEVICES=4 (this process's client has its own device count)."""
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(r'''
    import datetime, os, sys, threading, time
    import torch, torch.distributed as dist
    import torchtpu
    from torchtpu.distributed import thread_group, collective_programs

    MODE = sys.argv[1]
    torchtpu.set_eager_mode(MODE)
    N = 4
    check = torch.testing.assert_close
    from torchtpu.testing.ranks import run_ranks as _run_ranks
    run_ranks = lambda fn, name, timeout=30: _run_ranks(fn, name, N, timeout)

    def inp(r, shape, dtype):
        n = max(1, torch.Size(shape).numel())
        t = (torch.arange(n, dtype=torch.float64) % 5 + 2 * r - 3).to(dtype)[: torch.Size(shape).numel()]
        return t.reshape(shape)


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
        # int64 beyond 2**53 stays exact; NaN and Inf go through a sum, Inf through
        # a max (NaN through max/min is unspecified, as with NCCL).
        big = torch.tensor([2 ** 53 + 1, -(2 ** 60) + r], dtype=torch.int64)
        x = big.to(dev)
        dist.all_reduce(x, group=pg)
        check(x.cpu(), torch.tensor([N * (2 ** 53 + 1), -N * 2 ** 60 + sum(range(N))]), rtol=0, atol=0)
        special = torch.tensor([float("nan") if r == 0 else 1.0, float("inf"), -float("inf") if r == 3 else 2.0])
        for op, want in ((dist.ReduceOp.SUM, [float("nan"), float("inf"), -float("inf")]),
                         (dist.ReduceOp.MAX, [1.0, float("inf"), 2.0])):
            x = special.nan_to_num(nan=1.0, posinf=float("inf"), neginf=-float("inf")) \
                if op == dist.ReduceOp.MAX else special
            x = x.to(dev)
            dist.all_reduce(x, op=op, group=pg)
            check(x.cpu(), torch.tensor(want), equal_nan=True)
        n += 3
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
    if MODE == "fused":  # each ran inside its program, or apart from it when the ranks' programs differed
        joined = after["fused_programs"] - before["fused_programs"]
        apart = (after["staged_programs"] - before["staged_programs"]) // N
        assert joined > 0 and joined + apart == per_rank - no_program, after
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

    # torch.compile: a collective is a node of the compiled program, which
    # runs on every call as one replicated execution of all the ranks'.
    import warnings
    def body(x, w, pg):
        y = (x @ w).tanh()
        dist.all_reduce(y, group=pg)
        return y * 2
    compiled_body = torch.compile(body, backend="tpu")
    W = torch.randn(3, 3)
    XC = [torch.randn(3, 3) for _ in range(N)]
    REF = sum((XC[q] @ W).tanh() for q in range(N))
    def compiled(r, pg, dev):
        for _ in range(3):
            check(compiled_body(XC[r].to(dev), W.to(dev), pg).cpu(), 2 * REF)
    before, texts_before = torchtpu.debug.metrics(), len(collective_programs())
    errors = run_ranks(compiled, "compiled")
    assert not errors, errors
    now = torchtpu.debug.metrics()
    assert now["compiled"]["abandoned"] == before["compiled"]["abandoned"]
    assert now["compiled"]["programs"] - before["compiled"]["programs"] == N  # one per rank's device
    assert now["distributed"]["fused_programs"] - before["distributed"]["fused_programs"] == 3  # one per call
    assert any(all(op in t for op in ("stablehlo.dot_general", "stablehlo.all_reduce", "num_replicas = 4"))
               for t in collective_programs()[texts_before:])

    # A capture that meets a host round trip after its collective (an op with
    # no lowering) runs what it captured with the other ranks, then eagerly.
    def with_fallback(x, w, pg):
        y = (x @ w).tanh()
        dist.all_reduce(y, group=pg)
        return torch.linalg.eigvals(y @ y.mT + 10 * torch.eye(3, device=y.device)).real.sort().values * 2
    compiled_fallback = torch.compile(with_fallback, backend="tpu")
    def fallback(r, pg, dev):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(2):
                check(compiled_fallback(XC[r].to(dev), W.to(dev), pg).cpu(),
                      torch.linalg.eigvals(REF @ REF.mT + 10 * torch.eye(3)).real.sort().values * 2)
    errors = run_ranks(fallback, "compiled_fallback")
    assert not errors, errors

    # One rank runs the function eagerly, the others compiled: every rank
    # raises, naming each side, at once.
    compiled_again = torch.compile(body, backend="tpu")
    def mixed(r, pg, dev):
        (body if r == 0 else compiled_again)(XC[r].to(dev), W.to(dev), pg).cpu()
    start = time.monotonic()
    errors = run_ranks(mixed, "compiled_mixed")
    assert sorted(errors) == [0, 1, 2, 3] and time.monotonic() - start < 20, errors
    for e in errors.values():
        assert "rank 0: all_reduce(sum) float32[3, 3]" in str(e) and \
            "rank 1: compiled program: all_reduce(sum) float32[3, 3]" in str(e), e

    # Fused Eager with tiny graphs: the collective's program reads a value that
    # failed on rank 0 (an out-of-memory of an earlier program). Every rank
    # raises at the collective and keeps what it computed before it.
    if MODE == "fused" and os.environ.get("TORCHTPU_FUSED_MAX_OPS"):
        torchtpu._C._set_memory_capacity(0)  # XLA reports the out-of-memory when the program runs
        def failed_input(r, pg, dev):
            kept = torch.ones(4, device=dev) * (r + 1)
            src = torch.zeros(2 ** 38 if r == 0 else 8, device=dev)
            s = src[:4] + 1
            try:
                dist.all_reduce(s, group=pg)
                s.cpu()
                raise AssertionError("the all_reduce of a failed value did not raise")
            except RuntimeError as e:
                assert "rank 0: all_reduce(sum) float32[4] (its input failed)" in str(e), e
            check(kept.cpu(), torch.ones(4) * (r + 1))
        # Every rank's input failed: each raises its own input's error.
        def all_failed(r, pg, dev):
            s = torch.zeros(2 ** 38, device=dev)[:4] + 1
            try:
                dist.all_reduce(s, group=pg)
                s.cpu()
                raise AssertionError("the all_reduce of failed values did not raise")
            except RuntimeError as e:
                assert "out of memory" in str(e).lower() and "returned nothing" not in str(e), e
        try:
            errors = run_ranks(failed_input, "failed_input")
            errors.update(run_ranks(all_failed, "all_failed"))
        finally:
            torchtpu._C._set_memory_capacity(-1)
        assert not errors, errors

    # Unsupported between thread ranks: a clear error, no hang.
    def p2p(r, pg, dev):
        if r == 0:
            dist.send(torch.ones(2, device=dev), 1, group=pg)
    errors = run_ranks(p2p, "p2p")
    assert "send is not supported between ranks that are threads" in str(errors[0]), errors
''')

# Fused Eager only: what joins the collective's program, and what happens
# when the ranks' programs differ.
FUSED = textwrap.dedent(r'''
    def delta(before):
        now = torchtpu.debug.metrics()["distributed"]
        return {k: now[k] - before[k] for k in now}

    torch.manual_seed(0)
    W = torch.randn(8, 8)
    X = [torch.randn(4, 8) for _ in range(N)]
    ref = sum((X[q] @ W).tanh() for q in range(N))

    # SPMD: every rank's program (matmul, tanh, all_reduce) runs as one
    # replicated execution holding computation and communication.
    def runs_as_one(fn, name, ops, all_reduces):
        """fn on every rank is one replicated execution of one new program
        holding `ops` and `all_reduces` all_reduce nodes."""
        before = torchtpu.debug.metrics()["distributed"]
        texts_before = len(collective_programs())
        errors = run_ranks(fn, name)
        assert not errors, errors
        d = delta(before)
        assert d["fused_programs"] == 1 and d["staged_programs"] == 0 and d["device_programs"] == 1, d
        new = collective_programs()[texts_before:]
        assert len(new) == 1 and new[0].count("stablehlo.all_reduce") == all_reduces and all(
            op in new[0] for op in ops + ("mhlo.num_replicas = 4",)), new

    def spmd(r, pg, dev):
        y = (X[r].to(dev) @ W.to(dev)).tanh()
        dist.all_reduce(y, group=pg)
        check(y.cpu(), ref)
    runs_as_one(spmd, "fused_spmd", ("stablehlo.dot_general", "stablehlo.tanh"), 1)

    # The program goes on past the collective: the ops after it, and a second
    # collective, are in the same replicated program.
    def past(r, pg, dev):
        y = (X[r].to(dev) @ W.to(dev)).tanh()
        dist.all_reduce(y, group=pg)
        z = y.exp() * 2
        dist.all_reduce(z, op=dist.ReduceOp.MAX, group=pg)
        check((z - y).cpu(), ref.exp() * 2 - ref)
    runs_as_one(past, "fused_past", ("stablehlo.dot_general", "stablehlo.exponential", "stablehlo.subtract"), 2)

    # Ranks that cut their programs in different places (rank 0 reads a value
    # between the collectives; the others read nothing until the end), with
    # extra ops on rank 2: each runs its program in stages around its
    # collectives. Rank 3 reads nothing at all: the others wait for it to
    # materialize its program, which it is asked to do.
    def cuts(r, pg, dev):
        a = X[r].to(dev) * (r + 1)
        extra = a.sum() if r == 2 else None
        dist.all_reduce(a, group=pg)
        b = a.cos()
        if r == 0:
            check(b.cpu(), ref_a.cos())
        dist.all_reduce(b, op=dist.ReduceOp.MIN, group=pg)
        c = b + a
        outs[r] = c
        if r == 2:
            check(extra.cpu(), (X[2] * 3).sum())
        if r != 3:
            check(c.cpu(), ref_a.cos() + ref_a)
    ref_a = sum(X[q] * (q + 1) for q in range(N))
    outs = {}
    before = torchtpu.debug.metrics()["distributed"]
    start = time.monotonic()
    errors = run_ranks(cuts, "fused_cuts")
    assert not errors, errors
    assert time.monotonic() - start < 20
    check(outs[3].cpu(), ref_a.cos() + ref_a)
    d = delta(before)
    assert d["staged_programs"] >= N and d["device_programs"] >= 2, d

    # A rank that waits for another rank's result outside torch (here an
    # event) while its collective is still pending: it is asked to
    # materialize its program, and nothing hangs.
    import threading
    got = threading.Event()
    def waits(r, pg, dev):
        a = X[r].to(dev) + r
        dist.all_reduce(a, group=pg)
        if r == 0:
            check(a.cpu(), sum(X[q] + q for q in range(N)))
            got.set()
        else:
            assert got.wait(20), "rank 0 never got its result"
            check(a.cpu(), sum(X[q] + q for q in range(N)))
    start = time.monotonic()
    errors = run_ranks(waits, "fused_waits")
    assert not errors, errors
    assert time.monotonic() - start < 20

    # A rank that is issuing its next collective while another reads the
    # result of the one before it.
    def next_one(r, pg, dev):
        a, b = X[r].to(dev) + 1, X[r].to(dev) * 2
        dist.all_reduce(a, group=pg)
        if r == 0:
            check(a.cpu(), sum(X[q] + 1 for q in range(N)))
        dist.all_reduce(b, group=pg)
        check(b.cpu(), sum(X[q] * 2 for q in range(N)))
        check(a.cpu(), sum(X[q] + 1 for q in range(N)))
    start = time.monotonic()
    errors = run_ranks(next_one, "fused_next")
    assert not errors, errors
    assert time.monotonic() - start < 20

    # Two groups in one program: all four ranks, then pairs (ranks 0-1 on
    # devices 0-1, 2-3 on devices 2-3). Then a program of the pair group alone
    # runs as one replicated execution over the pair's devices.
    def two_groups(r, pg, dev):
        pair = thread_group(r % 2, 2, name=f"fused_pair{r // 2}", timeout=datetime.timedelta(seconds=30))
        a = X[r].to(dev) + r
        dist.all_reduce(a, group=pg)
        b = a * (r + 1)
        dist.all_reduce(b, group=pair)
        check((a + b).cpu(), ref_all + ref_all * pair_factor[r // 2])
        c = X[r].to(dev).tanh()
        dist.all_reduce(c, group=pair)
        check(c.cpu(), X[2 * (r // 2)].tanh() + X[2 * (r // 2) + 1].tanh())
    ref_all = sum(X[q] + q for q in range(N))
    pair_factor = [1 + 2, 3 + 4]
    before = torchtpu.debug.metrics()["distributed"]
    errors = run_ranks(two_groups, "fused_two_groups")
    assert not errors, errors
    d = delta(before)
    # Each of the five group collectives ran once, as one replicated
    # execution: the two-group program runs apart on each rank (its three
    # collectives), and each pair's program after it runs whole. A rank
    # held off the CPU long enough (its pending program idle for 100 ms while
    # its pair waits) has its pending ops materialized early; that pair's
    # collective then runs as its own execution, which changes the counts
    # by one and no value.
    assert d["device_programs"] == 5 and d["staged_programs"] <= N and d["fused_programs"] >= 1, d

    # Fused Eager collectives and a compiled function holding one, on the same
    # ranks: the compiled program reads the pending result of the eager one.
    def tanh_sum(x, pg):
        y = x.tanh()
        dist.all_reduce(y, group=pg)
        return y * 2
    compiled_tanh_sum = torch.compile(tanh_sum, backend="tpu")
    def eager_then_compiled(r, pg, dev):
        for _ in range(2):
            a = X[r].to(dev) + 1
            dist.all_reduce(a, group=pg)
            check(compiled_tanh_sum(a, pg).cpu(), 2 * N * sum(X[q] + 1 for q in range(N)).tanh())
    errors = run_ranks(eager_then_compiled, "fused_and_compiled")
    assert not errors, errors

    # The rank threads end with their collectives pending; another thread
    # reads the results.
    def leaves(r, pg, dev):
        a = X[r].to(dev) * 3
        dist.all_reduce(a, group=pg)
        outs[r] = a
    outs = {}
    errors = run_ranks(leaves, "fused_leaves")
    assert not errors, errors
    for r in range(N):
        check(outs[r].cpu(), 3 * sum(X))

    # Programs that run in stages (rank 0 adds an op) carry every kind of
    # value through their collectives: int64 beyond 2**53, bfloat16 from a
    # non-contiguous tensor, a 0-d tensor with NaN and Inf, an empty tensor.
    def staged_values(r, pg, dev):
        big = torch.tensor([2 ** 53 + 1, -(2 ** 60) + r], dtype=torch.int64).to(dev)
        half = (torch.arange(6, dtype=torch.float32).reshape(2, 3) + r).to(torch.bfloat16).to(dev).t()
        special = torch.tensor(float("nan") if r == 0 else (float("inf") if r == 1 else 1.0)).to(dev)
        empty = torch.empty(0, 3, device=dev)
        if r == 0:
            big = big + 0  # rank 0's program differs
        for t in (big, half, special, empty):
            dist.all_reduce(t, group=pg)
        check(big.cpu(), torch.tensor([N * (2 ** 53 + 1), -N * 2 ** 60 + sum(range(N))]), rtol=0, atol=0)
        check(half.cpu(), sum((torch.arange(6, dtype=torch.float32).reshape(2, 3) + q).to(torch.bfloat16)
                              for q in range(N)).t())
        assert torch.isnan(special.cpu()) and empty.cpu().shape == (0, 3)
    before = torchtpu.debug.metrics()["distributed"]
    errors = run_ranks(staged_values, "fused_staged_values")
    assert not errors, errors
    assert delta(before)["staged_programs"] >= N

    # MPMD: rank 0 computes an extra value; each rank's program then runs
    # without the collective, and the collective alone: same results.
    def mpmd(r, pg, dev):
        x = X[r].to(dev)
        extra = x * 3 if r == 0 else None
        y = (x @ W.to(dev)).tanh()
        dist.all_reduce(y, group=pg)
        check((y + 1).cpu(), ref + 1)
        if r == 0:
            check(extra.cpu(), X[0] * 3)
    before = torchtpu.debug.metrics()["distributed"]
    errors = run_ranks(mpmd, "fused_mpmd")
    assert not errors, errors
    d = delta(before)
    assert d["fused_programs"] == 0 and d["staged_programs"] == N and d["device_programs"] == 1, d

    # A collective that fails (rank 0 never comes) loses none of the values
    # its program computed before it.
    def absent_keeps(r, pg, dev):
        x = X[r].to(dev) * 2
        if r != 0:
            y = x + 1
            try:
                dist.all_reduce(y, group=pg)
                raise AssertionError("the all_reduce did not raise")
            except RuntimeError as e:
                assert "rank(s) 0 did not reach collective #1" in str(e), e
        check(x.cpu(), X[r] * 2)
    errors = run_ranks(absent_keeps, "fused_absent", timeout=2)
    assert not errors, errors

    # Data-parallel training (gradients all-reduced, rank 0 alone reads the
    # loss) matches one process on the global batch.
    def train(r, pg, dev):
        w = W.to(dev).requires_grad_()
        for it in range(3):
            loss = (X[r].to(dev) @ w).tanh().sum()
            loss.backward()
            w.grad.div_(N)
            dist.all_reduce(w.grad, group=pg)
            with torch.no_grad():
                w -= 0.1 * w.grad
            w.grad = None
            if r == 0:
                float(loss)
        trained[r] = w.detach().cpu()
    trained = {}
    errors = run_ranks(train, "fused_train")
    assert not errors, errors
    w = W.clone().requires_grad_()
    for it in range(3):
        sum((X[q] @ w).tanh().sum() for q in range(N)).div(N).backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
        w.grad = None
    for r in range(N):
        check(trained[r], w.detach(), rtol=1e-5, atol=1e-5)

    # DDP: the gradient bucket's all_reduce joins the backward program.
    import copy, warnings
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    XS, YS = [torch.randn(8, 16) for _ in range(N)], [torch.randn(8, 4) for _ in range(N)]
    def ddp(r, pg, dev):
        m = copy.deepcopy(model).to(dev)
        wrapped = DDP(m, process_group=pg)
        opt = torch.optim.SGD(wrapped.parameters(), lr=0.1)
        for it in range(3):
            opt.zero_grad()
            nn.functional.mse_loss(wrapped(XS[r].to(dev)), YS[r].to(dev)).backward()
            opt.step()
        trained[r] = [p.detach().cpu() for p in m.parameters()]
    texts_before = len(collective_programs())
    errors = run_ranks(ddp, "fused_ddp")
    assert not errors, errors
    single = copy.deepcopy(model)
    opt = torch.optim.SGD(single.parameters(), lr=0.1)
    for it in range(3):
        opt.zero_grad()
        (sum(nn.functional.mse_loss(single(XS[q]), YS[q]) for q in range(N)) / N).backward()
        opt.step()
    for r in range(N):
        for got, want in zip(trained[r], single.parameters()):
            check(got, want.detach(), rtol=1e-5, atol=1e-5)
    new = collective_programs()[texts_before:]
    assert any("stablehlo.dot_general" in t and "stablehlo.all_reduce" in t for t in new), new
    # Each rank's programs end where its own code says (its backward's end
    # cuts no other rank's graph), so the same training again compiles nothing.
    compilations = torchtpu.debug.metrics()["compilations"]
    errors = run_ranks(ddp, "fused_ddp_again")
    assert not errors, errors
    assert torchtpu.debug.metrics()["compilations"] == compilations
    print("FUSED OK")
''')


@pytest.mark.parametrize("mode,max_ops", [("strict", None), ("fused", None), ("fused", "2")],
                         ids=["strict", "fused", "fused_cut_every_2_ops"])
def test_thread_ranks_run_stablehlo_collectives(mode, max_ops):
    """max_ops: Fused Eager's graph size limit, so small that graphs are cut
    around every collective."""
    env = dict(os.environ, TORCHTPU_CPU_DEVICES="4", OMP_NUM_THREADS="1")
    env.pop("LOCAL_WORLD_SIZE", None)
    if max_ops:
        env["TORCHTPU_FUSED_MAX_OPS"] = max_ops
    full = mode == "fused" and not max_ops
    script = SCRIPT + (FUSED if full else "") + 'print("THREADS OK")\n'
    proc = subprocess.run([sys.executable, "-c", script, mode], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "THREADS OK" in proc.stdout and (not full or "FUSED OK" in proc.stdout), proc.stdout[-3000:] + proc.stderr[-5000:]
