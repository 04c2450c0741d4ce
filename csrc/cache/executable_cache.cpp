#include "cache/executable_cache.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

namespace torchtpu::cache {

namespace {

// Warns on stderr the first time `topic` comes up in this process.
void warn_once(const std::string& topic, const std::string& msg) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  if (said.insert(topic).second) std::fprintf(stderr, "torchtpu: warning: %s\n", msg.c_str());
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::pair<std::string, std::string> ExecutableCache::configure_disk(const DiskConfig& config, Load load) {
  Tiers t;
  t.load = std::move(load);
  auto make = [&](const std::string& root, bool shared, const char* name) {
    auto tier = std::make_shared<DiskTier>(root, config.fingerprint, config.max_bytes, shared, config.identity,
                                           shared ? config.shared_key : std::string(), shared);
    if (!tier->enabled() && !root.empty())
      warn_once(std::string(name) + " off " + root + ": " + tier->reason(),
                std::string("the ") + name + " compile cache tier (" + root + ") is off: " + tier->reason());
    return tier;
  };
  t.local = make(config.local_dir, false, "local");
  t.shared = make(config.shared_dir, true, "shared");
  std::lock_guard<std::mutex> lock(mu_);
  tiers_ = t;
  stats_.local_bytes = t.local->last_usage();
  stats_.shared_bytes = t.shared->last_usage();
  return {t.local->reason(), t.shared->reason()};
}

pjrt::ExecutablePtr ExecutableCache::get_or_compile(const ir::GraphKey& key, const Compile& compile, bool* hit,
                                                    Source* source) {
  std::promise<pjrt::ExecutablePtr> promise;
  Tiers tiers;
  {
    std::unique_lock<std::mutex> lock(mu_);
    ++stats_.requests;
    auto it = map_.find(key);
    if (it != map_.end()) {
      ++stats_.hits;
      ++stats_.memory_hits;
      *hit = true;
      if (source != nullptr) *source = Source::kMemory;
      return touch(it->second);
    }
    auto running = in_flight_.find(key);
    if (running != in_flight_.end()) {
      std::shared_future<pjrt::ExecutablePtr> done = running->second;
      lock.unlock();
      pjrt::ExecutablePtr exe = done.get();  // rethrows the builder's error
      lock.lock();
      ++stats_.hits;
      ++stats_.memory_hits;
      *hit = true;
      if (source != nullptr) *source = Source::kMemory;
      return exe;
    }
    in_flight_.emplace(key, promise.get_future().share());
    tiers = tiers_;
  }
  Source from = Source::kCompiled;
  pjrt::ExecutablePtr exe;
  try {
    exe = build(key, compile, tiers, &from);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.misses;
    in_flight_.erase(key);
    promise.set_exception(std::current_exception());
    throw;
  }
  std::lock_guard<std::mutex> lock(mu_);
  insert(key, exe);
  in_flight_.erase(key);
  if (from == Source::kCompiled) {
    ++stats_.misses;
  } else {
    ++stats_.hits;
    ++(from == Source::kLocal ? stats_.local_hits : stats_.shared_hits);
  }
  if (tiers.local) stats_.local_bytes = tiers.local->last_usage();
  if (tiers.shared) stats_.shared_bytes = tiers.shared->last_usage();
  promise.set_value(exe);
  *hit = from != Source::kCompiled;
  if (source != nullptr) *source = from;
  return exe;
}

pjrt::ExecutablePtr ExecutableCache::build(const ir::GraphKey& key, const Compile& compile, const Tiers& tiers,
                                           Source* source) {
  const bool local_on = tiers.local && tiers.local->enabled();
  const bool shared_on = tiers.shared && tiers.shared->enabled();
  auto from_disk = [&]() -> pjrt::ExecutablePtr {
    if (pjrt::ExecutablePtr exe = try_tier(key, tiers, false)) {
      *source = Source::kLocal;
      return exe;
    }
    if (pjrt::ExecutablePtr exe = try_tier(key, tiers, true)) {
      *source = Source::kShared;
      return exe;
    }
    return nullptr;
  };
  if (pjrt::ExecutablePtr exe = from_disk()) return exe;
  DiskTier::KeyLock held;
  if (local_on || shared_on) {
    double timeout_s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      timeout_s = lock_timeout_s_;
    }
    std::string why;
    held = (local_on ? tiers.local : tiers.shared)->lock(key, timeout_s, &why);
    if (!held.held() && !why.empty())
      warn_once("lock", "compiling without the compile cache's lock: " + why +
                " (TORCHTPU_CACHE_LOCK_TIMEOUT sets the wait; later ones are not reported)");
    if (pjrt::ExecutablePtr exe = from_disk()) return exe;
  }
  auto t0 = std::chrono::steady_clock::now();
  pjrt::ExecutablePtr exe = compile();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.compile_seconds += seconds_since(t0);
  }
  *source = Source::kCompiled;
  if (local_on || shared_on) store(key, *exe, tiers);
  return exe;
}

