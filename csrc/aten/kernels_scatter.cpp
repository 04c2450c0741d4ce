// gather and the scatter family (scatter, scatter_add, scatter_reduce with
// its reductions), and take / put_ on the flattened tensor, with their
// device-side index checks. A 0-d self, index or src takes part as a
// one-element 1-D tensor, as PyTorch's shape rules read it.
#include <ATen/WrapDimUtils.h>

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "ops/index.h"

namespace torchtpu::aten {
namespace {

using ops::Reduce;

at::Tensor nonempty(const at::Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

// An empty index of any dtype is accepted, as on the CPU.
void check_index_dtype(const char* op, const at::Tensor& index) {
  TORCH_CHECK(index.numel() == 0 || index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, op,
              "(): Expected dtype int32/int64 for index");
}

// PyTorch's shape rule for gather/scatter (0-d tensors read as size [1]):
// index has self's rank and is no larger than self outside `dim` (nor than
// src anywhere, for scatter).
void check_gather_shapes(const char* op, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                         const at::Tensor* src) {
  if (index.numel() == 0) return;
  TORCH_CHECK(index.dim() == self.dim(), op, "(): Index tensor must have the same number of dimensions as ",
              src ? "self" : "input", " tensor");
  for (int64_t d = 0; d < self.dim(); ++d) {
    TORCH_CHECK(d == dim || index.size(d) <= self.size(d), op, "(): Size does not match at dimension ", d,
                " expected index ", index.sizes(), " to be no larger than self ", self.sizes(), " apart from dimension ",
                dim);
    if (src)
      TORCH_CHECK(index.size(d) <= src->size(d), op, "(): Expected index ", index.sizes(),
                  " to be no larger than src ", src->sizes(), " in dimension ", d);
  }
}

// Index tuples along `dim` of `self` (rank >= 1); indices must lie in
// [0, size) (checked on the device).
Value gather_tuples(Kernel& k, const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  Value iv = k.in(index, at::kLong);
  check_index(k, iv, self.size(dim), false, Kernel::CheckKind::kRuntime,
              "index out of bounds for dimension " + std::to_string(dim) + " with size " +
                  std::to_string(self.size(dim)));
  return ops::dim_tuples(k.b(), iv, self.dim(), dim);
}

std::vector<int64_t> all_dims(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

at::Tensor gather_impl(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor* out) {
  check_index_dtype("gather", index);
  if (out)
    TORCH_CHECK(out->scalar_type() == self.scalar_type(), "gather(): Expected out tensor to have dtype ",
                self.scalar_type(), ", but got ", out->scalar_type(), " instead");
  const at::Tensor s = nonempty(self), i = nonempty(index);
  int64_t w = at::maybe_wrap_dim(dim, s.dim());
  check_gather_shapes("gather", s, w, i, nullptr);
  Kernel k("aten::gather", self);
  Builder& b = k.b();
  Value r;
  if (index.numel() == 0) {
    r = b.constant(to_ir(self.scalar_type()), 0, to_dims(index.sizes()));
  } else {
    Value t = gather_tuples(k, s, w, i);
    r = b.reshape(b.gather(k.in(s), t, all_dims(s.dim()), {}, to_dims(i.sizes())), to_dims(index.sizes()));
  }
  at::Tensor result = k.result(r, self.scalar_type(), out);
  k.run();
  return result;
}
at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool, at::Tensor& out) {
  return handed(out, gather_impl(self, dim, index, given(out)));
}

// One scatter: `src` (or the scalar `value`) written at `index` along `dim`,
// replacing (no `reduce`) or combined by `reduce`; the result goes to `dst`
// when given (in-place and out=), else to a new tensor.
at::Tensor scatter_impl(const char* op, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                        const at::Tensor* src, const at::Scalar* value, std::optional<Reduce> reduce,
                        bool include_self, const at::Tensor* dst) {
  check_index_dtype(op, index);
  if (src)
    TORCH_CHECK(src->scalar_type() == self.scalar_type(), op, "(): Expected self.dtype to be equal to src.dtype");
  if (dst && !dst->is_same(self))
    TORCH_CHECK(dst->scalar_type() == self.scalar_type(), op, "(): Expected out tensor to have dtype ",
                self.scalar_type(), ", but got ", dst->scalar_type(), " instead");
  const at::Tensor s = nonempty(self), i = nonempty(index);
  const at::Tensor s_src = src ? nonempty(*src) : at::Tensor();
  int64_t w = at::maybe_wrap_dim(dim, s.dim());
  check_gather_shapes(op, s, w, i, src ? &s_src : nullptr);
  Kernel k(op, self);
  Builder& b = k.b();
  Value r = k.in(s);
  if (index.numel() > 0) {
    Value t = gather_tuples(k, s, w, i);
    ir::Dims idims = to_dims(i.sizes());
    Value upd = src ? b.slice(k.in(s_src), ir::Dims(s_src.dim(), 0), idims)
                    : b.broadcast_to(k.scalar(*value, self.scalar_type()), idims);
    r = reduce ? ops::scatter_reduce(b, r, t, upd, all_dims(s.dim()), {}, *reduce, include_self)
               : b.scatter(r, t, upd, all_dims(s.dim()), {}, ir::Body::kReplace);
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

Reduce scatter_mode(c10::string_view reduce) {
  if (reduce == "add") return Reduce::kSum;
  if (reduce == "multiply") return Reduce::kProd;
  TORCH_CHECK(false, "reduce argument must be either add or multiply, got ", reduce);
}

Reduce reduce_mode(c10::string_view reduce, const at::Tensor& src) {
  if (reduce == "sum") return Reduce::kSum;
  if (reduce == "prod") return Reduce::kProd;
  if (reduce == "mean") {
    TORCH_CHECK_NOT_IMPLEMENTED(src.scalar_type() != at::kBool,
                                "\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'");
    return Reduce::kMean;
  }
  if (reduce == "amax") return Reduce::kAmax;
  if (reduce == "amin") return Reduce::kAmin;
  TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", reduce);
}

// The out= form of each scatter overload (functional and in-place forms derived).

at::Tensor& scatter_src_out(const at::Tensor& s, int64_t dim, const at::Tensor& i, const at::Tensor& src, at::Tensor& out) {
  return handed(out, scatter_impl("aten::scatter.out", s, dim, i, &src, nullptr, std::nullopt, true, given(out)));
}

at::Tensor& scatter_value_out(const at::Tensor& s, int64_t dim, const at::Tensor& i, const at::Scalar& v, at::Tensor& out) {
  return handed(out, scatter_impl("aten::scatter.out", s, dim, i, nullptr, &v, std::nullopt, true, given(out)));
}

at::Tensor& scatter_reduce_src_out(const at::Tensor& s, int64_t dim, const at::Tensor& i, const at::Tensor& src, c10::string_view r, at::Tensor& out) {
  return handed(out, scatter_impl("aten::scatter.out", s, dim, i, &src, nullptr, scatter_mode(r), true, given(out)));
}

at::Tensor& scatter_reduce_value_out(const at::Tensor& s, int64_t dim, const at::Tensor& i, const at::Scalar& v, c10::string_view r, at::Tensor& out) {
  return handed(out, scatter_impl("aten::scatter.out", s, dim, i, nullptr, &v, scatter_mode(r), true, given(out)));
}

at::Tensor& scatter_add_out(const at::Tensor& s, int64_t dim, const at::Tensor& i, const at::Tensor& src, at::Tensor& out) {
  return handed(out, scatter_impl("aten::scatter_add.out", s, dim, i, &src, nullptr, Reduce::kSum, true, given(out)));
}

at::Tensor& scatter_reduce_two_out(const at::Tensor& s, int64_t dim, const at::Tensor& i, const at::Tensor& src, c10::string_view r, bool include_self, at::Tensor& out) {
  return handed(out,
                scatter_impl("aten::scatter_reduce.out", s, dim, i, &src, nullptr, reduce_mode(r, src), include_self, given(out)));
}
// ---- take / put_: the flattened tensor, negative indices from the end ------------

Value flat_index(Kernel& k, const char* op, const at::Tensor& self, const at::Tensor& index) {
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong, op, "(): Expected a long tensor for index, but got ",
                    index.scalar_type());
  Builder& b = k.b();
  const int64_t n = self.numel();
  Value iv = b.reshape(k.in(index, at::kLong), {index.numel()});
  check_index(k, iv, n, true, Kernel::CheckKind::kIndex,
              "out of range: tried to access an index outside [-" + std::to_string(n) + ", " + std::to_string(n) +
                  ") on a tensor of " + std::to_string(n) + " elements.");
  Value wrapped = b.select(b.compare(iv, b.zeros_like(iv), ops::Cmp::kLT), b.add(iv, b.constant(DType::kS64, n)), iv);
  return b.reshape(wrapped, {index.numel(), 1});
}

at::Tensor take_impl(const at::Tensor& self, const at::Tensor& index, const at::Tensor* out) {
  if (out)
    TORCH_CHECK(out->scalar_type() == self.scalar_type(), "take(): self and result must have the same scalar type");
  TORCH_CHECK_INDEX(self.numel() > 0 || index.numel() == 0, "take(): tried to take from an empty tensor");
  Kernel k("aten::take", self);
  Builder& b = k.b();
  Value r;
  if (index.numel() == 0) {
    TORCH_CHECK_INDEX(index.scalar_type() == at::kLong, "take(): Expected a long tensor for index, but got ",
                      index.scalar_type());
    r = b.constant(to_ir(self.scalar_type()), 0, to_dims(index.sizes()));
  } else {
    Value t = flat_index(k, "take", self, index);
    Value flat = b.reshape(k.in(self), {self.numel()});
    r = b.reshape(b.gather(flat, t, {0}, {}, {index.numel()}), to_dims(index.sizes()));
  }
  at::Tensor result = k.result(r, self.scalar_type(), out);
  k.run();
  return result;
}
at::Tensor& take_out(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  return handed(out, take_impl(self, index, given(out)));
}

at::Tensor& put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  TORCH_CHECK(source.scalar_type() == self.scalar_type(), "put_(): self and source expected to have the same dtype, ",
              "but got self.dtype = ", self.scalar_type(), " and source.dtype = ", source.scalar_type());
  TORCH_CHECK_INDEX(source.numel() == index.numel(), "put_(): Expected source and index to have the same number of ",
                    "elements, but got source.numel() = ", source.numel(), ", index.numel() = ", index.numel());
  TORCH_CHECK_INDEX(self.numel() > 0 || index.numel() == 0, "put_(): Tried to put elements into an empty tensor");
  if (index.numel() == 0) return self;
  Kernel k("aten::put_", self);
  Builder& b = k.b();
  Value t = flat_index(k, "put_", self, index);
  Value flat = b.reshape(k.in(self), {self.numel()});
  Value upd = b.reshape(k.in(source), {source.numel()});
  Value r = b.scatter(flat, t, upd, {0}, {}, accumulate ? ir::Body::kAdd : ir::Body::kReplace);
  k.into(self, b.reshape(r, to_dims(self.sizes())));
  k.run();
  return self;
}

}  // namespace

TPU_KERNELS(m) {
  m.out("gather.out", TORCH_FN(gather_out), "gather");
  m.impl("put_", TORCH_FN(put_));
  m.out("scatter.reduce_out", TORCH_FN(scatter_reduce_src_out), "scatter.reduce", "scatter_.reduce");
  m.out("scatter.src_out", TORCH_FN(scatter_src_out), "scatter.src", "scatter_.src");
  m.out("scatter.value_out", TORCH_FN(scatter_value_out), "scatter.value", "scatter_.value");
  m.out("scatter.value_reduce_out", TORCH_FN(scatter_reduce_value_out),
        "scatter.value_reduce", "scatter_.value_reduce");
  m.out("scatter_add.out", TORCH_FN(scatter_add_out), "scatter_add", "scatter_add_");
  m.out("scatter_reduce.two_out", TORCH_FN(scatter_reduce_two_out), "scatter_reduce.two", "scatter_reduce_.two");
  m.out("take.out", TORCH_FN(take_out), "take");
}

}  // namespace torchtpu::aten
