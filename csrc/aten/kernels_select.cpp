// Selecting and blending kernels: lerp, clamp (scalar and tensor bounds),
// where, masked_fill, and activations with their derivatives (16-bit floats
// in float32).

#include <cstring>

#include "aten/registry.h"
#include "aten/opmath.h"
#include "aten/pointwise.h"
#include "ops/elementwise.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;
using Bin = Value (*)(Builder&, Value, Value);

// PyTorch's two-sided form: |weight| < 0.5 ? self + weight * (end - self)
//                                         : end - (end - self) * (1 - weight)
at::Tensor lerp_impl(const char* op, const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight,
                     Dest dest, const at::Tensor* target) {
  c10::Device dev = target && target->defined() ? target->device() : self.device();
  const at::ScalarType rt = self.scalar_type();
  // As PyTorch's kernels, for floating and complex types only.
  TORCH_CHECK_NOT_IMPLEMENTED(!at::isIntegralType(rt, /*includeBool=*/true), "\"",
                              std::strstr(op, "Scalar") ? "lerp_kernel_scalar" : "lerp_kernel_tensor",
                              "\" not implemented for '", c10::toString(rt), "'");
  // 16-bit floats compute in float32, as PyTorch's opmath type.
  const at::ScalarType ct = (rt == at::kHalf || rt == at::kBFloat16) ? at::kFloat : rt;
  Kernel k(op, dev);
  k.elementwise();
  Builder& b = k.b();
  Value x = k.in(self, ct), e = k.in(end, ct), w = k.in(weight, ct);
  Value d = b.sub(e, x);
  const ir::Dims dims = b.dims(b.add(d, w));
  d = b.broadcast_to(d, dims);
  w = b.broadcast_to(w, dims);
  Value low = b.add(b.broadcast_to(x, dims), b.mul(w, d));
  Value high = b.sub(b.broadcast_to(e, dims), b.mul(d, b.sub(b.full_like(w, 1.0), w)));
  Value small = b.compare(b.abs(w), b.full_like(w, 0.5), Cmp::kLT);
  return finish(k, b.select(small, low, high), rt, dest, target);
}
at::Tensor& lerp_s_out(const at::Tensor& s, const at::Tensor& e, const at::Scalar& w, at::Tensor& out) {
  lerp_impl("aten::lerp.Scalar_out", s, e, wrap(w), Dest::kOut, &out);
  return out;
}
at::Tensor& lerp_t_out(const at::Tensor& s, const at::Tensor& e, const at::Tensor& w, at::Tensor& out) {
  lerp_impl("aten::lerp.Tensor_out", s, e, w, Dest::kOut, &out);
  return out;
}

// ---- clamp and where ----------------------------------------------------------

at::Tensor clamp_impl(const char* op, const at::Tensor& self, const at::Tensor* lo, const at::Tensor* hi, Dest dest,
                      const at::Tensor* target) {
  TORCH_CHECK(lo || hi, "torch.clamp: At least one of 'min' or 'max' must not be None");
  c10::Device dev = target && target->defined() ? target->device() : self.device();
  at::ScalarType ct = self.scalar_type();
  if (lo) ct = at::promote_types(ct, at::result_type(self, *lo));
  if (hi) ct = at::promote_types(ct, at::result_type(self, *hi));
  Kernel k(op, dev);
  k.elementwise();
  Builder& b = k.b();
  Value x = k.in(self, ct);
  if (lo) x = b.max(x, k.in(*lo, ct));
  if (hi) x = b.min(x, k.in(*hi, ct));
  return finish(k, x, ct, dest, target);
}
at::Tensor& clamp_out(const at::Tensor& s, const std::optional<at::Scalar>& lo, const std::optional<at::Scalar>& hi,
                      at::Tensor& out) {
  at::Tensor l = lo ? wrap(*lo) : at::Tensor(), h = hi ? wrap(*hi) : at::Tensor();
  clamp_impl("aten::clamp.out", s, lo ? &l : nullptr, hi ? &h : nullptr, Dest::kOut, &out);
  return out;
}
at::Tensor& clamp_min_out(const at::Tensor& s, const at::Scalar& lo, at::Tensor& out) {
  at::Tensor l = wrap(lo);
  clamp_impl("aten::clamp_min.out", s, &l, nullptr, Dest::kOut, &out);
  return out;
}
at::Tensor& clamp_max_out(const at::Tensor& s, const at::Scalar& hi, at::Tensor& out) {
  at::Tensor h = wrap(hi);
  clamp_impl("aten::clamp_max.out", s, nullptr, &h, Dest::kOut, &out);
  return out;
}

