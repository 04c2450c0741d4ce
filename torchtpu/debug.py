"""Metrics: compilations (and why each happened), cache hits, executions,
per-op dispatch counts, CPU fallbacks and transfer volumes, the user lines
that reached sync points and fallbacks; the NaN/Inf check of op outputs; the
StableHLO of a compiled call."""
import collections
import contextlib
import functools
import json
import os
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
        where = e["site"] or "an unknown line"
        if e["cause"] == "replay_miss":  # not a compilation: Fused Eager built this graph anew from here
            if live:
                print(f"torchtpu: fused replay stopped at {where} ({e['op']}): {e['detail']}", file=sys.stderr)
            continue
        _recent.append(e)
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


def _library_dirs() -> tuple:
    import os
    import torch
    return (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
            os.path.dirname(os.path.abspath(__file__)) + os.sep, "<frozen ")


def warn_at_user_line(message: str, category=UserWarning) -> None:
    """Warns at the innermost frame outside torch and torchtpu (the user's
    line), not at the library frame that noticed."""
    libs = _library_dirs()
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(libs):
        frame = frame.f_back
    if frame is None:
        warnings.warn(message, category, stacklevel=2)
        return
    registry = frame.f_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(message, category, frame.f_code.co_filename, frame.f_lineno,
                           module=frame.f_globals.get("__name__"), registry=registry)


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


# What made a sync point, by the op that asked for the device value.
_SYNC_CAUSES = {
    "aten::_local_scalar_dense": ".item() / bool(t) / if t: / int(t)",
    "aten::_copy_from": ".cpu() / .to('cpu') / .numpy() / print",
    "aten::_copy_from_and_resize": ".cpu() / .to('cpu') into a CPU tensor",
    "aten::nonzero": "data-dependent shape (nonzero, boolean mask)",
    "aten::masked_select": "data-dependent shape (masked_select)",
    "aten::unique": "data-dependent shape (unique)",
    "aten::_unique2": "data-dependent shape (unique)",
}


def sync_points() -> list:
    """Each user line that reached a sync point (a host read of a device
    value: `.item()`, `.cpu()`, `print`, a data-dependent shape, a Python
    `if` on a tensor, a host-staged collective that completes before it
    returns), most frequent
    first: dicts with `site` (the user's line, "" where unknown), `op` (the
    ATen op that asked), `cause` (in words) and `count`. Since the last
    reset_metrics(). TORCHTPU_DEBUG=syncs prints each as it happens."""
    out = []
    for e in _C._site_log():
        if e["kind"] == "sync":
            op = e["what"].split(" (")[0]
            cause = ("the CPU fallback of an op with no tpu lowering" if e["what"].endswith("(CPU fallback)")
                     else _SYNC_CAUSES.get(op, "a host read of a device value"))
            out.append(dict(site=e["site"], op=e["what"], cause=cause, count=e["count"]))
    return sorted(out, key=lambda d: -d["count"])


def fallback_sites() -> list:
    """Each (op, user line) that ran on the CPU fallback, most frequent
    first: dicts with `op`, `site` and `count`. Since the last reset_metrics()."""
    out = [dict(op=e["what"], site=e["site"], count=e["count"]) for e in _C._site_log() if e["kind"] == "fallback"]
    return sorted(out, key=lambda d: -d["count"])


def set_check_nan(enabled: bool) -> None:
    """Checks every floating output of every op for NaN and Inf as the op
    returns, raising at the first with the op and the user's line (as
    TORCHTPU_CHECK_NAN=1 does from the start). Each check waits for the op,
    as Debug Eager does."""
    _C._set_nan_check(bool(enabled))


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _recompiling_sites(limit: int) -> list:
    _on_recompiles()
    last = {}
    for e in _recent:
        if e["site_compilations"] > 1:
            last[e["site"] or "an unknown line"] = e
    ranked = sorted(last.items(), key=lambda kv: -kv[1]["site_compilations"])
    return ranked[:limit]


