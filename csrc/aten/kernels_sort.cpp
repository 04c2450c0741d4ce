// Sorting and order statistics: sort, topk, kthvalue, median and nanmedian,
// mode, the cummax/cummin helpers, logcumsumexp, searchsorted/bucketize,
// isin. Among equal values, index outputs follow the stable order
// (the CPU's unstable sorts may name another of the equals); median's NaN
// and mode's choice are the CPU's.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/BucketizationUtils.h>

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "ops/sort.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

// Outputs of a (values, indices) op: written into `vo`/`io` (resized) when
// given, else new tensors.
struct Pair {
  at::Tensor* vo = nullptr;
  at::Tensor* io = nullptr;
};

void check_pair_outs(const char* op, const at::Tensor& self, const Pair& o) {
  if (!o.vo) return;
  TORCH_CHECK(o.vo->scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ", self.scalar_type(),
              ", but got ", o.vo->scalar_type(), " instead");
  TORCH_CHECK(o.io->scalar_type() == at::kLong, "Expected out tensor to have dtype long int, but got ",
              o.io->scalar_type(), " instead");
}

std::tuple<at::Tensor, at::Tensor> emit(Kernel& k, const at::Tensor& self, Value v, Value i, const Pair& o) {
  at::Tensor vt = k.result(v, self.scalar_type(), o.vo);
  at::Tensor it = k.result(i, at::kLong, o.io);
  k.run();
  return {vt, it};
}

// Results of `shape` with no elements: nothing to compute.
std::tuple<at::Tensor, at::Tensor> empty_pair(const at::Tensor& self, at::IntArrayRef shape, const Pair& o) {
  if (o.vo) {
    o.vo->resize_(shape);
    o.io->resize_(shape);
    return {*o.vo, *o.io};
  }
  return {empty_device(shape, self.scalar_type(), self.device().index()),
          empty_device(shape, at::kLong, self.device().index())};
}

std::vector<int64_t> reduced_shape(const at::Tensor& self, int64_t dim, bool keepdim) {
  std::vector<int64_t> s = self.sizes().vec();
  if (self.dim() == 0) return s;
  if (keepdim)
    s[dim] = 1;
  else
    s.erase(s.begin() + dim);
  return s;
}

// ---- sort, topk ----------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> sort_impl(const char* op, const at::Tensor& self, int64_t dim, bool descending,
                                             const Pair& o) {
  check_pair_outs(op, self, o);
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  if (self.numel() == 0) return empty_pair(self, self.sizes(), o);
  Kernel k(op, self);
  k.elementwise();  // values and indices in self's dimension order, as PyTorch's sort
  Builder& b = k.b();
  Value x = k.in(self);
  if (self.dim() == 0 || self.size(d) == 1)
    return emit(k, self, x, b.constant(DType::kS64, 0, to_dims(self.sizes())), o);
  auto [v, i] = ops::sort_with_indices(b, x, d, descending);
  return emit(k, self, v, i, o);
}

std::tuple<at::Tensor, at::Tensor> sort_stable(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                               bool descending) {
  return sort_impl("aten::sort.stable", self, dim, descending, {});
}
std::tuple<at::Tensor&, at::Tensor&> sort_values_stable(const at::Tensor& self, std::optional<bool> stable,
                                                        int64_t dim, bool descending, at::Tensor& values,
                                                        at::Tensor& indices) {
  sort_impl("aten::sort.values_stable", self, dim, descending, {&values, &indices});
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> topk_impl(const at::Tensor& self, int64_t k_, int64_t dim, bool largest,
                                             const Pair& o) {
  const char* op = o.vo ? "aten::topk.values" : "aten::topk";
  check_pair_outs(op, self, o);
  const int64_t d = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  TORCH_CHECK(k_ >= 0 && k_ <= (self.dim() > 0 ? self.size(d) : 1), "selected index k out of range");
  std::vector<int64_t> shape = self.sizes().vec();
  if (!shape.empty()) shape[d] = k_;
  if (c10::multiply_integers(shape) == 0) return empty_pair(self, shape, o);
  Kernel k(op, self);
  Builder& b = k.b();
  Value x = k.in(self);
  if (self.dim() == 0) return emit(k, self, x, b.constant(DType::kS64, 0), o);
  auto [v, i] = ops::sort_with_indices(b, x, d, largest);
  return emit(k, self, b.slice_dim(v, d, 0, k_), b.slice_dim(i, d, 0, k_), o);
}
std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor& self, c10::SymInt k, int64_t dim, bool largest,
                                        bool sorted) {
  return topk_impl(self, k.guard_int(__FILE__, __LINE__), dim, largest, {});
}
std::tuple<at::Tensor&, at::Tensor&> topk_values(const at::Tensor& self, c10::SymInt k, int64_t dim, bool largest,
                                                 bool sorted, at::Tensor& values, at::Tensor& indices) {
  topk_impl(self, k.guard_int(__FILE__, __LINE__), dim, largest, {&values, &indices});
  return {values, indices};
}

