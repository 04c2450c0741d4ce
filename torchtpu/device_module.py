"""`torch.tpu`: the device module PyTorch looks up for the "tpu" device type."""
import torch

from . import _C


def is_available() -> bool:
    return _C._initialized() and _C._device_count() > 0


def device_count() -> int:
    return _C._device_count()


def current_device() -> int:
    return _C._get_device()


def set_device(device) -> None:
    index = torch.device(device).index if not isinstance(device, int) else device
    if index is None:
        index = 0
    if not 0 <= index < device_count():
        raise RuntimeError(f"tpu device index {index} out of range ({device_count()} devices)")
    _C._set_device(index)


class device:
    """Context manager that makes `index` (an int, "tpu:N" or torch.device) the
    current tpu device inside the block; None leaves it unchanged."""

    def __init__(self, index):
        if isinstance(index, (str, torch.device)):
            index = torch.device(index).index
        self.index = -1 if index is None else int(index)
        self.previous = -1

    def __enter__(self):
        self.previous = current_device()
        if self.index >= 0 and self.index != self.previous:
            set_device(self.index)

    def __exit__(self, *exc):
        if self.index >= 0 and self.index != self.previous:
            set_device(self.previous)
        return False


def synchronize(device=None) -> None:
    """Waits until every queued op on the device has finished."""
    _C._synchronize()


def manual_seed(seed: int) -> None:
    _C._manual_seed(current_device(), int(seed) & 0xFFFFFFFFFFFFFFFF)


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        _C._manual_seed(i, int(seed) & 0xFFFFFFFFFFFFFFFF)


def seed() -> None:
    import random
    manual_seed(random.getrandbits(63))


def seed_all() -> None:
    import random
    manual_seed_all(random.getrandbits(63))


def initial_seed() -> int:
    return _C._initial_seed(current_device())


def get_rng_state(device="tpu") -> torch.Tensor:
    index = device if isinstance(device, int) else (torch.device(device).index or 0)
    return _C._get_rng_state(index)


def get_rng_state_all():
    return [_C._get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device="tpu") -> None:
    index = device if isinstance(device, int) else (torch.device(device).index or 0)
    _C._set_rng_state(index, new_state)


def set_rng_state_all(new_states) -> None:
    for i, s in enumerate(new_states):
        _C._set_rng_state(i, s)


def _is_in_bad_fork() -> bool:
    return False


def is_initialized() -> bool:
    return _C._initialized()


def _lazy_init() -> None:
    pass
