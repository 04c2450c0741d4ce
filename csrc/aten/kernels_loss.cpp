// Losses of torch.nn.functional and their derivatives: mse, huber, smooth_l1
// and binary_cross_entropy. 16-bit floats follow PyTorch's CPU kernels: the
// elementwise loss is a tensor of the input's dtype (rounded once, or after
// each operation where the CPU kernel computes in that dtype), and mean / sum
// reduce it in float32.
#include <ATen/core/Reduction.h>

#include "aten/registry.h"
#include "aten/opmath.h"
#include "ops/loss.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

at::ScalarType loss_type(const char* name, const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType st = at::promote_types(a.scalar_type(), b.scalar_type());
  TORCH_CHECK(at::isFloatingType(st), "\"", name, "\" not implemented for '", c10::toString(st), "'");
  return st;
}

void check_reduction(const char* op, int64_t reduction) {
  TORCH_CHECK(reduction >= at::Reduction::None && reduction <= at::Reduction::Sum, op, ": ", reduction,
              " is not a valid value for reduction");
}

// Rounds to `st` and back where `st` is a 16-bit float (the CPU's per-operation rounding).
ops::Round rounding(Builder& b, at::ScalarType st) {
  if (opmath(st) == st) return [](Value v) { return v; };
  const DType s = to_ir(st);
  return [&b, s](Value v) { return b.convert(b.convert(v, s), b.dtype(v)); };
}

// mean / sum of the elementwise loss `l` (in the compute type, rounded to the
// loss dtype first); the count divides as a parameter, as the CPU divides.
Value reduce(Kernel& k, Value l, int64_t reduction, at::ScalarType st) {
  if (reduction == at::Reduction::None) return l;
  Builder& b = k.b();
  const at::ScalarType ct = opmath(st);
  l = rounding(b, st)(l);
  std::vector<int64_t> all(b.rank(l));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  Value s = b.reduce_sum(l, all);
  if (reduction == at::Reduction::Sum) return s;
  int64_t n = 1;
  for (int64_t d : b.dims(l)) n *= d;
  return b.div(s, k.scalar(at::Scalar(n), ct));
}

at::Tensor& finish_out(Kernel& k, Value v, at::ScalarType st, at::Tensor& out) {
  if (!out.defined()) {  // the functional form registry.h derives
    out = k.out(v, st);
    k.run();
    return out;
  }
  TORCH_CHECK(at::canCast(st, out.scalar_type()), k.op(), ": result type ", st,
              " can't be cast to the desired output type ", out.scalar_type());
  k.into_resized(out, v);
  k.run();
  return out;
}


int64_t numel_of(const at::Tensor& t) { return t.numel(); }

// ---- mse ------------------------------------------------------------------------------------

at::Tensor& mse_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, at::Tensor& out) {
  const char* op = "aten::mse_loss.out";
  check_reduction(op, reduction);
  const at::ScalarType st = loss_type("mse_cpu", self, target), ct = opmath(st);
  Kernel k(op, self);
  k.elementwise({&self, &target});
  Builder& b = k.b();
  Value l = ops::mse(b, k.in(self, ct), k.in(target, ct), rounding(b, st));
  return finish_out(k, reduce(k, l, reduction, st), st, out);
}

at::Tensor& mse_loss_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                  int64_t reduction, at::Tensor& grad_input) {
  const char* op = "aten::mse_loss_backward.grad_input";
  const at::ScalarType st = loss_type("mse_backward_cpu_out", self, target), ct = opmath(st);
  Kernel k(op, self);
  k.elementwise({&self, &target, &grad});
  Builder& b = k.b();
  // The CPU's norm in the loss dtype: 2 / numel (mean) or 2.
  const double norm = reduction == at::Reduction::Mean ? 2.0 / static_cast<double>(numel_of(self)) : 2.0;
  Value nv = b.convert(b.constant(to_ir(st), norm), to_ir(ct));
  Value r = ops::mse_backward(b, k.in(self, ct), k.in(target, ct), k.in(grad, ct), nv, rounding(b, st));
  return finish_out(k, r, st, grad_input);
}

// ---- huber ----------------------------------------------------------------------------------

