// Sums and products over dims beyond sum/mean: nansum, prod and
// count_nonzero. Integer and bool inputs give int64 unless a dtype is given;
// 16-bit floats accumulate in float32 and round once.
#include <ATen/WrapDimUtils.h>

#include "aten/registry.h"
#include "aten/reduce_dims.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

at::ScalarType sum_type(const at::Tensor& self, std::optional<at::ScalarType> dtype, const at::Tensor* out) {
  if (dtype) return *dtype;
  if (out) return out->scalar_type();
  return at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong : self.scalar_type();
}

void check_out(const char* op, const at::Tensor& self, std::optional<at::ScalarType> dtype, const at::Tensor* out) {
  if (!out) return;
  TORCH_CHECK(!dtype || out->scalar_type() == *dtype, op, ": Expected out tensor to have dtype ", *dtype,
              ", but got ", out->scalar_type(), " instead");
}

at::Tensor nansum_impl(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype, const at::Tensor* out) {
  check_out("aten::nansum", self, dtype, out);
  const at::ScalarType rt = sum_type(self, dtype, out);
  Kernel k("aten::nansum", self);
  Builder& b = k.b();
  auto dims = reduce_dims(self, dim);
  Value x = k.in(self, acc_type(rt));
  if (ir::is_float(b.dtype(x))) x = b.select(b.compare(x, x, Cmp::kNE), b.zeros_like(x), x);
  Value r = keep(b, b.reduce_sum(x, dims), self, dims, keepdim);
  at::Tensor result = k.result(r, rt, out);
  k.run();
  return result;
}
at::Tensor& nansum_out(const at::Tensor& s, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dt, at::Tensor& out) {
  return handed(out, nansum_impl(s, dim, keepdim, dt, given(out)));
}

// `dim` empty: the product of all elements.
at::Tensor prod_impl(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, const at::Tensor* out) {
  check_out("aten::prod", self, dtype, out);
  const at::ScalarType rt = sum_type(self, dtype, out);
  Kernel k("aten::prod", self);
  Builder& b = k.b();
  std::vector<int64_t> dims;
  if (dim) {
    dims = reduce_dims(self, at::IntArrayRef{*dim});
  } else {
    dims = reduce_dims(self, std::nullopt);
  }
  const at::ScalarType ct = acc_type(rt);
  Value x = k.in(self, ct);
  Value r = ct == at::kBool ? b.reduce_min(x, dims) : b.reduce(x, dims, ir::Body::kMul, 1);
  r = keep(b, r, self, dims, keepdim && dim.has_value());
  at::Tensor result = k.result(r, rt, out);
  k.run();
  return result;
}
at::Tensor& prod_out(const at::Tensor& s, std::optional<at::ScalarType> dt, at::Tensor& out) {
  return handed(out, prod_impl(s, std::nullopt, false, dt, given(out)));
}
at::Tensor& prod_int_out(const at::Tensor& s, int64_t dim, bool keepdim, std::optional<at::ScalarType> dt,
                         at::Tensor& out) {
  return handed(out, prod_impl(s, dim, keepdim, dt, given(out)));
}

at::Tensor count_nonzero_impl(const at::Tensor& self, at::IntArrayRef dim, const at::Tensor* out) {
  if (out) {
    TORCH_CHECK(out->scalar_type() == at::kLong, "count_nonzero: Expected out tensor to have dtype Long, but got ",
                out->scalar_type(), " instead");
  }
  Kernel k("aten::count_nonzero", self);
  Builder& b = k.b();
  auto dims = reduce_dims(self, dim.empty() ? at::OptionalIntArrayRef() : at::OptionalIntArrayRef(dim));
  Value nz = b.convert(k.in(self, at::kBool), DType::kS64);
  at::Tensor result = k.result(b.reduce_sum(nz, dims), at::kLong, out);
  k.run();
  return result;
}
at::Tensor& count_nonzero_out(const at::Tensor& s, at::IntArrayRef dim, at::Tensor& out) {
  return handed(out, count_nonzero_impl(s, dim, given(out)));
}

}  // namespace

TPU_KERNELS(m) {
  m.out("count_nonzero.dim_IntList_out", TORCH_FN(count_nonzero_out), "count_nonzero.dim_IntList");
  m.out("nansum.out", TORCH_FN(nansum_out), "nansum");
  m.out("prod.out", TORCH_FN(prod_out), "prod");
  m.out("prod.int_out", TORCH_FN(prod_int_out), "prod.dim_int");
}

}  // namespace torchtpu::aten
