// Ops that read class indices: embedding backward and nll_loss (1-D/2-D and
// 2d), with a device-side check of the targets.

#include "aten/registry.h"
#include "aten/opmath.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

at::Tensor embedding_dense_backward(const at::Tensor& grad, const at::Tensor& indices, int64_t num_weights,
                                    int64_t padding_idx, bool scale_grad_by_freq) {
  Kernel k("aten::embedding_dense_backward", grad);
  Builder& b = k.b();
  const int64_t m = indices.numel(), d = grad.size(-1);
  Value g = b.reshape(k.in(grad), {m, d});
  Value idx = b.reshape(k.in(indices, at::kLong), {m});
  DType gt = to_ir(grad.scalar_type());
  if (padding_idx >= 0) {
    Value keep = b.compare(idx, b.constant(DType::kS64, static_cast<double>(padding_idx), {m}), Cmp::kNE);
    g = b.select(b.broadcast_in_dim(keep, {m, d}, {0}), g, b.zeros_like(g));
  }
  Value tuples = b.reshape(idx, {m, 1});
  if (scale_grad_by_freq) {
    Value counts = b.scatter(b.constant(gt, 0, {num_weights}), tuples, b.constant(gt, 1, {m}), {0}, {}, ir::Body::kAdd);
    Value per = b.gather(counts, tuples, {0}, {}, {m});
    g = b.div(g, b.broadcast_in_dim(per, {m, d}, {0}));
  }
  Value r = b.scatter(b.constant(gt, 0, {num_weights, d}), tuples, g, {0}, {1}, ir::Body::kAdd);
  at::Tensor out = k.out(r, grad.scalar_type());
  k.run();
  return out;
}

struct NllParts {
  Value onehot;    // [N, C] bool
  Value weight_t;  // [N] weight of each target (0 where ignored)
  Value valid;     // [N] bool: the target is not ignore_index
};

// `check`: raise (Kernel::check) for targets outside [0, C) that are not
// ignore_index (the forward op checks; its backward reads the same targets).
NllParts nll_parts(Kernel& k, const at::Tensor& self2d, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                   int64_t ignore_index, at::ScalarType ct, bool check) {
  Builder& b = k.b();
  const int64_t n = self2d.size(0), c = self2d.size(1);
  TORCH_CHECK(target.scalar_type() == at::kLong, "nll_loss: expected target of dtype Long (int64), but got ",
              target.scalar_type());
  Value t = b.reshape(k.in(target, at::kLong), {n});
  Value ignored = b.compare(t, b.constant(DType::kS64, static_cast<double>(ignore_index), {n}), Cmp::kEQ);
  Value outside = b.logical_or(b.compare(t, b.zeros_like(t), Cmp::kLT),
                               b.compare(t, b.constant(DType::kS64, static_cast<double>(c), {n}), Cmp::kGE));
  if (check)
    k.check(b.logical_and(outside, b.logical_not(ignored)), Kernel::CheckKind::kIndex,
          "Target out of bounds (targets must lie in [0, " + std::to_string(c) + ") or equal ignore_index " +
              std::to_string(ignore_index) + ")");
  Value cls = b.iota(DType::kS64, {n, c}, 1);
  NllParts p;
  p.onehot = b.compare(cls, b.broadcast_in_dim(t, {n, c}, {0}), Cmp::kEQ);
  Value valid = b.compare(t, b.constant(DType::kS64, static_cast<double>(ignore_index), {n}), Cmp::kNE);
  Value w;
  if (weight && weight->defined()) {
    Value wv = b.broadcast_in_dim(k.in(*weight, ct), {n, c}, {1});
    w = b.reduce_sum(b.select(p.onehot, wv, b.constant(to_ir(ct), 0, {n, c})), {1});
  } else {
    w = b.constant(to_ir(ct), 1, {n});
  }
  p.weight_t = b.select(valid, w, b.constant(to_ir(ct), 0, {n}));
  p.valid = valid;
  return p;
}

at::Tensor as_2d(const at::Tensor& self) { return self.dim() == 1 ? self.unsqueeze(0) : self; }

