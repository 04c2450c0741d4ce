// Core kernels: factories, copies between devices and dtypes, fill, resize,
// scalar reads, and the metadata-only view kernels.
#include <ATen/Dispatch_v2.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>

#include "aten/device.h"
#include "aten/registry.h"
#include "aten/tensor_ir.h"

namespace torchtpu::aten {
namespace {

c10::DeviceIndex index_of(std::optional<at::Device> d) {
  if (d && d->has_index()) return d->index();
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();
}

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout || *layout == at::kStrided, "tpu supports only strided tensors, got layout ", *layout);
  at::ScalarType st = dtype.value_or(at::get_default_dtype_as_scalartype());
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index_of(device)));
  to_ir(st);
  return at::detail::empty_generic(size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), st,
                                   memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> pin_memory) {
  at::ScalarType st = dtype.value_or(at::get_default_dtype_as_scalartype());
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index_of(device)));
  to_ir(st);
  return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), st);
}

// True when `t` is exactly its whole storage, densely, as written.
bool covers_storage(const at::Tensor& t) {
  eager::StorageValue* s = storage_value(t);
  return t.storage_offset() == 0 && t.is_contiguous() &&
         t.numel() * static_cast<int64_t>(t.element_size()) == s->nbytes();
}

// Device tensor -> `dst`, a contiguous CPU tensor of its dtype and shape.
void read_into(const at::Tensor& src, const at::Tensor& dst) {
  raise_failed_checks();
  at::Tensor dense = src;
  eager::Runtime& rt = eager::Runtime::get();
  bool as_stored;
  {
    std::lock_guard<std::recursive_mutex> lock(rt.device_lock(src.device().index()));
    eager::StorageValue* s = storage_value(src);
    as_stored = covers_storage(src) && s->has_value() && s->dtype() == to_ir(src.scalar_type());
  }
  if (!as_stored) {
    Kernel k("aten::_copy_from", src);
    dense = k.out(k.in(src), src.scalar_type());
    k.run();
  }
  if (dst.numel() == 0) return;
  try {
    rt.host_read(storage_value(dense), dst.data_ptr(), dst.numel() * static_cast<int64_t>(dst.element_size()));
  } catch (const eager::DeviceError& e) {
    rethrow_device_error(e);
  }
}

// Device tensor -> new contiguous CPU tensor of the same dtype.
at::Tensor to_cpu(const at::Tensor& src) {
  at::Tensor cpu = at::empty(src.sizes(), src.options().device(at::kCPU));
  read_into(src, cpu);
  return cpu;
}

// CPU tensor -> `dst` on the device (any view, any dtype). With
// non_blocking, a copy into a whole storage from pinned memory (which the
// caller leaves alone until a sync, as on CUDA) or from a staged private
// copy runs on the copy queue: this returns at once and programs that read
// `dst` wait for it.
// A small upload keeps a private copy of its bytes (eager::Slot::HostCopy),
// so that a bucketed program pads it on the host.
constexpr int64_t kHostCopyMax = 256 << 10;
void keep_host_copy(const eager::SlotPtr& slot, const at::Tensor& src, const at::Tensor& host) {
  const int64_t nbytes = host.numel() * static_cast<int64_t>(host.element_size());
  if (!slot || nbytes > kHostCopyMax) return;
  at::Tensor mine = host.data_ptr() == src.data_ptr() ? host.clone() : host;
  auto copy = std::make_shared<eager::Slot::HostCopy>();
  copy->data = mine.data_ptr();
  copy->nbytes = nbytes;
  copy->keep = std::shared_ptr<void>(new at::Tensor(std::move(mine)), [](void* p) { delete static_cast<at::Tensor*>(p); });
  slot->set_host(std::move(copy));
}

