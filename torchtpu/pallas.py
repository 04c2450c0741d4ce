"""JAX and Pallas kernels as PyTorch ops on tpu tensors.

    @torchtpu.pallas.custom_jax_kernel          # or torchtpu.jax_kernel(fn)
    def gelu_mul(x, y):                         # a JAX function of arrays
        return jax.nn.gelu(x) * y

    z = gelu_mul(a, b)                          # a, b: tpu tensors; z: a tpu tensor

For each input signature (shapes and dtypes) the function is exported with
`jax.export` for the device's platform; its StableHLO functions are inlined
into the device's program as one call (csrc/python/kernel_bindings.cpp), so
the kernel fuses with the ops around it in Fused Eager and inside
torch.compile graphs, and shares the compile cache. A Pallas kernel
(`pl.pallas_call`) works the same way; on XLA:CPU it must run in interpret
mode (`interpret=torchtpu.pallas.interpret()`).

Each kernel is a PyTorch custom op (namespace `torchtpu_jax`) with a fake
implementation (output shapes by `jax.eval_shape`) and autograd: JAX's vjp,
itself an inlined kernel, unless `backward=` is given: a function of
(inputs..., output grads...) returning one grad (or None) per input, in
PyTorch or JAX terms alike (a tpu kernel from this module, or torch ops).

Arguments are tensors only (bind other parameters with functools.partial);
outputs are any pytree of arrays, returned with the same structure. When an
input is 64-bit (int64 indices, float64) the export runs with JAX's x64
mode on, so 64-bit values keep their width (and JAX's own defaults, such as
the dtype of `jnp.arange(3.0)`, become 64-bit); otherwise JAX's defaults
hold. JAX is an optional dependency (`pip install -r requirements-jax.txt`).
"""
import functools
import itertools
import re

import torch

from . import _C

__all__ = ["custom_jax_kernel", "jax_kernel", "interpret", "JaxKernel"]

_LIB = None
_ids = itertools.count()


def _jax():
    try:
        import jax
    except ImportError as e:
        raise ImportError("torchtpu JAX kernels need JAX: pip install -r requirements-jax.txt") from e
    return jax


def interpret() -> bool:
    """Whether Pallas kernels must run in interpret mode here (XLA:CPU)."""
    return _C._platform() == "cpu"


def _platform() -> str:
    return {"cpu": "cpu", "cuda": "cuda", "gpu": "cuda", "rocm": "rocm", "tpu": "tpu"}.get(_C._platform(), "cpu")


_TORCH_TO_JAX = {
    torch.float32: "float32", torch.float64: "float64", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.int8: "int8", torch.int16: "int16", torch.int32: "int32", torch.int64: "int64", torch.uint8: "uint8",
    torch.bool: "bool",
}
_JAX_TO_TORCH = {v: k for k, v in _TORCH_TO_JAX.items()}


def _library():
    global _LIB
    if _LIB is None:
        _LIB = torch.library.Library("torchtpu_jax", "FRAGMENT")
    return _LIB


class _Export:
    """One exported signature: the callee's name, the function texts to
    inline, and the flat outputs' shapes and dtypes with their pytree."""

    def __init__(self, callee, functions, shapes, dtypes, structure, kept):
        self.callee, self.functions, self.shapes, self.dtypes = callee, functions, shapes, dtypes
        self.kept = kept  # the inputs the module takes (JAX drops unused ones)
        # The outputs' pytree with leaf i as the int i (plain Python, which Dynamo traces).
        self.structure = structure


def _fill(structure, outs):
    if isinstance(structure, int):
        return outs[structure]
    if isinstance(structure, tuple) and hasattr(structure, "_fields"):
        return type(structure)(*(_fill(s, outs) for s in structure))
    if isinstance(structure, (list, tuple)):
        return type(structure)(_fill(s, outs) for s in structure)
    if isinstance(structure, dict):
        return type(structure)((k, _fill(v, outs)) for k, v in structure.items())
    return structure  # None


