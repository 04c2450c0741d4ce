"""torchtpu.train: a small trainer on top of torchtpu (install the `train`
extra). From the command line, with Hydra overrides:

    python -m torchtpu.train model=gpt2-tiny data=text-tiny trainer.steps=200
    torchrun --nproc-per-node 2 -m torchtpu.train parallel=fsdp hydra.run.dir=runs/a

From Python: `Trainer(compose(["trainer.steps=20"])).fit()`; subclass Trainer
to replace the model, loss, optimizer, schedule or data (its hooks are listed
in trainer.py), and run a subclass's command line with `MyTrainer.main()`.
"""
import os

CONFIG_DIR = os.path.join(os.path.dirname(__file__), "conf")


def compose(overrides=(), config_dir=None, config_name="config"):
    """The config that `python -m torchtpu.train *overrides` would run with."""
    from hydra import compose as _compose, initialize_config_dir
    with initialize_config_dir(config_dir=config_dir or CONFIG_DIR, version_base=None):
        return _compose(config_name=config_name, overrides=list(overrides))


def main(trainer_class=None, config_dir=None, config_name="config"):
    """The command line: Hydra parses sys.argv's overrides, then
    trainer_class(cfg).fit() runs."""
    import hydra
    from .trainer import Trainer
    cls = trainer_class or Trainer

    def run(cfg):
        cls(cfg).fit()
    hydra.main(version_base=None, config_path=config_dir or CONFIG_DIR, config_name=config_name)(run)()


def __getattr__(name):
    if name == "Trainer":
        from .trainer import Trainer
        return Trainer
    raise AttributeError(name)
