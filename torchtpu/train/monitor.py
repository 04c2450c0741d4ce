"""What a person watches while the trainer runs (rank 0 only): a progress bar
with the loss, tokens/s and the time left (lines when not on a terminal), a
JSON-lines metrics file, TensorBoard event files, W&B when installed, and a
loss-curve PNG at the end."""
import json
import math
import os
import sys
import time


class Monitor:
    """Receives a row per logged step (`log`) and closes everything at the
    end (`close`). Every sink is optional; a rank other than 0 writes nothing."""

    def __init__(self, cfg, run_dir, total_steps, start_step, enabled):
        self.enabled = enabled
        self.run_dir = run_dir
        self.total = total_steps
        self.rows = []
        self.tb = self.wandb = self.bar = None
        if not enabled:
            return
        t = cfg.trainer
        self.metrics = open(os.path.join(run_dir, "metrics.jsonl"), "a", encoding="utf-8")
        if t.tensorboard:
            from torch.utils.tensorboard import SummaryWriter
            self.tb = SummaryWriter(os.path.join(run_dir, "tensorboard"))
        # auto: when wandb is installed and set up (WANDB_API_KEY or WANDB_MODE,
        # e.g. offline), so that a run never stops at a login prompt.
        from .. import env
        want = t.wandb in (True, "true") or (t.wandb == "auto" and (env.get("WANDB_API_KEY") or env.get("WANDB_MODE")))
        if want:
            try:
                import wandb
            except ImportError:
                if t.wandb != "auto":
                    raise
            else:
                from omegaconf import OmegaConf
                self.wandb = wandb.init(project=env.get("WANDB_PROJECT"), dir=run_dir,
                                        config=OmegaConf.to_container(cfg, resolve=True))
        progress = t.progress
        if progress == "auto":
            progress = "bar" if sys.stderr.isatty() else "lines"
        if progress == "bar":
            from tqdm import tqdm
            self.bar = tqdm(total=total_steps, initial=start_step, unit="step", dynamic_ncols=True)
        self.plot = t.plot

    def log(self, row):
        """row: step, loss, lr, tokens_per_s, elapsed_s (and whatever a hook adds)."""
        if not self.enabled:
            return
        self.rows.append(row)
        self.metrics.write(json.dumps(row) + "\n")
        self.metrics.flush()
        if self.tb is not None:
            for k, v in row.items():
                if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool):
                    self.tb.add_scalar(f"train/{k}", v, row["step"])
        if self.wandb is not None:
            self.wandb.log({k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float))},
                           step=row["step"])
        text = f"loss {row['loss']:.4f}  {row['tokens_per_s']:.0f} tok/s"
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(row["step"] - self.bar.n)
        else:
            rate = row["steps_per_s"]
            left = (self.total - row["step"]) / rate if rate > 0 else math.inf
            print(f"step {row['step']:5d}/{self.total}  {text}  lr {row['lr']:.2e}  eta {_eta(left)}", flush=True)

    def close(self):
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.close()
        self.metrics.close()
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()
        if self.plot and self.rows:
            plot_losses(os.path.join(self.run_dir, "metrics.jsonl"), os.path.join(self.run_dir, "loss.png"))


def _eta(seconds):
    if not math.isfinite(seconds):
        return "?"
    return time.strftime("%H:%M:%S", time.gmtime(seconds))


def read_metrics(path):
    """The rows of a metrics.jsonl; a step logged again (after a resume) keeps its newest row."""
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                rows[row["step"]] = row
    return [rows[s] for s in sorted(rows)]


def plot_losses(metrics_path, png_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = read_metrics(metrics_path)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.plot([r["step"] for r in rows], [r["loss"] for r in rows])
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title("training loss")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(png_path)
    plt.close(fig)
