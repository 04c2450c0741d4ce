// Agreement on every collective of a process group before it runs.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace torchtpu::distributed {

// Consensus: each rank posts the signature of its next collective (op,
// reduction, dtype, shapes, root) under the group's sequence number and waits
// for every other rank's. Ranks that issue different sequences (another op,
// shape, dtype, or one rank issuing a collective the others do not) get a
// RuntimeError on every rank naming each side, never a hang or a wrong
// result. A background heartbeat per rank lets the others tell a rank that
// is busy (rank 0 checkpointing) from one that died: a silent rank fails the
// waiting ones within `dead_after`, a live but absent one within `timeout`.
class Consensus {
 public:
  Consensus(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout);
  ~Consensus();
  Consensus(const Consensus&) = delete;
  Consensus& operator=(const Consensus&) = delete;

  // Blocks until all ranks posted collective number sequence()+1; returns
  // its number. Throws c10::Error (RuntimeError) on a mismatch, timeout or
  // dead rank.
  uint64_t agree(const std::string& signature);
  uint64_t sequence() const { return seq_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

  static constexpr std::chrono::seconds kBeatEvery{1};
  static constexpr std::chrono::seconds kDeadAfter{15};

 private:
  uint64_t wait_for_all(uint64_t seq, const std::string& signature);
  struct Heart;
  c10::intrusive_ptr<c10d::Store> store_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  uint64_t seq_ = 0;
  std::shared_ptr<Heart> heart_;
};

}  // namespace torchtpu::distributed
