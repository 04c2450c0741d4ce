// Group norm's backward (native_group_norm_backward), as PyTorch's CPU
// kernel computes it, in float32 for 16-bit inputs: per (sample, channel)
// ds = sum(dY * X) and db = sum(dY); per (sample, group) the input gradient
// dX = rstd * gamma * dY + c2 * X + c3 with
//   c2 = (sum_g(db * gamma) * mean - sum_g(ds * gamma)) * rstd^3 / (D * HxW),
//   c3 = -c2 * mean - sum_g(db * gamma) * rstd / (D * HxW);
// dgamma = sum_n (ds - db * mean) * rstd and dbeta = sum_n db.
// (The forward, native_group_norm, is in kernels_norm.cpp.)

#include "aten/registry.h"
#include "aten/opmath.h"
#include "aten/tensor_ir.h"

namespace torchtpu::aten {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& rstd,
    const std::optional<at::Tensor>& weight, int64_t n, int64_t channels, int64_t hw, int64_t group,
    std::array<bool, 3> mask) {
  const char* op = "aten::native_group_norm_backward";
  const bool has_w = weight && weight->defined();
  TORCH_CHECK(group > 0 && channels % group == 0, op, ": expected the number of channels (", channels,
              ") to be divisible by the number of groups (", group, ")");
  TORCH_CHECK(input.numel() == n * channels * hw && grad_out.sizes() == input.sizes(), op,
              ": expected grad_output and input of ", n, " x ", channels, " x ", hw, " elements, got ",
              grad_out.sizes(), " and ", input.sizes());
  TORCH_CHECK(mean.numel() == n * group && rstd.numel() == n * group, op, ": expected mean and rstd of ", n, " x ",
              group, " elements, got ", mean.sizes(), " and ", rstd.sizes());
  TORCH_CHECK(!has_w || weight->numel() == channels, op, ": expected weight of ", channels, " elements, got ",
              weight->sizes());
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), op, ": expected a floating point input, got ",
              input.scalar_type());
  const at::ScalarType st = input.scalar_type(), ct = opmath(st);
  const at::ScalarType wt = has_w ? weight->scalar_type() : st;
  at::Tensor gi, gw, gb;
  const int64_t d = channels / group;
  if (input.numel() == 0) {
    // No element: zero parameter gradients (the input gradient is empty).
    Kernel k(op, input);
    Builder& b = k.b();
    if (mask[0]) gi = k.out(b.constant(to_ir(st), 0, to_dims(input.sizes())), st);
    if (mask[1] && has_w) gw = k.out(b.constant(to_ir(wt), 0, {channels}), wt);
    if (mask[2] && has_w) gb = k.out(b.constant(to_ir(wt), 0, {channels}), wt);
    k.run();
    return {gi, gw, gb};
  }
  Kernel k(op, input);
  Builder& b = k.b();
  const DType c = to_ir(ct);
  const ir::Dims x3{n, channels, hw}, g3{n, group, d}, ng{n, group}, nc{n, channels};
  Value x = b.reshape(k.in(input, ct), x3), dy = b.reshape(k.in(grad_out, ct), x3);
  Value mu = b.reshape(k.in(mean, ct), ng), rs = b.reshape(k.in(rstd, ct), ng);
  Value ds = b.reduce_sum(b.mul(dy, x), {2}), db = b.reduce_sum(dy, {2});  // [n, channels]
  Value gamma = has_w ? b.broadcast_in_dim(k.in(*weight, ct), nc, {1}) : Value{};
  auto per_channel = [&](Value v) { return b.reshape(b.broadcast_in_dim(v, g3, {0, 1}), nc); };  // [n, g] -> [n, c]
  if (mask[0]) {
    Value dsg = has_w ? b.mul(ds, gamma) : ds, dbg = has_w ? b.mul(db, gamma) : db;
    Value sum_ds = b.reduce_sum(b.reshape(dsg, g3), {2}), sum_db = b.reduce_sum(b.reshape(dbg, g3), {2});
    Value s = b.div(b.constant(c, 1, ng), b.broadcast_to(k.scalar(static_cast<double>(d * hw), ct), ng));
    Value c2 = b.mul(b.mul(b.mul(b.mul(b.sub(b.mul(sum_db, mu), sum_ds), rs), rs), rs), s);
    Value c3 = b.sub(b.mul(b.neg(c2), mu), b.mul(b.mul(sum_db, rs), s));
    Value c1 = per_channel(rs);
    if (has_w) c1 = b.mul(c1, gamma);
    Value dx = b.add(b.add(b.mul(b.broadcast_in_dim(c1, x3, {0, 1}), dy),
                           b.mul(b.broadcast_in_dim(per_channel(c2), x3, {0, 1}), x)),
                     b.broadcast_in_dim(per_channel(c3), x3, {0, 1}));
    gi = k.out(b.reshape(dx, to_dims(input.sizes())), st);
  }
  if (mask[1]) {
    Value t = b.mul(b.sub(ds, b.mul(db, per_channel(mu))), per_channel(rs));
    gw = k.out(b.reduce_sum(t, {0}), wt);
  }
  if (mask[2]) gb = k.out(b.reduce_sum(db, {0}), wt);
  k.run();
  return {gi, gw, gb};
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("native_group_norm_backward", TORCH_FN(native_group_norm_backward));
}

}  // namespace torchtpu::aten
