"""Migration shims: scripts written against PyTorch/XLA run on torchtpu.

    import torchtpu.compat
    torchtpu.compat.install()          # or TORCHTPU_TORCH_XLA=1, or:
                                       # python -m torchtpu.compat script.py ARGS
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.parallel_loader as pl

install() puts modules named `torch_xla`, `torch_xla.core.xla_model`,
`torch_xla.distributed.parallel_loader`, `torch_xla.distributed.xla_backend`,
`torch_xla.distributed.xla_multiprocessing`, `torch_xla.debug.metrics`,
`torch_xla.runtime` and `torch_xla.amp` in sys.modules, backed by
torchtpu.compat.torch_xla, and registers "xla" as a torch.distributed
backend name (and "xla://" as an init method) for tpu_dist. A name they do
not hold, and any other torch_xla module, raises an error naming the
torchtpu way instead of failing deep inside a script.
"""
import importlib
import importlib.abc
import importlib.machinery
import sys
import types

from . import torch_xla as _impl

# Each shim module and the names it takes from torchtpu.compat.torch_xla.
_MODULES = {
    "torch_xla": ["device", "devices", "device_count", "sync", "step", "compile", "launch", "manual_seed"],
    "torch_xla.core": [],
    "torch_xla.core.xla_model": [
        "xla_device", "mark_step", "optimizer_step", "reduce_gradients", "is_master_ordinal", "xrt_world_size",
        "world_size", "get_ordinal", "get_local_ordinal", "save", "master_print", "rendezvous", "all_reduce",
        "all_gather", "wait_device_ops", "get_xla_supported_devices", "xla_device_hw", "add_step_closure",
        "set_rng_state", "get_rng_state", "REDUCE_SUM", "REDUCE_MUL", "REDUCE_AND", "REDUCE_OR", "REDUCE_MIN",
        "REDUCE_MAX"],
    "torch_xla.distributed": [],
    "torch_xla.distributed.parallel_loader": ["MpDeviceLoader", "ParallelLoader"],
    "torch_xla.distributed.xla_backend": [],
    "torch_xla.distributed.xla_multiprocessing": ["spawn"],
    "torch_xla.debug": [],
    "torch_xla.debug.metrics": ["metrics_report", "short_metrics_report", "counter_names", "counter_value",
                                "metric_names", "metric_data", "clear_all", "clear_counters", "clear_metrics"],
    "torch_xla.runtime": ["world_size", "global_ordinal", "local_ordinal", "device_type", "addressable_device_count",
                          "global_device_count", "global_runtime_device_count", "local_process_count",
                          "process_index", "process_count", "is_spmd", "use_spmd", "initialize_cache"],
    "torch_xla.amp": ["autocast"],
}
_HINT = ("torchtpu.compat shims PyTorch/XLA's common API (see README, \"Moving from PyTorch/XLA\"); "
         "for the rest use torchtpu and PyTorch directly: torch.device(\"tpu\"), torch.tpu.*, "
         "torchtpu.debug, torch.distributed with backend \"tpu_dist\"")


class _ShimModule(types.ModuleType):
    """A torch_xla module of the shim: a missing name raises naming the torchtpu way."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"{self.__name__}.{name} has no torchtpu counterpart. {_HINT}")


class _UnknownTorchXla(importlib.abc.MetaPathFinder):
    """Any other torch_xla module: an ImportError naming the torchtpu way."""

    def find_spec(self, name, path, target=None):
        if name == "torch_xla" or name.startswith("torch_xla."):
            raise ModuleNotFoundError(f"No module named {name!r}: torchtpu's torch_xla shims do not include it. "
                                      f"{_HINT}", name=name)
        return None


def _register_xla_backend() -> None:
    import torch.distributed as dist
    if not dist.is_available():
        return
    from .. import distributed
    if "xla" not in dist.Backend.backend_list:
        dist.Backend.register_backend("xla", distributed._create_backend, devices=["tpu", "cpu"])
    rdzv = importlib.import_module("torch.distributed.rendezvous")  # the module (the package's name is a function)
    if "xla" not in rdzv._rendezvous_handlers:
        env_handler = rdzv._rendezvous_handlers["env"]
        rdzv.register_rendezvous_handler("xla", lambda url, **kw: env_handler(url.replace("xla://", "env://", 1),
                                                                               **kw))


def installed() -> bool:
    return isinstance(sys.modules.get("torch_xla"), _ShimModule)


def install() -> None:
    """Makes `import torch_xla` and its common modules resolve to torchtpu (idempotent)."""
    if installed():
        return
    if "torch_xla" in sys.modules:
        raise RuntimeError("torchtpu.compat.install(): the real torch_xla is already imported in this process")
    for name, names in _MODULES.items():
        module = _ShimModule(name, f"PyTorch/XLA's {name}, on torchtpu (torchtpu.compat)")
        module.__path__ = []  # a package: its submodules are the shim's too
        module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        for attr in names:
            setattr(module, attr, getattr(_impl, attr))
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
    sys.meta_path.append(_UnknownTorchXla())
    _register_xla_backend()
