// Indexing (index, index_put, index_select, index_add, masked_select and
// masked_scatter, gather, scatter), embedding backward and nll_loss, with
// their device-side index checks.
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include "aten/opmath.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

// ---- advanced indexing ------------------------------------------------------------------

// Index tensors (bool masks expanded to long on the host, as CUDA does).
std::vector<at::Tensor> expand_indices(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  std::vector<at::Tensor> out;
  for (const std::optional<at::Tensor>& oi : indices) {
    at::Tensor i = oi.has_value() ? *oi : at::Tensor();
    if (i.defined() && (i.scalar_type() == at::kBool || i.scalar_type() == at::kByte)) {
      const int64_t at_dim = static_cast<int64_t>(out.size());
      TORCH_CHECK_INDEX(at_dim + i.dim() <= self.dim(), "too many indices for tensor of dimension ", self.dim());
      for (int64_t j = 0; j < i.dim(); ++j)
        TORCH_CHECK_INDEX(i.size(j) == self.size(at_dim + j), "The shape of the mask ", i.sizes(), " at index ", j,
                          " does not match the shape of the indexed tensor ", self.sizes(), " at index ", at_dim + j);
      at::Tensor nz = i.to(at::kCPU).nonzero();
      for (int64_t j = 0; j < i.dim(); ++j) out.push_back(nz.select(1, j).to(self.device()));
    } else {
      if (i.defined())
        TORCH_CHECK_INDEX(at::isIntegralType(i.scalar_type(), false),
                          "tensors used as indices must be long, int, byte or bool tensors");
      out.push_back(i);
    }
  }
  TORCH_CHECK_INDEX(static_cast<int64_t>(out.size()) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", out.size(), ")");
  return out;
}

struct IndexPlan {
  std::vector<int64_t> indexed;   // dims of self with an index, ascending
  std::vector<int64_t> window;    // dims of self taken whole, ascending
  std::vector<int64_t> offset_dims;  // where window dims sit in the result
  ir::Dims result;
  Value stacked;  // [B..., k] int64
};

// How an op refuses an index outside its range (checked on the device).
enum class IndexRule {
  kWrap,    // [-size, size): negatives count from the end (x[i], index_put_); IndexError
  kSelect,  // [0, size): IndexError "index out of range in self" (index_select, embedding)
  kAdd,     // [0, size): RuntimeError (index_add)
};

