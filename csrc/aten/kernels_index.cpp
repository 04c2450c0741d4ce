// Indexing along dims: index, index_put, index_select, index_add,
// index_copy, index_fill, index_reduce and masked_scatter,
// with their device-side index checks.
#include <ATen/WrapDimUtils.h>

#include "aten/registry.h"
#include "aten/opmath.h"
#include "ops/index.h"

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
      // A CPU index tensor is accepted and moved once, as CUDA does.
      out.push_back(i.defined() && !i.device().is_privateuseone() ? i.to(self.device()) : i);
    }
  }
  TORCH_CHECK_INDEX(static_cast<int64_t>(out.size()) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", out.size(), ")");
  return out;
}

// An advanced index: the indexed dims of self and their gather layout.
struct IndexPlan {
  std::vector<int64_t> indexed;  // dims of self with an index, ascending
  std::vector<int64_t> offset_dims;
  ir::Dims result;
  Value stacked;
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
    }
  }
  ops::IndexLayout l;
  try {
    l = ops::index_layout(b, to_dims(self.sizes()), p.indexed, vals);
  } catch (const ops::LoweringError& e) {
    TORCH_CHECK_INDEX(false, e.what());
  }
  p.offset_dims = std::move(l.offset_dims);
  p.result = std::move(l.result);
  p.stacked = l.stacked;
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
  return index_impl("aten::index", self, indices, IndexRule::kWrap);
}

at::Tensor& index_put_impl(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                           const at::Tensor& values, bool accumulate, bool unsafe) {
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

at::Tensor nonempty(const at::Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

at::Tensor index_select_impl(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor* out) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  TORCH_CHECK(self.dim() > 0 || index.numel() == 1, "index_select(): Index to scalar can have only 1 value, got ",
              index.numel(), " value(s)");
  check_same_device("aten::index_select", self.device(), {&index, out});
  if (out)
    TORCH_CHECK(out->scalar_type() == self.scalar_type(), "index_select(): self and result must have the same ",
                "scalar type");
  const at::Tensor s = nonempty(self);
  int64_t w = at::maybe_wrap_dim(dim, s.dim());
  std::vector<at::Tensor> idx(w);
  idx.push_back(index.reshape({-1}));
  std::vector<int64_t> shape = s.sizes().vec();
  shape[w] = index.numel();
  if (self.dim() == 0) shape.clear();
  Kernel k("aten::index_select", self);
  Value r;
  if (index.numel() == 0) {
    r = k.b().constant(to_ir(self.scalar_type()), 0, to_dims(shape));
  } else {
    IndexPlan p = plan_index(k, s, idx, IndexRule::kSelect);
    r = k.b().reshape(k.b().gather(k.in(s), p.stacked, p.indexed, p.offset_dims, p.result), to_dims(shape));
  }
  at::Tensor result = k.result(r, self.scalar_type(), out);
  k.run();
  return result;
}
at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  return handed(out, index_select_impl(self, dim, index, given(out)));
}

// PyTorch's checks of index_add / index_reduce / index_copy: `source` has
// self's shape except at `dim` (all of it when either is 0-d), where it has
// one row per index.
void check_index_source(const char* op, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                        const at::Tensor& source, bool long_only) {
  TORCH_CHECK_INDEX(index.dim() <= 1, op, "(): Index is supposed to be a vector");
  if (long_only) {
    TORCH_CHECK_INDEX(index.scalar_type() == at::kLong, op, "(): Expected a long tensor for index, but got ",
                      index.scalar_type());
  } else {
    TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, op,
                "(): Expected dtype int32/int64 for index");
  }
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), op, "(): self (", self.scalar_type(), ") and source (",
              source.scalar_type(), ") must have the same scalar type");
  TORCH_CHECK(dim == 0 || dim < source.dim(), op, "(): Indexing dim ", dim,
              " is out of bounds of the source tensor with dim ", source.dim());
  const int64_t rows = source.dim() == 0 ? 1 : source.size(dim);
  TORCH_CHECK(index.numel() == rows, op, "(): Number of indices (", index.numel(),
              ") should be equal to source.size(dim) (", rows, ")");
  std::vector<int64_t> a = self.sizes().vec(), b = source.sizes().vec();
  if (self.dim() > 0 && source.dim() > 0) {
    a.erase(a.begin() + dim);
    b.erase(b.begin() + dim);
  }
  TORCH_CHECK(a == b, "source tensor shape must match self tensor shape, excluding the specified dimension. Got "
              "self.shape = ", self.sizes(), " source.shape = ", source.sizes());
}

