#include "eager/capture.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "eager/metrics.h"

namespace torchtpu::eager {

namespace {

thread_local Capture* tl_active = nullptr;

// Every live capture, for sync points and dying storages on other threads.
std::mutex registry_mu;
std::vector<Capture*>& registry() {
  static auto* r = new std::vector<Capture*>();
  return *r;
}
std::atomic<int> live_captures{0};

std::vector<Capture*> captures_of(int device) {
  std::vector<Capture*> out;
  if (live_captures.load(std::memory_order_acquire) == 0) return out;
  std::lock_guard<std::mutex> lock(registry_mu);
  for (Capture* c : registry())
    if (c->device() == device) out.push_back(c);
  return out;
}

}  // namespace

Capture::Capture(int device) : device_(device), graph_(device, /*capture=*/true), outer_(tl_active) {
  Runtime& rt = Runtime::get();
  {
    std::lock_guard<std::recursive_mutex> lock(rt.device_lock(device));
    rt.fused(device).flush(FusedGraph::Reason::kSync);
  }
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    registry().push_back(this);
  }
  live_captures.fetch_add(1, std::memory_order_release);
  tl_active = this;
}

Capture::~Capture() {
  if (!finished_ && !abandoned_) {
    try {
      std::lock_guard<std::recursive_mutex> lock(Runtime::get().device_lock(device_));
      abandon("the capture did not finish");
    } catch (...) {
    }
  }
  if (tl_active == this) tl_active = outer_;
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    auto& r = registry();
    r.erase(std::remove(r.begin(), r.end(), this), r.end());
  }
  live_captures.fetch_sub(1, std::memory_order_release);
}

Capture* Capture::active(int device) {
  for (Capture* c = tl_active; c; c = c->outer_)
    if (c->device_ == device && !c->abandoned_ && !c->finished_) return c;
  return nullptr;
}

void Capture::abandon(const char* why) {
  if (abandoned_ || finished_) return;
  abandoned_ = true;
  why_ = why;
  metrics().captures_abandoned.fetch_add(1, std::memory_order_relaxed);
  // What it captured holds collectives: it runs with the other ranks' (which
  // abandon theirs at the same point), here under this device's lock, which
  // no other rank needs.
  if (group_) {
    if (std::unique_ptr<Task> t = graph_.take_pending()) group_->run_program(group_rank_, std::move(t), collectives_);
    return;
  }
  graph_.flush(FusedGraph::Reason::kSync);
}

bool Capture::join(std::shared_ptr<ReplicaGroup> group, int rank, const std::string& signature) {
  if (group_ && (group_ != group || group_rank_ != rank)) return false;
  group_ = std::move(group);
  group_rank_ = rank;
  collectives_ += (collectives_.empty() ? "" : "; ") + signature;
  return true;
}

void Capture::abandon_holding(const StorageValue* s, const char* why) {
  for (Capture* c : captures_of(s->device()))
    if (c->graph_.holds(s)) c->abandon(why);
}

void Capture::abandon_all(int device, const char* why) {
  for (Capture* c : captures_of(device)) c->abandon(why);
}

void Capture::abandon_this_thread(const char* why) {
  for (Capture* c = tl_active; c; c = c->outer_) {
    if (c->abandoned_ || c->finished_) continue;
    std::lock_guard<std::recursive_mutex> lock(Runtime::get().device_lock(c->device_));
    c->abandon(why);
  }
}

void Capture::forget(StorageValue* s) {
  for (Capture* c : captures_of(s->device())) c->graph_.forget(s);
}

