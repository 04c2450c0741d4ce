// Statistics over dims: var and std (with their _mean forms and out=), and
// vector norms (linalg_vector_norm, norm with out=).
#include <cmath>

#include <ATen/WrapDimUtils.h>

#include "aten/registry.h"
#include "aten/reduce_dims.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

// Mean and variance over `dims` in the accumulation type, two-pass: the sum
// of squared deviations from the mean, over max(n - correction, 0).
struct Moments {
  Value mean;  // reduced (no keepdim)
  Value var;
};

Moments moments(Kernel& k, const char* op, const at::Tensor& self, const std::vector<int64_t>& dims,
                const std::optional<at::Scalar>& correction) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), op, ": expected a floating point tensor, got ",
              self.scalar_type());
  Builder& b = k.b();
  at::ScalarType ct = acc_type(self.scalar_type());
  Value x = k.in(self, ct);
  const ir::Dims full = to_dims(self.sizes());
  double n = static_cast<double>(count_of(self, dims));
  Moments m;
  m.mean = b.div(b.reduce_sum(x, dims), b.constant(to_ir(ct), n));
  Value dev = b.sub(x, b.broadcast_to(b.keepdim(m.mean, full, dims), full));
  double c = correction ? correction->toDouble() : 1.0;
  m.var = b.div(b.reduce_sum(b.mul(dev, dev), dims), b.constant(to_ir(ct), std::max(n - c, 0.0)));
  return m;
}

void check_out_dtype(const char* op, const at::Tensor& out, at::ScalarType expected) {
  TORCH_CHECK(out.scalar_type() == expected, op, ": Expected out tensor to have dtype ", expected, ", but got ",
              out.scalar_type(), " instead");
}

at::Tensor var_impl(const char* op, bool take_sqrt, const at::Tensor& self, at::OptionalIntArrayRef dim,
                    const std::optional<at::Scalar>& correction, bool keepdim, const at::Tensor* out) {
  if (out) {
    check_out_dtype(op, *out, self.scalar_type());
  }
  Kernel k(op, self);
  Builder& b = k.b();
  auto dims = reduce_dims(self, dim);
  Value v = moments(k, op, self, dims, correction).var;
  if (take_sqrt) v = b.sqrt(v);
  at::Tensor result = k.result(keep(b, v, self, dims, keepdim), self.scalar_type(), out);
  k.run();
  return result;
}
at::Tensor& var_corr_out(const at::Tensor& s, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& c,
                         bool kd, at::Tensor& out) {
  return handed(out, var_impl("aten::var.correction_out", false, s, dim, c, kd, given(out)));
}
at::Tensor& std_corr_out(const at::Tensor& s, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& c,
                         bool kd, at::Tensor& out) {
  return handed(out, var_impl("aten::std.correction_out", true, s, dim, c, kd, given(out)));
}

// The mean of var_mean/std_mean as the CPU's Welford update computes it
// (mean += (x - mean) / n, visiting the reduced dims in ascending order):
// an infinity followed by any element makes it NaN; only an infinity in the
// last element visited gives an infinite mean.
Value welford_mean(Kernel& k, const at::Tensor& self, const std::vector<int64_t>& dims, Value mean) {
  Builder& b = k.b();
  if (dims.empty() || count_of(self, dims) <= 1) return mean;
  const ir::Dims full = to_dims(self.sizes());
  Value x = k.in(self, acc_type(self.scalar_type()));
  Value inf = b.compare(b.abs(x), b.constant(b.dtype(x), INFINITY), Cmp::kEQ);
  Value last = b.constant(DType::kBool, 1, full);
  for (int64_t d : dims)
    last = b.logical_and(last, b.compare(b.iota(DType::kS64, full, d),
                                         b.constant(DType::kS64, static_cast<double>(full[d] - 1)), Cmp::kEQ));
  Value early_inf = b.reduce_max(b.logical_and(inf, b.logical_not(last)), dims);
  return b.select(early_inf, b.constant(b.dtype(mean), NAN, b.dims(mean)), mean);
}

std::tuple<at::Tensor, at::Tensor> var_mean_impl(const char* op, bool take_sqrt, const at::Tensor& self,
                                                 at::OptionalIntArrayRef dim,
                                                 const std::optional<at::Scalar>& correction, bool keepdim) {
  Kernel k(op, self);
  Builder& b = k.b();
  auto dims = reduce_dims(self, dim);
  Moments m = moments(k, op, self, dims, correction);
  Value v = take_sqrt ? b.sqrt(m.var) : m.var;
  Value mean = welford_mean(k, self, dims, m.mean);
  at::Tensor vt = k.out(keep(b, v, self, dims, keepdim), self.scalar_type());
  at::Tensor mt = k.out(keep(b, mean, self, dims, keepdim), self.scalar_type());
  k.run();
  return {vt, mt};
}
std::tuple<at::Tensor, at::Tensor> var_mean_corr(const at::Tensor& s, at::OptionalIntArrayRef dim,
                                                 const std::optional<at::Scalar>& c, bool kd) {
  return var_mean_impl("aten::var_mean", false, s, dim, c, kd);
}
std::tuple<at::Tensor, at::Tensor> std_mean_corr(const at::Tensor& s, at::OptionalIntArrayRef dim,
                                                 const std::optional<at::Scalar>& c, bool kd) {
  return var_mean_impl("aten::std_mean", true, s, dim, c, kd);
}

