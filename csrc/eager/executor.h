// The executor runs tasks in order (wait for the executable, execute, fill the
// output slots). A pool compiles executables off the Python thread; a task
// whose executable is still compiling waits in the executor's queue, so the
// Python thread never waits for a compiler; the executor's own thread hands
// programs to PJRT in order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "eager/replica_group.h"
#include "eager/slot.h"
#include "ir/graph.h"
#include "ir/graph_key.h"

namespace torchtpu::eager {

// One program to run: the graph (its outputs and donations set), its
// arguments in parameter order, and the slots its outputs fill.
struct Task {
  struct Arg {
    SlotPtr slot;            // a storage's value
    pjrt::BufferPtr scalar;  // or a scalar argument
  };
  std::shared_ptr<const ir::Graph> graph;
  ir::GraphKey key;
  pjrt::ExecutablePtr ready_exe;                // found in memory, or
  std::shared_future<pjrt::ExecutablePtr> exe;  // being compiled by the pool
  std::vector<Arg> args;
  std::vector<SlotPtr> outputs;
  std::vector<OpSite> sites;  // the ops the graph holds, in issue order
  int device = 0;
  RunPtr run = std::make_shared<Run>();
  int64_t bytes = 0;  // of its outputs (for the queue's bound)
  // Fused Eager: the collectives its graph holds (it then runs with the
  // other ranks' programs, not on the executor alone).
  std::vector<CollectiveCall> collectives;
  // A bucketed program's pad or unpad (buckets.h): compiles per size, cheaply,
  // and is not reported as a recompilation of its site.
  bool helper = false;
  // A bucketed program: the bucket it serves (0: an exact program).
  int64_t bucket = 0;
  // Strict Eager: the op's place in the op stream (its user site, its op and
  // the ops the site issued just before it), which tells apart ops of one
  // structure for bucketing (buckets.h); 0 for a graph of many ops.
  uint64_t place = 0;
};

// Runs functions on a fixed set of threads; after stop(), on the caller.
class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool() { stop(); }
  void submit(std::function<void()> fn);
  // Runs what is queued and joins the threads.
  void stop();

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// Runs tasks in submission order on its own thread and keeps the programs
// the device is still running. A program is settled (its Run learns success
// or its error) in execution order, by whoever needs it: a sync point, a
// thread waiting for room in the queue, or the executor between tasks. An
// execution error is recorded (on_error) once, by the program where it
// arose; programs that inherit it from a failed input settle with the same
// error and record nothing.
//
// The queue is bounded: at most max_ops programs, and max_bytes of their
// outputs, queued or running; admit() blocks the issuing thread until there
// is room, like an accelerator's launch queue. Nothing here takes a device
// lock, so a thread may wait in admit() or at a sync point while holding one.
class Executor {
 public:
  explicit Executor(std::function<void(std::shared_ptr<const DeviceError>)> on_error);
  ~Executor();
  // `may_run_here`: the caller is about to wait for the task (Debug Eager);
  // if nothing is ahead of it, it runs on the calling thread.
  void submit(std::unique_ptr<Task> t, bool may_run_here = false);
  // Blocks while the queue is full (returns at once after stop()).
  void admit();
  void set_limits(int64_t max_ops, int64_t max_bytes);
  int64_t max_ops() const { return max_ops_; }
  int64_t max_bytes() const { return max_bytes_; }
  // Programs and output bytes queued or running now.
  int64_t pending_ops() const { return pending_ops_; }
  int64_t pending_bytes() const { return pending_bytes_; }
  // Returns once every task submitted so far has run (not: finished on the
  // device).
  void drain();
  // Waits for the device to finish everything executed so far, settling it.
  void settle_all();
  // The run of the last task submitted (null before the first): events
  // record it as the compute queue's position.
  RunPtr last_run() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_run_;
  }
  // Waits until the program of `r` has been computed and returns its error
  // (null on success).
  std::shared_ptr<const DeviceError> outcome(Run& r);
  // Runs what is queued, then stops the thread; later tasks run on the
  // submitting thread, one at a time.
  void stop();

 private:
  // An executed program the device may still be running; the executable is
  // kept alive until it is done. `inputs`: the runs of its arguments that
  // had not settled, to tell an inherited error from its own.
  struct InFlight {
    uint64_t seq;
    RunPtr run;
    pjrt::ExecutablePtr exe;
    std::vector<RunPtr> inputs;
    std::vector<OpSite> sites;
    int64_t bytes;
  };
  void loop();
  void run(Task& t);
  void run_here(std::unique_ptr<Task> t, std::unique_lock<std::mutex>& lock);
  // Settles executed programs in order: through `seq`; or those already
  // finished, without waiting, if no one else is settling.
  void settle_through(uint64_t seq);
  void settle_ready();
  void settle(InFlight& f);
  void finished(int64_t bytes);
  std::function<void(std::shared_ptr<const DeviceError>)> on_error_;
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_, room_cv_;
  std::deque<std::unique_ptr<Task>> queue_;
  RunPtr last_run_;
  // busy_: the executor thread runs a task; inline_: a submitting thread
  // runs one (the queue waits for it, keeping program order); exited_: the
  // thread has drained the queue after stop().
  bool busy_ = false, inline_ = false, stop_ = false, exited_ = false, sleeping_ = false;
  std::mutex settle_mu_;  // one settler at a time; taken before events_mu_ and mu_
  std::mutex events_mu_;  // in_flight_ and seq_
  std::deque<std::unique_ptr<InFlight>> in_flight_;
  uint64_t seq_ = 0;
  std::atomic<int64_t> pending_ops_{0}, pending_bytes_{0};
  std::atomic<int64_t> max_ops_{1000}, max_bytes_{int64_t{1} << 30};
  std::atomic<int> waiting_for_room_{0};
  std::thread thread_;
};

// The message for an error raised by `sites` (one op, or a fused graph).
std::string describe_failure(const std::vector<OpSite>& sites, const std::string& what);

}  // namespace torchtpu::eager
