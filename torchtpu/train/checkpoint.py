"""The trainer's checkpoints and its Hugging Face export.

A checkpoint is run_dir/checkpoints/step_NNNNNNNN/: the model and optimizer
(one torch.save file on one device or under DDP; torch.distributed.checkpoint
shards under FSDP2), and trainer.pt (step, scheduler, the data position is the
step) with each rank's RNG states in rng_rank<R>.pt. It is written under a
.tmp name and renamed when complete, so a run killed while writing leaves the
previous checkpoint as the newest (tensor parallel is saved as FSDP2 is). Tensors are saved as CPU tensors: a
checkpoint loads where torchtpu is not installed."""
import glob
import os
import random
import shutil

import torch
import torch.distributed as dist

# Strategies whose parameters are DTensors: torch.distributed.checkpoint shards.
SHARDED = ("fsdp", "tp")


def _is_dist():
    return dist.is_available() and dist.is_initialized()


def _barrier():
    if _is_dist():
        dist.barrier()


def _cpu(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cpu(v) for v in obj)
    return obj


def rng_state(device):
    state = {"python": random.getstate(), "cpu": torch.get_rng_state()}
    if device.type == "tpu":
        state["tpu"] = torch.tpu.get_rng_state()
    return state


def set_rng_state(state, device):
    random.setstate(state["python"])
    torch.set_rng_state(state["cpu"])
    if device.type == "tpu" and "tpu" in state:
        torch.tpu.set_rng_state(state["tpu"])


def latest(run_dir):
    """The newest complete checkpoint directory under run_dir, or None."""
    done = sorted(d for d in glob.glob(os.path.join(run_dir, "checkpoints", "step_*")) if not d.endswith(".tmp"))
    return done[-1] if done else None


def save(trainer, step):
    """Every rank calls it; returns the checkpoint's directory."""
    final = os.path.join(trainer.run_dir, "checkpoints", f"step_{step:08d}")
    tmp = final + ".tmp"
    if trainer.rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
    _barrier()
    if trainer.strategy in SHARDED:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict
        msd, osd = get_state_dict(trainer.model, trainer.optimizer)
        dcp.save({"model": msd, "optim": osd}, checkpoint_id=os.path.join(tmp, "shards"))
    elif trainer.rank == 0:
        torch.save({"model": _cpu(trainer.model.state_dict()), "optim": _cpu(trainer.optimizer.state_dict())},
                   os.path.join(tmp, "model_optim.pt"))
    torch.save(rng_state(trainer.device), os.path.join(tmp, f"rng_rank{trainer.rank}.pt"))
    if trainer.rank == 0:
        torch.save({"step": step, "scheduler": trainer.scheduler.state_dict(), "world_size": trainer.world},
                   os.path.join(tmp, "trainer.pt"))
    _barrier()
    if trainer.rank == 0:
        shutil.rmtree(final, ignore_errors=True)  # a run started over in the same directory
        os.rename(tmp, final)
    _barrier()
    return final


def load(trainer, path):
    """Restores model, optimizer, scheduler and RNG; returns the step to go on from."""
    meta = torch.load(os.path.join(path, "trainer.pt"), weights_only=False)
    if meta["world_size"] != trainer.world:
        raise ValueError(f"torchtpu.train: checkpoint {path} was written by {meta['world_size']} ranks, "
                         f"this run has {trainer.world}")
    if trainer.strategy in SHARDED:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
        msd, osd = get_state_dict(trainer.model, trainer.optimizer)
        state = {"model": msd, "optim": osd}
        dcp.load(state, checkpoint_id=os.path.join(path, "shards"))
        set_state_dict(trainer.model, trainer.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
    else:
        state = torch.load(os.path.join(path, "model_optim.pt"), map_location="cpu", weights_only=False)
        trainer.model.load_state_dict(state["model"])
        trainer.optimizer.load_state_dict(state["optim"])
    trainer.scheduler.load_state_dict(meta["scheduler"])
    set_rng_state(torch.load(os.path.join(path, f"rng_rank{trainer.rank}.pt"), weights_only=False), trainer.device)
    return meta["step"]


def export_hf(trainer, out_dir):
    """The model as a Hugging Face directory (config and safetensors, CPU
    tensors) that plain `transformers` loads with from_pretrained."""
    if trainer.strategy in SHARDED:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        sd = get_model_state_dict(trainer.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    else:
        sd = _cpu(trainer.model.state_dict()) if trainer.rank == 0 else None
    if trainer.rank == 0:
        # A fresh CPU model of the original class (not the FSDP or compiled
        # wrapper), so config.json names the class transformers knows.
        model = trainer.model_class(trainer.model.config)
        model.load_state_dict(sd)
        model.save_pretrained(out_dir, safe_serialization=True)
        tok = getattr(trainer.data.tok, "tok", None)
        if tok is not None:
            tok.save_pretrained(out_dir)
    _barrier()
    return out_dir
