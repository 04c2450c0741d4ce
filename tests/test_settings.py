"""Settings and plugin loading. Every environment variable torchtpu reads is
declared in the registry (torchtpu/env.py) and validated when read: a bad
value is a ValueError naming the variable, the value and what is accepted. A
plugin file that cannot work (missing, a directory, empty, truncated, not
ELF, without GetPjrtApi) is an ImportError saying what is wrong and how to
install one, never a crash. `python -m torchtpu.env` reports both, even when
they are broken."""
import os
import re
import subprocess
import sys

import pytest
import torch

import torchtpu
from torchtpu import _elf, env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL_PLUGIN = env.plugin_path()
HINT = "pip install xla-cpu-pjrt==0.0.1"
# A small shared library that defines PyInit__C and not GetPjrtApi.
SMALL_LIB = torch._C.__file__


def run(args, timeout=120, **overrides):
    """Runs Python with environment overrides (None removes a variable)."""
    full = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for k, v in overrides.items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    return subprocess.run([sys.executable] + args, capture_output=True, text=True, env=full, cwd=ROOT,
                          timeout=timeout)


# ------------------------------------------------------------------ registry

def _sources(top, suffixes):
    for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
        for f in files:
            if f.endswith(suffixes):
                yield os.path.join(dirpath, f)


def test_every_environment_read_goes_through_the_registry():
    for path in _sources("csrc", (".cpp", ".h")):  # the C++ core is given its settings
        with open(path) as f:
            assert not re.search(r"getenv\s*\(|\benviron\b", f.read()), path
    for path in _sources("torchtpu", (".py",)):
        if path.endswith(os.path.join("torchtpu", "env.py")):
            continue
        with open(path) as f:
            for line in f:
                if re.search(r"\bgetenv\b|\benviron\b", line):  # only writes, for torch's own setting
                    assert re.match(r'\s*os\.environ\["TORCH_[A-Z_]+"\] = ', line), (path, line)
    named = set()
    for path in list(_sources("torchtpu", (".py",))) + list(_sources("csrc", (".cpp", ".h"))):
        with open(path) as f:
            named |= set(re.findall(r"\bTORCHTPU_[A-Z0-9_]*[A-Z0-9]\b", f.read()))
    assert named - set(env.SETTINGS) == set()
    for s in env.SETTINGS.values():
        assert s.meaning and s.kind.accepted
        assert s.kind.parse(s.default) is not None  # the default is valid


@pytest.mark.parametrize("name,value,why", [
    ("TORCHTPU_CPU_DEVICES", "abc", "not an integer"),
    ("TORCHTPU_CPU_DEVICES", "99999999999999999999", "out of range"),
    ("TORCHTPU_CPU_DEVICES", "9" * 5000, "out of range"),
    ("TORCHTPU_CPU_DEVICES", "0", "out of range"),
    ("TORCHTPU_CPU_DEVICES", "-1", "out of range"),
    ("TORCHTPU_CPU_DEVICES", "100000", "out of range"),
    ("TORCHTPU_CPU_DEVICES", "1.5", "not an integer"),
    ("TORCHTPU_CPU_DEVICES", "\u0663", "not an integer"),  # a digit int() would take
    ("TORCHTPU_CPU_DEVICES", "1_0", "not an integer"),
    ("TORCHTPU_FUSED_MAX_OPS", "0", "out of range"),
    ("TORCHTPU_FUSED_MAX_OPS", "lots", "not an integer"),
    ("TORCHTPU_CPU_FALLBACK", "abc", "not one of"),
    ("TORCHTPU_EAGER_MODE", "foo", "not one of"),
    ("TORCHTPU_EAGER_MODE", "Debug", "not one of"),
    ("TORCHTPU_CACHE_MAX_BYTES", "12Q", "not a size"),
    ("TORCHTPU_CACHE_MAX_BYTES", "-1", "not a size"),
    ("TORCHTPU_CACHE_MAX_BYTES", "99999999999999999999T", "out of range"),
    ("TORCHTPU_CACHE", "yes", "not 0 or 1"),
    ("TORCHTPU_CACHE", "2", "not 0 or 1"),
    ("TORCHTPU_SHOW_CPP_STACKTRACES", "true", "not 0 or 1"),
    ("TORCHTPU_CACHE_LOCK_TIMEOUT", "-1", "not a number"),
    ("TORCHTPU_CACHE_LOCK_TIMEOUT", "inf", "not a number"),
    ("TORCHTPU_CACHE_LOCK_TIMEOUT", "nan", "not a number"),
    ("TORCHTPU_CACHE_LOCK_TIMEOUT", "1e9", "not a number"),
    ("TORCHTPU_CACHE_LOCK_TIMEOUT", "999999999", "out of range"),
])
def test_bad_value_names_variable_value_and_accepted(monkeypatch, name, value, why):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError) as e:
        env.get(name)
    msg = str(e.value)
    assert msg.startswith(f"{name}={value!r} is not valid ({why}")
    assert env.SETTINGS[name].kind.accepted in msg
    assert any(name in p for p in env.problems())
    with pytest.raises(ValueError, match=name):
        env.validate()


