#include "eager/slot.h"

namespace torchtpu::eager {

SlotPtr Slot::ready(pjrt::BufferPtr b) {
  auto s = std::make_shared<Slot>();
  s->buf_ = std::move(b);
  s->done_.store(true, std::memory_order_release);
  return s;
}

void Slot::fill(pjrt::BufferPtr b, RunPtr run) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    buf_ = std::move(b);
    run_ = std::move(run);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void Slot::fail(std::shared_ptr<const DeviceError> e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    err_ = std::move(e);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void Slot::set_host(std::shared_ptr<const HostCopy> h) {
  std::lock_guard<std::mutex> lock(mu_);
  host_ = std::move(h);
}

std::shared_ptr<const Slot::HostCopy> Slot::host() {
  std::lock_guard<std::mutex> lock(mu_);
  return host_;
}

void Slot::Deferred::start() {
  std::function<void()> f;
  {
    std::lock_guard<std::mutex> lock(mu_);
    f = std::move(start_);
    start_ = nullptr;
  }
  if (f) f();
}

void Slot::defer(std::shared_ptr<Deferred> d) {
  std::lock_guard<std::mutex> lock(mu_);
  deferred_ = std::move(d);
  has_deferred_.store(true, std::memory_order_release);
}

void Slot::start_deferred() {
  if (!has_deferred_.load(std::memory_order_acquire)) return;
  std::shared_ptr<Deferred> d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    d = std::move(deferred_);
    has_deferred_.store(false, std::memory_order_release);
  }
  if (d) d->start();
}

pjrt::BufferPtr Slot::get() {
  start_deferred();
  if (!done()) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done(); });
  }
  if (err_) throw err_->described();
  return buf_;
}

void Slot::wait() {
  if (done()) return;
  start_deferred();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done(); });
}

void Slot::set_twin(std::shared_ptr<const Twin> t) {
  std::lock_guard<std::mutex> lock(mu_);
  twin_ = std::move(t);
}

std::shared_ptr<const Slot::Twin> Slot::twin() {
  std::lock_guard<std::mutex> lock(mu_);
  return twin_;
}

std::shared_ptr<const DeviceError> Slot::error() const {
  if (err_) return err_;
  if (run_ && run_->settled()) return run_->error();
  return nullptr;
}

}  // namespace torchtpu::eager
