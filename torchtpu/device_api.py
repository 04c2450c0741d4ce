"""The parts of `torch.tpu` that describe the device (names, properties,
capability) and the rest of `torch.cuda`'s public API, each either given a
tpu meaning here or listed in CUDA_ONLY with the reason it has none.

Properties come from the PJRT plugin's device description (its kind and
attributes) and from the runtime's memory capacity.
"""
import os

import torch

from . import _C
from .memory import _index

OutOfMemoryError = torch.OutOfMemoryError


def _capability(attributes: dict) -> tuple:
    text = str(attributes.get("compute_capability", ""))
    parts = text.split(".")
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return int(parts[0]), int(parts[1])
    return 0, 0


class _TpuDeviceProperties:
    """torch.cuda's _CudaDeviceProperties for a tpu device: `name` (the
    plugin's device kind; "XLA:CPU" on the CPU plugin), `total_memory`
    (bytes the device holds; the host's memory for XLA:CPU),
    `multi_processor_count` (the plugin's core count; the host's CPU count on
    XLA:CPU), `major`/`minor` (a GPU plugin's compute capability, else 0),
    `platform` ("cpu", "cuda", "tpu") and `attributes` (the plugin's
    description attributes as given)."""

    def __init__(self, index: int):
        kind, attributes = _C._device_description(index)
        self.index = index
        self.platform = _C._platform()
        self.name = "XLA:CPU" if kind.lower() == "cpu" else kind
        self.attributes = dict(attributes)
        self.major, self.minor = _capability(self.attributes)
        stats = _C._memory_stats(index)
        limit = stats.get("device_limit", -1)
        self.total_memory = int(limit if limit > 0 else stats["capacity"])
        cores = self.attributes.get("core_count", self.attributes.get("num_cores"))
        try:
            cores = int(cores)
        except (TypeError, ValueError):
            cores = os.cpu_count() if self.platform == "cpu" else 1
        self.multi_processor_count = cores
        self.is_integrated = self.platform == "cpu"

    def __repr__(self):
        return (f"_TpuDeviceProperties(name='{self.name}', platform='{self.platform}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // 2**20}MB, "
                f"multi_processor_count={self.multi_processor_count})")


_properties = {}


def get_device_properties(device=None) -> _TpuDeviceProperties:
    index = _index(device)
    if index not in _properties:
        _properties[index] = _TpuDeviceProperties(index)
    return _properties[index]


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def get_device_capability(device=None) -> tuple:
    """(major, minor): a GPU plugin's compute capability; (0, 0) on XLA:CPU
    and TPU, which have none (torch.accelerator.get_device_capability gives
    the dtypes a tpu tensor holds)."""
    p = get_device_properties(device)
    return p.major, p.minor


def get_arch_list() -> list:
    return [_C._platform()]


def device_of(obj):
    """A torch.tpu.device context for the device of tensor `obj` (no-op for a non-tpu tensor)."""
    from .device_module import device
    return device(obj.get_device() if obj.is_tpu else -1)


def init() -> None:
    """Nothing to do: the device is up once torchtpu is imported."""


def ipc_collect() -> None:
    """Nothing to do: tpu tensors are not shared between processes by handle."""


def can_device_access_peer(device: int, peer_device: int) -> bool:
    """Whether a copy between the two devices needs no host hop: between
    devices of one plugin PJRT copies directly."""
    _index(device), _index(peer_device)
    return True


def is_tf32_supported() -> bool:
    """Whether float32 matmuls may run at reduced precision
    (torch.set_float32_matmul_precision("high") is honoured)."""
    return True


def get_allocator_backend() -> str:
    """The plugin's own allocator holds device memory; torchtpu caches nothing."""
    return "native"


def utilization(device=None) -> int:
    raise RuntimeError("torch.tpu.utilization: " + CUDA_ONLY["utilization"])


def __getattr__(name):
    if name == "default_generators":  # one per device, as torch.cuda.default_generators
        return tuple(_C._default_generator(i) for i in range(_C._device_count()))
    raise AttributeError(name)


