"""StableHLO out of PyTorch: torchtpu.export.stablehlo(exported_program)
turns a torch.export ExportedProgram into a StableHLO module (the text XLA
compiles) plus the weights it takes, for serving outside PyTorch. The module
is what torch.compile(backend="tpu") would run for the program's example
inputs: the eager lowerings, captured into one graph."""
import dataclasses

import torch

from . import _C

__all__ = ["StableHLOExport", "stablehlo"]


@dataclasses.dataclass
class StableHLOExport:
    """A StableHLO module and what its @main takes.

    `text`: the module. `arguments`: one name per @main parameter, in order:
    a weight's name (its value in `weights`), or "input:<name>" for the
    program's user inputs (`input_names`, in the order the ExportedProgram
    takes them), or "const:<k>" for values captured with the program (also in
    `weights`). @main returns one flat array per output, then flat arrays it
    computes besides; `output_views` holds (size, stride, offset) for each
    output, the view of its flat array."""

    text: str
    arguments: list
    weights: dict
    input_names: list
    output_views: list

    def run(self, *inputs):
        """Compiles the text with the PJRT plugin and runs it on CPU tensors
        (the user inputs, in order); returns the results as CPU tensors."""
        args = []
        for name in self.arguments:
            if name.startswith("input:"):
                args.append(inputs[self.input_names.index(name[len("input:"):])])
            else:
                args.append(self.weights[name])
        flat = _C._run_stablehlo(self.text, [a.cpu() for a in args], 0)
        return [f.as_strided(size, stride, offset) for f, (size, stride, offset) in zip(flat, self.output_views)]


def stablehlo(exported_program, args=None, kwargs=None) -> StableHLOExport:
    """The StableHLO module of an ExportedProgram, run for `args` (default:
    the program's example inputs)."""
    from torch.export.graph_signature import InputKind

    ep = exported_program
    if args is None:
        args, kwargs = ep.example_inputs
    flat_user = torch.utils._pytree.tree_leaves((args, kwargs or {}))
    state = dict(ep.state_dict)
    state.update(ep.constants)
    flat, names, user_names = [], [], []
    users = iter(flat_user)
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            value = next(users)
            user_names.append(spec.arg.name)
            names.append("input:" + spec.arg.name)
        else:
            value = state[spec.target]
            names.append(spec.target)
        flat.append(value.to("tpu") if isinstance(value, torch.Tensor) else value)
    gm = ep.graph_module
    capture = _C._Capture(torch.device("tpu").index or 0)
    with torch.no_grad():
        outs = gm(*flat)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    storages, specs = [], []
    for o in outs:
        if not (isinstance(o, torch.Tensor) and o.device.type == "tpu"):
            raise TypeError(f"torchtpu.export.stablehlo: every output must be a tpu tensor, got {type(o).__name__}")
        storages.append(o)
        specs.append((len(specs), list(o.size()), list(o.stride()), o.storage_offset(), o.dtype))
    program = capture.finish(flat, storages, specs)
    if program is None:
        raise RuntimeError(f"torchtpu.export.stablehlo: the program could not be captured: {capture.why}")
    arguments, weights = [], {}
    for k, (kind, index, value) in enumerate(program.arguments()):
        if kind == "input":
            arguments.append(names[index])
            if not names[index].startswith("input:"):
                weights[names[index]] = state[names[index]].detach().cpu()
        else:
            name = f"const:{k}"
            arguments.append(name)
            weights[name] = value.cpu()
    views = [(tuple(o.size()), tuple(o.stride()), o.storage_offset()) for o in outs]
    return StableHLOExport(program.stablehlo(), arguments, weights, user_names, views)
