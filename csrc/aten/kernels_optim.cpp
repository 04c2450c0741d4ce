// The fused optimizer steps: Adam(fused=True), AdamW(fused=True) and
// SGD(fused=True) on the device. One call updates every parameter of a group
// (and its state) in one program, computed as PyTorch's fused CPU kernels
// compute it (ops/optim.h); with found_inf set the step leaves everything as
// it was, as those kernels do. Also the two steps of torch.amp.GradScaler:
// unscaling gradients while noting non-finite values, and updating the scale.

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "ops/optim.h"

namespace torchtpu::aten {
namespace {

using OptTensor = std::optional<at::Tensor>;

at::ScalarType opmath_of(at::ScalarType t) { return at::isReducedFloatingType(t) ? at::kFloat : t; }

void check_lists(const char* op, size_t n, std::initializer_list<std::pair<const char*, at::TensorList>> lists) {
  for (const auto& [name, l] : lists)
    TORCH_CHECK(l.size() == n, op, ": expected ", name, " to hold ", n, " tensors (one per parameter), got ",
                l.size());
}

// What every parameter's update of one call shares: the learning rate (a
// float64 value, from a number or a tensor), the gradient scale (invalid for
// none) and found_inf (a 0-d bool; invalid for none): a step with it set keeps
// the old values.
struct Shared {
  Value rate, scale, found_inf;
  Value keep(Builder& b, Value now, Value old) const { return found_inf.valid() ? b.select(found_inf, old, now) : now; }
};

Shared shared_of(Kernel& k, double lr, const at::Tensor* lr_tensor, const OptTensor& grad_scale,
                 const OptTensor& found_inf) {
  Builder& b = k.b();
  Shared s;
  s.rate = lr_tensor ? b.reshape(k.in(*lr_tensor, at::kDouble), {}) : k.scalar(lr, at::kDouble);
  if (grad_scale && grad_scale->defined()) s.scale = b.reshape(k.in(*grad_scale, at::kFloat), {});
  if (found_inf && found_inf->defined())
    s.found_inf = b.compare(b.reshape(k.in(*found_inf, at::kFloat), {}), b.constant(DType::kF32, 0), ops::Cmp::kNE);
  return s;
}

void adam_impl(const char* op, at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
               at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList state_steps, double lr,
               const at::Tensor* lr_tensor, const ops::AdamConfig& c, const OptTensor& grad_scale,
               const OptTensor& found_inf) {
  const size_t n = params.size();
  if (n == 0) return;
  check_lists(op, n, {{"grads", grads}, {"exp_avgs", exp_avgs}, {"exp_avg_sqs", exp_avg_sqs},
                      {"state_steps", state_steps}});
  if (c.amsgrad) check_lists(op, n, {{"max_exp_avg_sqs", max_exp_avg_sqs}});
  Kernel k(op, params[0]);
  Builder& b = k.b();
  const Shared sh = shared_of(k, lr, lr_tensor, grad_scale, found_inf);
  for (size_t i = 0; i < n; ++i) {
    const at::ScalarType ct = opmath_of(params[i].scalar_type());
    ops::AdamValues v{k.in(params[i], ct), k.in(grads[i], ct), k.in(exp_avgs[i], ct), k.in(exp_avg_sqs[i], ct),
                      c.amsgrad ? k.in(max_exp_avg_sqs[i], ct) : Value()};
    const Value step = b.reshape(k.in(state_steps[i], at::kDouble), {});
    const ops::AdamValues r = ops::adam_step(b, v, step, sh.rate, sh.scale, c);
    k.into(params[i], sh.keep(b, r.param, v.param));
    k.into(exp_avgs[i], sh.keep(b, r.exp_avg, v.exp_avg));
    k.into(exp_avg_sqs[i], sh.keep(b, r.exp_avg_sq, v.exp_avg_sq));
    if (c.amsgrad) k.into(max_exp_avg_sqs[i], sh.keep(b, r.max_exp_avg_sq, v.max_exp_avg_sq));
    if (sh.scale.valid()) k.into(grads[i], sh.keep(b, r.grad, v.grad));
  }
  k.run();
}

#define TPU_FUSED_ADAM(NAME, DECOUPLED)                                                                            \
  void NAME(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v, at::TensorList vmax,          \
            at::TensorList steps, double lr, double beta1, double beta2, double weight_decay, double eps,           \
            bool amsgrad, bool maximize, const OptTensor& grad_scale, const OptTensor& found_inf) {              \
    adam_impl("aten::_" #NAME "_", p, g, m, v, vmax, steps, lr, nullptr,                                          \
              {beta1, beta2, weight_decay, eps, amsgrad, maximize, DECOUPLED}, grad_scale, found_inf);              \
  }                                                                                                                \
  void NAME##_tensor_lr(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v,                   \
                        at::TensorList vmax, at::TensorList steps, const at::Tensor& lr, double beta1, double beta2, \
                        double weight_decay, double eps, bool amsgrad, bool maximize, const OptTensor& grad_scale,  \
                        const OptTensor& found_inf) {                                                              \
    adam_impl("aten::_" #NAME "_.tensor_lr", p, g, m, v, vmax, steps, 0, &lr,                                     \
              {beta1, beta2, weight_decay, eps, amsgrad, maximize, DECOUPLED}, grad_scale, found_inf);              \
  }

TPU_FUSED_ADAM(fused_adam, false)
TPU_FUSED_ADAM(fused_adamw, true)
#undef TPU_FUSED_ADAM

void sgd_impl(const char* op, at::TensorList params, at::TensorList grads, at::TensorList bufs, double lr,
              const at::Tensor* lr_tensor, const ops::SgdConfig& c, const OptTensor& grad_scale,
              const OptTensor& found_inf) {
  const size_t n = params.size();
  if (n == 0) return;
  check_lists(op, n, {{"grads", grads}});
  if (c.momentum != 0) check_lists(op, n, {{"momentum_buffer_list", bufs}});
  Kernel k(op, params[0]);
  Builder& b = k.b();
  const Shared sh = shared_of(k, lr, lr_tensor, grad_scale, found_inf);
  for (size_t i = 0; i < n; ++i) {
    const at::ScalarType ct = opmath_of(params[i].scalar_type());
    const bool momentum = c.momentum != 0;
    ops::SgdValues v{k.in(params[i], ct), k.in(grads[i], ct), momentum ? k.in(bufs[i], ct) : Value()};
    const ops::SgdValues r = ops::sgd_step(b, v, sh.rate, sh.scale, c);
    k.into(params[i], sh.keep(b, r.param, v.param));
    if (momentum) k.into(bufs[i], sh.keep(b, r.momentum_buffer, v.momentum_buffer));
    if (sh.scale.valid()) k.into(grads[i], sh.keep(b, r.grad, v.grad));
  }
  k.run();
}

void fused_sgd(at::TensorList p, at::TensorList g, at::TensorList bufs, double weight_decay, double momentum,
               double lr, double dampening, bool nesterov, bool maximize, bool first_step,
               const OptTensor& grad_scale, const OptTensor& found_inf) {
  sgd_impl("aten::_fused_sgd_", p, g, bufs, lr, nullptr,
           {weight_decay, momentum, dampening, nesterov, maximize, first_step}, grad_scale, found_inf);
}

void fused_sgd_tensor_lr(at::TensorList p, at::TensorList g, at::TensorList bufs, double weight_decay,
                         double momentum, const at::Tensor& lr, double dampening, bool nesterov, bool maximize,
                         bool first_step, const OptTensor& grad_scale, const OptTensor& found_inf) {
  sgd_impl("aten::_fused_sgd_.tensor_lr", p, g, bufs, 0, &lr,
           {weight_decay, momentum, dampening, nesterov, maximize, first_step}, grad_scale, found_inf);
}

// GradScaler's one-element operands: `t` (named `what`) must hold one value of `dtype`.
void check_one_element(const char* op, const char* what, const at::Tensor& t, at::ScalarType dtype) {
  TORCH_CHECK(t.numel() == 1 && t.scalar_type() == dtype, op, ": ", what, " must be a one-element ",
              c10::getDtypeNames(dtype).first, " tensor, got ", t.sizes(), " ", t.scalar_type());
}

// GradScaler's unscale: every gradient times inv_scale (in float32 for
// reduced types, as CUDA computes it); found_inf becomes 1 when any value of
// any gradient is NaN or Inf, and otherwise keeps what it held.
void amp_unscale(at::TensorList grads, at::Tensor& found_inf, const at::Tensor& inv_scale) {
  const char* op = "aten::_amp_foreach_non_finite_check_and_unscale_";
  check_one_element(op, "found_inf", found_inf, at::kFloat);
  check_one_element(op, "inv_scale", inv_scale, at::kFloat);
  if (grads.empty()) return;
  for (const at::Tensor& g : grads)
    TORCH_CHECK(at::isFloatingType(g.scalar_type()), op, ": gradients must be floating point, got ",
                g.scalar_type());
  Kernel k(op, found_inf);
  Builder& b = k.b();
  const Value scale = b.reshape(k.in(inv_scale, at::kFloat), {});
  Value bad = b.constant(DType::kBool, 0);
  for (const at::Tensor& g : grads) {
    const at::ScalarType ct = opmath_of(g.scalar_type());
    const Value v = k.in(g, ct);
    std::vector<int64_t> all(b.rank(v));
    for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
    bad = b.logical_or(bad, b.reduce(b.logical_not(b.is_finite(v)), all, ir::Body::kOr, 0));
    k.into(g, b.mul(v, b.convert(scale, b.dtype(v))));
  }
  const Value old = k.in(found_inf, at::kFloat);
  k.into(found_inf, b.select(bad, b.full_like(old, 1.0), old));
  k.run();
}

// GradScaler's update: after an overflow the scale shrinks by backoff and
// the tracker restarts; after growth_interval clean steps in a row it grows
// by growth (unless that overflows float32) and the tracker restarts.
at::Tensor& amp_update_scale(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                             double growth, double backoff, int64_t growth_interval) {
  const char* op = "aten::_amp_update_scale_";
  check_one_element(op, "the scale", scale, at::kFloat);
  check_one_element(op, "growth_tracker", growth_tracker, at::kInt);
  check_one_element(op, "found_inf", found_inf, at::kFloat);
  Kernel k(op, scale);
  Builder& b = k.b();
  const Value s = k.in(scale, at::kDouble);
  const Value t = k.in(growth_tracker, at::kInt);
  const Value inf = b.compare(b.reshape(k.in(found_inf, at::kFloat), b.dims(s)), b.constant(DType::kF32, 0, b.dims(s)),
                              ops::Cmp::kNE);
  const Value successful = b.add(t, b.constant(DType::kS32, 1, b.dims(t)));
  const Value grow = b.compare(successful, b.constant(DType::kS32, static_cast<double>(growth_interval), b.dims(t)),
                               ops::Cmp::kEQ);
  const Value grown = b.convert(b.mul(s, b.constant(DType::kF64, growth, b.dims(s))), DType::kF32);
  const Value kept = b.convert(s, DType::kF32);
  const Value on_clean = b.select(grow, b.select(b.is_finite(grown), grown, kept), kept);
  const Value backed = b.convert(b.mul(s, b.constant(DType::kF64, backoff, b.dims(s))), DType::kF32);
  const Value zero = b.constant(DType::kS32, 0, b.dims(t));
  k.into(scale, b.select(inf, backed, on_clean));
  k.into(growth_tracker, b.select(inf, zero, b.select(grow, zero, successful)));
  k.run();
  return scale;
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", TORCH_FN(amp_unscale));
  m.impl("_amp_update_scale_", TORCH_FN(amp_update_scale));
  m.impl("_fused_adam_", TORCH_FN(fused_adam));
  m.impl("_fused_adam_.tensor_lr", TORCH_FN(fused_adam_tensor_lr));
  m.impl("_fused_adamw_", TORCH_FN(fused_adamw));
  m.impl("_fused_adamw_.tensor_lr", TORCH_FN(fused_adamw_tensor_lr));
  m.impl("_fused_sgd_", TORCH_FN(fused_sgd));
  m.impl("_fused_sgd_.tensor_lr", TORCH_FN(fused_sgd_tensor_lr));
}

}  // namespace torchtpu::aten
