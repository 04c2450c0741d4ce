"""`torch.tpu.amp`: autocast and GradScaler bound to the tpu device.

    with torch.autocast("tpu", dtype=torch.bfloat16):   # or torch.tpu.amp.autocast()
        loss = model(x).sum()
    scaler = torch.amp.GradScaler("tpu")                 # or torch.tpu.amp.GradScaler()

The op lists are PyTorch's (the same as CUDA's): csrc/aten/autocast.cpp.
"""
import torch


class autocast(torch.amp.autocast):
    """`torch.autocast("tpu", ...)`; the dtype defaults to the tpu autocast
    dtype (bfloat16 unless `torch.set_autocast_dtype("tpu", ...)` changed it)."""

    def __init__(self, enabled: bool = True, dtype: torch.dtype = None, cache_enabled: bool = True):
        super().__init__("tpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """`torch.amp.GradScaler("tpu", ...)`: its unscale and scale update run on
    the device (no host sync besides the one found-inf check per step)."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        super().__init__("tpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)


__all__ = ["autocast", "GradScaler"]
