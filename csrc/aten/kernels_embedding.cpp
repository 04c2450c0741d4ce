// embedding_renorm_ (nn.functional.embedding with max_norm): the rows of the
// weight named by `indices` whose p-norm exceeds max_norm are scaled by
// max_norm / (norm + 1e-7) in place, as PyTorch's CPU kernel does; norms and
// the scaling in float32 for 16-bit weights. And embedding_bag (sum, mean,
// max; per-sample weights, padding_idx, include_last_offset) with its
// backward: rows gathered, then scattered into their bags.

#include <cmath>
#include <limits>

#include "aten/registry.h"
#include "aten/opmath.h"
#include "aten/tensor_ir.h"
#include "ops/scan.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

at::Tensor& embedding_renorm_(at::Tensor& self, const at::Tensor& indices, double max_norm, double norm_type) {
  const char* op = "aten::embedding_renorm_";
  TORCH_CHECK(self.dim() == 2, "Expected 2-dimensional tensor, but got ", self.dim(),
              "-dimensional tensor for argument #1 'self' (while checking arguments for embedding_renorm_)");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "Expected tensor for argument #2 'indices' to have one of the following scalar types: Long, Int; but "
              "got ", indices.scalar_type(), " instead (while checking arguments for embedding_renorm_)");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), op, ": expected a floating point weight, got ",
              self.scalar_type());
  if (indices.numel() == 0 || self.numel() == 0) return self;
  Kernel k(op, self);
  Builder& b = k.b();
  const at::ScalarType ct = opmath(self.scalar_type());
  const DType c = to_ir(ct);
  const int64_t rows = self.size(0), cols = self.size(1), n = indices.numel();
  Value idx = b.reshape(k.in(indices, at::kLong), {n});
  check_index(k, idx, rows, /*allow_negative=*/true, Kernel::CheckKind::kIndex,
              "index out of range in self (embedding_renorm_)");
  idx = b.select(b.compare(idx, b.constant(DType::kS64, 0), Cmp::kLT),
                 b.add(idx, b.constant(DType::kS64, static_cast<double>(rows))), idx);
  // used[r]: some index names row r.
  const ir::Dims rn{rows, n};
  Value hit = b.compare(b.iota(DType::kS64, rn, 0), b.broadcast_in_dim(idx, rn, {1}), Cmp::kEQ);
  Value used = b.compare(b.reduce_max(b.convert(hit, DType::kS32), {1}), b.constant(DType::kS32, 0), Cmp::kNE);
  Value w = k.in(self, ct);
  Value a = b.abs(w);
  Value norm;
  if (norm_type == 2) {
    norm = b.sqrt(b.reduce_sum(b.mul(w, w), {1}));
  } else if (norm_type == 1) {
    norm = b.reduce_sum(a, {1});
  } else if (std::isinf(norm_type) && norm_type > 0) {
    norm = b.reduce_max(a, {1});
  } else if (norm_type == 0) {
    norm = b.reduce_sum(b.convert(b.convert(b.compare(w, b.zeros_like(w), Cmp::kNE), DType::kS32), c), {1});
  } else {
    Value p = k.scalar(norm_type, ct);
    Value s = b.reduce_sum(b.pow(a, p), {1});
    norm = b.pow(s, b.div(b.constant(c, 1), p));
  }
  // The CPU reads the norm back from a tensor of the weight's dtype.
  norm = b.convert(b.convert(norm, to_ir(self.scalar_type())), c);
  Value mx = k.scalar(max_norm, ct);
  // row *= scale: the CPU rounds the scale to the weight's dtype first.
  Value scale = b.convert(b.convert(b.div(mx, b.add(norm, b.constant(c, 1e-7))), to_ir(self.scalar_type())), c);
  Value renorm = b.logical_and(used, b.compare(norm, mx, Cmp::kGT));
  const ir::Dims rc{rows, cols};
  Value r = b.select(b.broadcast_in_dim(renorm, rc, {0}), b.mul(w, b.broadcast_in_dim(scale, rc, {0})), w);
  k.into(self, r);
  k.run();
  return self;
}

