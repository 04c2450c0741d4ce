// Reductions and normalizations: sum, mean, max/min (full, dim, amax/amin),
// argmax/argmin, any/all, var/std, vector norms, softmax and log_softmax,
// layer_norm, with their backward ops.
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/ops/_assert_async.h>
#include <ATen/ops/nanquantile_native.h>
#include <ATen/ops/quantile_native.h>
#include <torch/library.h>

#include "aten/tensor_ir.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

// quantile with a tensor q: PyTorch checks q's range only for a CPU q (a
// device q would need a sync); here the check is a device-side assert, so a
// q outside [0, 1] (or NaN) raises at the next sync point instead of giving
// values. The rest is PyTorch's own composite, differentiable as on the CPU.
void check_q_in_range(const at::Tensor& q) {
  if (q.device().is_privateuseone() && q.numel() > 0)
    at::_assert_async(at::logical_and(q.ge(0), q.le(1)).all(), "quantile() q values must be in the range [0, 1]");
}
at::Tensor quantile_q(const at::Tensor& self, const at::Tensor& q, std::optional<int64_t> dim, bool keepdim,
                      c10::string_view interpolation) {
  check_q_in_range(q);
  return at::native::quantile(self, q, dim, keepdim, interpolation);
}
at::Tensor& quantile_q_out(const at::Tensor& self, const at::Tensor& q, std::optional<int64_t> dim, bool keepdim,
                           c10::string_view interpolation, at::Tensor& out) {
  check_q_in_range(q);
  return at::native::quantile_out(self, q, dim, keepdim, interpolation, out);
}
at::Tensor nanquantile_q(const at::Tensor& self, const at::Tensor& q, std::optional<int64_t> dim, bool keepdim,
                         c10::string_view interpolation) {
  check_q_in_range(q);
  return at::native::nanquantile(self, q, dim, keepdim, interpolation);
}
at::Tensor& nanquantile_q_out(const at::Tensor& self, const at::Tensor& q, std::optional<int64_t> dim, bool keepdim,
                              c10::string_view interpolation, at::Tensor& out) {
  check_q_in_range(q);
  return at::native::nanquantile_out(self, q, dim, keepdim, interpolation, out);
}

// The dims a reduction runs over, with PyTorch's checks: each dim wraps
// (a 0-d tensor has one wrappable dim, 0 or -1, with nothing to reduce) and
// appears once.
std::vector<int64_t> reduce_dims(const at::Tensor& t, at::OptionalIntArrayRef dim) {
  std::vector<int64_t> out;
  if (!dim || dim->empty()) {
    for (int64_t i = 0; i < t.dim(); ++i) out.push_back(i);
    return out;
  }
  std::bitset<at::dim_bitset_size> seen = at::dim_list_to_bitset(*dim, t.dim());
  for (int64_t i = 0; i < t.dim(); ++i)
    if (seen[i]) out.push_back(i);
  return out;
}

// Accumulation type: 16-bit floats reduce in f32.
at::ScalarType acc_type(at::ScalarType t) {
  return (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t;
}

Value keep(Builder& b, Value r, const at::Tensor& t, const std::vector<int64_t>& dims, bool keepdim) {
  return keepdim ? b.keepdim(r, to_dims(t.sizes()), dims) : r;
}

int64_t count_of(const at::Tensor& t, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= t.size(d);
  return n;
}

at::Tensor sum_impl(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, const at::Tensor* out) {
  at::ScalarType rt = dtype ? *dtype
                      : at::isIntegralType(self.scalar_type(), true) ? at::kLong
                                                                     : self.scalar_type();
  if (out && !dtype) rt = out->scalar_type();
  Kernel k("aten::sum", self);
  auto dims = reduce_dims(self, dim);
  Value x = k.in(self, acc_type(rt));
  Value r = keep(k.b(), k.b().reduce_sum(x, dims), self, dims, keepdim);
  at::Tensor result = k.result(r, rt, out);
  k.run();
  return result;
}
at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype) {
  TPU_COUNT("aten::sum.dim_IntList");
  return sum_impl(self, dim, keepdim, dtype, nullptr);
}
at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out) {
  TPU_COUNT("aten::sum.IntList_out");
  sum_impl(self, dim, keepdim, dtype, &out);
  return out;
}

