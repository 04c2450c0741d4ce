#include "aten/op_memo.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "eager/slot.h"
#include "ir/graph_key.h"

namespace torchtpu::aten {
namespace {

// The calls of one structure (all but the values of numbers): the graph
// the last recorded one built, with its storages taken out (in_at[i] /
// out_at[i]: the index, in the call's storages, of input i's / output i's
// storage; -1 for a scalar input), and which number each scalar input holds
// when that number is free (scalar_at[i], else -1: the recorded buffer).
struct Family {
  std::vector<int64_t> words;
  std::vector<eager::HostScalar> values;  // the recorded call's
  std::vector<bool> free;                 // per number
  eager::OpGraph::Built built;            // its graph empty: shared below
  std::shared_ptr<const ir::Graph> graph;
  ir::GraphKey key;
  std::vector<int32_t> in_at, out_at, scalar_at;
  // Typed calls: how each returned tensor is made; out_at[i] at or past
  // storages (the call's storage count) names new tensor out_at[i] - storages.
  std::vector<OpMemo::Out> outs;
  int32_t storages = 0;
};

std::atomic<bool> on{true};
thread_local int recording_depth = 0;
std::atomic<int64_t> hit_count{0}, record_count{0};
std::mutex mu;
std::unordered_map<uint64_t, Family> table;
std::unordered_set<uint64_t> seen;  // structures of calls that missed
constexpr size_t kMaxSeen = 8192;

bool same(const eager::HostScalar& a, const eager::HostScalar& b) {
  return a.integral == b.integral && (a.integral ? a.i == b.i : OpMemo::bits(a.d) == OpMemo::bits(b.d));
}

// A float a free argument may take: none a kernel may treat specially.
bool plain(const eager::HostScalar& v) {
  if (v.integral || !std::isfinite(v.d)) return false;
  const double a = std::fabs(v.d);
  return a != 0 && a != 1 && a != 2 && a != 0.5;
}

// Whether `call` may take `f`'s graph: its numbers equal the recorded
// ones, but free ones, which must be plain.
bool matches(const Family& f, const OpMemo::Call& call) {
  if (f.words != call.words || f.values.size() != call.values.size()) return false;
  for (size_t j = 0; j < call.values.size(); ++j)
    if (f.free[j] ? !plain(call.values[j]) : !same(f.values[j], call.values[j])) return false;
  return true;
}

// Updates `f` with a call of its structure that differed in some numbers
// and built `b` (storages mapped by in_at / out_at): frees the numbers shown
// to be runtime scalars; false if the call shows none can be.
bool generalize(Family& f, const OpMemo::Call& call, const eager::OpGraph::Built& b, const ir::GraphKey& key,
                const std::vector<int32_t>& in_at, const std::vector<int32_t>& out_at) {
  if (!(key == f.key) || in_at != f.in_at || out_at != f.out_at) return false;
  const size_t n = call.values.size();
  std::vector<bool> changed(n, false), mapped(n, false);
  std::vector<size_t> changed_at;
  for (size_t j = 0; j < n; ++j) {
    if (same(f.values[j], call.values[j])) continue;
    if (!plain(f.values[j]) || !plain(call.values[j])) return false;
    changed[j] = true;
    changed_at.push_back(j);
  }
  // The scalar parameters whose values changed; the others must not hold a
  // changed number.
  std::vector<size_t> moved;
  for (size_t i = 0; i < b.inputs.size(); ++i) {
    if (in_at[i] != -1) continue;
    if (!same(f.built.inputs[i].host, b.inputs[i].host)) {
      moved.push_back(i);
    } else if (f.scalar_at[i] >= 0 && changed[f.scalar_at[i]]) {
      return false;
    }
  }
  // Each moved parameter holds a changed number: one number for all (a
  // foreach op's Scalar), or one each, in order (its ScalarList: equal
  // values, one step size per tensor, are told apart by order only).
  if (changed_at.empty() || (changed_at.size() > 1 && moved.size() != changed_at.size())) return false;
  std::vector<int32_t> scalar_at = f.scalar_at;
  for (size_t k = 0; k < moved.size(); ++k) {
    const size_t i = moved[k];
    const size_t j = changed_at.size() == 1 ? changed_at[0] : changed_at[k];
    if (!same(f.built.inputs[i].host, f.values[j]) || !same(b.inputs[i].host, call.values[j])) return false;
    if (scalar_at[i] >= 0 && scalar_at[i] != static_cast<int32_t>(j)) return false;
    scalar_at[i] = static_cast<int32_t>(j);
    mapped[j] = true;
  }
  for (size_t j : changed_at)
    if (!mapped[j]) return false;  // it changed, yet no parameter did
  for (size_t j = 0; j < n; ++j)
    if (mapped[j]) f.free[j] = true;
  f.scalar_at = std::move(scalar_at);
  f.values = call.values;
  return true;
}

}  // namespace

bool OpMemo::enabled() { return on.load(std::memory_order_relaxed); }

void OpMemo::set_enabled(bool enable) {
  on = enable;
  if (!enable) clear();
}

std::optional<OpMemo::Hit> OpMemo::find(const Call& call, bool* again) {
  if (!call.ok) return std::nullopt;
  std::optional<Hit> h;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = table.find(call.hash);
    if (it == table.end() || !matches(it->second, call)) {
      if (again) {
        if (seen.size() >= kMaxSeen) seen.clear();
        *again = it != table.end() || !seen.insert(call.hash).second;
      }
      return std::nullopt;
    }
    const Family& f = it->second;
    h.emplace();
    h->built = f.built;
    h->built.shared = f.graph;
    h->built.key = f.key;
    h->outs = f.outs;
    eager::OpGraph::Built& b = h->built;
    for (size_t i = 0; i < f.in_at.size(); ++i) {
      eager::OpGraph::Input& in = b.inputs[i];
      if (f.in_at[i] >= 0) {
        in.storage = call.storages[f.in_at[i]];
      } else if (f.scalar_at[i] >= 0 && !same(in.host, call.values[f.scalar_at[i]])) {
        in.host = call.values[f.scalar_at[i]];
        in.scalar = eager::Runtime::get().scalar_buffer(f.graph->type(in.param).dtype, in.host, call.device);
      }
    }
    h->out_fresh.assign(f.out_at.size(), -1);
    for (size_t i = 0; i < f.out_at.size(); ++i) {
      if (f.out_at[i] < f.storages) b.outputs[i].storage = call.storages[f.out_at[i]];
      else h->out_fresh[i] = f.out_at[i] - f.storages;
    }
  }
  hit_count.fetch_add(1, std::memory_order_relaxed);
  return h;
}