// The p-norm over `dims` of `x` (in its compute type).
Value norm_value(Kernel& k, Value x, const at::Scalar& ord, const std::vector<int64_t>& dims, at::ScalarType ct) {
  Builder& b = k.b();
  Value a = b.abs(x);
  double p = ord.toDouble();
  if (std::isinf(p)) return p > 0 ? b.reduce_max(a, dims) : b.reduce_min(a, dims);
  if (p == 0) return b.reduce_sum(b.convert(b.compare(a, b.zeros_like(a), Cmp::kNE), to_ir(ct)), dims);
  if (p == 1) return b.reduce_sum(a, dims);
  if (p == 2) return b.sqrt(b.reduce_sum(b.mul(a, a), dims));
  Value pw = b.pow(a, k.scalar(ord, ct));
  Value s = b.reduce_sum(pw, dims);
  return b.pow(s, b.div(b.constant(to_ir(ct), 1.0), k.scalar(ord, ct)));
}

at::Tensor vector_norm_impl(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype, const at::Tensor* out) {
  // The input's dtype first, as the CPU checks it (a dtype= does not make an
  // integer input acceptable).
  for (at::ScalarType t : {self.scalar_type(), dtype.value_or(self.scalar_type())})
    TORCH_CHECK(at::isFloatingType(t) || at::isComplexType(t),
                "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ", t);
  at::ScalarType rt = dtype ? *dtype : self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(rt), "linalg.vector_norm: complex tensors are not supported on tpu");
  Kernel k("aten::linalg_vector_norm", self);
  auto dims = reduce_dims(self, dim);
  at::ScalarType ct = acc_type(rt);
  Value r = keep(k.b(), norm_value(k, k.in(self, ct), ord, dims, ct), self, dims, keepdim);
  at::Tensor result = k.result(r, rt, out);
  k.run();
  return result;
}
at::Tensor& vector_norm_out(const at::Tensor& s, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return handed(out, vector_norm_impl(s, ord, dim, keepdim, dtype, given(out)));
}

// norm with out=: the vector norm over `dim` (p defaults to 2).
at::Tensor& norm_out(const at::Tensor& s, const std::optional<at::Scalar>& p, at::IntArrayRef dim, bool keepdim,
                     at::Tensor& out) {
  check_out_dtype("aten::norm.out", out, s.scalar_type());
  vector_norm_impl(s, p.value_or(2), dim, keepdim, std::nullopt, &out);
  return out;
}
at::Tensor& norm_dtype_out(const at::Tensor& s, const std::optional<at::Scalar>& p, at::IntArrayRef dim,
                           bool keepdim, at::ScalarType dtype, at::Tensor& out) {
  check_out_dtype("aten::norm.dtype_out", out, dtype);
  vector_norm_impl(s, p.value_or(2), dim, keepdim, dtype, &out);
  return out;
}

// Each slice along `dim` whose p-norm exceeds maxnorm is scaled by
// maxnorm / (norm + 1e-7), as the CPU: the norm in float32 for 16-bit
// input, the factor rounded to the input's dtype, then one multiply.
at::Tensor& renorm_out(const at::Tensor& self, const at::Scalar& p, int64_t dim, const at::Scalar& maxnorm,
                       at::Tensor& out) {
  TORCH_CHECK(!p.isComplex() && p.toDouble() > 0, "renorm: non-positive-norm not supported");
  TORCH_CHECK(!maxnorm.isComplex() && maxnorm.toDouble() >= 0, "renorm: expected maxnorm to be >= 0 but got ",
              maxnorm.toDouble());
  TORCH_CHECK(self.dim() > 1, "renorm: input needs at least 2 dimensions, got ", self.dim(), " dimensions");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "renorm: expected a floating point tensor, got ",
              self.scalar_type());
  if (out.defined()) check_out_dtype("aten::renorm", out, self.scalar_type());
  const int64_t w = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < self.dim(); ++i)
    if (i != w) dims.push_back(i);
  const at::ScalarType ct = acc_type(self.scalar_type());
  Kernel k("aten::renorm", self);
  Builder& b = k.b();
  const ir::Dims full = to_dims(self.sizes());
  Value norm = b.keepdim(norm_value(k, k.in(self, ct), p, dims, ct), full, dims);
  Value mx = k.scalar(maxnorm, ct);
  Value factor = b.select(b.compare(norm, mx, Cmp::kGT), b.div(mx, b.add(norm, b.constant(to_ir(ct), 1e-7))),
                          b.full_like(norm, 1));
  const DType t = to_ir(self.scalar_type());
  Value r = b.mul(k.in(self), b.broadcast_to(b.convert(factor, t), full));
  k.result(r, self.scalar_type(), &out);
  k.run();
  return out;
}

}  // namespace

TPU_KERNELS(m) {
  m.out("linalg_vector_norm.out", TORCH_FN(vector_norm_out), "linalg_vector_norm");
  m.impl("norm.dtype_out", TORCH_FN(norm_dtype_out));
  m.impl("norm.out", TORCH_FN(norm_out));
  m.out("renorm.out", TORCH_FN(renorm_out), "renorm", "renorm_");
  m.out("std.correction_out", TORCH_FN(std_corr_out), "std.correction");
  m.impl("std_mean.correction", TORCH_FN(std_mean_corr));
  m.out("var.correction_out", TORCH_FN(var_corr_out), "var.correction");
  m.impl("var_mean.correction", TORCH_FN(var_mean_corr));
}

}  // namespace torchtpu::aten
