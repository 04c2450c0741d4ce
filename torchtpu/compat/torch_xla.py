"""PyTorch/XLA's common API, implemented on torchtpu: what the `torch_xla`
modules that torchtpu.compat.install() provides hold. Each function follows
its PyTorch/XLA namesake (arguments, defaults, results); the differences
are in the README's "Moving from PyTorch/XLA".

Processes started by `launch`/`spawn` (or torchrun) each use tpu device
LOCAL_RANK. Collectives (`all_reduce`, `optimizer_step` on several
processes, `rendezvous`) run on a torch.distributed process group; where
the script made none, the first collective makes one (backend tpu_dist,
from the launcher's RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT), as
PyTorch/XLA needs none."""
import contextlib
import sys

import torch
import torch.distributed as dist

from .. import _C, data, debug, env
from .. import distributed as tpu_distributed

REDUCE_SUM, REDUCE_MUL, REDUCE_AND, REDUCE_OR, REDUCE_MIN, REDUCE_MAX = "sum", "mul", "and", "or", "min", "max"
_REDUCE_OPS = {REDUCE_SUM: dist.ReduceOp.SUM, REDUCE_MUL: dist.ReduceOp.PRODUCT, REDUCE_MIN: dist.ReduceOp.MIN,
               REDUCE_MAX: dist.ReduceOp.MAX, REDUCE_AND: dist.ReduceOp.BAND, REDUCE_OR: dist.ReduceOp.BOR}
_step_closures = []


# --- processes and devices -------------------------------------------------

def _set(name: str) -> bool:
    return env.SETTINGS[name].raw() not in (None, "")


def get_ordinal(defval: int = 0) -> int:
    """This process's global rank."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return env.get("RANK") if _set("RANK") else defval


def get_local_ordinal(defval: int = 0) -> int:
    """This process's rank on its host."""
    return env.get("LOCAL_RANK") if _set("LOCAL_RANK") else defval


