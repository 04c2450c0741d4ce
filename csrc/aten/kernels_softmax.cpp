// Normalizations along dims: softmax and log_softmax, layer_norm, with
// their backward ops.
#include <ATen/WrapDimUtils.h>

#include "aten/registry.h"
#include "aten/reduce_dims.h"
#include "ops/norm.h"

namespace torchtpu::aten {
namespace {

at::Tensor softmax_impl(const char* op, bool log, const at::Tensor& self, int64_t dim, bool half_to_float,
                        const at::Tensor* out) {
  at::ScalarType rt = half_to_float ? at::kFloat : self.scalar_type();
  Kernel k(op, self);
  int64_t w = at::maybe_wrap_dim(dim, self.dim());
  const at::ScalarType ct = acc_type(self.scalar_type());
  std::optional<DType> round_log_sum;
  if (log && ct != self.scalar_type() && self.dim() > 0 && w == self.dim() - 1) round_log_sum = to_ir(self.scalar_type());
  Value r = ops::softmax(k.b(), k.in(self, ct), w, log, round_log_sum);
  at::Tensor result = k.result(r, rt, out);
  k.run();
  return result;
}
at::Tensor& softmax_out(const at::Tensor& s, int64_t dim, bool h, at::Tensor& out) {
  softmax_impl("aten::_softmax.out", false, s, dim, h, &out);
  return out;
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
  const int64_t w = grad.dim() == 0 ? 0 : at::maybe_wrap_dim(dim, grad.dim());
  Value r = ops::softmax_backward(b, g, y, w, log);
  at::Tensor out = k.out(r, input_dtype);
  k.run();
  return out;
}
at::Tensor softmax_backward(const at::Tensor& g, const at::Tensor& y, int64_t dim, at::ScalarType dt) {
  return softmax_bwd("aten::_softmax_backward_data", false, g, y, dim, dt);
}
at::Tensor log_softmax_backward(const at::Tensor& g, const at::Tensor& y, int64_t dim, at::ScalarType dt) {
  return softmax_bwd("aten::_log_softmax_backward_data", true, g, y, dim, dt);
}

// ---- layer norm -------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                          const std::optional<at::Tensor>& weight,
                                                          const std::optional<at::Tensor>& bias, double eps) {
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(nd >= 1 && input.dim() >= nd &&
                  input.sizes().slice(input.dim() - nd).equals(normalized_shape),
              "Given normalized_shape=", normalized_shape, ", expected input with shape [*, ",
              normalized_shape, "], but got input of size", input.sizes());
  Kernel k("aten::native_layer_norm", input);
  const at::ScalarType ct = acc_type(input.scalar_type());
  std::vector<int64_t> dims;
  for (int64_t i = input.dim() - nd; i < input.dim(); ++i) dims.push_back(i);
  auto in = [&](const std::optional<at::Tensor>& t) { return t && t->defined() ? k.in(*t, ct) : Value{}; };
  ops::Normalized r = ops::layer_norm(k.b(), k.in(input, ct), dims, in(weight), in(bias), eps);
  at::Tensor out = k.out(r.y, input.scalar_type());
  at::Tensor mean_t = k.out(r.mean, input.scalar_type());
  at::Tensor rstd_t = k.out(r.rstd, input.scalar_type());
  k.run();
  return {out, mean_t, rstd_t};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> mask) {
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  const bool has_w = weight && weight->defined(), has_b = bias && bias->defined();
  Kernel k("aten::native_layer_norm_backward", input);
  const at::ScalarType ct = acc_type(input.scalar_type());
  std::vector<int64_t> norm_dims;
  for (int64_t i = input.dim() - nd; i < input.dim(); ++i) norm_dims.push_back(i);
  ops::NormGrads r = ops::layer_norm_backward(k.b(), k.in(grad_out, ct), k.in(input, ct), k.in(mean, ct),
                                              k.in(rstd, ct), has_w ? k.in(*weight, ct) : Value{}, norm_dims,
                                              {mask[0], mask[1] && has_w, mask[2] && has_b});
  at::Tensor gi, gw, gb;
  if (r.input.valid()) gi = k.out(r.input, input.scalar_type());
  if (r.weight.valid()) gw = k.out(r.weight, weight->scalar_type());
  if (r.bias.valid()) gb = k.out(r.bias, bias->scalar_type());
  k.run();
  return {gi, gw, gb};
}

}  // namespace

TPU_KERNELS(m) {
  m.out("_softmax.out", TORCH_FN(softmax_out), "_softmax");
  m.out("_log_softmax.out", TORCH_FN(log_softmax_out), "_log_softmax");
  m.impl("_softmax_backward_data", TORCH_FN(softmax_backward));
  m.impl("_log_softmax_backward_data", TORCH_FN(log_softmax_backward));
  m.impl("native_layer_norm", TORCH_FN(layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(layer_norm_backward));
}

}  // namespace torchtpu::aten