void from_cpu(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  eager::OpGraph::check_not_batching("a host-to-device copy");
  at::Tensor host = src.resolve_conj().resolve_neg().to(dst.scalar_type()).contiguous();
  if (host.sizes() != dst.sizes()) host = host.expand(dst.sizes()).contiguous();
  eager::Runtime& rt = eager::Runtime::get();
  DType dt = to_ir(dst.scalar_type());
  if (non_blocking && covers_storage(dst) && (is_pinned_host(src) || host.data_ptr() != src.data_ptr())) {
    auto slot = std::make_shared<eager::Slot>();
    keep_host_copy(slot, src, host);
    {
      std::lock_guard<std::recursive_mutex> lock(rt.device_lock(dst.device().index()));
      storage_value(dst)->set_slot(slot, dt);
    }
    std::shared_ptr<void> keep(new at::Tensor(host), [](void* p) { delete static_cast<at::Tensor*>(p); });
    rt.upload_async(host.data_ptr(), std::move(keep), dt, {host.numel()}, dst.device().index(), std::move(slot),
                    eager::OpSite{"aten::_copy_from", eager::capture_site()});
    return;
  }
  pjrt::BufferPtr buf = rt.upload(host.data_ptr(), dt, {host.numel()}, dst.device().index());
  if (covers_storage(dst)) {
    std::lock_guard<std::recursive_mutex> lock(rt.device_lock(dst.device().index()));
    storage_value(dst)->set_buffer(std::move(buf), dt);
    keep_host_copy(storage_value(dst)->slot(), src, host);
    return;
  }
  at::Tensor staged = empty_device({host.numel()}, dst.scalar_type(), dst.device().index());
  {
    std::lock_guard<std::recursive_mutex> lock(rt.device_lock(dst.device().index()));
    storage_value(staged)->set_buffer(std::move(buf), dt);
  }
  Kernel k("aten::_copy_from", dst);
  k.into(dst, k.b().reshape(k.in(staged), to_dims(dst.sizes())));
  k.run();
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);

