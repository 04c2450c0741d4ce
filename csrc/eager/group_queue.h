// GroupQueue: a device's programs from the first one holding collectives
// (Fused Eager, ranks as threads) on. Such a program runs only with the
// other ranks' programs (ReplicaGroup::run_fused), which come when those
// ranks materialize their graphs; so it is not queued on the executor, whose
// one thread would wait for it, but here, with every program of the device
// issued after it, and a thread of its own hands them on in order: the
// collective program to its group, the others to the executor once the
// programs before them ran. The issuing thread never waits here.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "eager/executor.h"

namespace torchtpu::eager {

class GroupQueue {
 public:
  // `queue` hands a program without collectives to the executor.
  explicit GroupQueue(std::function<void(std::unique_ptr<Task>)> queue) : queue_(std::move(queue)) {}
  ~GroupQueue();
  // Takes `t` when it holds collectives or programs wait here; else leaves
  // it to the caller (returns false).
  bool take(std::unique_ptr<Task>& t);
  // Waits until every program taken has been handed on.
  void wait_idle();

 private:
  void loop();
  std::function<void(std::unique_ptr<Task>)> queue_;
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<std::unique_ptr<Task>> tasks_;
  bool busy_ = false;
  std::thread thread_;
};

}  // namespace torchtpu::eager
