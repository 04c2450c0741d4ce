#include "eager/buckets.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "eager/runtime.h"

namespace torchtpu::eager {

namespace {

// Skeletons (Strict: places) remembered, each with its last graph's sizes.
constexpr size_t kMaxStates = 4096;
// Past this many padded inputs and outputs, the copies the pad and unpad
// programs make around each run cost more than the compilations bucketing
// saves: the program runs exact.
constexpr size_t kMaxPorts = 64;
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

int64_t bytes_of(const ops::bucket::Port& p, ir::DType dtype) {
  int64_t n = ir::byte_size(dtype);
  for (int64_t d : p.padded) n *= d;
  return n;
}

// Elements per unit of the port's one varying factor (0 unless it has one).
int64_t fixed_of(const ops::bucket::Port& p) {
  int64_t fixed = 1, varying = 0;
  for (const auto& dim : p.factors)
    for (const ops::bucket::Factor& f : dim) {
      if (f.exact != f.padded || f.size.varies()) {
        ++varying;
        if (f.size.a != 1 || f.size.b != 0 || f.size.q != 0) return 0;
      } else {
        fixed *= f.exact;
      }
    }
  return varying == 1 ? fixed : 0;
}

// Names where a port's elements lie in its padded flat value (the sequence
// of its factors, fixed ones merged), and its dtype: a twin (slot.h) fits a
// port of another program when the names are equal.
uint64_t layout_of(const ops::bucket::Port& p, ir::DType dtype) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(dtype);
  auto mix = [&](int64_t x) { h = (h ^ static_cast<uint64_t>(x)) * 0x100000001B3ULL + (h >> 29); };
  int64_t fixed = 1;
  for (const auto& dim : p.factors)
    for (const ops::bucket::Factor& f : dim) {
      if (f.exact == f.padded) {
        fixed *= f.exact;
        continue;
      }
      mix(fixed);
      mix(f.exact);
      mix(f.padded);
      fixed = 1;
    }
  mix(fixed);
  return h;
}

// The port's padded flat value from its exact bytes at `data`, the padding
// filled with `fill`.
std::shared_ptr<std::vector<char>> pad_on_host(const ops::bucket::Port& p, ir::DType dt, const void* data,
                                               double fill) {
  std::vector<int64_t> exact, padded;  // every factor, outermost first
  for (const auto& dim : p.factors)
    for (const ops::bucket::Factor& f : dim) {
      exact.push_back(f.exact);
      padded.push_back(f.padded);
    }
  const int64_t es = ir::byte_size(dt);
  int64_t total = 1, inner = 1;
  for (int64_t n : padded) total *= n;
  auto out = std::make_shared<std::vector<char>>(static_cast<size_t>(total * es));
  // The fill, as one element of dt.
  std::vector<char> one(static_cast<size_t>(es), 0);
  auto put = [&](auto v) { std::memcpy(one.data(), &v, sizeof(v)); };
  if (fill != 0) {
    switch (dt) {
      case ir::DType::kF32: put(static_cast<float>(fill)); break;
      case ir::DType::kF64: put(fill); break;
      case ir::DType::kF16: put(uint16_t{0x7E00}); break;   // NaN
      case ir::DType::kBF16: put(uint16_t{0x7FC0}); break;  // NaN
      case ir::DType::kS64: put(static_cast<int64_t>(fill)); break;
      case ir::DType::kS32: put(static_cast<int32_t>(fill)); break;
      default: std::memset(one.data(), 1, 1); break;  // a small nonzero value
    }
    for (int64_t i = 0; i < total; ++i) std::memcpy(out->data() + i * es, one.data(), es);
  }
  // Rows of the innermost factor, copied whole; the outer factors walked as digits.
  const size_t k = exact.size();
  if (k == 0) {
    std::memcpy(out->data(), data, es);
    return out;
  }
  inner = exact[k - 1];
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < k; ++i) rows *= exact[i];
  std::vector<int64_t> digit(k, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t at = 0;
    for (size_t i = 0; i + 1 < k; ++i) at = at * padded[i] + digit[i];
    at *= padded[k - 1];
    std::memcpy(out->data() + at * es, static_cast<const char*>(data) + r * inner * es, inner * es);
    for (size_t i = k - 1; i-- > 0;) {
      if (++digit[i] < exact[i]) break;
      digit[i] = 0;
    }
  }
  return out;
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

std::shared_ptr<const Slot::Twin> Buckets::counted_twin(Slot::Twin t, int device, int64_t bytes) {
  if (device < 0 || device >= kCountedDevices) return std::make_shared<const Slot::Twin>(std::move(t));
  const int64_t now = padding_[device].fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = padding_peak_[device].load(std::memory_order_relaxed);
  while (now > peak && !padding_peak_[device].compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return std::shared_ptr<const Slot::Twin>(new Slot::Twin(std::move(t)), [this, device, bytes](const Slot::Twin* p) {
    padding_[device].fetch_sub(bytes, std::memory_order_relaxed);
    delete p;
  });
}

int64_t Buckets::padding_bytes(int device) const {
  return device >= 0 && device < kCountedDevices ? padding_[device].load(std::memory_order_relaxed) : 0;
}

int64_t Buckets::padding_peak_bytes(int device) const {
  return device >= 0 && device < kCountedDevices ? padding_peak_[device].load(std::memory_order_relaxed) : 0;
}

void Buckets::reset_padding_peak(int device) {
  if (device >= 0 && device < kCountedDevices)
    padding_peak_[device].store(padding_[device].load(std::memory_order_relaxed), std::memory_order_relaxed);
}

Buckets::Stats Buckets::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Buckets::reset_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t compiling = stats_.compiling;  // a state, not a count
  stats_ = Stats{};
  stats_.compiling = compiling;
}

uint64_t Buckets::key_of(const ops::bucket::Sizes& sizes, uint64_t place) {
  return place ? (sizes.skeleton ^ (place * 0xC2B2AE3D27D4EB4FULL)) : sizes.skeleton;
}

Buckets::State* Buckets::known(uint64_t skeleton, ops::bucket::Sizes& sizes) {
  auto it = states_.find(skeleton);
  if (it != states_.end()) {
    it->second.used = ++clock_;
    return &it->second;
  }
  if (states_.size() >= kMaxStates) {
    auto oldest = std::min_element(states_.begin(), states_.end(),
                                   [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
    states_.erase(oldest);
  }
  State& s = states_[skeleton];
  s.seen.push_back(std::move(sizes));
  s.used = ++clock_;
  return nullptr;
}

void Buckets::remember(State& s, ops::bucket::Sizes sizes) {
  auto same = [&](const ops::bucket::Sizes& x) {  // constants bitwise: a NaN constant equals itself
    return x.dims == sizes.dims && x.attrs == sizes.attrs && x.constants.size() == sizes.constants.size() &&
           (x.constants.empty() ||
            std::memcmp(x.constants.data(), sizes.constants.data(), x.constants.size() * sizeof(double)) == 0) &&
           x.fixed == sizes.fixed;
  };
  if (!s.seen.empty() && same(s.seen.back())) return;
  auto it = std::find_if(s.seen.begin(), s.seen.end(), same);
  if (it != s.seen.end()) {
    s.seen.erase(it);
  } else if (s.seen.size() >= kSeen) {
    s.seen.erase(s.seen.begin());
  }
  s.seen.push_back(std::move(sizes));
}

void Buckets::observe(const ir::Graph& g, uint64_t place) {
  if (g.replicas != 1 || !g.collectives.empty()) return;
  ops::bucket::Sizes sizes = ops::bucket::sizes_of(g);
  const uint64_t skeleton = key_of(sizes, place);
  std::lock_guard<std::mutex> lock(mu_);
  State* s = known(skeleton, sizes);
  if (s) remember(*s, std::move(sizes));
}

std::shared_ptr<Buckets::Program> Buckets::program_for(const ir::Graph& g, int64_t* v_out, const OpSite* site,
                                                      const std::vector<Task::Arg>& args, uint64_t place, int device,
                                                      std::shared_ptr<const Program>* own) {
  if (sizes_.empty() || g.replicas != 1 || !g.collectives.empty()) return nullptr;
  ops::bucket::Sizes sizes = ops::bucket::sizes_of(g);
  std::shared_ptr<Program> prog;
  int64_t& v = *v_out;
  bool fresh = false;
  // The smallest compiled larger bucket's program, to stand in while this bucket's compiles.
  std::shared_ptr<Program> stand_in;
  const uint64_t skeleton = key_of(sizes, place);
  {
    std::lock_guard<std::mutex> lock(mu_);
    State* found_state = known(skeleton, sizes);
    if (!found_state) return nullptr;
    State& st = *found_state;
    Fitted* f = nullptr;
    v = -1;
    // Of the plans the sizes follow: one that buckets before one whose
    // program did not compile, then the one with the most programs.
    for (Fitted& c : st.plans) {
      const int64_t cv = c.plan.v_of(sizes);
      if (cv < 0) continue;
      if (f && (c.refused.empty() != f->refused.empty() ? !c.refused.empty()
                                                         : c.programs.size() <= f->programs.size()))
        continue;
      f = &c;
      v = cv;
    }
    if (!f) {
      std::vector<const ops::bucket::Sizes*> seen;
      for (const ops::bucket::Sizes& x : st.seen) seen.push_back(&x);
      if (std::optional<ops::bucket::Plan> plan = ops::bucket::Plan::fit_seen(seen, sizes)) {
        if (st.plans.size() >= kPlans)
          st.plans.erase(std::min_element(st.plans.begin(), st.plans.end(),
                                          [](const Fitted& a, const Fitted& b) { return a.used < b.used; }));
        st.plans.push_back(Fitted{std::move(*plan), {}, {}, 0});
        f = &st.plans.back();
        v = f->plan.v_of(sizes);
      }
    }
    remember(st, std::move(sizes));
    if (!f) return nullptr;
    f->used = ++clock_;
    Fitted& s = *f;
    if (v >= 0 && s.plan.unit == 1) {
      // Inputs laid out by earlier bucketed programs tell the unit of v.
      int64_t k = 1;
      for (size_t i = 0; i < args.size(); ++i) {
        std::shared_ptr<const Slot::Twin> twin = args[i].slot ? args[i].slot->twin() : nullptr;
        const int64_t ki = twin && twin->fixed > 0 ? s.plan.unit_for(g, static_cast<int>(i), twin->fixed) : 1;
        if (ki == 1) continue;
        if (k != 1 && k != ki) {
          k = 1;
          break;
        }
        k = ki;
      }
      if (k > 1 && v % k == 0) {
        s.plan = s.plan.scaled(k);
        s.programs.clear();
        v /= k;
      }
    }
    std::optional<int64_t> bucket = v >= 0 ? bucket_of(v) : std::nullopt;
    if (v < 0 || !bucket || !s.refused.empty()) {
      if (v >= 0 && !s.refused.empty()) ++stats_.refused;
      return nullptr;
    }
    Runtime& rt = Runtime::get();
    if (rt.mode() != EagerMode::kDebug) {
      const int64_t capacity = rt.memory_capacity(device);
      const int64_t room = capacity > 0 ? capacity - rt.memory_held(device) : std::numeric_limits<int64_t>::max();
      for (auto it = s.programs.upper_bound(*bucket); it != s.programs.end(); ++it)
        if (it->first <= *bucket * kStandInRatio && !it->second->compiling && it->second->bytes <= room / 2) {
          stand_in = it->second;
          break;
        }
    }
    auto found = s.programs.find(*bucket);
    if (found != s.programs.end()) {
      prog = found->second;
      if (prog->compiling && stand_in) {
        *own = prog;
        prog = stand_in;
        ++stats_.stand_ins;
      }
    } else if (!s.plan.pads(v, *bucket)) {  // built at a size 1 (a decode step's): the plan stays
      return nullptr;
    } else {
      std::string why;
      std::optional<ops::bucket::Padded> padded = ops::bucket::pad(g, s.plan, v, *bucket, &why);
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
      for (ir::Value out : prog->graph->outputs) {
        const ir::Type& ty = prog->graph->type(out);
        prog->bytes += ty.numel() * ir::byte_size(ty.dtype);
      }
      prog->compiling = stand_in != nullptr;  // until it is known to compile here
      s.programs[*bucket] = prog;
      fresh = true;
    }
  }
  if (fresh && prog->compiling) {
    // Compiled in the background (outside the lock: its end takes it) unless a cache tier holds it.
    Runtime& rt = Runtime::get();
    if (!rt.cache().held(ir::graph_key(*prog->graph, rt.salt()))) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.stand_ins;
        ++stats_.compiling;
      }
      rt.compile_in_background(prog->graph, site, prog->bucket, [this, skeleton, prog](std::exception_ptr error) {
        compiled(skeleton, prog, error);
      });
      *own = prog;
      return stand_in;
    }
    prog->compiling = false;
  }
  if (fresh) {
    // Compiled here, once per bucket: a rewrite the compiler refuses makes
    // the graph run at its exact sizes instead of failing the user's op.
    try {
      bool hit = false;
      Runtime::get().executable_for(*prog->graph, &hit, site, false, prog->bucket);
    } catch (const std::exception& e) {
      refuse(skeleton, e.what(), prog.get());
      return nullptr;
    }
  }
  return prog;
}

void Buckets::refuse(uint64_t skeleton, const std::string& why, const Program* held) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.refused;
  stats_.last_refusal = "the bucket's program did not compile: " + why;
  auto it = states_.find(skeleton);
  if (it == states_.end()) return;
  for (Fitted& f : it->second.plans) {  // the plan that still holds that program
    auto found = f.programs.find(held->bucket);
    if (found == f.programs.end() || found->second.get() != held) continue;
    f.refused = stats_.last_refusal;
    f.programs.clear();
  }
}

