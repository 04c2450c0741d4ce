"""Runs one OpInfo entry (op, variant, dtype) on the tpu device against the CPU.

The samples are PyTorch's own (`OpInfo.sample_inputs`, made on the CPU from a
fixed seed). Each sample is copied, with its exact strides and storage offset,
once to the CPU and once to the device; the op runs on both and the results
are compared with the tolerance of `opinfo_table`. A sample ends as one of

  pass        same result as the CPU (or both raised: an expected error)
  falls_back  same result, but an aten op ran on the CPU fallback
  fail        a different result, or a value where the CPU raised
  raises      an error where the CPU returned a value
  skip        the CPU does not implement the sample (or it has no floating
              output to differentiate, for "grad")

and an entry takes the worst of its samples (fail > raises > falls_back >
pass > skip). Crashes and hangs are found by the driver (sweep.py), which runs
entries in worker processes.

Why a loop over op_db rather than instantiate_device_type_tests: the
device-type machinery runs every test inside one pytest process (one segfault
ends the run; a subprocess per generated test would pay ~8 s of imports for
each of ~10,000 entries); its outcomes are pass/fail/skip, where this report
needs falls_back and raises, "both raise" as a pass, and the failing sample;
op_db's skips and xfails are keyed by device type ("cpu", "cuda", "mps"), none
by "tpu"; and its CPU-comparison test (TestCommon.test_compare_cpu) lives in
PyTorch's test/test_ops.py, which the wheel does not ship. What PyTorch
provides is used as is: op_db, OpInfo.sample_inputs, supported_dtypes,
supported_backward_dtypes, inplace_variant, supports_out,
SampleInput.transform and output_process_fn_grad, and
torch.testing.assert_close with its per-dtype default tolerances.

Variants: functional, out (op(..., out=...) when op.supports_out), inplace
(op.inplace_variant), grad (gradients of the sum of the floating outputs with
respect to every input that requires grad) and nonfinite (functional, with
NaN, +Inf and -Inf written into every floating tensor of the sample).
"""
import contextlib
import math
import re

import torch
from torch.utils import _pytree as pytree

import opinfo_table
from ties import tie_index_check

VARIANTS = ("functional", "out", "inplace", "grad", "nonfinite", "reference")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "int64": torch.int64, "int32": torch.int32, "bool": torch.bool}
SEVERITY = ("skip", "pass", "falls_back", "raises", "fail", "hang", "crash")
DEVICE = "tpu"

# CPU errors that mean there is no reference: the kernel does not exist for the case, or the CPU's own
# implementation fails an internal assert (a PyTorch bug, e.g. lstsq's gels driver on a wide matrix holding
# NaN: "Argument 5 has illegal value ... please report a bug to PyTorch").
_NOT_ON_CPU = re.compile(r"not implemented for|not supported for|Unsupported dtype|does not support|"
                         r"INTERNAL ASSERT FAILED", re.I)


