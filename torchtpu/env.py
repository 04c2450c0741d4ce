"""The one registry of environment variables torchtpu reads.

`python -m torchtpu.env` prints each with its default, meaning and current value.
"""
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    name: str
    default: str
    meaning: str

    def get(self) -> str:
        return os.environ.get(self.name, self.default)


SETTINGS = {
    s.name: s
    for s in [
        Setting("TORCHTPU_PJRT_PLUGIN", "",
                "Path of the PJRT plugin .so to load; empty finds the installed xla-cpu-pjrt wheel."),
        Setting("TORCHTPU_CPU_DEVICES", "1", "Number of devices the XLA:CPU client exposes."),
        Setting("TORCHTPU_EAGER_MODE", "strict", "Initial eager mode: debug, strict or fused."),
        Setting("TORCHTPU_FUSED_MAX_OPS", "2000",
                "Fused Eager: ops in one graph before it is cut when no loop was found."),
        Setting("TORCHTPU_SHOW_CPP_STACKTRACES", "0",
                "1 adds C++ frames to torchtpu errors (those of the sync point, and of the executor for "
                "errors of queued work)."),
        Setting("TORCHTPU_CPU_FALLBACK", "warn",
                "What an op with no tpu lowering does: warn (run it on the CPU, warn once per op) or error."),
        Setting("TORCHTPU_CACHE", "1",
                "0 turns the disk tiers of the compilation cache off (the in-memory tier always runs)."),
        Setting("TORCHTPU_CACHE_DIR", "",
                "Host-local compilation cache directory (tier 2); empty means $XDG_CACHE_HOME/torchtpu, "
                "else ~/.cache/torchtpu."),
        Setting("TORCHTPU_SHARED_CACHE_DIR", "",
                "Compilation cache directory shared by many hosts (tier 3); empty leaves it off."),
        Setting("TORCHTPU_CACHE_MAX_BYTES", "2G",
                "Size cap of each disk cache tier, in bytes (K, M, G, T suffixes allowed); least recently used "
                "entries are evicted."),
        Setting("XDG_CACHE_HOME", "", "The user's cache directory (standard); holds the default TORCHTPU_CACHE_DIR."),
    ]
}


def get(name: str) -> str:
    return SETTINGS[name].get()


def report() -> str:
    lines = []
    for s in SETTINGS.values():
        lines.append(f"{s.name}={s.get()!r}  (default {s.default!r})\n    {s.meaning}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
