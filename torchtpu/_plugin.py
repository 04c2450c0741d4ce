"""Finds the PJRT plugin library torchtpu loads, and checks it before it is
loaded (see _elf.py): a file that cannot work is an ImportError saying what
is wrong and how to install a plugin, never a crash in dlopen."""
import importlib.util
import os

from . import _elf, env

HINT = ("torchtpu needs a PJRT plugin: install the XLA:CPU one with "
        "`pip install xla-cpu-pjrt==0.0.1`, or set TORCHTPU_PJRT_PLUGIN=/path/to/plugin.so "
        "(XLA's GPU plugin or libtpu).")


def _checked(path: str, what: str) -> str:
    try:
        _elf.check(path, "GetPjrtApi")
    except _elf.NotLoadable as e:
        raise ImportError(f"{what} {e}. {HINT}") from None
    return path


def plugin_path() -> str:
    """The plugin's path, checked; ImportError when there is none or it cannot be loaded."""
    path = env.get("TORCHTPU_PJRT_PLUGIN")
    if path:
        return _checked(path, f"The PJRT plugin TORCHTPU_PJRT_PLUGIN={path!r}")
    try:
        spec = importlib.util.find_spec("xla_plugins.xla_cpu_pjrt")
    except ModuleNotFoundError:
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No PJRT plugin found. " + HINT)
    path = os.path.join(list(spec.submodule_search_locations)[0], "xla_cpu_pjrt.so")
    return _checked(path, f"The xla-cpu-pjrt package's plugin {path}")
