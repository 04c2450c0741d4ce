#include "eager/memory.h"

#include <chrono>

namespace torchtpu::eager {

void MemoryLedger::raise_to(std::atomic<int64_t>& peak, int64_t v) {
  int64_t p = peak.load(std::memory_order_relaxed);
  while (v > p && !peak.compare_exchange_weak(p, v, std::memory_order_relaxed)) {
  }
}

void MemoryLedger::allocated(LiveBlock* b) {
  const int64_t nbytes = b->nbytes;
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    if (!linked_) head_.prev = head_.next = &head_, linked_ = true;
    b->prev = head_.prev;
    b->next = &head_;
    head_.prev->next = b;
    head_.prev = b;
    if (history_max_.load(std::memory_order_relaxed) > 0) record(true, b);
  }
  raise_to(peak_bytes_, bytes_.fetch_add(nbytes, std::memory_order_relaxed) + nbytes);
  raise_to(peak_count_, count_.fetch_add(1, std::memory_order_relaxed) + 1);
  allocated_bytes_.fetch_add(nbytes, std::memory_order_relaxed);
  allocations_.fetch_add(1, std::memory_order_relaxed);
}

void MemoryLedger::freed(LiveBlock* b) {
  const int64_t nbytes = b->nbytes;
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    if (b->prev) {
      b->prev->next = b->next;
      b->next->prev = b->prev;
      b->prev = b->next = nullptr;
    }
    if (history_max_.load(std::memory_order_relaxed) > 0) record(false, b);
  }
  bytes_.fetch_sub(nbytes, std::memory_order_relaxed);
  count_.fetch_sub(1, std::memory_order_relaxed);
  freed_bytes_.fetch_add(nbytes, std::memory_order_relaxed);
  frees_.fetch_add(1, std::memory_order_relaxed);
}

void MemoryLedger::record(bool alloc, const LiveBlock* b) {
  const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  history_.push_back(Event{alloc, b->address, b->nbytes, us});
  while (static_cast<int64_t>(history_.size()) > history_max_.load(std::memory_order_relaxed)) history_.pop_front();
}

std::vector<std::pair<uint64_t, int64_t>> MemoryLedger::live() const {
  std::vector<std::pair<uint64_t, int64_t>> out;
  std::lock_guard<std::mutex> lock(live_mu_);
  if (!linked_) return out;
  for (const LiveBlock* b = head_.next; b != &head_; b = b->next) out.emplace_back(b->address, b->nbytes);
  return out;
}

void MemoryLedger::record_history(int64_t max_entries) {
  std::lock_guard<std::mutex> lock(live_mu_);
  history_max_.store(max_entries > 0 ? max_entries : 0, std::memory_order_relaxed);
  if (max_entries <= 0) history_.clear();
}

std::vector<MemoryLedger::Event> MemoryLedger::history() const {
  std::lock_guard<std::mutex> lock(live_mu_);
  return {history_.begin(), history_.end()};
}

MemoryLedger::Snapshot MemoryLedger::snapshot() const {
  Snapshot s;
  s.bytes = bytes_.load(std::memory_order_relaxed);
  s.peak_bytes = peak_bytes_.load(std::memory_order_relaxed);
  s.allocated_bytes = allocated_bytes_.load(std::memory_order_relaxed);
  s.freed_bytes = freed_bytes_.load(std::memory_order_relaxed);
  s.count = count_.load(std::memory_order_relaxed);
  s.peak_count = peak_count_.load(std::memory_order_relaxed);
  s.allocations = allocations_.load(std::memory_order_relaxed);
  s.frees = frees_.load(std::memory_order_relaxed);
  s.ooms = ooms_.load(std::memory_order_relaxed);
  return s;
}

void MemoryLedger::reset_peak() {
  peak_bytes_.store(bytes_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  peak_count_.store(count_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

void MemoryLedger::reset_totals() {
  allocated_bytes_.store(0, std::memory_order_relaxed);
  freed_bytes_.store(0, std::memory_order_relaxed);
  allocations_.store(0, std::memory_order_relaxed);
  frees_.store(0, std::memory_order_relaxed);
  ooms_.store(0, std::memory_order_relaxed);
}

}  // namespace torchtpu::eager