std::shared_ptr<Program> Capture::finish(const std::vector<StorageValue*>& inputs,
                                         const std::vector<StorageValue*>& outputs, uint64_t issuer) {
  Runtime& rt = Runtime::get();
  std::unique_lock<std::recursive_mutex> lock(rt.device_lock(device_));
  if (tl_active == this) tl_active = outer_;
  if (abandoned_) return nullptr;
  finished_ = true;
  FusedGraph::Taken t = graph_.take();
  if (t.ops == 0) return nullptr;

  auto prog = std::shared_ptr<Program>(new Program());
  prog->device_ = device_;
  prog->ops_ = t.ops;
  ir::Graph& g = t.graph;
  std::map<const StorageValue*, int> input_of;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]) input_of.emplace(inputs[i], static_cast<int>(i));
  auto written = [&](const StorageValue* s) { return std::find(t.written.begin(), t.written.end(), s) != t.written.end(); };
  // Parameters: one per argument, then (below) one per output storage the
  // graph neither wrote nor read.
  for (size_t i = 0; i < t.args.size(); ++i) {
    Program::Arg a;
    a.dtype = g.parameter_type(static_cast<int>(i)).dtype;
    StorageValue* s = t.arg_storage[i];
    auto in = s ? input_of.find(s) : input_of.end();
    if (in != input_of.end()) {
      a.kind = Program::Arg::Kind::kInput;
      a.input = in->second;
    } else if (t.args[i].slot) {
      a.kind = Program::Arg::Kind::kConstant;
      a.constant = t.args[i].slot;
    } else if (t.arg_redraw[i].source) {
      a.kind = Program::Arg::Kind::kDrawn;
      a.drawn = t.arg_redraw[i];
    } else {
      a.kind = Program::Arg::Kind::kScalar;
      a.scalar = t.args[i].scalar;
    }
    prog->args_.push_back(std::move(a));
  }
  auto value_of = [&](StorageValue* s) -> ir::Value {
    if (written(s)) return s->pending_value;
    for (size_t i = 0; i < t.arg_storage.size(); ++i)
      if (t.arg_storage[i] == s) return g.parameter_value(static_cast<int>(i));
    // Read nowhere in the graph: passed through as a parameter.
    ir::Value p = g.parameter(ir::Type{s->dtype(), {s->numel(s->dtype())}});
    Program::Arg a;
    a.dtype = s->dtype();
    auto in = input_of.find(s);
    if (in != input_of.end()) {
      a.kind = Program::Arg::Kind::kInput;
      a.input = in->second;
    } else {
      a.kind = Program::Arg::Kind::kConstant;
      a.constant = s->slot();
    }
    prog->args_.push_back(std::move(a));
    return p;
  };
  std::vector<StorageValue*> installed;  // storages that take outputs, in output order
  g.outputs.clear();
  for (StorageValue* s : outputs) {
    g.outputs.push_back(value_of(s));
    prog->output_dtypes_.push_back(s->dtype());
    installed.push_back(s);
  }
  prog->requested_ = outputs.size();
  for (StorageValue* s : t.written) {
    if (std::find(outputs.begin(), outputs.end(), s) != outputs.end()) continue;
    auto in = input_of.find(s);
    const int o = static_cast<int>(g.outputs.size());
    g.outputs.push_back(s->pending_value);
    prog->output_dtypes_.push_back(s->dtype());
    installed.push_back(s);
    if (in != input_of.end()) prog->mutations_.push_back({in->second, o, s->dtype()});
  }
  // An overwritten input's old value may go to its new one.
  for (const Program::Mutation& m : prog->mutations_)
    for (size_t i = 0; i < prog->args_.size(); ++i)
      if (prog->args_[i].kind == Program::Arg::Kind::kInput && prog->args_[i].input == m.input &&
          g.parameter_type(static_cast<int>(i)) == g.type(g.outputs[m.output])) {
        g.donations.push_back({static_cast<int>(i), m.output});
        break;
      }
  for (ir::Value v : g.outputs) {
    const ir::Type& ty = g.type(v);
    prog->bytes_ += ty.numel() * ir::byte_size(ty.dtype);
  }
  prog->sites_ = std::move(t.sites);
  prog->graph_ = std::make_shared<const ir::Graph>(std::move(g));
  prog->key_ = ir::graph_key(*prog->graph_, ir::GraphKey{});
  prog->group_ = group_;
  prog->group_rank_ = group_rank_;
  prog->collectives_ = collectives_;
  metrics().captured_programs.fetch_add(1, std::memory_order_relaxed);
  lock.unlock();
  bool hit = false;
  if (!group_) {
    const OpSite* site = prog->sites_.empty() ? nullptr : &prog->sites_.front();
    prog->exe_ = rt.cache().find(ir::graph_key(*prog->graph_, rt.salt()));
    if (!prog->exe_) prog->bucketed_ = buckets().choose(*prog->graph_, site, t.args, 0, device_);
    if (!prog->exe_ && !prog->bucketed_) prog->exe_ = rt.executable_for(*prog->graph_, &hit, site);
  }

  // This call's values: every storage the graph wrote takes its output.
  std::unique_lock<std::recursive_mutex> relock(rt.device_lock(device_));
  bool ran = false;
  std::unique_ptr<Task> grouped;
  std::vector<SlotPtr> slots = prog->run(inputs, issuer, &ran, &grouped);
  if (!ran) throw std::logic_error("a captured program could not run on its own capture's inputs");
  for (size_t i = 0; i < installed.size(); ++i) installed[i]->set_slot(slots[i], prog->output_dtypes_[i]);
  relock.unlock();
  if (grouped) group_->run_program(group_rank_, std::move(grouped), collectives_);
  return prog;
}