def op_key(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def op_table():
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.opinfo import core
    # sample_inputs looks for a running unittest method by walking the whole
    # stack (inspect.stack) on every call, for per-sample skips of PyTorch's
    # own suite; there is none here, and the walk costs ~0.2 s a call.
    core.extract_test_fn = lambda: None
    return {op_key(op): op for op in op_db}


def entries(op, dtypes, variants):
    """The (variant, dtype name) pairs that apply to `op`."""
    supported = op.supported_dtypes("cpu")
    backward = op.supported_backward_dtypes("cpu") if op.supports_autograd else set()
    out = []
    for name in dtypes:
        dtype = DTYPES[name]
        if dtype not in supported:
            continue
        for variant in variants:
            if variant == "out" and not op.supports_out:
                continue
            if variant == "inplace" and op.inplace_variant is None:
                continue
            if variant == "grad" and not (dtype.is_floating_point and dtype in backward):
                continue
            if variant == "nonfinite" and not dtype.is_floating_point:
                continue
            # reference_inputs (the samples plus extremal values), where the
            # OpInfo has more than its samples
            if variant == "reference" and getattr(op, "reference_inputs_func", None) is None:
                continue
            out.append((variant, name))
    return out


# ---------------------------------------------------------------- samples

def copy_tensor(t, device):
    """`t` on `device` with the same sizes, strides and storage offset (so
    non-contiguous, expanded and offset inputs stay so); a fresh leaf that
    requires grad when `t` does."""
    t = t.detach()
    if t.layout != torch.strided:
        raise _Unsupported(f"layout {t.layout}")
    span = t.untyped_storage().nbytes() // t.element_size()
    base = t.as_strided((span,), (1,), 0).clone()
    out = base.to(device).as_strided(t.size(), t.stride(), t.storage_offset())
    if t.requires_grad:
        out.requires_grad_()
    return out


def _copy_leaf(t, device, grad):
    out = copy_tensor(t, device)
    if grad and t.requires_grad and not out.requires_grad:
        out.requires_grad_()
    return out


def copy_sample(sample, device, host_args=()):
    """(input, args, kwargs) of `sample` copied to `device`; a `device`
    keyword (factory functions) or a CPU device argument (`Tensor.to`) is
    pointed at `device` too."""
    def move(x):
        if isinstance(x, torch.Tensor):
            return _copy_leaf(x, device, True)
        return x

    def move_arg(x):
        if isinstance(x, torch.device) or (isinstance(x, str) and x == "cpu"):
            return torch.device(device) if torch.device(x).type == "cpu" else x
        return pytree.tree_map(move, x)

    inp = pytree.tree_map(move, sample.input)
    args = tuple(a if i in host_args else move_arg(a) for i, a in enumerate(sample.args))
    kwargs = {}
    for k, v in sample.kwargs.items():
        if k == "device" and v is not None:
            kwargs[k] = torch.device(device)
        else:
            kwargs[k] = pytree.tree_map(move, v)
    return inp, args, kwargs


def inject_nonfinite(sample):
    """A copy of `sample` with NaN, +Inf and -Inf written into every floating
    tensor, at positions rotated per tensor (so binary ops meet a NaN in
    either operand against a finite or infinite value). None when the sample
    has no floating tensor with an element."""
    count = [0]

    def poison(x):
        if not (isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0):
            return x
        y = x.detach().clone()
        flat = y.view(-1) if y.is_contiguous() else None
        if flat is None:
            y = y.contiguous()
            flat = y.view(-1)
        n = flat.numel()
        k = count[0]
        count[0] += 1
        for j, value in enumerate((math.nan, math.inf, -math.inf)):
            if j < n:
                flat[(k + j) % n] = value
        return y.requires_grad_(x.requires_grad)

    from torch.testing._internal.opinfo.core import SampleInput
    inp = pytree.tree_map(poison, sample.input)
    args = pytree.tree_map(poison, tuple(sample.args))
    kwargs = {k: pytree.tree_map(poison, v) for k, v in sample.kwargs.items()}
    if count[0] == 0:
        return None
    return SampleInput(inp, args=args, kwargs=kwargs)


def describe(x, limit=120):
    if isinstance(x, torch.Tensor):
        dt = str(x.dtype).replace("torch.", "")
        s = f"{dt}{list(x.shape)}"
        if x.layout != torch.strided:
            return f"{s} {x.layout}"
        if not x.is_contiguous():
            s += f" strides={tuple(x.stride())}"
        if x.storage_offset():
            s += f" offset={x.storage_offset()}"
        if x.numel() and x.numel() <= 6:
            s += f" {x.detach().flatten().tolist()}"
        return s
    if isinstance(x, (list, tuple)):
        inner = ", ".join(describe(v, limit) for v in x)
        return ("[" + inner + "]") if isinstance(x, list) else ("(" + inner + (",)" if len(x) == 1 else ")"))
    r = repr(x)
    return r if len(r) <= limit else r[:limit] + "..."


def describe_sample(sample):
    parts = [describe(sample.input)]
    parts += [describe(a) for a in sample.args]
    parts += [f"{k}={describe(v)}" for k, v in sample.kwargs.items()]
    return ", ".join(parts)


def samples(op, variant, dtype):
    torch.manual_seed(0)
    grad = variant == "grad"
    made = op.reference_inputs if variant == "reference" else op.sample_inputs
    for s in made("cpu", dtype, requires_grad=grad):
        if variant == "nonfinite":
            s = inject_nonfinite(s)
            if s is None:
                continue
        yield s


def _literal(x):
    """Python source that makes `x` on the device (values exact up to 8
    elements, random beyond)."""
    if isinstance(x, torch.Tensor):
        dt = str(x.dtype)
        if x.numel() <= 8:
            vals = x.detach().tolist()

            def fmt(v):
                if isinstance(v, list):
                    return "[" + ", ".join(fmt(u) for u in v) + "]"
                if isinstance(v, float) and not math.isfinite(v):
                    return f"float('{v}')"
                return repr(v)
            return f"torch.tensor({fmt(vals)}, dtype={dt}, device='tpu')"
        shape = tuple(x.shape)
        if x.dtype.is_floating_point:
            return f"torch.randn({shape}, dtype={dt}, device='tpu')"
        if x.dtype == torch.bool:
            return f"(torch.rand({shape}, device='tpu') > 0.5)"
        return f"torch.randint(0, 3, {shape}, dtype={dt}, device='tpu')"
    if isinstance(x, (list, tuple)):
        inner = ", ".join(_literal(v) for v in x)
        return f"[{inner}]" if isinstance(x, list) else f"({inner}{',' if len(x) == 1 else ''})"
    if isinstance(x, torch.device):
        return "'tpu'"
    if isinstance(x, float) and not math.isfinite(x):
        return f"float('{x}')"
    return repr(x)


def python_repro(op, variant, sample):
    """A one-line Python call of the op on the device for `sample` (None
    when the op is not a public function)."""
    fn, name = op.op, getattr(op.op, "__name__", "")
    path = None
    for prefix, ns in (("torch", torch), ("torch.nn.functional", torch.nn.functional),
                       ("torch.linalg", torch.linalg), ("torch.special", torch.special), ("torch.fft", torch.fft)):
        if name and getattr(ns, name, None) is fn:
            path = f"{prefix}.{name}"
            break
    kwargs = [f"{k}={_literal(v)}" for k, v in sample.kwargs.items()]
    args = [_literal(a) for a in sample.args]
    if variant == "inplace":
        iname = getattr(op.inplace_variant, "__name__", "")
        if not iname or not hasattr(torch.Tensor, iname):
            return None
        return f"{_literal(sample.input)}.{iname}({', '.join(args + kwargs)})"
    if path is None:
        return None
    call = ", ".join([_literal(sample.input)] + args + kwargs)
    if variant == "out":
        dtype = sample.input.dtype if isinstance(sample.input, torch.Tensor) else torch.float32
        call += f", out=torch.empty(0, dtype={dtype}, device='tpu')"
    text = f"{path}({call})"
    if variant == "grad":
        return f"# gradient of the sum of the outputs of: {text}"
    return text


# ---------------------------------------------------------------- comparing

class _Unsupported(Exception):
    pass


class Mismatch(Exception):
    pass


def _to_cpu(x):
    return x.detach().cpu() if isinstance(x, torch.Tensor) else x


def compare(actual, expected, key, variant, metadata_only=False, tie_check=None):
    """Raises Mismatch naming the first difference between the device's
    `actual` and the CPU's `expected` (any pytree of tensors and values).
    `tie_check(i, a, e)` may accept index leaves that choose other equal
    elements (tie_index_check)."""
    a_leaves, a_spec = pytree.tree_flatten(actual)
    e_leaves, e_spec = pytree.tree_flatten(expected)
    if len(a_leaves) != len(e_leaves) or a_spec != e_spec:
        raise Mismatch(f"output structure {a_spec} != CPU's {e_spec}")
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        where = f"output {i}" if len(e_leaves) > 1 else "output"
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                raise Mismatch(f"{where}: {type(a).__name__} where the CPU returns a tensor")
            if a.dtype != e.dtype or a.shape != e.shape:
                raise Mismatch(f"{where}: {describe(a.cpu())}, CPU {describe(e)}")
            if metadata_only:
                continue
            atol, rtol = opinfo_table.tolerance(key, variant, e.dtype)
            if variant == "reference" and e.is_floating_point():
                # as PyTorch's test_compare_cpu, which draws these inputs (atol = rtol = 1e-3 in every dtype)
                atol, rtol = max(atol or 0, 1e-3), max(rtol or 0, 1e-3)
            if variant == "nonfinite" and key in opinfo_table.NONFINITE_DEVICE_NAN_OK and e.is_floating_point():
                e = torch.where(a.detach().cpu().isnan(), float("nan"), e)
            elif variant == "nonfinite" and key in opinfo_table.NONFINITE_DEVICE_NAN_OK and e.is_complex():
                parts = torch.view_as_real(a.detach().cpu().resolve_conj())  # per real and imaginary part
                e = torch.view_as_complex(torch.where(parts.isnan(), float("nan"),
                                                      torch.view_as_real(e.detach().resolve_conj())).contiguous())
            if e.is_complex() and bool(torch.view_as_real(e.detach().resolve_conj()).isinf().any()):
                # |a - e| of two complex numbers with an infinite part is NaN, however close their other
                # parts are: compare the parts.
                a, e = torch.view_as_real(a.detach().cpu().resolve_conj()), torch.view_as_real(e.detach().resolve_conj())
            try:
                torch.testing.assert_close(a.detach().cpu(), e.detach(), atol=atol, rtol=rtol, equal_nan=True,
                                           check_device=False, check_stride=False)
            except AssertionError as err:
                if tie_check is not None and tie_check(i, a.detach().cpu(), e.detach()):
                    continue
                raise Mismatch(f"{where}: {_mismatch_text(a.detach().cpu(), e.detach(), err, atol, rtol)}") from None
        elif not _same_value(a, e) and not metadata_only:
            raise Mismatch(f"{where}: {a!r}, CPU {e!r}")


def _same_value(a, e):
    if isinstance(a, float) and isinstance(e, float) and math.isnan(a) and math.isnan(e):
        return True
    try:
        return bool(a == e) and type(a) is type(e)
    except Exception:
        return False


def _mismatch_text(a, e, err, atol, rtol):
    msg = " ".join(str(err).split("\n")[1:4]).strip() or str(err)
    if a.numel() <= 8:
        return f"{msg}; got {a.flatten().tolist()}, CPU {e.flatten().tolist()}"
    if atol is None:
        from torch.testing._comparison import default_tolerances
        rtol, atol = default_tolerances(e)
    af, ef = a.flatten().double(), e.flatten().double()
    bad = ~torch.isclose(af, ef, rtol=rtol, atol=atol, equal_nan=True)
    idx = bad.nonzero().flatten()[:4].tolist()
    return f"{msg}; at flat {idx}: got {[af[i].item() for i in idx]}, CPU {[ef[i].item() for i in idx]}"


# ---------------------------------------------------------------- running

def _sync():
    import torchtpu
    torchtpu.synchronize()


def _metrics_fallbacks():
    import torchtpu
    return dict(torchtpu.debug.metrics()["cpu_fallbacks"])


def _reset():
    import torchtpu
    torchtpu.debug.reset_metrics()


def _fetch(out):
    """Waits for `out` and brings its tensors to the CPU (errors of queued
    work surface here); tensors left on another device than the tpu become
    strings, which no CPU result equals."""
    _sync()

    def fetch(x):
        if isinstance(x, torch.Tensor):
            return x.detach().cpu() if x.device.type == DEVICE else f"<tensor on {x.device}>"
        return x
    return pytree.tree_map(fetch, out)


def _call(fn, device, sample, variant, grad_inputs=None):
    """Runs one variant of the op on `device`; returns what is compared."""
    inp, args, kwargs = copy_sample(sample, device, fn.get("host_args", ()))
    if variant in ("functional", "nonfinite", "reference"):
        return fn["op"](inp, *args, **kwargs)
    if variant == "inplace":
        ret = fn["inplace"](inp, *args, **kwargs)
        return {"returned": ret, "input": inp, "same": ret is inp}
    if variant == "out":
        template = fn["out_template"]
        outs = pytree.tree_map(
            lambda t: torch.empty(t.shape, dtype=t.dtype, device=device) if isinstance(t, torch.Tensor) else t,
            template)
        ret = fn["op"](inp, *args, **kwargs, out=outs)
        same = all(r is o for r, o in zip(pytree.tree_leaves(ret), pytree.tree_leaves(outs)))
        return {"returned": ret, "out": outs, "same": same}
    if variant == "grad":
        leaves = [t for t in pytree.tree_leaves((inp, args, kwargs))
                  if isinstance(t, torch.Tensor) and t.requires_grad]
        out = fn["op"](inp, *args, **kwargs)
        out = sample.output_process_fn_grad(out)
        terms = [t.sum() for t in pytree.tree_leaves(out)
                 if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
        if not terms or not leaves:
            raise _Unsupported("no differentiable output")
        total = terms[0]
        for t in terms[1:]:
            total = total + t.to(total.dtype)
        return list(torch.autograd.grad(total, leaves, allow_unused=True))
    raise ValueError(variant)


_LOW = (torch.bfloat16, torch.float16)


def upcast(sample):
    """`sample` with its bfloat16 and float16 tensors (and dtype arguments) in float32."""
    def f(t):
        if isinstance(t, torch.dtype):
            return torch.float32 if t in _LOW else t
        if t.dtype in _LOW:
            return t.float().requires_grad_(t.requires_grad)
        return t
    return sample.transform(f)


def _downcast(x, dtype):
    if isinstance(x, torch.Tensor) and x.dtype == torch.float32:
        return x.to(dtype)
    return x


def _float32_reference(fn, sample, variant, dtype):
    """The CPU's result computed in float32 and rounded to `dtype`: the
    second reference of bfloat16 and float16 samples."""
    out = _call(fn, "cpu", upcast(sample), variant)
    if isinstance(out, dict):
        out.pop("same", None)
    return pytree.tree_map(lambda x: _downcast(_to_cpu(x), dtype), out)


# Called with "cpu" or "device" before each side of a sample runs (the sweep
# tells a crash of PyTorch's CPU kernel from one of the device).
PHASE_HOOK = None


def _phase(name):
    if PHASE_HOOK is not None:
        PHASE_HOOK(name)


def run_sample(op, key, variant, sample, dtype=None):
    """Runs one sample; returns (status, detail, fallbacks). A bfloat16 or
    float16 result that differs from the CPU's in that dtype passes when it
    matches the CPU's float32 result rounded to it."""
    fn = {"op": op, "inplace": op.inplace_variant, "host_args": opinfo_table.HOST_ARGS.get(key, ())}
    meta = opinfo_table.metadata_only(key, variant, sample)
    if not any(isinstance(t, torch.Tensor) for t in pytree.tree_leaves((sample.input, sample.args, sample.kwargs))) \
            and "device" not in sample.kwargs:
        return "skip", "no tensor and no device argument: the sample does not reach the device", {}
    _phase("cpu")
    if variant == "out":
        try:
            inp, args, kwargs = copy_sample(sample, "cpu")
            template = op(inp, *args, **kwargs)
        except Exception:
            return "skip", "the CPU raises without out=", {}
        if not all(isinstance(t, torch.Tensor) for t in pytree.tree_leaves(template)) \
                or not pytree.tree_leaves(template):
            return "skip", "output is not tensors", {}
        fn["out_template"] = template
    try:
        context, _ = opinfo_table.CPU_REFERENCE_CONTEXT.get((key, variant), (contextlib.nullcontext, ""))
        with context():
            expected = _call(fn, "cpu", sample, variant)
        cpu_error = None
    except _Unsupported as e:
        return "skip", str(e), {}
    except Exception as e:
        if _NOT_ON_CPU.search(str(e)):
            return "skip", f"CPU: {_short(e)}", {}
        cpu_error = e
    _reset()
    _phase("device")
    try:
        actual = _fetch(_call(fn, DEVICE, sample, variant))
        device_error = None
    except _Unsupported as e:
        return "skip", str(e), {}
    except Exception as e:
        device_error = e
        try:
            _sync()
        except Exception:
            pass
    fallbacks = _metrics_fallbacks()
    if cpu_error is not None:
        if device_error is not None:
            return "pass", f"both raise ({_short(cpu_error)})", fallbacks
        return "fail", f"returns a value where the CPU raises: {_short(cpu_error)}", fallbacks
    if device_error is not None:
        return "raises", f"{type(device_error).__name__}: {_short(device_error)}", fallbacks
    try:
        if variant in ("inplace", "out"):
            if expected["same"] and not actual["same"]:
                raise Mismatch("does not return its " + ("input" if variant == "inplace" else "out tensor"))
            del expected["same"], actual["same"]
        if key in opinfo_table.SIGN_GAUGE and variant != "grad":
            actual, expected = gauge_invariant(sample, variant, actual), gauge_invariant(sample, variant, expected)
        compare(actual, _to_cpu_tree(expected), key, variant, meta, tie_index_check(key, sample))
    except Mismatch as e:
        if dtype in _LOW and variant != "out":
            _phase("cpu")
            try:
                compare(actual, _float32_reference(fn, sample, variant, dtype), key, variant, meta,
                        tie_index_check(key, sample))
                return ("falls_back" if fallbacks else "pass"), "matches the float32 result", fallbacks
            except Exception:
                pass
        return "fail", str(e), fallbacks
    return ("falls_back" if fallbacks else "pass"), "", fallbacks


def gauge_invariant(sample, variant, out):
    """The sign-invariant view of a decomposition's outputs (opinfo_table.SIGN_GAUGE): the sample's own
    output_process_fn_grad, which op_db gives these samples (|U| and |Vh|, U @ Vh, the eigenvalues with
    |Q|), applied to the returned value and to the out= tensors."""
    f = sample.output_process_fn_grad
    if isinstance(out, dict):
        return {k: (f(v) if k in ("returned", "out", "input") else v) for k, v in out.items()}
    return f(out)


def _to_cpu_tree(x):
    return pytree.tree_map(_to_cpu, x)


def _short(e, limit=300):
    s = " ".join(str(e).split())
    return s if len(s) <= limit else s[:limit] + "..."


def run_entry(op, key, variant, dtype_name, on_sample=None, max_samples=None):
    """Runs every sample of one entry; returns its record (a dict)."""
    import warnings
    dtype = DTYPES[dtype_name]
    record = {"op": key, "variant": variant, "dtype": dtype_name, "status": "skip", "samples": 0,
              "counts": {}, "fallbacks": {}, "first": None}
    worst = -1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            sample_list = list(samples(op, variant, dtype))
        except Exception as e:
            record["status"] = "skip"
            record["first"] = {"index": None, "sample": "", "detail": f"sample_inputs raises: {_short(e)}"}
            return record
        for i, sample in enumerate(sample_list):
            if max_samples is not None and i >= max_samples:
                break
            desc = describe_sample(sample)
            if on_sample:
                try:
                    line = python_repro(op, variant, sample)
                except Exception:
                    line = None
                on_sample(i, desc, line)
            status, detail, fallbacks = run_sample(op, key, variant, sample, dtype)
            record["samples"] += 1
            record["counts"][status] = record["counts"].get(status, 0) + 1
            for name, n in fallbacks.items():
                record["fallbacks"][name] = record["fallbacks"].get(name, 0) + n
            rank = SEVERITY.index(status)
            if rank > worst:
                worst = rank
                record["status"] = status
                record["first"] = {"index": i, "sample": desc, "detail": detail}
                if status in ("fail", "raises"):
                    try:
                        record["first"]["python"] = python_repro(op, variant, sample)
                    except Exception:
                        pass
    return record