at::Tensor huber_impl(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta,
                      at::Tensor* out) {
  const char* op = out ? "aten::huber_loss.out" : "aten::huber_loss";
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  check_reduction(op, reduction);
  const at::ScalarType st = loss_type("huber_cpu", self, target), ct = opmath(st);
  Kernel k(op, self);
  k.elementwise({&self, &target});
  Builder& b = k.b();
  // The CPU computes float16 in float32 and bfloat16 one rounded operation at a time.
  const at::ScalarType dt = st == at::kHalf ? ct : st;
  Value d = b.convert(k.scalar(delta, dt), to_ir(ct));
  Value l = ops::huber(b, k.in(self, ct), k.in(target, ct), d, rounding(b, dt));
  Value r = reduce(k, l, reduction, st);
  if (out) return finish_out(k, r, st, *out);
  at::Tensor result = k.out(r, st);
  k.run();
  return result;
}
at::Tensor& huber_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta,
                           at::Tensor& out) {
  huber_impl(self, target, reduction, delta, &out);
  return out;
}

at::Tensor& huber_loss_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                    int64_t reduction, double delta, at::Tensor& grad_input) {
  const char* op = "aten::huber_loss_backward.out";
  const at::ScalarType st = loss_type("huber_backward_cpu_out", self, target), ct = opmath(st);
  Kernel k(op, self);
  k.elementwise({&self, &target, &grad});
  Builder& b = k.b();
  const double norm = reduction == at::Reduction::Mean ? 1.0 / static_cast<double>(numel_of(self)) : 1.0;
  Value nv = b.convert(b.constant(to_ir(st), norm), to_ir(ct));
  Value d = b.convert(k.scalar(delta, st), to_ir(ct));
  Value r = ops::huber_backward(b, k.in(self, ct), k.in(target, ct), k.in(grad, ct), nv, d, rounding(b, st));
  return finish_out(k, r, st, grad_input);
}

// ---- smooth_l1 ------------------------------------------------------------------------------

at::Tensor& smooth_l1_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta,
                               at::Tensor& out) {
  const char* op = "aten::smooth_l1_loss.out";
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  check_reduction(op, reduction);
  const at::ScalarType st = loss_type("smooth_l1_cpu", self, target), ct = opmath(st);
  Kernel k(op, self);
  k.elementwise({&self, &target});
  Builder& b = k.b();
  Value l = ops::smooth_l1(b, k.in(self, ct), k.in(target, ct), k.scalar(beta, ct));
  return finish_out(k, reduce(k, l, reduction, st), st, out);
}

// beta <= 0 is l1_loss's derivative: sign(x - t) * (g / numel or g), in the loss dtype.
at::Tensor& smooth_l1_loss_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                        int64_t reduction, double beta, at::Tensor& grad_input) {
  const char* op = "aten::smooth_l1_loss_backward.grad_input";
  const at::ScalarType st = loss_type("smooth_l1_backward_cpu_out", self, target), ct = opmath(st);
  Kernel k(op, self);
  k.elementwise({&self, &target, &grad});
  Builder& b = k.b();
  Value x = k.in(self, ct), t = k.in(target, ct), g = k.in(grad, ct);
  const bool mean = reduction == at::Reduction::Mean;
  Value r;
  if (beta <= 0) {
    const ops::Round round = rounding(b, st);
    Value norm = mean ? round(b.div(g, k.scalar(at::Scalar(numel_of(self)), ct))) : g;
    Value d = round(b.sub(x, t));
    Value zero = b.constant(to_ir(ct), 0);
    Value sgn = b.sub(b.convert(b.compare(zero, d, Cmp::kLT), to_ir(ct)), b.convert(b.compare(d, zero, Cmp::kLT), to_ir(ct)));
    r = b.mul(sgn, norm);
  } else {
    const double norm = mean ? 1.0 / static_cast<double>(numel_of(self)) : 1.0;
    r = ops::smooth_l1_backward(b, x, t, g, b.constant(to_ir(ct), norm), k.scalar(beta, ct));
  }
  return finish_out(k, r, st, grad_input);
}

// ---- binary_cross_entropy -------------------------------------------------------------------

