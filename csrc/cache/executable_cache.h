// Tier 1 of the compile cache: executables in memory, keyed by structural
// graph key. Thread-safe. A miss calls the compile function once per key.
#pragma once

#include <functional>
#include <mutex>
#include <unordered_map>

#include "ir/graph_key.h"
#include "pjrt/pjrt.h"

namespace torchtpu::cache {

struct CacheStats {
  int64_t requests = 0, hits = 0, misses = 0;
  double compile_seconds = 0;
};

class ExecutableCache {
 public:
  // Returns the executable for `key`, compiling it with `compile` on a miss.
  // `hit` reports which happened.
  pjrt::ExecutablePtr get_or_compile(const ir::GraphKey& key,
                                     const std::function<pjrt::ExecutablePtr()>& compile, bool* hit);
  CacheStats stats() const;
  void reset_stats();
  void clear();
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<ir::GraphKey, pjrt::ExecutablePtr, ir::GraphKeyHash> map_;
  CacheStats stats_;
};

}  // namespace torchtpu::cache