def metrics_report(top: int = 10) -> str:
    """metrics() as a table a person reads: compilations and their causes,
    compile time, cache hit rate, transfers, Fused Eager graphs and cuts,
    compiled programs, collectives; then the `top` recompiling sites, sync
    points and CPU fallbacks with the user's lines, and the ops dispatched."""
    m = metrics()
    lines = ["torchtpu metrics"]

    def row(name, value, note=""):
        lines.append(f"  {name:<20} {value}" + (f"   ({note})" if note else ""))

    causes = ", ".join(f"{c} {n}" for c, n in m["compilations_by_cause"].items() if n)
    row("compilations", m["compilations"], causes)
    row("compile_seconds", f"{m['compile_seconds']:.3f}")
    row("executions", m["executions"])
    lookups = m["cache_hits"] + m["cache_misses"]
    row("cache_hits", m["cache_hits"], f"misses {m['cache_misses']}, hit rate "
        f"{100 * m['cache_hits'] / lookups:.0f}%" if lookups else f"misses {m['cache_misses']}")
    row("cached_executables", m["cached_executables"])
    row("transfers", f"host->device {_size(m['h2d_bytes'])}, device->host {_size(m['d2h_bytes'])}")
    cuts = m["fused_cuts"]
    if m["fused_graphs"]:
        row("fused_graphs", m["fused_graphs"], f"{m['fused_ops']} ops, {m['fused_ops'] / m['fused_graphs']:.0f} per "
            f"graph, {m['fused_outputs']} outputs; cut at sync {cuts['sync']}, loop {cuts['loop']}, "
            f"size limit {cuts['size']}")
        row("fused_replay", f"{m['fused_replayed_ops']} ops replayed",
            f"{m['fused_replay_misses']} recorded graphs given up before their cut")
    row("donated_buffers", m["donated_buffers"])
    memo = m["op_memo"]
    if memo["hits"] or memo["records"]:
        row("op_memo", f"{memo['hits']} op calls reused a graph", f"{memo['records']} graphs recorded")
    c = m["compiled"]
    if c["programs"] or c["runs"]:
        row("torch.compile", f"{c['programs']} programs", f"{c['runs']} runs, {c['abandoned']} captures abandoned")
    d = m["distributed"]
    if d.get("collectives"):
        row("collectives", d["collectives"], f"{d['host_staged']} staged through the host "
            f"({_size(d['host_staged_bytes'])}), {d['device_programs']} device programs")
    fallbacks = m["cpu_fallbacks"]
    row("cpu_fallbacks", sum(fallbacks.values()))
    sites = fallback_sites()
    for name, n in sorted(fallbacks.items(), key=lambda kv: -kv[1]):
        lines.append(f"    {name:<40} {n}")
        for s in [s for s in sites if s["op"] == name][:top]:
            lines.append(f"      {s['site'] or 'an unknown line':<38} {s['count']}")
    recompiling = _recompiling_sites(top)
    if recompiling:
        lines.append("  recompiling sites")
        for site, e in recompiling:
            lines.append(f"    {site:<40} {e['site_compilations']} compilations (last: {e['cause']}: {e['detail']})")
    syncs = sync_points()
    lines.append(f"  sync_points          {sum(s['count'] for s in syncs)}")
    for s in syncs[:top]:
        lines.append(f"    {s['site'] or 'an unknown line':<40} {s['count']:>6}  {s['cause']} [{s['op']}]")
    lines.append("  ops")
    for name, n in sorted(m["ops"].items(), key=lambda kv: -kv[1]):
        lines.append(f"    {name:<40} {n}")
    return "\n".join(lines)


# A thread's name on the timeline, by the first kind of span it recorded.
_THREAD_ROLES = {"execute": "executor (program launches)", "transfer": "copies", "compile": "compiler",
                 "cache": "graph lookup", "op": "op issue", "sync": "op issue", "fused": "op issue",
                 "device": "device (each program from its launch to its completion)"}


@contextlib.contextmanager
def trace(path: str):
    """Records torchtpu's spans while the block runs and writes them to
    `path` as a Chrome trace (open it at https://ui.perfetto.dev or in
    chrome://tracing): each ATen op dispatched to the device ("op"), fused
    graph cuts ("fused"), graph key and cache lookups ("cache"),
    compilations ("compile"), program launches ("execute"), each program's
    time on the device from its launch to its completion event ("device", on
    a row of its own), the waits of sync points ("sync"), host<->device copies ("transfer") and CPU
    fallbacks ("fallback"), each on the thread that did it, with a detail
    (the op, sizes, bytes). At the end, pending work is queued and waited
    for first (its errors stay for the next sync point). Up to 2**20 spans are kept; `otherData.dropped` counts the rest."""
    _C._trace_start()
    try:
        yield
    finally:
        spans, dropped = _C._trace_stop()
        origin = min((s[3] for s in spans), default=0)
        here = _C._thread_token()
        tids, roles, events = {}, {}, []
        for name, cat, thread, begin, end, detail in spans:
            tid = tids.setdefault(thread, len(tids) + 1)
            roles.setdefault(tid, "this thread (issuing ops)" if thread == here else _THREAD_ROLES.get(cat, cat))
            events.append(dict(name=name, cat=cat, ph="X", pid=os.getpid(), tid=tid, ts=(begin - origin) / 1e3,
                               dur=max(end - begin, 0) / 1e3, args={"detail": detail} if detail else {}))
        for tid, role in roles.items():
            events.append(dict(name="thread_name", ph="M", pid=os.getpid(), tid=tid, args={"name": role}))
        with open(path, "w") as f:
            json.dump(dict(traceEvents=events, displayTimeUnit="ms", otherData=dict(dropped=dropped)), f)


def advise(model, *example_inputs, report: bool = True) -> list:
    """What costs time in `model`'s step on an XLA device, most costly first
    (torchtpu/advisor.py): CPU fallbacks, sync points in the step, a step
    that compiles again, per-op programs, Fused graphs cut by the size limit,
    contractions and attention heads that map poorly onto the TPU matrix
    unit, float32 matmuls outside autocast; each names the module or line
    and the change to make."""
    from . import advisor
    return advisor.advise(model, *example_inputs, report=report)


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