# torch.cuda's public names that have no tpu meaning, with the reason.
_NVML = "PJRT exposes no such counter (CUDA reads it from NVML); torchtpu.metrics() and the profiler show device work"
_LEGACY = "legacy typed tensor/storage classes; use torch.tensor(..., device='tpu', dtype=...)"
CUDA_ONLY = {
    "utilization": _NVML, "memory_usage": _NVML, "temperature": _NVML, "power_draw": _NVML, "clock_rate": _NVML,
    "CUDAGraph": "XLA programs are already captured graphs: use Fused Eager or torch.compile(backend='tpu')",
    "graph": "CUDA graph capture; use Fused Eager or torch.compile(backend='tpu')",
    "graphs": "CUDA graph capture; use Fused Eager or torch.compile(backend='tpu')",
    "graph_pool_handle": "CUDA graph memory pools do not exist on tpu",
    "make_graphed_callables": "CUDA graph capture; use torch.compile(backend='tpu')",
    "is_current_stream_capturing": "no CUDA graph capture on tpu (always False would hide misuse)",
    "CUDAPluggableAllocator": "device memory belongs to the PJRT plugin's allocator",
    "change_current_allocator": "device memory belongs to the PJRT plugin's allocator",
    "MemPool": "device memory belongs to the PJRT plugin's allocator (no private pools)",
    "use_mem_pool": "device memory belongs to the PJRT plugin's allocator (no private pools)",
    "caching_allocator_alloc": "raw device pointers do not exist on tpu; allocate tensors",
    "caching_allocator_delete": "raw device pointers do not exist on tpu; allocate tensors",
    "caching_allocator_enable": "there is no caching allocator to switch",
    "caching_allocator_disabled": "there is no caching allocator to switch",
    "host_memory_stats": "pinned host memory is ordinary host memory (torch.tpu pins nothing)",
    "host_memory_stats_as_nested_dict": "pinned host memory is ordinary host memory",
    "reset_accumulated_host_memory_stats": "pinned host memory is ordinary host memory",
    "reset_peak_host_memory_stats": "pinned host memory is ordinary host memory",
    "ExternalStream": "streams are not CUDA streams; every tpu stream shares the device's queues",
    "get_stream_from_external": "streams are not CUDA streams",
    "GreenContext": "CUDA green contexts partition SMs; XLA schedules the device itself",
    "CudaError": "CUDA runtime errors; tpu errors are RuntimeError and torch.OutOfMemoryError",
    "DeferredCudaCallError": "CUDA lazy-init errors; the tpu device is up at import",
    "check_error": "CUDA runtime error codes", "cudaStatus": "CUDA runtime status codes",
    "cudart": "the CUDA runtime library", "current_blas_handle": "cuBLAS handles",
    "current_solver_handle": "cuSOLVER handles", "get_gencode_flags": "nvcc code generation flags",
    "has_magma": "MAGMA is a CUDA linear-algebra library; tpu linalg is lowered to XLA",
    "has_half": "an old CUDA flag; float16 and bfloat16 are torch.tpu.get_amp_supported_dtype()",
    "jiterator": "CUDA runtime-compiled kernels; write tpu kernels in JAX or Pallas (torchtpu.jax_kernel)",
    "nccl": "NCCL; tpu collectives go through the 'tpu' c10d backend (torchtpu.distributed)",
    "nvtx": "NVIDIA's profiler ranges; use torch.profiler or torchtpu.debug",
    "profiler": "the CUDA profiler (cudaProfilerStart); use torch.profiler",
    "sparse": "cuSPARSE; sparse layouts are not tpu layouts",
    "tunable": "TunableOp selects cuBLAS/hipBLAS kernels; XLA chooses its own",
    "streams": "a module of CUDA stream classes; torch.tpu.Stream and Event are here",
    "random": "a module; its functions (get_rng_state, manual_seed, ...) are in torch.tpu",
    "memory": "a module; torch.tpu.memory is torchtpu.memory",
    "set_sync_debug_mode": "host syncs are not reported one by one yet; torchtpu.metrics()['fused_cuts']['sync'] counts them",
    "get_sync_debug_mode": "host syncs are not reported one by one yet; torchtpu.metrics()['fused_cuts']['sync'] counts them",
}
for _name in ("BFloat16", "Bool", "Byte", "Char", "Double", "Float", "Half", "Int", "Long", "Short"):
    CUDA_ONLY[_name + "Storage"] = CUDA_ONLY[_name + "Tensor"] = _LEGACY
CUDA_ONLY["ComplexFloatStorage"] = CUDA_ONLY["ComplexDoubleStorage"] = _LEGACY

__all__ = ["OutOfMemoryError", "get_device_properties", "get_device_name", "get_device_capability",
           "get_arch_list", "device_of", "init", "ipc_collect", "can_device_access_peer", "is_tf32_supported",
           "get_allocator_backend", "utilization", "CUDA_ONLY"]
