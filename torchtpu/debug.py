"""Metrics: compilations, cache hits, executions, per-op dispatch counts, CPU
fallbacks and transfer volumes; the StableHLO of a compiled call."""
import functools

from . import _C


def metrics() -> dict:
    return _C._metrics()


def reset_metrics() -> None:
    _C._reset_metrics()


def metrics_report() -> str:
    m = metrics()
    lines = ["torchtpu metrics"]
    for key in ("compilations", "compile_seconds", "executions", "cache_hits", "cache_misses",
                "cached_executables", "h2d_bytes", "d2h_bytes"):
        value = m[key]
        lines.append(f"  {key:<20} {value:.3f}" if isinstance(value, float) else f"  {key:<20} {value}")
    fallbacks = m["cpu_fallbacks"]
    lines.append(f"  cpu_fallbacks        {sum(fallbacks.values())}")
    for name, n in sorted(fallbacks.items(), key=lambda kv: -kv[1]):
        lines.append(f"    {name:<40} {n}")
    lines.append("  ops")
    for name, n in sorted(m["ops"].items(), key=lambda kv: -kv[1]):
        lines.append(f"    {name:<40} {n}")
    return "\n".join(lines)


def stablehlo(fn, *args, **kwargs) -> str:
    """The StableHLO text of what torch.compile(fn, backend="tpu") runs for
    these arguments: one module per graph captured by the call (a forward
    graph, or an inference graph when nothing requires grad), each headed by
    a comment naming it. `fn` may be a function or a module."""
    import torch

    from . import dynamo

    # A backend object of its own: Dynamo compiles afresh instead of reusing
    # an earlier torch.compile of the same code.
    with dynamo.recording() as programs:
        torch.compile(fn, backend=functools.partial(dynamo.backend))(*args, **kwargs)
    return "\n".join(f"// {name}\n{program.stablehlo()}" for name, program in programs)
