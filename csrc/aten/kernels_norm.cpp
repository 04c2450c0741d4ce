// Batch norm over dim 1 of [N, C, *]: native_batch_norm (what eager
// nn.BatchNorm dispatches to, train and eval), the _native_batch_norm_legit
// and _batch_norm_with/no_update forms that decompositions and export use,
// and their backward. Training normalizes with the biased batch variance and
// updates running_mean / running_var in place with momentum (unbiased
// variance), as the CPU does; eval uses the running stats. save_mean /
// save_invstd are the batch stats in training and empty in eval. Also group
// norm (native_group_norm).

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "ops/norm.h"

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

void check_channels(const char* op, const at::Tensor& input, std::initializer_list<const std::optional<at::Tensor>*> ts) {
  TORCH_CHECK(input.dim() >= 2, op, ": expected an input with at least 2 dims, got ", input.sizes());
  for (const auto* t : ts)
    if (defined(*t)) {
      TORCH_CHECK(t->value().dim() == 1 && t->value().size(0) == input.size(1), op,
                  ": expected a tensor of size [", input.size(1), "] for each per-channel argument, got ",
                  t->value().sizes());
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
  const at::ScalarType ct = acc_type(input.scalar_type()), st = param_type(input, {&weight, &bias, &running_mean});
  auto in = [&](const std::optional<at::Tensor>& t) { return defined(t) ? k.in(*t, ct) : Value{}; };
  Value momentum_v = training ? k.scalar(momentum, ct) : Value{};
  ops::BatchNorm r = ops::batch_norm(k.b(), k.in(input, ct), in(weight), in(bias), in(running_mean), in(running_var),
                                     training, momentum_v, eps, to_ir(st));
  at::Tensor out = k.out(r.y, input.scalar_type());
  at::Tensor save_mean, save_invstd;
  if (training) {
    save_mean = k.out(r.mean, st);
    save_invstd = k.out(r.invstd, st);
    if (r.running_mean.valid()) k.into(*running_mean, r.running_mean);
    if (r.running_var.valid()) k.into(*running_var, r.running_var);
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
  TORCH_CHECK(train ? defined(save_mean) && defined(save_invstd) : defined(running_mean) && defined(running_var), op,
              train ? ": save_mean and save_invstd must be defined in training mode"
                    : ": running_mean and running_var must be defined in evaluation mode");
  Kernel k(op, input);
  Builder& b = k.b();
  const at::ScalarType ct = acc_type(input.scalar_type()), st = param_type(input, {&weight, &running_mean});
  Value mean = train ? k.in(*save_mean, ct) : k.in(*running_mean, ct);
  Value invstd = train ? k.in(*save_invstd, ct) : ops::inverse_std(b, k.in(*running_var, ct), eps);
  ops::NormGrads r = ops::batch_norm_backward(b, k.in(grad_out, ct), k.in(input, ct),
                                              defined(weight) ? k.in(*weight, ct) : Value{}, mean, invstd, train, mask);
  const at::ScalarType pt = defined(weight) ? weight->scalar_type() : st;
  at::Tensor gi, gw, gb;
  if (r.input.valid()) gi = k.out(r.input, input.scalar_type());
  if (r.weight.valid()) gw = k.out(r.weight, pt);
  if (r.bias.valid()) gb = k.out(r.bias, pt);
  k.run();
  return {gi, gw, gb};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, bool training,
    double momentum, double eps) {
  return batch_norm_impl("aten::native_batch_norm", input, weight, bias, running_mean, running_var, training,
                         momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> legit(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                                     const std::optional<at::Tensor>& bias, at::Tensor& running_mean,
                                                     at::Tensor& running_var, bool training, double momentum,
                                                     double eps) {
  return batch_norm_impl("aten::_native_batch_norm_legit", input, weight, bias, running_mean, running_var, training,
                         momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> legit_no_stats(const at::Tensor& input,
                                                              const std::optional<at::Tensor>& weight,
                                                              const std::optional<at::Tensor>& bias, bool training,
                                                              double momentum, double eps) {
  return batch_norm_impl("aten::_native_batch_norm_legit.no_stats", input, weight, bias, std::nullopt, std::nullopt,
                         training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> legit_no_training(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const at::Tensor& running_mean, const at::Tensor& running_var, double momentum, double eps) {
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
  return assign_outs(batch_norm_impl("aten::native_batch_norm.out", input, weight, bias, running_mean, running_var,
                                     training, momentum, eps),
                     out, save_mean, save_invstd);
}
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> legit_out(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, bool training, double momentum, double eps, at::Tensor& out,
    at::Tensor& save_mean, at::Tensor& save_invstd) {
  return assign_outs(batch_norm_impl("aten::_native_batch_norm_legit.out", input, weight, bias, running_mean,
                                     running_var, training, momentum, eps),
                     out, save_mean, save_invstd);
}
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> legit_no_stats_out(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    bool training, double momentum, double eps, at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  return assign_outs(batch_norm_impl("aten::_native_batch_norm_legit.no_stats_out", input, weight, bias, std::nullopt,
                                     std::nullopt, training, momentum, eps),
                     out, save_mean, save_invstd);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> with_update(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, double momentum, double eps) {
  auto [out, mean, invstd] = batch_norm_impl("aten::_batch_norm_with_update", input, weight, bias, running_mean,
                                             running_var, true, momentum, eps);
  return {out, mean, invstd, empty_device({0}, at::kByte, input.device().index())};
}

// PyTorch's own kernel for this composite calls the CPU implementation.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> no_update(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, double momentum,
    double eps) {
  auto [out, mean, invstd] = batch_norm_impl("aten::_batch_norm_no_update", input, weight, bias, running_mean,
                                             running_var, false, momentum, eps);
  return {out, mean, invstd, empty_device({0}, at::kByte, input.device().index())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> mask) {
  return batch_norm_backward_impl("aten::native_batch_norm_backward", grad_out, input, weight, running_mean,
                                  running_var, save_mean, save_invstd, train, eps, mask);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_var, bool update, double eps,
    std::array<bool, 3> mask, const at::Tensor& reserve) {
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
  auto in = [&](const std::optional<at::Tensor>& t) { return defined(t) ? k.in(*t, ct) : Value{}; };
  Value x = b.reshape(k.in(input, ct), {n, channels, hw});
  ops::Normalized r = ops::group_norm(b, x, group, in(weight), in(bias), eps);
  at::Tensor out = k.out(b.reshape(r.y, to_dims(input.sizes())), input.scalar_type());
  at::Tensor mean_t = k.out(r.mean, st), rstd_t = k.out(r.rstd, st);
  k.run();
  return {out, mean_t, rstd_t};
}

}  // namespace

TPU_KERNELS(m) {
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
