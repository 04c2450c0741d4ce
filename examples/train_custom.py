"""A Trainer subclass: label smoothing in the loss, a separate learning rate
for the embeddings, and a value of its own in every metrics row. Everything
else (config, command line, checkpoints, export) is torchtpu.train's.

    python examples/train_custom.py trainer.steps=100 +smoothing=0.1
"""
import torch
import torch.nn.functional as F

import torchtpu.train
from torchtpu.train.trainer import Trainer


class SmoothedTrainer(Trainer):
    """Causal-LM loss with label smoothing (cfg.smoothing, default 0.1) and
    embeddings trained at a tenth of the learning rate."""

    def compute_loss(self, model, batch):
        labels = batch.pop("labels")
        logits = model(**batch).logits[:, :-1]
        target = labels[:, 1:]
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1),
                               ignore_index=-100, label_smoothing=self.cfg.get("smoothing", 0.1))

    def build_optimizer(self, params):
        emb = set(id(p) for p in self.model.get_input_embeddings().parameters())
        params = list(params)
        o = self.cfg.optim
        groups = [{"params": [p for p in params if id(p) in emb], "lr": o.lr / 10},
                  {"params": [p for p in params if id(p) not in emb]}]
        return torch.optim.AdamW(groups, lr=o.lr, betas=tuple(o.betas), weight_decay=o.weight_decay)

    def on_log(self, row):
        row["embedding_lr"] = self.optimizer.param_groups[0]["lr"]


if __name__ == "__main__":
    torchtpu.train.main(SmoothedTrainer)
