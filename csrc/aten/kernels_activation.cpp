// Activations of torch.nn.functional and their derivatives (elu, hardtanh,
// leaky_relu, softplus, mish, shrinks, hardsigmoid, hardswish, threshold,
// glu, log_sigmoid, prelu, rrelu). Structured ops register their out= form,
// from which PyTorch derives the functional and in-place forms. 16-bit
// floats compute in float32 and round once, as PyTorch's CPU kernels do.
#include <ATen/WrapDimUtils.h>

#include "aten/registry.h"
#include "aten/device.h"
#include "aten/opmath.h"
#include "ops/activation.h"
#include "ops/random.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

void check_float(const char* name, const at::Tensor& t) {
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), "\"", name, "\" not implemented for '",
              c10::toString(t.scalar_type()), "'");
}

// Writes an out= result of dtype `rt` (a structured op's output has its input's dtype).
void write_out(Kernel& k, const at::Tensor& out, Value v, at::ScalarType rt) {
  if (!out.defined()) {  // the functional form registry.h derives from an out= kernel
    k.result(v, rt, &out);
    return;
  }
  TORCH_CHECK(out.scalar_type() == rt, k.op(), ": expected out tensor to have dtype ", rt, ", but got ",
              out.scalar_type(), " instead");
  k.into_resized(out, v);
}

template <class F>
at::Tensor& unary_out(const char* op, const char* cpu_name, const at::Tensor& self, at::Tensor& out, F f) {
  check_float(cpu_name, self);
  Kernel k(op, self);
  k.elementwise();
  const at::ScalarType ct = opmath(self.scalar_type());
  Value r;
  try {
    r = f(k, k.in(self, ct), ct);
  } catch (const ops::LoweringError& e) {
    rethrow_lowering(op, e);
  }
  write_out(k, out, r, self.scalar_type());
  k.run();
  return out;
}

// A derivative of grad and the input (or result): broadcast shape, grad's dtype.
template <class F>
at::Tensor& grad_out(const char* op, const char* cpu_name, const at::Tensor& grad, const at::Tensor& x,
                     at::Tensor* out, F f) {
  check_float(cpu_name, grad);
  TORCH_CHECK(grad.scalar_type() == x.scalar_type(), op, ": expected grad_output and self to have the same dtype, got ",
              grad.scalar_type(), " and ", x.scalar_type());
  Kernel k(op, grad);
  k.elementwise({&grad, &x});
  const at::ScalarType ct = opmath(grad.scalar_type());
  Value r;
  try {
    r = f(k, k.in(grad, ct), k.in(x, ct), ct);
  } catch (const ops::LoweringError& e) {
    rethrow_lowering(op, e);
  }
  write_out(k, *out, r, grad.scalar_type());
  k.run();
  return *out;
}

// The functional form of a non-structured derivative: a new tensor then its out= form.
at::Tensor fresh(const at::Tensor& like) { return empty_device({0}, like.scalar_type(), like.device().index()); }

// ---- elu, celu, selu --------------------------------------------------------------

at::Tensor& elu_out(const at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
                    const at::Scalar& input_scale, at::Tensor& out) {
  return unary_out("aten::elu.out", "elu_cpu", self, out, [&](Kernel& k, Value x, at::ScalarType ct) {
    return ops::elu(k.b(), x, k.scalar(alpha, ct), k.scalar(scale, ct), k.scalar(input_scale, ct));
  });
}

at::Tensor& elu_backward_out(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                             const at::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result,
                             at::Tensor& grad_input) {
  TORCH_CHECK(!is_result || alpha.to<double>() >= 0.0, "In-place elu backward calculation is triggered with a negative "
              "slope which is not supported. This is caused by calling in-place forward function with a negative "
              "slope, please call out-of-place version instead.");
  return grad_out("aten::elu_backward.grad_input", "elu_backward_cpu", grad, self_or_result, &grad_input,
                  [&](Kernel& k, Value g, Value x, at::ScalarType ct) {
                    return ops::elu_backward(k.b(), g, x, k.scalar(alpha, ct), k.scalar(scale, ct),
                                             k.scalar(input_scale, ct), is_result);
                  });
}

