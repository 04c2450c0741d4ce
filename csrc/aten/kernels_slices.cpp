// Copies of slices and windows along one dim: narrow_copy, and
// unfold_backward (the windows' gradients summed back into the input).
#include <ATen/WrapDimUtils.h>

#include "aten/registry.h"
#include "aten/tensor_ir.h"

namespace torchtpu::aten {
namespace {

at::Tensor& narrow_copy_out(const at::Tensor& self, int64_t dim, int64_t start, int64_t length, at::Tensor& out) {
  TORCH_CHECK(self.dim() > 0, "narrow() cannot be applied to a 0-dim tensor.");
  TORCH_CHECK(length >= 0, "narrow(): length must be non-negative.");
  TORCH_CHECK(!out.defined() || out.scalar_type() == self.scalar_type(), "narrow_copy: Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", out.scalar_type(), " instead");
  const int64_t w = at::maybe_wrap_dim(dim, self.dim());
  const int64_t size = self.size(w);
  TORCH_CHECK_INDEX(start >= -size && start <= size, "start out of range (expected to be in range of [", -size, ", ",
                    size, "], but got ", start, ")");
  if (start < 0) start += size;
  TORCH_CHECK(start <= size - length, "start (", start, ") + length (", length, ") exceeds dimension size (", size,
              ").");
  Kernel k("aten::narrow_copy", self);
  k.result(k.b().slice_dim(k.in(self), w, start, start + length), self.scalar_type(), &out);
  k.run();
  return out;
}

// grad_in: input_sizes with `dim` holding the windows, plus a last dim of
// `size`; element (window w, offset j) adds to input position w * step + j.
at::Tensor& unfold_backward_out(const at::Tensor& grad_in, at::IntArrayRef input_sizes, int64_t dim, int64_t size,
                                int64_t step, at::Tensor& out) {
  const int64_t rank = static_cast<int64_t>(input_sizes.size());
  const int64_t w = at::maybe_wrap_dim(dim, std::max<int64_t>(rank, 1));
  TORCH_CHECK(step > 0, "unfold_backward: step must be positive, got ", step);
  TORCH_CHECK(grad_in.dim() == std::max<int64_t>(rank, 1) + (rank == 0 ? 0 : 1) && grad_in.size(-1) == size,
              "unfold_backward: grad of shape ", grad_in.sizes(), " does not match input sizes ", input_sizes,
              " with windows of size ", size, " along dim ", dim);
  Kernel k("aten::unfold_backward", grad_in);
  Builder& b = k.b();
  const DType t = to_ir(grad_in.scalar_type());
  if (rank == 0) {  // a 0-d input unfolds into one window of one element
    k.result(b.reshape(k.in(grad_in), {}), grad_in.scalar_type(), &out);
    k.run();
    return out;
  }
  const int64_t nw = grad_in.size(w);
  // [pre..., nw, post..., size] -> [pre..., nw, size, post...]
  std::vector<int64_t> perm;
  for (int64_t i = 0; i <= w; ++i) perm.push_back(i);
  perm.push_back(rank);
  for (int64_t i = w + 1; i < rank; ++i) perm.push_back(i);
  Value g = b.transpose(k.in(grad_in), perm);
  Value pos = b.add(b.mul(b.iota(DType::kS64, {nw, size}, 0), b.constant(DType::kS64, static_cast<double>(step))),
                    b.iota(DType::kS64, {nw, size}, 1));
  std::vector<int64_t> window;
  for (int64_t i = 0; i < rank + 1; ++i)
    if (i != w && i != w + 1) window.push_back(i);
  Value r = b.scatter(b.constant(t, 0, to_dims(input_sizes)), b.reshape(pos, {nw, size, 1}), g, {w}, window,
                      ir::Body::kAdd);
  k.result(r, grad_in.scalar_type(), &out);
  k.run();
  return out;
}

}  // namespace

TPU_KERNELS(m) {
  m.out("narrow_copy.out", TORCH_FN(narrow_copy_out), "narrow_copy");
  m.out("unfold_backward.out", TORCH_FN(unfold_backward_out), "unfold_backward");
}

}  // namespace torchtpu::aten