// self with source's rows combined in at `index` along `dim` (by `combine`,
// given the plan and source's value), into `dst` or a new tensor.
template <typename Combine>
at::Tensor index_source_op(const char* op, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                           const at::Tensor& source, IndexRule rule, bool long_only, const at::Tensor* dst,
                           Combine combine) {
  int64_t w = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  check_index_source(op, self, w, index, source, long_only);
  check_same_device(op, self.device(), {&index, &source, dst});
  if (dst && !dst->is_same(self))
    TORCH_CHECK(dst->scalar_type() == self.scalar_type(), op, "(): Expected out tensor to have dtype ",
                self.scalar_type(), ", but got ", dst->scalar_type(), " instead");
  const at::Tensor s = nonempty(self);
  std::vector<at::Tensor> idx(w);
  idx.push_back(index.reshape({-1}));
  Kernel k(op, self);
  Builder& b = k.b();
  Value r = k.in(s);
  if (index.numel() > 0) {
    IndexPlan p = plan_index(k, s, idx, rule);
    r = combine(k, p, r, b.reshape(k.in(source), p.result));
  }
  r = b.reshape(r, to_dims(self.sizes()));
  at::Tensor result = dst ? *dst : at::Tensor();
  if (dst)
    k.into_resized(*dst, r);
  else
    result = k.out(r, self.scalar_type());
  k.run();
  return result;
}

// out = self with alpha * source rows added at `index` along `dim`.
at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          const at::Scalar& alpha, at::Tensor& out) {
  index_source_op("index_add_", self, dim, index, source, IndexRule::kAdd, false, &out,
                  [&](Kernel& k, const IndexPlan& p, Value base, Value v) {
                    Builder& b = k.b();
                    v = b.mul(v, b.broadcast_to(k.scalar(alpha, self.scalar_type()), b.dims(v)));
                    return b.scatter(base, p.stacked, v, p.indexed, p.offset_dims, ir::Body::kAdd);
                  });
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

at::Tensor& index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                           at::Tensor& out) {
  index_source_op("index_copy_", self, dim, index, source, IndexRule::kSelect, true, &out,
                  [&](Kernel& k, const IndexPlan& p, Value base, Value v) {
                    return k.b().scatter(base, p.stacked, v, p.indexed, p.offset_dims, ir::Body::kReplace);
                  });
  return out;
}
at::Tensor index_copy(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source) {
  at::Tensor out = empty_device({0}, self.scalar_type(), self.device().index());
  return index_copy_out(self, dim, index, source, out);
}
at::Tensor& index_copy_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source) {
  return index_copy_out(self, dim, index, source, self);
}

at::Tensor& index_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                             c10::string_view reduce, bool include_self, at::Tensor& out) {
  ops::Reduce r;
  if (reduce == "prod") {
    r = ops::Reduce::kProd;
  } else if (reduce == "mean") {
    r = ops::Reduce::kMean;
  } else if (reduce == "amax") {
    r = ops::Reduce::kAmax;
  } else {
    TORCH_CHECK(reduce == "amin", "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got ",
                reduce, ".");
    r = ops::Reduce::kAmin;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"index_reduce_func_exclude_input_init\" not ",
                              "implemented for 'Bool'");
  index_source_op("index_reduce_", self, dim, index, source, IndexRule::kSelect, false, &out,
                  [&](Kernel& k, const IndexPlan& p, Value base, Value v) {
                    return ops::scatter_reduce(k.b(), base, p.stacked, v, p.indexed, p.offset_dims, r, include_self);
                  });
  return out;
}
at::Tensor index_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                        c10::string_view reduce, bool include_self) {
  at::Tensor out = empty_device({0}, self.scalar_type(), self.device().index());
  return index_reduce_out(self, dim, index, source, reduce, include_self, out);
}
at::Tensor& index_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          c10::string_view reduce, bool include_self) {
  return index_reduce_out(self, dim, index, source, reduce, include_self, self);
}

