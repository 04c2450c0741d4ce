"""torchtpu.data.DeviceLoader against the wrapped loader on the CPU: the same
batches in order, on the device, any nesting; prefetching in the background
(bounded); sharding by rank; the loader's errors at their batch; a broken-off
pass stops its thread."""
import collections
import gc
import threading
import time

import pytest
import torch

from torchtpu.data import DeviceLoader

pytestmark = pytest.mark.usefixtures("each_mode")

Pair = collections.namedtuple("Pair", "x y")


class Encoding(dict):
    """Like Hugging Face's BatchEncoding: a mapping with its own .to()."""

    def to(self, device):
        return Encoding({k: v.to(device) for k, v in self.items()})


def batches(n=6):
    g = torch.Generator().manual_seed(0)
    out = []
    for i in range(n):
        x = torch.randn(4, 3, generator=g)
        out.append({"pair": Pair(x, torch.arange(4) + i), "list": [x.t(), torch.tensor(i)], "name": f"b{i}",
                    "enc": Encoding(ids=torch.full((2,), i))})
    return out


def same(got, want):
    if isinstance(want, torch.Tensor):
        assert got.device.type == "tpu" and got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
    elif isinstance(want, dict):
        assert type(got) is type(want) and got.keys() == want.keys()
        for k in want:
            same(got[k], want[k])
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want)
        for a, b in zip(got, want):
            same(a, b)
    else:
        assert got == want


def test_same_batches_in_order():
    want = batches()
    loader = DeviceLoader(want, "tpu", shard=False)
    assert len(loader) == 6
    got = list(loader)
    assert len(got) == 6
    for g, w in zip(got, want):
        same(g, w)
    same(list(loader), want)  # a second pass


def test_iterable_dataset_without_length():
    class Numbers(torch.utils.data.IterableDataset):
        def __iter__(self):
            return (torch.full((2,), float(i)) for i in range(5))

    loader = torch.utils.data.DataLoader(Numbers(), batch_size=2)
    got = list(DeviceLoader(loader, "tpu", shard=False))
    same(got, list(loader))
    assert [len(b) for b in got] == [2, 2, 1]
    with pytest.raises(TypeError, match="len"):
        len(DeviceLoader(loader, "tpu", shard=False))


def test_dataloader_and_training_step():
    ds = torch.utils.data.TensorDataset(torch.randn(20, 5), torch.randint(0, 3, (20,)))
    dl = torch.utils.data.DataLoader(ds, batch_size=6)
    model = torch.nn.Linear(5, 3).to("tpu")
    seen = 0
    for (x, y), (xc, yc) in zip(DeviceLoader(dl), dl):
        same([x, y], [xc, yc])
        torch.nn.functional.cross_entropy(model(x), y).backward()
        seen += len(x)
    assert seen == 20


def test_prefetches_in_background_and_bounded():
    made = []

    def source():
        for i in range(10):
            made.append(i)
            yield torch.tensor([i])

    it = iter(DeviceLoader(source(), prefetch=3, shard=False))
    first = next(it)
    deadline = time.time() + 10
    while len(made) < 5 and time.time() < deadline:  # 1 taken + 3 queued + 1 waiting to be queued
        time.sleep(0.01)
    time.sleep(0.1)
    assert len(made) == 5, made
    assert first.item() == 0
    assert [b.item() for b in it] == list(range(1, 10))


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_shards_by_rank(rank):
    want = [torch.tensor([i]) for i in range(8)]
    loader = DeviceLoader(want, rank=rank, world_size=3)
    assert loader.shard
    got = [b.item() for b in loader]
    assert got == list(range(rank, 8, 3)) and len(loader) == len(got)


def test_shard_from_torchrun_environment(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert [b.item() for b in DeviceLoader([torch.tensor([i]) for i in range(5)])] == [1, 3]
    ds = torch.utils.data.TensorDataset(torch.arange(8.0))
    sampler = torch.utils.data.DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False)
    dl = torch.utils.data.DataLoader(ds, batch_size=2, sampler=sampler)
    loader = DeviceLoader(dl)
    assert not loader.shard  # the sampler shards already
    assert [b[0].cpu().tolist() for b in loader] == [[1.0, 3.0], [5.0, 7.0]]


def test_loader_error_at_its_batch():
    def source():
        yield torch.ones(2)
        yield torch.ones(2)
        raise KeyError("bad sample 7")

    it = iter(DeviceLoader(source(), shard=False))
    assert next(it).sum().item() == 2
    assert next(it).sum().item() == 2
    with pytest.raises(KeyError, match="bad sample 7"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(ValueError, match="prefetch"):
        DeviceLoader([], prefetch=0)


def test_break_stops_the_thread():
    def endless():
        while True:
            yield torch.zeros(1)

    it = iter(DeviceLoader(endless(), shard=False))
    next(it)
    thread = it.thread
    assert thread.is_alive()
    del it
    gc.collect()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert "torchtpu-device-loader" not in [t.name for t in threading.enumerate()]
