// Ops whose output size depends on the data: nonzero (and argwhere through
// it), masked_select, repeat_interleave of a repeats tensor, unique and
// unique_consecutive (flat or along a dim); and
// nonzero_static, whose size is given. As on CUDA,
// the number of true elements is read back (a sync point); the compaction
// itself runs on the device.
#include <ATen/ExpandUtils.h>

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "ops/index.h"
#include "ops/scan.h"
#include "ops/unique.h"

namespace torchtpu::aten {
namespace {

// The number of true elements of `mask` (read back: a sync point).
int64_t count_true(const at::Tensor& mask) {
  Kernel k("aten::nonzero", mask);
  Builder& b = k.b();
  Value nz = b.convert(k.in(mask, at::kBool), DType::kS64);
  std::vector<int64_t> dims(mask.dim());
  for (int64_t i = 0; i < mask.dim(); ++i) dims[i] = i;
  at::Tensor n = k.out(b.reduce_sum(nz, dims), at::kLong);
  k.run();
  return n.item<int64_t>();
}

void check_long_out(const char* op, const at::Tensor& self, const at::Tensor& out) {
  TORCH_CHECK(!out.defined() || out.scalar_type() == at::kLong, op, ": Expected object of scalar type Long as out, but got ",
              out.scalar_type());
}

at::Tensor positions(const char* op, const at::Tensor& self, int64_t size, int64_t fill, const at::Tensor* out) {
  Kernel k(op, self);
  Builder& b = k.b();
  Value mask = k.in(self, at::kBool);
  Value r = ops::true_positions(b, mask, size, b.constant(DType::kS64, static_cast<double>(fill)));
  at::Tensor result = k.result(r, at::kLong, out);
  k.run();
  return result;
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  check_long_out("aten::nonzero.out", self, out);
  return handed(out, positions("aten::nonzero", self, count_true(self), 0, given(out)));
}

at::Tensor& nonzero_static_out(const at::Tensor& self, int64_t size, int64_t fill_value, at::Tensor& out) {
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  check_long_out("aten::nonzero_static.out", self, out);
  return handed(out, positions("aten::nonzero_static", self, size, fill_value, given(out)));
}

at::Tensor masked_select_impl(const at::Tensor& self, const at::Tensor& mask, const at::Tensor* out) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  if (out)
    TORCH_CHECK(out->scalar_type() == self.scalar_type(), "masked_select(): self and result must have the same ",
                "scalar type");
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
  const at::Tensor m = mask.expand(shape);
  const int64_t n = count_true(m);
  Kernel k("aten::masked_select", self);
  Builder& b = k.b();
  const ir::Dims d = to_dims(shape);
  Value v = ops::true_values(b, b.broadcast_to(k.in(mask), d), b.broadcast_to(k.in(self), d), n);
  at::Tensor result = k.result(v, self.scalar_type(), out);
  k.run();
  return result;
}
at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  return handed(out, masked_select_impl(self, mask, given(out)));
}

// [0] * repeats[0] ++ [1] * repeats[1] ++ ...: output position o holds the
// number of i >= 1 whose run starts at or before o. Without output_size the
// total is read back (a sync point); a negative repeat raises at the next
// sync point, as does an output_size that is not the total.
at::Tensor repeat_interleave_tensor(const at::Tensor& repeats, std::optional<int64_t> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  const int64_t n = repeats.numel();
  auto totals = [&](Kernel& k) {
    Builder& b = k.b();
    Value r = k.in(repeats, at::kLong);
    k.check(b.reduce_max(b.compare(r, b.zeros_like(r), ops::Cmp::kLT), {0}), Kernel::CheckKind::kRuntime,
            "repeats can not be negative");
    return b.reduce_sum(r, {0});
  };
  int64_t size = 0;
  if (output_size) {
    size = *output_size;
  } else {
    Kernel k("aten::repeat_interleave", repeats);
    at::Tensor total = k.out(totals(k), at::kLong);
    k.run();
    size = total.item<int64_t>();
  }
  TORCH_CHECK(size >= 0, "repeat_interleave: output_size must be non-negative, got ", size);
  Kernel k("aten::repeat_interleave", repeats);
  Builder& b = k.b();
  Value total = totals(k);
  if (output_size)
    k.check(b.compare(total, b.constant(DType::kS64, static_cast<double>(size)), ops::Cmp::kNE),
            Kernel::CheckKind::kRuntime, "allocated size does not match required size");
  Value r = b.constant(DType::kS64, 0, {size});
  if (n > 1 && size > 0) {
    Value rv = k.in(repeats, at::kLong);
    Value starts = b.slice_dim(b.sub(ops::cumulative(b, rv, 0, false), rv), 0, 1, n);  // exclusive sums, i >= 1
    Value marks = b.scatter(r, b.reshape(starts, {n - 1, 1}), b.constant(DType::kS64, 1, {n - 1}), {0}, {},
                            ir::Body::kAdd);
    r = ops::cumulative(b, marks, 0, false);
  }
  at::Tensor out = k.out(r, repeats.scalar_type());
  k.run();
  return out;
}