at::Tensor& clamp_t_out(const at::Tensor& s, const std::optional<at::Tensor>& lo, const std::optional<at::Tensor>& hi,
                        at::Tensor& out) {
  clamp_impl("aten::clamp.Tensor_out", s, lo && lo->defined() ? &*lo : nullptr, hi && hi->defined() ? &*hi : nullptr,
             Dest::kOut, &out);
  return out;
}
at::Tensor& clamp_min_t_out(const at::Tensor& s, const at::Tensor& lo, at::Tensor& out) {
  clamp_impl("aten::clamp_min.Tensor_out", s, &lo, nullptr, Dest::kOut, &out);
  return out;
}
at::Tensor& clamp_max_t_out(const at::Tensor& s, const at::Tensor& hi, at::Tensor& out) {
  clamp_impl("aten::clamp_max.Tensor_out", s, nullptr, &hi, Dest::kOut, &out);
  return out;
}

at::Tensor where_impl(const at::Tensor& cond, const at::Tensor& a, const at::Tensor& b, Dest dest,
                      const at::Tensor* target) {
  c10::Device dev = target && target->defined() ? target->device()
                    : cond.device().is_privateuseone() ? cond.device()
                                                       : device_of(a, b);
  TORCH_CHECK(cond.scalar_type() == at::kBool || cond.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ", cond.scalar_type());
  if (cond.scalar_type() == at::kByte)  // as the CPU: accepted, read as != 0
    TORCH_WARN_ONCE("where received a uint8 condition tensor. This behavior is deprecated and will be removed in a "
                    "future version of PyTorch. Use a boolean condition instead.");
  at::ScalarType ct = at::result_type(a, b);
  Kernel k("aten::where", dev);
  k.elementwise({&cond, &a, &b});
  Value r = k.b().select(k.in(cond, at::kBool), k.in(a, ct), k.in(b, ct));
  return finish(k, r, ct, dest, target);
}
at::Tensor& where_out(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  where_impl(c, a, b, Dest::kOut, &out);
  return out;
}

at::Tensor& masked_fill_t(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  Kernel k("aten::masked_fill_", self);
  k.elementwise();
  Builder& b = k.b();
  Value x = k.in(self);
  Value m = k.in(mask);
  TORCH_CHECK(b.dims(m).size() <= b.dims(x).size(), "masked_fill_: mask of shape ", mask.sizes(),
              " does not broadcast to ", self.sizes());
  Value r = b.select(b.broadcast_to(m, b.dims(x)), b.broadcast_to(k.in(value, self.scalar_type()), b.dims(x)), x);
  k.into(self, r);
  k.run();
  return self;
}
at::Tensor& masked_fill_s(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  return masked_fill_t(self, mask, wrap(value));
}

// ---- activation derivatives ---------------------------------------------------

at::Tensor grad_kernel(const char* op, const at::Tensor& grad, const at::Tensor& x, Bin f) {
  Kernel k(op, grad);
  k.elementwise({&grad, &x});
  at::ScalarType ct = opmath(grad.scalar_type());
  Value r = f(k.b(), k.in(grad, ct), k.in(x, ct));
  at::Tensor out = k.out(r, grad.scalar_type());
  k.run();
  return out;
}

at::Tensor threshold_backward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold) {
  Kernel k("aten::threshold_backward", grad);
  k.elementwise({&self, &grad});
  Builder& b = k.b();
  at::ScalarType ct = grad.scalar_type();
  Value g = k.in(grad, ct), x = k.in(self, ct);
  Value r = b.select(b.compare(x, b.broadcast_to(k.scalar(threshold, ct), b.dims(x)), Cmp::kLE), b.zeros_like(g), g);
  at::Tensor out = k.out(r, ct);
  k.run();
  return out;
}

