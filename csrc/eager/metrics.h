// Process-wide counters behind torchtpu.debug.metrics().
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace torchtpu::eager {

// The op most recently dispatched on this thread (names an allocation that
// fails outside any op's graph, as in torch.empty).
void note_op(const char* name);
const char* last_op();

// A per-op dispatch counter; one static instance per ATen kernel, registered
// on construction so metrics() can list them.
class OpCounter {
 public:
  explicit OpCounter(const char* name);
  void inc() {
    count_.fetch_add(1, std::memory_order_relaxed);
    note_op(name_);
  }
  const char* name() const { return name_; }
  int64_t count() const { return count_.load(std::memory_order_relaxed); }
  // Calls of the op whose graph an op memo could not key or record
  // (aten/op_memo.h): past a few, its calls are not keyed again.
  mutable std::atomic<int> memo_refusals{0};
  void reset() { count_.store(0); }
 private:
  const char* name_;
  std::atomic<int64_t> count_{0};
};

struct Metrics {
  std::atomic<int64_t> executions{0};
  std::atomic<int64_t> h2d_bytes{0};
  std::atomic<int64_t> d2h_bytes{0};
  std::atomic<int64_t> donated_buffers{0};
  // Fused Eager: graphs materialized, and why they were cut.
  std::atomic<int64_t> fused_graphs{0};
  std::atomic<int64_t> fused_ops{0};
  std::atomic<int64_t> fused_outputs{0};
  std::atomic<int64_t> cuts_sync{0};
  std::atomic<int64_t> cuts_loop{0};
  std::atomic<int64_t> cuts_size{0};
  // Fused Eager's replay: ops that took their place in a recorded graph
  // without building it, and recorded graphs given up before their end.
  std::atomic<int64_t> fused_replayed_ops{0};
  std::atomic<int64_t> fused_replay_misses{0};
  // torch.compile: programs captured, captures abandoned at a sync point,
  // and runs of captured programs.
  std::atomic<int64_t> captured_programs{0};
  std::atomic<int64_t> captures_abandoned{0};
  std::atomic<int64_t> program_runs{0};

  void count_fallback(const std::string& op);
  std::map<std::string, int64_t> fallbacks() const;
  std::map<std::string, int64_t> op_counts() const;
  void reset();

 private:
  mutable std::mutex mu_;
  std::map<std::string, int64_t> fallbacks_;
};

Metrics& metrics();

}  // namespace torchtpu::eager
