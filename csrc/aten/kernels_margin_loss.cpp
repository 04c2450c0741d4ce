// multi_margin_loss and multilabel_margin_loss with their derivatives, as
// PyTorch's CPU kernels (LossMultiMargin.cpp, LossMultiLabelMargin.cpp):
// inputs are a vector or an [n, dim] matrix, targets out of range raise
// (through a device-side check, as CUDA's device asserts), and the loss is
// per frame for reduction='none', else summed (and averaged) over frames.
// 16-bit floats compute in float32.
#include <ATen/core/Reduction.h>

#include "aten/registry.h"
#include "aten/opmath.h"
#include "ops/loss.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

// (nframe, dim) of a vector or matrix input, with the CPU's check.
std::pair<int64_t, int64_t> frames(const at::Tensor& input) {
  const int64_t nd = input.dim();
  TORCH_CHECK((nd == 2 && input.size(1) != 0) || (nd == 1 && input.size(0) != 0) || nd == 0,
              "Expected non-empty vector or matrix with optional 0-dim batch size, but got: ", input.sizes());
  if (nd <= 1) return {1, nd == 0 ? 1 : input.size(0)};
  return {input.size(0), input.size(1)};
}

at::ScalarType float_type(const char* name, const at::Tensor& t) {
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), "\"", name, "\" not implemented for '",
              c10::toString(t.scalar_type()), "'");
  return t.scalar_type();
}

at::Tensor& write(Kernel& k, Value v, at::ScalarType st, at::Tensor* out) {
  TORCH_CHECK(at::canCast(st, out->scalar_type()), k.op(), ": result type ", st,
              " can't be cast to the desired output type ", out->scalar_type());
  k.into_resized(*out, v);
  return *out;
}

// Per-frame losses [n] reduced as the CPU: 'none' keeps them (0-d when
// `scalar_none`), else their sum, divided by n for a mean.
Value reduce_frames(Kernel& k, Value per_frame, int64_t reduction, bool scalar_none, at::ScalarType ct) {
  Builder& b = k.b();
  if (reduction == at::Reduction::None) return scalar_none ? b.reshape(per_frame, {}) : per_frame;
  Value s = b.reduce_sum(per_frame, {0});
  if (reduction == at::Reduction::Sum) return s;
  return b.div(s, k.scalar(at::Scalar(b.dims(per_frame)[0]), ct));
}

// ---- multi_margin_loss -------------------------------------------------------------------

struct MultiMargin {
  int64_t nframe, dim;
  bool has_w;
};
MultiMargin check_multi_margin(const char* op, const at::Tensor& input, const at::Tensor& target, const at::Scalar& p,
                               const std::optional<at::Tensor>& weight) {
  auto [nframe, dim] = frames(input);
  TORCH_CHECK(target.dim() <= 1 && target.numel() == nframe, "inconsistent target size, expected ", nframe,
              " but got ", target.sizes());
  const bool has_w = weight && weight->defined();
  TORCH_CHECK(!has_w || (weight->dim() <= 1 && weight->numel() == dim), "inconsistent weight size, expected ", dim,
              " but got ", has_w ? weight->sizes() : at::IntArrayRef{});
  TORCH_CHECK(p.toLong() == 1 || p.toLong() == 2, "only p == 1 and p == 2 supported");
  TORCH_CHECK(target.scalar_type() == at::kLong, op, ": expected an int64 target, got ", target.scalar_type());
  return {nframe, dim, has_w};
}

at::Tensor multi_margin_impl(const at::Tensor& input, const at::Tensor& target, const at::Scalar& p,
                             const at::Scalar& margin, const std::optional<at::Tensor>& weight, int64_t reduction,
                             at::Tensor* out) {
  const char* op = out ? "aten::multi_margin_loss.out" : "aten::multi_margin_loss";
  const MultiMargin m = check_multi_margin(op, input, target, p, weight);
  const at::ScalarType st = float_type("multi_margin_loss_cpu", input), ct = opmath(st);
  Kernel k(op, input);
  Builder& b = k.b();
  const ir::Dims nd{m.nframe, m.dim};
  Value x = b.reshape(k.in(input, ct), nd), t = b.reshape(k.in(target), {m.nframe});
  check_index(k, t, m.dim, /*allow_negative=*/false, Kernel::CheckKind::kRuntime, "target out of range");
  Value w = m.has_w ? b.reshape(k.in(*weight, ct), {m.dim}) : Value{};
  Value per = ops::multi_margin(b, x, t, w, static_cast<int>(p.toLong()), k.scalar(margin, ct),
                                k.scalar(at::Scalar(m.dim), ct));
  Value r = reduce_frames(k, per, reduction, target.dim() == 0, ct);
  at::Tensor result = out ? write(k, r, st, out) : k.out(r, st);
  k.run();
  return result;
}
at::Tensor multi_margin_loss(const at::Tensor& input, const at::Tensor& target, const at::Scalar& p,
                             const at::Scalar& margin, const std::optional<at::Tensor>& weight, int64_t reduction) {
  return multi_margin_impl(input, target, p, margin, weight, reduction, nullptr);
}
at::Tensor& multi_margin_loss_out(const at::Tensor& input, const at::Tensor& target, const at::Scalar& p,
                                  const at::Scalar& margin, const std::optional<at::Tensor>& weight, int64_t reduction,
                                  at::Tensor& out) {
  multi_margin_impl(input, target, p, margin, weight, reduction, &out);
  return out;
}

