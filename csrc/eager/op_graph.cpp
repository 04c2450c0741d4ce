#include "eager/op_graph.h"

#include <algorithm>

#include "eager/buckets.h"
#include "eager/capture.h"
#include "eager/fused_graph.h"
#include "eager/metrics.h"

namespace torchtpu::eager {

namespace {
thread_local int batching = 0;
thread_local OpGraph::Recorder* recorder = nullptr;
// The most elements a value of a single-op program compiled at the lower
// optimization level may have: below it the program's run time is
// dominated by its launch, above it by code the higher level makes faster.
constexpr int64_t kLightMaxElements = 1 << 16;

// Where an op stands in this thread's op stream: its user site (a line and
// the user frames that called it), its op, and the two ops the site issued
// just before it. The same code at other sizes gives the same places, so a
// place whose sizes vary buckets (buckets.h), while two ops of one structure
// at fixed, different sizes (`fc2(act(fc1(x)))`) never pad; a loop over one
// line settles on one place.
uint64_t stream_place(const OpSite& s) {
  thread_local SiteRef last{};
  thread_local const char* before[2] = {nullptr, nullptr};
  if (s.where.code != last.code || s.where.lasti != last.lasti || s.where.callers != last.callers ||
      s.where.issuer != last.issuer) {
    last = s.where;
    before[0] = before[1] = nullptr;
  }
  uint64_t h = reinterpret_cast<uintptr_t>(s.where.code) * 0x9E3779B97F4A7C15ULL;
  for (uint64_t x : {static_cast<uint64_t>(static_cast<uint32_t>(s.where.lasti)), s.where.callers,
                     uint64_t{reinterpret_cast<uintptr_t>(s.op)}, uint64_t{reinterpret_cast<uintptr_t>(before[0])},
                     uint64_t{reinterpret_cast<uintptr_t>(before[1])}})
    h = (h ^ x) * 0x100000001B3ULL + (h >> 31);
  before[1] = before[0];
  before[0] = s.op;
  return h | 1;  // never 0 (a graph of many ops)
}
}  // namespace

OpGraph::Batching::Batching() { ++batching; }
OpGraph::Batching::~Batching() { --batching; }

OpGraph::Recorder::Recorder() : prev_(recorder) { recorder = this; }
OpGraph::Recorder::~Recorder() { recorder = prev_; }

void OpGraph::check_not_batching(const char* what) {
  if (recorder) recorder->tainted = true;
  if (batching > 0) throw BatchInterrupted(std::string(what) + " inside a batch of ops");
}

OpGraph::OpGraph(int device, const char* op)
    : entry_(/*admit=*/true),
      outer_(current_op()),
      site_{op, outer_ ? outer_->where : capture_site()},
      lock_(Runtime::get().device_lock(device)),
      scope_(&site_),
      device_(device),
      b_(g_) {}

bool OpGraph::reads(const StorageValue* s) const {
  for (const Input& in : inputs_)
    if (in.storage == s) return true;
  return false;
}

// The bytes of flat `v` as a flat array of `to` (PyTorch's storage view,
// e.g. torch.save reading any storage as uint8). Bool goes through uint8.
ir::Value OpGraph::reinterpret(ir::Value v, ir::DType to) {
  const ir::DType from = g_.type(v).dtype;
  if (from == to) return v;
  // Complex values are pairs of reals in memory (re, im), as in PyTorch.
  if (ir::is_complex(from)) {
    const int64_t m = g_.type(v).dims[0];
    ir::Value pairs = b_.concatenate({b_.reshape(b_.real(v), {m, 1}), b_.reshape(b_.imag(v), {m, 1})}, 1);
    return reinterpret(b_.reshape(pairs, {2 * m}), to);
  }
  if (ir::is_complex(to)) {
    ir::Value parts = reinterpret(v, ir::real_of(to));
    const int64_t k = g_.type(parts).dims[0] / 2;
    if (2 * k != g_.type(parts).dims[0]) parts = b_.slice(parts, {0}, {2 * k});
    ir::Value grouped = b_.reshape(parts, {k, 2});
    return b_.reshape(b_.complex(b_.slice_dim(grouped, 1, 0, 1), b_.slice_dim(grouped, 1, 1, 2)), {k});
  }
  if (from == ir::DType::kBool) return reinterpret(b_.convert(v, ir::DType::kU8), to);
  if (to == ir::DType::kBool) return b_.convert(reinterpret(v, ir::DType::kU8), to);
  const int64_t m = g_.type(v).dims[0], sf = ir::byte_size(from), st = ir::byte_size(to);
  if (sf == st) return b_.bitcast_convert(v, to);
  if (sf > st) {
    ir::Value split = g_.add("stablehlo.bitcast_convert", {v}, ir::Type{to, {m, sf / st}});
    return b_.reshape(split, {m * (sf / st)});
  }
  const int64_t r = st / sf, whole = m / r;
  if (whole * r != m) v = b_.slice(v, {0}, {whole * r});
  ir::Value grouped = b_.reshape(v, {whole, r});
  return g_.add("stablehlo.bitcast_convert", {grouped}, ir::Type{to, {whole}});
}

ir::Value OpGraph::param_for(StorageValue* s, ir::DType dtype) {
  // The latest value of a storage already written in this graph wins.
  for (auto it = outputs_.rbegin(); it != outputs_.rend(); ++it)
    if (it->storage == s) return reinterpret(it->flat, dtype);
  for (const Input& in : inputs_)
    if (in.storage == s) return reinterpret(in.param, dtype);
  if (!s->has_value()) return b_.constant(dtype, 0, {s->numel(dtype)});
  ir::Value p = g_.parameter(ir::Type{s->dtype(), {s->numel(s->dtype())}});
  inputs_.push_back({s, nullptr, p, {}});
  return reinterpret(p, dtype);
}

ir::Value OpGraph::read_flat(StorageValue* s, ir::DType dtype) { return param_for(s, dtype); }

ir::Value OpGraph::read(StorageValue* s, ir::DType dtype, const ops::ViewMeta& v) {
  return ops::read_view(b_, param_for(s, dtype), v);
}

ir::Value OpGraph::scalar(ir::DType dtype, HostScalar value) {
  ir::DType carried =
      (dtype == ir::DType::kF16 || dtype == ir::DType::kBF16 || ir::is_float8(dtype)) ? ir::DType::kF32 : dtype;
  pjrt::BufferPtr buf = Runtime::get().scalar_buffer(carried, value, device_);
  ir::Value p = g_.parameter(ir::Type{carried, {}});
  inputs_.push_back({nullptr, std::move(buf), p, {}, value});
  return b_.convert(p, dtype);
}

std::vector<ir::Value> OpGraph::drawn_scalars(const std::vector<ir::DType>& dtypes, std::shared_ptr<Redraw> source) {
  const std::vector<HostScalar> now = source->draw();
  std::vector<ir::Value> out;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    out.push_back(scalar(dtypes[i], now.at(i)));
    inputs_.back().redraw = {source, static_cast<int>(i)};
  }
  return out;
}

