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
    """The generator state of `device`; "tpu" (no index) is the current device, as on CUDA."""
    return _C._get_rng_state(_index(device))


def get_rng_state_all():
    return [_C._get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device="tpu") -> None:
    """Sets the generator state of `device`; "tpu" (no index) is the current device, as on CUDA."""
    _C._set_rng_state(_index(device), new_state)


def set_rng_state_all(new_states) -> None:
    for i, s in enumerate(new_states):
        _C._set_rng_state(i, s)


def _is_in_bad_fork() -> bool:
    return False


def is_initialized() -> bool:
    return _C._initialized()


def _lazy_init() -> None:
    pass


# Mixed precision (torch.autocast("tpu"), torch.amp.GradScaler("tpu")).

def get_amp_supported_dtype():
    """The dtypes torch.autocast("tpu", dtype=...) accepts."""
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


from . import amp, memory  # noqa: E402,F401
from .memory import *  # noqa: E402,F401,F403
from .device_api import *  # noqa: E402,F401,F403
from .device_api import __getattr__  # noqa: E402,F401  (default_generators)


# Streams and events. A device has two queues: the compute queue (the
# executor: every program, in issue order) and the copy queue (host-to-device
# copies with non_blocking=True from pinned memory, which run on their own
# thread while programs compute and the issuing thread goes on). A program
# that reads a tensor still being copied waits for that copy, so the
# orderings that waits ask for always hold: wait_event, wait_stream and
# record_stream need do nothing. An event records the position of both
# queues; it completes when the work issued before it has finished, and
# with enable_timing its time is when the device finished that work.

import threading as _threading

_current = _threading.local()


def _index(device) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "tpu":
        raise ValueError(f"expected a tpu device, got {device}")
    return current_device() if device.index is None else device.index


_stream_ids = __import__("itertools").count(1)
_PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1


class Stream(torch.Stream):
    """A tpu stream (see above): `wait_stream`, `wait_event`, `record_event`,
    `synchronize`, `query`, usable with `torch.tpu.stream(s)` and as a
    torch.Stream (`tensor.record_stream(s)`). The default stream has id 0."""

    def __new__(cls, device=None, priority=0, _stream_id=None, **kwargs):
        index = _index(device)
        sid = next(_stream_ids) if _stream_id is None else _stream_id
        self = super().__new__(cls, stream_id=sid, device_index=index, device_type=_PRIVATEUSE1)
        self._priority = priority
        return self

    def __init__(self, device=None, priority=0, _stream_id=None, **kwargs):
        pass

    @property
    def priority(self):
        return self._priority

    def wait_event(self, event) -> None:
        pass

    def wait_stream(self, stream) -> None:
        pass

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def query(self) -> bool:
        """Whether all work issued so far has finished (does not wait)."""
        return _C._record_marker(False).query()

    def synchronize(self) -> None:
        synchronize(self.device)

    def __repr__(self):
        return f"<torch.tpu.Stream device={self.device} priority={self.priority}>"


class Event:
    """A tpu event: `record`, `wait`, `query`, `synchronize`, and with
    `enable_timing=True`, `elapsed_time` in milliseconds between the
    completions of the work before two events (waiting for both)."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.enable_timing = enable_timing
        self._marker = None
        self._timed = None

    def record(self, stream=None) -> None:
        self._marker = _C._record_marker(bool(self.enable_timing))
        self._timed = _Timed(self._marker) if self.enable_timing else None

    def wait(self, stream=None) -> None:
        pass

    def query(self) -> bool:
        return self._marker is None or self._marker.query()

    def synchronize(self) -> None:
        if self._marker is not None:
            self._marker.synchronize()

    def elapsed_time(self, end_event) -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("elapsed_time needs two events created with enable_timing=True")
        if self._marker is None or end_event._marker is None:
            raise RuntimeError("elapsed_time needs both events recorded first")
        return (end_event._timed.time_ns() - self._timed.time_ns()) / 1e6


class _Timed:
    """A timed event's recording. The queue is ordered: the work before a
    later recording finishes no earlier than the work before an earlier one,
    though the devices' completion callbacks may stamp them in another order;
    so a recording's time is at least the one recorded before it."""

    last = None  # the latest recording

    def __init__(self, marker):
        self.marker, self.time = marker, None
        before = _Timed.last
        if before is not None and before.marker.query():
            before.time_ns()  # known at once: the chain stays short
        self.before = before
        _Timed.last = self

    def time_ns(self) -> int:
        chain, t = [], self
        while t is not None and t.time is None:
            chain.append(t)
            t = t.before
        floor = t.time if t is not None else 0
        for t in reversed(chain):
            floor = t.time = max(t.marker.time_ns(), floor)
            t.before = None
        return self.time


_default_streams = {}


def default_stream(device=None) -> Stream:
    index = _index(device)
    if index not in _default_streams:
        _default_streams[index] = Stream(index, _stream_id=0)
    return _default_streams[index]


def current_stream(device=None) -> Stream:
    index = _index(device)
    streams = getattr(_current, "streams", {})
    return streams.get(index) or default_stream(index)


def set_stream(stream) -> None:
    if stream is None:
        return
    if not hasattr(_current, "streams"):
        _current.streams = {}
    _current.streams[stream.device.index] = stream


class StreamContext:
    """Makes `stream` the current stream of its device inside the block."""

    def __init__(self, stream):
        self.stream = stream
        self.previous = None

    def __enter__(self):
        if self.stream is not None:
            self.previous = current_stream(self.stream.device)
            set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            set_stream(self.previous)
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)
