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
};

// Runs functions on a fixed set of threads.
class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  void submit(std::function<void()> fn);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

class Executor {
 public:
  // `on_error` records a failed task's error for the next sync point.
  explicit Executor(std::function<void(std::shared_ptr<const DeviceError>)> on_error);
  ~Executor();
  // `may_run_here`: the caller is about to wait for the task (Debug Eager);
  // if nothing is ahead of it, it runs on the calling thread.
  void submit(std::unique_ptr<Task> t, bool may_run_here = false);
  // Returns once every task submitted so far has run (not: finished on the
  // device).
  void drain();
  // Waits for the device to finish everything executed so far.
  void wait_device();
  // Runs what is queued, then stops the thread; later tasks run on the
  // submitting thread, one at a time.
  void stop();

 private:
  // An execution the device may still be running: its completion event and
  // the executable (kept alive until it is done). `checked`: its error, if
  // any, was reported already.
  struct InFlight {
    std::shared_ptr<pjrt::Event> done;
    pjrt::ExecutablePtr exe;
    std::atomic<bool> checked{false};
  };
  void loop();
  void run(Task& t);
  void run_here(std::unique_ptr<Task> t, std::unique_lock<std::mutex>& lock);
  // Reports the execution's error once.
  void check(InFlight& f);
  void track(std::shared_ptr<pjrt::Event> done, pjrt::ExecutablePtr exe);
  std::function<void(std::shared_ptr<const DeviceError>)> on_error_;
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<std::unique_ptr<Task>> queue_;
  // busy_: the executor thread runs a task; inline_: a submitting thread
  // runs one (the queue waits for it, keeping program order); exited_: the
  // thread has drained the queue after stop().
  bool busy_ = false, inline_ = false, stop_ = false, exited_ = false, sleeping_ = false;
  std::mutex events_mu_;
  std::vector<std::shared_ptr<InFlight>> in_flight_;
  std::thread thread_;
};

// The message for an error raised by `sites` (one op, or a fused graph).
std::string describe_failure(const std::vector<OpSite>& sites, const std::string& what);

}  // namespace torchtpu::eager
