"""`torchtpu.data.DeviceLoader`: batches arrive on the device before the
step asks for them.

    loader = torchtpu.data.DeviceLoader(torch.utils.data.DataLoader(ds, batch_size=64), device)
    for x, y in loader:          # already tpu tensors
        loss = model(x, y) ...

A background thread takes the next batches from the wrapped loader (any
iterable) and copies their tensors to the device (nested lists, tuples,
dicts, namedtuples and objects with a `.to(device)` method such as Hugging
Face's BatchEncoding), keeping up to `prefetch` batches ready, so that
loading, collating and the host-to-device copy run while the previous step
computes (the copy releases the GIL; the device's programs run on their own
thread). Errors of the wrapped loader are raised by the iteration, with
their own type, at the batch where they happened.

Under torchrun (or any initialized process group) with more than one rank,
a loader whose sampler is not a DistributedSampler is sharded: rank r of n
takes batches r, r + n, r + 2n, ... (`shard=False` turns this off; a
DistributedSampler already shards).
"""
import collections.abc
import queue
import threading

import torch

from . import env

_END = object()


class _Failure:
    def __init__(self, error):
        self.error = error


def to_device(batch, device, non_blocking=True):
    """`batch` with every tensor in it moved to `device` (structure kept)."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, (str, bytes)):
        return batch
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(to_device(v, device, non_blocking) for v in batch))
    if isinstance(batch, collections.abc.Mapping) and not hasattr(batch, "to"):
        try:
            return type(batch)({k: to_device(v, device, non_blocking) for k, v in batch.items()})
        except TypeError:
            return {k: to_device(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device, non_blocking) for v in batch)
    if callable(getattr(batch, "to", None)):
        return batch.to(device)
    return batch


def _rank_and_world():
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return env.get("RANK"), env.get("WORLD_SIZE")


class DeviceLoader:
    """Wraps `loader` (any iterable of batches); iterating yields its batches
    with their tensors on `device` (the current tpu device by default),
    prefetched by a background thread, at most `prefetch` ahead. `shard`
    (True, False or None: automatic, see the module docstring) takes every
    n-th batch of n ranks; `rank` and `world_size` default to the process
    group's, else torchrun's RANK and WORLD_SIZE."""

    def __init__(self, loader, device=None, prefetch: int = 2, shard=None, rank=None, world_size=None):
        if prefetch < 1:
            raise ValueError(f"DeviceLoader: prefetch must be at least 1, got {prefetch}")
        self.loader = loader
        self.device = torch.device("tpu", torch.tpu.current_device()) if device is None else torch.device(device)
        self.prefetch = prefetch
        r, w = _rank_and_world()
        self.rank = r if rank is None else rank
        self.world_size = w if world_size is None else world_size
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"DeviceLoader: rank {self.rank} is not in [0, {self.world_size})")
        if shard is None:
            sampler = getattr(loader, "sampler", None)
            shard = self.world_size > 1 and not isinstance(sampler, torch.utils.data.DistributedSampler)
        self.shard = bool(shard)

    def __len__(self):
        n = len(self.loader)
        if not self.shard:
            return n
        return max(0, (n - self.rank + self.world_size - 1) // self.world_size)

    def __iter__(self):
        return _Prefetcher(self)


def _put(q, stop, item) -> bool:
    while not stop.is_set():
        try:
            q.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _fill(owner, q, stop):
    """The background thread of one pass. It holds no reference to the
    iterator, so dropping the iterator stops it (see _Prefetcher.__del__)."""
    try:
        for i, batch in enumerate(owner.loader):
            if stop.is_set():
                return
            if owner.shard and i % owner.world_size != owner.rank:
                continue
            if not _put(q, stop, to_device(batch, owner.device)):
                return
    except BaseException as e:  # handed to the iterating thread
        _put(q, stop, _Failure(e))
        return
    _put(q, stop, _END)


class _Prefetcher:
    """One pass over a DeviceLoader: the thread that fills the queue, and the
    iterator that drains it. Dropping the iterator (a `break`) or close()
    stops the thread before its next batch."""

    def __init__(self, owner: DeviceLoader):
        self._queue = queue.Queue(maxsize=owner.prefetch)
        self._stop = threading.Event()
        self._done = False
        self.thread = threading.Thread(target=_fill, args=(owner, self._queue, self._stop),
                                       name="torchtpu-device-loader", daemon=True)
        self.thread.start()

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        item = self._queue.get()
        if item is _END:
            self._done = True
            raise StopIteration
        if isinstance(item, _Failure):
            self._done = True
            raise item.error
        return item

    def close(self):
        self._stop.set()
        self._done = True

    def __del__(self):
        self._stop.set()


__all__ = ["DeviceLoader", "to_device"]
