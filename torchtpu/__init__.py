"""torchtpu: an XLA device as a native PyTorch device, type "tpu".

    import torch, torchtpu
    device = torchtpu.get_device()        # torch.device("tpu:0")
    model = MyModel().to(device)
"""
import atexit
import os
import sys

import torch


def _running_env_report() -> bool:
    """True while `python -m torchtpu.env` imports this package: that report
    must work when a setting or the plugin is broken, so nothing here runs."""
    argv = getattr(sys, "orig_argv", [])
    return sys.argv[:1] == ["-m"] and any(
        a == "-mtorchtpu.env" or (a == "-m" and b == "torchtpu.env") for a, b in zip(argv, argv[1:] + [""]))


def _deferred_to_autoload() -> bool:
    """True when `import torch` reached this package through its device
    autoload entry point (torchtpu._autoload): the package then starts from
    _autoload.load(), which turns a failure into a warning, so that a broken
    plugin or setting never breaks `import torch`."""
    from . import _autoload
    return _autoload.resolving()


_DEFERRED = not _running_env_report() and _deferred_to_autoload()
if not _running_env_report() and not _DEFERRED:
    from . import env

    env.validate()
    _PLUGIN = env.plugin_path()
    _mismatch = env.torch_mismatch(torch.__version__)
    if _mismatch:
        raise ImportError(_mismatch)

    torch.utils.rename_privateuse1_backend("tpu")

    from . import _C  # noqa: E402

    def _start_plugin():
        """Starts the plugin with XLA's informational startup lines (absl's
        "All log messages before absl::InitializeLog() ..." and its INFO
        lines, printed by every process) kept off stderr; other lines pass,
        and all of them when the start fails. TORCHTPU_DEBUG=xla or
        TORCHTPU_LOG_LEVEL=info keeps them, and so does XLA_FLAGS: XLA ends
        the process on a flag it does not know (no exception, no exit
        handler), and its line must reach the user. The plugin's log
        threshold comes from TORCHTPU_LOG_LEVEL."""
        env.export(**env.plugin_log_levels())
        if ("xla" in env.get("TORCHTPU_DEBUG") or env.get("TORCHTPU_LOG_LEVEL") in ("info", "debug")
                or env.xla_flags()):
            _C._init(_PLUGIN, env.cpu_devices())
            return
        import re
        import tempfile
        noise = re.compile(r"WARNING: All log messages before absl::InitializeLog\(\) is called|"
                           r"I\d{4} [\d:.]+ +\d+ \S+:\d+\] ")
        ok = False
        sys.stderr.flush()
        saved = os.dup(2)
        with tempfile.TemporaryFile() as captured:
            os.dup2(captured.fileno(), 2)
            try:
                _C._init(_PLUGIN, env.cpu_devices())
                ok = True
            finally:
                os.dup2(saved, 2)
                os.close(saved)
                captured.seek(0)
                lines = captured.read().decode(errors="replace").splitlines(keepends=True)
                shown = "".join(line for line in lines if not ok or not noise.match(line))
                if shown:
                    sys.stderr.write(shown)
                    sys.stderr.flush()

    try:
        _start_plugin()
    except RuntimeError as e:
        raise ImportError(f"cannot start the PJRT plugin {_PLUGIN}: {e}\n{env.PLUGIN_HINT}") from e
    from . import cache  # noqa: E402
    cache._configure_at_import(_PLUGIN)
    _C._set_fallback_error(env.get("TORCHTPU_CPU_FALLBACK") == "error")
    _C._set_fused_max_ops(env.get("TORCHTPU_FUSED_MAX_OPS"))
    _C._set_op_memo(env.get("TORCHTPU_OP_MEMO"))
    _C._set_fused_replay(env.get("TORCHTPU_FUSED_REPLAY"))
    _buckets = env.get("TORCHTPU_BUCKETS")
    _C._set_buckets([] if _buckets == "off" else [0] if _buckets == "pow2" else _buckets)
    if env.get("TORCHTPU_SHOW_CPP_STACKTRACES"):
        os.environ["TORCH_SHOW_CPP_STACKTRACES"] = "1"
        _C._set_cpp_stacktraces(True)

    def _library_paths():
        """Path prefixes of library code: error messages skip their frames to
        name the user's line."""
        here = os.path.dirname(os.path.abspath(__file__))
        ours = [os.path.join(here, f) for f in os.listdir(here) if f.endswith(".py")]
        return [os.path.dirname(os.path.abspath(torch.__file__)) + os.sep] + ours

    _C._install_site_hooks(_library_paths())
    atexit.register(_C._shutdown)
    _C._set_nan_check(env.get("TORCHTPU_CHECK_NAN"))
    _C._set_print_syncs("syncs" in env.get("TORCHTPU_DEBUG"))

    def _errors_at_exit():
        """No error is lost: device work that failed where nothing read its
        result is reported when the interpreter exits, and the exit status
        becomes 1 (as an uncaught exception makes it). Runs before the atexit
        handlers, which it then runs itself."""
        try:
            errors = _C._unobserved_errors()
        except Exception as e:  # noqa: BLE001 - reporting must not fail the exit
            errors = [f"{type(e).__name__}: {e}"]
        if not errors:
            return
        sys.stderr.write("torchtpu: device work failed and nothing read its result (the exit status is 1):\n" +
                         "\n".join(f"  {e}" for e in errors) + "\n")
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(1)

    import threading  # noqa: E402
    threading._register_atexit(_errors_at_exit)

    from . import debug, device_module  # noqa: E402
    _C._set_recompile_hook(debug._on_recompiles)
    atexit.register(debug._on_recompiles)
    from .modes import eager_mode, get_eager_mode, set_eager_mode  # noqa: E402
    from .precision import precision, set_precision  # noqa: E402
    from . import _printing  # noqa: E402,F401

    torch._register_device_module("tpu", device_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)

    set_eager_mode(env.get("TORCHTPU_EAGER_MODE"))
    torch.set_autocast_dtype("tpu", torch.bfloat16)

    from . import distributed  # noqa: E402
    distributed._register()
    from . import data  # noqa: E402,F401
    from . import flex_attention  # noqa: E402,F401

    def _route_inductor():
        """torch.compile's default backend on tpu tensors becomes "tpu"
        (torchtpu.dynamo); installed without importing torch._dynamo."""
        wrapper = torch._TorchCompileInductorWrapper
        original = wrapper.__call__

        def makes_tpu_tensors(model_):
            """A graph that takes no tpu tensor but makes some (create_block_mask's
            aranges on device="tpu"): its nodes' example values say so."""
            for n in getattr(getattr(model_, "graph", None), "nodes", ()):
                v = n.meta.get("example_value", n.meta.get("val"))
                if isinstance(v, torch.Tensor) and v.device.type == "tpu":
                    return True
                d = n.kwargs.get("device")
                if isinstance(d, (str, torch.device)) and torch.device(d).type == "tpu":
                    return True
            return False

        def __call__(self, model_, inputs_, *args, **kwargs):
            if (any(isinstance(t, torch.Tensor) and t.device.type == "tpu" for t in inputs_)
                    or makes_tpu_tensors(model_)):
                from . import dynamo
                return dynamo._compile_inductor_request(model_, inputs_)
            return original(self, model_, inputs_, *args, **kwargs)

        wrapper.__call__ = __call__

    _route_inductor()
    from . import _autoload  # noqa: E402
    _autoload.register_dynamo_backend()
    from .warmup import bucket_sizes, warmup  # noqa: E402
    if env.get("TORCHTPU_TORCH_XLA"):
        from . import compat  # noqa: E402
        compat.install()