def world_size() -> int:
    """The number of processes taking part."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return env.get("WORLD_SIZE")


xrt_world_size = world_size


def is_master_ordinal(local: bool = True) -> bool:
    return (get_local_ordinal() if local else get_ordinal()) == 0


def master_print(*args, fd=sys.stdout, finalizer=None, **kwargs) -> None:
    if is_master_ordinal(local=False):
        print(*args, file=fd, **kwargs)


def xla_device(n: int = None, devkind: str = None) -> torch.device:
    """The tpu device of this process (tpu:LOCAL_RANK in a launched process),
    made current; device `n` when given."""
    if devkind is not None and devkind.upper() != xla_device_hw(None):
        raise RuntimeError(f"xla_device(devkind={devkind!r}): this process's devices are {xla_device_hw(None)}")
    if n is None:
        n = get_local_ordinal() if _set("LOCAL_RANK") else torch.tpu.current_device()
    torch.tpu.set_device(n)
    return torch.device("tpu", n)


def device(index: int = None) -> torch.device:
    return xla_device(index)


def devices() -> list:
    return [torch.device("tpu", i) for i in range(torch.tpu.device_count())]


def device_count() -> int:
    return torch.tpu.device_count()


def get_xla_supported_devices(devkind: str = None, max_devices: int = None) -> list:
    names = [f"tpu:{i}" for i in range(torch.tpu.device_count())]
    return names[:max_devices] if max_devices is not None else names


def xla_device_hw(device) -> str:
    """"TPU", "CUDA" or "CPU": what runs the tpu device."""
    import torchtpu
    return torchtpu.platform().upper()


def launch(fn, args=(), start_method: str = "spawn", debug_single_process: bool = False):
    """Runs `fn(index, *args)` in one process per tpu device (torchtpu.distributed.launch);
    under torchrun, once in this process with its LOCAL_RANK."""
    if dist.is_torchelastic_launched():
        return fn(get_local_ordinal(), *args)
    return tpu_distributed.launch(fn, args, nprocs=1 if debug_single_process else None, start_method=start_method)


def spawn(fn, args=(), nprocs: int = None, join: bool = True, daemon: bool = False, start_method: str = "spawn"):
    """torch_xla.distributed.xla_multiprocessing.spawn: `fn(index, *args)` in
    `nprocs` processes (default one per tpu device)."""
    if dist.is_torchelastic_launched():
        return fn(get_local_ordinal(), *args)
    return tpu_distributed.launch(fn, args, nprocs=nprocs, start_method=start_method, join=join)


# --- stepping ---------------------------------------------------------------

def mark_step(wait: bool = False, reset_scope: bool = True) -> None:
    """Ends the pending graph and queues it (torchtpu runs ops as they come
    in Strict Eager; in Fused Eager this cuts the step's program); `wait`
    waits for the device. Then runs the step closures."""
    _C._flush()
    if wait:
        _C._synchronize()
    closures, _step_closures[:] = list(_step_closures), []
    for closure, args in closures:
        closure(*args)


def sync(wait: bool = False, reset_scope: bool = True) -> None:
    mark_step(wait=wait)


@contextlib.contextmanager
def step():
    """torch_xla.step(): the body, then sync()."""
    try:
        yield
    finally:
        mark_step()


def compile(f=None, full_graph: bool = False, name: str = None, max_different_graphs: int = None):
    """torch_xla.compile: torch.compile(f, backend="tpu", fullgraph=full_graph);
    as a context manager (no `f`), the body then sync()."""
    if f is None:
        return step()
    return torch.compile(f, backend="tpu", fullgraph=full_graph)


def wait_device_ops(devices=()) -> None:
    _C._synchronize()


def add_step_closure(closure, args=(), run_async: bool = False) -> None:
    """Runs `closure(*args)` after the next mark_step() (e.g. to print a loss
    without a sync inside the step)."""
    _step_closures.append((closure, tuple(args)))


def manual_seed(seed, device=None) -> None:
    set_rng_state(seed, device)


def set_rng_state(seed, device=None) -> None:
    index = torch.device(device).index if device is not None else None
    with torch.tpu.device(index if index is not None else torch.tpu.current_device()):
        torch.tpu.manual_seed(int(seed))


def get_rng_state(device=None) -> int:
    index = torch.device(device).index if device is not None else None
    with torch.tpu.device(index if index is not None else torch.tpu.current_device()):
        return torch.tpu.initial_seed()


# --- collectives ------------------------------------------------------------

def _group():
    """The process group collectives run on (made on first use), or None on one process."""
    if not (dist.is_available() and dist.is_initialized()):
        if env.get("WORLD_SIZE") <= 1:
            return None
        dist.init_process_group(tpu_distributed.BACKEND, init_method="env://")
    return dist.group.WORLD if dist.get_world_size() > 1 else None


def _no_groups(what, groups):
    if groups:
        raise NotImplementedError(f"torch_xla {what}(groups=...) has no torchtpu shim: make the subgroup with "
                                  "torch.distributed.new_group and call torch.distributed's collective on it")


def all_reduce(reduce_type, inputs, scale: float = 1.0, groups=None, pin_layout: bool = True):
    """Reduces `inputs` (a tensor: returns the result; a list: in place, as
    PyTorch/XLA does) over every process, then multiplies by `scale`."""
    _no_groups("all_reduce", groups)
    if reduce_type not in _REDUCE_OPS:
        raise ValueError(f"all_reduce: unknown reduce_type {reduce_type!r}: expected one of {sorted(_REDUCE_OPS)}")
    single = isinstance(inputs, torch.Tensor)
    tensors = [inputs.clone()] if single else list(inputs)
    group = _group()
    for t in tensors:
        if group is not None:
            dist.all_reduce(t, op=_REDUCE_OPS[reduce_type])
        if scale != 1.0:
            t.mul_(scale)
    return tensors[0] if single else inputs


def all_gather(value: torch.Tensor, dim: int = 0, groups=None, output=None, pin_layout: bool = True):
    """`value` of every process, concatenated along `dim` in rank order."""
    _no_groups("all_gather", groups)
    group = _group()
    if group is None:
        parts = [value]
    else:
        parts = [torch.empty_like(value) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, value.contiguous())
    result = torch.cat(parts, dim=dim)
    if output is not None:
        output.copy_(result)
        return output
    return result


def rendezvous(tag: str, payload: bytes = b"", replicas=()) -> list:
    """Waits for every process; returns each one's `payload`, in rank order."""
    if replicas:
        raise NotImplementedError("torch_xla rendezvous(replicas=...) has no torchtpu shim: use a "
                                  "torch.distributed.new_group and torch.distributed.barrier on it")
    if _group() is None:
        return [payload]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, payload)
    return out


def reduce_gradients(optimizer, groups=None, pin_layout: bool = True) -> None:
    """Averages the gradients of `optimizer`'s parameters over every process."""
    count = world_size()
    if count > 1:
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        all_reduce(REDUCE_SUM, grads, scale=1.0 / count, groups=groups)


