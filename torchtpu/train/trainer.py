"""The Trainer: a config (see conf/) in, a trained model, checkpoints, an
exported Hugging Face directory and metrics out. Every piece comes from a
method meant to be overridden (build_model, build_optimizer, build_scheduler,
build_data, compute_loss, on_step_end, on_log); examples/train_custom.py is one
subclass."""
import contextlib
import math
import os
import time

import torch
import torch.distributed as dist

from . import checkpoint, parallel
from .data import TokenData
from .monitor import Monitor


class Trainer:
    """Trains `cfg.model` on `cfg.data` with `cfg.optim` for cfg.trainer.steps
    optimizer steps on one device, or on every rank of a torchrun launch
    (cfg.parallel.strategy: none, ddp, fsdp or tp). `fit()` returns the loss of
    every step it ran (averaged over ranks)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.losses = []

    # ---- hooks -------------------------------------------------------------
    def build_model(self):
        """A Hugging Face causal LM, on the CPU, from the config's values or a
        local directory (never downloaded)."""
        from transformers import AutoConfig, AutoModelForCausalLM
        m = self.cfg.model
        if m.get("pretrained"):
            return AutoModelForCausalLM.from_pretrained(m.pretrained, local_files_only=True)
        from omegaconf import OmegaConf
        values = OmegaConf.to_container(m.config, resolve=True)
        config = AutoConfig.for_model(values.pop("model_type"), **values)
        return AutoModelForCausalLM.from_config(config)

    def build_optimizer(self, params):
        o = self.cfg.optim
        if o.name == "adamw":
            return torch.optim.AdamW(params, lr=o.lr, betas=tuple(o.betas), weight_decay=o.weight_decay)
        if o.name == "sgd":
            return torch.optim.SGD(params, lr=o.lr, momentum=o.momentum, weight_decay=o.weight_decay)
        raise ValueError(f"torchtpu.train: unknown optim.name {o.name!r} (adamw or sgd)")

    def build_scheduler(self, optimizer):
        """Linear warm-up, then cosine, linear or constant to min_lr_ratio."""
        o, total = self.cfg.optim, self.cfg.trainer.steps
        if o.schedule not in ("cosine", "linear", "constant"):
            raise ValueError(f"torchtpu.train: optim.schedule must be cosine, linear or constant, got {o.schedule!r}")

        def factor(step):
            if step < o.warmup_steps:
                return (step + 1) / o.warmup_steps
            if o.schedule == "constant":
                return 1.0
            t = min(1.0, (step - o.warmup_steps) / max(1, total - o.warmup_steps))
            shape = 0.5 * (1 + math.cos(math.pi * t)) if o.schedule == "cosine" else 1 - t
            return o.min_lr_ratio + (1 - o.min_lr_ratio) * shape
        return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    def build_data(self):
        return TokenData(self.cfg.data, self.cfg.seed, cache_dir=os.path.join(self.run_dir, ".datasets"))

    def compute_loss(self, model, batch):
        """The loss of one micro-batch: the model's causal-LM loss."""
        return model(**batch).loss

    def on_step_end(self, step, loss):
        """After each optimizer step; `loss` is a device tensor (reading it syncs)."""

    def on_log(self, row):
        """Before a metrics row is written; may add values to it."""

    # ---- setup -------------------------------------------------------------
    def _setup_distributed(self):
        t = self.cfg.trainer
        from .. import env
        self.world, self.rank, local = env.get("WORLD_SIZE"), env.get("RANK"), env.get("LOCAL_RANK")
        if t.device == "tpu":
            import torchtpu  # noqa: F401  (the device and the tpu_dist backend)
            self.device = torch.device("tpu", local)
            torch.tpu.set_device(local)
        elif t.device == "cpu":
            self.device = torch.device("cpu")
        else:
            raise ValueError(f"torchtpu.train: trainer.device must be tpu or cpu, got {t.device!r}")
        self.owns_group = False
        if self.world > 1 and not dist.is_initialized():
            if t.device == "tpu":
                dist.init_process_group(device_id=self.device)
            else:
                dist.init_process_group("gloo")
            self.owns_group = True
        self.strategy = self.cfg.parallel.strategy
        if self.strategy == "none" and self.world > 1:
            self.strategy = "ddp"
        if self.strategy not in ("none", "ddp", "fsdp", "tp"):
            raise ValueError(f"torchtpu.train: unknown parallel.strategy {self.strategy!r} (none, ddp, fsdp or tp)")
        # Data-parallel ranks split each batch; tensor-parallel ranks all take it whole.
        self.dp_rank, self.dp_world = (0, 1) if self.strategy == "tp" else (self.rank, self.world)
        for name, low in (("steps", 0), ("batch_size", 1), ("grad_accum", 1), ("log_every", 1),
                          ("checkpoint_every", 0)):
            if not isinstance(t[name], int) or t[name] < low:
                raise ValueError(f"torchtpu.train: trainer.{name} must be an integer of at least {low}, "
                                 f"got {t[name]!r}")
        b, a = t.batch_size, t.grad_accum
        if b % a or (b // a) % self.dp_world:
            raise ValueError(f"torchtpu.train: trainer.batch_size {b} must split into grad_accum {a} "
                             f"micro-batches of a multiple of {self.dp_world} ranks")

    def _run_dir(self):
        d = self.cfg.trainer.run_dir
        if d is None:
            try:
                from hydra.core.hydra_config import HydraConfig
                d = HydraConfig.get().runtime.output_dir
            except (ImportError, ValueError):
                d = os.path.join("outputs", time.strftime("%Y-%m-%d/%H-%M-%S"))
        if self.world > 1:  # every rank writes where rank 0 does
            box = [d]
            dist.broadcast_object_list(box, src=0)
            d = box[0]
        os.makedirs(d, exist_ok=True)
        return os.path.abspath(d)

    def _wrap(self, model):
        t = self.cfg.trainer
        if t.activation_checkpointing:
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        forward = model
        if self.strategy == "fsdp":
            parallel.fully_shard_model(model, self.device.type, self.world,
                                       self.cfg.parallel.get("reshard_after_forward", True))
        elif self.strategy == "tp":
            parallel.tensor_parallel(model, self.device.type, self.world)
        elif self.strategy == "ddp":
            from torch.nn.parallel import DistributedDataParallel
            forward = DistributedDataParallel(model)
        if t.compile:
            forward = torch.compile(forward, backend="tpu" if self.device.type == "tpu" else "aot_eager")
        return forward

    def setup(self):
        cfg, t = self.cfg, self.cfg.trainer
        self._setup_distributed()
        self.run_dir = self._run_dir()
        torch.manual_seed(cfg.seed)
        self.data = self.build_data()
        # Built on the CPU with the same seed on every rank, then moved: every
        # rank (and a CPU reference run) starts from the same weights.
        model = self.build_model()
        if self.data.vocab_size > model.get_input_embeddings().num_embeddings:
            raise ValueError(f"torchtpu.train: the tokenizer has {self.data.vocab_size} ids, the model's "
                             f"embedding {model.get_input_embeddings().num_embeddings}")
        self.model_class = type(model)
        self.model = model.to(self.device)
        self.forward_model = self._wrap(self.model)
        self.optimizer = self.build_optimizer(self.model.parameters())
        self.scheduler = self.build_scheduler(self.optimizer)
        self.start_step = 0
        resume = t.resume
        path = checkpoint.latest(self.run_dir) if resume is True or resume == "true" else (resume or None)
        if path:
            self.start_step = checkpoint.load(self, path)
        # Per-rank streams of random numbers (dropout) differ, and resume exactly.
        if not path:
            torch.manual_seed(cfg.seed + 1000 * self.rank)

    # ---- the loop ----------------------------------------------------------
    def _autocast(self):
        p = self.cfg.trainer.precision
        if p == "fp32":
            return contextlib.nullcontext()
        if p == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        raise ValueError(f"torchtpu.train: trainer.precision must be fp32 or bf16, got {p!r}")

    def train_step(self, step):
        """One optimizer step; returns (the step's loss as a device tensor, its tokens)."""
        t = self.cfg.trainer
        total, tokens = None, 0
        for micro in range(t.grad_accum):
            records = self.data.micro_batch(step, micro, t.grad_accum, t.batch_size, self.dp_rank, self.dp_world)
            batch = self.data.collate(records)
            tokens += int(batch["attention_mask"].sum())
            batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
            sync = (micro == t.grad_accum - 1 or self.strategy != "ddp")
            ctx = contextlib.nullcontext() if sync else self.forward_model.no_sync()
            with ctx:
                with self._autocast():
                    loss = self.compute_loss(self.forward_model, batch) / t.grad_accum
                loss.backward()
            total = loss.detach() if total is None else total + loss.detach()
        if t.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return total, tokens

    def _read(self, pending):
        """The pending steps' losses as floats, averaged over ranks (one sync)."""
        values = torch.stack([v.float() for v in pending])
        if self.world > 1:
            values = values.to(self.device)
            dist.all_reduce(values, op=dist.ReduceOp.SUM)
            values = values / self.world
        return values.cpu().tolist()

    def fit(self):
        """Sets up (unless done), trains to cfg.trainer.steps, checkpoints,
        exports, and returns the losses of the steps run."""
        if not hasattr(self, "model"):
            self.setup()
        t = self.cfg.trainer
        previous = None
        if self.device.type == "tpu":
            import torchtpu
            previous = torchtpu.get_eager_mode()
            torchtpu.set_eager_mode(t.mode)
        monitor = Monitor(self.cfg, self.run_dir, t.steps, self.start_step, enabled=self.rank == 0)
        try:
            self._loop(monitor)
            if t.export_hf:
                checkpoint.export_hf(self, os.path.join(self.run_dir, "hf"))
        finally:
            monitor.close()
            if previous is not None:
                torchtpu.set_eager_mode(previous)
            if self.owns_group:
                dist.destroy_process_group()
        return self.losses

    def _loop(self, monitor):
        t = self.cfg.trainer
        pending, tokens = [], 0
        window = time.perf_counter()
        start = window
        last_logged = self.start_step
        for step in range(self.start_step, t.steps):
            loss, n = self.train_step(step)
            pending.append(loss)
            tokens += n
            self.on_step_end(step + 1, loss)
            done = step + 1
            if done % t.log_every == 0 or done == t.steps:
                values = self._read(pending)
                now = time.perf_counter()
                for i, v in enumerate(values):
                    self.losses.append(v)
                steps = done - last_logged
                row = {"step": done, "loss": values[-1], "lr": self.scheduler.get_last_lr()[0],
                       "tokens_per_s": tokens * self.dp_world / (now - window),
                       "steps_per_s": steps / (now - window), "elapsed_s": now - start,
                       "losses": values}
                self.on_log(row)
                monitor.log(row)
                pending, tokens, window, last_logged = [], 0, now, done
            if t.checkpoint_every and done % t.checkpoint_every == 0 and done != t.steps:
                checkpoint.save(self, done)
        if t.steps > self.start_step or not checkpoint.latest(self.run_dir):
            checkpoint.save(self, t.steps)
