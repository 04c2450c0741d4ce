#include "aten/op_memo.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "aten/tensor_ir.h"
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
  eager::OpGraph::Built built;
  ir::GraphKey key;
  std::vector<int32_t> in_at, out_at, scalar_at;
};

std::atomic<bool> on{true};
std::atomic<int64_t> hit_count{0}, record_count{0};
std::mutex mu;
std::unordered_map<uint64_t, Family> table;

enum Tag : int64_t { kTensor = 1, kUndefined, kList, kDouble, kInt, kBool, kNone, kComplex, kEnd };

int64_t bits_of(double d) {
  int64_t bits;
  std::memcpy(&bits, &d, sizeof bits);  // exact: -0.0 and NaN payloads included
  return bits;
}

bool same(const eager::HostScalar& a, const eager::HostScalar& b) {
  return a.integral == b.integral && (a.integral ? a.i == b.i : bits_of(a.d) == bits_of(b.d));
}

// A float a free argument may take: none a kernel may treat specially.
bool plain(const eager::HostScalar& v) {
  if (v.integral || !std::isfinite(v.d)) return false;
  const double a = std::fabs(v.d);
  return a != 0 && a != 1 && a != 2 && a != 0.5;
}

// Appends the words and numbers of IValues to a call's key.
class Keyer {
 public:
  Keyer(OpMemo::Call& c, int device) : c_(c), device_(device) {}

  bool value(const c10::IValue& v) {
    if (v.isTensor()) return tensor(v.toTensor());
    if (v.isNone()) return word(kNone);
    if (v.isDouble()) return number(kDouble, eager::HostScalar::of_float(v.toDouble()));
    if (v.isInt()) return number(kInt, eager::HostScalar::of_int(v.toInt()));
    if (v.isBool()) return number(kBool, eager::HostScalar::of_int(v.toBool() ? 1 : 0));
    if (v.isComplexDouble()) {
      const c10::complex<double> z = v.toComplexDouble();
      return word(kComplex) && word(bits_of(z.real())) && word(bits_of(z.imag()));
    }
    if (v.isTensorList()) {
      word(kList);
      for (const at::Tensor& t : v.toTensorList())
        if (!tensor(t)) return false;
      return word(kEnd);
    }
    if (v.isList()) {
      word(kList);
      for (const c10::IValue& e : v.toListRef())
        if (!value(e)) return false;
      return word(kEnd);
    }
    return false;  // a string, a generator, a device, ...: not keyed
  }

 private:
  bool word(int64_t w) {
    c_.words.push_back(w);
    return true;
  }
  bool number(Tag tag, eager::HostScalar v) {
    c_.values.push_back(v);
    return word(tag);
  }
  bool tensor(const at::Tensor& t) {
    if (!t.defined()) return word(kUndefined);
    if (!t.device().is_privateuseone() || t.device().index() != device_) return false;
    word(kTensor);
    word(static_cast<int64_t>(t.scalar_type()));
    word(t.dim());
    for (int64_t s : t.sizes()) word(s);
    for (int64_t s : t.strides()) word(s);
    word(t.storage_offset());
    eager::StorageValue* s = storage_value(t);
    auto [it, fresh] = index_.emplace(s, static_cast<int32_t>(c_.storages.size()));
    word(it->second);
    if (fresh) {
      c_.storages.push_back(s);
      word(s->nbytes());
      word(static_cast<int64_t>(s->dtype()));
      word(s->has_value());
    }
    return true;
  }

  OpMemo::Call& c_;
  int device_;
  std::unordered_map<const eager::StorageValue*, int32_t> index_;
};

uint64_t hash_words(const std::vector<int64_t>& w) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int64_t x : w) h = (h ^ static_cast<uint64_t>(x)) * 0x100000001B3ULL + (h >> 29);
  return h;
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

OpMemo::Call OpMemo::key(const char* name, int device, const torch::jit::Stack& stack, size_t n) {
  Call c;
  c.device = device;
  c.words.reserve(16 * n + 8);
  c.words.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(name)));
  c.words.push_back(device);
  c.words.push_back(static_cast<int64_t>(matmul_precision()));
  c.words.push_back(static_cast<int64_t>(at::get_default_dtype_as_scalartype()));
  {
    // Storage state is guarded by the device lock.
    std::lock_guard<std::recursive_mutex> lock(eager::Runtime::get().device_lock(device));
    Keyer k(c, device);
    for (size_t i = stack.size() - n; i < stack.size(); ++i)
      if (!k.value(stack[i])) return c;
  }
  c.hash = hash_words(c.words);
  c.ok = true;
  return c;
}

std::optional<eager::OpGraph::Built> OpMemo::find(const Call& call) {
  if (!call.ok) return std::nullopt;
  std::optional<eager::OpGraph::Built> b;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = table.find(call.hash);
    if (it == table.end() || !matches(it->second, call)) return std::nullopt;
    const Family& f = it->second;
    b = f.built;
    for (size_t i = 0; i < f.in_at.size(); ++i) {
      eager::OpGraph::Input& in = b->inputs[i];
      if (f.in_at[i] >= 0) {
        in.storage = call.storages[f.in_at[i]];
      } else if (f.scalar_at[i] >= 0 && !same(in.host, call.values[f.scalar_at[i]])) {
        in.host = call.values[f.scalar_at[i]];
        in.scalar = eager::Runtime::get().scalar_buffer(b->graph.type(in.param).dtype, in.host, call.device);
      }
    }
    for (size_t i = 0; i < f.out_at.size(); ++i) b->outputs[i].storage = call.storages[f.out_at[i]];
  }
  hit_count.fetch_add(1, std::memory_order_relaxed);
  return b;
}

void OpMemo::record(const Call& call, const eager::OpGraph::Built& built) {
  if (!call.ok) return;
  auto at = [&](const eager::StorageValue* s) -> int32_t {
    for (size_t i = 0; i < call.storages.size(); ++i)
      if (call.storages[i] == s) return static_cast<int32_t>(i);
    return -2;
  };
  std::vector<int32_t> in_at, out_at;
  for (const eager::OpGraph::Input& in : built.inputs) {
    if (in.redraw.source) return;  // random keys are drawn anew by each call
    const int32_t i = in.storage ? at(in.storage) : -1;
    if (i == -2) return;
    in_at.push_back(i);
  }
  for (const eager::OpGraph::Output& o : built.outputs) {
    const int32_t i = at(o.storage);
    if (i < 0) return;
    out_at.push_back(i);
  }
  eager::OpGraph::Built stripped = built;
  for (eager::OpGraph::Input& in : stripped.inputs) in.storage = nullptr;
  for (eager::OpGraph::Output& o : stripped.outputs) o.storage = nullptr;
  const ir::GraphKey key = ir::graph_key(stripped.graph, ir::GraphKey{});
  std::lock_guard<std::mutex> lock(mu);
  record_count.fetch_add(1, std::memory_order_relaxed);
  auto it = table.find(call.hash);
  if (it != table.end() && it->second.words == call.words &&
      generalize(it->second, call, stripped, key, in_at, out_at)) {
    it->second.built = std::move(stripped);
    return;
  }
  if (it == table.end() && table.size() >= kMaxEntries) table.clear();
  Family& f = table[call.hash];
  f.words = call.words;
  f.values = call.values;
  f.free.assign(call.values.size(), false);
  f.built = std::move(stripped);
  f.key = key;
  f.in_at = std::move(in_at);
  f.out_at = std::move(out_at);
  f.scalar_at.assign(f.in_at.size(), -1);
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
}

}  // namespace torchtpu::aten
