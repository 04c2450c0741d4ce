"""The one registry of environment variables torchtpu reads.

Each setting is declared here with its type, default, meaning and accepted
values, and is read only through get(), which validates it: a bad value
raises ValueError naming the variable, the value and what is accepted. An
unset or empty variable means the default. The C++ core reads no environment
variable: Python reads each setting here and passes the value in.

It also finds the PJRT plugin (plugin_path) and knows what the package was
built against (build_info).

`python -m torchtpu.env` prints the installed version and the torch it was
built against, every setting with its value, default and meaning, says what
is wrong with any of them, with the running torch and with the plugin file,
and then tries `import torchtpu` in a child process. It needs neither the plugin
nor torchtpu's C++ extension (the package skips its initialization when run
that way), so it works when a setting or the plugin is broken.
"""
import contextlib
import importlib.util
import os
import re
from dataclasses import dataclass
from typing import Any, Callable

_INTEGER = re.compile(r"([+-]?)0*([0-9]+)")
_SIZE = re.compile(r"0*([0-9]+)\s*([KMGTP]?)(?:i?B)?", re.IGNORECASE)
_NUMBER = re.compile(r"0*([0-9]*)(?:\.[0-9]*)?")
_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_INT64_MAX = (1 << 63) - 1


class _Kind:
    """A parser of one kind of value: `accepted` says in words what it takes;
    parse() raises ValueError (the reason) for anything else."""

    def __init__(self, accepted: str, parse: Callable[[str], Any]):
        self.accepted = accepted
        self.parse = parse


def _in_range(digits, convert, lo, hi):
    """convert() of a checked text whose integer part is `digits` (no leading
    zeros), if in [lo, hi]."""
    if len(digits) > 30:  # far out of any range; no huge conversion
        raise ValueError("out of range")
    value = convert()
    if not lo <= value <= hi:
        raise ValueError("out of range")
    return value


def integer(lo: int, hi: int) -> _Kind:
    def parse(text):
        m = _INTEGER.fullmatch(text.strip())
        if not m:
            raise ValueError("not an integer")
        return _in_range(m.group(2), lambda: int(m.group(1) + m.group(2)), lo, hi)
    return _Kind(f"an integer from {lo} to {hi}", parse)


def boolean() -> _Kind:
    def parse(text):
        if text.strip() not in ("0", "1"):
            raise ValueError("not 0 or 1")
        return text.strip() == "1"
    return _Kind("0 (off) or 1 (on)", parse)


def choice(*values: str) -> _Kind:
    def parse(text):
        if text.strip() not in values:
            raise ValueError("not one of the choices")
        return text.strip()
    return _Kind("one of " + ", ".join(values), parse)


def size_in_bytes(lo: int, hi: int = _INT64_MAX) -> _Kind:
    def parse(text):
        m = _SIZE.fullmatch(text.strip())
        if not m:
            raise ValueError("not a size in bytes")
        return _in_range(m.group(1), lambda: int(m.group(1)) * _SUFFIXES[m.group(2).upper()], lo, hi)
    return _Kind(f"a size in bytes from {lo} to {hi}, with an optional K, M, G, T or P suffix "
                 "(powers of 1024), e.g. 2147483648, 512M or 2G", parse)


def seconds(lo: float, hi: float) -> _Kind:
    def parse(text):
        m = _NUMBER.fullmatch(text.strip())
        if not m or text.strip() in ("", "."):
            raise ValueError("not a number of seconds")
        return _in_range(m.group(1), lambda: float(m.group(0)), lo, hi)
    return _Kind(f"a number of seconds from {lo:g} to {hi:g}", parse)


def flags(*values: str) -> _Kind:
    def parse(text):
        chosen = [v.strip() for v in text.split(",") if v.strip()]
        if any(v not in values for v in chosen):
            raise ValueError("not a list of the choices")
        return frozenset(chosen)
    return _Kind("a comma-separated list of " + ", ".join(values) + " (empty: none)", parse)


