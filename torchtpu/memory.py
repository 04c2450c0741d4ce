"""`torch.tpu.memory_*`: what the tpu device's live tensors hold, with
torch.cuda's names and meanings.

Every device storage is counted when it is created and when it is freed
(csrc/eager/memory.h): bytes and allocations now, at their peak and in total.
There is no caching allocator in between, so "reserved" is what is allocated,
except where the plugin's allocator reports a pool of its own (GPU and TPU
plugins): then reserved is that pool. `set_per_process_memory_fraction` caps
one device's tensors; an allocation past the cap raises
torch.OutOfMemoryError at the user's line.
"""
import collections

import torch

from . import _C


def _index(device) -> int:
    if device is None:
        return _C._get_device()
    if isinstance(device, int):
        index = device
    else:
        device = torch.device(device)
        if device.type != "tpu":
            raise ValueError(f"expected a tpu device, got {device}")
        index = _C._get_device() if device.index is None else device.index
    if not 0 <= index < _C._device_count():
        raise ValueError(f"tpu device index {index} out of range ({_C._device_count()} devices)")
    return index


def memory_stats(device=None) -> dict:
    """torch.cuda.memory_stats' keys that apply: allocated_bytes, active_bytes,
    reserved_bytes and allocation (each .all.current/.peak/.allocated/.freed),
    num_ooms, num_alloc_retries, and device_* where the plugin reports them;
    and bucket_padding_bytes.all.current/.peak: device bytes held by padded
    copies of values that bucketed programs keep beside the exact ones."""
    s = _C._memory_stats(_index(device))
    out = {}

    def group(name, current, peak, allocated, freed):
        for k, v in (("current", current), ("peak", peak), ("allocated", allocated), ("freed", freed)):
            out[f"{name}.all.{k}"] = v

    group("allocated_bytes", s["bytes"], s["peak_bytes"], s["allocated_bytes"], s["freed_bytes"])
    group("active_bytes", s["bytes"], s["peak_bytes"], s["allocated_bytes"], s["freed_bytes"])
    group("allocation", s["count"], s["peak_count"], s["allocations"], s["frees"])
    group("active", s["count"], s["peak_count"], s["allocations"], s["frees"])
    if s.get("device_reserved", -1) >= 0:
        reserved, peak = s["device_reserved"], max(s["device_peak_reserved"], s["device_reserved"])
    else:
        reserved, peak = s["bytes"], s["peak_bytes"]
    group("reserved_bytes", reserved, peak, s["allocated_bytes"], s["freed_bytes"])
    # Beyond CUDA's keys: bytes held by bucketed programs' padded copies of values (DESIGN 17).
    out["bucket_padding_bytes.all.current"] = s["padding_bytes"]
    out["bucket_padding_bytes.all.peak"] = s["padding_peak_bytes"]
    out["num_ooms"] = s["ooms"]
    out["num_alloc_retries"] = 0
    out["capacity_bytes"] = s["capacity"]
    for k in ("device_in_use", "device_peak_in_use", "device_limit"):
        if k in s:
            out[k + "_bytes"] = s[k]
    return collections.OrderedDict(sorted(out.items()))


def memory_allocated(device=None) -> int:
    """Bytes held by the device's live tensors."""
    return _C._memory_stats(_index(device))["bytes"]


def max_memory_allocated(device=None) -> int:
    """The peak of memory_allocated since the start or the last reset_peak_memory_stats."""
    return _C._memory_stats(_index(device))["peak_bytes"]


def memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None) -> None:
    _C._reset_peak_memory(_index(device))


def reset_accumulated_memory_stats(device=None) -> None:
    _C._reset_memory_totals(_index(device))


def reset_max_memory_allocated(device=None) -> None:
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None) -> None:
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """Nothing is cached between the tensors and the plugin: finishes queued
    work so that buffers of freed tensors are released."""
    _C._synchronize()


def mem_get_info(device=None):
    """(free, total) bytes of the device: the plugin's figures where it has
    them, else the capacity (the host's memory for XLA:CPU) less what all
    tpu tensors hold."""
    s = _C._memory_stats(_index(device))
    if s.get("device_limit", -1) > 0:
        return s["device_limit"] - s["device_in_use"], s["device_limit"]
    return max(s["capacity"] - s["held_on_capacity"], 0), s["capacity"]


def set_per_process_memory_fraction(fraction: float, device=None) -> None:
    """Caps the device's tensors at `fraction` of its capacity; an allocation
    past it raises torch.OutOfMemoryError."""
    if not isinstance(fraction, (int, float)):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(_index(device), float(fraction))


def get_per_process_memory_fraction(device=None) -> float:
    return _C._memory_stats(_index(device))["fraction"]