at::Tensor mean_impl(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, const at::Tensor* out) {
  at::ScalarType rt = dtype ? *dtype : out ? out->scalar_type() : self.scalar_type();
  TORCH_CHECK(at::isFloatingType(rt),
              "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
              "Got: ", rt);
  Kernel k("aten::mean", self);
  Builder& b = k.b();
  auto dims = reduce_dims(self, dim);
  at::ScalarType at_ = acc_type(rt);
  Value s = b.reduce_sum(k.in(self, at_), dims);
  Value r = keep(b, b.div(s, b.constant(to_ir(at_), static_cast<double>(count_of(self, dims)), b.dims(s))), self,
                 dims, keepdim);
  at::Tensor result = k.result(r, rt, out);
  k.run();
  return result;
}
at::Tensor mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype) {
  TPU_COUNT("aten::mean.dim");
  return mean_impl(self, dim, keepdim, dtype, nullptr);
}
at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, at::Tensor& out) {
  TPU_COUNT("aten::mean.out");
  mean_impl(self, dim, keepdim, dtype, &out);
  return out;
}

at::Tensor extreme(const char* op, bool is_max, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   const at::Tensor* out) {
  TORCH_CHECK(self.numel() > 0 || (dim && !dim->empty()), op,
              "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with "
              "the 'dim' argument.");
  Kernel k(op, self);
  auto dims = reduce_dims(self, dim);
  Value x = k.in(self);
  Value r = is_max ? k.b().reduce_max(x, dims) : k.b().reduce_min(x, dims);
  r = keep(k.b(), r, self, dims, keepdim);
  at::Tensor result;
  if (out) {
    k.into_resized(*out, r);
    result = *out;
  } else {
    result = k.out(r, self.scalar_type());
  }
  k.run();
  return result;
}
at::Tensor amax(const at::Tensor& s, at::IntArrayRef dim, bool keepdim) {
  TPU_COUNT("aten::amax");
  return extreme("aten::amax", true, s, dim, keepdim, nullptr);
}
at::Tensor& amax_out(const at::Tensor& s, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  extreme("aten::amax.out", true, s, dim, keepdim, &out);
  return out;
}
at::Tensor amin(const at::Tensor& s, at::IntArrayRef dim, bool keepdim) {
  TPU_COUNT("aten::amin");
  return extreme("aten::amin", false, s, dim, keepdim, nullptr);
}
at::Tensor& amin_out(const at::Tensor& s, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  extreme("aten::amin.out", false, s, dim, keepdim, &out);
  return out;
}
at::Tensor max_all(const at::Tensor& s) {
  TPU_COUNT("aten::max");
  TORCH_CHECK(s.numel() > 0, "max(): Expected reduction dim to be specified for input.numel() == 0.");
  return extreme("aten::max", true, s, std::nullopt, false, nullptr);
}
at::Tensor min_all(const at::Tensor& s) {
  TPU_COUNT("aten::min");
  TORCH_CHECK(s.numel() > 0, "min(): Expected reduction dim to be specified for input.numel() == 0.");
  return extreme("aten::min", false, s, std::nullopt, false, nullptr);
}

// Index of the first extreme value along `dim` (of a rank >= 1 value).
Value arg_extreme(Builder& b, Value x, int64_t dim, bool is_max) {
  const ir::Dims& d = b.dims(x);
  Value m = is_max ? b.reduce_max(x, {dim}) : b.reduce_min(x, {dim});
  Value mk = b.keepdim(m, d, {dim});
  Value hit = b.compare(x, b.broadcast_to(mk, d), Cmp::kEQ);
  if (ir::is_float(b.dtype(x))) hit = b.graph().add("stablehlo.or", {hit, b.compare(x, x, Cmp::kNE)}, b.type(hit));
  Value idx = b.iota(DType::kS64, d, dim);
  Value big = b.constant(DType::kS64, static_cast<double>(d[dim]), d);
  return b.reduce_min(b.select(hit, idx, big), {dim});
}

at::Tensor arg_impl(const char* op, bool is_max, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  TORCH_CHECK(self.numel() > 0, op, "(): Expected reduction dim to be specified for input.numel() == 0.");
  Kernel k(op, self);
  Builder& b = k.b();
  Value x = k.in(self);
  Value r;
  if (!dim) {
    x = b.reshape(x, {self.numel()});
    r = arg_extreme(b, x, 0, is_max);
    if (keepdim) r = b.reshape(r, ir::Dims(self.dim(), 1));
  } else if (self.dim() == 0) {
    at::maybe_wrap_dim(*dim, int64_t{0});
    r = b.constant(DType::kS64, 0);
  } else {
    int64_t w = at::maybe_wrap_dim(*dim, self.dim());
    r = arg_extreme(b, x, w, is_max);
    if (keepdim) r = b.keepdim(r, to_dims(self.sizes()), {w});
  }
  at::Tensor out = k.out(r, at::kLong);
  k.run();
  return out;
}
at::Tensor argmax(const at::Tensor& s, std::optional<int64_t> dim, bool keepdim) {
  TPU_COUNT("aten::argmax");
  return arg_impl("aten::argmax", true, s, dim, keepdim);
}
at::Tensor argmin(const at::Tensor& s, std::optional<int64_t> dim, bool keepdim) {
  TPU_COUNT("aten::argmin");
  return arg_impl("aten::argmin", false, s, dim, keepdim);
}

