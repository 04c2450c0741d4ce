#include "aten/tensor_ir.h"

#include <ATen/Context.h>
#include <ATen/native/Resize.h>

#include <c10/core/DeviceGuard.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/graph_task.h>

#include <algorithm>
#include <set>
#include <array>
#include <atomic>
#include <mutex>

#include "eager/capture.h"
#include "eager/fused_graph.h"
#include "eager/site_log.h"

namespace torchtpu::aten {

DType to_ir(at::ScalarType t) {
  switch (t) {
    case at::kBool: return DType::kBool;
    case at::kByte: return DType::kU8;
    case at::kChar: return DType::kS8;
    case at::kShort: return DType::kS16;
    case at::kInt: return DType::kS32;
    case at::kLong: return DType::kS64;
    case at::kHalf: return DType::kF16;
    case at::kBFloat16: return DType::kBF16;
    case at::kFloat: return DType::kF32;
    case at::kDouble: return DType::kF64;
    case at::kUInt32: return DType::kU32;
    case at::kUInt64: return DType::kU64;
    case at::kComplexFloat: return DType::kC64;
    case at::kComplexDouble: return DType::kC128;
    case at::kFloat8_e4m3fn: return DType::kF8E4M3FN;
    case at::kFloat8_e5m2: return DType::kF8E5M2;
    case at::kFloat8_e4m3fnuz: return DType::kF8E4M3FNUZ;
    case at::kFloat8_e5m2fnuz: return DType::kF8E5M2FNUZ;
    default:
      TORCH_CHECK_TYPE(false, "tpu does not support dtype ", t,
                       " (supported: bool, uint8, int8, int16, int32, int64, uint32, uint64, float16, bfloat16, "
                       "float32, float64, complex64, complex128, and the float8 types as storage)");
  }
}

at::ScalarType to_aten(DType t) {
  switch (t) {
    case DType::kBool: return at::kBool;
    case DType::kU8: return at::kByte;
    case DType::kS8: return at::kChar;
    case DType::kS16: return at::kShort;
    case DType::kS32: return at::kInt;
    case DType::kS64: return at::kLong;
    case DType::kF16: return at::kHalf;
    case DType::kBF16: return at::kBFloat16;
    case DType::kF32: return at::kFloat;
    case DType::kF64: return at::kDouble;
    case DType::kU32: return at::kUInt32;
    case DType::kU64: return at::kUInt64;
    case DType::kC64: return at::kComplexFloat;
    case DType::kC128: return at::kComplexDouble;
    case DType::kF8E4M3FN: return at::kFloat8_e4m3fn;
    case DType::kF8E5M2: return at::kFloat8_e5m2;
    case DType::kF8E4M3FNUZ: return at::kFloat8_e4m3fnuz;
    case DType::kF8E5M2FNUZ: return at::kFloat8_e5m2fnuz;
  }
  return at::kFloat;
}

eager::StorageValue* storage_value(const at::Tensor& t) {
  auto* ctx = t.storage().data_ptr().get_context();
  TORCH_CHECK(ctx != nullptr, "tpu tensor without a device storage");
  return static_cast<eager::StorageValue*>(ctx);
}

ir::Dims to_dims(at::IntArrayRef a) { return ir::Dims(a.begin(), a.end()); }

ops::ViewMeta view_meta(const at::Tensor& t) {
  return ops::ViewMeta{to_dims(t.sizes()), to_dims(t.strides()), t.storage_offset()};
}

at::Tensor empty_device(at::IntArrayRef sizes, at::ScalarType dtype, c10::DeviceIndex device) {
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  to_ir(dtype);
  return at::detail::empty_generic(sizes, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   dtype, std::nullopt);
}

void check_same_device(const char* op, c10::Device device, std::initializer_list<const at::Tensor*> ts) {
  for (const at::Tensor* t : ts) {
    if (!t || !t->defined() || t->device() == device) continue;
    if (t->device().is_cpu() && t->dim() == 0) continue;
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", device,
                " and ", t->device(), "! (in ", op, ")");
  }
}

