"""torch.compile(model, backend="tpu").

Dynamo's graphs go through AOTAutograd (forward and backward, PyTorch's
partitioner). Each graph AOTAutograd hands over is captured on its first call:
its ATen ops run through the eager lowerings into one graph that is never
executed op by op, and becomes one executable (kept in the shared compile
cache). From then on a call hands the inputs' device buffers to one execution
and wraps the outputs: no dispatch, no graph building, no hashing
(csrc/eager/capture.h).

A graph whose capture meets a sync point (a value read on the host, an op
that falls back to the CPU) or takes inputs that are not tpu tensors runs in
the current eager mode instead; torchtpu.debug.metrics()["compiled"] counts
programs, abandoned captures and runs. Graphs with dynamic shapes get one
program per concrete signature.
"""
import contextlib
import itertools
import os

import torch

from . import _C, debug

__all__ = ["backend"]

_EAGER = "eager"
_graph_ids = itertools.count()
_recorders = []


@contextlib.contextmanager
def recording():
    """Collects (graph name, program) for every graph captured inside."""
    programs = []
    _recorders.append(programs)
    try:
        yield programs
    finally:
        _recorders.remove(programs)


def _is_tpu(x):
    return isinstance(x, torch.Tensor) and x.device.type == "tpu"


def _has_storage(t):
    return t.untyped_storage().nbytes() > 0


_LIBRARY = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
            os.path.dirname(os.path.abspath(__file__)) + os.sep)


def _user_line(node):
    """The innermost frame outside torch and torchtpu of an FX node's stack
    trace, as "file:line in function", or "" when it has none."""
    trace = node.meta.get("stack_trace") or ""
    for line in reversed(trace.splitlines()):
        line = line.strip()
        if not line.startswith('File "'):
            continue
        try:
            file, rest = line[len('File "'):].split('", line ', 1)
            number, function = rest.split(", in ", 1)
        except ValueError:
            continue
        if not file.startswith(_LIBRARY):
            return f"{file}:{int(number)} in {function}"
    return ""


_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default)


class _Capturer(torch.fx.Interpreter):
    """Runs a graph's nodes one by one, each op issued with the user's source
    line of its node (errors of the compiled program name it)."""

    def run_node(self, n):
        _C._set_site_text(_user_line(n))
        try:
            return super().run_node(n)
        finally:
            _C._set_site_text("")

    def call_function(self, target, args, kwargs):
        if target not in _VIEWS:
            return super().call_function(target, args, kwargs)
        try:
            return target(*args, **kwargs)
        except RuntimeError as e:
            if "view size is not compatible" not in str(e):
                raise
            # The graph was traced with PyTorch's meta strides; where a value
            # here is laid out otherwise, its view is a reshape (the graph is
            # functional, so the copy changes no result).
            return torch.ops.aten.reshape.default(*args, **kwargs)


class _Program:
    """A captured graph: the program, and how each result comes back (a new
    tensor, a view of an input, an empty tensor, or a constant)."""

    __slots__ = ("program", "template", "direct", "signature")

    def __init__(self, program, template, signature):
        self.program = program
        self.template = template
        self.signature = signature
        # Every result a new tensor, in order: returned as the program gives them.
        self.direct = all(k == "new" for k, *_ in template) and [t[1] for t in template] == list(
            range(len(template)))

    def run(self, args):
        new = self.program.run(args)
        if new is None or self.direct:
            return new
        return _results(self.template, new, args)


def _results(template, new, args):
    """A call's results from its template: `new` holds the program's new
    tensors, `args` the call's arguments. The views and empty tensors made
    here are no ops of the graph, so dispatch modes do not see them: a mode
    that pairs the ops of two calls (selective activation checkpointing
    pairs a forward with its recomputation) sees every run of a program
    alike, as it would a kernel's."""
    out = []
    with torch._C._DisableTorchDispatch():
        for kind, *rest in template:
            if kind == "new":
                out.append(new[rest[0]])
            elif kind == "alias":
                out.append(_alias(args[rest[0]], *rest[1:]))
            elif kind == "empty":
                size, stride, dtype, device = rest
                out.append(torch.empty_strided(size, stride, dtype=dtype, device=device))
            else:
                out.append(rest[0])
    return out


def _alias(base, size, stride, offset, dtype):
    """A view of `base`'s storage with the given layout, in `dtype` (a
    graph's output may view an input as another dtype)."""
    if base.dtype != dtype:
        # The whole storage as one row of `dtype` (element sizes are powers of two).
        n = base.untyped_storage().nbytes() // dtype.itemsize * dtype.itemsize // base.dtype.itemsize
        base = base.as_strided((n,), (1,), 0).view(dtype)
    return base.as_strided(size, stride, offset)


def _signature(args):
    """What a program depends on beyond the graph: each tensor's layout in
    its storage, and the other arguments' values."""
    return tuple((a.shape, a.stride(), a.dtype, a.storage_offset(), a.untyped_storage().nbytes())
                 if isinstance(a, torch.Tensor) else a for a in args)