at::Tensor multi_margin_backward_impl(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& target,
                                      const at::Scalar& p, const at::Scalar& margin,
                                      const std::optional<at::Tensor>& weight, int64_t reduction, at::Tensor* out) {
  const char* op = out ? "aten::multi_margin_loss_backward.grad_input" : "aten::multi_margin_loss_backward";
  const MultiMargin m = check_multi_margin(op, input, target, p, weight);
  const at::ScalarType st = float_type("multi_margin_loss_backward_cpu_kernel", input), ct = opmath(st);
  Kernel k(op, input);
  Builder& b = k.b();
  const ir::Dims nd{m.nframe, m.dim};
  Value x = b.reshape(k.in(input, ct), nd), t = b.reshape(k.in(target), {m.nframe});
  check_index(k, t, m.dim, /*allow_negative=*/false, Kernel::CheckKind::kRuntime, "target out of range");
  Value w = m.has_w ? b.reshape(k.in(*weight, ct), {m.dim}) : Value{};
  // The CPU's factor in the input's dtype.
  const double g = reduction == at::Reduction::Mean ? 1.0 / static_cast<double>(m.nframe * m.dim)
                                                    : 1.0 / static_cast<double>(m.dim);
  Value gv = b.convert(b.constant(to_ir(st), g), to_ir(ct));
  Value r = ops::multi_margin_backward(b, x, t, w, static_cast<int>(p.toLong()), k.scalar(margin, ct), gv);
  Value go = k.in(grad, ct);
  if (reduction != at::Reduction::None || grad.dim() == 0)
    r = b.mul(r, b.reshape(go, {}));
  else
    r = b.mul(r, b.broadcast_in_dim(b.reshape(go, {m.nframe}), nd, {0}));
  r = b.reshape(r, to_dims(input.sizes()));
  at::Tensor result = out ? write(k, r, st, out) : k.out(r, st);
  k.run();
  return result;
}
at::Tensor multi_margin_loss_backward(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& target,
                                      const at::Scalar& p, const at::Scalar& margin,
                                      const std::optional<at::Tensor>& weight, int64_t reduction) {
  return multi_margin_backward_impl(grad, input, target, p, margin, weight, reduction, nullptr);
}
at::Tensor& multi_margin_loss_backward_out(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& target,
                                           const at::Scalar& p, const at::Scalar& margin,
                                           const std::optional<at::Tensor>& weight, int64_t reduction,
                                           at::Tensor& out) {
  multi_margin_backward_impl(grad, input, target, p, margin, weight, reduction, &out);
  return out;
}

// ---- multilabel_margin_loss ----------------------------------------------------------------

std::pair<int64_t, int64_t> check_multilabel(const char* op, const at::Tensor& input, const at::Tensor& target) {
  auto [nframe, dim] = frames(input);
  const bool ok = input.dim() <= 1 ? target.dim() <= 1 && target.numel() == dim
                                   : target.dim() == 2 && target.size(0) == nframe && target.size(1) == dim;
  TORCH_CHECK(ok, "inconsistent target size: ", target.sizes(), " for input of size: ", input.sizes());
  TORCH_CHECK(target.scalar_type() == at::kLong, op, ": expected an int64 target, got ", target.scalar_type());
  return {nframe, dim};
}

// Every target lies in [-1, dim), as the CPU checks.
Value multilabel_target(Kernel& k, const at::Tensor& target, const ir::Dims& nd) {
  Builder& b = k.b();
  Value t = b.reshape(k.in(target), nd);
  Value bad = b.logical_or(b.compare(t, b.constant(DType::kS64, -1), Cmp::kLT),
                           b.compare(t, b.constant(DType::kS64, static_cast<double>(nd[1])), Cmp::kGE));
  k.check(bad, Kernel::CheckKind::kRuntime, "argument #2 'target' is out of range");
  return t;
}

