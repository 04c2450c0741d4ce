// The fused optimizer steps: Adam(fused=True), AdamW(fused=True) and
// SGD(fused=True) on the device. One call updates every parameter of a group
// (and its state) in one program, computed as PyTorch's fused CPU kernels
// compute it (ops/optim.h); with found_inf set the step leaves everything as
// it was, as those kernels do.

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

}  // namespace

TPU_KERNELS(m) {
  m.impl("_fused_adam_", TORCH_FN(fused_adam));
  m.impl("_fused_adam_.tensor_lr", TORCH_FN(fused_adam_tensor_lr));
  m.impl("_fused_adamw_", TORCH_FN(fused_adamw));
  m.impl("_fused_adamw_.tensor_lr", TORCH_FN(fused_adamw_tensor_lr));
  m.impl("_fused_sgd_", TORCH_FN(fused_sgd));
  m.impl("_fused_sgd_.tensor_lr", TORCH_FN(fused_sgd_tensor_lr));
}

}  // namespace torchtpu::aten
