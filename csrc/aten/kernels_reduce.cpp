// Reductions: sum, mean, max/min (full, dim, amax/amin, aminmax),
// argmax/argmin, any/all, equal, and quantile's range check.
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/ops/_assert_async.h>
#include <ATen/ops/nanquantile_native.h>
#include <ATen/ops/quantile_native.h>

#include "aten/registry.h"
#include "aten/reduce_dims.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

std::vector<int64_t> all_dims_of(const at::Tensor& t) {
  std::vector<int64_t> v(t.dim());
  for (int64_t i = 0; i < t.dim(); ++i) v[i] = i;
  return v;
}

// quantile with a tensor q: PyTorch checks q's range only for a CPU q (a
// device q would need a sync); here the check is a device-side assert, so a
// q outside [0, 1] (or NaN) raises at the next sync point instead of giving
// values. The rest is PyTorch's own composite, differentiable as on the CPU.
void check_q_in_range(const at::Tensor& q) {
  if (q.device().is_privateuseone() && q.numel() > 0)
    at::_assert_async(at::logical_and(q.ge(0), q.le(1)).all(), "quantile() q values must be in the range [0, 1]");
}
at::Tensor quantile_q(const at::Tensor& self, const at::Tensor& q, std::optional<int64_t> dim, bool keepdim,
                      c10::string_view interpolation) {
  check_q_in_range(q);
  return at::native::quantile(self, q, dim, keepdim, interpolation);
}
at::Tensor& quantile_q_out(const at::Tensor& self, const at::Tensor& q, std::optional<int64_t> dim, bool keepdim,
                           c10::string_view interpolation, at::Tensor& out) {
  check_q_in_range(q);
  return at::native::quantile_out(self, q, dim, keepdim, interpolation, out);
}
at::Tensor nanquantile_q(const at::Tensor& self, const at::Tensor& q, std::optional<int64_t> dim, bool keepdim,
                         c10::string_view interpolation) {
  check_q_in_range(q);
  return at::native::nanquantile(self, q, dim, keepdim, interpolation);
}
at::Tensor& nanquantile_q_out(const at::Tensor& self, const at::Tensor& q, std::optional<int64_t> dim, bool keepdim,
                              c10::string_view interpolation, at::Tensor& out) {
  check_q_in_range(q);
  return at::native::nanquantile_out(self, q, dim, keepdim, interpolation, out);
}

at::Tensor sum_impl(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, const at::Tensor* out) {
  at::ScalarType rt = dtype ? *dtype
                      : at::isIntegralType(self.scalar_type(), true) ? at::kLong
                                                                     : self.scalar_type();
  if (out && !dtype) rt = out->scalar_type();
  Kernel k("aten::sum", self);
  auto dims = reduce_dims(self, dim);
  Value x = k.in(self, acc_type(rt));
  Value r = keep(k.b(), k.b().reduce_sum(x, dims), self, dims, keepdim);
  at::Tensor result = k.result(r, rt, out);
  k.run();
  return result;
}
at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return handed(out, sum_impl(self, dim, keepdim, dtype, given(out)));
}

at::Tensor mean_impl(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, const at::Tensor* out) {
  at::ScalarType rt = dtype ? *dtype : out ? out->scalar_type() : self.scalar_type();
  TORCH_CHECK(at::isFloatingType(rt) || at::isComplexType(rt),
              "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
              "Got: ", rt);
  Kernel k("aten::mean", self);
  Builder& b = k.b();
  auto dims = reduce_dims(self, dim);
  at::ScalarType at_ = acc_type(rt);
  Value s = b.reduce_sum(k.in(self, at_), dims);
  Value r = keep(b, b.div(s, b.constant(to_ir(at_), static_cast<double>(count_of(self, dims)), b.dims(s))), self,
                 dims, keepdim);
  at::Tensor result = k.result(r, rt, out);
  k.run();
  return result;
}
at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return handed(out, mean_impl(self, dim, keepdim, dtype, given(out)));
}