std::tuple<at::Tensor, at::Tensor> multilabel_impl(const at::Tensor& input, const at::Tensor& target,
                                                   int64_t reduction, at::Tensor* out, at::Tensor* is_target) {
  const char* op = out ? "aten::multilabel_margin_loss_forward.output" : "aten::multilabel_margin_loss_forward";
  auto [nframe, dim] = check_multilabel(op, input, target);
  const at::ScalarType st = float_type("multilabel_margin_loss_forward_out_frame", input), ct = opmath(st);
  Kernel k(op, input);
  Builder& b = k.b();
  const ir::Dims nd{nframe, dim};
  Value x = b.reshape(k.in(input, ct), nd);
  auto [per, ist] = ops::multilabel_margin(b, x, multilabel_target(k, target, nd), k.scalar(at::Scalar(dim), ct));
  Value r = reduce_frames(k, per, reduction, input.dim() <= 1, ct);
  ist = b.reshape(ist, to_dims(target.sizes()));
  at::Tensor o, it;
  if (out) {
    o = write(k, r, st, out);
    it = write(k, ist, st, is_target);
  } else {
    o = k.out(r, st);
    it = k.out(ist, st);
  }
  k.run();
  return {o, it};
}
std::tuple<at::Tensor, at::Tensor> multilabel_margin_loss_forward(const at::Tensor& input, const at::Tensor& target,
                                                                  int64_t reduction) {
  return multilabel_impl(input, target, reduction, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> multilabel_margin_loss_forward_out(const at::Tensor& input,
                                                                        const at::Tensor& target, int64_t reduction,
                                                                        at::Tensor& out, at::Tensor& is_target) {
  multilabel_impl(input, target, reduction, &out, &is_target);
  return {out, is_target};
}

at::Tensor multilabel_backward_impl(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& target,
                                    int64_t reduction, const at::Tensor& is_target, at::Tensor* out) {
  const char* op = out ? "aten::multilabel_margin_loss_backward.grad_input" : "aten::multilabel_margin_loss_backward";
  auto [nframe, dim] = check_multilabel(op, input, target);
  const at::ScalarType st = float_type("multilabel_margin_loss_backward_out_frame", input), ct = opmath(st);
  Kernel k(op, input);
  Builder& b = k.b();
  const ir::Dims nd{nframe, dim};
  Value x = b.reshape(k.in(input, ct), nd);
  const double g = reduction == at::Reduction::Mean ? 1.0 / static_cast<double>(nframe * dim)
                                                    : 1.0 / static_cast<double>(dim);
  Value gv = b.convert(b.constant(to_ir(st), g), to_ir(ct));
  Value r = ops::multilabel_margin_backward(b, x, multilabel_target(k, target, nd), Value{}, gv);
  Value go = k.in(grad, ct);
  if (reduction != at::Reduction::None || grad.dim() == 0)
    r = b.mul(r, b.reshape(go, {}));
  else
    r = b.mul(r, b.broadcast_in_dim(b.reshape(go, {nframe}), nd, {0}));
  r = b.reshape(r, to_dims(input.sizes()));
  at::Tensor result = out ? write(k, r, st, out) : k.out(r, st);
  k.run();
  return result;
}
at::Tensor multilabel_margin_loss_backward(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& target,
                                           int64_t reduction, const at::Tensor& is_target) {
  return multilabel_backward_impl(grad, input, target, reduction, is_target, nullptr);
}
at::Tensor& multilabel_margin_loss_backward_out(const at::Tensor& grad, const at::Tensor& input,
                                                const at::Tensor& target, int64_t reduction,
                                                const at::Tensor& is_target, at::Tensor& out) {
  multilabel_backward_impl(grad, input, target, reduction, is_target, &out);
  return out;
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("multi_margin_loss", TORCH_FN(multi_margin_loss));
  m.impl("multi_margin_loss.out", TORCH_FN(multi_margin_loss_out));
  m.impl("multi_margin_loss_backward", TORCH_FN(multi_margin_loss_backward));
  m.impl("multi_margin_loss_backward.grad_input", TORCH_FN(multi_margin_loss_backward_out));
  m.impl("multilabel_margin_loss_backward", TORCH_FN(multilabel_margin_loss_backward));
  m.impl("multilabel_margin_loss_backward.grad_input", TORCH_FN(multilabel_margin_loss_backward_out));
  m.impl("multilabel_margin_loss_forward", TORCH_FN(multilabel_margin_loss_forward));
  m.impl("multilabel_margin_loss_forward.output", TORCH_FN(multilabel_margin_loss_forward_out));
}

}  // namespace torchtpu::aten
