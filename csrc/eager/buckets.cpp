#include "eager/buckets.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "eager/runtime.h"

namespace torchtpu::eager {

namespace {

constexpr size_t kMaxStates = 256;  // skeletons remembered (each keeps its last graph's sizes)
// Past this many padded inputs and outputs, the pad and unpad programs around
// each run cost more than the compilations bucketing saves (a compiled
// forward graph's saved activations, say): the program runs exact.
constexpr size_t kMaxPorts = 8;
constexpr int64_t kFloor = 16;

// The port at size v: every varying factor at its true size.
ops::bucket::Port at_size(ops::bucket::Port p, int64_t v) {
  for (size_t d = 0; d < p.factors.size(); ++d) {
    int64_t n = 1;
    for (ops::bucket::Factor& f : p.factors[d]) {
      if (f.size.varies()) f.exact = f.size.at(v);
      n *= f.exact;
    }
    p.exact[d] = n;
  }
  return p;
}

double fill_for(ir::DType t, bool poison) {
  if (!poison) return 0;
  if (ir::is_float(t)) return std::numeric_limits<double>::quiet_NaN();
  if (t == ir::DType::kBool) return 1;
  return ir::is_signed_int(t) ? 1 << 30 : 200;
}

}  // namespace

void Buckets::set_sizes(std::vector<int64_t> sizes) {
  std::sort(sizes.begin(), sizes.end());
  std::lock_guard<std::mutex> lock(mu_);
  sizes_ = std::move(sizes);
  states_.clear();
}

std::optional<int64_t> Buckets::bucket_of(int64_t v) const {
  if (sizes_.empty()) return std::nullopt;
  if (sizes_.size() == 1 && sizes_[0] == 0) {
    int64_t b = kFloor;
    while (b < v) b *= 2;
    return b;
  }
  for (int64_t s : sizes_)
    if (s >= v) return s;
  return std::nullopt;
}

Buckets::Stats Buckets::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Buckets::reset_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = Stats{};
}