@pytest.mark.parametrize("name,value,expect", [
    ("TORCHTPU_CPU_DEVICES", "256", 256),
    ("TORCHTPU_CPU_DEVICES", " 3 ", 3),
    ("TORCHTPU_CPU_DEVICES", "", 1),  # empty means the default
    ("TORCHTPU_CACHE_MAX_BYTES", "512M", 512 << 20),
    ("TORCHTPU_CACHE_MAX_BYTES", "2GiB", 2 << 30),
    ("TORCHTPU_CACHE_MAX_BYTES", "1000", 1000),
    ("TORCHTPU_CACHE_LOCK_TIMEOUT", "0.25", 0.25),
    ("TORCHTPU_CACHE_LOCK_TIMEOUT", "0", 0.0),
    ("TORCHTPU_CACHE", "0", False),
    ("TORCHTPU_EAGER_MODE", "fused", "fused"),
    ("TORCHTPU_CACHE_DIR", " /a dir/ ", " /a dir/ "),  # paths are taken as they are
])
def test_good_values(monkeypatch, name, value, expect):
    monkeypatch.setenv(name, value)
    assert env.get(name) == expect


def test_unset_values_are_the_defaults(monkeypatch):
    for name in env.SETTINGS:
        monkeypatch.delenv(name, raising=False)
    assert env.get("TORCHTPU_CPU_DEVICES") == 1
    assert env.get("TORCHTPU_CACHE_LOCK_TIMEOUT") == 600.0
    assert env.get("TORCHTPU_CACHE_MAX_BYTES") == 2 << 30
    assert env.get("TORCHTPU_EAGER_MODE") == "strict"
    assert env.problems() == []


@pytest.mark.parametrize("name,value", [("TORCHTPU_CPU_DEVICES", "100000"), ("TORCHTPU_CPU_DEVICES", "-1"),
                                        ("TORCHTPU_CPU_FALLBACK", "abc"), ("TORCHTPU_EAGER_MODE", "foo"),
                                        ("TORCHTPU_CACHE_MAX_BYTES", "12Q")])
def test_import_refuses_a_bad_setting(name, value):
    r = run(["-c", "import torchtpu"], **{name: value})
    assert r.returncode == 1, r.stderr  # an exception, not a crash or a hang
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ValueError:") and f"{name}={value!r}" in last, r.stderr


