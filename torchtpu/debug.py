"""Metrics: compilations, cache hits, executions, per-op dispatch counts, CPU
fallbacks and transfer volumes."""
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
