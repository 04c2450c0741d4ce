"""One rank of a TorchTitan training run, started by torchrun (see run_titan.py).

    TITAN_DEVICE=tpu|cpu TITAN_RESULT=out.jsonl \
        torchrun --nproc-per-node N tests/titan/titan_worker.py --module llama3 --config llama3_debugmodel ...

The arguments are TorchTitan's own (torchtitan/train.py's command line): this
runs `torchtitan.train.main()` unchanged. Before it, it applies the shims for
TorchTitan's own assumptions that do not hold here, each documented below, and
records each logged step (loss, grad norm, wall time) for the comparison.

Nothing here works around torchtpu: on "tpu" the only torchtpu-specific line
is `import torchtpu`, its documented way of making the device exist. (TorchTitan
never imports torchtpu; PyTorch's out-of-tree backend autoload, the
"torch.backends" entry point group read by `import torch`, would make that line
unnecessary, but torchtpu declares no such entry point.) With torchtpu
imported, TorchTitan finds everything by itself: device_type "tpu" from
torch._utils._get_available_device_type() (PrivateUse1 name + torch.tpu.is_available()),
device_module torch.tpu, the c10d backend from
dist.Backend.default_device_backend_map["tpu"] == "tpu_dist", and its
torch.compile'd flex_attention / create_block_mask (default backend, Inductor)
routed by torchtpu to backend "tpu".
"""
import json
import os
import sys
import time
import types

DEVICE = os.environ.get("TITAN_DEVICE", "tpu")


def shim_triton_kernels():
    """TorchTitan's assumption: Triton is installed.

    torchtitan/models/common/__init__.py imports decoder -> moe ->
    token_dispatcher -> distributed/minimal_async_ep/api.py, which imports
    distributed/minimal_async_ep/kernels.py, whose first lines are an
    unconditional `import triton` / `import triton.language as tl` and
    @triton.jit kernels. These are CUDA kernels for MoE expert-parallel token
    dispatch over symmetric memory; the dense llama3 model never calls them.
    Triton ships only with CUDA builds of PyTorch, so the import fails on
    every CPU-only install, device or not. The stub module stands in for
    kernels.py only (not for `triton`, which PyTorch itself probes with
    `import triton`): its names raise if anything ever calls them."""
    name = "torchtitan.distributed.minimal_async_ep.kernels"
    stub = types.ModuleType(name)
    stub.__doc__ = "stub (tests/titan/titan_worker.py): MoE expert-parallel Triton kernels, unused by llama3"

    def _kernel(kernel_name):
        def kernel(*args, **kwargs):
            raise NotImplementedError(f"{name}.{kernel_name}: a Triton kernel, stubbed by the test launcher")
        return kernel

    for kernel_name in ("copy_full_counts_to_peers_kernel", "copy_rows_to_peers_kernel", "expand_topk_grad_kernel",
                        "fill_combine_metadata_kernel", "fill_dispatch_metadata_kernel", "invert_flat_indices_kernel",
                        "reduce_topk_slots_kernel", "topk_scores_grad_kernel"):
        setattr(stub, kernel_name, _kernel(kernel_name))
    sys.modules[name] = stub


def shim_dist_set_timeout():
    """TorchTitan's assumption: a newer PyTorch than 2.13.

    After the first step Trainer.train() calls
    torchtitan/distributed/utils.py:set_pg_timeouts, which calls
    `torch.distributed.set_timeout(timeout, group)`: a public name of newer
    PyTorch; 2.13 has the same function as
    `torch.distributed.distributed_c10d._set_pg_timeout(timeout, group)`.
    Fails on the CPU as on any device, so it is no device's gap."""
    import torch.distributed as dist

    if not hasattr(dist, "set_timeout"):
        from torch.distributed.distributed_c10d import _set_pg_timeout

        dist.set_timeout = _set_pg_timeout


class _CpuDeviceModule(types.ModuleType):
    """torch.cpu, plus the torch.cuda-style functions TorchTitan calls on its
    device module (memory statistics, device name and properties), which
    torch.cpu does not have. Used by the CPU reference run only."""

    def __init__(self):
        super().__init__("titan_cpu_device_module")
        import torch
        self._cpu = torch.cpu

    def __getattr__(self, name):
        return getattr(self._cpu, name)

    def set_device(self, device):
        pass

    def current_device(self):
        return 0

    def device_count(self):
        return 1

    def get_device_name(self, device=None):
        return "cpu"

    def get_device_properties(self, device=None):
        return types.SimpleNamespace(name="cpu", total_memory=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))

    def memory_stats(self, device=None):
        return {}

    def reset_peak_memory_stats(self, device=None):
        pass

    def empty_cache(self):
        pass


def shim_cpu_device():
    """TorchTitan's assumption: training runs on an accelerator.

    torchtitan/tools/utils.py sets, at import, `device_type =
    torch._utils._get_available_device_type() or "cuda"` and `device_module =
    torch._utils._get_device_module(device_type)`; with no accelerator that is
    "cuda" and torch.cuda, so TorchTitan has no CPU path. The reference run
    makes it pick "cpu" (the c10d backend is then PyTorch's default for cpu,
    gloo) with a device module that has the functions TorchTitan calls.
    Only the CPU reference uses this; the tpu run needs no device shim."""
    import torch
    import torch._utils as tu

    saved = tu._get_available_device_type, tu._get_device_module
    module = _CpuDeviceModule()
    tu._get_available_device_type = lambda: "cpu"
    tu._get_device_module = lambda device_type=None: module
    try:
        import torchtitan.tools.utils as titan_utils
    finally:
        tu._get_available_device_type, tu._get_device_module = saved
    assert titan_utils.device_type == "cpu", titan_utils.device_type
    return torch


