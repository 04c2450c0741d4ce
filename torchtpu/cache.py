"""The compilation cache: executables by graph, in three tiers.

1. memory (always on);
2. a directory on this host: ``$TORCHTPU_CACHE_DIR``, by default
   ``$XDG_CACHE_HOME/torchtpu`` or ``~/.cache/torchtpu``;
3. a directory shared by many hosts: ``$TORCHTPU_SHARED_CACHE_DIR`` (off by
   default), used only with a key, ``$TORCHTPU_CACHE_KEY_FILE``: its entries
   are signed with HMAC-SHA256 under the key, and an unsigned or wrongly
   signed entry is refused (one warning) and recompiled. Without a key the
   tier stays off, since entries other hosts wrote cannot be verified.

``TORCHTPU_CACHE=0`` turns both disk tiers off. Disk entries are serialized
executables under ``<dir>/<fingerprint>/``, where the fingerprint names the
plugin build, the torchtpu build and the CPU, so another build never loads
them. Each disk tier is capped at ``TORCHTPU_CACHE_MAX_BYTES``; least
recently used entries go first. A directory another user can write to is not
used (a warning says why). A process waits at most
``TORCHTPU_CACHE_LOCK_TIMEOUT`` seconds for another one compiling the same
graph, then compiles it too (one warning).
"""
import functools
import os
import platform
import re
import struct

from . import _C, env

_BUILD_ID = re.compile(rb"\x04\x00\x00\x00(.)\x00\x00\x00\x03\x00\x00\x00GNU\x00", re.DOTALL)
_plugin_path = ""


def default_dir() -> str:
    """The tier-2 directory when TORCHTPU_CACHE_DIR is empty."""
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torchtpu")


def parse_bytes(text: str) -> int:
    """'2147483648', '512M', '2G' -> bytes (binary suffixes K, M, G, T, P)."""
    kind = env.size_in_bytes(0)
    try:
        return kind.parse(text)
    except ValueError as e:
        raise ValueError(f"{text!r} is not valid ({e}): expected {kind.accepted}") from None


def _file_identity(path: str) -> str:
    """A build's identity that survives copying to other hosts: its size and
    ELF build id, else its size and mtime."""
    st = os.stat(path)
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    m = _BUILD_ID.search(head)
    if m:
        n = struct.unpack("<I", m.group(1) + b"\0\0\0")[0]
        build_id = head[m.end():m.end() + n]
        if len(build_id) == n:
            return f"size {st.st_size} build-id {build_id.hex()}"
    return f"size {st.st_size} mtime {st.st_mtime_ns}"


def _torchtpu_identity() -> str:
    import hashlib
    with open(_C.__file__, "rb") as f:
        return "_C.so blake2b " + hashlib.blake2b(f.read(), digest_size=16).hexdigest()


def _cpu_identity() -> str:
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    flags = " ".join(sorted(value.split()))
                    break
    except OSError:
        pass
    return f"{platform.system()} {platform.machine()} {flags}".strip()


@functools.lru_cache(maxsize=None)
def _identity() -> str:
    return "\n".join([f"plugin {_file_identity(_plugin_path)}", f"torchtpu {_torchtpu_identity()}",
                      f"cpu {_cpu_identity()}"])