// ---- kthvalue, median, nanmedian ---------------------------------------------------

enum class Select { kKth, kMedian, kNanMedian };

// The element at a position of the ascending stable order of each slice
// (NaN last): the k-th; the middle one, or the first NaN when there is one
// (median); the middle one of the non-NaN values (nanmedian).
std::tuple<at::Tensor, at::Tensor> select_impl(const char* op, const char* name, Select what, const at::Tensor& self,
                                               int64_t kth, int64_t dim, bool keepdim, const Pair& o) {
  check_pair_outs(op, self, o);
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  const int64_t n = self.dim() > 0 ? self.size(d) : 1;
  if (self.dim() > 0 && self.size(d) == 0)
    TORCH_CHECK_INDEX(false, name, "(): Expected reduction dim ", d, " to have non-zero size.");
  if (what == Select::kKth)
    TORCH_CHECK(kth >= 1 && kth <= n, "kthvalue(): selected number k out of range for dimension ", dim);
  const std::vector<int64_t> shape = reduced_shape(self, d, keepdim);
  if (self.numel() == 0) return empty_pair(self, shape, o);
  Kernel k(op, self);
  Builder& b = k.b();
  Value x = k.in(self);
  if (self.dim() == 0) return emit(k, self, x, b.constant(DType::kS64, 0), o);
  auto [v, i] = ops::sort_with_indices(b, x, d, /*descending=*/false);
  const ir::Dims rd = to_dims(reduced_shape(self, d, false));
  auto c = [&](double val) { return b.constant(DType::kS64, val, rd); };
  Value pos;
  if (what == Select::kKth) {
    pos = c(static_cast<double>(kth - 1));
  } else {
    Value nans = ops::nan_count(b, x, d);
    if (what == Select::kMedian) {
      Value any = b.compare(nans, c(0), Cmp::kGT);
      pos = b.select(any, b.sub(c(static_cast<double>(n)), nans), c(static_cast<double>((n - 1) / 2)));
    } else {
      Value m = b.sub(c(static_cast<double>(n - 1)), nans);
      pos = b.div(b.max(m, c(0)), c(2));
    }
  }
  Value rv = ops::take_at(b, v, pos, d), ri = ops::take_at(b, i, pos, d);
  if (keepdim) {
    rv = b.reshape(rv, to_dims(shape));
    ri = b.reshape(ri, to_dims(shape));
  }
  return emit(k, self, rv, ri, o);
}

std::tuple<at::Tensor&, at::Tensor&> kthvalue_values(const at::Tensor& self, int64_t kth, int64_t dim, bool keepdim,
                                                     at::Tensor& values, at::Tensor& indices) {
  select_impl("aten::kthvalue.values", "kthvalue", Select::kKth, self, kth, dim, keepdim, {&values, &indices});
  return {values, indices};
}
std::tuple<at::Tensor&, at::Tensor&> median_dim_values(const at::Tensor& self, int64_t dim, bool keepdim,
                                                       at::Tensor& values, at::Tensor& indices) {
  select_impl("aten::median.dim_values", "median", Select::kMedian, self, 0, dim, keepdim, {&values, &indices});
  return {values, indices};
}
std::tuple<at::Tensor&, at::Tensor&> nanmedian_dim_values(const at::Tensor& self, int64_t dim, bool keepdim,
                                                          at::Tensor& values, at::Tensor& indices) {
  select_impl("aten::nanmedian.dim_values", "nanmedian", Select::kNanMedian, self, 0, dim, keepdim,
              {&values, &indices});
  return {values, indices};
}

