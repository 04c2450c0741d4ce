"""torchtpu.warmup: compile the bucketed programs of a function before they
are needed, as a server does for its batch sizes and prompt lengths."""
from . import _C

__all__ = ["bucket_sizes", "warmup"]


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


def warmup(fn, make_inputs, max_size: int, min_size: int = 2) -> list:
    """Runs ``fn(*make_inputs(n))`` at sizes that reach every bucket from ``min_size`` to
    ``max_size``, so their programs compile now instead of at the first input of each size.

    ``make_inputs(n)`` returns the arguments at size ``n`` (a tuple, or one tensor). ``fn`` runs
    for real in the current eager mode (a ``torch.compile``'d function too), and its results are
    dropped: give it work without side effects that matter (a forward pass, ``generate()``; not an
    optimizer step). Each bucket is run at its largest size and at one size below: a bucket's
    program is made from two observations of the same program at different sizes (three where
    a size grows as the square of another). Returns the sizes run, in order."""
    from . import synchronize

    if max_size < min_size:
        raise ValueError(f"torchtpu.warmup: max_size {max_size} is below min_size {min_size}")
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
        synchronize()
        del out
    return sizes