// The values of a tpu tensor with PyTorch's lazy conjugate or negative bit,
// made real in a new tensor.
at::Tensor resolved(const at::Tensor& t) {
  if (!t.is_conj() && !t.is_neg()) return t;
  at::Tensor r = empty_device(t.sizes(), t.scalar_type(), t.device().index());
  copy_from(t, r, false);
  return r;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  if (self.numel() == 0) return dst;
  bool src_dev = self.device().is_privateuseone(), dst_dev = dst.device().is_privateuseone();
  if (src_dev && dst_dev && self.device() == dst.device()) {
    check_no_partial_overlap(dst, self);
    Kernel k("aten::_copy_from", dst);
    Value v = k.in(self, dst.scalar_type());  // applies self's conjugate and negative bits
    // Writing through a conjugate (negative) view stores the conjugate (negation).
    if (dst.is_conj()) v = k.b().conj(v);
    if (dst.is_neg()) v = k.b().neg(v);
    k.into(dst, v);
    k.run();
  } else if (dst_dev && (dst.is_conj() || dst.is_neg())) {
    at::Tensor staged = empty_device(dst.sizes(), dst.scalar_type(), dst.device().index());
    copy_from(self, staged, false);
    copy_from(staged, dst, false);
  } else if (src_dev && (self.is_conj() || self.is_neg())) {
    copy_from(resolved(self), dst, non_blocking);
  } else if (src_dev && !dst_dev) {
    // Straight into a CPU tensor laid out as the value is read; else through a copy.
    if (dst.is_contiguous() && dst.scalar_type() == self.scalar_type() && dst.sizes() == self.sizes() &&
        !dst.is_conj() && !dst.is_neg())
      read_into(self, dst);
    else
      dst.copy_(to_cpu(self));
  } else if (!src_dev && dst_dev) {
    from_cpu(self, dst, non_blocking);
  } else {
    from_cpu(to_cpu(self), dst, false);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  return to_cpu(self).item();
}

// Grows self's storage to `needed` bytes, keeping its contents at the start
// (zeros after), as PyTorch's storage resize does; every tensor of the
// storage sees the larger one.
void grow_storage(const at::Tensor& self, int64_t needed) {
  eager::StorageValue* old = storage_value(self);
  if (needed <= old->nbytes()) return;
  c10::DeviceGuard guard(self.device());
  c10::DataPtr fresh = device_allocator()->allocate(needed);
  auto* fresh_value = static_cast<eager::StorageValue*>(fresh.get_context());
  eager::OpGraph og(self.device().index(), "aten::resize_");  // holds the device lock
  if (old->has_value()) {
    DType dt = to_ir(self.scalar_type());
    ir::Value flat = og.read_flat(old, dt);
    int64_t n_new = fresh_value->numel(dt), n_old = og.b().dims(flat)[0];
    ir::Value grown = og.b().pad(flat, og.b().constant(dt, 0), {0}, {n_new - n_old});
    og.write(fresh_value, dt, ops::ViewMeta{{n_new}, {1}, 0}, grown);
    og.run();
  }
  self.storage().set_data_ptr_noswap(std::move(fresh));
  self.storage().set_nbytes(needed);
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size, std::optional<at::MemoryFormat> fmt) {
  auto* impl = self.unsafeGetTensorImpl();
  int64_t numel = c10::multiply_integers(size);
  grow_storage(self, (numel + self.storage_offset()) * static_cast<int64_t>(self.element_size()));
  impl->set_sizes_contiguous(size);
  if (fmt && *fmt != at::MemoryFormat::Contiguous) impl->empty_tensor_restride(*fmt);
  return self;
}

// The elements of `t` once each: a dim of stride 0 (an expanded tensor)
// writes one place, so fill_ with a number and zero_ write through size 1
// there (the CPU fills expanded tensors so; other in-place ops, and fill_
// with a tensor, refuse them).
at::Tensor written_once(const at::Tensor& t) {
  std::vector<int64_t> sizes = t.sizes().vec();
  bool expanded = false;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] > 1 && t.strides()[i] == 0) {
      sizes[i] = 1;
      expanded = true;
    }
  return expanded ? t.as_strided(sizes, t.strides(), t.storage_offset()) : t;
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  // The CPU's fill converts the number to the dtype with an overflow check
  // ("value cannot be converted to type int8_t without overflow").
  AT_DISPATCH_V2(self.scalar_type(), "fill_", AT_WRAP([&] { (void)value.to<scalar_t>(); }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool, at::kUInt16, at::kUInt32,
                 at::kUInt64, AT_EXPAND(AT_FLOAT8_TYPES));
  if (self.numel() == 0) return self;
  Kernel k("aten::fill_", self);
  k.into(written_once(self), k.scalar(value, self.scalar_type()));
  k.run();
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  if (self.numel() == 0) return self;
  Kernel k("aten::fill_", self);
  k.into(self, k.in(value, self.scalar_type()));  // an expanded self raises, as the CPU's fill_.Tensor
  k.run();
  return self;
}

at::Tensor& zero_(at::Tensor& self) {
  if (self.numel() == 0) return self;
  Kernel k("aten::zero_", self);
  const at::Tensor target = written_once(self);
  k.into(target, k.b().constant(to_ir(self.scalar_type()), 0, to_dims(target.sizes())));
  k.run();
  return self;
}

// A dense zero tensor: autograd asks for a ZeroTensor where a gradient is
// known to be zero (e.g. sgn's backward); its values are what matter, and
// every tpu op reads a dense tensor.
at::Tensor efficientzerotensor(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory) {
  at::Tensor t = empty_memory_format(size, dtype, layout, device, pin_memory, std::nullopt);
  return (zero_)(t);
}