// Positions of `index` (wrapping negatives) along `dim` set to `value`.
at::Tensor& index_fill_impl(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor* vt,
                            const at::Scalar* vs) {
  TORCH_CHECK(index.scalar_type() == at::kLong, "index_fill_(): Expected dtype int64 for index.");
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_fill_(): Index has to be a vector/scalar");
  if (vt)
    TORCH_CHECK(vt->dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
                vt->dim(), " dimension(s).");
  check_same_device("aten::index_fill_", self.device(), {&index, vt});
  int64_t w = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (index.numel() == 0) return self;
  const at::Tensor s = nonempty(self);
  const int64_t n = s.size(w);
  Kernel k("aten::index_fill_", self);
  Builder& b = k.b();
  Value iv = b.reshape(k.in(index, at::kLong), {index.numel()});
  check_index(k, iv, n, true, Kernel::CheckKind::kIndex,
              "index_fill_(): index out of bounds for dimension " + std::to_string(w) + " with size " +
                  std::to_string(n));
  iv = b.select(b.compare(iv, b.zeros_like(iv), Cmp::kLT), b.add(iv, b.constant(DType::kS64, n)), iv);
  Value hit = b.scatter(b.constant(DType::kBool, 0, {n}), b.reshape(iv, {index.numel(), 1}),
                        b.constant(DType::kBool, 1, {index.numel()}), {0}, {}, ir::Body::kReplace);
  const ir::Dims d = to_dims(s.sizes());
  Value v = vt ? k.in(*vt, self.scalar_type()) : k.scalar(*vs, self.scalar_type());
  Value r = b.select(b.broadcast_in_dim(hit, d, {w}), b.broadcast_to(v, d), k.in(s));
  k.into(self, b.reshape(r, to_dims(self.sizes())));
  k.run();
  return self;
}
at::Tensor& index_fill_scalar_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  return index_fill_impl(self, dim, index, nullptr, &value);
}
at::Tensor& index_fill_tensor_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value) {
  return index_fill_impl(self, dim, index, &value, nullptr);
}

// Writes source's leading elements, in order, where mask (broadcast to self) is true.
at::Tensor& masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
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

}  // namespace

TPU_KERNELS(m) {
  m.impl("index.Tensor", TORCH_FN(index_tensor), Devices::kAny);
  m.impl("_index_put_impl_", TORCH_FN(index_put_impl), Devices::kAny);
  m.impl("index_add", TORCH_FN(index_add));
  m.impl("index_add.out", TORCH_FN(index_add_out));
  m.impl("index_add_", TORCH_FN(index_add_));
  m.impl("index_copy", TORCH_FN(index_copy));
  m.impl("index_copy.out", TORCH_FN(index_copy_out));
  m.impl("index_copy_", TORCH_FN(index_copy_));
  m.impl("index_fill_.int_Scalar", TORCH_FN(index_fill_scalar_));
  m.impl("index_fill_.int_Tensor", TORCH_FN(index_fill_tensor_));
  m.impl("index_reduce", TORCH_FN(index_reduce));
  m.impl("index_reduce.out", TORCH_FN(index_reduce_out));
  m.impl("index_reduce_", TORCH_FN(index_reduce_));
  m.out("index_select.out", TORCH_FN(index_select_out), "index_select");
  m.impl("masked_scatter_", TORCH_FN(masked_scatter_));
}

}  // namespace torchtpu::aten