// ---- hardtanh (clamp with PyTorch's legacy integer bounds) ------------------------------

at::Tensor hardtanh_impl(const char* op, const at::Tensor& self, const at::Scalar& lo, const at::Scalar& hi,
                         const at::Tensor* target, bool inplace) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Bool inputs not supported for hardtanh");
  const at::ScalarType st = self.scalar_type();
  at::Scalar l = lo, h = hi;
  if (at::isIntegralType(st, /*includeBool=*/false)) {
    l = lo.toLong();
    h = hi.toLong();
    TORCH_CHECK(st != at::kByte || (l.toLong() >= 0 && h.toLong() >= 0),
                "cannot do hardtanh on an unsigned type with negative limits");
  }
  Kernel k(op, self);
  k.elementwise();
  Builder& b = k.b();
  // As clamp: the bounds in self's dtype.
  Value r = b.min(b.max(k.in(self), k.scalar(l, st)), k.scalar(h, st));
  at::Tensor result;
  if (!target) {
    result = k.out(r, st);
  } else if (inplace) {
    k.into(*target, r);
    result = *target;
  } else {
    write_out(k, *target, r, st);
    result = *target;
  }
  k.run();
  return result;
}
at::Tensor& hardtanh_out(const at::Tensor& self, const at::Scalar& lo, const at::Scalar& hi, at::Tensor& out) {
  hardtanh_impl("aten::hardtanh.out", self, lo, hi, &out, false);
  return out;
}

at::Tensor& hardtanh_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lo,
                                  const at::Scalar& hi, at::Tensor& grad_input) {
  return grad_out("aten::hardtanh_backward.grad_input", "hardtanh_backward_cpu", grad, self, &grad_input,
                  [&](Kernel& k, Value g, Value x, at::ScalarType ct) {
                    return ops::hardtanh_backward(k.b(), g, x, k.scalar(lo, ct), k.scalar(hi, ct));
                  });
}

// ---- leaky_relu, rrelu ---------------------------------------------------------------

at::Tensor& leaky_relu_out(const at::Tensor& self, const at::Scalar& slope, at::Tensor& out) {
  return unary_out("aten::leaky_relu.out", "leaky_relu_cpu", self, out, [&](Kernel& k, Value x, at::ScalarType ct) {
    return ops::leaky_relu(k.b(), x, k.scalar(slope, ct));
  });
}

at::Tensor& leaky_relu_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& slope,
                                    bool is_result, at::Tensor& grad_input) {
  TORCH_CHECK(!is_result || slope.to<double>() >= 0.0, "In-place leakyReLu backward calculation is triggered with a "
              "negative slope which is not supported. This is caused by calling in-place forward function with a "
              "negative slope, please call out-of-place version instead. File an issue at "
              "https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu backward "
              "calculation with negative slope");
  return grad_out("aten::leaky_relu_backward.grad_input", "leaky_relu_backward_cpu", grad, self, &grad_input,
                  [&](Kernel& k, Value g, Value x, at::ScalarType ct) {
                    return ops::leaky_relu_backward(k.b(), g, x, k.scalar(slope, ct));
                  });
}

