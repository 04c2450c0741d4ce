#include "ops/norm.h"

#include <algorithm>

namespace torchtpu::ops {

namespace {

// A [C] value broadcast along dim 1 of `d`.
Value per_channel(Builder& b, Value v, const Dims& d) { return b.broadcast_in_dim(v, d, {1}); }

// Batch norm's reduction: every dim but the channels (dim 1).
std::vector<int64_t> non_channel_dims(const Dims& d) {
  std::vector<int64_t> red{0};
  for (int64_t i = 2; i < static_cast<int64_t>(d.size()); ++i) red.push_back(i);
  return red;
}

double count_of(const Dims& d, const std::vector<int64_t>& dims) {
  double n = 1;
  for (int64_t i : dims) n *= static_cast<double>(d[i]);
  return n;
}

}  // namespace

Value softmax(Builder& b, Value x, int64_t dim, bool log, std::optional<DType> round_log_sum) {
  const Dims& d = b.dims(x);
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

Value softmax_backward(Builder& b, Value g, Value y, int64_t dim, bool log) {
  const Dims d = b.dims(g);
  if (d.empty()) return b.mul(g, b.sub(y, y));  // the output is constant: zero gradient (NaN stays NaN)
  if (log) {
    Value s = b.broadcast_to(b.keepdim(b.reduce_sum(g, {dim}), d, {dim}), d);
    return b.sub(g, b.mul(b.exp(y), s));
  }
  Value s = b.broadcast_to(b.keepdim(b.reduce_sum(b.mul(g, y), {dim}), d, {dim}), d);
  return b.mul(y, b.sub(g, s));
}

Normalized layer_norm(Builder& b, Value x, const std::vector<int64_t>& dims, Value weight, Value bias, double eps) {
  const Dims d = b.dims(x);
  const DType c = b.dtype(x);
  const double n = count_of(d, dims);
  Value mean = b.keepdim(b.div(b.reduce_sum(x, dims), b.constant(c, n)), d, dims);
  Value xc = b.sub(x, b.broadcast_to(mean, d));
  Value var = b.keepdim(b.div(b.reduce_sum(b.mul(xc, xc), dims), b.constant(c, n)), d, dims);
  Value rstd = b.rsqrt(b.add(var, b.constant(c, eps, b.dims(var))));
  Value y = b.mul(xc, b.broadcast_to(rstd, d));
  if (weight.valid()) y = b.mul(y, b.broadcast_to(weight, d));
  if (bias.valid()) y = b.add(y, b.broadcast_to(bias, d));
  return {y, mean, rstd};
}

NormGrads layer_norm_backward(Builder& b, Value g, Value x, Value mean, Value rstd, Value weight,
                              const std::vector<int64_t>& norm_dims, std::array<bool, 3> mask) {
  const Dims d = b.dims(x);
  const DType c = b.dtype(x);
  std::vector<int64_t> batch_dims;
  for (int64_t i = 0; i < static_cast<int64_t>(d.size()); ++i)
    if (std::find(norm_dims.begin(), norm_dims.end(), i) == norm_dims.end()) batch_dims.push_back(i);
  Value mu = b.broadcast_to(mean, d), rs = b.broadcast_to(rstd, d);
  Value xhat = b.mul(b.sub(x, mu), rs);
  NormGrads out;
  if (mask[0]) {
    Value gx = weight.valid() ? b.mul(g, b.broadcast_to(weight, d)) : g;
    const double n = count_of(d, norm_dims);
    Value m1 = b.broadcast_to(b.keepdim(b.div(b.reduce_sum(gx, norm_dims), b.constant(c, n)), d, norm_dims), d);
    Value m2 = b.broadcast_to(
        b.keepdim(b.div(b.reduce_sum(b.mul(gx, xhat), norm_dims), b.constant(c, n)), d, norm_dims), d);
    out.input = b.mul(rs, b.sub(b.sub(gx, m1), b.mul(xhat, m2)));
  }
  if (mask[1]) out.weight = b.reduce_sum(b.mul(g, xhat), batch_dims);
  if (mask[2]) out.bias = b.reduce_sum(g, batch_dims);
  return out;
}

Value inverse_std(Builder& b, Value var, double eps) {
  return b.rsqrt(b.add(var, b.constant(b.dtype(var), eps, b.dims(var))));
}

BatchNorm batch_norm(Builder& b, Value x, Value weight, Value bias, Value running_mean, Value running_var,
                     bool training, Value momentum, double eps, DType stats) {
  const Dims d = b.dims(x);
  const DType c = b.dtype(x);
  const int64_t channels = d[1];
  const std::vector<int64_t> red = non_channel_dims(d);
  const double n = count_of(d, red);
  BatchNorm out;
  Value mean, invstd, var_sum;
  if (training) {
    mean = b.div(b.reduce_sum(x, red), b.constant(c, n));
    Value xc = b.sub(x, per_channel(b, mean, d));
    var_sum = b.reduce_sum(b.mul(xc, xc), red);
    invstd = inverse_std(b, b.div(var_sum, b.constant(c, n)), eps);
  } else {
    mean = running_mean;
    invstd = inverse_std(b, running_var, eps);
  }
  // As the CPU: the batch stats are stored in the stats dtype and read back,
  // and y = x * alpha + beta with alpha = invstd * weight, beta = bias - mean * alpha.
  auto stored = [&](Value v) { return training ? b.convert(b.convert(v, stats), c) : v; };
  Value alpha = stored(invstd);
  if (weight.valid()) alpha = b.mul(alpha, weight);
  Value beta = b.neg(b.mul(stored(mean), alpha));
  if (bias.valid()) beta = b.add(bias, beta);
  out.y = b.add(b.mul(x, per_channel(b, alpha, d)), per_channel(b, beta, d));
  if (training) {
    out.mean = mean;
    out.invstd = invstd;
    // Momentum is a parameter, not structure: momentum=None changes it every step.
    Value m = b.broadcast_to(momentum, {channels});
    Value keep = b.sub(b.constant(c, 1, {channels}), m);
    if (running_mean.valid()) out.running_mean = b.add(b.mul(running_mean, keep), b.mul(mean, m));
    if (running_var.valid()) {
      Value unbiased = b.div(var_sum, b.constant(c, n - 1, b.dims(var_sum)));
      out.running_var = b.add(b.mul(running_var, keep), b.mul(unbiased, m));
    }
  }
  return out;
}

NormGrads batch_norm_backward(Builder& b, Value g, Value x, Value weight, Value mean, Value invstd, bool training,
                              std::array<bool, 3> mask) {
  const Dims d = b.dims(x);
  const DType c = b.dtype(x);
  const int64_t channels = d[1];
  const std::vector<int64_t> red = non_channel_dims(d);
  const double n = count_of(d, red);
  // The CPU's formulas: dot = sum(g * (x - mean)); grad_weight = dot * invstd;
  // in training dx = (g - sum(g) / n - (x - mean) * dot * invstd^2 / n) * invstd * weight.
  Value xc = b.sub(x, per_channel(b, mean, d));
  Value sum_g = b.reduce_sum(g, red), dot = b.reduce_sum(b.mul(g, xc), red);
  NormGrads out;
  if (mask[0]) {
    Value scale = weight.valid() ? b.mul(invstd, weight) : invstd;
    Value gx = g;
    if (training) {
      Value cn = b.constant(c, n, {channels});
      Value proj = b.div(b.mul(b.mul(dot, invstd), invstd), cn);
      gx = b.sub(b.sub(g, per_channel(b, b.div(sum_g, cn), d)), b.mul(xc, per_channel(b, proj, d)));
    }
    out.input = b.mul(gx, per_channel(b, scale, d));
  }
  if (mask[1]) out.weight = b.mul(dot, invstd);
  if (mask[2]) out.bias = sum_g;
  return out;
}

Normalized group_norm(Builder& b, Value x3, int64_t group, Value weight, Value bias, double eps) {
  const Dims c3 = b.dims(x3);
  const int64_t n = c3[0], channels = c3[1], hw = c3[2], per = channels / group;
  const DType c = b.dtype(x3);
  const Dims g3{n, group, per * hw};
  Value x = b.reshape(x3, g3);
  const double count = static_cast<double>(g3[2]);
  Value mean = b.div(b.reduce_sum(x, {2}), b.constant(c, count, {n, group}));
  Value xc = b.sub(x, b.broadcast_in_dim(mean, g3, {0, 1}));
  Value var = b.div(b.reduce_sum(b.mul(xc, xc), {2}), b.constant(c, count, {n, group}));
  Value rstd = b.rsqrt(b.add(var, b.constant(c, eps, {n, group})));
  // As the CPU's kernel: y = x * scale + shift per (sample, channel), with
  // scale = rstd * weight and shift = bias - scale * mean (so infinite
  // weights give the CPU's NaNs and infinities).
  const Dims nc{n, channels};
  auto per_group = [&](Value v) {  // [n, group] -> [n, channels]
    return b.reshape(b.broadcast_in_dim(v, {n, group, per}, {0, 1}), nc);
  };
  Value scale = per_group(rstd);
  if (weight.valid()) scale = b.mul(scale, b.broadcast_in_dim(weight, nc, {1}));
  Value shift = b.neg(b.mul(scale, per_group(mean)));
  if (bias.valid()) shift = b.add(shift, b.broadcast_in_dim(bias, nc, {1}));
  Value y = b.add(b.mul(x3, b.broadcast_in_dim(scale, c3, {0, 1})), b.broadcast_in_dim(shift, c3, {0, 1}));
  return {y, mean, rstd};
}

}  // namespace torchtpu::ops
