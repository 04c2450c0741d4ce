"""Metrics: compilations (and why each happened), cache hits, executions,
per-op dispatch counts, CPU fallbacks and transfer volumes; the StableHLO of
a compiled call."""
import collections
import functools
import re
import sys
import warnings

from . import _C, env

_recent = collections.deque(maxlen=256)
_warned = set()


def _on_recompiles() -> None:
    """Takes the compilations the core recorded (called by it, holding the GIL,
    when the next op is issued): keeps them for recompiles(), prints each
    recompilation under TORCHTPU_DEBUG=recompiles, and warns once per site
    that keeps compiling for new shapes."""
    live = "recompiles" in env.get("TORCHTPU_DEBUG")
    limit = env.get("TORCHTPU_RECOMPILE_LIMIT")
    for e in _C._recompile_events():
        _recent.append(e)
        where = e["site"] or "an unknown line"
        if live and e["site_compilations"] > 1:
            print(f"torchtpu: recompiled at {where} ({e['op']}): {e['cause']}: {e['detail']}", file=sys.stderr)
        if e["site_recompilations"] > limit and e["site"] not in _warned:
            _warned.add(e["site"])
            message = (f"torchtpu: the program issued from this line (first op {e['op']}) compiled again "
                       f"{e['site_recompilations']} times for new shapes (last: {e['detail']}); each new size "
                       "compiles again: pad sizes to a few values "
                       "(buckets), mark them dynamic under torch.compile (torch._dynamo.mark_dynamic), or keep "
                       "them fixed")
            m = re.fullmatch(r"(.*):(\d+) in .*", e["site"])
            if m:
                warnings.warn_explicit(message, UserWarning, m.group(1), int(m.group(2)))
            else:
                warnings.warn(message, stacklevel=2)


def recompiles() -> list:
    """The latest compilations since reset_metrics() (up to 256), oldest first, each a dict: `site`
    (the user's line of the graph's first op), `op`, `cause` (new_program,
    new_shape, new_attributes), `detail` (what differs from the site's
    previous graph, e.g. "input 0 shape [4, 40] -> [4, 48]"), and the site's
    compilations so far (`site_compilations`, `site_recompilations`)."""
    _C._synchronize()
    _on_recompiles()
    return list(_recent)


def metrics() -> dict:
    m = _C._metrics()
    m["buckets"] = _C._bucket_stats()
    return m


def reset_metrics() -> None:
    _C._reset_metrics()
    _C._recompile_events()
    _recent.clear()


def metrics_report() -> str:
    m = metrics()
    lines = ["torchtpu metrics"]
    for key in ("compilations", "compile_seconds", "executions", "cache_hits", "cache_misses",
                "cached_executables", "h2d_bytes", "d2h_bytes"):
        value = m[key]
        lines.append(f"  {key:<20} {value:.3f}" if isinstance(value, float) else f"  {key:<20} {value}")
    for cause, n in m["compilations_by_cause"].items():
        lines.append(f"    {cause:<18} {n}")
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
