// What each device's live storages hold, for torch.tpu.memory_* and the
// allocation check: bytes and allocations now, at their peak (since the last
// reset), and in total allocated and freed, plus out-of-memory refusals.
// Counters are lock-free; the list of live storages (for memory
// snapshots) and the optional allocation history take a short lock.
// Torch-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace torchtpu::eager {

// A live storage as the ledger lists it: linked into its device's list
// while it lives (StorageValue embeds one).
struct LiveBlock {
  LiveBlock* prev = nullptr;
  LiveBlock* next = nullptr;
  int64_t nbytes = 0;
  uint64_t address = 0;
};

// One device's counters. All atomic: storages are created and freed on any
// thread.
class MemoryLedger {
 public:
  // One allocation or free while the history is recorded
  // (torch.tpu.memory._record_memory_history).
  struct Event {
    bool alloc;
    uint64_t address;
    int64_t nbytes;
    int64_t time_us;
  };

  struct Snapshot {
    int64_t bytes = 0, peak_bytes = 0, allocated_bytes = 0, freed_bytes = 0;
    int64_t count = 0, peak_count = 0, allocations = 0, frees = 0;
    int64_t ooms = 0;
  };

  void allocated(LiveBlock* b);
  void freed(LiveBlock* b);
  // The live storages (address, bytes), oldest first.
  std::vector<std::pair<uint64_t, int64_t>> live() const;
  // Keeps the last `max_entries` allocations and frees (0 stops and clears).
  void record_history(int64_t max_entries);
  std::vector<Event> history() const;
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
  mutable std::mutex live_mu_;
  LiveBlock head_;  // circular list; head_ itself is no storage
  bool linked_ = false;
  std::atomic<int64_t> history_max_{0};
  std::deque<Event> history_;
  void record(bool alloc, const LiveBlock* b);
};

}  // namespace torchtpu::eager