// mode: the most frequent value of each slice (ops::mode_rows: exact up to
// 16 elements; longer slices agree on the value, the index may be another
// position of it).
std::tuple<at::Tensor, at::Tensor> mode_impl(const at::Tensor& self, int64_t dim, bool keepdim, const Pair& o) {
  const char* op = o.vo ? "aten::mode.values" : "aten::mode";
  check_pair_outs(op, self, o);
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  if (self.dim() > 0 && self.size(d) == 0)
    TORCH_CHECK_INDEX(false, "mode(): Expected reduction dim ", d, " to have non-zero size.");
  const std::vector<int64_t> shape = reduced_shape(self, d, keepdim);
  if (self.numel() == 0) return empty_pair(self, shape, o);
  const int64_t n = self.dim() > 0 ? self.size(d) : 1;
  Kernel k(op, self);
  Builder& b = k.b();
  Value x = k.in(self);
  if (self.dim() == 0) return emit(k, self, x, b.constant(DType::kS64, 0), o);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < self.dim(); ++i)
    if (i != d) perm.push_back(i);
  perm.push_back(d);
  Value rows = b.reshape(b.transpose(x, perm), {self.numel() / n, n});
  auto [v, i] = ops::mode_rows(b, rows);
  return emit(k, self, b.reshape(v, to_dims(shape)), b.reshape(i, to_dims(shape)), o);
}
std::tuple<at::Tensor, at::Tensor> mode(const at::Tensor& self, int64_t dim, bool keepdim) {
  return mode_impl(self, dim, keepdim, {});
}
std::tuple<at::Tensor&, at::Tensor&> mode_values(const at::Tensor& self, int64_t dim, bool keepdim,
                                                 at::Tensor& values, at::Tensor& indices) {
  mode_impl(self, dim, keepdim, {&values, &indices});
  return {values, indices};
}

// median() / nanmedian() of all elements: the value only (NaN when empty).
at::Tensor median_all_impl(const char* op, bool ignore_nan, const at::Tensor& self) {
  if (self.numel() == 0) {
    TORCH_CHECK(at::isFloatingType(self.scalar_type()), op, ": empty input of dtype ", self.scalar_type(),
                " has no median");
    Kernel k(op, self);
    at::Tensor out = k.out(k.b().constant(to_ir(self.scalar_type()), std::nan("")), self.scalar_type());
    k.run();
    return out;
  }
  at::Tensor flat = self.reshape({-1});
  auto [v, i] = select_impl(op, ignore_nan ? "nanmedian" : "median", ignore_nan ? Select::kNanMedian : Select::kMedian,
                            flat, 0, 0, false, {});
  return v;
}
at::Tensor median_all(const at::Tensor& self) {
  return median_all_impl("aten::median", false, self);
}
at::Tensor nanmedian_all(const at::Tensor& self) {
  return median_all_impl("aten::nanmedian", true, self);
}

// ---- cummax / cummin, logcumsumexp ----------------------------------------------------

// Called by cummax/cummin for rank >= 1, non-empty inputs, with outputs of
// self's shape already allocated.
void cum_extreme_helper(const char* op, bool is_max, const at::Tensor& self, at::Tensor& values,
                        at::Tensor& indices, int64_t dim) {
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  Kernel k(op, self);
  auto [v, i] = ops::cumulative_extreme(k.b(), k.in(self), d, is_max);
  k.into_resized(values, v);
  k.into_resized(indices, i);
  k.run();
}
void cummax_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  cum_extreme_helper("aten::_cummax_helper", true, self, values, indices, dim);
}
void cummin_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  cum_extreme_helper("aten::_cummin_helper", false, self, values, indices, dim);
}

// 16-bit floats scan in float32 and round each output once, as the CPU's
// accumulate type does.
at::Tensor logcumsumexp_impl(const at::Tensor& self, int64_t dim, const at::Tensor* out) {
  const char* op = out ? "aten::_logcumsumexp.out" : "aten::_logcumsumexp";
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "\"logcumsumexp_out_cpu\" not implemented for '",
              at::toString(self.scalar_type()), "'");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  Kernel k(op, self);
  const at::ScalarType ct = at::isReducedFloatingType(self.scalar_type()) ? at::kFloat : self.scalar_type();
  Value x = k.in(self, ct);
  if (self.dim() > 0 && self.numel() > 0) x = ops::logcumsumexp(k.b(), x, d);
  at::Tensor r = k.result(x, self.scalar_type(), out);
  k.run();
  return r;
}
at::Tensor& logcumsumexp_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  return handed(out, logcumsumexp_impl(self, dim, given(out)));
}

// ---- searchsorted, bucketize, isin ------------------------------------------------------

