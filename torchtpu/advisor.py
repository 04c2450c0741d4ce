"""torchtpu.debug.advise(model, *example_inputs): runs the model's step and
says what costs time on an XLA device, ranked by an estimated cost, each
finding naming the module or line and the change to make."""
import collections
import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# The edge of the TPU matrix unit a contraction is padded to (128 on every
# TPU generation's MXU).
MATRIX_UNIT = 128
_MATMULS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}
_ATTENTION = {"aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
              "aten::_scaled_dot_product_attention_math", "aten::scaled_dot_product_attention"}


def _padded(n: int) -> int:
    return MATRIX_UNIT * math.ceil(n / MATRIX_UNIT)


class _Watch(TorchDispatchMode):
    """Records the contractions of the step: shapes, dtype, the module running."""

    def __init__(self, modules):
        super().__init__()
        self.modules = modules
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = f"aten::{func._schema.name.split('::')[-1]}"
        # The forward inside the model only: the backward's contractions mirror it.
        if (name in _MATMULS or name in _ATTENTION) and self.modules:
            shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
            dtype = next(a.dtype for a in args if isinstance(a, torch.Tensor))
            self.seen.append((name, shapes, dtype, self.modules[-1]))
        return func(*args, **(kwargs or {}))


def _loss_of(out):
    if hasattr(out, "loss") and isinstance(out.loss, torch.Tensor):
        return out.loss
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        out = out[0]
    if hasattr(out, "logits"):
        out = out.logits
    if isinstance(out, torch.Tensor) and out.requires_grad:
        return out.float().square().mean()
    return None


def _step(model, inputs):
    if isinstance(model, torch.nn.Module):
        model.zero_grad(set_to_none=True)  # each step alike (no accumulation into the last one's)
    out = model(*inputs)
    loss = _loss_of(out)
    if loss is not None:
        loss.backward()
    torch.tpu.synchronize()
    return loss


def _contraction_findings(seen, total_flops):
    findings = []
    grouped = collections.defaultdict(lambda: [0, 0.0, None])
    for name, shapes, dtype, module in seen:
        if name in _ATTENTION:
            head_dim = shapes[0][-1]
            if head_dim % MATRIX_UNIT:
                key = ("attention", module, head_dim)
                g = grouped[key]
                g[0] += 1
                g[1] += 1.0 - head_dim / _padded(head_dim)
                g[2] = (f"attention head dim {head_dim} fills {head_dim}/{_padded(head_dim)} of the "
                        f"{MATRIX_UNIT}-wide matrix unit in Q@K^T",
                        f"use a head dim that is a multiple of {MATRIX_UNIT} (fewer, wider heads)")
            continue
        a, b = shapes[-2], shapes[-1]
        m, k, n = a[-2], a[-1], b[-1]
        flops = 2.0 * m * k * n * (math.prod(a[:-2]) if len(a) > 2 else 1)
        useful = k * n / (_padded(k) * _padded(n))
        if useful < 0.75 and flops >= 0.01 * total_flops:
            key = ("matmul", module, (k, n))
            g = grouped[key]
            g[0] += 1
            g[1] += flops / max(total_flops, 1.0) * (1.0 - useful) * 100
            what = (f"a [.., {k}] x [{k}, {n}] contraction ({name}) uses {100 * useful:.0f}% of the matrix "
                    f"unit: {k} and {n} are padded to {_padded(k)} and {_padded(n)}")
            if "attention" in module.lower() or "attn" in module.lower():
                g[2] = (f"{what}; in attention that is the head dim",
                        f"use a head dim that is a multiple of {MATRIX_UNIT} (fewer, wider heads)")
            else:
                g[2] = (what, f"make the feature sizes multiples of {MATRIX_UNIT}")
    for (kind, module, _), (count, cost, (what, change)) in grouped.items():
        findings.append(dict(kind=kind, where=module, detail=f"{what} ({count}x in the step)", advice=change,
                             cost=round(cost * (10 if kind == "attention" else 1), 2)))
    f32 = [s for s in seen if s[2] == torch.float32]
    if f32 and not torch.is_autocast_enabled("tpu"):
        flops = sum(2.0 * math.prod(s[1][-2]) * s[1][-1][-1] for s in f32 if s[0] in _MATMULS)
        findings.append(dict(kind="float32 matmuls", where=f32[0][3],
                             detail=f"{len(f32)} float32 contractions in the step ({flops / 1e9:.2f} GFLOP)",
                             advice="run the step under torch.autocast('tpu') (bfloat16) where its precision "
                                    "is enough; the matrix unit is several times faster in bfloat16",
                             cost=round(5.0 * flops / max(total_flops, 1.0), 2)))
    return findings