void check_no_partial_overlap(const at::Tensor& written, const at::Tensor& input) {
  if (!written.defined() || !input.defined() || written.is_same(input)) return;
  if (written.numel() == 0 || input.numel() == 0) return;
  if (!written.device().is_privateuseone() || !input.device().is_privateuseone()) return;
  // PyTorch judges dense tensors only (others are "too hard" to tell).
  if (!written.is_non_overlapping_and_dense() || !input.is_non_overlapping_and_dense()) return;
  if (storage_value(written) != storage_value(input)) return;
  const int64_t wsize = written.element_size(), isize = input.element_size();
  const int64_t wb = written.storage_offset() * wsize, ib = input.storage_offset() * isize;
  const int64_t we = wb + written.numel() * wsize, ie = ib + input.numel() * isize;
  const bool full = wb == ib && we == ie && written.strides() == input.strides();
  TORCH_CHECK(full || !(wb < ie && ib < we),
              "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
              "memory location. Please clone() the tensor before performing the operation.");
}

namespace {
// Process-wide, like torch.set_float32_matmul_precision: backward ops run on
// the autograd engine's threads and must see it too.
std::atomic<int> precision_override{-1};
}  // namespace

ops::Precision matmul_precision() {
  const int o = precision_override.load(std::memory_order_relaxed);
  if (o >= 0) return static_cast<ops::Precision>(o);
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST: return ops::Precision::kHighest;
    case at::Float32MatmulPrecision::HIGH: return ops::Precision::kHigh;
    case at::Float32MatmulPrecision::MEDIUM: return ops::Precision::kDefault;
  }
  return ops::Precision::kHighest;
}

int set_precision_override(int precision) {
  TORCH_CHECK(precision >= -1 && precision <= static_cast<int>(ops::Precision::kHighest),
              "invalid matmul precision ", precision);
  return precision_override.exchange(precision);
}

Kernel::Kernel(const char* op, c10::Device device)
    : op_(op), device_(check_device(op, device)), batch_(KernelBatch::active(device)) {
  if (batch_) {
    og_ = &batch_->og_;
  } else {
    own_.emplace(device.index(), op);
    og_ = &*own_;
  }
  og_->b().set_precision(matmul_precision());
}

c10::Device Kernel::check_device(const char* op, c10::Device device) {
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1, op, ": expected a tpu tensor, got one on ", device);
  return device;
}

namespace {
// Per device: the backward pass (graph task) that last queued its
// end-of-backward flush, plus one (0: none); devices past the last slot
// share it.
std::array<std::atomic<int>, 64> flush_queued_for{};
}  // namespace

namespace {

using PendingCheck = CheckRecord;
// Per issuing thread, as errors of queued work are; checks of ops that the
// autograd engine runs (backward) go to a shared list that any thread's
// sync point raises. Bounded: past the limit the flags are folded into one
// (a device op, no sync).
thread_local std::vector<PendingCheck> pending_checks;
thread_local bool evaluating_checks = false;
// Never destroyed: engine threads may still run backward ops while the
// interpreter exits.
std::mutex& backward_checks_mu = *new std::mutex;
std::vector<PendingCheck>& backward_checks = *new std::vector<PendingCheck>;
constexpr size_t kMaxPendingChecks = 64;

[[noreturn]] void raise_check(const PendingCheck& c) {
  std::string where = eager::format_site(c.site.where, /*with_source=*/true);
  std::string msg = std::string(c.site.op) + ": " + c.what + (where.empty() ? "" : " (issued at " + where + ")");
  if (c.kind == Kernel::CheckKind::kIndex) TORCH_CHECK_INDEX(false, msg);
  TORCH_CHECK(false, msg);
}

bool flag_set(const at::Tensor& flag) {
  eager::SiteLog::Quiet quiet;  // part of the user's sync point (fold_checks, raise_failed_checks)
  return flag.to(at::kCPU).item<bool>();
}

// Keeps a list bounded without a sync: its checks become one whose flag is
// their `or` and whose message names them (the first few).
void fold_checks(std::vector<PendingCheck>& list) {
  evaluating_checks = true;
  std::vector<PendingCheck> checks;
  checks.swap(list);
  std::vector<at::Tensor> flags;
  std::string what = "a device-side check failed in one of " + std::to_string(checks.size()) + " ops:";
  for (size_t i = 0; i < checks.size(); ++i) {
    flags.push_back(checks[i].flag.reshape({1}));
    if (i < 4) what += std::string(" ") + checks[i].site.op + " (" + checks[i].what + ")";
  }
  try {
    list.push_back({at::cat(flags).any(), checks[0].kind, what, checks[0].site});
  } catch (...) {
    evaluating_checks = false;
    throw;
  }
  evaluating_checks = false;
}

}  // namespace

