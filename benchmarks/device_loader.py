"""DeviceLoader: step time of a training loop whose input is slow to arrive
(each batch of float32 images is generated and collated by a DataLoader,
then copied to the device), with the input in the step (plain
`batch.to(device)`) and with torchtpu.data.DeviceLoader preparing it on a
background thread, in the same run. Prints one JSON line per variant, the
input alone (load + transfer) and the step alone, and the ratio.

    python benchmarks/device_loader.py [--steps 30] [--batch 32] [--size 128] [--mode strict]
"""
import argparse
import json
import statistics
import time

import torch

import torchtpu
from torchtpu.data import DeviceLoader


class Images(torch.utils.data.Dataset):
    def __init__(self, n, shape):
        self.n, self.shape = n, shape

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.rand(self.shape, generator=g), i % 10


def make_step(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 5, stride=4), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4),
                                torch.nn.Flatten(), torch.nn.Linear(256, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(x, y):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def timed(batches, step, skip=3):
    times = []
    it = iter(batches)
    t0 = time.perf_counter()
    for x, y in it:
        step(x, y)
        t1 = time.perf_counter()
        times.append(t1 - t0)
        t0 = t1
    return statistics.median(times[skip:]) * 1000


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--mode", default="strict", choices=["debug", "strict", "fused"])
    a = p.parse_args()
    torchtpu.set_eager_mode(a.mode)
    device = torchtpu.get_device()
    shape = (3, a.size, a.size)
    def loader():
        return torch.utils.data.DataLoader(Images(a.steps * a.batch, shape), batch_size=a.batch)

    step = make_step(device)
    host = [b for b, _ in zip(loader(), range(10))]
    for x, y in host[:3]:
        step(x.to(device), y.to(device))  # compile

    t = []
    it = iter(loader())
    for _ in range(10):
        s = time.perf_counter()
        x, _ = next(it)
        x.to(device)
        torchtpu.synchronize()
        t.append(time.perf_counter() - s)
    transfer = statistics.median(t[2:]) * 1000
    compute = timed([(x.to(device), y.to(device)) for x, y in host], step)

    plain = timed(((x.to(device), y.to(device)) for x, y in loader()), step)
    prefetched = timed(DeviceLoader(loader(), device, prefetch=2), step)
    mb = host[0][0].numel() * 4 / 2**20
    for name, ms in (("input_only", transfer), ("step_only", compute), ("plain", plain),
                     ("device_loader", prefetched)):
        print(json.dumps({"variant": name, "batch_mib": round(mb, 1), "mode": a.mode, "ms": round(ms, 2)}))
    print(json.dumps({"plain_over_device_loader": round(plain / prefetched, 3),
                      "ideal_overlap": round((transfer + compute) / max(transfer, compute), 3)}))


if __name__ == "__main__":
    main()