IndexPlan plan_index(Kernel& k, const at::Tensor& self, const std::vector<at::Tensor>& idx,
                     IndexRule rule = IndexRule::kWrap) {
  Builder& b = k.b();
  IndexPlan p;
  std::vector<Value> vals;
  for (size_t d = 0; d < static_cast<size_t>(self.dim()); ++d) {
    if (d < idx.size() && idx[d].defined()) {
      p.indexed.push_back(static_cast<int64_t>(d));
      check_same_device("aten::index", self.device(), {&idx[d]});
      Value v = k.in(idx[d], at::kLong);
      const std::string bounds =
          "index out of bounds for dimension " + std::to_string(d) + " with size " + std::to_string(self.size(d));
      check_index(k, v, self.size(d), rule == IndexRule::kWrap,
                  rule == IndexRule::kAdd ? Kernel::CheckKind::kRuntime : Kernel::CheckKind::kIndex,
                  rule == IndexRule::kSelect ? std::string("index out of range in self") : bounds);
      // Negative indices count from the end.
      Value size = b.constant(DType::kS64, static_cast<double>(self.size(d)), b.dims(v));
      v = b.select(b.compare(v, b.zeros_like(v), Cmp::kLT), b.add(v, size), v);
      vals.push_back(v);
    } else {
      p.window.push_back(static_cast<int64_t>(d));
    }
  }
  ir::Dims bshape;
  for (Value v : vals) {
    const ir::Dims& d = b.dims(v);
    size_t n = std::max(bshape.size(), d.size());
    ir::Dims out(n);
    for (size_t i = 0; i < n; ++i) {
      int64_t x = i < n - bshape.size() ? 1 : bshape[i - (n - bshape.size())];
      int64_t y = i < n - d.size() ? 1 : d[i - (n - d.size())];
      TORCH_CHECK_INDEX(x == y || x == 1 || y == 1, "shape mismatch: indexing tensors could not be broadcast together");
      out[i] = x == 1 ? y : x;
    }
    bshape = out;
  }
  ir::Dims vec = bshape;
  vec.push_back(1);
  std::vector<Value> cols;
  for (Value v : vals) cols.push_back(b.reshape(b.broadcast_to(v, bshape), vec));
  p.stacked = b.concatenate(cols, static_cast<int64_t>(bshape.size()));
  bool adjacent = p.indexed.back() - p.indexed.front() + 1 == static_cast<int64_t>(p.indexed.size());
  const int64_t nb = static_cast<int64_t>(bshape.size());
  if (adjacent) {
    int64_t pos = 0;
    for (int64_t d : p.window)
      if (d < p.indexed.front()) {
        p.offset_dims.push_back(pos++);
        p.result.push_back(self.size(d));
      }
    for (int64_t s : bshape) p.result.push_back(s);
    pos += nb;
    for (int64_t d : p.window)
      if (d > p.indexed.back()) {
        p.offset_dims.push_back(pos++);
        p.result.push_back(self.size(d));
      }
  } else {
    p.result = bshape;
    for (size_t i = 0; i < p.window.size(); ++i) {
      p.offset_dims.push_back(nb + static_cast<int64_t>(i));
      p.result.push_back(self.size(p.window[i]));
    }
  }
  return p;
}

at::Tensor index_impl(const char* op, const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                      IndexRule rule) {
  std::vector<at::Tensor> idx = expand_indices(self, indices);
  bool any = false;
  for (const at::Tensor& i : idx) any |= i.defined();
  if (!any) return self.clone();
  Kernel k(op, self);
  IndexPlan p = plan_index(k, self, idx, rule);
  Value r = k.b().gather(k.in(self), p.stacked, p.indexed, p.offset_dims, p.result);
  at::Tensor out = k.out(r, self.scalar_type());
  k.run();
  return out;
}
at::Tensor index_tensor(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  TPU_COUNT("aten::index.Tensor");
  return index_impl("aten::index", self, indices, IndexRule::kWrap);
}

at::Tensor& index_put_impl(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                           const at::Tensor& values, bool accumulate, bool unsafe) {
  TPU_COUNT("aten::_index_put_impl_");
  std::vector<at::Tensor> idx = expand_indices(self, indices);
  check_same_device("aten::index_put_", self.device(), {&values});
  Kernel k("aten::index_put_", self);
  Builder& b = k.b();
  IndexPlan p = plan_index(k, self, idx);
  Value v = k.in(values, self.scalar_type());
  TORCH_CHECK(b.dims(v).size() <= p.result.size(), "shape mismatch: value tensor of shape ", values.sizes(),
              " cannot be broadcast to indexing result of shape ", ops::shape_str(p.result));
  v = b.broadcast_to(v, p.result);
  Value r = b.scatter(k.in(self), p.stacked, v, p.indexed, p.offset_dims, accumulate ? ir::Body::kAdd : ir::Body::kReplace);
  k.into(self, r);
  k.run();
  return self;
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  TPU_COUNT("aten::index_select");
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  int64_t w = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (self.dim() == 0) return self.clone();
  c10::List<std::optional<at::Tensor>> idx;
  for (int64_t d = 0; d < w; ++d) idx.push_back(std::nullopt);
  idx.push_back(index.reshape({-1}));
  return index_impl("aten::index_select", self, idx, IndexRule::kSelect);
}