void OpGraph::write(StorageValue* s, ir::DType dtype, const ops::ViewMeta& v, ir::Value update) {
  const int64_t n = s->numel(dtype);
  ir::Value u = b_.convert(update, dtype);
  ir::Value flat;
  bool whole = v.offset == 0 && g_.type(u).numel() == n;
  std::vector<int64_t> order;
  if (whole && ops::is_contiguous(v.sizes, v.strides)) {
    flat = b_.reshape(u, {n});
  } else if (whole && !(order = ops::dense_order(v.sizes, v.strides)).empty()) {
    flat = ops::to_block(b_, u, order);  // a whole storage in another dim order: no read of the old value
  } else {
    flat = ops::write_view(b_, param_for(s, dtype), v, u);
  }
  for (Output& o : outputs_)
    if (o.storage == s) {
      o.dtype = dtype;
      o.flat = flat;
      return;
    }
  outputs_.push_back({s, dtype, flat});
}

void OpGraph::adopt(Built b) {
  if (b.shared) {
    shared_ = std::move(b.shared);
    key_ = b.key;
  } else {
    g_ = std::move(b.graph);
  }
  inputs_ = std::move(b.inputs);
  outputs_ = std::move(b.outputs);
}

OpGraph::Built OpGraph::built() const {
  Built b{shared_ ? *shared_ : g_, inputs_, outputs_, site_.op, nullptr, {}};
  b.graph.outputs.clear();
  for (const Output& o : outputs_) b.graph.outputs.push_back(o.flat);
  return b;
}