def _inlinable(exported, prefix):
    """The exported module's functions as generic MLIR text without debug
    info, renamed under `prefix` (so kernels never collide with each other
    or with @main), all private, without argument and result attributes."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        module = ir.Module.parse(exported.mlir_module())
        funcs = [op for op in module.body.operations if op.operation.name == "func.func"]
        names = [ir.StringAttr(op.attributes["sym_name"]).value for op in funcs]
        for op, name in zip(funcs, names):
            new = f"{prefix}_{name}"
            ir.SymbolTable.replace_all_symbol_uses(name, new, module.operation)
            op.attributes["sym_name"] = ir.StringAttr.get(new)
            op.attributes["sym_visibility"] = ir.StringAttr.get("private")
            for attr in ("arg_attrs", "res_attrs"):
                if attr in op.attributes:
                    del op.attributes[attr]
        texts = [op.operation.get_asm(enable_debug_info=False, print_generic_op_form=True) for op in funcs]
    return f"{prefix}_main", "\n".join(texts)


class JaxKernel:
    """A JAX function as a PyTorch op on tpu tensors (see the module
    docstring). Calling it with tensors returns tensors."""

    def __init__(self, fn, backward=None, name=None):
        self.fn = fn
        self.user_backward = backward
        base = re.sub(r"\W", "_", name or getattr(fn, "__name__", "kernel")) or "kernel"
        self.opname = f"{base}_{next(_ids)}"
        self._exports = {}
        self._vjp = {}  # backward kernels, by which inputs and outputs are differentiable
        functools.update_wrapper(self, fn, updated=())
        lib = _library()
        lib.define(f"{self.opname}(Tensor[] args) -> Tensor[]")
        lib.impl(self.opname, self._device_impl, "PrivateUse1")
        qualname = f"torchtpu_jax::{self.opname}"
        torch.library.register_fake(qualname, self._fake_impl, lib=lib)
        torch.library.register_autograd(qualname, self._backward, setup_context=self._setup_context, lib=lib)
        self.op = getattr(torch.ops.torchtpu_jax, self.opname).default

    def _export(self, tensors):
        return self._export_signature(tuple((tuple(t.shape), t.dtype) for t in tensors))

    # The export of one signature: ((shape, dtype), ...) of the inputs.
    def _export_signature(self, key):
        found = self._exports.get(key)
        if found is not None:
            return found
        jax = _jax()
        for _, dtype in key:
            if dtype not in _TORCH_TO_JAX:
                raise TypeError(f"jax kernel {self.opname}: unsupported input dtype {dtype}")
        wide = any(dtype in (torch.int64, torch.float64) for _, dtype in key)
        with jax.enable_x64(wide):
            specs = [jax.ShapeDtypeStruct(shape, _TORCH_TO_JAX[dtype]) for shape, dtype in key]
            try:
                exported = jax.export.export(jax.jit(self.fn), platforms=[_platform()])(*specs)
            except Exception as e:
                raise RuntimeError(f"jax kernel {self.opname}: exporting for inputs {list(key)} failed: "
                                   f"{e}") from e
            shapes = [tuple(a.shape) for a in exported.out_avals]
            dtypes = []
            for a in exported.out_avals:
                if str(a.dtype) not in _JAX_TO_TORCH:
                    raise TypeError(f"jax kernel {self.opname}: unsupported output dtype {a.dtype}")
                dtypes.append(_JAX_TO_TORCH[str(a.dtype)])
            callee, functions = _inlinable(exported, f"torchtpu_{self.opname}_{len(self._exports)}")
        structure = jax.tree_util.tree_unflatten(exported.out_tree, list(range(len(shapes))))
        found = _Export(callee, functions, shapes, dtypes, structure, sorted(exported.module_kept_var_idx))
        self._exports[key] = found
        return found

    def _device_impl(self, args):
        e = self._export(args)
        inputs = [args[i].contiguous() for i in e.kept]
        return _C._jax_call(e.callee, e.functions, args[0].device.index or 0, inputs, [list(s) for s in e.shapes],
                            e.dtypes)

    def _fake_impl(self, args):
        e = self._export(args)
        return [args[0].new_empty(s, dtype=d) for s, d in zip(e.shapes, e.dtypes)]

    def __call__(self, *args):
        for i, a in enumerate(args):
            if not isinstance(a, torch.Tensor):
                raise TypeError(f"jax kernel {self.opname}: argument {i} is a {type(a).__name__}; kernels take "
                                f"tensors only (bind other arguments with functools.partial)")
        if not args:
            raise TypeError(f"jax kernel {self.opname}: needs at least one tensor argument")
        for i, a in enumerate(args):
            if a.device.type != "tpu":
                raise RuntimeError(f"jax kernel {self.opname}: argument {i} is on {a.device}; expected tpu "
                                   f"tensors")
        outs = self.op(list(args))
        return _fill(self._structure(tuple((tuple(a.shape), a.dtype) for a in args)), outs)

    @torch._dynamo.assume_constant_result
    def _structure(self, signature):
        """The outputs' structure for an input signature; Dynamo takes it as a
        constant (computed at trace time from the shapes and dtypes)."""
        return self._export_signature(signature).structure

    # Autograd.
    @staticmethod
    def _setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs[0])
        ctx.out_meta = [(o.shape, o.dtype) for o in output]

    def _backward(self, ctx, grads):
        inputs = ctx.saved_tensors
        grads = [g if g is not None else torch.zeros(s, dtype=d, device=inputs[0].device)
                 for g, (s, d) in zip(grads, ctx.out_meta)]
        if self.user_backward is not None:
            result = self.user_backward(*inputs, *grads)
            result = list(result) if isinstance(result, (list, tuple)) else [result]
            if len(result) != len(inputs):
                raise RuntimeError(f"jax kernel {self.opname}: backward returned {len(result)} grads for "
                                   f"{len(inputs)} inputs")
            return result
        floats = [i for i, t in enumerate(inputs) if t.is_floating_point()]
        float_outs = [i for i, g in enumerate(grads) if g.is_floating_point()]
        if not floats or not float_outs:
            return [None] * len(inputs)
        vjp = self._vjp_kernel(len(inputs), tuple(floats), tuple(float_outs))
        got = vjp(*inputs, *[grads[i] for i in float_outs])
        got = list(got) if isinstance(got, (list, tuple)) else [got]
        result = [None] * len(inputs)
        for i, g in zip(floats, got):
            result[i] = g
        return result

    def _vjp_kernel(self, n, floats, float_outs):
        key = (n, floats, float_outs)
        if key not in self._vjp:
            jax = _jax()
            fn = self.fn

            def vjp(*xs):
                primals, cts = list(xs[:n]), xs[n:]

                def of_floats(*fp):
                    full = list(primals)
                    for i, v in zip(floats, fp):
                        full[i] = v
                    flat = jax.tree_util.tree_leaves(fn(*full))
                    return tuple(flat[i] for i in float_outs)

                _, pullback = jax.vjp(of_floats, *[primals[i] for i in floats])
                return tuple(pullback(tuple(cts)))

            self._vjp[key] = JaxKernel(vjp, name=f"{self.opname}_vjp")
        return self._vjp[key]


def custom_jax_kernel(fn=None, *, backward=None, name=None):
    """Turns a JAX function (or Pallas kernel) into a PyTorch op on tpu
    tensors; usable as a decorator with or without arguments."""
    if fn is None:
        return lambda f: JaxKernel(f, backward=backward, name=name)
    return JaxKernel(fn, backward=backward, name=name)


jax_kernel = custom_jax_kernel