// out = self with alpha * source rows added at `index` along `dim`.
at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          const at::Scalar& alpha, at::Tensor& out) {
  TPU_COUNT("aten::index_add.out");
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_add_(): Index is supposed to be a vector");
  TORCH_CHECK(self.dim() > 0, "index_add: 0-d self is not supported on tpu");
  int64_t w = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(source.dim() == self.dim() && source.size(w) == index.numel(),
              "index_add_(): source must have the shape of self with dim ", w, " of size index.numel()");
  check_same_device("aten::index_add", self.device(), {&index, &source, &out});
  std::vector<at::Tensor> idx(w);
  idx.push_back(index.reshape({-1}));
  Kernel k("aten::index_add", self);
  Builder& b = k.b();
  IndexPlan p = plan_index(k, self, idx, IndexRule::kAdd);
  Value v = k.in(source, self.scalar_type());
  v = b.mul(v, b.broadcast_to(k.scalar(alpha, self.scalar_type()), b.dims(v)));
  Value r = b.scatter(k.in(self), p.stacked, v, p.indexed, p.offset_dims, ir::Body::kAdd);
  k.into_resized(out, r);
  k.run();
  return out;
}
at::Tensor index_add(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                     const at::Scalar& alpha) {
  at::Tensor out = empty_device({0}, self.scalar_type(), self.device().index());
  return index_add_out(self, dim, index, source, alpha, out);
}
at::Tensor& index_add_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                       const at::Scalar& alpha) {
  return index_add_out(self, dim, index, source, alpha, self);
}

// Broadcasts self and mask, then selects through a boolean index.
at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  TPU_COUNT("aten::masked_select");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
  if (shape.empty()) shape.push_back(1);  // the result is always 1-D
  c10::List<std::optional<at::Tensor>> idx;
  idx.push_back(mask.expand(shape));
  return index_tensor(self.expand(shape), idx);
}

// Writes source's leading elements, in order, where mask (broadcast to self) is true.
at::Tensor& masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  TPU_COUNT("aten::masked_scatter_");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  if (self.dim() == 0) {  // as a 1-element view, so the write reaches self
    at::Tensor flat = self.view({1});
    masked_scatter_(flat, mask.expand({}).reshape({1}), source);
    return self;
  }
  c10::List<std::optional<at::Tensor>> masks;
  masks.push_back(mask.expand(self.sizes()));
  c10::List<std::optional<at::Tensor>> idx;
  for (const at::Tensor& i : expand_indices(self, masks)) idx.push_back(i);
  int64_t n = idx.empty() ? 0 : idx.get(0)->numel();
  TORCH_CHECK(source.numel() >= n, "masked_scatter: expected source to have at least ", n, " elements, got ",
              source.numel());
  if (n == 0) return self;
  return index_put_impl(self, idx, source.reshape({-1}).narrow(0, 0, n), false, false);
}

// PyTorch's shape rule for gather/scatter: index has self's rank and is no
// larger than self outside `dim` (nor than src anywhere, for scatter).
void check_gather_shapes(const char* op, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                         const at::Tensor* src) {
  TORCH_CHECK(index.dim() == self.dim() || index.numel() == 0,
              op, "(): Index tensor must have the same number of dimensions as ", src ? "self" : "input", " tensor");
  if (index.numel() == 0) return;
  for (int64_t d = 0; d < self.dim(); ++d) {
    TORCH_CHECK(d == dim || index.size(d) <= self.size(d), op, "(): Size does not match at dimension ", d,
                " expected index ", index.sizes(), " to be no larger than self ", self.sizes(), " apart from dimension ",
                dim);
    if (src)
      TORCH_CHECK(index.size(d) <= src->size(d), op, "(): Expected index ", index.sizes(),
                  " to be no larger than src ", src->sizes(), " in dimension ", d);
  }
}

