"""The compilation cache's disk tiers, end to end: separate processes share a
cache directory (one compiles, the other loads), a warm directory compiles
nothing, corrupt entries are rebuilt, unsafe directories are refused, and
torchtpu.cache.stats()/clear() report and act on the tiers."""
import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest
import torch

import torchtpu
from torchtpu import debug

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = r"""
import json, os, sys, time
import torch, torchtpu
ready, go = sys.argv[1], sys.argv[2]
if ready:
    open(ready, "w").close()
    while not os.path.exists(go):
        time.sleep(0.002)
x = torch.arange(24, dtype=torch.float32).reshape(4, 6).to("tpu")
y = (x * 0.5 + 1).exp().sum(0)
z = torch.matmul(x, x.t()).relu() - x.sum()
w = torch.tanh(x) * 3
out = [y.cpu().tolist(), z.cpu().tolist(), w.cpu().tolist()]
extra = int(os.environ.get("EXTRA_GRAPHS", "0"))
for n in range(1, extra + 1):
    out.append((torch.ones(n, 3, device="tpu") * 3).sum().item())
print("RESULT " + json.dumps({
    "out": out,
    "compilations": torchtpu.debug.metrics()["compilations"],
    "stats": torchtpu.cache.stats(),
    "config": torchtpu.cache.config(),
}))
"""