void Buckets::compiled(uint64_t skeleton, const std::shared_ptr<Program>& prog, std::exception_ptr error) {
  if (!error) {
    prog->compiling = false;
  } else {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      refuse(skeleton, e.what(), prog.get());
    } catch (...) {
      refuse(skeleton, "unknown error", prog.get());
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  --stats_.compiling;
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
    try {
      // Seen all the same, so a later size buckets as it would have if this
      // one had compiled now (compilations do not depend on the cache's contents).
      observe(g, task->place);
    } catch (const std::exception&) {  // sizes_of refused the graph: nothing to remember
    }
    out.push_back(std::move(task));
    return out;
  }
  std::optional<Bucketed> b;
  try {
    b = choose(g, task->sites.empty() ? nullptr : &task->sites.front(), task->args, task->place, task->device);
  } catch (const std::exception& e) {  // the graph runs as it is
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.refused;
    stats_.last_refusal = e.what();
  }
  if (!b) {
    out.push_back(std::move(task));
    return out;
  }
  return expand(std::move(task), *b);
}

std::optional<Buckets::Bucketed> Buckets::choose(const ir::Graph& g, const OpSite* site,
                                                 const std::vector<Task::Arg>& args, uint64_t place, int device) {
  Bucketed b;
  b.program = program_for(g, &b.v, site, args, place, device, &b.own);
  if (!b.program) return std::nullopt;
  b.fresh = b.own != nullptr;
  return b;
}

