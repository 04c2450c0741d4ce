"""Eager modes: when the pending graph of device ops is materialized.

- "debug": after every op, waiting for the device; errors surface at the op.
- "strict": after every op, without waiting (the default).
- "fused": ops are deferred into one pending graph per device and issuing thread, materialized as
  one XLA program at sync points (.item(), .cpu(), print, torchtpu.synchronize(),
  the end of backward()), at a detected loop boundary, or at the size limit
  (TORCHTPU_FUSED_MAX_OPS).
"""
import contextlib

from . import _C

MODES = ("debug", "strict", "fused")


def set_eager_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown eager mode {mode!r}: expected one of {MODES}")
    _C._set_mode(mode)


def get_eager_mode() -> str:
    return _C._get_mode()


@contextlib.contextmanager
def eager_mode(mode: str):
    """Runs the block in `mode`, restoring the previous mode after (the pending
    work of the block is synchronized first, so its errors surface inside it)."""
    previous = get_eager_mode()
    set_eager_mode(mode)
    try:
        yield
        _C._synchronize()
    finally:
        _C._set_mode(previous)
