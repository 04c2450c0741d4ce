#include "eager/metrics.h"

#include <vector>

namespace torchtpu::eager {

namespace {
std::mutex& counters_mu() {
  static std::mutex mu;
  return mu;
}
std::vector<OpCounter*>& counters() {
  static std::vector<OpCounter*> v;
  return v;
}
thread_local const char* last_dispatched = "";
}  // namespace

void note_op(const char* name) { last_dispatched = name; }
const char* last_op() { return last_dispatched; }

OpCounter::OpCounter(const char* name) : name_(name) {
  std::lock_guard<std::mutex> lock(counters_mu());
  counters().push_back(this);
}

void Metrics::count_fallback(const std::string& op) {
  std::lock_guard<std::mutex> lock(mu_);
  ++fallbacks_[op];
}

std::map<std::string, int64_t> Metrics::fallbacks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fallbacks_;
}

std::map<std::string, int64_t> Metrics::op_counts() const {
  std::map<std::string, int64_t> out;
  std::lock_guard<std::mutex> lock(counters_mu());
  for (OpCounter* c : counters())
    if (c->count()) out[c->name()] += c->count();
  for (const auto& [name, n] : fallbacks()) out[name] += n;
  return out;
}

void Metrics::reset() {
  executions = 0;
  h2d_bytes = 0;
  d2h_bytes = 0;
  donated_buffers = 0;
  fused_graphs = 0;
  fused_ops = 0;
  fused_outputs = 0;
  cuts_sync = 0;
  cuts_loop = 0;
  cuts_size = 0;
  fused_replayed_ops = 0;
  fused_replay_misses = 0;
  captured_programs = 0;
  captures_abandoned = 0;
  program_runs = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fallbacks_.clear();
  }
  std::lock_guard<std::mutex> lock(counters_mu());
  for (OpCounter* c : counters()) c->reset();
}

Metrics& metrics() {
  static Metrics m;
  return m;
}

}  // namespace torchtpu::eager