void OpGraph::own_graph() {
  if (!shared_) return;
  g_ = *shared_;
  shared_.reset();
}

void OpGraph::run() {
  if (outputs_.empty()) return;
  if (!shared_) {  // a shared graph holds its outputs already
    g_.outputs.clear();
    for (const Output& o : outputs_) g_.outputs.push_back(o.flat);
  }
  if (recorder) recorder->runs.push_back(built());
  Runtime& rt = Runtime::get();
  try {
    if (Capture* c = Capture::active(device_)) {
      own_graph();
      c->graph().append(g_, inputs_, outputs_, site_);
    } else if (rt.mode() == EagerMode::kFused) {
      if (shared_)
        rt.fused(device_).append_shared(*shared_, key_, inputs_, outputs_, site_);
      else
        rt.fused(device_).append(g_, inputs_, outputs_, site_);
    } else {
      own_graph();
      queue();
    }
  } catch (const DeviceError& e) {
    outputs_.clear();
    if (outer_) throw;  // the outermost op describes it
    lock_.unlock();
    scope_.end();
    throw e.described();
  }
  outputs_.clear();
}

void OpGraph::queue() {
  // An in-place update donates the old value of the storage it overwrites.
  std::vector<bool> taken(outputs_.size(), false);
  for (const Input& in : inputs_) {
    if (!in.storage) continue;
    for (size_t j = 0; j < outputs_.size(); ++j)
      if (!taken[j] && outputs_[j].storage == in.storage && g_.type(outputs_[j].flat) == g_.type(in.param)) {
        taken[j] = true;
        g_.donations.push_back({static_cast<int>(g_.node(in.param).param_index), static_cast<int>(j)});
        break;
      }
  }
  auto t = std::make_unique<Task>();
  t->device = device_;
  t->args.reserve(inputs_.size());
  for (const Input& in : inputs_) t->args.push_back({in.storage ? in.storage->slot() : nullptr, in.scalar});
  t->outputs.reserve(outputs_.size());
  for (const Output& o : outputs_) {
    auto slot = std::make_shared<Slot>();
    o.storage->set_slot(slot, o.dtype);
    t->outputs.push_back(std::move(slot));
  }
  t->sites.push_back(site_);
  // One op over small tensors compiles at the lower level (DESIGN decision 1).
  int64_t largest = 0;
  for (const ir::Node& n : g_.nodes())
    for (const ir::Type& ty : n.results) largest = std::max(largest, ty.numel());
  if (largest <= kLightMaxElements) g_.opt_level = ir::Graph::kLightOptLevel;
  t->graph = std::make_shared<const ir::Graph>(std::move(g_));
  Runtime& rt = Runtime::get();
  if (rt.mode() == EagerMode::kStrict) {
    // A place whose sizes vary runs as its bucket's program (buckets.h).
    t->place = stream_place(site_);
    for (std::unique_ptr<Task>& part : buckets().apply(std::move(t))) rt.submit(std::move(part));
    return;
  }
  rt.submit(std::move(t));
}

}  // namespace torchtpu::eager