// Full index tuples for gather/scatter along `dim`: [index.shape..., rank].
// Indices must lie in [0, size) (checked on the device).
Value gather_tuples(Kernel& k, const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  Builder& b = k.b();
  ir::Dims d = to_dims(index.sizes());
  ir::Dims vec = d;
  vec.push_back(1);
  Value iv = k.in(index, at::kLong);
  check_index(k, iv, self.size(dim), false, Kernel::CheckKind::kRuntime,
              "index out of bounds for dimension " + std::to_string(dim) + " with size " +
                  std::to_string(self.size(dim)));
  std::vector<Value> cols;
  for (int64_t i = 0; i < self.dim(); ++i) cols.push_back(b.reshape(i == dim ? iv : b.iota(DType::kS64, d, i), vec));
  return b.concatenate(cols, static_cast<int64_t>(d.size()));
}

std::vector<int64_t> all_dims(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  TPU_COUNT("aten::gather");
  TORCH_CHECK(index.scalar_type() == at::kLong, "gather(): Expected dtype int64 for index");
  TORCH_CHECK(index.dim() == self.dim() || self.dim() == 0,
              "Index tensor must have the same number of dimensions as input tensor");
  if (self.dim() == 0) {
    // A 0-d input gathers as one of size 1; the result has index's shape.
    at::maybe_wrap_dim(dim, int64_t{0});
    return at::gather(self.reshape({1}), 0, index.reshape({-1}), sparse_grad).reshape(index.sizes());
  }
  int64_t w = at::maybe_wrap_dim(dim, self.dim());
  check_gather_shapes("gather", self, w, index, nullptr);
  check_same_device("aten::gather", self.device(), {&index});
  if (index.numel() == 0) return empty_device(index.sizes(), self.scalar_type(), self.device().index());
  Kernel k("aten::gather", self);
  Value t = gather_tuples(k, self, w, index);
  Value r = k.b().gather(k.in(self), t, all_dims(self.dim()), {}, to_dims(index.sizes()));
  at::Tensor out = k.out(r, self.scalar_type());
  k.run();
  return out;
}

at::Tensor scatter_impl(const char* op, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                        const at::Tensor* src, const at::Scalar* value, bool add, bool inplace) {
  TORCH_CHECK(index.scalar_type() == at::kLong, op, "(): Expected dtype int64 for index");
  if (self.dim() == 0) {
    // As a 1-element tensor (a view when in place, so the write reaches self).
    at::maybe_wrap_dim(dim, int64_t{0});
    at::Tensor flat = inplace ? self.view({1}) : self.reshape({1});
    at::Tensor src_flat = src ? src->reshape({-1}) : at::Tensor();
    at::Tensor r = scatter_impl(op, flat, 0, index.reshape({-1}), src ? &src_flat : nullptr, value, add, inplace);
    return inplace ? self : r.reshape({});
  }
  int64_t w = at::maybe_wrap_dim(dim, self.dim());
  if (self.dim() > 0) check_gather_shapes(op, self, w, index, src);
  check_same_device(op, self.device(), {&index, src});
  Kernel k(op, self);
  Builder& b = k.b();
  Value base = k.in(self);
  at::Tensor out = inplace ? self : at::Tensor();
  Value r = base;
  if (index.numel() > 0) {
    Value t = gather_tuples(k, self, w, index);
    ir::Dims idims = to_dims(index.sizes());
    Value upd;
    if (src) {
      Value s = k.in(*src, self.scalar_type());
      upd = b.slice(s, ir::Dims(src->dim(), 0), idims);
    } else {
      upd = b.broadcast_to(k.scalar(*value, self.scalar_type()), idims);
    }
    r = b.scatter(base, t, upd, all_dims(self.dim()), {}, add ? ir::Body::kAdd : ir::Body::kReplace);
  }
  if (inplace) {
    k.into(self, r);
  } else {
    out = k.out(r, self.scalar_type());
  }
  k.run();
  return out;
}
at::Tensor scatter_src(const at::Tensor& s, int64_t dim, const at::Tensor& i, const at::Tensor& src) {
  TPU_COUNT("aten::scatter.src");
  return scatter_impl("aten::scatter", s, dim, i, &src, nullptr, false, false);
}
at::Tensor& scatter_src_(at::Tensor& s, int64_t dim, const at::Tensor& i, const at::Tensor& src) {
  TPU_COUNT("aten::scatter_.src");
  scatter_impl("aten::scatter_", s, dim, i, &src, nullptr, false, true);
  return s;
}
at::Tensor scatter_value(const at::Tensor& s, int64_t dim, const at::Tensor& i, const at::Scalar& v) {
  TPU_COUNT("aten::scatter.value");
  return scatter_impl("aten::scatter", s, dim, i, nullptr, &v, false, false);
}
at::Tensor& scatter_value_(at::Tensor& s, int64_t dim, const at::Tensor& i, const at::Scalar& v) {
  TPU_COUNT("aten::scatter_.value");
  scatter_impl("aten::scatter_", s, dim, i, nullptr, &v, false, true);
  return s;
}
at::Tensor scatter_add(const at::Tensor& s, int64_t dim, const at::Tensor& i, const at::Tensor& src) {
  TPU_COUNT("aten::scatter_add");
  return scatter_impl("aten::scatter_add", s, dim, i, &src, nullptr, true, false);
}
at::Tensor& scatter_add_(at::Tensor& s, int64_t dim, const at::Tensor& i, const at::Tensor& src) {
  TPU_COUNT("aten::scatter_add_");
  scatter_impl("aten::scatter_add_", s, dim, i, &src, nullptr, true, true);
  return s;
}

