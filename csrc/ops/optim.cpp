#include "ops/optim.h"

namespace torchtpu::ops {

namespace {

Value unscale(Builder& b, Value grad, Value grad_scale) {
  return grad_scale.valid() ? b.div(grad, b.convert(grad_scale, b.dtype(grad))) : grad;
}

}  // namespace

AdamValues adam_step(Builder& b, const AdamValues& v, Value step, Value lr, Value grad_scale, const AdamConfig& c) {
  const DType t = b.dtype(v.param);
  auto k = [&](double x) { return b.constant(t, x); };
  auto k64 = [&](double x) { return b.constant(DType::kF64, x); };
  AdamValues out = v;
  Value g = unscale(b, v.grad, grad_scale);
  out.grad = g;
  if (c.maximize) g = b.neg(g);
  Value p = v.param;
  if (c.weight_decay != 0) {
    if (c.decoupled) {
      p = b.mul(p, b.convert(b.sub(k64(1), b.mul(lr, k64(c.weight_decay))), t));
    } else {
      g = b.add(g, b.mul(p, k(c.weight_decay)));
    }
  }
  out.exp_avg = b.add(b.mul(v.exp_avg, k(c.beta1)), b.mul(g, k(1 - c.beta1)));
  out.exp_avg_sq = b.add(b.mul(v.exp_avg_sq, k(c.beta2)), b.mul(b.mul(g, g), k(1 - c.beta2)));
  // Bias corrections in float64, from the step count.
  Value s = b.convert(step, DType::kF64);
  Value bc1 = b.sub(k64(1), b.pow(k64(c.beta1), s));
  Value bc2 = b.sub(k64(1), b.pow(k64(c.beta2), s));
  Value step_size = b.convert(b.div(lr, bc1), t);
  Value bc2_sqrt = b.convert(b.sqrt(bc2), t);
  Value second = out.exp_avg_sq;
  if (c.amsgrad) {
    out.max_exp_avg_sq = b.max(v.max_exp_avg_sq, out.exp_avg_sq);
    second = out.max_exp_avg_sq;
  }
  Value denom = b.add(b.div(b.sqrt(second), bc2_sqrt), k(c.eps));
  out.param = b.sub(p, b.div(b.mul(step_size, out.exp_avg), denom));
  return out;
}

SgdValues sgd_step(Builder& b, const SgdValues& v, Value lr, Value grad_scale, const SgdConfig& c) {
  const DType t = b.dtype(v.param);
  auto k = [&](double x) { return b.constant(t, x); };
  SgdValues out = v;
  Value g = unscale(b, v.grad, grad_scale);
  out.grad = g;
  if (c.maximize) g = b.neg(g);
  if (c.weight_decay != 0) g = b.add(g, b.mul(v.param, k(c.weight_decay)));
  if (c.momentum != 0) {
    out.momentum_buffer =
        c.first_step ? g : b.add(b.mul(v.momentum_buffer, k(c.momentum)), b.mul(g, k(1 - c.dampening)));
    g = c.nesterov ? b.add(g, b.mul(out.momentum_buffer, k(c.momentum))) : out.momentum_buffer;
  }
  out.param = b.sub(v.param, b.mul(b.convert(lr, t), g));
  return out;
}

}  // namespace torchtpu::ops
