// The c10d backend "tpu_dist" for tensors on the tpu device.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>

#include "distributed/consensus.h"
#include "distributed/local_group.h"
#include "distributed/staging.h"

namespace torchtpu::distributed {

// Process-wide counts shown in torchtpu.debug.metrics().
struct Stats {
  std::atomic<int64_t> collectives{0};         // collectives run by any tpu_dist group
  std::atomic<int64_t> host_staged{0};         // of which staged through the host backend
  std::atomic<int64_t> host_staged_bytes{0};   // device bytes copied to and from the host for them
  std::atomic<int64_t> point_to_point{0};      // send and recv
  std::atomic<int64_t> device_programs{0};     // replicated collective programs run (thread ranks)
  std::atomic<int64_t> fused_programs{0};      // of which Fused Eager programs ending in their collective
  std::atomic<int64_t> staged_programs{0};     // Fused collectives run apart from their program (per rank, failures too)
};
Stats& stats();

// TpuBackend: c10d's Backend for tpu tensors. Between processes, every collective first agrees
// with the other ranks on its signature (Consensus), then runs. Across
// processes on a plugin without cross-process collectives (XLA:CPU) it stages
// the tensors through `host`, a Gloo backend of the same ranks: copy to the
// host, run, copy the results back into the tpu tensors. Reductions Gloo lacks
// (average, pre-multiplied sum) are composed on the host copies. CPU tensors
// of a "tpu_dist" group run on the same Gloo backend after the same agreement.
// all_reduce, all_gather_into_tensor and reduce_scatter_tensor of device
// tensors (outside Debug Eager) return once agreed and queued, as on a CUDA
// stream: the copies and Gloo run on the group's StagingQueue, and programs
// reading the results wait for them. The others complete before their Work
// is returned (its future holds the outputs); send and recv complete when
// their Work is waited for.
class TpuBackend final : public c10d::Backend {
 public:
  TpuBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
             std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::Backend> host);
  // Ranks as threads of this process (LocalGroup): collectives run as
  // replicated XLA programs over the ranks' devices, without a host backend.
  TpuBackend(std::shared_ptr<LocalGroup> local, int rank, std::chrono::milliseconds timeout);

  const std::string getBackendName() const override { return "tpu_dist"; }
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override;
  uint64_t getSequenceNumberForGroup() override;
  void setSequenceNumberForGroup() override {}

  using Tensors = std::vector<at::Tensor>;
  using Work = c10::intrusive_ptr<c10d::Work>;

  Work broadcast(Tensors& tensors, const c10d::BroadcastOptions& opts) override;
  Work allreduce(Tensors& tensors, const c10d::AllreduceOptions& opts) override;
  Work allreduce_coalesced(Tensors& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  Work reduce(Tensors& tensors, const c10d::ReduceOptions& opts) override;
  Work allgather(std::vector<Tensors>& outputs, Tensors& inputs, const c10d::AllgatherOptions& opts) override;
  Work _allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) override;
  Work allgather_coalesced(std::vector<Tensors>& outputs, Tensors& inputs,
                           const c10d::AllgatherOptions& opts) override;
  Work allgather_into_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                       const c10d::AllgatherOptions& opts) override;
  Work gather(std::vector<Tensors>& outputs, Tensors& inputs, const c10d::GatherOptions& opts) override;
  Work scatter(Tensors& outputs, std::vector<Tensors>& inputs, const c10d::ScatterOptions& opts) override;
  Work reduce_scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                      const c10d::ReduceScatterOptions& opts) override;
  Work _reduce_scatter_base(at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  Work reduce_scatter_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                       const c10d::ReduceScatterOptions& opts) override;
  Work alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                     std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) override;
  Work alltoall(Tensors& outputs, Tensors& inputs, const c10d::AllToAllOptions& opts) override;
  Work send(Tensors& tensors, int dst, int tag) override;
  Work recv(Tensors& tensors, int src, int tag) override;
  Work barrier(const c10d::BarrierOptions& opts) override;
  void startCoalescing() override;
  Work endCoalescing() override;

 private:
  // Agrees on `op` over `tensors` with the other ranks (see Consensus).
  // Unless the collective is `queued` on the StagingQueue, the queue's jobs
  // run first: this one talks to the host backend directly.
  void agree(const std::string& op, const Tensors& tensors, const std::string& extra = "", bool queued = false);
  // What a queued collective's errors say: op, rank and sequence number.
  std::string failure_text(const char* op) const;
  // Runs `work` on the host backend and waits for it; names the op on error.
  void run(const char* op, const Work& work);
  // An all-reduce of `tensors` in place: thread ranks run it as a program;
  // across processes `launch` runs it on the host copies with the host's
  // reduction.
  Work reduce_all(const char* op, c10d::OpType type, Tensors& tensors, const c10d::ReduceOp& reduction,
                  const std::function<Work(Tensors&, const c10d::ReduceOp&)>& launch);
  // Returns `work`, kept for endCoalescing() inside a coalesced group.
  Work keep(Work work);

  // Which collectives thread ranks support; raises naming `op` otherwise.
  void local_only(const char* op) const;
  // Host copies of device tensors for a collective that is waited for
  // before it returns: kept buffers of the same dtype and size are reused
  // (a fresh large host allocation costs page faults on every call).
  Tensors staged(const Tensors& tensors);

  std::unique_ptr<Consensus> consensus_;      // across processes
  c10::intrusive_ptr<c10d::Backend> host_;    // across processes
  std::shared_ptr<LocalGroup> local_;         // thread ranks
  std::chrono::milliseconds timeout_;
  bool coalescing_ = false;
  std::vector<Work> coalesced_;
  bool on_device_ = false;  // the current op's tensors are on tpu (else CPU: Gloo's own)
  std::map<std::pair<int, int64_t>, at::Tensor> staging_;  // by dtype and elements
  int64_t staging_bytes_ = 0;
  // Across processes; last, so that its queued jobs finish (destruction)
  // while the host backend lives.
  std::unique_ptr<StagingQueue> queue_;
};

}  // namespace torchtpu::distributed
