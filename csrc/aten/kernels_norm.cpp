// Batch norm over dim 1 of [N, C, *]: native_batch_norm (what eager
// nn.BatchNorm dispatches to, train and eval), the _native_batch_norm_legit
// and _batch_norm_with/no_update forms that decompositions and export use,
// and their backward. Training normalizes with the biased batch variance and
// updates running_mean / running_var in place with momentum (unbiased
// variance), as the CPU does; eval uses the running stats. save_mean /
// save_invstd are the batch stats in training and empty in eval. Also group
// norm (native_group_norm).
#include <torch/library.h>

#include "aten/tensor_ir.h"

namespace torchtpu::aten {
namespace {

bool defined(const std::optional<at::Tensor>& t) { return t && t->defined(); }

at::ScalarType acc_type(at::ScalarType t) { return (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t; }

// The dtype of the saved stats: float when a reduced-precision input comes
// with float parameters, else the input's.
at::ScalarType param_type(const at::Tensor& input, std::initializer_list<const std::optional<at::Tensor>*> params) {
  for (const auto* p : params)
    if (defined(*p) && p->value().scalar_type() != input.scalar_type()) return at::kFloat;
  return input.scalar_type();
}

std::vector<int64_t> non_channel_dims(const at::Tensor& t) {
  std::vector<int64_t> d{0};
  for (int64_t i = 2; i < t.dim(); ++i) d.push_back(i);
  return d;
}

// A [C] value broadcast along dim 1 of `d`.
Value per_channel(Builder& b, Value v, const ir::Dims& d) { return b.broadcast_in_dim(v, d, {1}); }

void check_channels(const char* op, const at::Tensor& input, std::initializer_list<const std::optional<at::Tensor>*> ts) {
  TORCH_CHECK(input.dim() >= 2, op, ": expected an input with at least 2 dims, got ", input.sizes());
  for (const auto* t : ts)
    if (defined(*t)) {
      TORCH_CHECK(t->value().dim() == 1 && t->value().size(0) == input.size(1), op,
                  ": expected a tensor of size [", input.size(1), "] for each per-channel argument, got ",
                  t->value().sizes());
      check_same_device(op, input.device(), {&t->value()});
    }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_impl(
    const char* op, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  check_channels(op, input, {&weight, &bias, &running_mean, &running_var});
  TORCH_CHECK(training || (defined(running_mean) && defined(running_var)), op,
              ": running_mean and running_var must be defined in evaluation mode");
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), op, ": expected a floating point input, got ",
              input.scalar_type());
  Kernel k(op, input);
  Builder& b = k.b();
  const at::ScalarType ct = acc_type(input.scalar_type()), st = param_type(input, {&weight, &bias, &running_mean});
  const DType c = to_ir(ct);
  Value x = k.in(input, ct);
  const ir::Dims d = b.dims(x);
  const auto red = non_channel_dims(input);
  const double n = static_cast<double>(input.numel() / std::max<int64_t>(input.size(1), 1));
  Value mean, invstd, var_sum;
  if (training) {
    mean = b.div(b.reduce_sum(x, red), b.constant(c, n));
    Value xc = b.sub(x, per_channel(b, mean, d));
    var_sum = b.reduce_sum(b.mul(xc, xc), red);
    invstd = b.rsqrt(b.add(b.div(var_sum, b.constant(c, n)), b.constant(c, eps, b.dims(var_sum))));
  } else {
    mean = k.in(*running_mean, ct);
    invstd = b.rsqrt(b.add(k.in(*running_var, ct), b.constant(c, eps, {input.size(1)})));
  }
  // As the CPU: the batch stats are stored in the stats dtype and read back,
  // and y = x * alpha + beta with alpha = invstd * weight, beta = bias - mean * alpha.
  auto stored = [&](Value v) { return training ? b.convert(b.convert(v, to_ir(st)), c) : v; };
  Value alpha = stored(invstd);
  if (defined(weight)) alpha = b.mul(alpha, k.in(*weight, ct));
  Value beta = b.neg(b.mul(stored(mean), alpha));
  if (defined(bias)) beta = b.add(k.in(*bias, ct), beta);
  Value y = b.add(b.mul(x, per_channel(b, alpha, d)), per_channel(b, beta, d));
  at::Tensor out = k.out(y, input.scalar_type());
  at::Tensor save_mean, save_invstd;
  if (training) {
    save_mean = k.out(mean, st);
    save_invstd = k.out(invstd, st);
    // Momentum is an argument, not structure: momentum=None makes it change
    // every step.
    Value m = b.broadcast_to(k.scalar(momentum, ct), {input.size(1)});
    Value keep = b.sub(b.constant(c, 1, {input.size(1)}), m);
    if (defined(running_mean))
      k.into(*running_mean, b.add(b.mul(k.in(*running_mean, ct), keep), b.mul(mean, m)));
    if (defined(running_var)) {
      Value unbiased = b.div(var_sum, b.constant(c, n - 1, b.dims(var_sum)));
      k.into(*running_var, b.add(b.mul(k.in(*running_var, ct), keep), b.mul(unbiased, m)));
    }
  } else {
    save_mean = empty_device({0}, st, input.device().index());
    save_invstd = empty_device({0}, st, input.device().index());
  }
  k.run();
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_impl(
    const char* op, const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> mask) {
  // In eval mode the saved stats are the forward's empty tensors.
  check_channels(op, input, {&weight, &running_mean, &running_var});
  if (train) check_channels(op, input, {&save_mean, &save_invstd});
  check_same_device(op, input.device(), {&grad_out});
  TORCH_CHECK(train ? defined(save_mean) && defined(save_invstd) : defined(running_mean) && defined(running_var), op,
              train ? ": save_mean and save_invstd must be defined in training mode"
                    : ": running_mean and running_var must be defined in evaluation mode");
  Kernel k(op, input);
  Builder& b = k.b();
  const at::ScalarType ct = acc_type(input.scalar_type()), st = param_type(input, {&weight, &running_mean});
  const DType c = to_ir(ct);
  Value x = k.in(input, ct), g = k.in(grad_out, ct);
  const ir::Dims d = b.dims(x);
  const auto red = non_channel_dims(input);
  const double n = static_cast<double>(input.numel() / std::max<int64_t>(input.size(1), 1));
  Value mean = train ? k.in(*save_mean, ct) : k.in(*running_mean, ct);
  Value invstd = train ? k.in(*save_invstd, ct)
                       : b.rsqrt(b.add(k.in(*running_var, ct), b.constant(c, eps, {input.size(1)})));
  // The CPU's formulas: dot = sum(g * (x - mean)); grad_weight = dot * invstd;
  // in training dx = (g - sum(g) / n - (x - mean) * dot * invstd^2 / n) * invstd * weight.
  Value xc = b.sub(x, per_channel(b, mean, d));
  Value sum_g = b.reduce_sum(g, red), dot = b.reduce_sum(b.mul(g, xc), red);
  at::Tensor gi, gw, gb;
  if (mask[0]) {
    Value scale = defined(weight) ? b.mul(invstd, k.in(*weight, ct)) : invstd;
    Value gx = g;
    if (train) {
      Value cn = b.constant(c, n, {input.size(1)});
      Value proj = b.div(b.mul(b.mul(dot, invstd), invstd), cn);
      gx = b.sub(b.sub(g, per_channel(b, b.div(sum_g, cn), d)), b.mul(xc, per_channel(b, proj, d)));
    }
    gi = k.out(b.mul(gx, per_channel(b, scale, d)), input.scalar_type());
  }
  if (mask[1]) gw = k.out(b.mul(dot, invstd), defined(weight) ? weight->scalar_type() : st);
  if (mask[2]) gb = k.out(sum_g, defined(weight) ? weight->scalar_type() : st);
  k.run();
  return {gi, gw, gb};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, bool training,
    double momentum, double eps) {
  TPU_COUNT("aten::native_batch_norm");
  return batch_norm_impl("aten::native_batch_norm", input, weight, bias, running_mean, running_var, training,
                         momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> legit(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                                     const std::optional<at::Tensor>& bias, at::Tensor& running_mean,
                                                     at::Tensor& running_var, bool training, double momentum,
                                                     double eps) {
  TPU_COUNT("aten::_native_batch_norm_legit");
  return batch_norm_impl("aten::_native_batch_norm_legit", input, weight, bias, running_mean, running_var, training,
                         momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> legit_no_stats(const at::Tensor& input,
                                                              const std::optional<at::Tensor>& weight,
                                                              const std::optional<at::Tensor>& bias, bool training,
                                                              double momentum, double eps) {
  TPU_COUNT("aten::_native_batch_norm_legit.no_stats");
  return batch_norm_impl("aten::_native_batch_norm_legit.no_stats", input, weight, bias, std::nullopt, std::nullopt,
                         training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> legit_no_training(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const at::Tensor& running_mean, const at::Tensor& running_var, double momentum, double eps) {
  TPU_COUNT("aten::_native_batch_norm_legit_no_training");
  return batch_norm_impl("aten::_native_batch_norm_legit_no_training", input, weight, bias, running_mean,
                         running_var, false, momentum, eps);
}

// out= forms: the functional results written into the given tensors.
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> assign_outs(std::tuple<at::Tensor, at::Tensor, at::Tensor> r,
                                                              at::Tensor& out, at::Tensor& mean, at::Tensor& invstd) {
  at::Tensor* dst[] = {&out, &mean, &invstd};
  const at::Tensor src[] = {std::get<0>(r), std::get<1>(r), std::get<2>(r)};
  for (int i = 0; i < 3; ++i) {
    if (dst[i]->sizes() != src[i].sizes()) dst[i]->resize_(src[i].sizes());
    dst[i]->copy_(src[i]);
  }
  return {out, mean, invstd};
}
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> native_batch_norm_out(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, bool training,
    double momentum, double eps, at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  TPU_COUNT("aten::native_batch_norm.out");
  return assign_outs(batch_norm_impl("aten::native_batch_norm.out", input, weight, bias, running_mean, running_var,
                                     training, momentum, eps),
                     out, save_mean, save_invstd);
}
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> legit_out(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, bool training, double momentum, double eps, at::Tensor& out,
    at::Tensor& save_mean, at::Tensor& save_invstd) {
  TPU_COUNT("aten::_native_batch_norm_legit.out");
  return assign_outs(batch_norm_impl("aten::_native_batch_norm_legit.out", input, weight, bias, running_mean,
                                     running_var, training, momentum, eps),
                     out, save_mean, save_invstd);
}
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> legit_no_stats_out(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    bool training, double momentum, double eps, at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  TPU_COUNT("aten::_native_batch_norm_legit.no_stats_out");
  return assign_outs(batch_norm_impl("aten::_native_batch_norm_legit.no_stats_out", input, weight, bias, std::nullopt,
                                     std::nullopt, training, momentum, eps),
                     out, save_mean, save_invstd);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> with_update(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, double momentum, double eps) {
  TPU_COUNT("aten::_batch_norm_with_update");
  auto [out, mean, invstd] = batch_norm_impl("aten::_batch_norm_with_update", input, weight, bias, running_mean,
                                             running_var, true, momentum, eps);
  return {out, mean, invstd, empty_device({0}, at::kByte, input.device().index())};
}

// PyTorch's own kernel for this composite calls the CPU implementation.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> no_update(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, double momentum,
    double eps) {
  TPU_COUNT("aten::_batch_norm_no_update");
  auto [out, mean, invstd] = batch_norm_impl("aten::_batch_norm_no_update", input, weight, bias, running_mean,
                                             running_var, false, momentum, eps);
  return {out, mean, invstd, empty_device({0}, at::kByte, input.device().index())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> mask) {
  TPU_COUNT("aten::native_batch_norm_backward");
  return batch_norm_backward_impl("aten::native_batch_norm_backward", grad_out, input, weight, running_mean,
                                  running_var, save_mean, save_invstd, train, eps, mask);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_var, bool update, double eps,
    std::array<bool, 3> mask, const at::Tensor& reserve) {
  TPU_COUNT("aten::batch_norm_backward");
  return batch_norm_backward_impl("aten::batch_norm_backward", grad_out, input, weight, running_mean, running_var,
                                  save_mean, save_var, update, eps, mask);
}

// Group norm of [N, C, *] in `group` groups, as the CPU kernel: statistics
// and the affine transform in float32 for 16-bit inputs, rounded once (the
// composite kernel would round the normalized value before the affine step);
// mean and rstd are [N, group].
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    int64_t n, int64_t channels, int64_t hw, int64_t group, double eps) {
  TPU_COUNT("aten::native_group_norm");
  const char* op = "aten::native_group_norm";
  TORCH_CHECK(group > 0 && channels % group == 0, op, ": expected the number of channels (", channels,
              ") to be divisible by the number of groups (", group, ")");
  TORCH_CHECK(input.dim() >= 2 && input.size(1) == channels && input.numel() == n * channels * hw, op,
              ": expected an input of ", n, " x ", channels, " x ", hw, " elements, got ", input.sizes());
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), op, ": expected a floating point input, got ",
              input.scalar_type());
  check_channels(op, input, {&weight, &bias});
  Kernel k(op, input);
  Builder& b = k.b();
  const at::ScalarType ct = acc_type(input.scalar_type()), st = param_type(input, {&weight, &bias});
  const DType c = to_ir(ct);
  const ir::Dims g3{n, group, channels / group * hw}, c3{n, channels, hw};
  Value x = b.reshape(k.in(input, ct), g3);
  const double count = static_cast<double>(g3[2]);
  Value mean = b.div(b.reduce_sum(x, {2}), b.constant(c, count, {n, group}));
  Value xc = b.sub(x, b.broadcast_in_dim(mean, g3, {0, 1}));
  Value var = b.div(b.reduce_sum(b.mul(xc, xc), {2}), b.constant(c, count, {n, group}));
  Value rstd = b.rsqrt(b.add(var, b.constant(c, eps, {n, group})));
  // As the CPU's kernel: y = x * scale + shift per (sample, channel), with
  // scale = rstd * weight and shift = bias - scale * mean (so infinite
  // weights give the CPU's NaNs and infinities).
  const ir::Dims nc{n, channels};
  const int64_t per = channels / group;
  auto per_channel = [&](Value v) {  // [n, group] -> [n, channels]
    return b.reshape(b.broadcast_in_dim(v, {n, group, per}, {0, 1}), nc);
  };
  Value scale = per_channel(rstd);
  if (defined(weight)) scale = b.mul(scale, b.broadcast_in_dim(k.in(*weight, ct), nc, {1}));
  Value shift = b.neg(b.mul(scale, per_channel(mean)));
  if (defined(bias)) shift = b.add(shift, b.broadcast_in_dim(k.in(*bias, ct), nc, {1}));
  Value y = b.add(b.mul(b.reshape(x, c3), b.broadcast_in_dim(scale, c3, {0, 1})), b.broadcast_in_dim(shift, c3, {0, 1}));
  at::Tensor out = k.out(b.reshape(y, to_dims(input.sizes())), input.scalar_type());
  at::Tensor mean_t = k.out(mean, st), rstd_t = k.out(rstd, st);
  k.run();
  return {out, mean_t, rstd_t};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_group_norm", TORCH_FN(native_group_norm));
  m.impl("native_batch_norm", TORCH_FN(native_batch_norm));
  m.impl("native_batch_norm.out", TORCH_FN(native_batch_norm_out));
  m.impl("native_batch_norm_backward", TORCH_FN(native_batch_norm_backward));
  m.impl("_native_batch_norm_legit", TORCH_FN(legit));
  m.impl("_native_batch_norm_legit.no_stats", TORCH_FN(legit_no_stats));
  m.impl("_native_batch_norm_legit.out", TORCH_FN(legit_out));
  m.impl("_native_batch_norm_legit.no_stats_out", TORCH_FN(legit_no_stats_out));
  m.impl("_native_batch_norm_legit_no_training", TORCH_FN(legit_no_training));
  m.impl("_batch_norm_with_update", TORCH_FN(with_update));
  m.impl("_batch_norm_no_update", TORCH_FN(no_update));
  m.impl("batch_norm_backward", TORCH_FN(batch_norm_backward));
}

}  // namespace torchtpu::aten
