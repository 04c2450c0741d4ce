// Ranks as threads of one process: collectives as replicated XLA programs.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ops/collective.h"
#include "pjrt/pjrt.h"

namespace torchtpu::distributed {

// LocalGroup: the ranks of a group that are threads of this process, each on
// its own tpu device of the one PJRT client. A collective is one program of
// StableHLO collectives (ops/collective.h) compiled for one replica per rank's
// device and run once on all of them: each rank's thread deposits its input;
// the last to arrive runs the program and every rank takes its output. Ranks
// that deposit different signatures all raise naming each side; one that does
// not arrive within the timeout makes the others raise, and the group stays
// failed after either.
class LocalGroup {
 public:
  // The process-wide group `name` of `size` ranks (created on first use).
  static std::shared_ptr<LocalGroup> get(const std::string& name, int size);
  int size() const { return size_; }

  // The in-place and tensor forms of c10d's collectives over tpu tensors.
  void all_reduce(int rank, const at::Tensor& t, const c10d::ReduceOp& op, std::chrono::milliseconds timeout);
  void all_gather_into(int rank, const at::Tensor& out, const at::Tensor& in, std::chrono::milliseconds timeout);
  void reduce_scatter_into(int rank, const at::Tensor& out, const at::Tensor& in, const c10d::ReduceOp& op,
                           std::chrono::milliseconds timeout);
  void all_to_all_into(int rank, const at::Tensor& out, const at::Tensor& in, std::chrono::milliseconds timeout);
  void broadcast(int rank, const at::Tensor& t, int root, std::chrono::milliseconds timeout);
  void barrier(int rank, std::chrono::milliseconds timeout);

  // Programs run, for tests and metrics.
  int64_t executions() const { return executions_; }
  // The StableHLO text of every collective program compiled in this process.
  static std::vector<std::string> compiled_programs();

  explicit LocalGroup(int size) : size_(size), entries_(size) {}

 private:
  struct Entry {
    std::string signature;
    int device = -1;
    pjrt::BufferPtr input;
  };
  // Deposits rank's input and returns its output (null for a barrier).
  pjrt::BufferPtr meet(int rank, Entry entry, ops::Collective kind, ops::Reduction reduction, ir::DType dtype,
                       int64_t numel, std::chrono::milliseconds timeout);
  void execute(ops::Collective kind, ops::Reduction reduction, ir::DType dtype, int64_t numel);

  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int arrived_ = 0;
  std::vector<Entry> entries_;
  std::vector<pjrt::BufferPtr> results_;
  std::string failed_;  // set once: every later collective raises it
  std::map<std::string, pjrt::ExecutablePtr> programs_;
  int64_t executions_ = 0;
};

}  // namespace torchtpu::distributed