// Training draws a slope per non-positive element from U(lower, upper) on the
// device's generator (noise holds it, 1 elsewhere); evaluation is leaky_relu
// with slope (lower + upper) / 2, computed in double as the CPU does.
at::Tensor rrelu_impl(const char* op, const at::Tensor& self, const at::Tensor& noise, const at::Scalar& lower,
                      const at::Scalar& upper, bool training, const std::optional<at::Generator>& gen,
                      const at::Tensor* target) {
  TORCH_CHECK(self.sizes() == noise.sizes(), "noise tensor shape must match self tensor shape. Got self.shape = ",
              self.sizes(), " noise.shape = ", noise.sizes());
  check_float("rrelu_with_noise_out_cpu", self);
  Kernel k(op, self);
  k.elementwise();
  Builder& b = k.b();
  const at::ScalarType st = self.scalar_type(), ct = opmath(st);
  Value x = k.in(self, ct), r;
  if (training) {
    if (self.numel() > 0) {
      auto [k0, k1] = random_keys(k, gen, self);
      Value u = b.convert(ops::uniform01(b, k0, k1, b.dims(x)), to_ir(ct));
      Value lo = k.scalar(lower, ct);
      Value slope = b.add(lo, b.mul(u, b.sub(k.scalar(upper, ct), lo)));
      Value neg = b.compare(x, b.constant(to_ir(ct), 0), Cmp::kLE);
      r = b.select(neg, b.mul(x, slope), x);
      k.into(noise, b.select(neg, slope, b.constant(to_ir(ct), 1, b.dims(x))));
    } else {
      r = x;
    }
  } else {
    const double slope = (lower.toDouble() + upper.toDouble()) / 2;
    r = ops::leaky_relu(b, x, k.scalar(slope, ct));
  }
  at::Tensor result;
  if (target) {
    if (target->is_same(self)) {
      k.into(*target, r);
    } else {
      write_out(k, *target, r, st);
    }
    result = *target;
  } else {
    result = k.out(r, st);
  }
  k.run();
  return result;
}
at::Tensor rrelu_with_noise(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower, const at::Scalar& upper,
                            bool training, std::optional<at::Generator> gen) {
  return rrelu_impl("aten::rrelu_with_noise", self, noise, lower, upper, training, gen, nullptr);
}
at::Tensor& rrelu_with_noise_(at::Tensor& self, at::Tensor& noise, const at::Scalar& lower, const at::Scalar& upper,
                              bool training, std::optional<at::Generator> gen) {
  rrelu_impl("aten::rrelu_with_noise_", self, noise, lower, upper, training, gen, &self);
  return self;
}
at::Tensor& rrelu_with_noise_out(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                                 const at::Scalar& upper, bool training, std::optional<at::Generator> gen,
                                 at::Tensor& out) {
  rrelu_impl("aten::rrelu_with_noise.out", self, noise, lower, upper, training, gen, &out);
  return out;
}

// ---- softplus, mish ------------------------------------------------------------------

at::Tensor& softplus_out(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold, at::Tensor& out) {
  return unary_out("aten::softplus.out", "softplus_cpu", self, out, [&](Kernel& k, Value x, at::ScalarType ct) {
    return ops::softplus(k.b(), x, k.scalar(beta, ct), k.scalar(threshold, ct));
  });
}
at::Tensor& softplus_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& beta,
                                  const at::Scalar& threshold, at::Tensor& grad_input) {
  return grad_out("aten::softplus_backward.grad_input", "softplus_backward_cpu", grad, self, &grad_input,
                  [&](Kernel& k, Value g, Value x, at::ScalarType ct) {
                    return ops::softplus_backward(k.b(), g, x, k.scalar(beta, ct), k.scalar(threshold, ct));
                  });
}

at::Tensor& mish_out(const at::Tensor& self, at::Tensor& out) {
  return unary_out("aten::mish.out", "mish_cpu", self, out,
                   [&](Kernel& k, Value x, at::ScalarType) { return ops::mish(k.b(), x); });
}
at::Tensor mish_backward(const at::Tensor& grad, const at::Tensor& self) {
  at::Tensor out = fresh(grad);
  return grad_out("aten::mish_backward", "mish_backward_cpu", grad, self, &out,
                  [&](Kernel& k, Value g, Value x, at::ScalarType) { return ops::mish_backward(k.b(), g, x); });
}

// ---- shrinks ---------------------------------------------------------------------------

