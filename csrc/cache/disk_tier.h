// One disk tier of the compile cache: a directory of serialized executables.
//
// Layout: <root>/<fingerprint>/<key>.tte (entries, see disk_entry.h),
// <key>.lock (per-key lock files; the holder's pid while held), .tmp-* (writes in progress) and
// identity.txt (what the fingerprint was made from, for people). The
// fingerprint names the plugin, torchtpu and the machine, so another build
// never reads these entries.
//
// Contract:
// - Never throws. A root that cannot be created, or that another user could
//   write to (see unsafe_reason), leaves the tier off: enabled() is false and
//   reason() says why; every other call is then a no-op miss.
// - store() is atomic: a temp file in the same directory, renamed over the
//   entry. Readers see the old entry, the new one, or none, never half.
// - load() returns the payload only if the entry is whole and intact; a bad
//   entry is removed (so the caller rebuilds it) and reported via `rejected`.
//   An entry that is not a regular file (a FIFO, a symlink, a device) is bad:
//   it is opened without following a link and without blocking, never read.
//   A successful load marks the entry used (its mtime), for LRU eviction.
// - lock() takes an exclusive flock on <key>.lock, waiting until the holder
//   (another process or thread) releases it or `timeout_s` passes; released
//   when the KeyLock dies. The lock file is never a link: a symlink or other
//   non-regular file in its place is removed, never followed.
// - With a `mac_key` every entry is written signed and only entries signed
//   with that key load (disk_entry.h); an unsigned or wrongly signed entry is
//   bad, as above. `require_key` (the shared tier) leaves the tier off when
//   no key is given: entries other hosts wrote cannot be trusted without one.
// - After each store, entries of every fingerprint under root are evicted,
//   least recently used first, until their total is at most max_bytes.
// Thread-safe; safe to share one directory between processes.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "ir/graph_key.h"

namespace torchtpu::cache {

class DiskTier {
 public:
  // `shared` makes new files and directories readable by others (0644/0755
  // before umask) instead of private (0600/0700). `identity` is written to
  // identity.txt.
  DiskTier(std::string root, std::string fingerprint, int64_t max_bytes, bool shared = false,
           const std::string& identity = "", std::string mac_key = "", bool require_key = false);

  bool enabled() const { return reason_.empty(); }
  const std::string& reason() const { return reason_; }
  const std::string& root() const { return root_; }
  const std::string& dir() const { return dir_; }
  const std::string& fingerprint() const { return fingerprint_; }
  int64_t max_bytes() const { return max_bytes_; }
  bool is_signed() const { return !mac_key_.empty(); }

  std::optional<std::string> load(const ir::GraphKey& key, std::string* rejected = nullptr);
  bool store(const ir::GraphKey& key, const std::string& payload, std::string* why = nullptr);
  void remove(const ir::GraphKey& key);
  // An entry for `key` is stored (not read, so not checked).
  bool has(const ir::GraphKey& key) const;

  // An exclusive per-key lock (or none, when the lock file cannot be made or
  // the wait timed out).
  class KeyLock {
   public:
    explicit KeyLock(int fd = -1) : fd_(fd) {}
    KeyLock(KeyLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    KeyLock& operator=(KeyLock&& o) noexcept;
    ~KeyLock();
    bool held() const { return fd_ >= 0; }
   private:
    void release();
    int fd_;
  };
  // Without the lock, `why` says why (the timeout, or an error).
  KeyLock lock(const ir::GraphKey& key, double timeout_s, std::string* why = nullptr);

  // Evicts down to max_bytes; returns the bytes of entries left under root.
  int64_t evict();
  // Bytes of entries under root (all fingerprints), rescanned.
  int64_t usage();
  // Bytes as of the last scan (cheap).
  int64_t last_usage() const { return usage_.load(); }
  // Removes this fingerprint's entries; returns how many.
  int64_t clear();

  // Why `dir` must not be trusted, or "" when it may be: it is not a
  // directory, is not owned by `uid`, or is writable by group or others; or an
  // ancestor is writable by others without the sticky bit, or is owned by
  // someone other than `uid` or root.
  static std::string unsafe_reason(const std::string& dir, uid_t uid);

 private:
  std::string open_dirs();  // "" or why the tier is off
  std::string entry_path(const ir::GraphKey& key) const;
  std::string lock_path(const ir::GraphKey& key) const;
  int64_t scan(bool evict);

  std::string root_, fingerprint_, dir_, mac_key_;
  int64_t max_bytes_;
  int file_mode_, dir_mode_;
  std::string reason_;
  std::atomic<int64_t> usage_{0};
  std::atomic<uint64_t> tmp_counter_{0};
};

}  // namespace torchtpu::cache
