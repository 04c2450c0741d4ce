#include "eager/group_queue.h"

#include <exception>

namespace torchtpu::eager {

GroupQueue::~GroupQueue() {
  if (thread_.joinable()) thread_.detach();  // the runtime lives for the process
}

bool GroupQueue::take(std::unique_ptr<Task>& t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (t->collectives.empty() && !busy_ && tasks_.empty()) return false;
  tasks_.push_back(std::move(t));
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  cv_.notify_all();
  return true;
}

void GroupQueue::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return !busy_ && tasks_.empty(); });
}

void GroupQueue::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return !tasks_.empty(); });
    std::unique_ptr<Task> t = std::move(tasks_.front());
    tasks_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      if (t->collectives.empty()) {
        queue_(std::move(t));
      } else {
        ReplicaGroup* group = t->collectives.front().group.get();
        group->run_fused(std::move(t));
      }
    } catch (const std::exception&) {
      // queue_ failed the program's outputs already (read as its error)
    }
    lock.lock();
    busy_ = false;
    if (tasks_.empty()) idle_cv_.notify_all();
  }
}

}  // namespace torchtpu::eager