def buckets() -> _Kind:
    def parse(text):
        t = text.strip()
        if t in ("pow2", "off"):
            return t
        try:
            sizes = sorted({int(x) for x in t.split(",")})
        except ValueError:
            raise ValueError("not pow2, off or a list of sizes") from None
        if not sizes or sizes[0] < 2:
            raise ValueError("sizes must be at least 2")
        return sizes
    return _Kind("pow2, off, or a comma-separated list of sizes (each at least 2)", parse)


def text() -> _Kind:
    return _Kind("any text", lambda t: t)


def path() -> _Kind:
    return _Kind("a path (empty for the default)", lambda text: text)


@dataclass(frozen=True)
class Setting:
    name: str
    kind: _Kind
    default: str
    meaning: str
    secret: bool = False  # report() says whether it is set, never its value

    def raw(self):
        """The variable's text, or None when unset."""
        return os.environ.get(self.name)

    def get(self):
        """The validated value (the default's when unset or empty)."""
        raw = self.raw()
        text = self.default if raw is None or raw == "" else raw
        try:
            return self.kind.parse(text)
        except ValueError as e:
            raise ValueError(f"{self.name}={raw!r} is not valid ({e}): expected {self.kind.accepted}") from None


SETTINGS = {
    s.name: s
    for s in [
        Setting("TORCHTPU_PJRT_PLUGIN", path(), "",
                "Path of the PJRT plugin .so to load; empty finds the installed xla-cpu-pjrt wheel."),
        Setting("TORCHTPU_CPU_DEVICES", integer(1, 256), "1", "Number of devices the XLA:CPU client exposes "
                "(when unset under torchrun: LOCAL_WORLD_SIZE, one per local rank)."),
        Setting("TORCHTPU_EAGER_MODE", choice("debug", "strict", "fused"), "strict", "Initial eager mode."),
        Setting("TORCHTPU_FUSED_MAX_OPS", integer(1, 1_000_000), "2000",
                "Fused Eager: ops in one graph before it is cut when no loop was found."),
        Setting("TORCHTPU_FUSED_REPLAY", boolean(), "1",
                "Fused Eager: 1 records each graph it cuts and, when the next ops are the recorded ones "
                "(the same ops over inputs from the same places), replays it without building it again; "
                "0 builds every graph."),
        Setting("TORCHTPU_OP_MEMO", boolean(), "1",
                "1 lets an op called again with identical arguments (the same layouts, aliasing and numbers; "
                "an optimizer's foreach ops also with new step sizes) reuse the graph its earlier call built "
                "instead of running its kernel again; 0 runs every kernel."),
        Setting("TORCHTPU_SHOW_CPP_STACKTRACES", boolean(), "0",
                "1 adds C++ frames to torchtpu errors (those of the sync point, and of the executor for "
                "errors of queued work)."),
        Setting("TORCHTPU_DEBUG", flags("recompiles", "syncs", "xla"), "",
                "What to report on stderr as it happens: recompiles (each compilation at a site that compiled "
                "before, with its cause and the user's line); syncs (each sync point: the op that asked for a "
                "device value and the user's line); xla (the plugin's own informational log lines "
                "at startup, kept off stderr otherwise)."),
        Setting("TORCHTPU_LOG_LEVEL", choice("debug", "info", "warning", "error"), "warning",
                "The least severe log line of the PJRT plugin (XLA) that reaches stderr, forwarded to it as "
                "TF_CPP_MIN_LOG_LEVEL (unless that is set): info and debug also keep its startup lines, and "
                "debug its verbose logging (TF_CPP_MAX_VLOG_LEVEL=1)."),
        Setting("TORCHTPU_CHECK_NAN", boolean(), "0",
                "1 checks every floating output of every op for NaN and Inf as the op returns, raising at the "
                "first with the op and the user's line (each check waits for the op; use with Debug Eager)."),
        Setting("TORCHTPU_RECOMPILE_LIMIT", integer(1, 1 << 20), "8",
                "Compilations for new shapes at one site before a warning names the varying size (once per site)."),
        Setting("TORCHTPU_BUCKETS", buckets(), "pow2",
                "Strict and Fused Eager and torch.compile: sizes that vary between programs of the same ops "
                "(Strict: one op at the same place in the op stream) are padded up to a bucket so one program "
                "serves the bucket: pow2 (powers of two from 16), a comma-separated list of sizes, or off."),
        Setting("TORCHTPU_TORCH_XLA", boolean(), "0",
                "1 makes `import torch_xla` and its common modules resolve to torchtpu's PyTorch/XLA shims "
                "(torchtpu.compat.install() at import), so scripts written for PyTorch/XLA run unchanged."),
        Setting("TORCHTPU_CPU_FALLBACK", choice("warn", "error"), "warn",
                "What an op with no tpu lowering does: warn (run it on the CPU, warn once per op) or error."),
        Setting("TORCHTPU_CACHE", boolean(), "1",
                "0 turns the disk tiers of the compilation cache off (the in-memory tier always runs)."),
        Setting("TORCHTPU_CACHE_DIR", path(), "",
                "Host-local compilation cache directory (tier 2); empty means $XDG_CACHE_HOME/torchtpu, "
                "else ~/.cache/torchtpu."),
        Setting("TORCHTPU_SHARED_CACHE_DIR", path(), "",
                "Compilation cache directory shared by many hosts (tier 3); empty leaves it off. It is used "
                "only with TORCHTPU_CACHE_KEY_FILE set."),
        Setting("TORCHTPU_CACHE_KEY_FILE", path(), "",
                "A file holding the secret key (16 bytes or more) that signs and verifies the shared "
                "cache tier's entries (HMAC-SHA256); an unsigned or wrongly signed entry is refused and "
                "recompiled. Without it the shared tier is off."),
        Setting("TORCHTPU_CACHE_MAX_BYTES", size_in_bytes(0), "2G",
                "Size cap of each disk cache tier; least recently used entries are evicted."),
        Setting("TORCHTPU_CACHE_LOCK_TIMEOUT", seconds(0, 7 * 24 * 3600), "600",
                "How long a process waits for another one compiling the same graph (the per-key lock of "
                "the disk cache) before it compiles without the lock, with one warning."),
        Setting("TORCHTPU_CACHE_MEMORY_ENTRIES", integer(1, 1 << 20), "4096",
                "Executables the in-memory cache tier keeps; the least recently used beyond that are "
                "dropped (each holds JIT code mappings, of which a process may have a bounded number)."),
        Setting("XDG_CACHE_HOME", path(), "", "The user's cache directory (standard); holds the default "
                "TORCHTPU_CACHE_DIR."),
        Setting("LOCAL_WORLD_SIZE", integer(0, 1 << 20), "0", "Ranks on this node (set by torchrun and "
                "torchtpu.distributed.launch); the default device count of the XLA:CPU client; 0: not a rank."),
        Setting("RANK", integer(0, 1 << 20), "0", "This process's rank (set by torchrun); torchtpu.data.DeviceLoader "
                "shards batches by it when torch.distributed is not initialized."),
        Setting("WORLD_SIZE", integer(1, 1 << 20), "1", "Number of ranks (set by torchrun); see RANK."),
        Setting("LOCAL_RANK", integer(0, 1 << 20), "0", "This process's rank on its host (set by torchrun and "
                "torchtpu.distributed.launch); torchtpu.compat's xla_device() picks tpu device LOCAL_RANK."),
        Setting("WANDB_API_KEY", text(), "", "Weights & Biases' key (standard); with it, or WANDB_MODE, "
                "torchtpu.train logs to W&B when wandb is installed (trainer.wandb=auto).", secret=True),
        Setting("WANDB_MODE", text(), "", "Weights & Biases' mode (standard: online, offline, disabled); see "
                "WANDB_API_KEY."),
        Setting("WANDB_PROJECT", text(), "torchtpu", "The W&B project torchtpu.train logs to."),
        Setting("MASTER_ADDR", text(), "127.0.0.1", "Address of the rendezvous store (torch.distributed's "
                "env:// init); torchtpu.distributed.launch uses it when set."),
        Setting("MASTER_PORT", integer(0, 65535), "0", "Port of the rendezvous store (torch.distributed's env:// "
                "init); torchtpu.distributed.launch picks a free one when 0 or unset."),
    ]
}