def test_device_count_setting_reaches_the_client():
    r = run(["-c", "import torch, torchtpu; print(torch.tpu.device_count())"], TORCHTPU_CPU_DEVICES="3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["3"]


def test_env_reports_settings_and_import():
    r = run(["-m", "torchtpu.env"], TORCHTPU_EAGER_MODE="fused", TORCHTPU_EAGER_MOD="debug")
    assert r.returncode == 0, r.stdout + r.stderr
    for name in env.SETTINGS:
        assert name in r.stdout
    assert "TORCHTPU_EAGER_MODE='fused'" in r.stdout
    assert "TORCHTPU_EAGER_MOD='debug'\n    WARNING: not a torchtpu setting" in r.stdout
    assert "ERROR" not in r.stdout
    assert f"plugin: {REAL_PLUGIN} (checked)" in r.stdout
    assert "import torchtpu: ok, platform cpu, 1 device(s)" in r.stdout


def test_env_runs_when_settings_and_plugin_are_broken(tmp_path):
    bad = tmp_path / "plugin.so"
    bad.write_bytes(b"")
    r = run(["-m", "torchtpu.env"], TORCHTPU_CPU_DEVICES="100000", TORCHTPU_CPU_FALLBACK="abc",
            TORCHTPU_PJRT_PLUGIN=str(bad))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert "ERROR: TORCHTPU_CPU_DEVICES='100000' is not valid (out of range)" in r.stdout
    assert "ERROR: TORCHTPU_CPU_FALLBACK='abc' is not valid" in r.stdout
    assert f"plugin: ERROR: The PJRT plugin TORCHTPU_PJRT_PLUGIN='{bad}' is empty" in r.stdout
    assert HINT in r.stdout
    assert "import torchtpu:" not in r.stdout  # not attempted with known problems


# ------------------------------------------------------------ plugin checks

def _copy(src, dst, limit=None, patch=None):
    with open(src, "rb") as f, open(dst, "wb") as g:
        left = os.path.getsize(src) if limit is None else limit
        while left > 0:
            chunk = f.read(min(left, 1 << 24))
            g.write(chunk)
            left -= len(chunk)
    if patch:
        with open(dst, "r+b") as g:
            for offset, data in patch.items():
                g.seek(offset)
                g.write(data)
    return str(dst)


def _broken_plugin(kind, tmp_path):
    """A plugin path that cannot work, and the words the error must contain."""
    if kind == "missing":
        return str(tmp_path / "nonexistent.so"), "does not exist"
    if kind == "directory":
        return str(tmp_path), "is a directory"
    if kind == "empty":
        (tmp_path / "empty.so").write_bytes(b"")
        return str(tmp_path / "empty.so"), "is empty"
    if kind == "truncated-half":
        return _copy(REAL_PLUGIN, tmp_path / "half.so", os.path.getsize(REAL_PLUGIN) // 2), "is truncated"
    if kind == "truncated-header":
        return _copy(REAL_PLUGIN, tmp_path / "head.so", 40), "is truncated"
    if kind == "truncated-tail":  # only the section headers at the end are missing
        return _copy(SMALL_LIB, tmp_path / "tail.so", os.path.getsize(SMALL_LIB) - 100), "is truncated"
    if kind == "not-elf":
        (tmp_path / "text.so").write_text("this is not a library\n")
        return str(tmp_path / "text.so"), "is not a shared library (not an ELF file"
    if kind == "no-symbol":
        return _copy(SMALL_LIB, tmp_path / "nosym.so"), "does not export the function GetPjrtApi"
    if kind == "other-machine":
        other = b"\xb7\x00" if os.uname().machine == "x86_64" else b"\x3e\x00"  # aarch64, else x86_64
        return _copy(SMALL_LIB, tmp_path / "arch.so", patch={18: other}), "is built for"
    if kind == "32-bit":
        return _copy(SMALL_LIB, tmp_path / "lib32.so", patch={4: b"\x01"}), "is a 32-bit library"
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo.so")
        return str(tmp_path / "fifo.so"), "is not a regular file"
    raise AssertionError(kind)


KINDS = ["missing", "directory", "empty", "truncated-half", "truncated-header", "truncated-tail", "not-elf",
         "no-symbol", "other-machine", "32-bit", "fifo"]


@pytest.mark.parametrize("kind", KINDS)
def test_plugin_that_cannot_work_is_an_import_error(monkeypatch, tmp_path, kind):
    path, words = _broken_plugin(kind, tmp_path)
    monkeypatch.setenv("TORCHTPU_PJRT_PLUGIN", path)
    with pytest.raises(ImportError) as e:
        env.plugin_path()
    msg = str(e.value)
    assert f"TORCHTPU_PJRT_PLUGIN={path!r} {words}" in msg and HINT in msg, msg


@pytest.mark.parametrize("kind", ["truncated-half", "no-symbol", "fifo", "directory"])
def test_import_with_a_broken_plugin_raises_import_error(tmp_path, kind):
    # A truncated copy used to kill the process with SIGBUS inside dlopen.
    path, words = _broken_plugin(kind, tmp_path)
    r = run(["-c", "import torchtpu"], TORCHTPU_PJRT_PLUGIN=path)
    assert r.returncode == 1, (r.returncode, r.stderr)
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError:") and words in last and HINT in last, r.stderr


def test_elf_check_accepts_real_libraries_and_reads_the_dynamic_table(tmp_path):
    _elf.check(REAL_PLUGIN, "GetPjrtApi")
    init = "PyInit__C"
    _elf.check(SMALL_LIB, init)
    with pytest.raises(_elf.NotLoadable, match="does not export the function initModule"):
        _elf.check(SMALL_LIB, "initModule")  # imported by the library, not defined there
    # Without section headers (as after `sstrip`) the loader's dynamic table is read.
    bits64 = sys.maxsize > 2**32
    shoff, shnum = (0x28, 0x3C) if bits64 else (0x20, 0x30)
    no_sections = _copy(SMALL_LIB, tmp_path / "nosect.so",
                        patch={shoff: bytes(8 if bits64 else 4), shnum: bytes(4)})
    _elf.check(no_sections, init)
    with pytest.raises(_elf.NotLoadable, match="does not export the function GetPjrtApi"):
        _elf.check(no_sections, "GetPjrtApi")
    # The check passed on a file that loads.
    import ctypes
    assert hasattr(ctypes.CDLL(no_sections), init)


def test_plugin_setting_is_used(tmp_path):
    link = tmp_path / "plugin.so"  # a link to the real plugin is a fine setting
    os.symlink(REAL_PLUGIN, link)
    r = run(["-c", "import torchtpu; print(torchtpu.plugin())"], TORCHTPU_PJRT_PLUGIN=str(link))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(link)]


def test_suite_keeps_out_of_the_real_cache():
    conftest = sys.modules["conftest"]
    real = os.path.realpath(conftest.REAL_CACHE_DIR)
    for where in (torchtpu.cache.config()["local_root"], torchtpu.cache.default_dir()):
        assert not os.path.realpath(where).startswith(real), where
    assert torchtpu.cache.config()["local_enabled"]



def test_import_keeps_xla_startup_logs_off_stderr():
    """XLA's absl preamble and INFO lines (printed by every process and rank)
    stay off stderr; TORCHTPU_DEBUG=xla shows them; the user's own stderr
    output is untouched."""
    code = ("import sys, torch, torchtpu; sys.stderr.write('mine\\n'); "
            "print((torch.ones(2, device='tpu') * 3).cpu().tolist())")
    # (JAX, imported by other tests, sets TF_CPP_MIN_LOG_LEVEL=1, which hides XLA's INFO lines itself)
    quiet = run(["-c", code], TF_CPP_MIN_LOG_LEVEL=None)
    assert quiet.returncode == 0, quiet.stderr
    assert "InitializeLog" not in quiet.stderr and "cpu_device_count" not in quiet.stderr, quiet.stderr
    assert "mine" in quiet.stderr and "[3.0, 3.0]" in quiet.stdout
    loud = run(["-c", code], TORCHTPU_DEBUG="xla", TF_CPP_MIN_LOG_LEVEL=None)
    assert loud.returncode == 0 and "cpu_device_count" in loud.stderr, loud.stderr


def test_an_xla_flag_the_plugin_does_not_know_is_reported():
    """XLA ends the process at its start on an unknown XLA_FLAGS entry
    (_exit, no exception): its line reaches stderr instead of being held
    back with the startup lines. A known flag imports quietly and computes."""
    code = "import torch, torchtpu; print((torch.ones(2, device='tpu') * 3).cpu().tolist())"
    bad = run(["-c", code], XLA_FLAGS="--xla_no_such_flag_anywhere=1", TF_CPP_MIN_LOG_LEVEL=None)
    assert bad.returncode != 0 and "--xla_no_such_flag_anywhere" in bad.stderr, bad.stderr
    good = run(["-c", code], XLA_FLAGS="--xla_cpu_enable_fast_math=false", TF_CPP_MIN_LOG_LEVEL=None)
    assert good.returncode == 0 and "[3.0, 3.0]" in good.stdout, good.stderr
    assert "InitializeLog" not in good.stderr and "cpu_device_count" not in good.stderr, good.stderr


def test_log_level_is_forwarded_to_the_plugin():
    """TORCHTPU_LOG_LEVEL sets the plugin's threshold (TF_CPP_MIN_LOG_LEVEL) unless the user
    set that: info shows XLA's INFO lines, warning (the default) and error do not; a bad
    value is refused by name."""
    code = ("import os, torch, torchtpu; print(os.environ['TF_CPP_MIN_LOG_LEVEL']); "
            "print((torch.ones(2, device='tpu') * 3).cpu().tolist())")
    for level, want, shown in (("info", "0", True), ("warning", "1", False), ("error", "2", False)):
        r = run(["-c", code], TORCHTPU_LOG_LEVEL=level, TF_CPP_MIN_LOG_LEVEL=None)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split()[0] == want and ("cpu_device_count" in r.stderr) == shown, (level, r.stdout, r.stderr)
    # The user's own threshold wins.
    r = run(["-c", code], TORCHTPU_LOG_LEVEL="info", TF_CPP_MIN_LOG_LEVEL="2")
    assert r.returncode == 0 and r.stdout.split()[0] == "2" and "cpu_device_count" not in r.stderr, r.stderr
    bad = run(["-c", "import torchtpu"], TORCHTPU_LOG_LEVEL="loud")
    assert bad.returncode != 0 and "TORCHTPU_LOG_LEVEL" in bad.stderr, bad.stderr


def test_the_report_hides_secret_values(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "not-for-the-logs-123")
    report = env.report()
    assert "not-for-the-logs-123" not in report
    assert "WANDB_API_KEY=set (hidden)" in report