std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor& self, const at::Tensor& target,
                                                    const std::optional<at::Tensor>& weight, int64_t reduction,
                                                    int64_t ignore_index) {
  TORCH_CHECK(self.dim() >= 1 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  TORCH_CHECK(self.dim() == 1 || self.size(0) == target.size(0), "size mismatch (got input: ", self.sizes(),
              ", target: ", target.sizes(), ")");
  at::Tensor s2 = as_2d(self);
  // 16-bit losses and weights are summed in float32 and rounded once (as
  // CUDA's kernel does; the CPU's 16-bit cascade sum is less accurate).
  at::ScalarType ct = opmath(self.scalar_type());
  Kernel k("aten::nll_loss_forward", self);
  Builder& b = k.b();
  const int64_t n = s2.size(0), c = s2.size(1);
  NllParts p = nll_parts(k, s2, target, weight, ignore_index, ct, true);
  Value x = k.in(s2, ct);
  Value picked = b.reduce_sum(b.select(p.onehot, x, b.constant(to_ir(ct), 0, {n, c})), {1});
  // An ignored row adds exactly 0 (its input may be NaN or infinite).
  Value loss = b.select(p.valid, b.neg(b.mul(picked, p.weight_t)), b.constant(to_ir(ct), 0, {n}));
  Value total = b.reduce_sum(p.weight_t, {0});
  Value out;
  if (reduction == at::Reduction::None) {
    out = self.dim() == 1 ? b.reshape(loss, {}) : loss;
  } else if (reduction == at::Reduction::Sum) {
    out = b.reduce_sum(loss, {0});
  } else {
    out = b.div(b.reduce_sum(loss, {0}), total);
  }
  at::Tensor o = k.out(out, self.scalar_type());
  at::Tensor tw = k.out(total, self.scalar_type());
  k.run();
  return {o, tw};
}

at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                             const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight) {
  at::Tensor s2 = as_2d(self);
  at::ScalarType ct = self.scalar_type();
  Kernel k("aten::nll_loss_backward", self);
  Builder& b = k.b();
  const int64_t n = s2.size(0), c = s2.size(1);
  NllParts p = nll_parts(k, s2, target, weight, ignore_index, ct, false);
  Value g = k.in(grad_output, ct);
  Value per;  // [N]
  if (reduction == at::Reduction::None) {
    per = b.mul(b.reshape(g, {n}), p.weight_t);
  } else {
    Value scale = reduction == at::Reduction::Mean ? b.div(g, k.in(total_weight, ct)) : g;
    per = b.mul(b.broadcast_to(scale, {n}), p.weight_t);
    // An ignored row gets exactly 0, also when every row is ignored (the
    // scale is then g / 0).
    per = b.select(p.valid, per, b.zeros_like(per));
  }
  Value gi = b.select(p.onehot, b.neg(b.broadcast_in_dim(per, {n, c}, {0})), b.constant(to_ir(ct), 0, {n, c}));
  if (self.dim() == 1) gi = b.reshape(gi, {c});
  at::Tensor out = k.out(gi, ct);
  k.run();
  return out;
}

// nll_loss2d: input [N, C, d...], target [N, d...], as nll_loss over N*prod(d) rows.
at::Tensor rows_of(const at::Tensor& self) {
  std::vector<int64_t> perm{0};
  for (int64_t i = 2; i < self.dim(); ++i) perm.push_back(i);
  perm.push_back(1);
  return self.permute(perm).reshape({-1, self.size(1)});
}

std::tuple<at::Tensor, at::Tensor> nll_loss2d_forward(const at::Tensor& self, const at::Tensor& target,
                                                      const std::optional<at::Tensor>& weight, int64_t reduction,
                                                      int64_t ignore_index) {
  TORCH_CHECK(self.dim() == 4 && target.dim() == 3, "nll_loss2d: expected 4D input and 3D target, got ",
              self.sizes(), " and ", target.sizes());
  auto [out, total] =
      aten::nll_loss_forward(rows_of(self), target.reshape({-1}), weight, reduction, ignore_index);
  if (reduction == at::Reduction::None) out = out.view(target.sizes());
  return std::make_tuple(out, total);
}

at::Tensor nll_loss2d_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                               const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                               const at::Tensor& total_weight) {
  at::Tensor g = reduction == at::Reduction::None ? grad_output.reshape({-1}) : grad_output;
  at::Tensor rows = aten::nll_loss_backward(g, rows_of(self), target.reshape({-1}), weight, reduction,
                                            ignore_index, total_weight);
  std::vector<int64_t> shape{self.size(0)};
  for (int64_t i = 2; i < self.dim(); ++i) shape.push_back(self.size(i));
  shape.push_back(self.size(1));
  std::vector<int64_t> perm{0, self.dim() - 1};
  for (int64_t i = 1; i < self.dim() - 1; ++i) perm.push_back(i);
  return rows.view(shape).permute(perm).contiguous();
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));
  m.impl("nll_loss_forward", TORCH_FN(nll_loss_forward));
  m.impl("nll_loss_backward", TORCH_FN(nll_loss_backward));
  m.impl("nll_loss2d_forward", TORCH_FN(nll_loss2d_forward));
  m.impl("nll_loss2d_backward", TORCH_FN(nll_loss2d_backward));
}

}  // namespace torchtpu::aten
