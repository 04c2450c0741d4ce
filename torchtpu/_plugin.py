"""Finds the PJRT plugin library torchtpu loads."""
import importlib.util
import os

from . import env

_HINT = ("torchtpu needs a PJRT plugin: install the XLA:CPU one with "
         "`pip install xla-cpu-pjrt==0.0.1`, or set TORCHTPU_PJRT_PLUGIN=/path/to/plugin.so "
         "(XLA's GPU plugin or libtpu).")


def plugin_path() -> str:
    path = env.get("TORCHTPU_PJRT_PLUGIN")
    if path:
        if not os.path.isfile(path):
            raise ImportError(f"TORCHTPU_PJRT_PLUGIN={path!r} does not exist. " + _HINT)
        return path
    try:
        spec = importlib.util.find_spec("xla_plugins.xla_cpu_pjrt")
    except ModuleNotFoundError:
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No PJRT plugin found. " + _HINT)
    path = os.path.join(list(spec.submodule_search_locations)[0], "xla_cpu_pjrt.so")
    if not os.path.isfile(path):
        raise ImportError(f"The xla-cpu-pjrt package has no {path}. " + _HINT)
    return path
