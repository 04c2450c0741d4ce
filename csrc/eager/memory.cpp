#include "eager/memory.h"

namespace torchtpu::eager {

void MemoryLedger::raise_to(std::atomic<int64_t>& peak, int64_t v) {
  int64_t p = peak.load(std::memory_order_relaxed);
  while (v > p && !peak.compare_exchange_weak(p, v, std::memory_order_relaxed)) {
  }
}

void MemoryLedger::allocated(int64_t nbytes) {
  raise_to(peak_bytes_, bytes_.fetch_add(nbytes, std::memory_order_relaxed) + nbytes);
  raise_to(peak_count_, count_.fetch_add(1, std::memory_order_relaxed) + 1);
  allocated_bytes_.fetch_add(nbytes, std::memory_order_relaxed);
  allocations_.fetch_add(1, std::memory_order_relaxed);
}

void MemoryLedger::freed(int64_t nbytes) {
  bytes_.fetch_sub(nbytes, std::memory_order_relaxed);
  count_.fetch_sub(1, std::memory_order_relaxed);
  freed_bytes_.fetch_add(nbytes, std::memory_order_relaxed);
  frees_.fetch_add(1, std::memory_order_relaxed);
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
