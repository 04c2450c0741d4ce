"""How the trainer spreads a model over ranks: FSDP2 (fully_shard on each
transformer block, then the model) and tensor parallel (the model's own
Hugging Face plan, base_model_tp_plan, through torch's parallelize_module:
column- and row-wise linear layers; the embedding sharded by vocabulary, the
output layer gathered, every other parameter a replicated DTensor)."""
import torch
from torch.distributed.device_mesh import init_device_mesh


def blocks(model):
    """The transformer blocks (the classes the model lists as not to be split)."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    return [m for m in model.modules() if type(m).__name__ in names]


def fully_shard_model(model, device_type, world, reshard_after_forward=True):
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh(device_type, (world,))
    for block in blocks(model):
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)


def tensor_parallel(model, device_type, world):
    """Shards `model` in place over `world` ranks, each of which then takes the
    same batch. Raises ValueError for a model without a tensor-parallel plan."""
    from torch.distributed.tensor import DTensor, Replicate, distribute_tensor
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInputOutput, RowwiseParallel,
                                                   parallelize_module)
    plan = getattr(model.config, "base_model_tp_plan", None)
    if not plan:
        raise ValueError(f"torchtpu.train: parallel=tp needs a model with a tensor-parallel plan "
                         f"(config.base_model_tp_plan); {type(model).__name__} has none (try model=llama-tiny)")
    if getattr(model.config, "tie_word_embeddings", False):
        raise ValueError("torchtpu.train: parallel=tp does not shard tied input and output embeddings; "
                         "set model.config.tie_word_embeddings=false")
    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    unknown = sorted({v for v in plan.values() if v not in styles})
    if unknown:
        raise ValueError(f"torchtpu.train: parallel=tp supports the plan styles colwise and rowwise, "
                         f"the model's plan has {unknown}")
    mesh = init_device_mesh(device_type, (world,))
    parallelize_module(model.base_model, mesh, {k: styles[v]() for k, v in plan.items()})
    names = {m: n for n, m in model.named_modules()}
    parallelize_module(model, mesh, {
        names[model.get_input_embeddings()]: RowwiseParallel(input_layouts=Replicate()),
        names[model.get_output_embeddings()]: ColwiseParallel(output_layouts=Replicate()),
    })
    for module in list(model.modules()):
        params = list(module.named_parameters(recurse=False))
        if params and not all(isinstance(p, DTensor) for _, p in params):
            for name, p in params:
                module.register_parameter(name, torch.nn.Parameter(distribute_tensor(p.data, mesh, [Replicate()])))
            parallelize_module(module, mesh, PrepareModuleInputOutput(
                input_layouts=Replicate(), desired_input_layouts=Replicate(),
                output_layouts=Replicate(), desired_output_layouts=Replicate(), use_local_output=True))