// ---- embedding_bag ------------------------------------------------------------------------

enum BagMode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

// Per index: its bag (offsets[b] <= i < offsets[b + 1]) and whether it counts
// (not padding_idx).
struct Bags {
  Value idx;    // int64 [n], checked in range
  Value bag;    // int64 [n]
  Value valid;  // bool [n]
  Value count;  // int64 [B]: valid indices per bag
  int64_t n, nb;
};
Bags bags_of(Kernel& k, const at::Tensor& indices, const at::Tensor& offsets, int64_t num_weights,
             bool include_last_offset, int64_t padding_idx) {
  Builder& b = k.b();
  Bags r;
  r.n = indices.numel();
  r.nb = offsets.size(0) - (include_last_offset ? 1 : 0);
  r.idx = b.reshape(k.in(indices, at::kLong), {r.n});
  check_index(k, r.idx, num_weights, /*allow_negative=*/false, Kernel::CheckKind::kIndex,
              "embedding_bag: index out of range in self");
  Value off = b.slice_dim(k.in(offsets, at::kLong), 0, 0, r.nb);
  // Mark each bag's start (clamped to n), count marks up to each position.
  Value starts = b.min(b.max(off, b.constant(DType::kS64, 0, {r.nb})), b.constant(DType::kS64, r.n, {r.nb}));
  Value marks = b.scatter(b.constant(DType::kS64, 0, {r.n + 1}), b.reshape(starts, {r.nb, 1}),
                          b.constant(DType::kS64, 1, {r.nb}), {0}, {}, ir::Body::kAdd);
  Value run = b.slice_dim(ops::cumulative(b, marks, 0, false), 0, 0, r.n);
  r.bag = b.sub(run, b.constant(DType::kS64, 1, {r.n}));
  r.valid = padding_idx >= 0 ? b.compare(r.idx, b.constant(DType::kS64, static_cast<double>(padding_idx), {r.n}),
                                         Cmp::kNE)
                             : b.constant(DType::kBool, 1, {r.n});
  Value ok = b.logical_and(r.valid, b.compare(r.bag, b.constant(DType::kS64, 0, {r.n}), Cmp::kGE));
  r.valid = ok;
  r.count = b.scatter(b.constant(DType::kS64, 0, {r.nb}), b.reshape(b.max(r.bag, b.zeros_like(r.bag)), {r.n, 1}),
                      b.convert(ok, DType::kS64), {0}, {}, ir::Body::kAdd);
  return r;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag_impl(
    const char* op, const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets, int64_t mode,
    const std::optional<at::Tensor>& psw_opt, bool include_last_offset, int64_t padding_idx) {
  TORCH_CHECK(indices.dim() == 1, "input has to be a 1D or 2D Tensor, but got Tensor of dimension ", indices.dim());
  TORCH_CHECK(offsets.dim() == 1, "offsets has to be a 1D Tensor, but got Tensor of dimension ", offsets.dim());
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "expected indices to be Long or Int, got ", indices.scalar_type());
  TORCH_CHECK(weight.dim() == 2, "weight has to be a 2D Tensor, but got Tensor of dimension ", weight.dim());
  TORCH_CHECK(mode >= 0 && mode <= 2, "embedding_bag: unknown mode ", mode);
  const at::Tensor psw = psw_opt.value_or(at::Tensor());
  if (psw.defined()) {
    TORCH_CHECK(mode == kSum, "embedding_bag: per_sample_weights was not None. per_sample_weights is only ",
                "supported for mode='sum' (got mode='", mode == kMean ? "mean" : "max", "'). Please open a feature ",
                "request on GitHub.");
    TORCH_CHECK(psw.sizes() == indices.sizes(), "embedding_bag: per_sample_weights must have the shape of input");
  }
  TORCH_CHECK(!include_last_offset || offsets.size(0) >= 1,
              "include_last_offset: number of offset should be at least 1");
  const int64_t nw = weight.size(0), dim = weight.size(1);
  const int64_t nb = offsets.size(0) - (include_last_offset ? 1 : 0);
  const at::ScalarType st = weight.scalar_type(), ct = opmath(st);
  const DType c = to_ir(ct);
  Kernel k(op, weight);
  Builder& b = k.b();
  if (indices.numel() == 0 || nb == 0 || dim == 0) {
    at::Tensor out = k.out(b.constant(to_ir(st), 0, {nb, dim}), st);
    at::Tensor o2b = k.out(b.constant(DType::kS64, 0, {indices.numel()}), at::kLong);
    at::Tensor bs = k.out(b.constant(DType::kS64, 0, {nb}), at::kLong);
    at::Tensor mi = k.out(b.constant(DType::kS64, mode == kMax ? -1 : 0, mode == kMax ? ir::Dims{nb, dim} : ir::Dims{nb}),
                          at::kLong);
    k.run();
    return {out, o2b, bs, mi};
  }
  Bags g = bags_of(k, indices, offsets, nw, include_last_offset, padding_idx);
  const int64_t n = g.n;
  const ir::Dims nd{n, dim}, bd{nb, dim};
  Value w = k.in(weight, ct);
  Value safe = b.min(b.max(g.idx, b.zeros_like(g.idx)), b.constant(DType::kS64, nw - 1, {n}));
  Value rows = b.gather(w, b.reshape(safe, {n, 1}), {0}, {1}, nd);
  Value valid = b.broadcast_in_dim(g.valid, nd, {0});
  Value bag_idx = b.reshape(b.max(g.bag, b.zeros_like(g.bag)), {n, 1});
  Value out, maxi;
  if (mode == kMax) {
    // The CPU's running maximum: the bag's first valid row is taken as is,
    // later ones only when larger (so a NaN counts only when it comes first).
    Value lowest = b.constant(c, -std::numeric_limits<double>::infinity(), nd);
    Value is_nan = b.compare(rows, rows, Cmp::kNE);
    Value m = b.scatter(b.constant(c, -std::numeric_limits<double>::infinity(), bd), bag_idx,
                        b.select(b.logical_and(valid, b.logical_not(is_nan)), rows, lowest), {0}, {1}, ir::Body::kMax);
    Value iota_n = b.iota(DType::kS64, {n}, 0);
    Value first_valid = b.scatter(b.constant(DType::kS64, n, {nb}), bag_idx,
                                  b.select(g.valid, iota_n, b.constant(DType::kS64, n, {n})), {0}, {}, ir::Body::kMin);
    Value rows_ext = b.concatenate({rows, b.constant(c, 0, {1, dim})}, 0);
    Value first_row = b.gather(rows_ext, b.reshape(first_valid, {nb, 1}), {0}, {1}, bd);
    Value first_nan = b.compare(first_row, first_row, Cmp::kNE);
    m = b.select(first_nan, first_row, m);
    Value empty = b.broadcast_in_dim(b.compare(g.count, b.zeros_like(g.count), Cmp::kEQ), bd, {0});
    out = b.select(empty, b.constant(c, 0, bd), m);
    // The first position of each bag holding its maximum (the CPU keeps the
    // first of equal values), and that position's index.
    Value hit = b.logical_and(valid, b.compare(rows, b.gather(m, bag_idx, {0}, {1}, nd), Cmp::kEQ));
    Value pos = b.select(hit, b.broadcast_in_dim(iota_n, nd, {0}), b.constant(DType::kS64, n, nd));
    Value first = b.scatter(b.constant(DType::kS64, n, bd), bag_idx, pos, {0}, {1}, ir::Body::kMin);
    first = b.select(first_nan, b.broadcast_in_dim(first_valid, bd, {0}), first);
    Value idx_ext = b.concatenate({g.idx, b.constant(DType::kS64, -1, {1})}, 0);
    maxi = b.gather(idx_ext, b.reshape(first, {nb, dim, 1}), {0}, {}, bd);
  } else {
    Value contrib = rows;
    if (psw.defined()) contrib = b.mul(contrib, b.broadcast_in_dim(b.reshape(k.in(psw, ct), {n}), nd, {0}));
    contrib = b.select(valid, contrib, b.constant(c, 0, nd));
    out = b.scatter(b.constant(c, 0, bd), bag_idx, contrib, {0}, {1}, ir::Body::kAdd);
    if (mode == kMean) {
      Value cnt = b.broadcast_in_dim(b.convert(g.count, c), bd, {0});
      out = b.select(b.compare(cnt, b.zeros_like(cnt), Cmp::kEQ), b.zeros_like(out), b.div(out, cnt));
    }
    maxi = b.constant(DType::kS64, 0, {nb});
  }
  at::Tensor r0 = k.out(out, st);
  at::Tensor r1 = k.out(g.bag, at::kLong);
  at::Tensor r2 = k.out(g.count, at::kLong);
  at::Tensor r3 = k.out(maxi, at::kLong);
  k.run();
  return {r0, r1, r2, r3};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag(
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets, bool scale_grad_by_freq,
    int64_t mode, bool sparse, const std::optional<at::Tensor>& psw, bool include_last_offset, int64_t padding_idx) {
  return embedding_bag_impl("aten::_embedding_bag", weight, indices, offsets, mode, psw, include_last_offset,
                            padding_idx);
}
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag_forward_only(
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets, bool scale_grad_by_freq,
    int64_t mode, bool sparse, const std::optional<at::Tensor>& psw, bool include_last_offset, int64_t padding_idx) {
  return embedding_bag_impl("aten::_embedding_bag_forward_only", weight, indices, offsets, mode, psw,
                            include_last_offset, padding_idx);
}

// The dense weight gradient: each index's row receives its bag's gradient
// (times its per-sample weight, / the bag's size for mean; for max only the
// row that gave each feature's maximum), / the index's frequency with
// scale_grad_by_freq.
at::Tensor embedding_bag_backward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& offsets,
                                  const at::Tensor& offset2bag, const at::Tensor& bag_size,
                                  const at::Tensor& max_indices, int64_t num_weights, bool scale_grad_by_freq,
                                  int64_t mode, bool sparse, const std::optional<at::Tensor>& psw_opt,
                                  int64_t padding_idx) {
  const char* op = "aten::_embedding_bag_backward";
  TORCH_CHECK_NOT_IMPLEMENTED(!sparse, "embedding_bag: sparse gradients are not supported on tpu (sparse=True)");
  const at::Tensor psw = psw_opt.value_or(at::Tensor());
  const int64_t dim = grad.size(1), nb = grad.size(0), n = indices.numel();
  const at::ScalarType st = grad.scalar_type(), ct = opmath(st);
  const DType c = to_ir(ct);
  Kernel k(op, grad);
  Builder& b = k.b();
  const ir::Dims wd{num_weights, dim};
  Value gw = b.constant(c, 0, wd);
  if (n > 0 && nb > 0 && dim > 0) {
    Value g = k.in(grad, ct);
    if (mode == kMax) {
      Value mi = k.in(max_indices, at::kLong);  // [B, D]; -1 for empty bags
      Value ok = b.compare(mi, b.zeros_like(mi), Cmp::kGE);
      // Scatter each (bag, feature) gradient to row mi, column feature.
      Value col = b.iota(DType::kS64, {nb, dim}, 1);
      Value coords = b.concatenate({b.reshape(b.max(mi, b.zeros_like(mi)), {nb, dim, 1}), b.reshape(col, {nb, dim, 1})},
                                   2);
      gw = b.scatter(gw, coords, b.select(ok, g, b.zeros_like(g)), {0, 1}, {}, ir::Body::kAdd);
    } else {
      const ir::Dims nd{n, dim};
      Value idx = b.reshape(k.in(indices, at::kLong), {n});
      Value bag = b.reshape(k.in(offset2bag, at::kLong), {n});
      Value valid = padding_idx >= 0
                        ? b.compare(idx, b.constant(DType::kS64, static_cast<double>(padding_idx), {n}), Cmp::kNE)
                        : b.constant(DType::kBool, 1, {n});
      Value rowsg = b.gather(g, b.reshape(b.max(bag, b.zeros_like(bag)), {n, 1}), {0}, {1}, nd);
      Value scale = b.constant(c, 1, {n});
      if (mode == kMean) {
        Value cnt = b.convert(b.gather(k.in(bag_size, at::kLong), b.reshape(b.max(bag, b.zeros_like(bag)), {n, 1}), {0},
                                       {}, {n}),
                              c);
        scale = b.select(b.compare(cnt, b.zeros_like(cnt), Cmp::kEQ), b.zeros_like(cnt), b.div(scale, cnt));
      }
      if (psw.defined()) scale = b.mul(scale, b.reshape(k.in(psw, ct), {n}));
      if (scale_grad_by_freq) {
        Value freq = b.scatter(b.constant(c, 0, {num_weights}), b.reshape(idx, {n, 1}), b.constant(c, 1, {n}), {0}, {},
                               ir::Body::kAdd);
        scale = b.div(scale, b.gather(freq, b.reshape(idx, {n, 1}), {0}, {}, {n}));
      }
      Value contrib = b.mul(rowsg, b.broadcast_in_dim(scale, nd, {0}));
      contrib = b.select(b.broadcast_in_dim(valid, nd, {0}), contrib, b.zeros_like(contrib));
      gw = b.scatter(gw, b.reshape(idx, {n, 1}), contrib, {0}, {1}, ir::Body::kAdd);
    }
  }
  at::Tensor out = k.out(gw, st);
  k.run();
  return out;
}