def optimizer_step(optimizer, barrier: bool = False, optimizer_args=None, groups=None, pin_layout: bool = True):
    """Averages gradients over the processes, then `optimizer.step()`; returns its result."""
    reduce_gradients(optimizer, groups=groups, pin_layout=pin_layout)
    loss = optimizer.step(**(optimizer_args or {}))
    if barrier:
        mark_step()
    return loss


# --- checkpoints --------------------------------------------------------------

def _to_cpu(data_):
    if isinstance(data_, torch.Tensor):
        return data_.detach().cpu() if data_.device.type == "tpu" else data_
    if isinstance(data_, dict):
        return type(data_)((k, _to_cpu(v)) for k, v in data_.items())
    if isinstance(data_, (list, tuple)) and not hasattr(data_, "_fields"):
        return type(data_)(_to_cpu(v) for v in data_)
    return data_


def save(data_, file_or_path, master_only: bool = True, global_master: bool = False) -> None:
    """torch.save of `data_` with its tensors moved to the CPU (loads
    anywhere, without torchtpu), by the master process only unless
    `master_only` is False; every process waits for it."""
    if not master_only or is_master_ordinal(local=not global_master):
        torch.save(_to_cpu(data_), file_or_path)
    rendezvous("torch_xla.core.xla_model.save")


# --- data ---------------------------------------------------------------------

class MpDeviceLoader(data.DeviceLoader):
    """torch_xla's MpDeviceLoader: batches of `loader` on `device`, prefetched
    (torchtpu.data.DeviceLoader, unsharded: shard with a DistributedSampler)."""

    def __init__(self, loader, device, loader_prefetch_size: int = 8, device_prefetch_size: int = 4,
                 batches_per_execution: int = 1, **kwargs):
        if kwargs.get("input_sharding") is not None:
            raise NotImplementedError("MpDeviceLoader(input_sharding=...) is SPMD; torchtpu shards with DTensor "
                                      "(torch.distributed.tensor) on a tpu_dist process group")
        super().__init__(loader, device=device, prefetch=max(1, device_prefetch_size), shard=False)


class ParallelLoader:
    """torch_xla's ParallelLoader: per_device_loader(device) gives the batches on `device`."""

    def __init__(self, loader, devices, **kwargs):
        self._loader = loader
        self._kwargs = kwargs

    def per_device_loader(self, device):
        return MpDeviceLoader(self._loader, device, **self._kwargs)


# --- metrics and runtime --------------------------------------------------------

def _counters() -> dict:
    m = debug.metrics()
    return {k: v for k, v in m.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def metrics_report() -> str:
    return debug.metrics_report()


def short_metrics_report(counter_names=None, metric_names=None) -> str:
    return debug.metrics_report()


def counter_names() -> list:
    return sorted(_counters())


def counter_value(name: str):
    return _counters().get(name)


def metric_names() -> list:
    return []


def metric_data(name: str):
    return None


def clear_all() -> None:
    debug.reset_metrics()


clear_counters = clear_metrics = clear_all


def device_type() -> str:
    return xla_device_hw(None)


def global_ordinal() -> int:
    return get_ordinal()


def local_ordinal() -> int:
    return get_local_ordinal()


def addressable_device_count() -> int:
    return 1


def global_device_count() -> int:
    return world_size()


global_runtime_device_count = global_device_count


def local_process_count() -> int:
    return max(1, env.get("LOCAL_WORLD_SIZE"))


def process_index() -> int:
    return get_ordinal()


def process_count() -> int:
    return world_size()


def is_spmd() -> bool:
    return False


def use_spmd(auto: bool = False):
    raise NotImplementedError("torch_xla's SPMD mode has no torchtpu counterpart: shard with DTensor "
                              "(torch.distributed.tensor) or FSDP2 on a tpu_dist process group, one process per device")


def initialize_cache(path: str, readonly: bool = False):
    raise NotImplementedError("torchtpu caches compiled programs by itself: set TORCHTPU_CACHE_DIR "
                              "(this host) or TORCHTPU_SHARED_CACHE_DIR (shared by hosts) before import")


def autocast(device=None, enabled: bool = True, dtype: torch.dtype = None, cache_enabled: bool = True):
    """torch_xla.amp.autocast: torch.autocast on tpu (bfloat16 by default)."""
    return torch.autocast("tpu", enabled=enabled, dtype=dtype or torch.bfloat16, cache_enabled=cache_enabled)
