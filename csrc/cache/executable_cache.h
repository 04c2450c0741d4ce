// The compile cache: executables by structural graph key, in up to three
// tiers. Tier 1 is memory. Tiers 2 (a host-local directory) and 3 (a
// directory shared by many hosts) hold serialized executables on disk
// (disk_tier.h) and are off until configure_disk turns them on.
//
// get_or_compile(key) contract:
// 1. Memory. A thread that misses a key another thread is already building
//    waits for that build: each key is built once per process.
// 2. The local tier, then the shared tier; a shared hit is copied to the
//    local tier.
// 3. Under the key's file lock (the local tier's, else the shared tier's),
//    both tiers are checked again (another process may have built the key
//    while we waited), then `compile` runs and its executable is stored in
//    both tiers. So one process per host compiles a key; the others load it.
//    The wait for the lock is bounded (set_lock_timeout, default 10 minutes):
//    past it, or when the lock cannot be taken, the key is compiled without
//    it, with one warning per process.
// The memory tier holds at most memory_entries() executables (set_memory_entries,
// default kDefaultMemoryEntries) and drops the least recently used beyond
// that: each loaded executable holds JIT code mappings, and a process has a
// bounded number of those (vm.max_map_count), past which the plugin's
// compiler fails inside. Every few inserts it also counts the process's
// mappings and, past half the limit, drops the older quarter of its entries
// (large programs hold many mappings each). A dropped executable stays alive
// while a queued execution holds it; a later request reloads it from disk or
// recompiles.
// A compile error reaches the caller (and the threads waiting on that key)
// and is not cached. Disk problems never do: an entry that is corrupt or
// that the plugin refuses is removed and rebuilt (corrupt_entries counts
// them), a failed write is counted in store_errors. Warnings go to stderr,
// once each. Thread-safe.
#pragma once

#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cache/disk_tier.h"
#include "ir/graph_key.h"
#include "pjrt/pjrt.h"

namespace torchtpu::cache {

// Where get_or_compile found an executable.
enum class Source { kMemory, kLocal, kShared, kCompiled };

struct CacheStats {
  // requests = hits + misses (+ waits on a build that failed); hits = the
  // sum over tiers (a thread that waited for another thread's build counts a
  // memory hit); misses = compiles attempted.
  int64_t requests = 0, hits = 0, misses = 0;
  int64_t memory_hits = 0, local_hits = 0, shared_hits = 0;
  int64_t corrupt_entries = 0, store_errors = 0;
  // Executables dropped from memory by the entry bound.
  int64_t memory_evictions = 0;
  double compile_seconds = 0, load_seconds = 0;
  // Bytes of entries in each tier's root (all fingerprints), as of the last
  // scan; not reset by reset_stats.
  int64_t local_bytes = 0, shared_bytes = 0;
};

struct DiskConfig {
  std::string local_dir, shared_dir;  // tier roots; "" leaves a tier off
  std::string fingerprint;            // names the entry directory in each root
  std::string identity;               // what the fingerprint was made from (identity.txt)
  std::string shared_key;             // HMAC key of the shared tier's entries; "" leaves that tier off
  int64_t max_bytes = int64_t{2} << 30;  // cap per tier
};

class ExecutableCache {
 public:
  static constexpr size_t kDefaultMemoryEntries = 4096;

  using Compile = std::function<pjrt::ExecutablePtr()>;
  using Load = std::function<pjrt::ExecutablePtr(const std::string& blob)>;

  // Replaces the disk tiers; `load` turns a stored blob back into an
  // executable. Returns the tiers' reasons for being off ("" when on), which
  // are also warned about unless a tier was simply not asked for.
  std::pair<std::string, std::string> configure_disk(const DiskConfig& config, Load load);

  // The memory tier's bound (at least 1); drops the excess at once.
  void set_memory_entries(size_t n);
  size_t memory_entries() const;

  // How long build() waits for another process's lock on a key.
  void set_lock_timeout(double seconds);

  // `hit`: not compiled (found in some tier). `source`: which tier, if asked.
  pjrt::ExecutablePtr get_or_compile(const ir::GraphKey& key, const Compile& compile, bool* hit,
                                     Source* source = nullptr);

  // Tier 1 only, never blocks on a build: the executable, or null. A found
  // key counts as a request and a memory hit; a miss counts nothing (the
  // get_or_compile that follows counts it).
  pjrt::ExecutablePtr find(const ir::GraphKey& key);
  // Memory holds `key`, a build of it is running, or a disk tier has an
  // entry for it: get_or_compile would likely not compile. Counts nothing.
  bool held(const ir::GraphKey& key);

  CacheStats stats() const;
  // Rescans the disk tiers' sizes, then stats().
  CacheStats stats_rescanned();
  void reset_stats();
  // Tier 1 only.
  void clear();
  // Entries of the current fingerprint in the chosen disk tiers; returns how many.
  int64_t clear_disk(bool local, bool shared);
  size_t size() const;
  // The tiers (null when never configured); a tier may be present but off.
  std::shared_ptr<DiskTier> local_tier() const;
  std::shared_ptr<DiskTier> shared_tier() const;

 private:
  struct Tiers {
    std::shared_ptr<DiskTier> local, shared;
    Load load;
  };
  pjrt::ExecutablePtr build(const ir::GraphKey& key, const Compile& compile, const Tiers& tiers, Source* source);
  pjrt::ExecutablePtr try_tier(const ir::GraphKey& key, const Tiers& tiers, bool shared);
  void store(const ir::GraphKey& key, const pjrt::Executable& exe, const Tiers& tiers);

  struct Entry {
    pjrt::ExecutablePtr exe;
    std::list<ir::GraphKey>::iterator pos;  // in lru_
  };
  // Under mu_: marks `e` most recently used; inserts, then trims to the bound.
  const pjrt::ExecutablePtr& touch(Entry& e);
  void insert(const ir::GraphKey& key, pjrt::ExecutablePtr exe);
  void trim();
  mutable std::mutex mu_;
  std::unordered_map<ir::GraphKey, Entry, ir::GraphKeyHash> map_;
  std::list<ir::GraphKey> lru_;  // most recently used first
  size_t max_entries_ = kDefaultMemoryEntries;
  int inserts_since_check_ = 0;
  std::unordered_map<ir::GraphKey, std::shared_future<pjrt::ExecutablePtr>, ir::GraphKeyHash> in_flight_;
  Tiers tiers_;
  bool serialize_failed_ = false;
  double lock_timeout_s_ = 600;
  CacheStats stats_;
};

}  // namespace torchtpu::cache