// PyTorch's checks (searchsorted_pre_check; the sorter's range is a
// device-side check), the common dtype of boundaries and values, then the
// CPU's binary search row by row.
at::Tensor search_impl(const char* op, const at::Tensor& boundaries, const at::Tensor& input, bool out_int32,
                       bool right, std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter_opt,
                       at::Tensor* out) {
  const at::Tensor sorter = sorter_opt ? *sorter_opt : at::Tensor();
  const at::ScalarType rt = out_int32 ? at::kInt : at::kLong;
  at::Tensor result = out ? *out : empty_device({0}, rt, boundaries.device().index());
  if (sorter.defined()) {
    TORCH_CHECK(sorter.sizes() == boundaries.sizes(), "torch.searchsorted(): boundary and sorter must have the same "
                "size, but got boundary tensor ", boundaries.sizes(), "and got sorter tensor ", sorter.sizes());
    TORCH_CHECK(sorter.scalar_type() == at::kLong, "torch.searchsorted(): sorter must be a tensor of long dtype but "
                "got dtype ", sorter.scalar_type());
  }
  at::native::searchsorted_pre_check(boundaries, input, result, out_int32, right,
                                     side ? std::optional<std::string_view>(*side) : std::nullopt, at::Tensor());
  const bool is_right = side ? *side == "right" : right;
  if (input.numel() == 0) {
    result.resize_(input.sizes());
    return result;
  }
  const at::ScalarType ct = at::result_type(boundaries, input);
  const int64_t n = boundaries.size(-1);
  const int64_t rows = boundaries.dim() == 1 ? 1 : boundaries.numel() / std::max<int64_t>(n, 1);
  Kernel k(op, boundaries);
  Builder& b = k.b();
  Value bnd = b.reshape(k.in(boundaries, ct), {rows, n});
  Value v = b.reshape(k.in(input, ct), {rows, input.numel() / rows});
  Value srt;
  if (sorter.defined() && n > 0) {
    srt = b.reshape(k.in(sorter), {rows, n});
    check_index(k, srt, n, false, Kernel::CheckKind::kRuntime, "torch.searchsorted(): sorter index out of range");
  }
  Value r = b.reshape(ops::search_sorted(b, bnd, srt, v, is_right), to_dims(input.sizes()));
  if (out) {
    k.into_resized(*out, r);
  } else {
    result = k.out(r, rt);
  }
  k.run();
  return result;
}
at::Tensor searchsorted_tensor(const at::Tensor& boundaries, const at::Tensor& self, bool out_int32, bool right,
                               std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  return search_impl("aten::searchsorted", boundaries, self, out_int32, right, side, sorter, nullptr);
}
at::Tensor& searchsorted_tensor_out(const at::Tensor& boundaries, const at::Tensor& self, bool out_int32, bool right,
                                    std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter,
                                    at::Tensor& out) {
  search_impl("aten::searchsorted.out", boundaries, self, out_int32, right, side, sorter, &out);
  return out;
}
at::Tensor searchsorted_scalar(const at::Tensor& boundaries, const at::Scalar& self, bool out_int32, bool right,
                               std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  return search_impl("aten::searchsorted", boundaries,
                     at::native::searchsorted_scalar_tensor(self, boundaries.device()), out_int32, right, side,
                     sorter, nullptr);
}
at::Tensor& searchsorted_scalar_out(const at::Tensor& boundaries, const at::Scalar& self, bool out_int32, bool right,
                                    std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter,
                                    at::Tensor& out) {
  search_impl("aten::searchsorted.out", boundaries, at::native::searchsorted_scalar_tensor(self, boundaries.device()),
              out_int32, right, side, sorter, &out);
  return out;
}
void check_bucketize(const at::Tensor& boundaries) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
}
at::Tensor bucketize_tensor(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  check_bucketize(boundaries);
  return search_impl("aten::bucketize", boundaries, self, out_int32, right, std::nullopt, std::nullopt, nullptr);
}
at::Tensor& bucketize_tensor_out(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right,
                                 at::Tensor& out) {
  check_bucketize(boundaries);
  search_impl("aten::bucketize.out", boundaries, self, out_int32, right, std::nullopt, std::nullopt, &out);
  return out;
}
at::Tensor bucketize_scalar(const at::Scalar& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  check_bucketize(boundaries);
  return search_impl("aten::bucketize", boundaries, at::native::searchsorted_scalar_tensor(self, boundaries.device()),
                     out_int32, right, std::nullopt, std::nullopt, nullptr);
}
at::Tensor& bucketize_scalar_out(const at::Scalar& self, const at::Tensor& boundaries, bool out_int32, bool right,
                                 at::Tensor& out) {
  check_bucketize(boundaries);
  search_impl("aten::bucketize.out", boundaries, at::native::searchsorted_scalar_tensor(self, boundaries.device()),
              out_int32, right, std::nullopt, std::nullopt, &out);
  return out;
}

