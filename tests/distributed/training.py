"""DDP, FSDP2 (with and without a mixed precision policy), DTensor, tensor
parallel and distributed checkpoint on tpu, each against a single-process
CPU run on the global batch. Run by tests/test_distributed.py under torchrun."""
import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel as DDP

import torchtpu

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
local = int(os.environ["LOCAL_RANK"])
dev = torch.device("tpu", local)
torch.tpu.set_device(local)
dist.init_process_group(device_id=dev)
mesh = init_device_mesh("tpu", (world,))
STEPS, PER_RANK = 3, 4


class Block(nn.Module):
    """A transformer block's MLP with a layer norm: what TP shards."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.up = nn.Linear(8, 16)
        self.down = nn.Linear(16, 8)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def model():
    torch.manual_seed(0)
    return nn.Sequential(Block(), Block(), nn.Linear(8, 4))


def batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(PER_RANK * world, 8, generator=g), torch.randn(PER_RANK * world, 4, generator=g))
            for _ in range(STEPS)]


def reference(opt_cls, **kw):
    ref = model()
    opt = opt_cls(ref.parameters(), **kw)
    losses = []
    for X, Y in batches():
        loss = ((ref(X) - Y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return ref, losses


def run(m, opt, mine=True):
    """Trains on this rank's slice (or the whole batch) and returns the
    global loss of each step."""
    losses = []
    for X, Y in batches():
        if mine:
            X, Y = X[rank * PER_RANK:(rank + 1) * PER_RANK], Y[rank * PER_RANK:(rank + 1) * PER_RANK]
        loss = ((m(X.to(dev)) - Y.to(dev)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if mine:
            loss = loss.detach().clone()
            dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        losses.append(loss.item())
    return losses


def same(losses, ref_losses, params, ref, rtol=1e-5, what=""):
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), rtol=rtol, atol=1e-6,
                               msg=lambda m: f"{what} losses: {m}")
    for (name, p), q in zip(params, ref.parameters()):
        p = p.full_tensor() if hasattr(p, "full_tensor") else p
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=rtol * 10, atol=1e-5,
                                   msg=lambda m: f"{what} {name}: {m}")


# DDP with small buckets, so gradients go in several all_reduces.
ref, ref_losses = reference(torch.optim.SGD, lr=0.1)
ddp = DDP(model().to(dev), bucket_cap_mb=0.0005)
same(run(ddp, torch.optim.SGD(ddp.parameters(), lr=0.1)), ref_losses, ddp.module.named_parameters(), ref,
     what="DDP")
print(f"rank {rank} DDP ok", flush=True)

# FSDP2, each block sharded, parameters resharded after forward.
ref, ref_losses = reference(torch.optim.Adam, lr=0.01)
fs = model().to(dev)
for block in list(fs)[:2]:
    fully_shard(block, mesh=mesh, reshard_after_forward=True)
fully_shard(fs, mesh=mesh)
same(run(fs, torch.optim.Adam(fs.parameters(), lr=0.01)), ref_losses, fs.named_parameters(), ref, what="FSDP2")
print(f"rank {rank} FSDP2 ok", flush=True)

# FSDP2 with a bfloat16 mixed precision policy: tracks the fp32 curve.
mp = model().to(dev)
policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for block in list(mp)[:2]:
    fully_shard(block, mesh=mesh, mp_policy=policy)
fully_shard(mp, mesh=mesh, mp_policy=policy)
mp_losses = run(mp, torch.optim.Adam(mp.parameters(), lr=0.01))
torch.testing.assert_close(torch.tensor(mp_losses), torch.tensor(ref_losses), rtol=3e-2, atol=1e-2)
assert mp_losses != ref_losses  # the policy did compute in bfloat16
print(f"rank {rank} FSDP2 bf16 ok", flush=True)

# DTensor: sharded matmul, redistribute, full_tensor.
A, B = torch.randn(4 * world, 6), torch.randn(6, 5)
dA = distribute_tensor(A.to(dev), mesh, [Shard(0)])
dB = distribute_tensor(B.to(dev), mesh, [Replicate()])
torch.testing.assert_close((dA @ dB).full_tensor().cpu(), A @ B, rtol=1e-5, atol=1e-5)
torch.testing.assert_close(dA.redistribute(mesh, [Replicate()]).to_local().cpu(), A)
torch.testing.assert_close(dA.redistribute(mesh, [Shard(1)]).full_tensor().cpu(), A)
dC = distribute_tensor(torch.randn(5, 4 * world).to(dev), mesh, [Shard(1)])
torch.testing.assert_close((dB.redistribute(mesh, [Replicate()]).to_local() @ dC.full_tensor()).cpu(),
                           B @ dC.full_tensor().cpu(), rtol=1e-5, atol=1e-5)
print(f"rank {rank} DTensor ok", flush=True)

# DTensor random ops: the tracker reads and sets the generator of the rank's
# own (current) device, so a sharded tensor's shards are each rank's own
# draws (the rank's generator at DTensor's offset for its shard), not copies
# of rank 0's, and a replicated one is the same on every rank.
import torch.distributed.tensor as dtensor  # noqa: E402
torch.manual_seed(11)
before = torch.tpu.get_rng_state()
rows = 8
sharded = dtensor.randn(rows * world, 16, device_mesh=mesh, placements=[Shard(0)])
shards = [torch.empty(rows, 16, device=dev) for _ in range(world)]
dist.all_gather(shards, sharded.to_local())
shards = [t.cpu() for t in shards]
for i in range(world):
    for j in range(i):
        assert not torch.equal(shards[i], shards[j]), f"ranks {i} and {j} drew the same shard"
mine = before.clone()
offset = int(before[8:].view(torch.int64)) + (rank * rows * 16 + 3) // 4 * 4
mine[8:] = torch.tensor([offset], dtype=torch.int64).view(torch.uint8)
with torch.random.fork_rng(devices=[dev], device_type="tpu"):
    torch.tpu.set_rng_state(mine)
    torch.testing.assert_close(shards[rank], torch.randn(rows, 16, device=dev).cpu(), rtol=0, atol=0)
replicated = dtensor.randn(6, 5, device_mesh=mesh, placements=[Replicate()]).to_local()
copies = [torch.empty(6, 5, device=dev) for _ in range(world)]
dist.all_gather(copies, replicated)
for c in copies:
    torch.testing.assert_close(c.cpu(), replicated.cpu(), rtol=0, atol=0)
weight = dtensor.empty(rows * world, 16, device_mesh=mesh, placements=[Shard(0)])
torch.nn.init.trunc_normal_(weight, std=0.02)  # the init TorchTitan gives its weights
local_w = weight.to_local().cpu()
assert local_w.abs().max() <= 2.0 and 0.005 < local_w.std() < 0.05
print(f"rank {rank} DTensor random ok", flush=True)

# Tensor parallel: every block's up projection column-wise, down row-wise;
# every rank sees the whole batch. The norms and the head stay plain tensors
# (one optimizer over both kinds: foreach=False).
ref, ref_losses = reference(torch.optim.SGD, lr=0.1)
tp = model().to(dev)
for i in range(2):
    parallelize_module(tp[i], mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
same(run(tp, torch.optim.SGD(tp.parameters(), lr=0.1, foreach=False), mine=False), ref_losses, tp.named_parameters(), ref,
     what="TP")
print(f"rank {rank} TP ok", flush=True)

# Distributed checkpoint of the sharded FSDP2 model, loaded into a fresh one.
ckpt = os.environ["CKPT"]
dcp.save({"model": fs.state_dict()}, checkpoint_id=ckpt)
fresh = nn.Sequential(Block(), Block(), nn.Linear(8, 4)).to(dev)
for block in list(fresh)[:2]:
    fully_shard(block, mesh=mesh)
fully_shard(fresh, mesh=mesh)
state = {"model": fresh.state_dict()}
dcp.load(state, checkpoint_id=ckpt)
fresh.load_state_dict(state["model"])
for (name, p), q in zip(fs.state_dict().items(), fresh.state_dict().values()):
    torch.testing.assert_close(q.full_tensor().cpu(), p.full_tensor().cpu(), msg=lambda m: f"DCP {name}: {m}")
print(f"rank {rank} DCP ok", flush=True)
print(f"OK rank {rank} {torchtpu.debug.metrics()['distributed']}", flush=True)
dist.destroy_process_group()
