"""Every c10d collective on tpu tensors against a CPU reference. Run by
tests/test_distributed.py under torchrun (2 and 4 ranks, and two node groups);
each rank knows every rank's input, so it computes the expected result itself."""
import os

import torch
import torch.distributed as dist

import torchtpu

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dev = torch.device("tpu", int(os.environ["LOCAL_RANK"]))
dist.init_process_group(device_id=dev)
assert dist.get_backend() == "tpu_dist", dist.get_backend()
check = torch.testing.assert_close


def inp(r, shape, dtype, contiguous=True):
    """Rank r's input: distinct per rank, exact in every dtype used here."""
    n = max(1, int(torch.Size(shape).numel()))
    t = (torch.arange(n, dtype=torch.float64) % 7 + 3 * r - 2).to(dtype)[: torch.Size(shape).numel()]
    t = t.reshape(shape)
    if not contiguous and t.dim() == 2:
        t = t.t().contiguous().t()  # same values, transposed strides
    return t


def on_dev(t):
    return t.to(dev) if t.is_contiguous() else t.t().contiguous().to(dev).t()


REDUCE = {
    dist.ReduceOp.SUM: lambda s: s.sum(0),
    dist.ReduceOp.PRODUCT: lambda s: s.prod(0),
    dist.ReduceOp.MIN: lambda s: s.min(0).values,
    dist.ReduceOp.MAX: lambda s: s.max(0).values,
    dist.ReduceOp.AVG: lambda s: s.sum(0) / world,
}
cases = 0
for dtype in (torch.float32, torch.bfloat16, torch.int64):
    for shape, contiguous in (((4, 3), True), ((4, 3), False), ((), True), ((0, 3), True)):
        stack = torch.stack([inp(r, shape, dtype) for r in range(world)]).double()
        for op, ref in REDUCE.items():
            if op == dist.ReduceOp.AVG and not dtype.is_floating_point:
                continue
            x = on_dev(inp(rank, shape, dtype, contiguous))
            dist.all_reduce(x, op=op)
            check(x.cpu(), ref(stack).to(dtype), msg=lambda m: f"all_reduce {op} {dtype} {shape}: {m}")
            cases += 1
        x = on_dev(inp(rank, shape, dtype, contiguous))
        dist.broadcast(x, src=world - 1)
        check(x.cpu(), inp(world - 1, shape, dtype))
        outs = [torch.full(shape, -1, dtype=dtype, device=dev) for _ in range(world)]
        dist.all_gather(outs, on_dev(inp(rank, shape, dtype, contiguous)))
        for r in range(world):
            check(outs[r].cpu(), inp(r, shape, dtype))
        cases += 2

# Tensor forms, reduce_scatter (list and tensor), all_to_all, gather, scatter, reduce.
for dtype in (torch.float32, torch.bfloat16, torch.int32):
    mine = on_dev(inp(rank, (2, 3), dtype))
    out = torch.empty(2 * world, 3, dtype=dtype, device=dev)
    dist.all_gather_into_tensor(out, mine)
    check(out.cpu(), torch.cat([inp(r, (2, 3), dtype) for r in range(world)]))
    full = [inp(r, (2 * world, 3), dtype) for r in range(world)]
    got = torch.empty(2, 3, dtype=dtype, device=dev)
    dist.reduce_scatter_tensor(got, full[rank].to(dev))
    check(got.cpu(), torch.stack(full).sum(0).to(dtype)[2 * rank: 2 * rank + 2])
    got = torch.empty(2, 3, dtype=dtype, device=dev)
    dist.reduce_scatter(got, [c.to(dev) for c in full[rank].chunk(world)], op=dist.ReduceOp.MAX)
    check(got.cpu(), torch.stack(full).max(0).values[2 * rank: 2 * rank + 2])
    a2a = torch.empty(2 * world, 3, dtype=dtype, device=dev)
    dist.all_to_all_single(a2a, full[rank].to(dev))
    check(a2a.cpu(), torch.cat([full[r][2 * rank: 2 * rank + 2] for r in range(world)]))
    outs = [torch.empty(r + 1, dtype=dtype, device=dev) for r in range(world)]
    dist.all_to_all(outs, [torch.full((rank + 1,), 10 * rank + j, dtype=dtype, device=dev) for j in range(world)])
    for r in range(world):
        check(outs[r].cpu(), torch.full((r + 1,), 10 * r + rank, dtype=dtype))
    cases += 5
# Uneven all_to_all_single: rank r sends (j + 1) rows to rank j.
send = torch.arange(sum(j + 1 for j in range(world)), dtype=torch.float32) + 100 * rank
recv = torch.empty(world * (rank + 1), device=dev)
dist.all_to_all_single(recv, send.to(dev), output_split_sizes=[rank + 1] * world,
                       input_split_sizes=[j + 1 for j in range(world)])
start = sum(j + 1 for j in range(rank))
check(recv.cpu(), torch.cat([torch.arange(start, start + rank + 1, dtype=torch.float32) + 100 * r
                             for r in range(world)]))
