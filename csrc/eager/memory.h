// What each device's live storages hold, for torch.tpu.memory_* and the
// allocation check: bytes and allocations now, at their peak (since the last
// reset), and in total allocated and freed, plus out-of-memory refusals.
// Lock-free; torch-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace torchtpu::eager {

// One device's counters. All atomic: storages are created and freed on any
// thread.
class MemoryLedger {
 public:
  struct Snapshot {
    int64_t bytes = 0, peak_bytes = 0, allocated_bytes = 0, freed_bytes = 0;
    int64_t count = 0, peak_count = 0, allocations = 0, frees = 0;
    int64_t ooms = 0;
  };

  void allocated(int64_t nbytes);
  void freed(int64_t nbytes);
  void refused() { ooms_.fetch_add(1, std::memory_order_relaxed); }
  int64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  Snapshot snapshot() const;
  // The peaks restart from what is held now.
  void reset_peak();
  // The totals (allocated, freed, refusals) restart from zero.
  void reset_totals();

 private:
  static void raise_to(std::atomic<int64_t>& peak, int64_t v);
  std::atomic<int64_t> bytes_{0}, peak_bytes_{0}, allocated_bytes_{0}, freed_bytes_{0};
  std::atomic<int64_t> count_{0}, peak_count_{0}, allocations_{0}, frees_{0};
  std::atomic<int64_t> ooms_{0};
};

}  // namespace torchtpu::eager