def shim_cpu_flex_attention():
    """PyTorch's limit on the CPU, for the CPU reference run only.

    PyTorch 2.13's flex_attention frontend refuses a backward on the CPU
    (`_validate_device`: "FlexAttention does not support backward on CPU"),
    and TorchTitan calls it through `torch.compile(flex_attention,
    options=...)` (Inductor), whose CPU template has no backward either. The
    reference therefore runs the op's dense implementation, PyTorch's own
    `sdpa_dense` / `sdpa_dense_backward` (the flex_attention higher-order
    op's CompositeExplicitAutograd kernels): the CPU check lets a query that
    requires grad pass, and TorchTitan's class-level compiled callable
    becomes the uncompiled frontend (which itself runs the op through Dynamo's
    "eager" backend). This is the same math the tpu device runs (torchtpu's
    flex_attention kernels call the same two functions), so the reference is
    PyTorch's, unchanged, on the CPU."""
    import importlib

    frontend = importlib.import_module("torch.nn.attention.flex_attention")
    original = frontend._validate_device

    def _validate_device(query, key, value):
        if query.device.type == "cpu":
            return
        original(query, key, value)

    frontend._validate_device = _validate_device
    from torchtitan.models.common.attention import FlexAttention

    FlexAttention._compiled_flex_attn = frontend.flex_attention


def shim_cpu_gloo_premul_sum():
    """Gloo's limit, for the CPU reference run only.

    TorchTitan sets FSDP's gradient divide factor to 1.0
    (distributed/fsdp.py:disable_fsdp_gradient_division; it scales by the
    global token count itself), so FSDP2 reduce-scatters with
    `ReduceOp.PREMUL_SUM(1.0)` (fsdp/_fully_shard/_fsdp_collectives.py:
    _get_gradient_divide_factors), which Gloo refuses ("Cannot use
    ReduceOp.PREMUL_SUM with Gloo"). On the CPU the reference asks FSDP for its
    sum-only reduction (force_sum_reduction_for_comms: SUM, then a division
    by the factor 1.0, a no-op): the same values."""
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives

    original = _fsdp_collectives._get_gradient_divide_factors

    def _get_gradient_divide_factors(*args, **kwargs):
        if len(args) > 5:  # (rs_group, ar_group, reduce_dtype, device_type, factor, force_sum)
            args = args[:5] + (True,) + args[6:]
        else:
            kwargs["force_sum_reduction_for_comms"] = True
        return original(*args, **kwargs)

    _fsdp_collectives._get_gradient_divide_factors = _get_gradient_divide_factors


def record_steps(path):
    """Appends one JSON line per logged step to `path` (rank 0): the loss and
    grad norm TorchTitan logs, at full precision, and the wall time since the
    previous logged step. Observes MetricsProcessor.log; changes nothing."""
    from torchtitan.components.metrics import MetricsProcessor

    original = MetricsProcessor.log
    last = [time.perf_counter()]

    def log(self, step, global_avg_loss, global_max_loss, grad_norm, *args, **kwargs):
        now = time.perf_counter()
        if path and int(os.environ.get("RANK", "0")) == 0:
            with open(path, "a") as f:
                f.write(json.dumps({"step": step, "loss": float(global_avg_loss), "max_loss": float(global_max_loss),
                                    "grad_norm": float(grad_norm), "seconds": now - last[0]}) + "\n")
        last[0] = now
        return original(self, step, global_avg_loss, global_max_loss, grad_norm, *args, **kwargs)

    MetricsProcessor.log = log


def record_device_metrics(path):
    """At the end of a tpu run, appends torchtpu's counters (rank 0): CPU
    fallbacks by op, compiled programs, abandoned captures, compilations."""
    import atexit

    def dump():
        if not path or int(os.environ.get("RANK", "0")) != 0:
            return
        import torchtpu

        m = torchtpu.debug.metrics()
        keep = {k: m[k] for k in ("cpu_fallbacks", "compilations", "executions", "compiled", "distributed")
                if k in m}
        with open(path, "a") as f:
            f.write(json.dumps({"torchtpu_metrics": keep}, default=str) + "\n")

    atexit.register(dump)


def main():
    shim_triton_kernels()
    shim_dist_set_timeout()
    if DEVICE == "tpu":
        import torchtpu  # noqa: F401  (registers the "tpu" device, torch.tpu and the c10d backend tpu_dist)
        record_device_metrics(os.environ.get("TITAN_RESULT"))
    elif DEVICE == "cpu":
        shim_cpu_device()
        shim_cpu_flex_attention()
        shim_cpu_gloo_premul_sum()
    else:
        raise SystemExit(f"TITAN_DEVICE must be tpu or cpu, not {DEVICE!r}")
    record_steps(os.environ.get("TITAN_RESULT"))
    import torchtitan.tools.utils as titan_utils
    assert titan_utils.device_type == DEVICE, (titan_utils.device_type, DEVICE)

    from torchtitan.train import main as titan_main
    titan_main()


if __name__ == "__main__":
    main()
