// SiteLog: which user lines reached a sync point (and the op that made it
// one) or the CPU fallback, and how often; torchtpu.debug.metrics_report()
// lists them and TORCHTPU_DEBUG=syncs prints each sync as it happens.
// Bounded: a kind keeps at most kMaxSites distinct (what, line) pairs, and
// counts later new ones under one entry whose site is empty.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "eager/slot.h"

namespace torchtpu::eager {

class SiteLog {
 public:
  enum class Kind { kSync, kFallback };
  static constexpr size_t kMaxSites = 512;
  struct Entry {
    Kind kind;
    std::string what;
    SiteRef site;
    int64_t count;
  };
  // Counts one event at the user's line: the op being built on this thread
  // takes its own site (capturing one takes the GIL, which a thread holding
  // a device lock must not wait for); otherwise the line is captured now.
  void record(Kind kind, const std::string& what);
  std::vector<Entry> entries() const;
  void clear();
  void set_print_syncs(bool on) { print_syncs_ = on; }
  // While one lives on this thread, its sync points are counted as `what`
  // (the CPU fallback of an op copying its tensors) instead of by the op
  // that asked for a device value.
  class Cause {
   public:
    explicit Cause(std::string what);
    ~Cause();
    Cause(const Cause&) = delete;
    Cause& operator=(const Cause&) = delete;

   private:
    std::string what_;
    const std::string* outer_;
  };
  // While one lives on this thread, record() counts nothing (torchtpu's own
  // reads, such as the device-side check flags read at a user's sync point).
  class Quiet {
   public:
    Quiet();
    ~Quiet();
    Quiet(const Quiet&) = delete;
    Quiet& operator=(const Quiet&) = delete;
  };

 private:
  using Key = std::tuple<int, std::string, const void*, int>;
  mutable std::mutex mu_;
  std::map<Key, Entry> entries_;
  size_t sites_[2] = {0, 0};
  bool print_syncs_ = false;
};

SiteLog& site_log();

}  // namespace torchtpu::eager