void Kernel::check(Value bad, CheckKind kind, std::string what) {
  std::vector<int64_t> all(b().rank(bad));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  Value any = b().reduce_max(b().convert(bad, DType::kBool), all);
  checks_.push_back({out(any, at::kBool), kind, std::move(what)});
}

void raise_failed_checks() {
  if (evaluating_checks) return;
  eager::SiteLog::Quiet quiet;  // reading the flags is part of the user's sync point
  evaluating_checks = true;
  std::vector<PendingCheck> checks;
  checks.swap(pending_checks);
  {
    std::lock_guard<std::mutex> lock(backward_checks_mu);
    for (PendingCheck& c : backward_checks) checks.push_back(std::move(c));
    backward_checks.clear();
  }
  if (checks.empty()) {
    evaluating_checks = false;
    return;
  }
  try {
    bool any = checks.size() == 1;
    if (!any) {
      std::vector<at::Tensor> flags;
      for (const PendingCheck& c : checks) flags.push_back(c.flag.reshape({1}));
      any = flag_set(at::cat(flags).any());
    }
    if (any)
      for (const PendingCheck& c : checks)
        if (flag_set(c.flag)) raise_check(c);
  } catch (...) {
    evaluating_checks = false;
    throw;
  }
  evaluating_checks = false;
}

void queue_checks(std::vector<CheckRecord> checks, bool raise_in_debug) {
  if (checks.empty() || evaluating_checks) return;
  if (torch::autograd::get_current_node()) {
    std::lock_guard<std::mutex> lock(backward_checks_mu);
    for (CheckRecord& c : checks) backward_checks.push_back(std::move(c));
    if (backward_checks.size() > kMaxPendingChecks) fold_checks(backward_checks);
    return;
  }
  for (CheckRecord& c : checks) pending_checks.push_back(std::move(c));
  if (raise_in_debug && eager::Runtime::get().mode() == eager::EagerMode::kDebug) {
    raise_failed_checks();
  } else if (pending_checks.size() > kMaxPendingChecks) {
    fold_checks(pending_checks);
  }
}

std::vector<CheckRecord> take_checks(const std::function<bool(const at::Tensor&)>& pred) {
  std::vector<CheckRecord> out;
  auto take = [&](std::vector<CheckRecord>& list) {
    std::vector<CheckRecord> keep;
    for (CheckRecord& c : list) (pred(c.flag) ? out : keep).push_back(std::move(c));
    list.swap(keep);
  };
  take(pending_checks);
  std::lock_guard<std::mutex> lock(backward_checks_mu);
  take(backward_checks);
  return out;
}

