// Host-staged collectives that return before they run, as a collective on a
// CUDA stream does: the device values they read and write are tracked by
// their Slots, so the issuing thread goes on recording while the copies and
// the host backend's collective run on a thread of their own.
#pragma once

#include <ATen/ATen.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eager/copy_queue.h"
#include "eager/slot.h"

namespace torchtpu::distributed {

// StagingQueue: one per host-staged process group. A job reads its inputs'
// device values once they are computed, copies them to the host, runs the
// host collective there (`run`, which returns when it is done) and uploads
// the results into fresh slots that programs reading the outputs wait for.
// Jobs run in issue order, so every rank hands the host backend the same
// sequence; collectives that talk to the host backend directly call drain()
// first. A job that fails fails its output slots (a read of them raises);
// after it the group's queued jobs skip the host backend and fail theirs (its
// sequence is out of step with the peers'), and every later collective of
// the group raises (check()). At most kMaxQueued jobs wait at a time:
// submit() blocks while that many do, which bounds the memory their inputs
// hold, as a launch queue does.
class StagingQueue {
 public:
  using HostRun = std::function<void(std::vector<at::Tensor>& in, std::vector<at::Tensor>& out)>;
  static constexpr int kMaxQueued = 16;

  StagingQueue();
  ~StagingQueue();
  StagingQueue(const StagingQueue&) = delete;
  StagingQueue& operator=(const StagingQueue&) = delete;
  // Waits until every process group's queued jobs have run (what the
  // device's synchronize() waits for besides its programs; their errors
  // are raised where their results are read).
  static void wait_all();

  // Whether a collective over `tensors` may run here: device tensors outside
  // Debug Eager and outside a torch.compile capture.
  static bool applies(const std::vector<at::Tensor>& tensors);

  // Queues `run` over flat host copies of `inputs` (device tensors), with
  // flat host outputs of each of `outputs`' size and dtype, whose results
  // then become the values of `outputs` (written in
  // place: a whole contiguous storage takes the new value, any other view
  // is copied into). `op` (the c10d op) and `what` name the collective in
  // errors.
  void submit(const char* op, const std::string& what, const std::vector<at::Tensor>& inputs,
              const std::vector<at::Tensor>& outputs, HostRun run);
  // Returns once every queued job has run; raises the first failure.
  void drain();
  // Raises if a job failed (naming it).
  void check() const;

 private:
  void fail(const std::string& why);  // the first failure stays
  mutable std::mutex mu_;
  std::condition_variable room_;
  int queued_ = 0;  // submitted jobs not finished
  std::string failed_;
  eager::CopyQueue queue_;  // last: its thread stops (finishing the jobs) before the members above go
};

}  // namespace torchtpu::distributed