// unique / unique_consecutive of the flat tensor (dim none) or of the slices
// along `dim`: the number of groups is read back (a sync point), then one
// program computes values, inverse and counts. As the CPU: results are sorted
// whatever `sorted` says (the CPU always sorts), and inverse / counts not
// asked for are empty.
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_impl(const char* op, const at::Tensor& self,
                                                           std::optional<int64_t> dim, bool sorted,
                                                           bool return_inverse, bool return_counts) {
  TORCH_CHECK(!self.is_complex(), op, ": complex tensors are not supported");
  const c10::DeviceIndex dev = self.device().index();
  auto empty_long = [&] { return empty_device({0}, at::kLong, dev); };
  int64_t wd = 0, n = 0, cols = 1;
  if (dim) {
    wd = at::maybe_wrap_dim(*dim, self.dim());
    const auto zeros = std::count(self.sizes().begin(), self.sizes().end(), 0);
    if (self.size(wd) == 0) {
      TORCH_CHECK(zeros == 1, "Number of zero sized dimensions is more than one, so unique cannot be applied ");
      return {empty_device(self.sizes(), self.scalar_type(), dev), empty_long(), empty_long()};
    }
    TORCH_CHECK(zeros == 0, "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
    n = self.size(wd);
    cols = self.numel() / n;
  } else {
    n = self.numel();
    if (n == 0)
      return {empty_device({0}, self.scalar_type(), dev),
              return_inverse ? empty_device(self.sizes(), at::kLong, dev) : empty_long(), empty_long()};
  }
  // The rows: `dim` moved first, the rest flattened.
  std::vector<int64_t> perm{wd};
  for (int64_t i = 0; i < self.dim(); ++i)
    if (!dim || i != wd) perm.push_back(i);
  auto rows = [&](Kernel& k) {
    Builder& b = k.b();
    Value x = k.in(self);
    if (dim) x = b.transpose(x, perm);
    return b.reshape(x, {n, cols});
  };
  int64_t m = 0;
  {
    Kernel k(op, self);
    at::Tensor c = k.out(ops::group_count(k.b(), ops::row_groups(k.b(), rows(k), sorted)), at::kLong);
    k.run();
    m = c.item<int64_t>();
  }
  Kernel k(op, self);
  Builder& b = k.b();
  Value x = rows(k);
  ops::Unique u = ops::unique_rows(b, x, ops::row_groups(b, x, sorted), m);
  Value values;
  if (dim) {
    ir::Dims moved{m};
    for (size_t i = 1; i < perm.size(); ++i) moved.push_back(self.size(perm[i]));
    std::vector<int64_t> back(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) back[perm[i]] = static_cast<int64_t>(i);
    values = b.transpose(b.reshape(u.values, moved), back);
  } else {
    values = b.reshape(u.values, {m});
  }
  at::Tensor vt = k.out(values, self.scalar_type());
  at::Tensor it = return_inverse ? k.out(dim ? u.inverse : b.reshape(u.inverse, to_dims(self.sizes())), at::kLong)
                                 : empty_long();
  at::Tensor ct = return_counts ? k.out(u.counts, at::kLong) : empty_long();
  k.run();
  return {vt, it, ct};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor& self, bool sorted, bool return_inverse,
                                                       bool return_counts) {
  return unique_impl("aten::_unique2", self, std::nullopt, true, return_inverse, return_counts);
}
std::tuple<at::Tensor, at::Tensor> unique(const at::Tensor& self, bool sorted, bool return_inverse) {
  auto [v, i, c] = unique_impl("aten::_unique", self, std::nullopt, true, return_inverse, false);
  return {v, i};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_dim(const at::Tensor& self, int64_t dim, bool sorted,
                                                          bool return_inverse, bool return_counts) {
  return unique_impl("aten::unique_dim", self, dim, true, return_inverse, return_counts);
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive(const at::Tensor& self, bool return_inverse,
                                                                  bool return_counts, std::optional<int64_t> dim) {
  return unique_impl("aten::unique_consecutive", self, dim, false, return_inverse, return_counts);
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_dim_consecutive(const at::Tensor& self, int64_t dim,
                                                                      bool return_inverse, bool return_counts) {
  return unique_impl("aten::unique_dim_consecutive", self, dim, false, return_inverse, return_counts);
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("_unique", TORCH_FN(unique));
  m.impl("_unique2", TORCH_FN(unique2));
  m.impl("unique_dim", TORCH_FN(unique_dim));
  m.impl("unique_consecutive", TORCH_FN(unique_consecutive));
  m.impl("unique_dim_consecutive", TORCH_FN(unique_dim_consecutive));
  m.out("masked_select.out", TORCH_FN(masked_select_out), "masked_select");
  m.out("nonzero.out", TORCH_FN(nonzero_out), "nonzero");
  m.out("nonzero_static.out", TORCH_FN(nonzero_static_out), "nonzero_static");
  m.impl("repeat_interleave.Tensor", TORCH_FN(repeat_interleave_tensor));
}

}  // namespace torchtpu::aten