namespace {

// Keeps what `call` built: its graph (storages as indices: in_at / out_at),
// and for a typed call how its results are made (`outs`).
void store(const OpMemo::Call& call, const eager::OpGraph::Built& built, std::vector<int32_t> in_at,
           std::vector<int32_t> out_at, std::vector<OpMemo::Out> outs) {
  eager::OpGraph::Built stripped = built;
  for (eager::OpGraph::Input& in : stripped.inputs) in.storage = nullptr;
  for (eager::OpGraph::Output& o : stripped.outputs) o.storage = nullptr;
  const ir::GraphKey key = ir::graph_key(stripped.graph, ir::GraphKey{});
  auto graph = std::make_shared<const ir::Graph>(std::move(stripped.graph));
  stripped.graph = ir::Graph();
  std::lock_guard<std::mutex> lock(mu);
  record_count.fetch_add(1, std::memory_order_relaxed);
  auto it = table.find(call.hash);
  if (call.may_free && it != table.end() && it->second.words == call.words &&
      generalize(it->second, call, stripped, key, in_at, out_at)) {
    it->second.built = std::move(stripped);
    it->second.graph = std::move(graph);
    return;
  }
  if (it == table.end() && table.size() >= OpMemo::kMaxEntries) table.clear();
  Family& f = table[call.hash];
  f.words = call.words;
  f.values = call.values;
  f.free.assign(call.values.size(), false);
  f.built = std::move(stripped);
  f.graph = std::move(graph);
  f.key = key;
  f.in_at = std::move(in_at);
  f.out_at = std::move(out_at);
  f.scalar_at.assign(f.in_at.size(), -1);
  f.outs = std::move(outs);
  f.storages = static_cast<int32_t>(call.storages.size());
}

int32_t index_in(const std::vector<eager::StorageValue*>& v, const eager::StorageValue* s) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == s) return static_cast<int32_t>(i);
  return -1;
}

// Where the graph reads and writes, as indices into the call's storages
// then the new tensors' (scalars: -1); false if it reads or writes any other
// storage, reads a new tensor or draws random keys.
bool place_storages(const eager::OpGraph::Built& b, const std::vector<eager::StorageValue*>& storages,
                    const std::vector<eager::StorageValue*>& fresh, std::vector<int32_t>& in_at,
                    std::vector<int32_t>& out_at) {
  for (const eager::OpGraph::Input& in : b.inputs) {
    if (in.redraw.source) return false;  // random keys are drawn anew by each call
    const int32_t i = in.storage ? index_in(storages, in.storage) : -1;
    if (in.storage && i < 0) return false;
    in_at.push_back(i);
  }
  for (const eager::OpGraph::Output& o : b.outputs) {
    int32_t i = index_in(storages, o.storage);
    if (i < 0) {
      const int32_t k = index_in(fresh, o.storage);
      if (k < 0) return false;  // a temporary, a device-side check's flag
      i = static_cast<int32_t>(storages.size()) + k;
    }
    out_at.push_back(i);
  }
  return true;
}

