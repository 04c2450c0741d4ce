"""python -m torchtpu.train [Hydra overrides]: see torchtpu/train/__init__.py."""
from . import main

if __name__ == "__main__":
    main()
