// Scans and reorderings along dims: cumsum, cumprod, flip, roll.
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "ops/scan.h"

namespace torchtpu::aten {
namespace {

// cumsum/cumprod: integer and bool inputs give int64 unless a dtype is
// given; 16-bit floats accumulate in float32 and round each output once.
at::Tensor& cumulative_out(const char* op, bool product, const at::Tensor& self, int64_t dim,
                           std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  const at::ScalarType rt = dtype ? *dtype
                                  : at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong
                                                                                                  : self.scalar_type();
  TORCH_CHECK(!dtype || out.scalar_type() == *dtype, op, ": provided dtype must match dtype of result tensor. Got ",
              *dtype, " and ", out.scalar_type());
  const at::ScalarType ct = at::isReducedFloatingType(rt) ? at::kFloat : rt;
  Kernel k(op, self);
  Value x = k.in(self, ct);
  if (self.dim() > 0) {
    x = ops::cumulative(k.b(), x, d, product);
  }
  k.into_resized(out, x);
  k.run();
  return out;
}

at::Tensor& cumsum_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return cumulative_out("aten::cumsum.out", false, self, dim, dtype, out);
}

at::Tensor& cumprod_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return cumulative_out("aten::cumprod.out", true, self, dim, dtype, out);
}

at::Tensor flip_kernel(const at::Tensor& self, at::IntArrayRef dims) {
  std::bitset<at::dim_bitset_size> set = at::dim_list_to_bitset(dims, self.dim());
  std::vector<int64_t> rev;
  for (int64_t i = 0; i < self.dim(); ++i)
    if (set[i] && self.size(i) > 1) rev.push_back(i);
  Kernel k("aten::flip", self);
  k.elementwise();  // in self's dimension order, as PyTorch's flip
  at::Tensor out = k.out(k.b().reverse(k.in(self), rev), self.scalar_type());
  k.run();
  return out;
}

// roll: each rolled dim is two slices swapped; no dims rolls the flattened
// tensor.
at::Tensor roll_kernel(const at::Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  if (dims.empty() && shifts.size() == 1) {
    const int64_t zero = 0;
    return roll_kernel(self.flatten(), shifts, at::IntArrayRef(zero)).view(self.sizes());
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dims.size());
  Kernel k("aten::roll", self);
  Builder& b = k.b();
  Value x = k.in(self);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = at::maybe_wrap_dim(dims[i], self.dim());
    const int64_t n = self.size(d);
    if (n == 0) continue;
    const int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    x = b.concatenate({b.slice_dim(x, d, n - s, n), b.slice_dim(x, d, 0, n - s)}, d);
  }
  at::Tensor out = k.out(x, self.scalar_type());
  k.run();
  return out;
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("cumsum.out", TORCH_FN(cumsum_out));
  m.impl("cumprod.out", TORCH_FN(cumprod_out));
  m.impl("flip", TORCH_FN(flip_kernel));
  m.impl("roll", TORCH_FN(roll_kernel));
}

}  // namespace torchtpu::aten