def get_device(index: int = None) -> torch.device:
    """The tpu device (the current one when `index` is None)."""
    return torch.device("tpu", device_module.current_device() if index is None else index)


def platform() -> str:
    """What runs the tpu device: "cpu", "cuda" or "tpu"."""
    return _C._platform()


_PLATFORM_INFO = None


def platform_info() -> dict:
    """What runs the tpu device and where its numerics differ from the CPU's:
    `platform` ("cpu", "cuda", "tpu"), `plugin` (its path), `device_count`,
    `device_kind` (the plugin's name for device 0) and `denormals`:
    "preserved", or "flushed to zero" where the plugin computes with
    subnormal floats flushed (XLA:CPU does, with no option to keep them;
    copies keep them either way). Measured once, on device 0, by a program
    that multiplies a float32 subnormal by one."""
    global _PLATFORM_INFO
    if _PLATFORM_INFO is None:
        with torch.no_grad():
            tiny = torch.tensor([1e-40], dtype=torch.float32)
            kept = (tiny.to(get_device(0)) * torch.tensor(1.0, device=get_device(0))).cpu()
        _PLATFORM_INFO = dict(platform=_C._platform(), plugin=_PLUGIN, device_count=device_module.device_count(),
                              device_kind=device_module.get_device_name(0),
                              denormals="preserved" if bool(kept[0] == tiny[0]) else "flushed to zero")
    return dict(_PLATFORM_INFO)


def synchronize() -> None:
    """Waits until all queued device work has finished (raising its errors)."""
    _C._synchronize()


def plugin() -> str:
    """Path of the loaded PJRT plugin."""
    return _PLUGIN


def __getattr__(name):
    # torchtpu.dynamo and torchtpu.export import torch._dynamo / torch.export
    # (slow), torchtpu.pallas JAX: loaded on first use.
    if name in ("dynamo", "export", "pallas"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    if name == "jax_kernel":  # JAX loads only when a kernel is made
        from .pallas import jax_kernel
        return jax_kernel
    raise AttributeError(f"module 'torchtpu' has no attribute {name!r}")


__all__ = ["get_device", "platform", "platform_info", "synchronize", "set_eager_mode", "get_eager_mode", "eager_mode",
           "precision", "set_precision", "data", "warmup", "bucket_sizes",
           "debug", "env", "plugin", "dynamo", "export", "pallas", "jax_kernel"]