namespace {

// After an op's (or a batch's) graph was handed to the mode: queues its
// checks, and in Fused Eager inside backward(), makes the end of backward a
// sync point: the first op of a backward pass on the device queues a
// callback that runs when it ends. It queues the pending graph of the
// thread the pass belongs to, on this device only: other threads' graphs
// (ranks that are threads) are cut where their own code says.
void after_run(const eager::OpSite& site, c10::Device device, std::vector<CheckRecord> records) {
  if (!records.empty() && !evaluating_checks) {
    // A captured op's flag is a value of the program being captured: it is
    // not read until the capture ends.
    queue_checks(std::move(records), /*raise_in_debug=*/!eager::Capture::active(device.index()));
  }
  if (eager::Runtime::get().mode() == eager::EagerMode::kFused && torch::autograd::get_current_node()) {
    const int task = torch::autograd::get_current_graph_task_id();
    const int index = device.index();
    auto& queued = flush_queued_for[std::min<size_t>(static_cast<size_t>(index), flush_queued_for.size() - 1)];
    if (task != -1 && queued.exchange(task + 1) != task + 1) {
      const uint64_t issuer = site.where.issuer;
      torch::autograd::Engine::get_default_engine().queue_callback([index, issuer] {
        eager::Runtime& rt = eager::Runtime::get();
        std::lock_guard<std::recursive_mutex> lock(rt.device_lock(index));
        rt.fused(index).flush_issuer(issuer);
        eager::Capture::abandon_all(index, "a synchronization");
      });
    }
  }
}

thread_local KernelBatch* active_batch = nullptr;

}  // namespace

void Kernel::run() {
  std::vector<CheckRecord> records;
  for (Check& c : checks_) records.push_back({std::move(c.flag), c.kind, std::move(c.what), og_->site()});
  checks_.clear();
  if (batch_) {
    for (CheckRecord& r : records) batch_->checks_.push_back(std::move(r));
    return;
  }
  try {
    og_->run();
  } catch (const eager::DeviceError& e) {
    rethrow_device_error(e);
  }
  after_run(og_->site(), device_, std::move(records));
}

KernelBatch::KernelBatch(const char* op, c10::Device device) : device_(device), og_(device.index(), op) {
  TORCH_INTERNAL_ASSERT(!active_batch, op, ": batches do not nest");
  active_batch = this;
  batching_.emplace();
}

bool KernelBatch::building() { return active_batch != nullptr; }

KernelBatch::~KernelBatch() { active_batch = nullptr; }

KernelBatch* KernelBatch::active(c10::Device device) {
  return active_batch && active_batch->device_ == device ? active_batch : nullptr;
}

void KernelBatch::run() {
  active_batch = nullptr;  // what follows is no longer part of the batch
  batching_.reset();
  try {
    og_.run();
  } catch (const eager::DeviceError& e) {
    rethrow_device_error(e);
  }
  after_run(og_.site(), device_, std::move(checks_));
}

std::optional<eager::OpGraph::Built> KernelBatch::built() const {
  if (!checks_.empty()) return std::nullopt;
  return og_.built();
}

void run_built(const char* op, c10::Device device, eager::OpGraph::Built built) {
  eager::OpGraph og(device.index(), built.op ? built.op : op);
  og.adopt(std::move(built));
  try {
    og.run();
  } catch (const eager::DeviceError& e) {
    rethrow_device_error(e);
  }
  after_run(og.site(), device, {});
}

void check_index(Kernel& k, Value idx, int64_t size, bool allow_negative, Kernel::CheckKind kind,
                 const std::string& what) {
  Builder& b = k.b();
  Value lo = b.constant(DType::kS64, allow_negative ? -static_cast<double>(size) : 0.0, b.dims(idx));
  Value hi = b.constant(DType::kS64, static_cast<double>(size), b.dims(idx));
  Value bad = b.logical_or(b.compare(idx, lo, ops::Cmp::kLT), b.compare(idx, hi, ops::Cmp::kGE));
  k.check(bad, kind, what);
}

[[noreturn]] void rethrow_device_error(const eager::DeviceError& e) {
  if (e.out_of_memory()) TORCH_CHECK_WITH(OutOfMemoryError, false, "tpu out of memory: ", e.what());
  TORCH_CHECK(false, e.what());
}