// The layout and storage of each of a typed call's tensors.
std::vector<int64_t> layouts(const OpMemo::Call& call) {
  std::vector<int64_t> m;
  for (const at::Tensor* t : call.tensors) {
    m.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(t->unsafeGetTensorImpl())));
    m.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(storage_value(*t))));
    m.push_back(t->storage_offset());
    m.push_back(static_cast<int64_t>(t->scalar_type()));
    for (int64_t s : t->sizes()) m.push_back(s);
    for (int64_t s : t->strides()) m.push_back(s);
  }
  return m;
}

}  // namespace

void OpMemo::record(const Call& call, const eager::OpGraph::Built& built) {
  if (!call.ok || !built.graph.collectives.empty()) return;
  std::vector<int32_t> in_at, out_at;
  if (!place_storages(built, call.storages, {}, in_at, out_at)) return;
  store(call, built, std::move(in_at), std::move(out_at), {});
}

bool OpMemo::eligible(const eager::OpCounter* c) {
  return on.load(std::memory_order_relaxed) && recording_depth == 0 &&
         c->memo_refusals.load(std::memory_order_relaxed) < kMaxRefusals && !eager::current_op() &&
         !KernelBatch::building() && !nan_check.load(std::memory_order_relaxed);
}

OpMemo::Recording::Recording(const eager::OpCounter* c, const Call& call) : c_(c), call_(call), meta_(layouts(call)) {
  ++recording_depth;
}

OpMemo::Recording::~Recording() { --recording_depth; }

void OpMemo::Recording::done(const std::vector<Result>& results, const std::vector<const void*>& args) {
  auto refuse = [&] { c_->memo_refusals.fetch_add(1, std::memory_order_relaxed); };
  // One graph, no sync point or upload, the arguments' layouts and storages as they were.
  if (rec_.tainted || rec_.runs.size() != 1 || layouts(call_) != meta_) return refuse();
  // A collective's kernel joins its group after the graph: a hit would not.
  if (!rec_.runs[0].graph.collectives.empty()) return refuse();
  std::vector<Out> outs;
  std::vector<eager::StorageValue*> fresh;
  for (const Result& res : results) {
    const at::Tensor* r = res.tensor;
    Out o;
    for (size_t i = 0; i < args.size() && o.arg < 0; ++i)
      if (args[i] == r) o.arg = static_cast<int>(i);  // a reference to an argument (in-place, out=)
    if (res.ref && o.arg < 0) return refuse();
    if (o.arg < 0 && !r->defined()) {
      o.undefined = true;
      outs.push_back(std::move(o));
      continue;
    }
    for (const auto& [i, t] : call_.top)
      if (o.arg < 0 && t->unsafeGetTensorImpl() == r->unsafeGetTensorImpl()) o.arg = i;
    if (o.arg < 0) {
      // A new tensor: its own new storage, exactly its size.
      if (!r->device().is_privateuseone() || r->device().index() != call_.device || r->storage_offset() != 0)
        return refuse();
      eager::StorageValue* s = storage_value(*r);
      const size_t nbytes = at::detail::computeStorageNbytes(r->sizes(), r->strides(), r->element_size());
      if (index_in(call_.storages, s) >= 0 || index_in(fresh, s) >= 0 || s->nbytes() != static_cast<int64_t>(nbytes))
        return refuse();
      o.fresh = static_cast<int>(fresh.size());
      fresh.push_back(s);
      o.sizes = r->sizes().vec();
      o.strides = r->strides().vec();
      o.dtype = r->scalar_type();
    }
    outs.push_back(std::move(o));
  }
  std::vector<int32_t> in_at, out_at;
  if (!place_storages(rec_.runs[0], call_.storages, fresh, in_at, out_at)) return refuse();
  store(call_, rec_.runs[0], std::move(in_at), std::move(out_at), std::move(outs));
}

void OpMemo::run(const char* name, int device, Hit& hit) {
  const c10::Device dev(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device));
  {
    c10::DeviceGuard guard(dev);
    for (const Out& o : hit.outs)
      if (o.fresh >= 0) {
        if (hit.fresh.size() <= static_cast<size_t>(o.fresh)) hit.fresh.resize(o.fresh + 1);
        hit.fresh[o.fresh] = at::detail::empty_strided_generic(
            o.sizes, o.strides, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), o.dtype);
      }
  }
  for (size_t i = 0; i < hit.out_fresh.size(); ++i)
    if (hit.out_fresh[i] >= 0) hit.built.outputs[i].storage = storage_value(hit.fresh[hit.out_fresh[i]]);
  run_built(name, dev, std::move(hit.built));
}

int64_t OpMemo::hits() { return hit_count.load(std::memory_order_relaxed); }
int64_t OpMemo::records() { return record_count.load(std::memory_order_relaxed); }

void OpMemo::reset_counts() {
  hit_count = 0;
  record_count = 0;
}

void OpMemo::clear() {
  std::lock_guard<std::mutex> lock(mu);
  table.clear();
  seen.clear();
}

}  // namespace torchtpu::aten