void Buckets::settle(Bucketed& b) {
  const bool fresh = b.fresh;
  b.fresh = false;
  if (!b.own) return;
  if (!b.own->compiling) {
    b.program = std::move(b.own);
    b.own.reset();
    return;
  }
  if (fresh) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.stand_ins;
}

std::vector<std::unique_ptr<Task>> Buckets::expand(std::unique_ptr<Task> task, const Bucketed& b) {
  std::vector<std::unique_ptr<Task>> out;
  Runtime& rt = Runtime::get();
  const ir::Graph& g = *task->graph;
  const Program& prog = *b.program;
  const int64_t v = b.v;
  const ops::bucket::Padded& ports = prog.ports;
  const int nparams = prog.graph->num_parameters();
  auto helper = [&] {
    auto h = std::make_unique<Task>();
    h->device = task->device;
    h->helper = true;
    h->sites = task->sites;
    return h;
  };
  std::vector<Task::Arg> args = task->args;
  int64_t exact_elements = 0, padded_elements = 0;
  if (!ports.inputs.empty()) {
    // One program pads every padded input.
    std::vector<ops::bucket::Port> at;
    std::vector<ir::DType> dtypes;
    std::vector<double> fills;
    auto pad = helper();
    for (const ops::bucket::Port& p0 : ports.inputs) {
      const ops::bucket::Port p = at_size(p0, v);
      const ir::DType dt = g.parameter_type(p0.index).dtype;
      const int j = ports.v_index >= 0 && p0.index >= ports.v_index ? p0.index + 1 : p0.index;
      exact_elements += g.parameter_type(p0.index).numel();
      padded_elements += prog.graph->parameter_type(j).numel();
      // Padded alike by an earlier bucketed program: read as it is.
      const SlotPtr& in = task->args[p0.index].slot;
      std::shared_ptr<const Slot::Twin> twin = in ? in->twin() : nullptr;
      if (twin && twin->layout == layout_of(p, dt)) {
        args[p0.index] = Task::Arg{twin->padded, nullptr};
        continue;
      }
      // An upload whose bytes are at hand: padded on the host, no program.
      std::shared_ptr<const Slot::HostCopy> host = in ? in->host() : nullptr;
      if (host && host->nbytes == g.parameter_type(p0.index).numel() * ir::byte_size(dt)) {
        std::shared_ptr<std::vector<char>> bytes = pad_on_host(p, dt, host->data, fill_for(dt, poison_));
        auto up = std::make_shared<Slot>();
        const void* at_bytes = bytes->data();
        rt.upload_async(at_bytes, bytes, dt, p.padded, task->device, up,
                        task->sites.empty() ? OpSite{} : task->sites.front());
        in->set_twin(counted_twin(Slot::Twin{up, layout_of(p, dt), fixed_of(p)}, task->device, bytes_of(p, dt)));
        args[p0.index] = Task::Arg{up, nullptr};
        continue;
      }
      at.push_back(p);
      dtypes.push_back(dt);
      fills.push_back(fill_for(dt, poison_));
      pad->args.push_back(task->args[p0.index]);
      pad->outputs.push_back(std::make_shared<Slot>());
      args[p0.index] = Task::Arg{pad->outputs.back(), nullptr};
    }
    if (!at.empty()) {
      pad->graph = std::make_shared<const ir::Graph>(ops::bucket::pad_inputs(at, dtypes, fills));
      out.push_back(std::move(pad));
    }
  }
  auto run = std::make_unique<Task>();
  run->device = task->device;
  run->sites = task->sites;
  run->graph = prog.graph;
  run->bucket = prog.bucket;
  for (int j = 0; j < nparams; ++j) {
    if (j == ports.v_index) {
      run->args.push_back({nullptr, rt.scalar_buffer(ir::DType::kS64, HostScalar::of_int(v), task->device)});
    } else {
      run->args.push_back(args[ports.v_index >= 0 && j > ports.v_index ? j - 1 : j]);
    }
  }
  run->outputs = task->outputs;
  std::unique_ptr<Task> unpad;
  if (!ports.outputs.empty()) {
    // One program cuts every padded output back.
    std::vector<ops::bucket::Port> at;
    std::vector<ir::DType> dtypes;
    unpad = helper();
    for (const ops::bucket::Port& p0 : ports.outputs) {
      at.push_back(at_size(p0, v));
      dtypes.push_back(g.type(g.outputs[p0.index]).dtype);
      auto mid = std::make_shared<Slot>();
      const ops::bucket::Port& q = at.back();
      task->outputs[p0.index]->set_twin(counted_twin(Slot::Twin{mid, layout_of(q, dtypes.back()), fixed_of(q)},
                                                     task->device, bytes_of(q, dtypes.back())));
      unpad->args.push_back(Task::Arg{mid, nullptr});
      unpad->outputs.push_back(task->outputs[p0.index]);
      run->outputs[p0.index] = mid;
      exact_elements += g.type(g.outputs[p0.index]).numel();
      padded_elements += prog.graph->type(prog.graph->outputs[p0.index]).numel();
    }
    unpad->graph = std::make_shared<const ir::Graph>(ops::bucket::unpad_outputs(at, dtypes));
  }
  out.push_back(std::move(run));
  if (unpad) {
    // Cut back only when something reads an exact value. The slots it
    // fills hold it, so it holds them weakly; a dead one gets a stand-in.
    std::vector<SlotPtr> fills = std::move(unpad->outputs);
    std::vector<std::weak_ptr<Slot>> weak(fills.begin(), fills.end());
    std::shared_ptr<Task> cut(std::move(unpad));
    auto deferred = std::make_shared<Slot::Deferred>([cut, weak] {
      auto t = std::make_unique<Task>(std::move(*cut));
      for (const std::weak_ptr<Slot>& w : weak) {
        SlotPtr o = w.lock();
        t->outputs.push_back(o ? o : std::make_shared<Slot>());
      }
      Runtime::get().submit(std::move(t));
    });
    for (const SlotPtr& o : fills) o->defer(deferred);
  }
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
