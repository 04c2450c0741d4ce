// The keys of the op memo (op_memo.h): a boxed call's IValues, a typed
// call's arguments.
#include "aten/op_memo.h"

#include "aten/tensor_ir.h"
#include "eager/capture.h"

namespace torchtpu::aten {
namespace {

enum Tag : int64_t { kTensor = 1, kUndefined, kList, kDouble, kInt, kBool, kNone, kComplex, kEnd, kString, kDtype };

uint64_t hash_words(const std::vector<int64_t>& w) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int64_t x : w) h = (h ^ static_cast<uint64_t>(x)) * 0x100000001B3ULL + (h >> 29);
  return h;
}

// The words of one tensor: its layout, and which of the call's storages it
// views (a storage seen first: its size, stored dtype and whether it holds
// a value). False unless it is on the call's tpu device.
bool tensor_words(OpMemo::Call& c, std::vector<std::pair<const eager::StorageValue*, int32_t>>& index,
                  const at::Tensor& t) {
  if (!t.defined()) {
    c.words.push_back(kUndefined);
    return true;
  }
  if (!t.device().is_privateuseone()) return false;
  if (c.device < 0) c.device = t.device().index();
  if (t.device().index() != c.device) return false;
  c.words.push_back(kTensor);
  c.words.push_back(static_cast<int64_t>(t.scalar_type()));
  c.words.push_back(t.dim() | (int64_t{t.is_conj()} << 32) | (int64_t{t.is_neg()} << 33));
  for (int64_t s : t.sizes()) c.words.push_back(s);
  for (int64_t s : t.strides()) c.words.push_back(s);
  c.words.push_back(t.storage_offset());
  eager::StorageValue* s = storage_value(t);
  for (const auto& [seen, i] : index)
    if (seen == s) {
      c.words.push_back(i);
      return true;
    }
  const auto i = static_cast<int32_t>(c.storages.size());
  index.emplace_back(s, i);
  c.storages.push_back(s);
  c.words.push_back(i);
  c.words.push_back(s->nbytes());
  c.words.push_back(static_cast<int64_t>(s->dtype()));
  c.words.push_back(s->has_value());
  return true;
}

// The words every key starts with.
void header(OpMemo::Call& c, const char* name) {
  c.words.reserve(32);
  c.words.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(name)));
  c.words.push_back(static_cast<int64_t>(matmul_precision()));
  c.words.push_back(static_cast<int64_t>(at::get_default_dtype_as_scalartype()));
}

// Appends the words and numbers of a boxed call's IValues.
class Keyer {
 public:
  explicit Keyer(OpMemo::Call& c) : c_(c) {}

