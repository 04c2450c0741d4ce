"""Matmul precision: how exactly float32 matmuls and convolutions compute on
tpu, as StableHLO's precision_config of each dot_general and convolution
(part of the graph key, so programs of different precisions never mix).

    torch.set_float32_matmul_precision("high")   # process-wide, PyTorch's setting
    with torchtpu.precision("highest"):          # an override for a block
        y = a @ b

"highest" (PyTorch's default) is full float32 (HIGHEST); "high" lets the
backend use about three bfloat16 passes (HIGH); "medium" and "default" let
it pick its fastest (DEFAULT: one bfloat16 pass on TPU). XLA:CPU computes
float32 exactly at every setting. 16-bit and float64 matmuls are unaffected.
A torch.compile'd function keeps the precision it was compiled with.
"""
import contextlib

from . import _C

_LEVELS = {"default": 0, "medium": 0, "high": 1, "highest": 2}


def set_precision(level) -> None:
    """Overrides torch.set_float32_matmul_precision for tpu ops until reset
    (None removes the override)."""
    _C._set_precision_override(_level(level))


def _level(level) -> int:
    if level is None:
        return -1
    if level not in _LEVELS:
        raise ValueError(f"unknown matmul precision {level!r}: expected one of {sorted(_LEVELS)}")
    return _LEVELS[level]


@contextlib.contextmanager
def precision(level):
    """Float32 matmuls and convolutions issued in the block (the backward ops
    of the block's forward included, when backward() runs inside it) use
    `level`; the previous setting returns after."""
    previous = _C._set_precision_override(_level(level))
    try:
        yield
    finally:
        _C._set_precision_override(previous)
