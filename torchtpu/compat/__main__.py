"""python -m torchtpu.compat SCRIPT [ARGS...]: runs a PyTorch/XLA script on
torchtpu, with `import torch_xla` resolving to torchtpu's shims (in the
processes it launches too: TORCHTPU_TORCH_XLA=1 is exported)."""
import runpy
import sys

from .. import env
from . import install


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m torchtpu.compat SCRIPT [ARGS...]")
    env.export(TORCHTPU_TORCH_XLA=1)
    install()
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