def _fmt(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A table of memory_stats (current, peak, allocated and freed totals)."""
    index = _index(device)
    s = memory_stats(index)
    rows = [("Allocated memory", "allocated_bytes", True), ("Reserved memory", "reserved_bytes", True),
            ("Allocations", "allocation", False)]
    if not abbreviated:
        rows.insert(1, ("Active memory", "active_bytes", True))
    width = 75
    lines = ["=" * width, f" torchtpu memory summary, device tpu:{index}".ljust(width), "-" * width,
             f"{'Metric':<22}|{'Cur Usage':>12} |{'Peak Usage':>12} |{'Tot Alloc':>12} |{'Tot Freed':>11}",
             "-" * width]
    for title, key, is_bytes in rows:
        v = [s[f"{key}.all.{k}"] for k in ("current", "peak", "allocated", "freed")]
        f = _fmt if is_bytes else str
        lines.append(f"{title:<22}|{f(v[0]):>12} |{f(v[1]):>12} |{f(v[2]):>12} |{f(v[3]):>11}")
    lines += ["-" * width, f"Device capacity: {_fmt(s['capacity_bytes'])}; out-of-memory refusals: "
              f"{s['num_ooms']}; per-process fraction: {get_per_process_memory_fraction(index):g}", "=" * width]
    return "\n".join(lines) + "\n"


def memory_stats_as_nested_dict(device=None) -> dict:
    """memory_stats with its dotted keys as nested dicts, as torch.cuda's."""
    out = {}
    for key, value in memory_stats(device).items():
        *path, last = key.split(".")
        d = out
        for p in path:
            d = d.setdefault(p, {})
        d[last] = value
    return out


def memory_cached(device=None) -> int:
    """Deprecated torch.cuda name of memory_reserved."""
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """Deprecated torch.cuda name of max_memory_reserved."""
    return max_memory_reserved(device)


def device_memory_used(device=None) -> int:
    """Bytes in use on the device: the plugin's figure where it has one, else
    what live tpu tensors hold."""
    s = _C._memory_stats(_index(device))
    return s["device_in_use"] if s.get("device_in_use", -1) >= 0 else s["bytes"]


def list_gpu_processes(device=None) -> str:
    """This process and what its tpu tensors hold (a PJRT plugin cannot see
    other processes)."""
    import os
    index = _index(device)
    return f"tpu:{index}\nprocess {os.getpid():>10d} uses {memory_allocated(index) / 2**20:12.3f} MB tpu memory"


# Snapshots (torch.cuda.memory._snapshot's format, for torch.cuda._memory_viz
# and pickle dumps). Each tpu storage is its own device buffer, so each live
# storage is one segment holding one block. Stack frames are not recorded.

_history_devices = set()


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=2**31 - 1, device=None,
                           **kwargs) -> None:
    """Starts (enabled "all"/"state"/True) or stops (None/False) keeping the
    last `max_entries` allocations and frees of the device (every device when
    `device` is None); _snapshot() returns them as device_traces."""
    indices = range(_C._device_count()) if device is None else [_index(device)]
    on = enabled not in (None, False)
    for i in indices:
        _C._record_memory_history(i, int(max_entries) if on else 0)
        (_history_devices.add if on else _history_devices.discard)(i)


def _snapshot(device=None, augment_with_fx_traces: bool = False) -> dict:
    """{"segments": live storages of every device, "device_traces": per device
    the recorded allocations and frees, "allocator_settings": {}}."""
    segments, traces = [], []
    for i in range(_C._device_count()):
        for address, size in _C._memory_live(i):
            block = {"address": address, "size": size, "requested_size": size, "state": "active_allocated",
                     "frames": []}
            segments.append({"device": i, "address": address, "total_size": size, "allocated_size": size,
                             "active_size": size, "requested_size": size, "stream": 0, "segment_type": "large",
                             "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": [block]})
        traces.append([{"action": "alloc" if alloc else "free_completed", "addr": addr, "size": size, "stream": 0,
                        "time_us": t, "frames": []} for alloc, addr, size, t in _C._memory_history(i)])
    return {"segments": segments, "device_traces": traces, "allocator_settings": {}}


def memory_snapshot(mempool_id=None) -> list:
    """The live tpu storages of every device as torch.cuda.memory_snapshot's segments."""
    return _snapshot()["segments"]


__all__ = ["memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats", "reset_accumulated_memory_stats", "reset_max_memory_allocated",
           "reset_max_memory_cached", "empty_cache", "mem_get_info", "set_per_process_memory_fraction",
           "get_per_process_memory_fraction", "memory_summary", "memory_stats_as_nested_dict", "memory_cached",
           "max_memory_cached", "device_memory_used", "list_gpu_processes", "memory_snapshot"]