def _env(cache_dir, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHTPU_CACHE")}
    env.pop("TORCHTPU_SHARED_CACHE_DIR", None)
    env["TORCHTPU_CACHE_DIR"] = str(cache_dir)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")  # this checkout's torchtpu
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _start(tmp_path, cache_dir, ready="", go="", **extra):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    return subprocess.Popen([sys.executable, str(script), ready, go], env=_env(cache_dir, **extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc, timeout=300):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the program did not finish within {timeout} s")
    assert proc.returncode == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    result["stderr"] = err
    return result


def _run(tmp_path, cache_dir, timeout=300, **extra):
    return _finish(_start(tmp_path, cache_dir, **extra), timeout)


def _entries(result):
    return sorted(glob.glob(os.path.join(result["config"]["local_dir"], "*.tte")))


def test_two_processes_compile_each_graph_once(tmp_path):
    alone = _run(tmp_path, tmp_path / "alone")
    n = alone["compilations"]
    assert n >= 3 and alone["stats"]["misses"] == n and alone["stats"]["local_hits"] == 0

    shared = tmp_path / "shared"
    ready = [tmp_path / "ready0", tmp_path / "ready1"]
    go = tmp_path / "go"
    procs = [_start(tmp_path, shared, str(r), str(go)) for r in ready]
    deadline = time.time() + 240
    while not all(r.exists() for r in ready):  # both imported: start them together
        dead = [p for p in procs if p.poll() is not None]
        if dead or time.time() >= deadline:
            for p in procs:
                p.kill()
            pytest.fail("a process ended or hung before it was ready: " +
                        " | ".join(f"rc {p.wait()}: {p.stderr.read()[-2000:]}" for p in procs))
        time.sleep(0.01)
    go.touch()
    results = [_finish(p) for p in procs]

    assert sum(r["compilations"] for r in results) == n, [r["compilations"] for r in results]
    assert sum(r["stats"]["local_hits"] for r in results) == n
    for r in results:
        assert r["out"] == alone["out"]
        assert r["stats"]["misses"] == r["compilations"]
        assert r["config"]["local_enabled"], r["config"]
    assert len(_entries(results[0])) == n


def test_warm_directory_compiles_nothing(tmp_path):
    first = _run(tmp_path, tmp_path / "c")
    assert first["compilations"] > 0 and len(_entries(first)) == first["compilations"]
    assert first["stats"]["local_bytes"] > 0
    second = _run(tmp_path, tmp_path / "c")
    assert second["compilations"] == 0
    assert second["stats"]["local_hits"] == first["compilations"]
    assert second["stats"]["misses"] == 0 and second["stats"]["load_seconds"] > 0
    assert second["out"] == first["out"]


def test_corrupted_entries_are_rebuilt(tmp_path):
    first = _run(tmp_path, tmp_path / "c")
    entries = _entries(first)
    assert len(entries) >= 3
    with open(entries[0], "r+b") as f:  # truncated
        f.truncate(os.path.getsize(entries[0]) // 2)
    with open(entries[1], "r+b") as f:  # one flipped payload byte
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))
    with open(entries[2], "wb") as f:  # garbage
        f.write(b"not a cache entry at all")
    second = _run(tmp_path, tmp_path / "c")
    assert second["out"] == first["out"]
    assert second["stats"]["corrupt_entries"] == 3
    assert second["compilations"] == 3
    assert second["stats"]["local_hits"] == first["compilations"] - 3
    assert "ignored a bad compile cache entry" in second["stderr"]
    assert second["stderr"].count("ignored a bad compile cache entry") == 1  # warned once
    third = _run(tmp_path, tmp_path / "c")
    assert third["compilations"] == 0 and third["stats"]["corrupt_entries"] == 0


def test_entries_and_locks_that_are_not_regular_files_are_not_followed(tmp_path):
    first = _run(tmp_path, tmp_path / "c")
    entries = _entries(first)
    assert len(entries) >= 3
    os.unlink(entries[0])
    os.mkfifo(entries[0])  # opening it for reading used to block forever
    outside = tmp_path / "outside.tte"  # a valid entry, but not in the cache
    shutil.copy(entries[1], outside)
    os.unlink(entries[1])
    os.symlink(outside, entries[1])
    lock = entries[2][:-len(".tte")] + ".lock"  # a lock file pointing out of the cache
    target = tmp_path / "created-through-the-link"
    if os.path.lexists(lock):
        os.unlink(lock)
    os.symlink(target, lock)
    os.unlink(entries[2])
    before = outside.read_bytes()

    second = _run(tmp_path, tmp_path / "c", timeout=120)
    assert second["out"] == first["out"]
    assert second["stats"]["corrupt_entries"] == 2 and second["compilations"] == 3
    assert second["stderr"].count("ignored a bad compile cache entry") == 1
    assert "not a regular file" in second["stderr"]
    for path in entries[:3] + [lock]:
        assert stat.S_ISREG(os.lstat(path).st_mode), path  # rebuilt as plain files in the cache
    assert outside.read_bytes() == before and not target.exists()
    assert _run(tmp_path, tmp_path / "c")["compilations"] == 0


HOLD_LOCKS = """
import fcntl, sys, time
files = [open(p, "a") for p in sys.argv[1:]]
for f in files:
    fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


def test_lock_held_forever_is_waited_for_a_bounded_time(tmp_path):
    first = _run(tmp_path, tmp_path / "c")
    n = first["compilations"]
    entries = _entries(first)
    locks = [e[:-len(".tte")] + ".lock" for e in entries]
    assert len(locks) == n and all(os.path.isfile(p) for p in locks)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCKS] + locks, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for e in entries:
            os.unlink(e)
        second = _run(tmp_path, tmp_path / "c", timeout=120, TORCHTPU_CACHE_LOCK_TIMEOUT="0.5")
    finally:
        holder.kill()
        holder.wait()
    assert second["out"] == first["out"] and second["compilations"] == n
    assert second["stderr"].count("compiling without the compile cache's lock") == 1, second["stderr"]
    assert "waited 0.5 s" in second["stderr"] and "held by another process" in second["stderr"]
    assert len(_entries(second)) == n  # stored all the same


def test_directory_others_can_write_is_refused(tmp_path):
    unsafe = tmp_path / "unsafe"
    unsafe.mkdir()
    os.chmod(unsafe, 0o777)
    r = _run(tmp_path, unsafe)
    assert not r["config"]["local_enabled"]
    assert "writable by other users" in r["config"]["local_off_reason"]
    assert r["stderr"].count("compile cache tier") == 1 and "is off" in r["stderr"]
    assert r["compilations"] > 0 and r["stats"]["local_bytes"] == 0
    assert glob.glob(str(unsafe / "*" / "*.tte")) == []


def test_cache_setting_off_and_size_cap(tmp_path):
    off = _run(tmp_path, tmp_path / "off", TORCHTPU_CACHE=0)
    assert not off["config"]["local_enabled"] and not (tmp_path / "off").exists()
    assert off["compilations"] > 0

    cap = 16 * 1024
    capped = _run(tmp_path, tmp_path / "capped", TORCHTPU_CACHE_MAX_BYTES="16K", EXTRA_GRAPHS=12)
    assert capped["config"]["max_bytes"] == cap
    entries = _entries(capped)
    assert 0 < len(entries) < capped["compilations"]  # some were evicted
    assert sum(os.path.getsize(e) for e in entries) <= cap
    assert capped["stats"]["local_bytes"] <= cap
    assert capped["out"] == _run(tmp_path, tmp_path / "capped2", EXTRA_GRAPHS=12)["out"]


def test_settings_are_registered():
    for name in ("TORCHTPU_CACHE", "TORCHTPU_CACHE_DIR", "TORCHTPU_SHARED_CACHE_DIR", "TORCHTPU_CACHE_MAX_BYTES"):
        assert name in torchtpu.env.SETTINGS
    assert torchtpu.cache.parse_bytes("2G") == 2 << 30
    assert torchtpu.cache.parse_bytes("512M") == 512 << 20
    assert torchtpu.cache.parse_bytes("1000") == 1000
    with pytest.raises(ValueError):
        torchtpu.cache.parse_bytes("lots")


def _key_file(path, key=b"k" * 32):
    path.write_bytes(key)
    path.chmod(0o600)
    return str(path)


@pytest.fixture
def cache_in(tmp_path):
    """This process's cache pointed at fresh local and shared directories."""
    cfg = torchtpu.cache.configure(local_dir=str(tmp_path / "local"), shared_dir=str(tmp_path / "shared"),
                                   key_file=_key_file(tmp_path / "key"))
    yield cfg
    torchtpu.cache.configure()


def test_stats_and_clear(cache_in, tmp_path):
    assert cache_in["local_enabled"] and cache_in["shared_enabled"], cache_in
    assert cache_in["shared_signed"] and not cache_in["local_signed"]
    assert cache_in["local_dir"].endswith(cache_in["fingerprint"])
    a = torch.full((7, 13), 2.0).to("tpu")
    torchtpu.cache.clear()  # memory may hold this graph from another test; the dirs are fresh
    debug.reset_metrics()
    (a * a).cpu()
    s = torchtpu.cache.stats()
    assert s["misses"] == 1 and s["compilations"] == 1 and s["requests"] == 1
    assert s["local_bytes"] > 0 and s["shared_bytes"] == s["local_bytes"] + 32  # the signature
    (a * a).cpu()
    s = torchtpu.cache.stats()
    assert s["memory_hits"] == 1 and s["hits"] == 1 and s["requests"] == 2
    m = debug.metrics()
    assert m["cache_hits"] == s["hits"] and m["cache_misses"] == s["misses"]

    # clear() empties memory and the local tier, not the shared one: that
    # answers next (a load, not a compilation) and refills the local tier.
    assert torchtpu.cache.clear() == 1
    s = torchtpu.cache.stats()
    assert s["memory_entries"] == 0 and s["local_bytes"] == 0 and s["shared_bytes"] > 0
    (a * a).cpu()
    s = torchtpu.cache.stats()
    assert s["shared_hits"] == 1 and s["compilations"] == 1 and s["local_bytes"] + 32 == s["shared_bytes"]

    # With the local tier off, memory cleared, the shared tier still serves.
    torchtpu.cache.configure(local_dir="", shared_dir=cache_in["shared_root"], key_file=str(tmp_path / "key"))
    assert not torchtpu.cache.config()["local_enabled"]
    assert torchtpu.cache.clear() == 0
    (a * a).cpu()
    s = torchtpu.cache.stats()
    assert s["shared_hits"] == 2 and s["compilations"] == 1

    torchtpu.cache.configure(local_dir=cache_in["local_root"], shared_dir=cache_in["shared_root"],
                             key_file=str(tmp_path / "key"))
    assert torchtpu.cache.clear(shared=True) == 2  # one entry in each tier
    s = torchtpu.cache.stats()
    assert s["memory_entries"] == 0 and s["local_bytes"] == 0 and s["shared_bytes"] == 0
    assert glob.glob(os.path.join(cache_in["local_dir"], "*.tte")) == []
    (a * a).cpu()
    s = torchtpu.cache.stats()
    assert s["compilations"] == 2 and s["misses"] == 2
    debug.reset_metrics()
    s = torchtpu.cache.stats()
    assert s["requests"] == 0 and s["hits"] == 0 and s["local_bytes"] > 0


def _maps():
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def test_memory_tier_is_bounded(cache_in, request):
    """The memory tier keeps at most memory_entries executables, least
    recently used out first: each loaded executable holds JIT code mappings,
    and past the process's limit on mappings (vm.max_map_count) the plugin's
    compiler fails inside. Dropped executables come back from disk."""
    assert "TORCHTPU_CACHE_MEMORY_ENTRIES" in torchtpu.env.SETTINGS
    assert cache_in["memory_entries"] == 4096
    with pytest.raises(ValueError, match="memory_entries"):
        torchtpu.cache.configure(memory_entries=0)
    torchtpu.cache.configure(local_dir=cache_in["local_root"], shared_dir="", memory_entries=8)
    assert torchtpu.cache.config()["memory_entries"] == 8
    torchtpu.cache.clear()
    debug.reset_metrics()

    def run(n):  # one program per length
        x = torch.arange(float(n))
        torch.testing.assert_close((x.to("tpu") * 3).cpu(), x * 3)

    torchtpu._C._set_buckets([])  # each length its own program, bucketing off
    request.addfinalizer(lambda: torchtpu._C._set_buckets([0]))
    for n in range(1, 21):
        run(n)
    s = torchtpu.cache.stats()
    assert s["memory_entries"] <= 8 and s["memory_evictions"] >= s["misses"] - 8 > 0, s
    run(20)  # most recent: still in memory
    assert torchtpu.cache.stats()["memory_hits"] == s["memory_hits"] + 1
    run(1)  # dropped long ago: loaded from the local tier, not compiled
    s2 = torchtpu.cache.stats()
    assert s2["local_hits"] == s["local_hits"] + 1 and s2["compilations"] == s["compilations"], s2

    # Mappings stay bounded however many programs the process has compiled.
    for n in range(21, 61):
        run(n)
    before = _maps()
    for n in range(61, 261):
        run(n)
    assert _maps() - before < 100, (before, _maps())


COMPILED_PROGRAM = r"""
import json, sys
import torch, torchtpu
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to("tpu")
cm = torch.compile(model, backend="tpu")
x = torch.randn(8, 16).to("tpu")
loss = cm(x).square().sum()
loss.backward()
m = torchtpu.debug.metrics()
print("RESULT " + json.dumps({"loss": loss.item(), "compilations": m["compilations"],
                              "programs": m["compiled"]["programs"], "stats": torchtpu.cache.stats()}))
"""


def test_compiled_programs_come_from_the_disk_cache_in_a_second_process(tmp_path):
    # torch.compile's programs are stored like any graph: a second process
    # with a warm cache captures its graphs but compiles nothing.
    script = tmp_path / "compiled.py"
    script.write_text(COMPILED_PROGRAM)
    results = []
    for _ in range(2):
        r = subprocess.run([sys.executable, str(script)], env=_env(tmp_path / "c"), capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))
        results.append(json.loads(line[len("RESULT "):]))
    first, second = results
    assert first["programs"] == 2 and first["compilations"] >= 2
    assert second["programs"] == 2 and second["compilations"] == 0
    assert second["stats"]["local_hits"] >= 2 and second["loss"] == first["loss"]