// hardshrink compares in self's dtype (lambd rounded to it), as the CPU.
at::Tensor& hardshrink_out(const at::Tensor& self, const at::Scalar& lambd, at::Tensor& out) {
  check_float("hardshrink_cpu", self);
  Kernel k("aten::hardshrink.out", self);
  k.elementwise();
  const at::ScalarType st = self.scalar_type();
  write_out(k, out, ops::hardshrink(k.b(), k.in(self), k.scalar(lambd, st)), st);
  k.run();
  return out;
}
at::Tensor& hardshrink_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd,
                                    at::Tensor& grad_input) {
  return grad_out("aten::hardshrink_backward.grad_input", "shrink_backward_cpu", grad, self, &grad_input,
                  [&](Kernel& k, Value g, Value x, at::ScalarType ct) {
                    Value l = k.b().convert(k.scalar(lambd, grad.scalar_type()), to_ir(ct));
                    return ops::shrink_backward(k.b(), g, x, l);
                  });
}
at::Tensor& softshrink_out(const at::Tensor& self, const at::Scalar& lambd, at::Tensor& out) {
  TORCH_CHECK(lambd.to<double>() >= 0, "lambda must be greater or equal to 0, but found to be ", lambd.to<double>(),
              ".");
  return unary_out("aten::softshrink.out", "softshrink_cpu", self, out, [&](Kernel& k, Value x, at::ScalarType ct) {
    return ops::softshrink(k.b(), x, k.scalar(lambd, ct));
  });
}
at::Tensor& softshrink_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd,
                                    at::Tensor& grad_input) {
  return grad_out("aten::softshrink_backward.grad_input", "shrink_backward_cpu", grad, self, &grad_input,
                  [&](Kernel& k, Value g, Value x, at::ScalarType ct) {
                    Value l = k.b().convert(k.scalar(lambd, grad.scalar_type()), to_ir(ct));
                    return ops::shrink_backward(k.b(), g, x, l);
                  });
}

// ---- hardsigmoid, hardswish ------------------------------------------------------------

at::Tensor& hardsigmoid_out(const at::Tensor& self, at::Tensor& out) {
  return unary_out("aten::hardsigmoid.out", "hardsigmoid_cpu", self, out, [&](Kernel& k, Value x, at::ScalarType ct) {
    return ops::hardsigmoid(k.b(), x, k.scalar(6.0, ct));
  });
}
at::Tensor& hardsigmoid_backward_out(const at::Tensor& grad, const at::Tensor& self, at::Tensor& grad_input) {
  return grad_out("aten::hardsigmoid_backward.grad_input", "hardsigmoid_backward", grad, self, &grad_input,
                  [&](Kernel& k, Value g, Value x, at::ScalarType) { return ops::hardsigmoid_backward(k.b(), g, x); });
}

at::Tensor hardswish_impl(const char* op, const at::Tensor& self, const at::Tensor* target, bool inplace) {
  check_float("hardswish_cpu", self);
  Kernel k(op, self);
  k.elementwise();
  const at::ScalarType st = self.scalar_type(), ct = opmath(st);
  Value r = ops::hardswish(k.b(), k.in(self, ct), k.scalar(6.0, ct));
  at::Tensor result;
  if (!target) {
    result = k.out(r, st);
  } else {
    inplace ? k.into(*target, r) : write_out(k, *target, r, st);
    result = *target;
  }
  k.run();
  return result;
}
at::Tensor& hardswish_out(const at::Tensor& self, at::Tensor& out) {
  hardswish_impl("aten::hardswish.out", self, &out, false);
  return out;
}
at::Tensor hardswish_backward(const at::Tensor& grad, const at::Tensor& self) {
  at::Tensor out = fresh(grad);
  return grad_out("aten::hardswish_backward", "hardswish_backward_cpu", grad, self, &out,
                  [&](Kernel& k, Value g, Value x, at::ScalarType ct) {
                    return ops::hardswish_backward(k.b(), g, x, k.scalar(3.0, ct));
                  });
}

// ---- threshold, gelu.out ------------------------------------------------------------------

// threshold compares and selects in self's dtype (the scalars converted to it).
at::Tensor& threshold_out(const at::Tensor& self, const at::Scalar& threshold, const at::Scalar& value,
                          at::Tensor& out) {
  const at::ScalarType st = self.scalar_type();
  TORCH_CHECK(st != at::kBool, "\"threshold_cpu\" not implemented for 'Bool'");
  Kernel k("aten::threshold.out", self);
  k.elementwise();
  write_out(k, out, ops::threshold(k.b(), k.in(self), k.scalar(threshold, st), k.scalar(value, st)), st);
  k.run();
  return out;
}