std::shared_ptr<Buckets::Program> Buckets::program_for(const ir::Graph& g, int64_t* v_out, const OpSite* site) {
  if (sizes_.empty() || g.replicas != 1 || !g.collectives.empty()) return nullptr;
  ops::bucket::Sizes sizes = ops::bucket::sizes_of(g);
  std::shared_ptr<Program> prog;
  int64_t& v = *v_out;
  bool fresh = false;
  uint64_t skeleton = sizes.skeleton;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = states_.find(sizes.skeleton);
    if (it == states_.end()) {
      if (states_.size() >= kMaxStates) {
        auto oldest = std::min_element(states_.begin(), states_.end(),
                                       [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
        states_.erase(oldest);
      }
      states_[sizes.skeleton] = State{std::move(sizes), std::nullopt, {}, {}, ++clock_};
      return nullptr;
    }
    State& s = it->second;
    s.used = ++clock_;
    v = s.plan ? s.plan->v_of(sizes) : -1;
    if (v < 0) {
      s.plan = ops::bucket::Plan::fit(s.last, sizes);
      s.programs.clear();
      s.refused.clear();
      if (s.plan) v = s.plan->v_of(sizes);
    }
    s.last = std::move(sizes);
    std::optional<int64_t> bucket = v >= 0 ? bucket_of(v) : std::nullopt;
    if (v < 0 || !bucket || !s.refused.empty()) {
      if (v >= 0 && !s.refused.empty()) ++stats_.refused;
      return nullptr;
    }
    auto found = s.programs.find(*bucket);
    if (found != s.programs.end()) {
      prog = found->second;
    } else {
      std::string why;
      std::optional<ops::bucket::Padded> padded = ops::bucket::pad(g, *s.plan, v, *bucket, &why);
      if (padded && padded->inputs.size() + padded->outputs.size() > kMaxPorts) {
        why = std::to_string(padded->inputs.size() + padded->outputs.size()) +
              " padded inputs and outputs: each run would pad and cut back more than it saves";
        padded.reset();
      }
      if (!padded) {
        s.refused = why.empty() ? "refused" : why;
        ++stats_.refused;
        stats_.last_refusal = s.refused;
        return nullptr;
      }
      prog = std::make_shared<Program>();
      prog->graph = std::make_shared<const ir::Graph>(std::move(padded->graph));
      prog->ports = std::move(*padded);
      prog->bucket = *bucket;
      s.programs[*bucket] = prog;
      fresh = true;
    }
  }
  if (fresh) {
    // Compiled here, once per bucket: a rewrite the compiler refuses makes
    // the graph run at its exact sizes instead of failing the user's op.
    try {
      bool hit = false;
      Runtime::get().executable_for(*prog->graph, &hit, site, false, prog->bucket);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = states_.find(skeleton);
      if (it != states_.end()) {
        it->second.refused = std::string("the bucket's program did not compile: ") + e.what();
        it->second.programs.clear();
        stats_.last_refusal = it->second.refused;
      }
      ++stats_.refused;
      return nullptr;
    }
  }
  return prog;
}

std::vector<std::unique_ptr<Task>> Buckets::apply(std::unique_ptr<Task> task) {
  std::vector<std::unique_ptr<Task>> out;
  Runtime& rt = Runtime::get();
  const ir::Graph& g = *task->graph;
  if (task->ready_exe || sizes_.empty() || !task->collectives.empty() || g.replicas != 1) {
    out.push_back(std::move(task));
    return out;
  }
  task->key = ir::graph_key(g, rt.salt());
  task->ready_exe = rt.cache().find(task->key);
  if (task->ready_exe) {  // this size compiled already: run it as it is
    out.push_back(std::move(task));
    return out;
  }
  int64_t v = 0;
  std::shared_ptr<Program> prog = program_for(g, &v, task->sites.empty() ? nullptr : &task->sites.front());
  if (!prog) {
    out.push_back(std::move(task));
    return out;
  }
  const ops::bucket::Padded& ports = prog->ports;
  const int nparams = prog->graph->num_parameters();
  std::vector<Task::Arg> args(task->args.size());
  for (size_t i = 0; i < args.size(); ++i) args[i] = task->args[i];
  int64_t exact_elements = 0, padded_elements = 0;
  for (const ops::bucket::Port& p0 : ports.inputs) {
    ops::bucket::Port p = at_size(p0, v);
    const ir::DType dt = g.parameter_type(p.index).dtype;
    auto pad = std::make_unique<Task>();
    pad->device = task->device;
    pad->helper = true;
    pad->sites = task->sites;
    pad->graph = std::make_shared<const ir::Graph>(ops::bucket::pad_input(p, dt, fill_for(dt, poison_)));
    pad->args = {task->args[p.index]};
    pad->outputs = {std::make_shared<Slot>()};
    args[p.index] = Task::Arg{pad->outputs[0], nullptr};
    exact_elements += g.parameter_type(p.index).numel();
    padded_elements += prog->graph->parameter_type(p.index >= ports.v_index && ports.v_index >= 0 ? p.index + 1
                                                                                                  : p.index).numel();
    out.push_back(std::move(pad));
  }
  auto run = std::make_unique<Task>();
  run->device = task->device;
  run->sites = task->sites;
  run->graph = prog->graph;
  run->bucket = prog->bucket;
  for (int j = 0; j < nparams; ++j) {
    if (j == ports.v_index) {
      run->args.push_back({nullptr, rt.scalar_buffer(ir::DType::kS64, HostScalar::of_int(v), task->device)});
    } else {
      run->args.push_back(args[ports.v_index >= 0 && j > ports.v_index ? j - 1 : j]);
    }
  }
  run->outputs = task->outputs;
  std::vector<std::unique_ptr<Task>> unpads;
  for (const ops::bucket::Port& p0 : ports.outputs) {
    ops::bucket::Port p = at_size(p0, v);
    const ir::DType dt = g.type(g.outputs[p.index]).dtype;
    auto unpad = std::make_unique<Task>();
    unpad->device = task->device;
    unpad->helper = true;
    unpad->sites = task->sites;
    unpad->graph = std::make_shared<const ir::Graph>(ops::bucket::unpad_output(p, dt));
    auto mid = std::make_shared<Slot>();
    unpad->args = {Task::Arg{mid, nullptr}};
    unpad->outputs = {task->outputs[p.index]};
    run->outputs[p.index] = mid;
    exact_elements += g.type(g.outputs[p.index]).numel();
    padded_elements += prog->graph->type(prog->graph->outputs[p.index]).numel();
    unpads.push_back(std::move(unpad));
  }
  out.push_back(std::move(run));
  for (auto& u : unpads) out.push_back(std::move(u));
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.programs;
  stats_.exact_elements += exact_elements;
  stats_.padded_elements += padded_elements;
  return out;
}

Buckets& buckets() {
  static Buckets& b = *new Buckets;
  return b;
}

}  // namespace torchtpu::eager
