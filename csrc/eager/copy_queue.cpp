#include "eager/copy_queue.h"

#include <chrono>

namespace torchtpu::eager {

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void CopyMark::wait() {
  if (done()) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done(); });
}

void CopyMark::reach() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ns_.store(steady_now_ns(), std::memory_order_release);
  }
  cv_.notify_all();
}

CopyQueue::CopyQueue() : thread_([this] { loop(); }) {}

void CopyQueue::submit(std::function<void()> copy) {
  copies_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_) {
      queue_.push_back(std::move(copy));
      cv_.notify_all();
      return;
    }
  }
  copy();
}

std::shared_ptr<CopyMark> CopyQueue::mark() {
  auto m = std::make_shared<CopyMark>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_ && (busy_ || !queue_.empty())) {
      queue_.push_back([m] { m->reach(); });
      cv_.notify_all();
      return m;
    }
  }
  m->reach();
  return m;
}

void CopyQueue::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<void()> f = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    f();  // copies catch their own errors (they fail the destination's slot)
    lock.lock();
    busy_ = false;
  }
}

void CopyQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace torchtpu::eager
