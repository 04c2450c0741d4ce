// Convolution: the two ops PyTorch leaves to a PrivateUse1 backend
// (convolution_overrideable and its backward), for 1-3 spatial dims, stride,
// padding, dilation, groups, bias and transposed convolutions. at::_convolution
// has already checked the shapes and expanded the per-dim arguments.
#include <c10/core/SymIntArrayRef.h>

#include "aten/registry.h"
#include "aten/opmath.h"
#include "ops/conv.h"

namespace torchtpu::aten {
namespace {

ir::Dims per_dim(const char* op, const char* name, c10::SymIntArrayRef a, size_t nsp, int64_t fill) {
  ir::Dims d;
  for (const c10::SymInt& v : a) d.push_back(v.guard_int(__FILE__, __LINE__));
  if (d.empty()) d.assign(nsp, fill);
  if (d.size() == 1 && nsp > 1) d.assign(nsp, d[0]);
  TORCH_CHECK(d.size() == nsp, op, ": expected ", name, " to have ", nsp, " entries, got ", d.size());
  return d;
}

ops::ConvParams conv_params(const char* op, const at::Tensor& input, const at::Tensor& weight,
                            c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                            bool transposed, c10::SymIntArrayRef output_padding, int64_t groups) {
  TORCH_CHECK(input.dim() >= 3 && input.dim() <= 5 && weight.dim() == input.dim(), op,
              ": expected a 3-D, 4-D or 5-D input and a weight of the same rank, got input ", input.sizes(),
              " and weight ", weight.sizes());
  TORCH_CHECK_NOT_IMPLEMENTED(input.scalar_type() != at::kBool, op, ": dtype Bool is not supported on tpu");
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), op, ": input type (", input.scalar_type(),
              ") and weight type (", weight.scalar_type(), ") should be the same");
  TORCH_CHECK(groups >= 1, op, ": non-positive groups is not supported");
  const size_t nsp = static_cast<size_t>(input.dim() - 2);
  ops::ConvParams p;
  p.stride = per_dim(op, "stride", stride, nsp, 1);
  p.padding = per_dim(op, "padding", padding, nsp, 0);
  p.dilation = per_dim(op, "dilation", dilation, nsp, 1);
  p.output_padding = per_dim(op, "output_padding", output_padding, nsp, 0);
  p.transposed = transposed;
  p.groups = groups;
  for (size_t i = 0; i < nsp; ++i) {
    TORCH_CHECK(p.stride[i] > 0, op, ": non-positive stride is not supported");
    TORCH_CHECK(p.dilation[i] > 0, op, ": dilation should be greater than zero");
    TORCH_CHECK(p.padding[i] >= 0, op, ": negative padding is not supported");
    TORCH_CHECK(p.output_padding[i] >= 0, op, ": negative output_padding is not supported");
  }
  return p;
}

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                       bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  const char* op = "aten::convolution_overrideable";
  bool has_bias = bias && bias->defined();
  ops::ConvParams p = conv_params(op, input, weight, stride, padding, dilation, transposed, output_padding,
                                  groups.guard_int(__FILE__, __LINE__));
  Kernel k(op, input);
  Builder& b = k.b();
  at::ScalarType t = input.scalar_type();
  try {
    Value y = ops::conv_forward(b, k.in(input), k.in(weight), p);
    if (has_bias) y = b.add(y, b.broadcast_in_dim(k.in(*bias, t), b.dims(y), {1}));
    at::Tensor out = k.out(y, t);
    k.run();
    return out;
  } catch (const ops::LoweringError& e) {
    rethrow_lowering(op, e);
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed, c10::SymIntArrayRef output_padding,
    c10::SymInt groups, std::array<bool, 3> mask) {
  const char* op = "aten::convolution_backward_overrideable";
  ops::ConvParams p = conv_params(op, input, weight, stride, padding, dilation, transposed, output_padding,
                                  groups.guard_int(__FILE__, __LINE__));
  Kernel k(op, input);
  Builder& b = k.b();
  at::ScalarType t = input.scalar_type();
  try {
    Value g = k.in(grad_output, t);
    at::Tensor gi, gw, gb;
    if (mask[0]) gi = k.out(ops::conv_backward_input(b, g, k.in(weight), to_dims(input.sizes()), p), t);
    if (mask[1]) gw = k.out(ops::conv_backward_weight(b, g, k.in(input), to_dims(weight.sizes()), p), t);
    if (mask[2]) {
      std::vector<int64_t> dims{0};
      for (int64_t i = 2; i < grad_output.dim(); ++i) dims.push_back(i);
      gb = k.out(b.reduce_sum(b.convert(g, to_ir(opmath(t))), dims), t);
    }
    k.run();
    return {gi, gw, gb};
  } catch (const ops::LoweringError& e) {
    rethrow_lowering(op, e);
  }
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward));
}

}  // namespace torchtpu::aten