pjrt::ExecutablePtr ExecutableCache::try_tier(const ir::GraphKey& key, const Tiers& tiers, bool shared) {
  DiskTier* tier = (shared ? tiers.shared : tiers.local).get();
  if (tier == nullptr || !tier->enabled() || !tiers.load) return nullptr;
  auto t0 = std::chrono::steady_clock::now();
  std::string rejected;
  std::optional<std::string> blob = tier->load(key, &rejected);
  pjrt::ExecutablePtr exe;
  if (blob) {
    try {
      exe = tiers.load(*blob);
    } catch (const std::exception& e) {
      tier->remove(key);
      rejected = tier->dir() + "/" + key.hex() + ".tte: the plugin cannot load it: " + e.what();
    }
  }
  if (!rejected.empty()) {
    // The shared tier's refusals (unsigned, forged, corrupt) warn on their own.
    warn_once(shared ? "refused shared entry" : "bad entry",
              std::string(shared ? "refused a shared compile cache entry (" : "ignored a bad compile cache entry (") +
                  rejected + "); it is rebuilt. Later ones are counted in torchtpu.cache.stats()['corrupt_entries'].");
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.corrupt_entries;
  }
  if (!exe) return nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.load_seconds += seconds_since(t0);
  }
  if (shared && tiers.local && tiers.local->enabled() && !tiers.local->store(key, *blob)) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.store_errors;
  }
  return exe;
}

void ExecutableCache::store(const ir::GraphKey& key, const pjrt::Executable& exe, const Tiers& tiers) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (serialize_failed_) return;
  }
  std::string blob;
  try {
    blob = exe.serialize();
  } catch (const std::exception& e) {
    warn_once("serialize",
              std::string("the plugin cannot serialize executables, so the disk cache tiers store nothing: ") +
                  e.what());
    std::lock_guard<std::mutex> lock(mu_);
    serialize_failed_ = true;
    ++stats_.store_errors;
    return;
  }
  for (DiskTier* tier : {tiers.local.get(), tiers.shared.get()}) {
    if (tier == nullptr || !tier->enabled()) continue;
    std::string why;
    if (!tier->store(key, blob, &why)) {
      warn_once("write " + tier->dir(), "cannot write to the compile cache: " + why);
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.store_errors;
    }
  }
}

pjrt::ExecutablePtr ExecutableCache::find(const ir::GraphKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  ++stats_.requests;
  ++stats_.hits;
  ++stats_.memory_hits;
  return touch(it->second);
}

bool ExecutableCache::held(const ir::GraphKey& key) {
  Tiers tiers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.count(key) || in_flight_.count(key)) return true;
    tiers = tiers_;
  }
  return (tiers.local && tiers.local->has(key)) || (tiers.shared && tiers.shared->has(key));
}

const pjrt::ExecutablePtr& ExecutableCache::touch(Entry& e) {
  lru_.splice(lru_.begin(), lru_, e.pos);
  return e.exe;
}

void ExecutableCache::insert(const ir::GraphKey& key, pjrt::ExecutablePtr exe) {
  auto it = map_.find(key);
  if (it != map_.end()) {  // one build per key at a time; keep the newest anyway
    it->second.exe = std::move(exe);
    touch(it->second);
    return;
  }
  lru_.push_front(key);
  map_.emplace(key, Entry{std::move(exe), lru_.begin()});
  trim();
}

namespace {

// Lines of a /proc file (for /proc/self/maps: the process's mappings), or -1.
int64_t proc_lines(const char* path) {
  FILE* f = std::fopen(path, "r");
  if (!f) return -1;
  char buf[1 << 16];
  int64_t n = 0;
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0)
    for (size_t i = 0; i < got; ++i) n += buf[i] == '\n';
  std::fclose(f);
  return n;
}

int64_t max_mappings() {
  static const int64_t limit = [] {
    FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r");
    long long v = -1;
    if (f) {
      if (std::fscanf(f, "%lld", &v) != 1) v = -1;
      std::fclose(f);
    }
    return static_cast<int64_t>(v);
  }();
  return limit;
}

}  // namespace

void ExecutableCache::trim() {
  size_t bound = max_entries_;
  if (++inserts_since_check_ >= 8) {
    inserts_since_check_ = 0;
    const int64_t limit = max_mappings(), used = limit > 0 ? proc_lines("/proc/self/maps") : -1;
    if (used > limit / 2) bound = std::min(bound, std::max<size_t>(map_.size() * 3 / 4, 1));
  }
  while (map_.size() > bound) {
    map_.erase(lru_.back());
    lru_.pop_back();
    ++stats_.memory_evictions;
  }
}

void ExecutableCache::set_memory_entries(size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  max_entries_ = n < 1 ? 1 : n;
  trim();
}

size_t ExecutableCache::memory_entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_entries_;
}

void ExecutableCache::set_lock_timeout(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  lock_timeout_s_ = seconds < 0 ? 0 : seconds;
}

CacheStats ExecutableCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

CacheStats ExecutableCache::stats_rescanned() {
  Tiers t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    t = tiers_;
  }
  const int64_t local = t.local ? t.local->usage() : 0, shared = t.shared ? t.shared->usage() : 0;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.local_bytes = local;
  stats_.shared_bytes = shared;
  return stats_;
}

void ExecutableCache::reset_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t local = stats_.local_bytes, shared = stats_.shared_bytes;
  stats_ = CacheStats{};
  stats_.local_bytes = local;
  stats_.shared_bytes = shared;
}

void ExecutableCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  map_.clear();
  lru_.clear();
}

int64_t ExecutableCache::clear_disk(bool local, bool shared) {
  Tiers t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    t = tiers_;
  }
  int64_t n = 0;
  if (local && t.local) n += t.local->clear();
  if (shared && t.shared) n += t.shared->clear();
  std::lock_guard<std::mutex> lock(mu_);
  if (t.local) stats_.local_bytes = t.local->last_usage();
  if (t.shared) stats_.shared_bytes = t.shared->last_usage();
  return n;
}

size_t ExecutableCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

std::shared_ptr<DiskTier> ExecutableCache::local_tier() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tiers_.local;
}

std::shared_ptr<DiskTier> ExecutableCache::shared_tier() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tiers_.shared;
}

}  // namespace torchtpu::cache