def read_key(path: str) -> bytes:
    """The shared tier's key from `path`: a regular file of 16 bytes or more
    that neither group nor others can write. Raises ValueError saying why not."""
    import stat
    try:
        st = os.stat(path)
    except OSError as e:
        raise ValueError(f"cache key file {path!r}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"cache key file {path!r} is not a regular file")
    if st.st_mode & 0o022:
        raise ValueError(f"cache key file {path!r} is writable by group or others (mode {st.st_mode & 0o777:04o})")
    with open(path, "rb") as f:
        key = f.read(1 << 16)
    if len(key) < 16:
        raise ValueError(f"cache key file {path!r} holds {len(key)} bytes; a key needs 16 or more")
    return key


def configure(local_dir: str = None, shared_dir: str = None, max_bytes: int = None,
              lock_timeout: float = None, memory_entries: int = None, key_file: str = None) -> dict:
    """Points the disk tiers somewhere else. None takes the value from the
    settings (see the module doc); "" turns that tier off. `key_file`: the
    shared tier's key (TORCHTPU_CACHE_KEY_FILE; "" or no key leaves that tier
    off; a bad key file leaves it off with a warning saying why). `lock_timeout`:
    seconds to wait for another process compiling the same graph.
    `memory_entries`: how many executables the memory tier keeps (least
    recently used ones beyond that are dropped). Returns config()."""
    on = env.get("TORCHTPU_CACHE")
    if local_dir is None:
        local_dir = (env.get("TORCHTPU_CACHE_DIR") or default_dir()) if on else ""
    if shared_dir is None:
        shared_dir = env.get("TORCHTPU_SHARED_CACHE_DIR") if on else ""
    if max_bytes is None:
        max_bytes = env.get("TORCHTPU_CACHE_MAX_BYTES")
    if lock_timeout is None:
        lock_timeout = env.get("TORCHTPU_CACHE_LOCK_TIMEOUT")
    if memory_entries is None:
        memory_entries = env.get("TORCHTPU_CACHE_MEMORY_ENTRIES")
    if key_file is None:
        key_file = env.get("TORCHTPU_CACHE_KEY_FILE")
    key = b""
    if shared_dir and key_file:
        try:
            key = read_key(os.path.expanduser(key_file))
        except ValueError as e:
            import warnings
            warnings.warn(f"torchtpu: the shared compile cache tier ({shared_dir}) is off: {e}", stacklevel=2)
    if not 1 <= memory_entries <= 1 << 20:
        raise ValueError(f"memory_entries={memory_entries} is out of range: expected 1 to {1 << 20}")
    if not 0 <= max_bytes < 1 << 63:
        raise ValueError(f"max_bytes={max_bytes} is out of range: expected 0 to {(1 << 63) - 1}")
    if not 0 <= lock_timeout <= 7 * 24 * 3600:
        raise ValueError(f"lock_timeout={lock_timeout} is out of range: expected 0 to 604800 seconds")
    local_dir = os.path.abspath(os.path.expanduser(local_dir)) if local_dir else ""
    shared_dir = os.path.abspath(os.path.expanduser(shared_dir)) if shared_dir else ""
    _C._cache_set_lock_timeout(float(lock_timeout))
    _C._cache_set_memory_entries(int(memory_entries))
    _C._cache_configure(local_dir, shared_dir, int(max_bytes), _identity() if local_dir or shared_dir else "", key)
    return config()


def _configure_at_import(plugin_path: str) -> None:
    global _plugin_path
    _plugin_path = plugin_path
    configure()


def config() -> dict:
    """Where the tiers are: for "local" and "shared", whether each is enabled,
    its root, its entry directory (root/fingerprint), why it is off and
    whether its entries are signed;
    plus the fingerprint, the disk size cap (max_bytes) and the memory
    tier's bound (memory_entries)."""
    return _C._cache_config()


def stats() -> dict:
    """Counters since the last torchtpu.debug.reset_metrics(): requests,
    hits (all tiers), memory_hits, local_hits, shared_hits, misses (graphs
    compiled), compilations, compile_seconds, load_seconds (disk hits),
    corrupt_entries (bad disk entries removed and rebuilt), store_errors,
    memory_entries, memory_evictions (executables dropped from memory by its
    bound); and local_bytes / shared_bytes, the bytes of entries now
    in each disk tier (all fingerprints)."""
    return _C._cache_stats()


def clear(shared: bool = False) -> int:
    """Drops every executable from memory and this build's entries (the
    current fingerprint) from the local disk tier; with shared=True from the
    shared tier too. Other builds' entries are left to eviction. Returns how
    many disk entries were removed."""
    return _C._cache_clear(True, shared)


__all__ = ["configure", "config", "stats", "clear", "default_dir"]
