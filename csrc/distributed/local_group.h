// Ranks as threads of one process: collectives as replicated XLA programs.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eager/replica_group.h"
#include "ir/graph_key.h"
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
//
// In Fused Eager a collective joins the rank's pending program instead: the
// program that computes its input ends with the collective, and when every
// rank brings the same program (SPMD) it is compiled once for all the ranks'
// devices and run as one execution, computation and communication together.
// Ranks whose programs differ (one ran extra ops, MPMD) each run their
// program without the collective, then the collective alone, as above.
// Inside torch.compile's capture a collective is a node of the captured
// program, which then runs with the other ranks' on every call
// (ReplicaGroup); there the ranks must compile the same program.
class LocalGroup : public eager::ReplicaGroup, public std::enable_shared_from_this<LocalGroup> {
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

  // Fused Eager: `kind` over `in` as the last node of this rank's pending
  // program (see above). Returns the flat result (a new tensor), or an
  // undefined tensor when the collective cannot join the program (another
  // mode, an empty tensor, a capture joined to another group): the caller
  // then runs it alone.
  at::Tensor fused(int rank, ops::Collective kind, ops::Reduction reduction, const std::string& signature,
                   const at::Tensor& in, std::chrono::milliseconds timeout);

  void run_program(int rank, std::unique_ptr<eager::Task> task, const std::string& signature) override;

  // Programs run, for tests and metrics.
  int64_t executions() const { return executions_; }
  // The StableHLO text of every collective program compiled in this process.
  static std::vector<std::string> compiled_programs();

  explicit LocalGroup(int size) : size_(size), entries_(size), programs_(size) {}

 private:
  struct Entry {
    std::string signature;
    int device = -1;
    pjrt::BufferPtr input;
  };
  // A rank's pending program ending in a collective (Fused Eager).
  struct Program {
    eager::Task* task = nullptr;
    ir::GraphKey key;
  };
  // Deposits rank's entry; the last rank to arrive checks the signatures and
  // runs `last` under the lock. Raises the group's failure.
  void gather(std::unique_lock<std::mutex>& lock, int rank, Entry entry, const std::function<void()>& last,
              std::chrono::milliseconds timeout);
  // Deposits rank's input and returns its output (null for a barrier).
  pjrt::BufferPtr meet(int rank, Entry entry, ops::Collective kind, ops::Reduction reduction, ir::DType dtype,
                       int64_t numel, std::chrono::milliseconds timeout);
  void execute(ops::Collective kind, ops::Reduction reduction, ir::DType dtype, int64_t numel);
  // Deposits rank's program; returns whether it ran as one replicated
  // execution with the other ranks' (else the caller runs it staged; `apart`
  // says why).
  bool meet_program(int rank, Entry entry, const Program& program, std::chrono::milliseconds timeout,
                    std::string* apart = nullptr);
  // The replicated execution of the programs deposited, if they are one.
  bool run_programs();
  std::vector<int64_t> devices() const;

  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int arrived_ = 0;
  std::vector<Entry> entries_;
  std::vector<pjrt::BufferPtr> results_;
  std::vector<const Program*> programs_;
  bool programs_ran_ = false;
  std::string programs_apart_;  // why the last programs did not run as one
  std::string failed_;  // set once: every later collective raises it
  int64_t executions_ = 0;
  std::atomic<int64_t> timeout_ms_{300000};  // the last timeout a collective gave (for compiled programs)
};

}  // namespace torchtpu::distributed
