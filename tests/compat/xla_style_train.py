"""An MNIST-style training script written the PyTorch/XLA way (torch_xla
imports, MpDeviceLoader, xm.optimizer_step, torch_xla.launch), unchanged;
tests/test_compat_torch_xla.py runs it through `python -m torchtpu.compat`
on 1 and 2 processes. With --ddp it trains the other way PyTorch/XLA
documents: a process group with backend "xla" (init_method "xla://") and
DistributedDataParallel. Synthetic 28x28 digits stand in for MNIST (nothing
downloads). Each process writes its losses to OUT.rank<N>.json."""
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.xla_backend  # noqa: F401 (registers backend "xla")
import torch_xla.runtime as xr

STEPS, BATCH = 6, 8


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 5)
        self.fc1 = nn.Linear(4 * 12 * 12, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        return F.log_softmax(self.fc2(F.relu(self.fc1(torch.flatten(x, 1)))), dim=1)


def dataset():
    g = torch.Generator().manual_seed(1)
    images = torch.randn(STEPS * BATCH * 2, 1, 28, 28, generator=g)
    labels = torch.randint(0, 10, (STEPS * BATCH * 2,), generator=g)
    return torch.utils.data.TensorDataset(images, labels)


def train(index, out, ddp):
    device = torch_xla.device()
    torch.manual_seed(0)
    model = Net().to(device)
    if ddp:
        torch.distributed.init_process_group("xla", init_method="xla://")
        model = torch.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = dataset()
    sampler = torch.utils.data.distributed.DistributedSampler(
        data, num_replicas=xr.world_size(), rank=xr.global_ordinal(), shuffle=False)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, sampler=sampler)
    losses = []
    for step, (x, y) in enumerate(pl.MpDeviceLoader(loader, device)):
        if step == STEPS:
            break
        optimizer.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        if ddp:
            optimizer.step()  # DDP averaged the gradients
        else:
            xm.optimizer_step(optimizer)
        xm.mark_step()
        losses.append(loss.item())
    xm.master_print(f"trained {len(losses)} steps on {xr.world_size()} process(es)")
    xm.save((model.module if ddp else model).state_dict(), f"{out}.model.pt")
    with open(f"{out}.rank{xm.get_ordinal()}.json", "w") as f:
        json.dump(losses, f)


if __name__ == "__main__":
    torch_xla.launch(train, args=(sys.argv[1], "--ddp" in sys.argv))
