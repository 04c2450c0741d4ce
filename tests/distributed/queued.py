"""Run by test_distributed.py under torchrun (2 ranks, Strict or Fused Eager): host-staged
collectives of device tensors return before they run, and nothing but the
user's own reads waits for them.

1. all_reduce, all_gather_into_tensor and reduce_scatter_tensor into whole
   tensors, into views of larger ones and from non-contiguous inputs, read
   back by later device ops: the CPU's values, and no sync point between
   them.
2. FSDP2 training (a pre-multiplied reduce-scatter from a gradient divide
   factor): the losses of one CPU process on the same batch, and after
   warm-up a step's only sync point is the user's `loss.item()`.
Prints "OK rank R" at the end."""
import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

import torchtpu

dist.init_process_group("tpu_dist")
rank, world = dist.get_rank(), dist.get_world_size()
dev = torch.device("tpu", int(os.environ["LOCAL_RANK"]))
torch.tpu.set_device(dev)  # FSDP2 shards onto the current device
assert torchtpu.get_eager_mode() in ("strict", "fused")


def syncs():
    return {(s["op"], s["count"]) for s in torchtpu.debug.sync_points()}


# 1. The collectives and the ops after them, with no host read in between.
g = torch.Generator().manual_seed(0)
X = [torch.randn(6, 8, generator=g) for _ in range(world)]
torchtpu.debug.reset_metrics()
a = X[rank].to(dev) * 2
dist.all_reduce(a)
a_next = a + 1
wide = torch.zeros(6, 16, device=dev)
part = wide[:, ::2]  # a strided view: written through a copy
part.copy_(X[rank].to(dev))
dist.all_reduce(part, op=dist.ReduceOp.MAX)
gathered = torch.zeros(world * 6 + 2, 8, device=dev)
dist.all_gather_into_tensor(gathered[1:-1], X[rank].to(dev).t().contiguous().t())  # into a view of a larger tensor
scattered = torch.empty(6 // world, 8, device=dev)
dist.reduce_scatter_tensor(scattered, X[rank].to(dev) + rank, op=dist.ReduceOp.AVG)
checked = torch.stack([a_next.sum(), wide.sum(), gathered.sum(), scattered.sum()])
assert syncs() == set(), syncs()
got = checked.cpu()
want_a = sum(x * 2 for x in X) + 1
want_wide = torch.zeros(6, 16)
want_wide[:, ::2] = torch.stack(X).amax(0)
want_gathered = torch.cat([torch.zeros(1, 8)] + X + [torch.zeros(1, 8)])
want_scattered = (sum(X[r] + r for r in range(world)) / world).chunk(world)[rank]
torch.testing.assert_close(wide.cpu(), want_wide)
torch.testing.assert_close(gathered.cpu(), want_gathered)
torch.testing.assert_close(scattered.cpu(), want_scattered)
torch.testing.assert_close(a_next.cpu(), want_a)
torch.testing.assert_close(got, torch.stack([want_a.sum(), want_wide.sum(), want_gathered.sum(),
                                             want_scattered.sum()]))
assert torchtpu.debug.metrics()["distributed"]["host_staged"] >= 4

# 2. FSDP2 with a gradient divide factor (a pre-multiplied sum), against
# one CPU process on the same batch with the gradients scaled alike.
torch.manual_seed(0)
ref = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(3)])
model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(3)]).to(dev)
model.load_state_dict(ref.state_dict())
for layer in model:
    fully_shard(layer)
fully_shard(model)
for m in (*model, model):  # the sum of the ranks' gradients / (2 * world): half their average
    m.set_gradient_divide_factor(2.0 * world)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
x = torch.randn(4, 16, generator=g)
xd = x.to(dev)
for step in range(5):
    if step == 2:
        torchtpu.debug.reset_metrics()
    loss = model(xd).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    ref_loss = ref(x).square().mean()
    ref_loss.backward()
    for p in ref.parameters():
        p.grad /= 2
    ref_opt.step()
    ref_opt.zero_grad()
    torch.testing.assert_close(torch.tensor(loss.item()), ref_loss.detach(), rtol=1e-5, atol=1e-6)
assert syncs() == {("aten::_local_scalar_dense", 3)}, torchtpu.debug.sync_points()  # the loss.item() of steps 2-4
print(f"OK rank {rank}", flush=True)
dist.destroy_process_group()
