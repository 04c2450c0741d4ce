"""torchtpu.warmup: compile the bucketed programs of a function before they
are needed, as a server does for its batch sizes and prompt lengths."""
import threading

import torch

from . import _C

__all__ = ["Warmup", "bucket_sizes", "warmup"]


def bucket_sizes(max_size: int, min_size: int = 2) -> list:
    """The buckets that the sizes from ``min_size`` to ``max_size`` fall in, ascending (each the
    largest size its one program serves); empty with bucketing off (``TORCHTPU_BUCKETS=off``)."""
    out = []
    v = max(int(min_size), 2)
    while v <= max_size:
        b = _C._bucket_of(v)
        if b is None:
            break
        out.append(int(b))
        v = int(b) + 1
    return out


class Warmup:
    """A warm-up running in the background (``warmup(..., background=True)``):
    ``wait()`` returns the sizes run, or raises what the warm-up raised."""

    def __init__(self, run):
        self._sizes, self._error = None, None

        def body():
            try:
                self._sizes = run()
            except BaseException as e:  # handed to wait()
                self._error = e

        self._thread = threading.Thread(target=body, name="torchtpu-warmup", daemon=True)
        self._thread.start()

    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, timeout=None) -> list:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"torchtpu.warmup: still running after {timeout} s")
        if self._error is not None:
            raise self._error
        return self._sizes


def warmup(fn, make_inputs, max_size: int, min_size: int = 2, background: bool = False):
    """Runs ``fn(*make_inputs(n))`` at sizes that reach every bucket from ``min_size`` to
    ``max_size``, so their programs compile now instead of at the first input of each size.

    ``make_inputs(n)`` returns the arguments at size ``n`` (a tuple, or one tensor). ``fn`` runs
    for real in the current eager mode (a ``torch.compile``'d function too), and its results are
    dropped: give it work without side effects that matter (a forward pass, ``generate()``; not an
    optimizer step). Each bucket is run at its largest size and at one size below: a bucket's
    program is made from two observations of the same program at different sizes (three where
    a size grows as the square of another). Returns the sizes run, in order.

    With ``background=True`` the warm-up runs on a thread of its own, with the caller's grad
    mode, and returns a ``Warmup`` at once: the caller goes on (loading data, building the model's
    other parts, serving sizes already warm) while the programs compile; ``wait()`` returns the
    sizes. Its device work is a pending graph of its own (one per issuing thread), so it never
    joins the caller's programs. (In Strict mode an op's place also holds the two ops issued just
    before it, so a warm-up serves the calls that reach ``fn`` as it did; Fused programs are
    whole graphs and serve every call.)"""
    if max_size < min_size:
        raise ValueError(f"torchtpu.warmup: max_size {max_size} is below min_size {min_size}")
    if background:
        grad = torch.is_grad_enabled()

        def run():
            with torch.set_grad_enabled(grad):
                return _run(fn, make_inputs, max_size, min_size, _read_back)

        return Warmup(run)
    from . import synchronize

    return _run(fn, make_inputs, max_size, min_size, lambda out: synchronize())


def _read_back(out):
    """Waits for what this thread issued by reading its results: a sync point
    of this thread's work alone (synchronize() would also cut the pending
    graphs and captures of the caller's thread)."""
    for t in torch.utils._pytree.tree_leaves(out):
        if isinstance(t, torch.Tensor) and t.device.type == "tpu":
            t.cpu()


def _run(fn, make_inputs, max_size, min_size, wait):
    tops = [min(b, int(max_size)) for b in bucket_sizes(max_size, min_size)]
    if not tops:  # bucketing off: every size is its own program
        tops = list(range(max(int(min_size), 1), int(max_size) + 1))
    inner = [t - 1 for t in tops if t - 1 >= max(min_size, 2) and _C._bucket_of(t - 1) == _C._bucket_of(t)]
    sizes = sorted(set(tops)) + [s for s in sorted(set(inner)) if s not in tops]
    if min_size not in sizes:  # the smallest sizes may take other programs (a dim of 1 or 2)
        sizes.append(int(min_size))
    for n in sizes:
        args = make_inputs(n)
        if not isinstance(args, tuple):
            args = (args,)
        out = fn(*args)  # kept until its programs ran: a result nothing holds is not computed
        wait(out)
        del out
    return sizes