// Inputs outside [0, 1] (NaN included) raise, as on the CPU, through a device-side check.
void check_probabilities(Kernel& k, Value x, const char* what) {
  Builder& b = k.b();
  Value ok = b.logical_and(b.compare(x, b.constant(b.dtype(x), 0), Cmp::kGE),
                           b.compare(x, b.constant(b.dtype(x), 1), Cmp::kLE));
  k.check(b.logical_not(ok), Kernel::CheckKind::kRuntime, what);
}

at::Tensor bce_impl(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                    int64_t reduction, at::Tensor* out) {
  const char* op = out ? "aten::binary_cross_entropy.out" : "aten::binary_cross_entropy";
  check_reduction(op, reduction);
  const bool has_w = weight && weight->defined();
  TORCH_CHECK(self.sizes() == target.sizes(), op, ": target of shape ", target.sizes(),
              " does not match input of shape ", self.sizes());
  const at::ScalarType st = self.scalar_type(), ct = opmath(st);
  TORCH_CHECK(at::isFloatingType(st), "\"binary_cross_entropy\" not implemented for '", c10::toString(st), "'");
  Kernel k(op, self);
  k.elementwise({&self, &target});
  Builder& b = k.b();
  const ops::Round round = rounding(b, st);
  Value x = k.in(self, ct), t = k.in(target, ct);
  check_probabilities(k, x, "all elements of input should be between 0 and 1");
  check_probabilities(k, t, "all elements of target should be between 0 and 1");
  Value l = ops::binary_cross_entropy(b, x, t, round);
  if (has_w) l = b.mul(round(l), k.in(*weight, ct));
  Value r = reduce(k, l, reduction, st);
  if (out) return finish_out(k, r, st, *out);
  at::Tensor result = k.out(r, st);
  k.run();
  return result;
}
at::Tensor& binary_cross_entropy_out(const at::Tensor& self, const at::Tensor& target,
                                     const std::optional<at::Tensor>& weight, int64_t reduction, at::Tensor& out) {
  bce_impl(self, target, weight, reduction, &out);
  return out;
}

// As the CPU: the quotient in the loss dtype, times weight, then divided by
// numel for a mean (each step rounded to a 16-bit dtype).
at::Tensor& bce_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                             const std::optional<at::Tensor>& weight, int64_t reduction, at::Tensor& grad_input) {
  const char* op = "aten::binary_cross_entropy_backward.grad_input";
  const bool has_w = weight && weight->defined();
  const at::ScalarType st = self.scalar_type(), ct = opmath(st);
  TORCH_CHECK(at::isFloatingType(st), "\"binary_cross_entropy_backward\" not implemented for '", c10::toString(st),
              "'");
  Kernel k(op, self);
  k.elementwise({&self, &target, &grad});
  Builder& b = k.b();
  const ops::Round round = rounding(b, st);
  Value x = k.in(self, ct), t = k.in(target, ct), g = k.in(grad, ct);
  check_probabilities(k, x, "all elements of input should be between 0 and 1");
  Value eps = b.convert(b.constant(to_ir(st), 1e-12), to_ir(ct));
  Value r = ops::binary_cross_entropy_backward(b, g, x, t, eps, round);
  if (has_w) r = b.mul(round(r), k.in(*weight, ct));
  if (reduction == at::Reduction::Mean) r = b.div(round(r), k.scalar(at::Scalar(numel_of(self)), ct));
  return finish_out(k, r, st, grad_input);
}

}  // namespace

TPU_KERNELS(m) {
  m.out("binary_cross_entropy.out", TORCH_FN(binary_cross_entropy_out), "binary_cross_entropy");
  m.out("binary_cross_entropy_backward.grad_input", TORCH_FN(bce_backward_out), "binary_cross_entropy_backward");
  m.out("huber_loss.out", TORCH_FN(huber_loss_out), "huber_loss");
  m.out("huber_loss_backward.out", TORCH_FN(huber_loss_backward_out), "huber_loss_backward");
  m.out("mse_loss.out", TORCH_FN(mse_loss_out), "mse_loss");
  m.out("mse_loss_backward.grad_input", TORCH_FN(mse_loss_backward_out), "mse_loss_backward");
  m.out("smooth_l1_loss.out", TORCH_FN(smooth_l1_loss_out), "smooth_l1_loss");
  m.out("smooth_l1_loss_backward.grad_input", TORCH_FN(smooth_l1_loss_backward_out), "smooth_l1_loss_backward");
}

}  // namespace torchtpu::aten