  bool value(const c10::IValue& v) {
    if (v.isTensor()) return tensor_words(c_, index_, v.toTensor());
    if (v.isNone()) return word(kNone);
    if (v.isDouble()) return number(kDouble, eager::HostScalar::of_float(v.toDouble()));
    if (v.isInt()) return number(kInt, eager::HostScalar::of_int(v.toInt()));
    if (v.isBool()) return number(kBool, eager::HostScalar::of_int(v.toBool() ? 1 : 0));
    if (v.isComplexDouble()) {
      const c10::complex<double> z = v.toComplexDouble();
      return word(kComplex) && word(OpMemo::bits(z.real())) && word(OpMemo::bits(z.imag()));
    }
    if (v.isTensorList()) {
      word(kList);
      for (const at::Tensor& t : v.toTensorList())
        if (!tensor_words(c_, index_, t)) return false;
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

  OpMemo::Call& c_;
  std::vector<std::pair<const eager::StorageValue*, int32_t>> index_;
};

}  // namespace

OpMemo::Call OpMemo::key(const char* name, int device, const torch::jit::Stack& stack, size_t n) {
  Call c;
  c.device = device;
  c.may_free = true;
  header(c, name);
  {
    // Storage state is guarded by the device lock.
    std::lock_guard<std::recursive_mutex> lock(eager::Runtime::get().device_lock(device));
    Keyer k(c);
    for (size_t i = stack.size() - n; i < stack.size(); ++i)
      if (!k.value(stack[i])) return c;
  }
  c.words.push_back(device);  // a recorded graph holds scalar buffers of its device
  c.hash = hash_words(c.words);
  c.ok = true;
  return c;
}

OpMemo::Args::Args(const char* name) {
  call_.ok = true;
  header(call_, name);
}

void OpMemo::Args::tensor(const at::Tensor& t) {
  if (!call_.ok) return;
  if (!lock_.owns_lock() && t.defined() && t.device().is_privateuseone())
    lock_ = std::unique_lock<std::recursive_mutex>(eager::Runtime::get().device_lock(t.device().index()));
  if (!tensor_words(call_, index_, t)) {
    call_.ok = false;
    return;
  }
  if (t.defined()) call_.tensors.push_back(&t);
}

void OpMemo::Args::see(const at::Tensor& t) {
  if (call_.ok && t.defined()) call_.top.emplace_back(static_cast<int>(pos_), &t);
  ++pos_;
  tensor(t);
}
void OpMemo::Args::see(const std::optional<at::Tensor>& t) {
  ++pos_;
  if (t) tensor(*t);
  else word(kNone);
}
void OpMemo::Args::see(at::TensorList ts) {
  ++pos_;
  word(kList);
  for (const at::Tensor& t : ts) tensor(t);
  word(kEnd);
}
void OpMemo::Args::see(const at::ITensorListRef& ts) {
  ++pos_;
  word(kList);
  for (const at::Tensor& t : ts) tensor(t);
  word(kEnd);
}
void OpMemo::Args::see(const c10::List<std::optional<at::Tensor>>& ts) {
  ++pos_;
  word(kList);
  for (const std::optional<at::Tensor>& t : ts) {
    if (t) tensor(*t);
    else word(kNone);
  }
  word(kEnd);
}
void OpMemo::Args::see(const c10::Scalar& s) {
  ++pos_;
  if (s.isComplex()) {
    word(kComplex);
    word(bits(s.toComplexDouble().real()));
    word(bits(s.toComplexDouble().imag()));
  } else if (s.isFloatingPoint()) {
    word(kDouble);
    word(bits(s.toDouble()));
  } else if (s.isBoolean()) {
    word(kBool);
    word(s.toBool());
  } else if (s.isUnsigned()) {
    word(kInt + 100);
    word(static_cast<int64_t>(s.toUInt64()));
  } else if (s.isIntegral(false)) {
    word(kInt);
    word(s.toLong());
  } else {
    call_.ok = false;  // symbolic
  }
}
void OpMemo::Args::see(const std::optional<c10::Scalar>& s) {
  if (s) return see(*s);
  ++pos_;
  word(kNone);
}
void OpMemo::Args::see(int64_t v) {
  ++pos_;
  word(kInt);
  word(v);
}
void OpMemo::Args::see(double v) {
  ++pos_;
  word(kDouble);
  word(bits(v));
}
void OpMemo::Args::see(bool v) {
  ++pos_;
  word(kBool);
  word(v);
}
void OpMemo::Args::see(const c10::SymInt& v) {
  ++pos_;
  if (v.is_heap_allocated()) call_.ok = false;  // symbolic
  else {
    word(kInt);
    word(v.as_int_unchecked());
  }
}
void OpMemo::Args::see(at::IntArrayRef v) {
  ++pos_;
  word(kList);
  for (int64_t x : v) word(x);
  word(kEnd);
}
void OpMemo::Args::see(c10::SymIntArrayRef v) {
  ++pos_;
  word(kList);
  for (const c10::SymInt& x : v) {
    if (x.is_heap_allocated()) call_.ok = false;
    else word(x.as_int_unchecked());
  }
  word(kEnd);
}
void OpMemo::Args::see(at::OptionalIntArrayRef v) {
  if (v) return see(*v);
  ++pos_;
  word(kNone);
}
void OpMemo::Args::see(at::OptionalSymIntArrayRef v) {
  if (v) return see(*v);
  ++pos_;
  word(kNone);
}
void OpMemo::Args::see(at::ArrayRef<double> v) {
  ++pos_;
  word(kList);
  for (double x : v) word(bits(x));
  word(kEnd);
}
void OpMemo::Args::see(const std::optional<at::ArrayRef<double>>& v) {
  if (v) return see(*v);
  ++pos_;
  word(kNone);
}
void OpMemo::Args::see(std::optional<int64_t> v) {
  if (v) return see(*v);
  ++pos_;
  word(kNone);
}
void OpMemo::Args::see(const std::optional<c10::SymInt>& v) {
  if (v) return see(*v);
  ++pos_;
  word(kNone);
}
void OpMemo::Args::see(std::optional<double> v) {
  if (v) return see(*v);
  ++pos_;
  word(kNone);
}
void OpMemo::Args::see(std::optional<bool> v) {
  if (v) return see(*v);
  ++pos_;
  word(kNone);
}
void OpMemo::Args::bools(const bool* v, size_t n) {
  ++pos_;
  word(kList);
  for (size_t i = 0; i < n; ++i) word(v[i]);
  word(kEnd);
}
void OpMemo::Args::see(at::ScalarType v) {
  ++pos_;
  word(kDtype);
  word(static_cast<int64_t>(v));
}
void OpMemo::Args::see(std::optional<at::ScalarType> v) {
  if (v) return see(*v);
  ++pos_;
  word(kNone);
}
void OpMemo::Args::see(c10::string_view v) {
  ++pos_;
  word(kString);
  word(static_cast<int64_t>(v.size()));
  for (char ch : v) word(ch);
}
void OpMemo::Args::see(std::optional<c10::string_view> v) {
  if (v) return see(*v);
  ++pos_;
  word(kNone);
}
void OpMemo::Args::see(std::optional<at::Layout> v) {
  ++pos_;
  word(v ? static_cast<int64_t>(*v) : -1);
}
void OpMemo::Args::see(std::optional<at::Device> v) {
  ++pos_;
  word(v ? (static_cast<int64_t>(v->type()) << 16) + v->index() : -1);
}
void OpMemo::Args::see(std::optional<at::MemoryFormat> v) {
  ++pos_;
  word(v ? static_cast<int64_t>(*v) : -1);
}

OpMemo::Call OpMemo::Args::finish() {
  if (lock_.owns_lock()) lock_.unlock();
  if (call_.ok && call_.device < 0) call_.unkeyable = true;  // no tpu tensor: a factory op
  if (!call_.ok || call_.device < 0) {
    call_.ok = false;
    return std::move(call_);
  }
  if (eager::Capture::active(call_.device)) {  // a compiled function's capture: not this memo's
    call_.ok = false;
    return std::move(call_);
  }
  call_.words.push_back(call_.device);  // a recorded graph holds scalar buffers of its device
  call_.hash = hash_words(call_.words);
  return std::move(call_);
}

}  // namespace torchtpu::aten
