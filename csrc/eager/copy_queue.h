// The copy queue: host-to-device copies issued with non_blocking=True from
// pinned (or freshly staged) host memory run here, in order, on a thread of
// their own, while the executor runs programs and the issuing thread goes
// on; the destination's Slot is filled when the copy is done (the executor
// waits for such a slot before a program reads it). Marks note a position
// in the queue, for events.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace torchtpu::eager {

// Steady-clock nanoseconds (event and copy-mark times).
int64_t steady_now_ns();

// A position in the copy queue: done once every copy issued before it has
// finished, with the steady-clock time it was reached.
class CopyMark {
 public:
  bool done() const { return done_ns_.load(std::memory_order_acquire) != 0; }
  int64_t done_ns() const { return done_ns_.load(std::memory_order_acquire); }
  void wait();
  void reach();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int64_t> done_ns_{0};
};

class CopyQueue {
 public:
  CopyQueue();
  ~CopyQueue() { stop(); }
  CopyQueue(const CopyQueue&) = delete;
  CopyQueue& operator=(const CopyQueue&) = delete;
  // Runs `copy` after the copies before it (on the caller after stop()).
  void submit(std::function<void()> copy);
  // A mark after every copy submitted so far (done at once when none waits).
  std::shared_ptr<CopyMark> mark();
  // Returns once every copy submitted so far has finished.
  void drain() { mark()->wait(); }
  // Finishes what is queued and joins the thread.
  void stop();
  int64_t copies() const { return copies_.load(std::memory_order_relaxed); }

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false, stop_ = false;
  std::atomic<int64_t> copies_{0};
  std::thread thread_;
};

}  // namespace torchtpu::eager