std::tuple<at::Tensor, at::Tensor> extreme_dim(const char* op, bool is_max, const at::Tensor& self, int64_t dim,
                                               bool keepdim) {
  TORCH_CHECK(self.numel() > 0, op, "(): Expected reduction dim ", dim, " to have non-zero size.");
  Kernel k(op, self);
  Builder& b = k.b();
  Value x = k.in(self);
  if (self.dim() == 0) {
    at::maybe_wrap_dim(dim, int64_t{0});
    at::Tensor v = k.out(x, self.scalar_type());
    at::Tensor i = k.out(b.constant(DType::kS64, 0), at::kLong);
    k.run();
    return {v, i};
  }
  int64_t w = at::maybe_wrap_dim(dim, self.dim());
  Value v = is_max ? b.reduce_max(x, {w}) : b.reduce_min(x, {w});
  Value i = arg_extreme(b, x, w, is_max);
  if (keepdim) {
    v = b.keepdim(v, to_dims(self.sizes()), {w});
    i = b.keepdim(i, to_dims(self.sizes()), {w});
  }
  at::Tensor vt = k.out(v, self.scalar_type());
  at::Tensor it = k.out(i, at::kLong);
  k.run();
  return {vt, it};
}
std::tuple<at::Tensor, at::Tensor> max_dim(const at::Tensor& s, int64_t dim, bool keepdim) {
  TPU_COUNT("aten::max.dim");
  return extreme_dim("aten::max.dim", true, s, dim, keepdim);
}
std::tuple<at::Tensor, at::Tensor> min_dim(const at::Tensor& s, int64_t dim, bool keepdim) {
  TPU_COUNT("aten::min.dim");
  return extreme_dim("aten::min.dim", false, s, dim, keepdim);
}

at::Tensor any_all(const char* op, bool any, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  Kernel k(op, self);
  auto dims = reduce_dims(self, dim);
  Value x = k.in(self, at::kBool);
  Value r = any ? k.b().reduce_max(x, dims) : k.b().reduce_min(x, dims);
  at::Tensor out = k.out(keep(k.b(), r, self, dims, keepdim), at::kBool);
  k.run();
  return out;
}
at::Tensor any_full(const at::Tensor& s) {
  TPU_COUNT("aten::any");
  return any_all("aten::any", true, s, std::nullopt, false);
}
at::Tensor all_full(const at::Tensor& s) {
  TPU_COUNT("aten::all");
  return any_all("aten::all", false, s, std::nullopt, false);
}
at::Tensor any_dim(const at::Tensor& s, int64_t dim, bool keepdim) {
  TPU_COUNT("aten::any.dim");
  return any_all("aten::any.dim", true, s, at::IntArrayRef{dim}, keepdim);
}
at::Tensor all_dim(const at::Tensor& s, int64_t dim, bool keepdim) {
  TPU_COUNT("aten::all.dim");
  return any_all("aten::all.dim", false, s, at::IntArrayRef{dim}, keepdim);
}

at::Tensor var_impl(const char* op, bool take_sqrt, const at::Tensor& self, at::OptionalIntArrayRef dim,
                    const std::optional<at::Scalar>& correction, bool keepdim) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), op, ": expected a floating point tensor, got ",
              self.scalar_type());
  Kernel k(op, self);
  Builder& b = k.b();
  auto dims = reduce_dims(self, dim);
  at::ScalarType ct = acc_type(self.scalar_type());
  Value x = k.in(self, ct);
  double n = static_cast<double>(count_of(self, dims));
  Value mean = b.div(b.reduce_sum(x, dims), b.constant(to_ir(ct), n));
  Value dev = b.sub(x, b.broadcast_to(b.keepdim(mean, to_dims(self.sizes()), dims), to_dims(self.sizes())));
  double c = correction ? correction->toDouble() : 1.0;
  Value v = b.div(b.reduce_sum(b.mul(dev, dev), dims), b.constant(to_ir(ct), std::max(n - c, 0.0)));
  if (take_sqrt) v = b.sqrt(v);
  at::Tensor out = k.out(keep(b, v, self, dims, keepdim), self.scalar_type());
  k.run();
  return out;
}
at::Tensor var_corr(const at::Tensor& s, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& c, bool kd) {
  TPU_COUNT("aten::var.correction");
  return var_impl("aten::var", false, s, dim, c, kd);
}
at::Tensor std_corr(const at::Tensor& s, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& c, bool kd) {
  TPU_COUNT("aten::std.correction");
  return var_impl("aten::std", true, s, dim, c, kd);
}

