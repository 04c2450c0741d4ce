"""Shared fixtures. `each_mode` runs a test once per eager mode: every op and
model test checks Debug, Strict and Fused Eager against the same reference.

The suite leaves the user's real compilation cache alone: the session's
cache directory is a fresh temporary one, XDG_CACHE_HOME points into it too
(so a subprocess or test that drops TORCHTPU_CACHE_DIR still lands there),
and the session fails if this build wrote to the real default directory."""
import atexit
import os
import shutil
import tempfile

import pytest


def _default_cache_dir():
    """torchtpu's default tier-2 directory for this user (torchtpu.cache.default_dir)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torchtpu")


def _listing(root):
    """Every path under `root` with its size and mtime."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            out[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns)
    return out


REAL_CACHE_DIR = _default_cache_dir()
_REAL_BEFORE = _listing(REAL_CACHE_DIR)

# A fresh compilation cache directory per test session, so that compile
# counts do not depend on earlier runs.
_SESSION_TMP = tempfile.mkdtemp(prefix="torchtpu-test-")
atexit.register(shutil.rmtree, _SESSION_TMP, True)
os.environ["TORCHTPU_CACHE_DIR"] = os.path.join(_SESSION_TMP, "cache")
os.environ["XDG_CACHE_HOME"] = os.path.join(_SESSION_TMP, "xdg-cache")

import torchtpu  # noqa: E402

# Bucketed programs (torchtpu's Fused Eager) get NaN or huge values in their
# padding throughout the suite: a padded element that reached a real result
# would show in every test that varies a size.
torchtpu._C._set_bucket_poison(True)

MODES = ("debug", "strict", "fused")


def _ours(top):
    """Whether a top-level name in the real cache may come from this build:
    an entry directory whose identity.txt names this checkout's _C.so (other
    builds, run meanwhile by other checkouts, are not this suite's doing), or
    anything else."""
    try:
        with open(os.path.join(REAL_CACHE_DIR, top, "identity.txt")) as f:
            return torchtpu.cache._torchtpu_identity() in f.read()
    except OSError:
        return True


def pytest_sessionfinish(session, exitstatus):
    # Fault tests leave errors of device work unread on purpose; the
    # interpreter's exit would report them and make the run fail, so the
    # suite takes them here and says how many.
    left = torchtpu._C._unobserved_errors()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if left and reporter is not None:
        reporter.write_line(f"torchtpu: {len(left)} error(s) of device work that no test read (taken at the end)")
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller checks
        return
    after = _listing(REAL_CACHE_DIR)
    changed = sorted(p for p in set(after) | set(_REAL_BEFORE) if after.get(p) != _REAL_BEFORE.get(p))
    changed = [p for p in changed if _ours(p.split(os.sep)[0])]
    if changed:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        msg = (f"the tests changed the user's real compilation cache {REAL_CACHE_DIR} (tests must use a "
               f"temporary directory; or a program of this build used it meanwhile): " + ", ".join(changed[:10]))
        if reporter is not None:
            reporter.write_line("")
            reporter.write_line("ERROR: " + msg, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(params=MODES)
def each_mode(request):
    previous = torchtpu.get_eager_mode()
    torchtpu.set_eager_mode(request.param)
    try:
        yield request.param
        torchtpu.synchronize()
    finally:
        torchtpu.set_eager_mode(previous)


@pytest.fixture
def no_cpu_fallback(request):
    """Fails the test if an op fell back to the CPU, except the ops its
    `allow_fallback` marker names."""
    torchtpu.debug.reset_metrics()
    yield
    allowed = set(getattr(request.node.get_closest_marker("allow_fallback"), "args", ()))
    fallbacks = {k: v for k, v in torchtpu.debug.metrics()["cpu_fallbacks"].items() if k not in allowed}
    assert fallbacks == {}, f"ops fell back to CPU: {fallbacks}"
