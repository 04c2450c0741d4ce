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
        Setting("TORCHTPU_EAGER_MODE", "strict", "Initial eager mode: debug or strict."),
        Setting("TORCHTPU_CPU_FALLBACK", "warn",
                "What an op with no tpu lowering does: warn (run it on the CPU, warn once per op) or error."),
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