std::vector<SlotPtr> Program::run(const std::vector<StorageValue*>& inputs, uint64_t issuer, bool* ran,
                                  std::unique_ptr<Task>* grouped) {
  Runtime& rt = Runtime::get();
  *ran = false;
  if (group_ && !grouped) throw std::logic_error("a program holding collectives runs through its group");
  auto t = std::make_unique<Task>();
  t->device = device_;
  t->graph = graph_;
  t->key = key_;
  t->ready_exe = exe_;
  t->sites = sites_;
  for (OpSite& s : t->sites) s.where.issuer = issuer;
  t->bytes = bytes_;
  t->args.reserve(args_.size());
  std::map<Redraw*, std::vector<HostScalar>> drawn;
  for (const Arg& a : args_) {
    switch (a.kind) {
      case Arg::Kind::kInput: {
        StorageValue* s = inputs.at(static_cast<size_t>(a.input));
        if (s->pending_gen != 0) rt.fused(device_).flush_for(s);
        if (!s->slot() || s->dtype() != a.dtype) return {};
        t->args.push_back({s->slot(), nullptr});
        break;
      }
      case Arg::Kind::kConstant: t->args.push_back({a.constant, nullptr}); break;
      case Arg::Kind::kScalar: t->args.push_back({nullptr, a.scalar}); break;
      case Arg::Kind::kDrawn: {
        auto it = drawn.find(a.drawn.source.get());
        if (it == drawn.end()) it = drawn.emplace(a.drawn.source.get(), a.drawn.source->draw()).first;
        t->args.push_back({nullptr, rt.scalar_buffer(a.dtype, it->second.at(a.drawn.index), device_)});
        break;
      }
    }
  }
  std::vector<SlotPtr> out;
  out.reserve(output_dtypes_.size());
  for (size_t i = 0; i < output_dtypes_.size(); ++i) out.push_back(std::make_shared<Slot>());
  t->outputs = out;
  // Overwritten inputs take their new values now, so later work reads them.
  for (const Mutation& m : mutations_) inputs[static_cast<size_t>(m.input)]->set_slot(out[m.output], m.dtype);
  metrics().program_runs.fetch_add(1, std::memory_order_relaxed);
  *ran = true;
  if (group_) {
    *grouped = std::move(t);
    return out;
  }
  if (bucketed_) {
    buckets().settle(*bucketed_);
    for (std::unique_ptr<Task>& part : buckets().expand(std::move(t), *bucketed_)) rt.submit(std::move(part));
    return out;
  }
  rt.submit(std::move(t));
  return out;
}

}  // namespace torchtpu::eager