def cpu_devices() -> int:
    """Devices the XLA:CPU client exposes: TORCHTPU_CPU_DEVICES when set, else
    one per local rank under torchrun (every GPU is visible to every rank on
    CUDA too), else 1."""
    if SETTINGS["TORCHTPU_CPU_DEVICES"].raw() in (None, "") and get("LOCAL_WORLD_SIZE") > 0:
        return min(256, get("LOCAL_WORLD_SIZE"))
    return get("TORCHTPU_CPU_DEVICES")


@contextlib.contextmanager
def exported(**values):
    """Sets environment variables for the block (child processes started in
    it inherit them), then restores them."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def export(**values) -> None:
    """Sets environment variables in this process (a spawned rank's RANK)."""
    os.environ.update({k: str(v) for k, v in values.items()})


def plugin_log_levels() -> dict:
    """The environment the plugin reads its log thresholds from, as
    TORCHTPU_LOG_LEVEL asks (TORCHTPU_DEBUG=xla: at least info); a
    TF_CPP_MIN_LOG_LEVEL the user set wins."""
    level = get("TORCHTPU_LOG_LEVEL")
    if "xla" in get("TORCHTPU_DEBUG") and level in ("warning", "error"):
        level = "info"
    out = {}
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL", "") == "":  # XLA's own threshold
        out["TF_CPP_MIN_LOG_LEVEL"] = {"debug": 0, "info": 0, "warning": 1, "error": 2}[level]
    if level == "debug":
        out["TF_CPP_MAX_VLOG_LEVEL"] = 1
    return out


def xla_flags() -> str:
    """XLA's own flags (XLA_FLAGS), as the plugin reads them at its start."""
    return os.environ.get("XLA_FLAGS", "").strip()


def get(name: str):
    """The validated value of a registered setting (ValueError if it is bad)."""
    return SETTINGS[name].get()


def problems() -> list:
    """What is wrong with the settings: one line per bad value."""
    out = []
    for s in SETTINGS.values():
        try:
            s.get()
        except ValueError as e:
            out.append(str(e))
    return out


def validate() -> None:
    """Raises ValueError listing every bad setting."""
    bad = problems()
    if bad:
        raise ValueError("torchtpu: invalid setting" + ("s:\n  " if len(bad) > 1 else ": ") + "\n  ".join(bad))


def unknown() -> list:
    """TORCHTPU_* variables set in the environment that torchtpu does not read (typos)."""
    return sorted(k for k in os.environ if k.startswith("TORCHTPU_") and k not in SETTINGS)


def report() -> str:
    """Every setting: its value (or the problem with it), default, accepted values and meaning."""
    lines = []
    for s in SETTINGS.values():
        raw = s.raw()
        try:
            s.get()
            problem = ""
        except ValueError as e:
            problem = f"\n    ERROR: {e}"
        shown = "unset" if raw is None else ("set (hidden)" if s.secret else repr(raw))
        lines.append(f"{s.name}={shown}  (default {s.default!r}; {s.kind.accepted}){problem}\n    {s.meaning}")
    for name in unknown():
        lines.append(f"{name}={os.environ[name]!r}\n    WARNING: not a torchtpu setting (misspelled?); ignored")
    return "\n".join(lines)


PLUGIN_HINT = ("torchtpu needs a PJRT plugin: install the XLA:CPU one with "
               "`pip install xla-cpu-pjrt==0.0.1`, or set TORCHTPU_PJRT_PLUGIN=/path/to/plugin.so "
               "(XLA's GPU plugin or libtpu).")


def _checked_plugin(path: str, what: str) -> str:
    from . import _elf
    try:
        _elf.check(path, "GetPjrtApi")
    except _elf.NotLoadable as e:
        raise ImportError(f"{what} {e}. {PLUGIN_HINT}") from None
    return path


def plugin_path() -> str:
    """The PJRT plugin's path (TORCHTPU_PJRT_PLUGIN, else the xla-cpu-pjrt
    package's), checked before anything loads it (see _elf.py): ImportError
    saying what is wrong when there is none or it cannot be loaded."""
    path = get("TORCHTPU_PJRT_PLUGIN")
    if path:
        return _checked_plugin(path, f"The PJRT plugin TORCHTPU_PJRT_PLUGIN={path!r}")
    try:
        spec = importlib.util.find_spec("xla_plugins.xla_cpu_pjrt")
    except ModuleNotFoundError:
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No PJRT plugin found. " + PLUGIN_HINT)
    path = os.path.join(list(spec.submodule_search_locations)[0], "xla_cpu_pjrt.so")
    return _checked_plugin(path, f"The xla-cpu-pjrt package's plugin {path}")


def build_info():
    """(torchtpu's version, the torch version its _C was built against), or
    None for a checkout whose extension was never built."""
    try:
        from . import _build_info
    except ImportError:
        return None
    return _build_info.version, _build_info.torch_version


def torch_mismatch(running: str):
    """Why torchtpu cannot load under torch `running` (its extension was
    built against another), or None."""
    info = build_info()
    # The same release with another local label (+cpu, +cu128) has the same C++ API.
    if info is None or info[1].split("+")[0] == running.split("+")[0]:
        return None
    return (f"torchtpu {info[0]} was built against torch {info[1]}, but torch {running} is installed: "
            f"its C++ extension cannot load. Install torch=={info[1].split('+')[0]}, or rebuild torchtpu "
            f"against this torch (pip install --no-build-isolation .).")


def _import_check(timeout: float = 300):
    """Runs `import torchtpu` in a child process: (ok, what it said)."""
    import subprocess
    import sys
    code = ("import torch, torchtpu; print(f'platform {torchtpu.platform()}, '"
            "f'{torch.tpu.device_count()} device(s), plugin {torchtpu.plugin()}')")
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"did not finish within {timeout:g} s"
    if r.returncode == 0:
        return True, r.stdout.strip()
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    if r.returncode < 0:
        return False, f"killed by signal {-r.returncode}" + (f": {lines[-1]}" if lines else "")
    return False, lines[-1] if lines else f"exit status {r.returncode}"


def _versions() -> bool:
    """Prints the package's version and torch's; False on a mismatch."""
    try:
        from importlib.metadata import version
        installed = version("torchtpu")
    except Exception:  # run from a checkout without metadata
        installed = "not installed (running from a checkout)"
    info = build_info()
    built = f"built against torch {info[1]}" if info else "extension not built"
    import torch
    print(f"torchtpu {installed} ({built}); running torch {torch.__version__}")
    why = torch_mismatch(torch.__version__)
    if why:
        print(f"ERROR: {why}")
    return why is None


def main() -> int:
    ok = _versions()
    print(report())
    ok = not problems() and ok
    try:
        where = plugin_path()
        print(f"\nplugin: {where} (checked)")
    except (ImportError, ValueError) as e:
        print(f"\nplugin: ERROR: {e}")
        ok = False
    if ok:
        fine, said = _import_check()
        print(f"import torchtpu: {'ok, ' if fine else 'ERROR: '}{said}")
        ok = fine
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
