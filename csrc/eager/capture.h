// Capture and Program: the path of torch.compile (DESIGN decision 12).
//
// While a Capture is active on a thread, that thread's ops on the capture's
// device append to the capture's own graph, never cut and never queued; the
// kernels are the eager ones. finish() turns the graph into a Program: one
// executable whose arguments are the compiled function's inputs (by
// position), values it read that are not inputs (constants), and scalars
// (random keys are drawn again on every run), and whose outputs are the
// storages the caller names plus every input it overwrote.
//
// Program::run is the hot path of a compiled call: it hands the inputs'
// current values to one execution and returns the output slots. No op
// dispatch, no graph building, no graph hashing. A graph captured again at
// other sizes (a dynamic graph's new signature) runs as its bucket's program
// when it buckets (DESIGN decision 17), so one program serves the bucket.
//
// A sync point inside a capture (a host read of a value it computes, a
// kernel that needs a device value on the host) abandons it: what it
// captured is queued as an ordinary program, later ops run in the current
// eager mode, and finish() returns null so the caller runs the function
// eagerly from then on. Guarded by the device lock. A capture is finished
// or destroyed on the thread that began it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "eager/buckets.h"
#include "eager/fused_graph.h"
#include "eager/replica_group.h"

namespace torchtpu::eager {

class Program {
 public:
  struct Arg {
    enum class Kind { kInput, kConstant, kScalar, kDrawn } kind = Kind::kScalar;
    int input = -1;          // kInput
    SlotPtr constant;        // kConstant
    pjrt::BufferPtr scalar;  // kScalar
    RedrawRef drawn;         // kDrawn
    ir::DType dtype = ir::DType::kF32;
  };
  // An input the program overwrites: its storage takes output `output`.
  struct Mutation {
    int input;
    int output;
    ir::DType dtype;
  };

  // Runs on the current values of `inputs` (the storages given to finish(),
  // in order). Returns one slot per requested output; installs the new
  // values of the overwritten inputs. Returns no slots and runs nothing
  // when an input holds no value (the caller runs the function eagerly).
  // `issuer`: the thread its errors belong to (slot.h). A program holding
  // collectives of a ReplicaGroup is not queued: its task goes to `grouped`,
  // for the caller to hand to group() once it holds no device lock.
  std::vector<SlotPtr> run(const std::vector<StorageValue*>& inputs, uint64_t issuer, bool* ran,
                           std::unique_ptr<Task>* grouped = nullptr);
  // The group whose collectives the program holds (else null), this rank's
  // place in it, and the collectives' signature.
  ReplicaGroup* group() const { return group_.get(); }
  int group_rank() const { return group_rank_; }
  const std::string& collectives() const { return collectives_; }

  int device() const { return device_; }
  int64_t ops() const { return ops_; }
  size_t num_requested() const { return requested_; }
  ir::DType output_dtype(size_t i) const { return output_dtypes_.at(i); }
  const ir::Graph& graph() const { return *graph_; }
  const std::vector<Arg>& args() const { return args_; }

 private:
  friend class Capture;
  std::shared_ptr<const ir::Graph> graph_;
  ir::GraphKey key_;
  pjrt::ExecutablePtr exe_;  // null for a grouped or bucketed program
  // Runs as its bucket's program, between a pad and an unpad program
  // (buckets.h): the graph was captured before at other sizes.
  std::optional<Buckets::Bucketed> bucketed_;
  std::shared_ptr<ReplicaGroup> group_;
  int group_rank_ = -1;
  std::string collectives_;
  std::vector<Arg> args_;
  std::vector<ir::DType> output_dtypes_;
  size_t requested_ = 0;
  std::vector<Mutation> mutations_;
  std::vector<OpSite> sites_;
  int device_ = 0;
  int64_t ops_ = 0;
  int64_t bytes_ = 0;
};

class Capture {
 public:
  // Begins on this thread for `device`; the device's pending fused work is
  // queued first.
  explicit Capture(int device);
  // An unfinished capture queues what it captured.
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // Ends the capture. `inputs`: the compiled function's input storages, in
  // argument order (null where an argument is not a storage); `outputs`: the
  // other storages its results live in. The program is compiled and run
  // once for this call: every storage the capture wrote takes its value.
  // Null when the capture was abandoned (the work already ran) or captured
  // nothing.
  std::shared_ptr<Program> finish(const std::vector<StorageValue*>& inputs, const std::vector<StorageValue*>& outputs,
                                  uint64_t issuer);
  bool abandoned() const { return abandoned_; }
  const std::string& why() const { return why_; }
  int device() const { return device_; }

  // The capture this thread builds for `device`, or null.
  static Capture* active(int device);
  // Sync points: the captures (of any thread) that hold `s`, or all of a
  // device's, queue their work and stop capturing. Device lock held.
  static void abandon_holding(const StorageValue* s, const char* why);
  static void abandon_all(int device, const char* why);
  // A host round trip on this thread (a host read, a CPU fallback): its
  // captures stop, whatever they hold (a value read from an input would be
  // baked into the program).
  static void abandon_this_thread(const char* why);
  // A storage died or took a new value (StorageValue): every capture graph
  // of its device forgets it. Device lock held.
  static void forget(StorageValue* s);

  FusedGraph& graph() { return graph_; }
  // A collective of `group` (as rank `rank`) joins the capture: the program
  // runs with the other ranks' (ReplicaGroup). False when the capture holds
  // collectives of another group already.
  bool join(std::shared_ptr<ReplicaGroup> group, int rank, const std::string& signature);

 private:
  void abandon(const char* why);
  int device_;
  FusedGraph graph_;
  std::shared_ptr<ReplicaGroup> group_;
  int group_rank_ = -1;
  std::string collectives_;
  Capture* outer_;
  bool abandoned_ = false, finished_ = false;
  std::string why_;
};

}  // namespace torchtpu::eager