Value Kernel::in(const at::Tensor& t, at::ScalarType as) {
  if (!t.device().is_privateuseone()) {
    TORCH_CHECK(t.dim() == 0, "Expected all tensors to be on the same device, but found at least two devices, ",
                device_, " and ", t.device(), "! (in ", op_, ")");
    return scalar(t.item(), as);
  }
  TORCH_CHECK(t.device() == device_, "Expected all tensors to be on the same device, but found at least two devices, ",
              device_, " and ", t.device(), "! (in ", op_, ")");
  DType stored = to_ir(t.scalar_type());
  if (ir::is_complex(stored) || ir::is_complex(to_ir(as))) check_complex(t.scalar_type());
  if (ir::is_float8(stored) || ir::is_float8(to_ir(as))) check_float8(ir::is_float8(stored) ? t.scalar_type() : as);
  read_.push_back(storage_value(t));
  if (elementwise_ && operands_.empty()) inputs_.push_back(t);
  Value v = og_->read(read_.back(), stored, view_meta(t));
  // PyTorch's lazy conjugate and negative views are applied as read.
  if (t.is_conj()) v = b().conj(v);
  if (t.is_neg()) v = b().neg(v);
  return b().convert(v, to_ir(as));
}

std::vector<Value> Kernel::drawn(const std::vector<at::ScalarType>& as, std::shared_ptr<eager::Redraw> source) {
  std::vector<ir::DType> dtypes;
  for (at::ScalarType t : as) dtypes.push_back(to_ir(t));
  return og_->drawn_scalars(dtypes, std::move(source));
}

Value Kernel::scalar(const c10::Scalar& s, at::ScalarType as) {
  eager::HostScalar v;
  if (s.isBoolean()) {
    v = eager::HostScalar::of_int(s.toBool() ? 1 : 0);
  } else if (s.isUnsigned()) {
    v = eager::HostScalar::of_int(static_cast<int64_t>(s.toUInt64()));
    v.d = static_cast<double>(s.toUInt64());
  } else if (s.isIntegral(false)) {
    v = eager::HostScalar::of_int(s.toLong());
  } else {
    if (s.isComplex()) {
      check_complex(at::kComplexDouble);
      const c10::complex<double> z = s.toComplexDouble();
      const DType part = ir::is_complex(to_ir(as)) ? ir::real_of(to_ir(as)) : DType::kF64;
      Value c = b().complex(og_->scalar(part, eager::HostScalar::of_float(z.real())),
                            og_->scalar(part, eager::HostScalar::of_float(z.imag())));
      return b().convert(c, to_ir(as));
    }
    v = eager::HostScalar::of_float(s.toDouble());
  }
  if (ir::is_complex(to_ir(as))) return b().convert(og_->scalar(ir::real_of(to_ir(as)), v), to_ir(as));
  return og_->scalar(to_ir(as), v);
}

// Batched column-major strides of `shape` (2 dims or more).
static std::vector<int64_t> column_major_strides(at::IntArrayRef shape) {
  const size_t nd = shape.size();
  std::vector<int64_t> st(nd);
  const int64_t m = std::max<int64_t>(shape[nd - 2], 1), n = std::max<int64_t>(shape[nd - 1], 1);
  st[nd - 2] = 1;
  st[nd - 1] = m;
  int64_t next = m * n;
  for (size_t i = nd - 2; i-- > 0;) {
    st[i] = next;
    next *= std::max<int64_t>(shape[i], 1);
  }
  return st;
}

void Kernel::elementwise(std::initializer_list<const at::Tensor*> operands) {
  elementwise_ = true;
  operands_.clear();
  for (const at::Tensor* t : operands)
    if (t->defined() && t->device().is_privateuseone()) operands_.push_back(t);
}