// ---- glu ---------------------------------------------------------------------------------

int64_t glu_dim(const at::Tensor& self, int64_t dim) {
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  const int64_t w = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.size(w) % 2 == 0, "Halving dimension must be even, but dimension ", w, " is size ", self.size(w));
  return w;
}

at::Tensor& glu_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  const int64_t w = glu_dim(self, dim);
  const int64_t h = self.size(w) / 2;
  return unary_out("aten::glu.out", "glu_cpu", self, out, [&](Kernel& k, Value x, at::ScalarType) {
    Builder& b = k.b();
    return ops::glu(b, b.slice_dim(x, w, 0, h), b.slice_dim(x, w, h, 2 * h));
  });
}

// As the CPU: s = sigmoid(second half) is stored in self's dtype; the first
// half's gradient is s * g, the second's (1 - s) * s * a * g.
at::Tensor& glu_backward_out(const at::Tensor& grad, const at::Tensor& self, int64_t dim, at::Tensor& grad_input) {
  const char* op = "aten::glu_backward.grad_input";
  const int64_t w = glu_dim(self, dim);
  const int64_t h = self.size(w) / 2;
  check_float("glu_backward_cpu", self);
  Kernel k(op, self);
  k.elementwise();
  Builder& b = k.b();
  const at::ScalarType st = self.scalar_type(), ct = opmath(st);
  Value x = k.in(self, ct), g = k.in(grad, ct);
  TORCH_CHECK(b.dims(g) == b.dims(b.slice_dim(x, w, 0, h)), op, ": grad_output of shape ", grad.sizes(),
              " does not match half of self ", self.sizes(), " along dim ", w);
  Value a = b.slice_dim(x, w, 0, h);
  Value s = b.convert(b.convert(ops::sigmoid_exp(b, b.slice_dim(x, w, h, 2 * h)), to_ir(st)), to_ir(ct));
  Value first = b.mul(s, g);
  Value second = b.mul(b.mul(b.mul(b.sub(b.constant(to_ir(ct), 1), s), s), a), g);
  write_out(k, grad_input, b.concatenate({first, second}, w), st);
  k.run();
  return grad_input;
}

// ---- log_sigmoid ---------------------------------------------------------------------------

std::tuple<at::Tensor&, at::Tensor&> log_sigmoid_forward_out(const at::Tensor& self, at::Tensor& output,
                                                               at::Tensor& buffer) {
  const char* op = "aten::log_sigmoid_forward.output";
  check_float("log_sigmoid_cpu", self);
  Kernel k(op, self);
  k.elementwise();
  const at::ScalarType st = self.scalar_type();
  auto [out, buf] = ops::log_sigmoid(k.b(), k.in(self, opmath(st)));
  write_out(k, output, out, st);
  write_out(k, buffer, buf, st);
  k.run();
  return {output, buffer};
}
std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor& self) {
  at::Tensor out = fresh(self), buf = fresh(self);
  log_sigmoid_forward_out(self, out, buf);
  return {out, buf};
}
at::Tensor& log_sigmoid_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer,
                                     at::Tensor& grad_input) {
  return grad_out("aten::log_sigmoid_backward.grad_input", "log_sigmoid_backward_cpu", grad, self, &grad_input,
                  [&](Kernel& k, Value g, Value x, at::ScalarType ct) {
                    return ops::log_sigmoid_backward(k.b(), g, x, k.in(buffer, ct));
                  });
}

// ---- prelu ------------------------------------------------------------------------------------

at::Tensor prelu_kernel(const at::Tensor& self, const at::Tensor& weight) {
  check_float("prelu_cpu", self);
  Kernel k("aten::_prelu_kernel", self);
  k.elementwise({&self, &weight});
  const at::ScalarType st = self.scalar_type(), ct = opmath(st);
  at::Tensor out = k.out(ops::prelu(k.b(), k.in(self, ct), k.in(weight, ct)), st);
  k.run();
  return out;
}