def _tte(root):
    return sorted(glob.glob(os.path.join(str(root), "*", "*.tte")))


def test_the_shared_tier_trusts_only_entries_signed_with_its_key(tmp_path):
    """Hosts share a tier through a key: a second host loads what the first
    signed; an entry signed with another key (forged) or unsigned (planted) is
    refused with a warning and compiled again, with the same results; a host
    without the key neither reads nor writes the tier."""
    shared, key = tmp_path / "shared", _key_file(tmp_path / "key")
    host = lambda name, **kw: _run(tmp_path, tmp_path / name, TORCHTPU_SHARED_CACHE_DIR=shared, **kw)
    first = host("a", TORCHTPU_CACHE_KEY_FILE=key)
    n = first["compilations"]
    assert n >= 3 and first["config"]["shared_enabled"] and first["config"]["shared_signed"]
    assert len(_tte(shared)) == n
    second = host("b", TORCHTPU_CACHE_KEY_FILE=key)
    assert second["compilations"] == 0 and second["stats"]["shared_hits"] == n
    assert second["out"] == first["out"]

    # Forged: entries signed with another key, put in the tier's place.
    other = tmp_path / "other-shared"
    _run(tmp_path, tmp_path / "c", TORCHTPU_SHARED_CACHE_DIR=other,
         TORCHTPU_CACHE_KEY_FILE=_key_file(tmp_path / "other-key", b"x" * 32))
    for src in _tte(other):
        shutil.copy(src, os.path.join(str(shared), os.path.relpath(src, str(other))))
    forged = host("d", TORCHTPU_CACHE_KEY_FILE=key)
    assert forged["compilations"] == n and forged["stats"]["shared_hits"] == 0
    assert forged["stats"]["corrupt_entries"] == n
    assert "refused a shared compile cache entry" in forged["stderr"]
    assert "signature mismatch" in forged["stderr"]
    assert forged["out"] == first["out"]

    # Unsigned: a host-local (unsigned) entry copied over each signed one.
    local = _tte(tmp_path / "a")
    assert len(local) == n
    for src in local:
        shutil.copy(src, os.path.join(str(shared), os.path.relpath(src, str(tmp_path / "a"))))
    unsigned = host("e", TORCHTPU_CACHE_KEY_FILE=key)
    assert unsigned["compilations"] == n and unsigned["stats"]["shared_hits"] == 0
    assert "unsigned" in unsigned["stderr"] and unsigned["out"] == first["out"]

    # Without the key: the tier is off, never read or written.
    before = {p: os.path.getmtime(p) for p in _tte(shared)}
    keyless = host("f")
    assert not keyless["config"]["shared_enabled"]
    assert "TORCHTPU_CACHE_KEY_FILE" in keyless["config"]["shared_off_reason"]
    assert keyless["compilations"] == n and keyless["stats"]["shared_hits"] == 0
    assert {p: os.path.getmtime(p) for p in _tte(shared)} == before


@pytest.mark.parametrize("bad", ["short", "group-writable", "missing", "directory"])
def test_a_bad_key_file_leaves_the_shared_tier_off_with_a_warning(bad, tmp_path):
    path = tmp_path / "key"
    if bad == "short":
        _key_file(path, b"k" * 15)
    elif bad == "group-writable":
        _key_file(path)
        path.chmod(0o620)
    elif bad == "directory":
        path.mkdir()
    want = {"short": "holds 15 bytes", "group-writable": "writable by group or others",
            "missing": "No such file", "directory": "not a regular file"}[bad]
    try:
        with pytest.warns(UserWarning, match=want):
            cfg = torchtpu.cache.configure(local_dir=str(tmp_path / "local"), shared_dir=str(tmp_path / "shared"),
                                           key_file=str(path))
        assert cfg["local_enabled"] and not cfg["shared_enabled"]
        assert not os.path.exists(tmp_path / "shared")
    finally:
        torchtpu.cache.configure()