# Pre-multiplied sum (FSDP2 uses it), gather, scatter, reduce.
x = on_dev(inp(rank, (5,), torch.float32))
dist.all_reduce(x, op=dist._make_nccl_premul_sum(0.5))
check(x.cpu(), 0.5 * torch.stack([inp(r, (5,), torch.float32) for r in range(world)]).sum(0))
g = [torch.empty(3, device=dev) for _ in range(world)] if rank == 0 else None
dist.gather(on_dev(inp(rank, (3,), torch.float32)), g, dst=0)
if rank == 0:
    for r in range(world):
        check(g[r].cpu(), inp(r, (3,), torch.float32))
s = torch.empty(3, device=dev)
dist.scatter(s, [on_dev(inp(r, (3,), torch.float32)) for r in range(world)] if rank == 1 else None, src=1)
check(s.cpu(), inp(rank, (3,), torch.float32))
x = on_dev(inp(rank, (3,), torch.float32))
dist.reduce(x, dst=0, op=dist.ReduceOp.SUM)
if rank == 0:
    check(x.cpu(), torch.stack([inp(r, (3,), torch.float32) for r in range(world)]).sum(0))
cases += 5
# Async work and its future; send/recv in a ring; barrier; CPU tensors of the group.
x = on_dev(inp(rank, (4,), torch.float32))
work = dist.all_reduce(x, async_op=True)
work.wait()
fut = work.get_future().wait()
check(fut[0].cpu(), torch.stack([inp(r, (4,), torch.float32) for r in range(world)]).sum(0))
nxt, prv = (rank + 1) % world, (rank - 1) % world
buf = torch.empty(3, device=dev)
ops = [dist.P2POp(dist.isend, on_dev(inp(rank, (3,), torch.float32)), nxt),
       dist.P2POp(dist.irecv, buf, prv)]
for w in dist.batch_isend_irecv(ops):
    w.wait()
check(buf.cpu(), inp(prv, (3,), torch.float32))
dist.barrier()
c = inp(rank, (3,), torch.float32)
dist.all_reduce(c)
check(c, torch.stack([inp(r, (3,), torch.float32) for r in range(world)]).sum(0))
cases += 4
# Values at the edges of their dtypes: NaN and infinities, int64 beyond 2**53
# (exact only if nothing passes through a double), float16, bool.
special = torch.tensor([float("nan") if rank == 0 else 1.0, float("inf"), -float("inf") if rank == 1 else 2.0, 3.5])
x = special.to(dev)
dist.all_reduce(x)
want = torch.stack([torch.tensor([float("nan") if r == 0 else 1.0, float("inf"), -float("inf") if r == 1 else 2.0,
                                  3.5]) for r in range(world)]).sum(0)
check(x.cpu(), want, equal_nan=True)
x = torch.tensor([float("inf"), -1.0 * rank, 1e38]).to(dev)
dist.all_reduce(x, op=dist.ReduceOp.MAX)
check(x.cpu(), torch.tensor([float("inf"), 0.0, 1e38]))
big = torch.tensor([2**60 + rank, -(2**60) + 3 * rank, 2**53 + 1], dtype=torch.int64)
x = big.to(dev)
dist.all_reduce(x)
assert x.cpu().tolist() == [world * 2**60 + sum(range(world)), world * -(2**60) + 3 * sum(range(world)),
                            world * (2**53 + 1)], x.cpu().tolist()
x = big.to(dev)
dist.broadcast(x, src=world - 1)
assert x.cpu().tolist() == [2**60 + world - 1, -(2**60) + 3 * (world - 1), 2**53 + 1]
outs = [torch.empty(3, dtype=torch.int64, device=dev) for _ in range(world)]
dist.all_gather(outs, big.to(dev))
assert [o.cpu().tolist() for o in outs] == [[2**60 + r, -(2**60) + 3 * r, 2**53 + 1] for r in range(world)]
h = (torch.arange(6, dtype=torch.float16) / 4 + rank).to(dev)
dist.all_reduce(h)
check(h.cpu(), sum(torch.arange(6, dtype=torch.float16) / 4 + r for r in range(world)))
flags = torch.tensor([rank % 2 == 0, True, False]).to(dev)
outs = [torch.empty(3, dtype=torch.bool, device=dev) for _ in range(world)]
dist.all_gather(outs, flags)
assert [o.cpu().tolist() for o in outs] == [[r % 2 == 0, True, False] for r in range(world)]
b = torch.tensor([rank == world - 1, False]).to(dev)
dist.broadcast(b, src=world - 1)
assert b.cpu().tolist() == [True, False]
cases += 8
m = torchtpu.debug.metrics()["distributed"]
assert m["host_staged"] > 0 and m["host_staged_bytes"] > 0, m
print(f"OK rank {rank} cases {cases} metrics {m}", flush=True)
dist.destroy_process_group()