def advise(model, *example_inputs, report: bool = True) -> list:
    """Runs `model(*example_inputs)` (and its backward, when the output has a
    loss or requires grad) four times in the current eager mode (two to warm
    up, one measured, one watching its contractions) and returns the
    findings, most costly first: dicts with `kind`, `where` (a module or a
    user line), `detail`, `advice` and `cost` (a relative estimate). Finds CPU
    fallbacks, sync points inside the step, a step that compiles again,
    Strict Eager's per-op programs, Fused graphs cut by the size limit,
    contractions and attention heads that map poorly onto the TPU matrix
    unit, and float32 matmuls outside autocast. Prints them when `report`.
    Gradients it makes are cleared (set to None)."""
    from . import debug, get_eager_mode
    names = {m: n or type(model).__name__ for n, m in model.named_modules()} if isinstance(model, torch.nn.Module) else {}
    stack = []

    def enter(m, args):  # a hook returning something would replace the module's inputs or output
        stack.append(f"{names.get(m, type(m).__name__)} ({type(m).__name__})")

    def leave(m, args, out):
        if stack:
            stack.pop()

    hooks = [torch.nn.modules.module.register_module_forward_pre_hook(enter),
             torch.nn.modules.module.register_module_forward_hook(leave)]
    try:
        for _ in range(2):  # warm: the first steps compile (the second one for donated buffers too)
            _step(model, example_inputs)
        debug.reset_metrics()
        _step(model, example_inputs)
        m = debug.metrics()
        syncs = debug.sync_points()
        fallbacks = debug.fallback_sites()
        recompiled = debug.recompiles()
        watch = _Watch(stack)  # a step of its own: the dispatch mode changes what compiles
        with watch:
            _step(model, example_inputs)
    finally:
        for h in hooks:
            h.remove()
        if isinstance(model, torch.nn.Module):
            model.zero_grad(set_to_none=True)
    findings = []
    for f in fallbacks:
        findings.append(dict(kind="cpu fallback", where=f["site"] or "an unknown line",
                             detail=f"{f['op']} has no tpu lowering: it ran on the CPU {f['count']}x in the step, "
                                    "copying its tensors both ways",
                             advice="replace the op with one that has a lowering, or report it", cost=20.0 * f["count"]))
    ours = {s["site"] for s in syncs if s["op"].endswith("(CPU fallback)")}
    for s in syncs:
        if s["site"] in ours:
            continue
        findings.append(dict(kind="sync point", where=s["site"] or "an unknown line",
                             detail=f"the step waits for the device here {s['count']}x ({s['cause']})",
                             advice="keep values on the device inside the step (log .item() every N steps, "
                                    "torch.where instead of Python if on a tensor)", cost=8.0 * s["count"]))
    if m["compilations"]:
        where = recompiled[-1]["site"] if recompiled else "the step"
        detail = recompiled[-1]["detail"] if recompiled else ""
        findings.append(dict(kind="recompiles", where=where or "the step",
                             detail=f"a repeated step compiled {m['compilations']} program(s) again ({detail})",
                             advice="keep shapes and Python scalars that become shapes fixed between steps, or "
                                    "let buckets pad them (TORCHTPU_BUCKETS)", cost=30.0 * m["compilations"]))
    mode = get_eager_mode()
    programs = m["executions"]
    if mode != "fused" and programs > 20:
        findings.append(dict(kind="per-op programs", where="the step",
                             detail=f"{mode.capitalize()} Eager ran the step as {programs} programs",
                             advice="torchtpu.set_eager_mode('fused') (or torch.compile(model, backend='tpu')) runs "
                                    "it as a few fused programs", cost=0.2 * programs))
    if m["fused_cuts"]["size"]:
        findings.append(dict(kind="graph size limit", where="the step",
                             detail=f"the fused graph was cut {m['fused_cuts']['size']}x at the size limit",
                             advice="raise TORCHTPU_FUSED_MAX_OPS above the step's op count "
                                    f"({m['fused_ops']} ops) so one step is one program",
                             cost=2.0 * m["fused_cuts"]["size"]))
    total = 0.0
    for name, shapes, _, _ in watch.seen:
        if name in _MATMULS:
            a, b = shapes[-2], shapes[-1]
            total += 2.0 * math.prod(a) * b[-1]
    findings += _contraction_findings(watch.seen, total)
    findings.sort(key=lambda f: -f["cost"])
    if report:
        print(format_findings(findings))
    return findings


def format_findings(findings: list) -> str:
    if not findings:
        return "torchtpu advice: nothing to change found in this step"
    lines = ["torchtpu advice (most costly first):"]
    for i, f in enumerate(findings, 1):
        lines.append(f"{i:>3}. [{f['kind']}] {f['where']}: {f['detail']}\n       -> {f['advice']}")
    return "\n".join(lines)
