// Normalizations along dims: softmax and log_softmax, layer_norm, with
// their backward ops.
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include "aten/reduce_dims.h"

namespace torchtpu::aten {
namespace {

// `round_log_sum`: the CPU's log_softmax over the last dim of a 16-bit input
// stores the sum of exponentials, then its log, in the input's dtype (an
// otherwise float32 computation): the value is rounded to that dtype.
Value softmax_value(Builder& b, Value x, int64_t dim, bool log, std::optional<DType> round_log_sum = std::nullopt) {
  const ir::Dims& d = b.dims(x);
  if (d.empty()) {
    // One element: exp(x - x) and x - x, so NaN and infinities give NaN.
    Value shifted = b.sub(x, x);
    return log ? shifted : b.exp(shifted);
  }
  Value m = b.broadcast_to(b.keepdim(b.reduce_max(x, {dim}), d, {dim}), d);
  Value shifted = b.sub(x, m);
  Value e = b.exp(shifted);
  Value s = b.broadcast_to(b.keepdim(b.reduce_sum(e, {dim}), d, {dim}), d);
  if (!log) return b.div(e, s);
  const DType c = b.dtype(x);
  auto round = [&](Value v) { return round_log_sum ? b.convert(b.convert(v, *round_log_sum), c) : v; };
  return b.sub(shifted, round(b.log(round(s))));
}

at::Tensor softmax_impl(const char* op, bool log, const at::Tensor& self, int64_t dim, bool half_to_float,
                        const at::Tensor* out) {
  at::ScalarType rt = half_to_float ? at::kFloat : self.scalar_type();
  Kernel k(op, self);
  int64_t w = at::maybe_wrap_dim(dim, self.dim());
  const at::ScalarType ct = acc_type(self.scalar_type());
  std::optional<DType> round_log_sum;
  if (log && ct != self.scalar_type() && self.dim() > 0 && w == self.dim() - 1) round_log_sum = to_ir(self.scalar_type());
  Value r = softmax_value(k.b(), k.in(self, ct), w, log, round_log_sum);
  at::Tensor result = k.result(r, rt, out);
  k.run();
  return result;
}
at::Tensor softmax(const at::Tensor& s, int64_t dim, bool h) {
  TPU_COUNT("aten::_softmax");
  return softmax_impl("aten::_softmax", false, s, dim, h, nullptr);
}
at::Tensor& softmax_out(const at::Tensor& s, int64_t dim, bool h, at::Tensor& out) {
  softmax_impl("aten::_softmax.out", false, s, dim, h, &out);
  return out;
}
at::Tensor log_softmax(const at::Tensor& s, int64_t dim, bool h) {
  TPU_COUNT("aten::_log_softmax");
  return softmax_impl("aten::_log_softmax", true, s, dim, h, nullptr);
}
at::Tensor& log_softmax_out(const at::Tensor& s, int64_t dim, bool h, at::Tensor& out) {
  softmax_impl("aten::_log_softmax.out", true, s, dim, h, &out);
  return out;
}

at::Tensor softmax_bwd(const char* op, bool log, const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                       at::ScalarType input_dtype) {
  Kernel k(op, grad);
  Builder& b = k.b();
  at::ScalarType ct = acc_type(grad.scalar_type());
  Value g = k.in(grad, ct), y = k.in(output, ct);
  const ir::Dims d = b.dims(g);
  Value r;
  if (d.empty()) {
    r = b.mul(g, b.sub(y, y));  // the output is constant: zero gradient (NaN stays NaN)
  } else {
    int64_t w = at::maybe_wrap_dim(dim, grad.dim());
    if (log) {
      Value s = b.broadcast_to(b.keepdim(b.reduce_sum(g, {w}), d, {w}), d);
      r = b.sub(g, b.mul(b.exp(y), s));
    } else {
      Value s = b.broadcast_to(b.keepdim(b.reduce_sum(b.mul(g, y), {w}), d, {w}), d);
      r = b.mul(y, b.sub(g, s));
    }
  }
  at::Tensor out = k.out(r, input_dtype);
  k.run();
  return out;
}
at::Tensor softmax_backward(const at::Tensor& g, const at::Tensor& y, int64_t dim, at::ScalarType dt) {
  TPU_COUNT("aten::_softmax_backward_data");
  return softmax_bwd("aten::_softmax_backward_data", false, g, y, dim, dt);
}
at::Tensor log_softmax_backward(const at::Tensor& g, const at::Tensor& y, int64_t dim, at::ScalarType dt) {
  TPU_COUNT("aten::_log_softmax_backward_data");
  return softmax_bwd("aten::_log_softmax_backward_data", true, g, y, dim, dt);
}

// ---- layer norm -------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                          const std::optional<at::Tensor>& weight,
                                                          const std::optional<at::Tensor>& bias, double eps) {
  TPU_COUNT("aten::native_layer_norm");
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(nd >= 1 && input.dim() >= nd &&
                  input.sizes().slice(input.dim() - nd).equals(normalized_shape),
              "Given normalized_shape=", normalized_shape, ", expected input with shape [*, ",
              normalized_shape, "], but got input of size", input.sizes());
  bool has_w = weight && weight->defined(), has_b = bias && bias->defined();
  check_same_device("aten::native_layer_norm", input.device(), {has_w ? &*weight : nullptr, has_b ? &*bias : nullptr});
  Kernel k("aten::native_layer_norm", input);
  Builder& b = k.b();
  at::ScalarType ct = acc_type(input.scalar_type());
  Value x = k.in(input, ct);
  const ir::Dims d = b.dims(x);
  std::vector<int64_t> dims;
  for (int64_t i = input.dim() - nd; i < input.dim(); ++i) dims.push_back(i);
  double n = static_cast<double>(count_of(input, dims));
  Value mean = b.keepdim(b.div(b.reduce_sum(x, dims), b.constant(to_ir(ct), n)), d, dims);
  Value xc = b.sub(x, b.broadcast_to(mean, d));
  Value var = b.keepdim(b.div(b.reduce_sum(b.mul(xc, xc), dims), b.constant(to_ir(ct), n)), d, dims);
  Value rstd = b.rsqrt(b.add(var, b.constant(to_ir(ct), eps, b.dims(var))));
  Value y = b.mul(xc, b.broadcast_to(rstd, d));
  if (has_w) y = b.mul(y, b.broadcast_to(k.in(*weight, ct), d));
  if (has_b) y = b.add(y, b.broadcast_to(k.in(*bias, ct), d));
  at::Tensor out = k.out(y, input.scalar_type());
  at::Tensor mean_t = k.out(mean, input.scalar_type());
  at::Tensor rstd_t = k.out(rstd, input.scalar_type());
  k.run();
  return {out, mean_t, rstd_t};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> mask) {
  TPU_COUNT("aten::native_layer_norm_backward");
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  bool has_w = weight && weight->defined();
  Kernel k("aten::native_layer_norm_backward", input);
  Builder& b = k.b();
  at::ScalarType ct = acc_type(input.scalar_type());
  Value g = k.in(grad_out, ct), x = k.in(input, ct);
  const ir::Dims d = b.dims(x);
  Value mu = b.broadcast_to(k.in(mean, ct), d), rs = b.broadcast_to(k.in(rstd, ct), d);
  std::vector<int64_t> norm_dims, batch_dims;
  for (int64_t i = 0; i < input.dim(); ++i) (i >= input.dim() - nd ? norm_dims : batch_dims).push_back(i);
  Value xhat = b.mul(b.sub(x, mu), rs);
  at::Tensor gi, gw, gb;
  if (mask[0]) {
    Value gx = has_w ? b.mul(g, b.broadcast_to(k.in(*weight, ct), d)) : g;
    double n = static_cast<double>(count_of(input, norm_dims));
    Value m1 = b.broadcast_to(b.keepdim(b.div(b.reduce_sum(gx, norm_dims), b.constant(to_ir(ct), n)), d, norm_dims), d);
    Value m2 = b.broadcast_to(
        b.keepdim(b.div(b.reduce_sum(b.mul(gx, xhat), norm_dims), b.constant(to_ir(ct), n)), d, norm_dims), d);
    gi = k.out(b.mul(rs, b.sub(b.sub(gx, m1), b.mul(xhat, m2))), input.scalar_type());
  }
  if (mask[1] && has_w) gw = k.out(b.reduce_sum(b.mul(g, xhat), batch_dims), weight->scalar_type());
  if (mask[2] && bias && bias->defined()) gb = k.out(b.reduce_sum(g, batch_dims), bias->scalar_type());
  k.run();
  return {gi, gw, gb};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax", TORCH_FN(softmax));
  m.impl("_softmax.out", TORCH_FN(softmax_out));
  m.impl("_log_softmax", TORCH_FN(log_softmax));
  m.impl("_log_softmax.out", TORCH_FN(log_softmax_out));
  m.impl("_softmax_backward_data", TORCH_FN(softmax_backward));
  m.impl("_log_softmax_backward_data", TORCH_FN(log_softmax_backward));
  m.impl("native_layer_norm", TORCH_FN(layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(layer_norm_backward));
}

}  // namespace torchtpu::aten