at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out) {
  bool t = approximate == "tanh";
  TORCH_CHECK(t || approximate == "none", "approximate argument must be either none or tanh.");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"GeluKernelImpl\" not implemented for '",
              c10::toString(self.scalar_type()), "'");
  TORCH_CHECK(!out.defined() || out.scalar_type() == self.scalar_type(),
              "aten::gelu.out: expected out tensor to have dtype ", self.scalar_type(), ", but got ",
              out.scalar_type(), " instead");
  Kernel k("aten::gelu.out", self);
  k.elementwise();
  k.result(ops::gelu(k.b(), k.in(self, opmath(self.scalar_type())), t), self.scalar_type(), &out);
  k.run();
  return out;
}
at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate) {
  return grad_kernel("aten::gelu_backward", grad, self,
                     approximate == "tanh" ? +[](Builder& b, Value g, Value x) { return ops::gelu_backward(b, g, x, true); }
                                           : +[](Builder& b, Value g, Value x) { return ops::gelu_backward(b, g, x, false); });
}
at::Tensor silu_backward(const at::Tensor& grad, const at::Tensor& self) {
  return grad_kernel("aten::silu_backward", grad, self, ops::silu_backward);
}
at::Tensor tanh_backward(const at::Tensor& grad, const at::Tensor& out) {
  return grad_kernel("aten::tanh_backward", grad, out, [](Builder& b, Value g, Value y) {
    return b.mul(g, b.sub(b.full_like(y, 1.0), b.mul(y, y)));
  });
}
at::Tensor sigmoid_backward(const at::Tensor& grad, const at::Tensor& out) {
  return grad_kernel("aten::sigmoid_backward", grad, out, [](Builder& b, Value g, Value y) {
    return b.mul(g, b.mul(y, b.sub(b.full_like(y, 1.0), y)));
  });
}

}  // namespace

TPU_KERNELS(m) {
  m.out("lerp.Scalar_out", TORCH_FN(lerp_s_out), "lerp.Scalar", "lerp_.Scalar");
  m.out("lerp.Tensor_out", TORCH_FN(lerp_t_out), "lerp.Tensor", "lerp_.Tensor");
  m.out("clamp.out", TORCH_FN(clamp_out), "clamp", "clamp_");
  m.out("clamp.Tensor_out", TORCH_FN(clamp_t_out), "clamp.Tensor", "clamp_.Tensor");
  m.out("clamp_min.out", TORCH_FN(clamp_min_out), "clamp_min", "clamp_min_");
  m.impl("clamp_min.Tensor_out", TORCH_FN(clamp_min_t_out));
  m.out("clamp_max.out", TORCH_FN(clamp_max_out), "clamp_max", "clamp_max_");
  m.impl("clamp_max.Tensor_out", TORCH_FN(clamp_max_t_out));
  m.out("where.self_out", TORCH_FN(where_out), "where.self");
  m.impl("masked_fill_.Scalar", TORCH_FN(masked_fill_s));
  m.impl("masked_fill_.Tensor", TORCH_FN(masked_fill_t));
  m.impl("threshold_backward", TORCH_FN(threshold_backward));
  m.out("gelu.out", TORCH_FN(gelu_out), "gelu");
  m.impl("gelu_backward", TORCH_FN(gelu_backward));
  m.impl("silu_backward", TORCH_FN(silu_backward));
  m.impl("tanh_backward", TORCH_FN(tanh_backward));
  m.impl("sigmoid_backward", TORCH_FN(sigmoid_backward));
}

}  // namespace torchtpu::aten
