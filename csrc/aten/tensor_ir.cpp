#include "aten/tensor_ir.h"

#include <c10/core/DeviceGuard.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/graph_task.h>

#include <atomic>

#include "eager/fused_graph.h"

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
    default:
      TORCH_CHECK_TYPE(false, "tpu does not support dtype ", t,
                       " (supported: bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)");
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

Kernel::Kernel(const char* op, c10::Device device)
    : op_(op), device_(check_device(op, device)), og_(device.index(), op) {}

c10::Device Kernel::check_device(const char* op, c10::Device device) {
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1, op, ": expected a tpu tensor, got one on ", device);
  return device;
}

namespace {
// The backward pass (graph task) that last queued its end-of-backward flush.
std::atomic<int> flush_queued_for{-1};
}  // namespace

void Kernel::run() {
  try {
    og_.run();
  } catch (const eager::DeviceError& e) {
    rethrow_device_error(e);
  }
  // Fused Eager materializes at the end of backward(): the first op of a
  // backward pass on the device queues a callback that runs when it ends.
  if (eager::Runtime::get().mode() == eager::EagerMode::kFused && torch::autograd::get_current_node()) {
    const int task = torch::autograd::get_current_graph_task_id();
    if (task != -1 && flush_queued_for.exchange(task) != task)
      torch::autograd::Engine::get_default_engine().queue_callback([] { eager::Runtime::get().flush_fused(); });
  }
}

void debug_check_index(const char* op, const at::Tensor& index, int64_t size) {
  if (eager::Runtime::get().mode() != eager::EagerMode::kDebug || !index.defined() || index.numel() == 0) return;
  at::Tensor bad = at::logical_or(index < -size, index >= size).any();
  TORCH_CHECK_INDEX(!bad.item<bool>(), op, ": index out of range for a dimension of size ", size,
                    " (index tensor of shape ", index.sizes(), ", min ", index.min().item<int64_t>(), ", max ",
                    index.max().item<int64_t>(), "; checked in Debug mode, other modes clamp)");
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
  Value v = og_.read(storage_value(t), stored, view_meta(t));
  return b().convert(v, to_ir(as));
}

Value Kernel::scalar(const c10::Scalar& s, at::ScalarType as) {
  double v = s.isBoolean() ? (s.toBool() ? 1.0 : 0.0)
             : s.isIntegral(false) ? static_cast<double>(s.toLong())
                                   : s.toDouble();
  return og_.scalar(to_ir(as), v);
}

at::Tensor Kernel::out(Value v, at::ScalarType dtype) {
  at::Tensor t = empty_device(b().dims(v), dtype, device_.index());
  into(t, v);
  return t;
}

void Kernel::into(const at::Tensor& dst, Value v) {
  TORCH_CHECK(dst.device() == device_, op_, ": output is on ", dst.device(), ", expected ", device_);
  ops::ViewMeta meta = view_meta(dst);
  if (b().dims(v) != meta.sizes) v = b().broadcast_to(v, meta.sizes);
  og_.write(storage_value(dst), to_ir(dst.scalar_type()), meta, v);
}

void Kernel::into_resized(const at::Tensor& out, Value v) {
  const ir::Dims d = b().dims(v);
  if (to_dims(out.sizes()) != d) {
    // Growing a storage replaces it; one this op reads must keep its value.
    const int64_t needed =
        (c10::multiply_integers(d) + out.storage_offset()) * static_cast<int64_t>(out.element_size());
    TORCH_CHECK(needed <= static_cast<int64_t>(out.storage().nbytes()) || !og_.reads(storage_value(out)), op_,
                ": the out= tensor (shape ", out.sizes(), ") is also an input and would have to grow to shape ",
                c10::IntArrayRef(d), "; pass a separate out= tensor");
    out.resize_(d);
  }
  into(out, v);
}

at::Tensor Kernel::result(Value v, at::ScalarType dtype, const at::Tensor* out) {
  if (!out) return this->out(v, dtype);
  into_resized(*out, v);
  return *out;
}

[[noreturn]] void rethrow_lowering(const char* op, const std::exception& e) {
  TORCH_CHECK(false, op, ": ", e.what());
}

}  // namespace torchtpu::aten