at::Tensor extreme(const char* op, bool is_max, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   const at::Tensor* out, bool empty_dims_raise = false) {
  TORCH_CHECK(self.numel() > 0 || (dim && !dim->empty()), op,
              "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with "
              "the 'dim' argument.");
  auto dims = reduce_dims(self, dim);
  for (int64_t d : dims)  // no identity to give an empty reduction, as on the CPU
    TORCH_CHECK_INDEX(!empty_dims_raise || self.numel() > 0 || self.size(d) != 0, is_max ? "amax" : "amin",
                      "(): Expected reduction dim ", d, " to have non-zero size.");
  Kernel k(op, self);
  Value x = k.in(self);
  Value r = is_max ? k.b().reduce_max(x, dims) : k.b().reduce_min(x, dims);
  r = keep(k.b(), r, self, dims, keepdim);
  at::Tensor result = k.result(r, self.scalar_type(), out);
  k.run();
  return result;
}
at::Tensor& amax_out(const at::Tensor& s, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  return handed(out, extreme("aten::amax.out", true, s, dim, keepdim, given(out), true));
}
at::Tensor& amin_out(const at::Tensor& s, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  return handed(out, extreme("aten::amin.out", false, s, dim, keepdim, given(out), true));
}
at::Tensor max_all(const at::Tensor& s) {
  TORCH_CHECK(s.numel() > 0, "max(): Expected reduction dim to be specified for input.numel() == 0.");
  return extreme("aten::max", true, s, std::nullopt, false, nullptr);
}
at::Tensor min_all(const at::Tensor& s) {
  TORCH_CHECK(s.numel() > 0, "min(): Expected reduction dim to be specified for input.numel() == 0.");
  return extreme("aten::min", false, s, std::nullopt, false, nullptr);
}

// Index of the first extreme value along `dim` (of a rank >= 1 value).
Value arg_extreme(Builder& b, Value x, int64_t dim, bool is_max) {
  const ir::Dims& d = b.dims(x);
  Value m = is_max ? b.reduce_max(x, {dim}) : b.reduce_min(x, {dim});
  Value mk = b.keepdim(m, d, {dim});
  Value hit = b.compare(x, b.broadcast_to(mk, d), Cmp::kEQ);
  if (ir::is_float(b.dtype(x))) hit = b.logical_or(hit, b.compare(x, x, Cmp::kNE));
  Value idx = b.iota(DType::kS64, d, dim);
  Value big = b.constant(DType::kS64, static_cast<double>(d[dim]), d);
  return b.reduce_min(b.select(hit, idx, big), {dim});
}

at::Tensor arg_impl(const char* op, bool is_max, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                    const at::Tensor* out = nullptr) {
  const char* name = is_max ? "argmax" : "argmin";
  TORCH_CHECK(self.scalar_type() != at::kBool, name, "(): does not support bool input");
  TORCH_CHECK(self.numel() > 0 || dim, name, "(): Expected reduction dim to be specified for input.numel() == 0.");
  if (dim && self.dim() > 0) {
    const int64_t w = at::maybe_wrap_dim(*dim, self.dim());
    TORCH_CHECK_INDEX(self.size(w) > 0, name, "(): Expected reduction dim ", w, " to have non-zero size.");
  }
  Kernel k(op, self);
  Builder& b = k.b();
  Value x = k.in(self);
  Value r;
  if (!dim) {
    x = b.reshape(x, {self.numel()});
    r = arg_extreme(b, x, 0, is_max);
    if (keepdim) r = b.reshape(r, ir::Dims(self.dim(), 1));
  } else if (self.dim() == 0) {
    at::maybe_wrap_dim(*dim, int64_t{0});
    r = b.constant(DType::kS64, 0);
  } else {
    int64_t w = at::maybe_wrap_dim(*dim, self.dim());
    r = arg_extreme(b, x, w, is_max);
    if (keepdim) r = b.keepdim(r, to_dims(self.sizes()), {w});
  }
  at::Tensor result = k.result(r, at::kLong, out);
  k.run();
  return result;
}
at::Tensor& argmax_out(const at::Tensor& s, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  TORCH_CHECK(!out.defined() || out.scalar_type() == at::kLong,
              "argmax(): Expected out tensor to have dtype Long, but got ", out.scalar_type(), " instead");
  return handed(out, arg_impl("aten::argmax.out", true, s, dim, keepdim, given(out)));
}
at::Tensor& argmin_out(const at::Tensor& s, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  TORCH_CHECK(!out.defined() || out.scalar_type() == at::kLong,
              "argmin(): Expected out tensor to have dtype Long, but got ", out.scalar_type(), " instead");
  return handed(out, arg_impl("aten::argmin.out", false, s, dim, keepdim, given(out)));
}

