// Sliding-window patches and channel reordering: im2col (nn.functional.unfold),
// col2im (nn.functional.fold, unfold's backward) and channel_shuffle, with
// the argument checks of PyTorch's kernels (im2col_shape_check.h).
#include <ATen/native/im2col_shape_check.h>

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "ops/patches.h"

namespace torchtpu::aten {
namespace {

ops::PatchParams patch_params(const char* op, at::IntArrayRef kernel, at::IntArrayRef dilation,
                              at::IntArrayRef padding, at::IntArrayRef stride) {
  TORCH_CHECK(kernel.size() == 2, op, ": It is expected kernel_size equals to 2, but got size ", kernel.size());
  TORCH_CHECK(dilation.size() == 2, op, ": It is expected dilation equals to 2, but got size ", dilation.size());
  TORCH_CHECK(padding.size() == 2, op, ": It is expected padding equals to 2, but got size ", padding.size());
  TORCH_CHECK(stride.size() == 2, op, ": It is expected stride equals to 2, but got size ", stride.size());
  return {to_dims(kernel), to_dims(dilation), to_dims(padding), to_dims(stride)};
}

at::Tensor im2col_impl(const char* op, const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef dilation,
                       at::IntArrayRef padding, at::IntArrayRef stride, const at::Tensor* out) {
  ops::PatchParams p = patch_params(op, kernel, dilation, padding, stride);
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, op, ": Expected 3D or 4D (batch mode) tensor with possibly 0 "
              "batch size and other non-zero dimensions for input, but got: ", self.sizes());
  at::native::im2col_shape_check(self, at::Tensor(), p.kernel[0], p.kernel[1], p.dilation[0], p.dilation[1],
                                 p.padding[0], p.padding[1], p.stride[0], p.stride[1]);
  const bool batched = self.dim() == 4;
  Kernel k(op, self);
  Value x = k.in(self);
  if (!batched) x = k.b().reshape(x, {1, self.size(0), self.size(1), self.size(2)});
  Value r = ops::im2col(k.b(), x, p);
  if (!batched) r = k.b().reshape(r, {k.b().dims(r)[1], k.b().dims(r)[2]});
  at::Tensor result = k.result(r, self.scalar_type(), out);
  k.run();
  return result;
}

at::Tensor col2im_impl(const char* op, const at::Tensor& self, c10::SymIntArrayRef output_size,
                       at::IntArrayRef kernel, at::IntArrayRef dilation, at::IntArrayRef padding,
                       at::IntArrayRef stride, const at::Tensor* out) {
  ops::PatchParams p = patch_params(op, kernel, dilation, padding, stride);
  TORCH_CHECK(output_size.size() == 2, op, ": It is expected output_size equals to 2, but got size ",
              output_size.size());
  const ir::Dims size{output_size[0].guard_int(__FILE__, __LINE__), output_size[1].guard_int(__FILE__, __LINE__)};
  TORCH_CHECK(self.dim() == 2 || self.dim() == 3, op, ": Expected 2D or 3D (batch mode) tensor for input with "
              "possibly 0 batch size and non-zero dimensions for input, but got: ", self.sizes());
  at::native::col2im_shape_check(self, at::Tensor(), size[0], size[1], p.kernel[0], p.kernel[1], p.dilation[0],
                                 p.dilation[1], p.padding[0], p.padding[1], p.stride[0], p.stride[1]);
  const bool batched = self.dim() == 3;
  Kernel k(op, self);
  Value x = k.in(self);
  if (!batched) x = k.b().reshape(x, {1, self.size(0), self.size(1)});
  Value r = ops::col2im(k.b(), x, size, p);
  if (!batched) r = k.b().reshape(r, {k.b().dims(r)[1], size[0], size[1]});
  at::Tensor result = k.result(r, self.scalar_type(), out);
  k.run();
  return result;
}

at::Tensor channel_shuffle_impl(const char* op, const at::Tensor& self, c10::SymInt groups_, const at::Tensor* out) {
  TORCH_CHECK(self.dim() > 2, op, ": channel_shuffle expects input to have at least 3 dimensions, but got input "
              "with sizes ", self.sizes());
  const int64_t groups = groups_.guard_int(__FILE__, __LINE__);
  TORCH_CHECK(groups > 0, op, ": Number of groups to divide channels in must be positive. Value of groups:", groups);
  TORCH_CHECK(self.size(1) % groups == 0, op, ": Number of channels must be divisible by groups. Got ",
              self.size(1), " channels and ", groups, " groups.");
  Kernel k(op, self);
  at::Tensor result = k.result(ops::channel_shuffle(k.b(), k.in(self), groups), self.scalar_type(), out);
  k.run();
  return result;
}

at::Tensor& channel_shuffle_out(const at::Tensor& s, c10::SymInt g, at::Tensor& out) {
  return handed(out, channel_shuffle_impl("aten::channel_shuffle.out", s, std::move(g), given(out)));
}
at::Tensor& col2im_out(const at::Tensor& s, c10::SymIntArrayRef o, at::IntArrayRef k, at::IntArrayRef d,
                       at::IntArrayRef p, at::IntArrayRef st, at::Tensor& out) {
  return handed(out, col2im_impl("aten::col2im.out", s, o, k, d, p, st, given(out)));
}
at::Tensor& im2col_out(const at::Tensor& s, at::IntArrayRef k, at::IntArrayRef d, at::IntArrayRef p,
                       at::IntArrayRef st, at::Tensor& out) {
  return handed(out, im2col_impl("aten::im2col.out", s, k, d, p, st, given(out)));
}

}  // namespace

TPU_KERNELS(m) {
  m.out("channel_shuffle.out", TORCH_FN(channel_shuffle_out), "channel_shuffle");
  m.out("col2im.out", TORCH_FN(col2im_out), "col2im");
  m.out("im2col.out", TORCH_FN(im2col_out), "im2col");
}

}  // namespace torchtpu::aten
