"""How torchtpu comes up without being imported by name.

- `import torch` imports torchtpu through PyTorch's device-backend autoload
  (the "torch.backends" entry point names load()). A package that cannot
  start there (no plugin, a bad setting, another torch) warns instead of
  failing `import torch`; `import torchtpu` then raises the error itself.
  TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns autoload off.
- torch.compile(backend="tpu") finds the backend through the
  "torch_dynamo_backends" entry point, and through the registration that
  `import torchtpu` makes (register_dynamo_backend), so it works however the
  package got onto the path (PYTHONPATH, a copied folder, a notebook).

This module imports nothing of torch's, and stays in sys.modules while the
package is imported again (its state says who is importing).
"""
import importlib
import importlib.abc
import importlib.util
import sys
import warnings

_loading = False
_REGISTRY = "torch._dynamo.backends.registry"


def resolving() -> bool:
    """Whether the package is being imported only to resolve the autoload
    entry point, while torch itself is still being imported: the package
    then defers its start to load()."""
    torch = sys.modules.get("torch")
    return bool(getattr(getattr(torch, "__spec__", None), "_initializing", False)) and not _loading


def load() -> None:
    """The autoload entry point: starts the package, or warns why it cannot."""
    global _loading
    package = sys.modules.get("torchtpu")
    if package is not None and not getattr(package, "_DEFERRED", False):
        return  # imported the usual way (or being imported: it finishes by itself)
    for name in [n for n in sys.modules if n == "torchtpu" or n.startswith("torchtpu.")]:
        if name != __name__:
            del sys.modules[name]
    _loading = True
    try:
        importlib.import_module("torchtpu")
    except Exception as e:  # noqa: BLE001 - any failure must leave torch usable
        warnings.warn(f"torchtpu is installed but could not start, so torch has no tpu device: {e}\n"
                      "(`import torchtpu` raises this error; TORCH_DEVICE_BACKEND_AUTOLOAD=0 stops "
                      "`import torch` from loading torchtpu)", RuntimeWarning, stacklevel=2)
    finally:
        _loading = False


def tpu(gm, example_inputs, **kwargs):
    """torch.compile's backend "tpu" (torchtpu.dynamo.backend, loaded on first use)."""
    from .dynamo import backend
    return backend(gm, example_inputs, **kwargs)


def _register(registry) -> None:
    if "tpu" not in registry._COMPILER_FNS:
        registry.register_backend(tpu, name="tpu")


class _AfterRegistryImport(importlib.abc.MetaPathFinder):
    """Registers the backend as soon as Dynamo's registry module is imported,
    so that `import torchtpu` does not import Dynamo (slow) itself."""

    def find_spec(self, name, path, target=None):
        if name != _REGISTRY:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_register(module):
            exec_module(module)
            _register(module)

        spec.loader.exec_module = exec_and_register
        return spec


def register_dynamo_backend() -> None:
    """Makes backend "tpu" known to Dynamo, now or when Dynamo loads."""
    if _REGISTRY in sys.modules:
        _register(sys.modules[_REGISTRY])
    elif not any(isinstance(f, _AfterRegistryImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterRegistryImport())