at::Tensor Kernel::out(Value v, at::ScalarType dtype) {
  const ir::Dims& shape = b().dims(v);
  at::Tensor t;
  if (elementwise_) {
    c10::SmallVector<const at::Tensor*, 4> from(operands_.begin(), operands_.end());
    if (operands_.empty())
      for (const at::Tensor& x : inputs_) from.push_back(&x);
    bool rowmajor = true;  // an empty tensor's strides still decide, as PyTorch's
    for (const at::Tensor* x : from) rowmajor &= x->is_contiguous() && x->numel() != 0;
    std::vector<int64_t> strides = rowmajor ? std::vector<int64_t>{} : iterator_strides(shape, from);
    if (!strides.empty()) {
      c10::DeviceGuard guard(device_);
      t = at::detail::empty_strided_generic(shape, strides, device_allocator(),
                                            c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
    }
  }
  if (column_major_ && shape.size() >= 2) {
    c10::DeviceGuard guard(device_);
    t = at::detail::empty_strided_generic(shape, column_major_strides(shape), device_allocator(),
                                          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
  }
  if (!t.defined()) t = empty_device(shape, dtype, device_.index());
  into(t, v);
  return t;
}

namespace {
// The kernels PyTorch's CPU kernels define for float8 operands (names
// without "aten::" and overload): storage, copies and casts, data movement,
// and a few arithmetic and comparison ops. Others raise its error.
bool float8_supported(const char* op) {
  static const auto* s = new std::set<std::string>{
      "_copy_from", "_copy_from_and_resize", "_to_copy", "copy_", "clone", "fill_", "zero_", "_local_scalar_dense",
      "cat", "index", "index_select", "index_put_", "_index_put_impl_", "flip", "repeat", "constant_pad_nd", "empty",
      "eq", "ne", "isnan", "abs", "mul", "mm", "_scaled_mm", "where"};
  std::string name(op);
  if (name.rfind("aten::", 0) == 0) name = name.substr(6);
  return s->count(name.substr(0, name.find('.'))) > 0;
}
}  // namespace

void Kernel::check_float8(at::ScalarType t) const {
  std::string name(op_);
  if (name.rfind("aten::", 0) == 0) name = name.substr(6);
  TORCH_CHECK_NOT_IMPLEMENTED(float8_supported(op_), "\"", name.substr(0, name.find('.')), "\" not implemented for '",
                              c10::toString(t), "'");
}

void Kernel::check_complex(at::ScalarType t) const {
  TORCH_CHECK_TYPE(complex_supported(op_), op_, ": complex tensors (", t,
                   ") are not supported on tpu yet; the complex ops are listed in csrc/aten/kernels_complex.cpp");
}

void Kernel::into(const at::Tensor& dst, Value v) {
  TORCH_CHECK(dst.device() == device_, op_, ": output is on ", dst.device(), ", expected ", device_);
  if (dst.is_complex()) check_complex(dst.scalar_type());
  if (c10::isFloat8Type(dst.scalar_type())) check_float8(dst.scalar_type());
  ops::ViewMeta meta = view_meta(dst);
  if (b().dims(v) != meta.sizes) v = b().broadcast_to(v, meta.sizes);
  og_->write(storage_value(dst), to_ir(dst.scalar_type()), meta, v);
}

void Kernel::into_resized(const at::Tensor& out, Value v) {
  TORCH_INTERNAL_ASSERT(out.defined(), op_, ": an out= kernel with an undefined out must write it with result()");
  const ir::Dims d = b().dims(v);
  if (to_dims(out.sizes()) != d) {
    // As PyTorch's TensorIterator: an out= tensor that is also an input
    // (x.ldexp_(y) is mul(x, 2**y, out=x)) is never resized.
    const eager::StorageValue* s = storage_value(out);
    TORCH_CHECK(std::find(read_.begin(), read_.end(), s) == read_.end(), op_, ": output with shape ", out.sizes(),
                " doesn't match the broadcast shape ", c10::IntArrayRef(d));
    at::native::resize_output(out, d);  // warns when a non-empty out is resized, as PyTorch's out= ops
    // A resized out takes the layout a new result would have, as PyTorch's structured out= ops.
    if (column_major_ && d.size() >= 2) out.as_strided_(d, column_major_strides(d));
  }
  into(out, v);
}

at::Tensor Kernel::result(Value v, at::ScalarType dtype, const at::Tensor* out) {
  if (!out) return this->out(v, dtype);
  if (!out->defined()) {
    // The functional form registry.h derives from an out= kernel.
    at::Tensor t = this->out(v, dtype);
    const_cast<at::Tensor&>(*out) = t;
    return t;
  }
  into_resized(*out, v);
  return *out;
}

[[noreturn]] void rethrow_lowering(const char* op, const std::exception& e) {
  TORCH_CHECK(false, op, ": ", e.what());
}

}  // namespace torchtpu::aten