at::Tensor vector_norm_impl(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype, const at::Tensor* out) {
  at::ScalarType rt = dtype ? *dtype : self.scalar_type();
  TORCH_CHECK(at::isFloatingType(rt), "linalg.vector_norm: Expected a floating point tensor as input. Got ", rt);
  Kernel k("aten::linalg_vector_norm", self);
  Builder& b = k.b();
  auto dims = reduce_dims(self, dim);
  at::ScalarType ct = acc_type(rt);
  Value a = b.unary("stablehlo.abs", k.in(self, ct));
  double p = ord.toDouble();
  Value r;
  if (std::isinf(p)) {
    r = p > 0 ? b.reduce_max(a, dims) : b.reduce_min(a, dims);
  } else if (p == 0) {
    r = b.reduce_sum(b.convert(b.compare(a, b.zeros_like(a), Cmp::kNE), to_ir(ct)), dims);
  } else if (p == 1) {
    r = b.reduce_sum(a, dims);
  } else if (p == 2) {
    r = b.sqrt(b.reduce_sum(b.mul(a, a), dims));
  } else {
    Value pw = b.binary_bcast("stablehlo.power", a, k.scalar(ord, ct));
    Value s = b.reduce_sum(pw, dims);
    r = b.binary_bcast("stablehlo.power", s, b.div(b.constant(to_ir(ct), 1.0), k.scalar(ord, ct)));
  }
  r = keep(b, r, self, dims, keepdim);
  at::Tensor result = k.result(r, rt, out);
  k.run();
  return result;
}
at::Tensor vector_norm(const at::Tensor& s, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype) {
  TPU_COUNT("aten::linalg_vector_norm");
  return vector_norm_impl(s, ord, dim, keepdim, dtype, nullptr);
}
at::Tensor& vector_norm_out(const at::Tensor& s, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype, at::Tensor& out) {
  vector_norm_impl(s, ord, dim, keepdim, dtype, &out);
  return out;
}

// ---- softmax family -------------------------------------------------------------

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

// Above autograd: the composite records its own ops for backward.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("quantile", TORCH_FN(quantile_q));
  m.impl("quantile.out", TORCH_FN(quantile_q_out));
  m.impl("nanquantile", TORCH_FN(nanquantile_q));
  m.impl("nanquantile.out", TORCH_FN(nanquantile_q_out));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.dim_IntList", TORCH_FN(sum_dim));
  m.impl("sum.IntList_out", TORCH_FN(sum_out));
  m.impl("mean.dim", TORCH_FN(mean_dim));
  m.impl("mean.out", TORCH_FN(mean_out));
  m.impl("amax", TORCH_FN(amax));
  m.impl("amax.out", TORCH_FN(amax_out));
  m.impl("amin", TORCH_FN(amin));
  m.impl("amin.out", TORCH_FN(amin_out));
  m.impl("max", TORCH_FN(max_all));
  m.impl("min", TORCH_FN(min_all));
  m.impl("max.dim", TORCH_FN(max_dim));
  m.impl("min.dim", TORCH_FN(min_dim));
  m.impl("argmax", TORCH_FN(argmax));
  m.impl("argmin", TORCH_FN(argmin));
  m.impl("any", TORCH_FN(any_full));
  m.impl("all", TORCH_FN(all_full));
  m.impl("any.dim", TORCH_FN(any_dim));
  m.impl("all.dim", TORCH_FN(all_dim));
  m.impl("var.correction", TORCH_FN(var_corr));
  m.impl("std.correction", TORCH_FN(std_corr));
  m.impl("linalg_vector_norm", TORCH_FN(vector_norm));
  m.impl("linalg_vector_norm.out", TORCH_FN(vector_norm_out));
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