void check_isin_dtype(at::ScalarType t) {
  TORCH_CHECK(t != at::kBool && !at::isComplexType(t), "Unsupported input type encountered for isin(): ", t);
}

// isin: each element compared (==, in the common dtype) with every test
// element; NaN matches nothing, -0.0 matches 0.0.
at::Tensor isin_impl(const at::Tensor& elements, const at::Tensor& test, bool invert, const at::Tensor* out) {
  const char* op = out ? "aten::isin.out" : "aten::isin";
  check_isin_dtype(elements.scalar_type());
  check_isin_dtype(test.scalar_type());
  if (out)
    TORCH_CHECK(out->scalar_type() == at::kBool, op, ": expected a bool out tensor, got ", out->scalar_type());
  const at::ScalarType ct = at::result_type(elements, test);
  Kernel k(op, elements.device().is_privateuseone() ? elements : test);
  Builder& b = k.b();
  const int64_t e = elements.numel(), t = test.numel();
  Value r;
  if (t == 0 || e == 0) {
    r = b.constant(DType::kBool, 0, to_dims(elements.sizes()));
  } else {
    Value ev = b.broadcast_in_dim(b.reshape(k.in(elements, ct), {e}), {e, t}, {0});
    Value tv = b.broadcast_in_dim(b.reshape(k.in(test, ct), {t}), {e, t}, {1});
    r = b.reshape(b.reduce_max(b.compare(ev, tv, Cmp::kEQ), {1}), to_dims(elements.sizes()));
  }
  if (invert) r = b.logical_not(r);
  at::Tensor result = k.result(r, at::kBool, out);
  k.run();
  return result;
}
at::Tensor& isin_tt_out(const at::Tensor& elements, const at::Tensor& test, bool assume_unique, bool invert,
                        at::Tensor& out) {
  return handed(out, isin_impl(elements, test, invert, given(out)));
}
at::Tensor& isin_ts_out(const at::Tensor& elements, const at::Scalar& test, bool assume_unique, bool invert,
                        at::Tensor& out) {
  return handed(out,
                isin_impl(elements, at::native::searchsorted_scalar_tensor(test, elements.device()), invert, given(out)));
}
at::Tensor& isin_st_out(const at::Scalar& element, const at::Tensor& test, bool assume_unique, bool invert,
                        at::Tensor& out) {
  return handed(out,
                isin_impl(at::native::searchsorted_scalar_tensor(element, test.device()), test, invert, given(out)));
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("_cummax_helper", TORCH_FN(cummax_helper));
  m.impl("_cummin_helper", TORCH_FN(cummin_helper));
  m.out("_logcumsumexp.out", TORCH_FN(logcumsumexp_out), "_logcumsumexp");
  m.impl("bucketize.Scalar", TORCH_FN(bucketize_scalar));
  m.impl("bucketize.Scalar_out", TORCH_FN(bucketize_scalar_out));
  m.impl("bucketize.Tensor", TORCH_FN(bucketize_tensor));
  m.impl("bucketize.Tensor_out", TORCH_FN(bucketize_tensor_out));
  m.out("isin.Scalar_Tensor_out", TORCH_FN(isin_st_out), "isin.Scalar_Tensor");
  m.out("isin.Tensor_Scalar_out", TORCH_FN(isin_ts_out), "isin.Tensor_Scalar");
  m.out("isin.Tensor_Tensor_out", TORCH_FN(isin_tt_out), "isin.Tensor_Tensor");
  m.impl("kthvalue.values", TORCH_FN(kthvalue_values));
  m.impl("median", TORCH_FN(median_all));
  m.impl("median.dim_values", TORCH_FN(median_dim_values));
  m.impl("mode", TORCH_FN(mode));
  m.impl("mode.values", TORCH_FN(mode_values));
  m.impl("nanmedian", TORCH_FN(nanmedian_all));
  m.impl("nanmedian.dim_values", TORCH_FN(nanmedian_dim_values));
  m.impl("searchsorted.Scalar", TORCH_FN(searchsorted_scalar));
  m.impl("searchsorted.Scalar_out", TORCH_FN(searchsorted_scalar_out));
  m.impl("searchsorted.Tensor", TORCH_FN(searchsorted_tensor));
  m.impl("searchsorted.Tensor_out", TORCH_FN(searchsorted_tensor_out));
  m.impl("sort.stable", TORCH_FN(sort_stable));
  m.impl("sort.values_stable", TORCH_FN(sort_values_stable));
  m.impl("topk", TORCH_FN(topk));
  m.impl("topk.values", TORCH_FN(topk_values));
}

}  // namespace torchtpu::aten