class _Graph:
    """One graph AOTAutograd compiles (inference, forward or backward), called
    with AOTAutograd's boxed convention (a list of arguments it may clear)."""

    def __init__(self, gm, example_inputs, kind):
        self._boxed_call = True  # an instance attribute: wrappers copy __dict__
        self.gm = gm
        self.kind = kind
        self.name = f"{kind} graph {next(_graph_ids)}"
        self.dynamic = any(isinstance(a, torch.SymInt) for a in example_inputs) or any(
            isinstance(a, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in a.shape)
            for a in example_inputs)
        self.static = None
        self.by_signature = {}

    def __call__(self, args):
        key = None
        if self.dynamic:
            key = _signature(args)
            entry = self.by_signature.get(key)
        else:
            entry = self.static
        if entry is None:
            return self._first(args, key)
        if entry is not _EAGER:
            out = entry.run(args)
            if out is not None:
                args.clear()
                return out
            if not self.dynamic:
                # An input laid out otherwise than at capture (another storage
                # offset or size): from now on a program per layout.
                self.dynamic = True
                self.by_signature[entry.signature] = entry
                return self(args)
        return self._eager(args)

    def _eager(self, args):
        return list(self.gm(*args))

    def _remember(self, key, entry):
        if self.dynamic:
            self.by_signature[key] = entry
        else:
            self.static = entry

    def _first(self, args, key):
        devices = {a.device for a in args if _is_tpu(a)}
        if not any(isinstance(a, torch.Tensor) for a in args):
            # A graph without tensor inputs that makes tpu tensors (create_block_mask): the current device's.
            devices = {torch.device("tpu", torch.tpu.current_device())}
        if len(devices) != 1 or any(isinstance(a, torch.Tensor) and not _is_tpu(a) for a in args):
            self._remember(key, _EAGER)
            _warn(self.name, "its inputs are not tensors of one tpu device")
            return self._eager(args)
        (device,) = devices
        capture = _C._Capture(device.index)
        try:
            with torch.no_grad():
                outs = _Capturer(self.gm).run(*args)
        except BaseException:
            del capture  # queues what it captured
            raise
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        inputs = {}
        for i, a in enumerate(args):
            if _is_tpu(a) and _has_storage(a):
                inputs.setdefault(a.untyped_storage().data_ptr(), i)
        storages, storage_tensors, specs, template, new = {}, [], [], [], []
        replayable = True
        for o in outs:
            if not isinstance(o, torch.Tensor):
                template.append(("const", o))
            elif not _is_tpu(o):
                replayable = False
            elif not _has_storage(o):
                template.append(("empty", o.size(), o.stride(), o.dtype, o.device))
            else:
                ptr = o.untyped_storage().data_ptr()
                if ptr in inputs:
                    template.append(("alias", inputs[ptr], o.size(), o.stride(), o.storage_offset(), o.dtype))
                    continue
                if ptr not in storages:
                    storages[ptr] = len(storage_tensors)
                    storage_tensors.append(o)
                template.append(("new", len(specs)))
                new.append(o)
                specs.append((storages[ptr], list(o.size()), list(o.stride()), o.storage_offset(), o.dtype))
        program = capture.finish(list(args), storage_tensors, specs)
        if program is None or not replayable:
            why = capture.why or ("it returns tensors that are not on the tpu device" if not replayable else
                                  "it computes nothing on the device")
            self._remember(key, _EAGER)
            if program is None and capture.why:
                _warn(self.name, f"its capture met {why}")
        else:
            self._remember(key, _Program(program, template, _signature(args)))
            for r in _recorders:
                r.append((self.name, program))
            # This call returns what every later one will: the graph's views
            # of its intermediates become plain tensors sharing their storage
            # (as the program's results are), its views of inputs are rebuilt.
            with torch._C._DisableTorchDispatch():
                new = [o.detach() if o._is_view() else o for o in new]
            outs = _results(template, new, args)
        return outs


_warned_names = set()


def _warn(name, why):
    """Warns once per graph that it runs eagerly, and why."""
    if name not in _warned_names:
        _warned_names.add(name)
        debug.warn_at_user_line(f"torch.compile(backend='tpu'): the {name} runs in the current eager mode: {why}")


def _compiler(kind):
    def compile_graph(gm, example_inputs):
        return _Graph(gm, example_inputs, kind)

    return compile_graph


def _optimizers_capturable_on_tpu():
    """Dynamo makes a compiled optimizer step capturable (its step counts on
    the device, as graph inputs) for CUDA and XPU parameters only; without it
    the step counts stay CPU tensors that a device graph cannot take. tpu
    parameter groups whose state is not created yet get the same treatment."""
    from torch._dynamo.variables.optimizer import OptimizerVariable

    original = OptimizerVariable._set_capturable
    if getattr(original, "_torchtpu", False):
        return

    def _set_capturable(self, tx):
        for group in self.value.param_groups:
            params = group.get("params", [])
            if ("capturable" in group and params and all(p.device.type == "tpu" for p in params)
                    and all(p not in self.value.state for p in params)):
                group["capturable"] = True
        return original(self, tx)

    _set_capturable._torchtpu = True
    OptimizerVariable._set_capturable = _set_capturable


def backend(gm, example_inputs, **kwargs):
    """The Dynamo backend "tpu" (torch.compile(model, backend="tpu"))."""
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(fw_compiler=_compiler("forward"), bw_compiler=_compiler("backward"),
                        inference_compiler=_compiler("inference"), keep_inference_input_mutations=True,
                        **kwargs)(gm, example_inputs)


def _compile_inductor_request(gm, example_inputs):
    """torch.compile with the default backend (Inductor) on tpu tensors:
    Inductor generates code for CPUs and GPUs only, so this backend compiles
    the graph (torchtpu/__init__.py routes it here). Hugging Face's generate()
    compiles the model's forward this way for a static cache."""
    if "inductor" not in _warned_names:
        _warned_names.add("inductor")
        debug.warn_at_user_line("torch.compile: Inductor cannot generate code for the tpu device; the graph is "
                                "compiled with backend='tpu'")
    return backend(gm, example_inputs)


_optimizers_capturable_on_tpu()