// d out / d per_sample_weights[i] = <grad[bag(i)], weight[indices[i]]> (0 for padding).
at::Tensor embedding_bag_psw_backward(const at::Tensor& grad, const at::Tensor& weight, const at::Tensor& indices,
                                      const at::Tensor& offsets, const at::Tensor& offset2bag, int64_t mode,
                                      int64_t padding_idx) {
  const char* op = "aten::_embedding_bag_per_sample_weights_backward";
  TORCH_CHECK(mode == kSum, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  const int64_t n = indices.numel(), dim = weight.size(1);
  const at::ScalarType st = grad.scalar_type(), ct = opmath(st);
  Kernel k(op, grad);
  Builder& b = k.b();
  Value r = b.constant(to_ir(ct), 0, {n});
  if (n > 0 && dim > 0 && grad.size(0) > 0) {
    const ir::Dims nd{n, dim};
    Value idx = b.reshape(k.in(indices, at::kLong), {n});
    Value bag = b.reshape(k.in(offset2bag, at::kLong), {n});
    Value rows = b.gather(k.in(weight, ct), b.reshape(idx, {n, 1}), {0}, {1}, nd);
    Value gr = b.gather(k.in(grad, ct), b.reshape(b.max(bag, b.zeros_like(bag)), {n, 1}), {0}, {1}, nd);
    r = b.reduce_sum(b.mul(rows, gr), {1});
    if (padding_idx >= 0)
      r = b.select(b.compare(idx, b.constant(DType::kS64, static_cast<double>(padding_idx), {n}), Cmp::kNE), r,
                   b.zeros_like(r));
  }
  at::Tensor out = k.out(r, st);
  k.run();
  return out;
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("embedding_renorm_", TORCH_FN(embedding_renorm_));
  m.impl("_embedding_bag", TORCH_FN(embedding_bag));
  m.impl("_embedding_bag_forward_only", TORCH_FN(embedding_bag_forward_only));
  m.impl("_embedding_bag_backward", TORCH_FN(embedding_bag_backward));
  m.impl("_embedding_bag_per_sample_weights_backward", TORCH_FN(embedding_bag_psw_backward));
}

}  // namespace torchtpu::aten