// max/min with out=: as the CPU's, an empty input gives the reduction's
// identity (-inf / +inf or the dtype's limits).
at::Tensor& max_unary_out(const at::Tensor& s, at::Tensor& out) {
  extreme("aten::max.unary_out", true, s, at::IntArrayRef(all_dims_of(s)), false, &out);
  return out;
}
at::Tensor& min_unary_out(const at::Tensor& s, at::Tensor& out) {
  extreme("aten::min.unary_out", false, s, at::IntArrayRef(all_dims_of(s)), false, &out);
  return out;
}

std::tuple<at::Tensor, at::Tensor> aminmax_impl(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                at::Tensor* mn, at::Tensor* mx) {
  if (mn) {
    TORCH_CHECK(mn->scalar_type() == self.scalar_type() && mx->scalar_type() == self.scalar_type(),
                "Expected out tensor to have dtype ", self.scalar_type(), ", but got ", mn->scalar_type(), " and ",
                mx->scalar_type(), " instead");
  }
  std::vector<int64_t> dims;
  if (dim) {
    int64_t w = at::maybe_wrap_dim(*dim, self.dim());
    if (self.dim() > 0) {
      TORCH_CHECK_INDEX(self.size(w) > 0, "aminmax: Expected reduction dim ", w, " to have non-zero size.");
      dims.push_back(w);
    }
  } else {
    TORCH_CHECK(self.numel() > 0,
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
    dims = all_dims_of(self);
  }
  Kernel k("aten::aminmax", self);
  Builder& b = k.b();
  Value x = k.in(self);
  Value lo = keep(b, b.reduce_min(x, dims), self, dims, keepdim && dim.has_value());
  Value hi = keep(b, b.reduce_max(x, dims), self, dims, keepdim && dim.has_value());
  if (keepdim && !dim) {
    lo = b.reshape(lo, ir::Dims(self.dim(), 1));
    hi = b.reshape(hi, ir::Dims(self.dim(), 1));
  }
  at::Tensor a = k.result(lo, self.scalar_type(), mn), c = k.result(hi, self.scalar_type(), mx);
  k.run();
  return {a, c};
}
std::tuple<at::Tensor, at::Tensor> aminmax(const at::Tensor& s, std::optional<int64_t> dim, bool keepdim) {
  return aminmax_impl(s, dim, keepdim, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> aminmax_out(const at::Tensor& s, std::optional<int64_t> dim, bool keepdim,
                                                 at::Tensor& mn, at::Tensor& mx) {
  aminmax_impl(s, dim, keepdim, &mn, &mx);
  return {mn, mx};
}

// hash_tensor (mode 0, the only one): the xor of the elements' 64-bit
// patterns (floats as float64 bits, integers converted to uint64) over `dim`
// (all when empty), as uint64.
at::Tensor hash_impl(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode, const at::Tensor* out) {
  const char* op = out ? "aten::hash_tensor.out" : "aten::hash_tensor";
  TORCH_CHECK(mode == 0, "hash_tensor only supports mode=0 (xor_sum), got mode=", mode);
  TORCH_CHECK(!self.is_complex(), "hash_tensor does not support complex tensors");
  std::vector<int64_t> dims = reduce_dims(self, dim);
  if (self.numel() == 0) {  // as the CPU's zero_numel_check_dims
    TORCH_CHECK(!dim.empty(), "hash_tensor: Expected reduction dim to be specified for input.numel() == 0. Specify "
                "the reduction dim with the 'dim' argument.");
    for (int64_t d : dims)
      TORCH_CHECK_INDEX(self.size(d) != 0, "hash_tensor: Expected reduction dim ", d, " to have non-zero size.");
  }
  Kernel k(op, self);
  Builder& b = k.b();
  Value x = k.in(self);
  Value bits = at::isFloatingType(self.scalar_type()) ? b.bitcast_convert(b.convert(x, DType::kF64), DType::kU64)
                                                     : b.convert(c10::isSignedType(self.scalar_type()) ? b.convert(x, DType::kS64) : x,
                                                                 DType::kU64);
  Value r = keep(b, b.reduce(bits, dims, ir::Body::kXor, 0), self, dims, keepdim);
  at::Tensor res = k.result(r, at::kUInt64, out);
  k.run();
  return res;
}
at::Tensor hash_tensor(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode) {
  return hash_impl(self, dim, keepdim, mode, nullptr);
}
at::Tensor& hash_tensor_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode, at::Tensor& out) {
  hash_impl(self, dim, keepdim, mode, &out);
  return out;
}

// max.dim / min.dim; `vo` and `io` are the out= tensors when given.
std::tuple<at::Tensor, at::Tensor> extreme_dim(const char* op, bool is_max, const at::Tensor& self, int64_t dim,
                                               bool keepdim, const at::Tensor* vo = nullptr,
                                               const at::Tensor* io = nullptr) {
  // As the CPU's: only the reduced dim must be non-empty (an empty dim elsewhere gives empty results).
  if (self.dim() > 0) {
    const int64_t w = at::maybe_wrap_dim(dim, self.dim());
    TORCH_CHECK_INDEX(self.size(w) > 0, is_max ? "max" : "min", "(): Expected reduction dim ", w,
                      " to have non-zero size.");
  }
  if (vo) {
    TORCH_CHECK(vo->scalar_type() == self.scalar_type(), "expected scalar type ", self.scalar_type(),
                " but found ", vo->scalar_type());
    TORCH_CHECK(io->scalar_type() == at::kLong, "expected scalar type Long but found ", io->scalar_type());
  }
  Kernel k(op, self);
  Builder& b = k.b();
  Value x = k.in(self);
  if (self.dim() == 0) {
    at::maybe_wrap_dim(dim, int64_t{0});
    at::Tensor v = k.result(x, self.scalar_type(), vo);
    at::Tensor i = k.result(b.constant(DType::kS64, 0), at::kLong, io);
    k.run();
    return {v, i};
  }
  int64_t w = at::maybe_wrap_dim(dim, self.dim());
  Value v = is_max ? b.reduce_max(x, {w}) : b.reduce_min(x, {w});
  Value i = arg_extreme(b, x, w, is_max);
  if (keepdim) {
    v = b.keepdim(v, to_dims(self.sizes()), {w});
    i = b.keepdim(i, to_dims(self.sizes()), {w});
  }
  at::Tensor vt = k.result(v, self.scalar_type(), vo);
  at::Tensor it = k.result(i, at::kLong, io);
  k.run();
  return {vt, it};
}
std::tuple<at::Tensor&, at::Tensor&> max_dim_out(const at::Tensor& s, int64_t dim, bool keepdim, at::Tensor& v,
                                                 at::Tensor& i) {
  extreme_dim("aten::max.dim_max", true, s, dim, keepdim, &v, &i);
  return {v, i};
}
std::tuple<at::Tensor&, at::Tensor&> min_dim_out(const at::Tensor& s, int64_t dim, bool keepdim, at::Tensor& v,
                                                 at::Tensor& i) {
  extreme_dim("aten::min.dim_min", false, s, dim, keepdim, &v, &i);
  return {v, i};
}
std::tuple<at::Tensor, at::Tensor> max_dim(const at::Tensor& s, int64_t dim, bool keepdim) {
  return extreme_dim("aten::max.dim", true, s, dim, keepdim);
}
std::tuple<at::Tensor, at::Tensor> min_dim(const at::Tensor& s, int64_t dim, bool keepdim) {
  return extreme_dim("aten::min.dim", false, s, dim, keepdim);
}

// any/all give bool (uint8 for a uint8 input); out= takes bool or uint8.
at::Tensor any_all(const char* op, bool any, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   const at::Tensor* out = nullptr) {
  if (out) {
    TORCH_CHECK(out->scalar_type() == at::kBool || out->scalar_type() == at::kByte, op,
                "(): output must be of type bool or uint8, got ", out->scalar_type());
  }
  Kernel k(op, self);
  auto dims = reduce_dims(self, dim);
  Value x = k.in(self, at::kBool);
  Value r = any ? k.b().reduce_max(x, dims) : k.b().reduce_min(x, dims);
  at::Tensor result = k.result(keep(k.b(), r, self, dims, keepdim),
                               self.scalar_type() == at::kByte ? at::kByte : at::kBool, out);
  k.run();
  return result;
}
at::Tensor& any_out(const at::Tensor& s, int64_t dim, bool keepdim, at::Tensor& out) {
  return handed(out, any_all("aten::any.out", true, s, at::IntArrayRef{dim}, keepdim, given(out)));
}
at::Tensor& all_out(const at::Tensor& s, int64_t dim, bool keepdim, at::Tensor& out) {
  return handed(out, any_all("aten::all.out", false, s, at::IntArrayRef{dim}, keepdim, given(out)));
}
at::Tensor& any_dims_out(const at::Tensor& s, at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) {
  return handed(out, any_all("aten::any.dims_out", true, s, dim, keepdim, given(out)));
}
at::Tensor& all_dims_out(const at::Tensor& s, at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) {
  return handed(out, any_all("aten::all.dims_out", false, s, dim, keepdim, given(out)));
}
at::Tensor& any_all_out(const at::Tensor& s, at::Tensor& out) {
  return handed(out, any_all("aten::any.all_out", true, s, std::nullopt, false, given(out)));
}
at::Tensor& all_all_out(const at::Tensor& s, at::Tensor& out) {
  return handed(out, any_all("aten::all.all_out", false, s, std::nullopt, false, given(out)));
}

// Same sizes and values (after type promotion; NaN is unequal): one device
// reduction, read back on the host.
bool equal(const at::Tensor& self, const at::Tensor& other) {
  if (!self.sizes().equals(other.sizes())) return false;
  if (self.numel() == 0) return true;
  const at::ScalarType ct = at::result_type(self, other);
  Kernel k("aten::equal", self);
  Builder& b = k.b();
  Value same = b.compare(k.in(self, ct), k.in(other, ct), Cmp::kEQ);
  at::Tensor r = k.out(b.reduce_min(same, all_dims_of(self)), at::kBool);
  k.run();
  return r.item<bool>();
}

}  // namespace

// Above autograd: the composite records its own ops for backward.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("quantile", TORCH_FN(quantile_q));
  m.impl("quantile.out", TORCH_FN(quantile_q_out));
  m.impl("nanquantile", TORCH_FN(nanquantile_q));
  m.impl("nanquantile.out", TORCH_FN(nanquantile_q_out));
}

