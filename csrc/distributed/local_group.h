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
#include "eager/slot.h"
#include "ir/graph_key.h"
#include "ops/collective.h"
#include "pjrt/pjrt.h"

namespace torchtpu::distributed {

// LocalGroup: the ranks of a group that are threads of this process, each on
// its own tpu device of the one PJRT client. A collective is one program of
// StableHLO collectives (ops/collective.h) compiled for one replica per rank's
// device and run once on all of them: each rank's thread deposits its input;
// the last to arrive runs the program and every rank takes its output.
//
// Every collective is first *issued*: each rank names it (op, dtype, shape,
// eager mode) and waits until every rank has issued its collective of the
// same number. Ranks that issue different collectives all raise there,
// naming each side; one that does not issue within the timeout makes the
// others raise; the group stays failed after either.
//
// In Fused Eager a collective is a node of the rank's pending program, which
// goes on past it: the program is materialized where the rank's code says
// (a sync point, the end of a backward pass, a loop boundary) and then runs
// with the other ranks' programs (run_fused, in the device's program order:
// eager/group_queue.h). When every rank's program starts with the same
// collective and is the same program (SPMD), it is compiled once for all the
// ranks' devices and run as one execution, computation and communication
// together. Otherwise (a rank ran extra ops, MPMD, or cut its program
// elsewhere) each rank runs its program in stages around its collectives
// (ir/split.h), each collective alone as above. Programs meet in *rounds*,
// which every rank takes in the same order: per collective, a proposal (the
// program it starts, if any), then, unless the proposal ran the programs
// together, its data. A rank whose program another rank waits for is asked
// to materialize it (pull). Inside torch.compile's capture a collective is a
// node of the captured program, which then runs with the other ranks' on
// every call (ReplicaGroup::run_program); there the ranks must compile the
// same program.
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

  // Fused Eager: `kind` over `in` as a node of this rank's pending program
  // (see above). Returns the flat result (a new tensor), or an undefined
  // tensor when the collective cannot join the program (another mode, an
  // empty tensor, a capture joined to another group): the caller then runs
  // it alone.
  at::Tensor fused(int rank, ops::Collective kind, ops::Reduction reduction, const std::string& signature,
                   const at::Tensor& in, std::chrono::milliseconds timeout);

  void run_program(int rank, std::unique_ptr<eager::Task> task, const std::string& signature) override;
  void run_fused(std::unique_ptr<eager::Task> task) override;

  // Programs run, for tests and metrics.
  int64_t executions() const { return executions_; }
  // The StableHLO text of every collective program compiled in this process.
  static std::vector<std::string> compiled_programs();

  explicit LocalGroup(int size) : size_(size), entries_(size), issued_(size, 0), devices_(size, -1) {}

 private:
  // A rank's program holding collectives (Fused Eager, or compiled).
  struct Program {
    eager::Task* task = nullptr;
    ir::GraphKey key;
  };
  // What a rank brings to a round.
  struct Entry {
    enum Kind { kNone, kData, kPropose, kProgram } kind = kNone;
    std::string signature;
    int device = -1;
    pjrt::BufferPtr input;            // kData (null for a barrier)
    const Program* program = nullptr; // kPropose (null: none starts here), kProgram
    int64_t seq = 0;                  // the collective's number
    static Entry of(std::string signature, int device, pjrt::BufferPtr input) {
      Entry e;
      e.signature = std::move(signature);
      e.device = device;
      e.input = std::move(input);
      return e;
    }
  };
  // How a collective was issued (ranks must agree).
  enum class Mode { kEager, kFused, kCompiled };
  // Names rank's next collective and waits until every rank issued its
  // collective of that number (see above); returns the number.
  int64_t issue(int rank, const std::string& signature, Mode mode, int device, std::chrono::milliseconds timeout);
  // Deposits rank's entry for the current round; the last rank to arrive
  // checks the signatures and runs `last` under the lock. Raises the
  // group's failure.
  void gather(std::unique_lock<std::mutex>& lock, int rank, Entry entry, const std::function<void()>& last,
              std::chrono::milliseconds timeout);
  // A collective run alone: issued, then (once the rank's programs holding
  // earlier collectives ran) its rounds; returns rank's output (null for a
  // barrier).
  pjrt::BufferPtr meet(int rank, Entry entry, ops::Collective kind, ops::Reduction reduction, ir::DType dtype,
                       int64_t numel, std::chrono::milliseconds timeout);
  pjrt::BufferPtr data_round(int rank, Entry entry, ops::Collective kind, ops::Reduction reduction, ir::DType dtype,
                             int64_t numel, std::chrono::milliseconds timeout);
  void execute(ops::Collective kind, ops::Reduction reduction, ir::DType dtype, int64_t numel);
  // A proposal round (kPropose) or a compiled program's round (kProgram):
  // returns whether the programs ran as one replicated execution (else
  // `apart` says why).
  bool program_round(int rank, Entry entry, std::chrono::milliseconds timeout, std::string* apart = nullptr);
  // The replicated execution of the programs deposited, if they are one.
  bool run_programs();
  // Runs rank's Fused Eager program in stages around its collectives; `error`:
  // the first collective already failed with it.
  void stage(std::unique_ptr<eager::Task> task, std::string error);
  // Materializes the pending programs holding collectives of `device` (if
  // its lock is free).
  static void pull(int device);
  // Materializes them and waits until they ran (the device's GroupQueue is
  // idle): the rounds of a collective run alone come after theirs.
  static void run_own(int device);
  std::vector<int64_t> devices() const;

  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;  // rounds completed
  int arrived_ = 0;
  std::vector<Entry> entries_;
  std::vector<pjrt::BufferPtr> results_;
  bool programs_ran_ = false;
  std::string programs_apart_;  // why the last programs did not run as one
  // Issued collectives: each rank's count, and the signatures of those not
  // yet issued by every rank (by number).
  struct Issued {
    std::vector<std::string> signature;
    std::vector<Mode> mode;
    int count = 0, waiting = 0;
  };
  std::vector<int64_t> issued_;
  std::map<int64_t, Issued> issues_;
  std::vector<int> devices_;      // each rank's device, once known
  std::string failed_;  // set once: every later collective raises it
  int64_t executions_ = 0;
  std::atomic<int64_t> timeout_ms_{300000};  // the last timeout a collective gave (for compiled programs)
};

// Shared by the group's two source files.
namespace detail {
// The executable of the program `key` for one replica per device of
// `devices`, compiled from text() on first use; kept for the process.
pjrt::ExecutablePtr replicated(const std::string& key, const std::function<std::string()>& text,
                               const std::vector<int64_t>& devices);
// The CPU client runs one collective launch at a time: groups take turns.
std::mutex& launch_mu();
// A run for values computed outside the executor, once they are.
std::shared_ptr<eager::Run> finished_run();
// Every program text `replicated` compiled.
std::vector<std::string> program_texts();
// Lets other Python threads run while this one waits for the other ranks
// (the other ranks are Python threads).
class WithoutGil {
 public:
  WithoutGil();
  ~WithoutGil();
  WithoutGil(const WithoutGil&) = delete;
  WithoutGil& operator=(const WithoutGil&) = delete;

 private:
  void* state_;
};
}  // namespace detail

}  // namespace torchtpu::distributed