// ---- embedding and losses -------------------------------------------------------------

at::Tensor embedding_dense_backward(const at::Tensor& grad, const at::Tensor& indices, int64_t num_weights,
                                    int64_t padding_idx, bool scale_grad_by_freq) {
  TPU_COUNT("aten::embedding_dense_backward");
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
    k.check(b.logical_and(outside, b.unary("stablehlo.not", ignored)), Kernel::CheckKind::kIndex,
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
  TPU_COUNT("aten::nll_loss_forward");
  TORCH_CHECK(self.dim() >= 1 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  TORCH_CHECK(self.dim() == 1 || self.size(0) == target.size(0), "size mismatch (got input: ", self.sizes(),
              ", target: ", target.sizes(), ")");
  check_same_device("aten::nll_loss_forward", self.device(), {&target});
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
  TPU_COUNT("aten::nll_loss_backward");
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
  TPU_COUNT("aten::nll_loss2d_forward");
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
  TPU_COUNT("aten::nll_loss2d_backward");
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

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index.Tensor", TORCH_FN(index_tensor));
  m.impl("_index_put_impl_", TORCH_FN(index_put_impl));
  m.impl("index_select", TORCH_FN(index_select));
  m.impl("index_add", TORCH_FN(index_add));
  m.impl("index_add_", TORCH_FN(index_add_));
  m.impl("index_add.out", TORCH_FN(index_add_out));
  m.impl("masked_select", TORCH_FN(masked_select));
  m.impl("masked_scatter_", TORCH_FN(masked_scatter_));
  m.impl("gather", TORCH_FN(gather));
  m.impl("scatter.src", TORCH_FN(scatter_src));
  m.impl("scatter_.src", TORCH_FN(scatter_src_));
  m.impl("scatter.value", TORCH_FN(scatter_value));
  m.impl("scatter_.value", TORCH_FN(scatter_value_));
  m.impl("scatter_add", TORCH_FN(scatter_add));
  m.impl("scatter_add_", TORCH_FN(scatter_add_));
  m.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));
  m.impl("nll_loss_forward", TORCH_FN(nll_loss_forward));
  m.impl("nll_loss_backward", TORCH_FN(nll_loss_backward));
  m.impl("nll_loss2d_forward", TORCH_FN(nll_loss2d_forward));
  m.impl("nll_loss2d_backward", TORCH_FN(nll_loss2d_backward));
}

}  // namespace torchtpu::aten
