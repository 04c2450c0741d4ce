#include "cache/executable_cache.h"

#include <chrono>

namespace torchtpu::cache {

pjrt::ExecutablePtr ExecutableCache::get_or_compile(const ir::GraphKey& key,
                                                    const std::function<pjrt::ExecutablePtr()>& compile,
                                                    bool* hit) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.requests;
    auto it = map_.find(key);
    if (it != map_.end()) {
      ++stats_.hits;
      *hit = true;
      return it->second;
    }
    ++stats_.misses;
  }
  *hit = false;
  auto t0 = std::chrono::steady_clock::now();
  pjrt::ExecutablePtr exe = compile();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu_);
  stats_.compile_seconds += secs;
  map_.emplace(key, exe);
  return exe;
}

CacheStats ExecutableCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void ExecutableCache::reset_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = CacheStats{};
}

void ExecutableCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  map_.clear();
}

size_t ExecutableCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

}  // namespace torchtpu::cache