TPU_KERNELS(m) {
  m.out("sum.IntList_out", TORCH_FN(sum_out), "sum.dim_IntList");
  m.out("mean.out", TORCH_FN(mean_out), "mean.dim");
  m.out("amax.out", TORCH_FN(amax_out), "amax");
  m.out("amin.out", TORCH_FN(amin_out), "amin");
  m.impl("max", TORCH_FN(max_all));
  m.impl("min", TORCH_FN(min_all));
  m.impl("max.dim", TORCH_FN(max_dim));
  m.impl("min.dim", TORCH_FN(min_dim));
  m.impl("max.dim_max", TORCH_FN(max_dim_out));
  m.impl("hash_tensor", TORCH_FN(hash_tensor));
  m.impl("hash_tensor.out", TORCH_FN(hash_tensor_out));
  m.impl("min.dim_min", TORCH_FN(min_dim_out));
  m.out("argmax.out", TORCH_FN(argmax_out), "argmax");
  m.out("argmin.out", TORCH_FN(argmin_out), "argmin");
  m.impl("aminmax", TORCH_FN(aminmax));
  m.impl("aminmax.out", TORCH_FN(aminmax_out));
  m.out("any.all_out", TORCH_FN(any_all_out), "any");
  m.out("any.out", TORCH_FN(any_out), "any.dim");
  m.out("any.dims_out", TORCH_FN(any_dims_out), "any.dims");
  m.out("all.all_out", TORCH_FN(all_all_out), "all");
  m.out("all.out", TORCH_FN(all_out), "all.dim");
  m.out("all.dims_out", TORCH_FN(all_dims_out), "all.dims");
  m.impl("equal", TORCH_FN(equal));
  m.impl("max.unary_out", TORCH_FN(max_unary_out));
  m.impl("min.unary_out", TORCH_FN(min_unary_out));
}

}  // namespace torchtpu::aten