std::tuple<at::Tensor, at::Tensor> prelu_kernel_backward(const at::Tensor& grad, const at::Tensor& self,
                                                         const at::Tensor& weight) {
  check_float("prelu_backward_cpu", self);
  Kernel k("aten::_prelu_kernel_backward", self);
  k.elementwise({&self, &weight, &grad});
  Builder& b = k.b();
  const at::ScalarType st = self.scalar_type(), ct = opmath(st);
  Value x = k.in(self, ct), w = k.in(weight, ct), g = k.in(grad, ct);
  const ir::Dims d = b.dims(b.add(b.add(x, w), g));
  Value pos = b.broadcast_to(b.compare(x, b.constant(to_ir(ct), 0), Cmp::kGT), d);
  Value zero = b.constant(to_ir(ct), 0, d);
  at::Tensor gi = k.out(b.select(pos, b.broadcast_to(g, d), b.mul(w, g)), st);
  at::Tensor gw = k.out(b.select(pos, zero, b.mul(x, g)), weight.scalar_type());
  k.run();
  return {gi, gw};
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("_prelu_kernel", TORCH_FN(prelu_kernel));
  m.impl("_prelu_kernel_backward", TORCH_FN(prelu_kernel_backward));
  m.out("elu.out", TORCH_FN(elu_out), "elu", "elu_");
  m.out("elu_backward.grad_input", TORCH_FN(elu_backward_out), "elu_backward");
  m.out("glu.out", TORCH_FN(glu_out), "glu");
  m.out("glu_backward.grad_input", TORCH_FN(glu_backward_out), "glu_backward");
  m.out("hardshrink.out", TORCH_FN(hardshrink_out), "hardshrink");
  m.out("hardshrink_backward.grad_input", TORCH_FN(hardshrink_backward_out), "hardshrink_backward");
  m.out("hardsigmoid.out", TORCH_FN(hardsigmoid_out), "hardsigmoid", "hardsigmoid_");
  m.out("hardsigmoid_backward.grad_input", TORCH_FN(hardsigmoid_backward_out), "hardsigmoid_backward");
  m.out("hardswish.out", TORCH_FN(hardswish_out), "hardswish", "hardswish_");
  m.impl("hardswish_backward", TORCH_FN(hardswish_backward));
  m.out("hardtanh.out", TORCH_FN(hardtanh_out), "hardtanh", "hardtanh_");
  m.out("hardtanh_backward.grad_input", TORCH_FN(hardtanh_backward_out), "hardtanh_backward");
  m.out("leaky_relu.out", TORCH_FN(leaky_relu_out), "leaky_relu", "leaky_relu_");
  m.out("leaky_relu_backward.grad_input", TORCH_FN(leaky_relu_backward_out), "leaky_relu_backward");
  m.out("log_sigmoid_backward.grad_input", TORCH_FN(log_sigmoid_backward_out), "log_sigmoid_backward");
  m.impl("log_sigmoid_forward", TORCH_FN(log_sigmoid_forward));
  m.impl("log_sigmoid_forward.output", TORCH_FN(log_sigmoid_forward_out));
  m.out("mish.out", TORCH_FN(mish_out), "mish", "mish_");
  m.impl("mish_backward", TORCH_FN(mish_backward));
  m.impl("rrelu_with_noise", TORCH_FN(rrelu_with_noise));
  m.impl("rrelu_with_noise.out", TORCH_FN(rrelu_with_noise_out));
  m.impl("rrelu_with_noise_", TORCH_FN(rrelu_with_noise_));
  m.out("softplus.out", TORCH_FN(softplus_out), "softplus");
  m.out("softplus_backward.grad_input", TORCH_FN(softplus_backward_out), "softplus_backward");
  m.out("softshrink.out", TORCH_FN(softshrink_out), "softshrink");
  m.out("softshrink_backward.grad_input", TORCH_FN(softshrink_backward_out), "softshrink_backward");
  m.out("threshold.out", TORCH_FN(threshold_out), "threshold", "threshold_");
}

}  // namespace torchtpu::aten