at::Tensor view(const at::Tensor& self, at::IntArrayRef size) { return at::native::view(self, size); }
at::Tensor as_strided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                      std::optional<int64_t> offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, offset);
}
at::Tensor reshape_alias(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}
at::Tensor unfold(const at::Tensor& self, int64_t dim, int64_t size, int64_t step) {
  return at::native::unfold(self, dim, size, step);
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage source, int64_t offset, at::IntArrayRef size,
                               at::IntArrayRef stride) {
  TORCH_CHECK(source.device().is_privateuseone(), "set_: expected a tpu storage, got one on ", source.device());
  TORCH_CHECK(offset >= 0, "Tensor: invalid storage offset ", offset);
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(source));
  self.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride, offset);
  // A view reaching past the storage's end grows it, as on the CPU.
  grow_storage(self, static_cast<int64_t>(
                         at::detail::computeStorageNbytes(size, stride, self.element_size(), offset)));
  return self;
}

at::Tensor& set_storage(at::Tensor& self, at::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.element_size());
  return set_source_storage(self, std::move(source), 0, {n}, {1});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& src) {
  return set_source_storage(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

// As CUDA's device-side assert: raised at the next sync point (at once in
// Debug Eager) when the one-element tensor is zero, without a transfer.
void assert_async_impl(const at::Tensor& self, c10::string_view msg) {
  TORCH_CHECK(self.numel() != 0, "Boolean value of Tensor with no values is ambiguous");
  TORCH_CHECK(self.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
  Kernel k("aten::_assert_async", self);
  Builder& b = k.b();
  Value v = b.reshape(k.in(self), {});
  k.check(b.compare(v, b.zeros_like(v), ops::Cmp::kEQ), Kernel::CheckKind::kRuntime,
          msg.empty() ? std::string("Expected Tensor with single nonzero value, but got zero") : std::string(msg));
  k.run();
}

void assert_async(const at::Tensor& self) {
  assert_async_impl(self, "");
}

void assert_async_msg(const at::Tensor& self, c10::string_view msg) {
  assert_async_impl(self, msg);
}

// nn.Module._apply and `param.data = t` keep a Parameter's identity (and so
// tied weights stay tied) only when this holds for the old and new tensor.
// PyTorch's default answers true for dense tensors of its built-in backends
// and false for PrivateUse1, so moving a model to tpu would untie its tied
// weights. Dense strided tensors of tpu and the CPU share the TensorImpl
// layout: any two of them can take each other's metadata, as CUDA and CPU can.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    c10::DispatchKeySet ks = t.key_set();
    return t.layout() == at::kStrided && !t.is_quantized() && ks.has(c10::DispatchKey::Dense) &&
           (ks.has_backend(c10::BackendComponent::PrivateUse1Bit) || ks.has_backend(c10::BackendComponent::CPUBit));
  };
  if (self.key_set() == from.key_set()) return true;
  return dense(self) && dense(from);
}

// Nothing to do: a value stays alive while any queued program or copy reads
// it (slots are shared), whatever stream the tensor was used on.
void record_stream(at::Tensor& self, c10::Stream s) {
  TORCH_CHECK(s.device_type() == c10::DeviceType::PrivateUse1, "record_stream: expected a tpu stream, got one of ",
              s.device());
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("record_stream", TORCH_FN(record_stream));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type), Devices::kAny);
  m.impl("_assert_async", TORCH_FN(assert_async));
  m.impl("_assert_async.msg", TORCH_FN(assert_async_msg));
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("_copy_from", TORCH_FN(copy_from), Devices::kAny);
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize), Devices::kAny);
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(fill_tensor));
  m.impl("zero_", TORCH_FN(zero_));
  m.impl("_efficientzerotensor", TORCH_FN(efficientzerotensor));
  m.impl("view", TORCH_FN(view));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("unfold", TORCH_FN(unfold));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_source_storage));
  m.impl("set_.source_Storage", TORCH_FN(set_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_tensor), Devices::kAny);
}

}  // namespace torchtpu::aten
