// Pooling: max pooling with indices, average pooling, adaptive average and
// max pooling, and max unpooling, 2-D and 3-D (1-D ops reach the 2-D ones
// through PyTorch's composites), forward and backward, with the argument
// checks of PyTorch's CPU kernels.
#include <c10/core/SymIntArrayRef.h>

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "ops/pool.h"

namespace torchtpu::aten {
namespace {

at::ScalarType acc_type(at::ScalarType t) { return (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t; }

ir::Dims expand(const char* op, const char* name, at::IntArrayRef a, size_t nsp, const ir::Dims& dflt) {
  if (a.empty()) return dflt;
  TORCH_CHECK(a.size() == 1 || a.size() == nsp, op, ": ", name, " must either be a single int, or a tuple of ", nsp,
              " ints");
  return a.size() == 1 ? ir::Dims(nsp, a[0]) : to_dims(a);
}

void check_input(const char* op, const at::Tensor& self, size_t nsp) {
  const int64_t r = static_cast<int64_t>(nsp);
  TORCH_CHECK(self.dim() == r + 1 || self.dim() == r + 2, op, ": Expected ", r + 1, "D or ", r + 2,
              "D input tensor, but got ", self.sizes());
  for (int64_t i = 1; i < self.dim(); ++i)
    TORCH_CHECK(self.size(i) > 0, op, ": Expected input's non-batch dimensions to have positive length, but input "
                "has a shape of ", self.sizes(), " and non-batch dimension ", self.size(i), " has length zero!");
}

ops::PoolParams pool_params(const char* op, const at::Tensor& self, size_t nsp, at::IntArrayRef kernel,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  check_input(op, self, nsp);
  ops::PoolParams p;
  TORCH_CHECK(!kernel.empty(), op, ": kernel_size must either be a single int, or a tuple of ", nsp, " ints");
  p.kernel = expand(op, "kernel_size", kernel, nsp, {});
  p.stride = expand(op, "stride", stride, nsp, p.kernel);
  p.padding = expand(op, "padding", padding, nsp, ir::Dims(nsp, 0));
  p.dilation = expand(op, "dilation", dilation, nsp, ir::Dims(nsp, 1));
  p.ceil_mode = ceil_mode;
  for (size_t i = 0; i < nsp; ++i) {
    TORCH_CHECK(p.kernel[i] > 0, op, ": kernel size should be greater than zero, but got ", kernel);
    TORCH_CHECK(p.stride[i] > 0, op, ": stride should be greater than zero, but got ", stride);
    TORCH_CHECK(p.dilation[i] > 0, op, ": dilation should be greater than zero, but got ", dilation);
    TORCH_CHECK(p.padding[i] >= 0 && p.padding[i] <= p.kernel[i] / 2, op,
                ": pad should be at most half of effective kernel size, but got pad=", p.padding[i],
                ", kernel_size=", p.kernel[i], " and dilation=", p.dilation[i]);
  }
  ir::Dims out = ops::pool_output_spatial(to_dims(self.sizes()), p);
  for (int64_t o : out)
    TORCH_CHECK(o >= 1, op, ": Given input size ", self.sizes(), ", calculated output size ", ops::shape_str(out),
                ". Output size is too small");
  return p;
}

// ---- max pooling --------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> max_pool_impl(const char* op, size_t nsp, const at::Tensor& self,
                                                 at::IntArrayRef kernel, at::IntArrayRef stride,
                                                 at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                                                 const at::Tensor* out, const at::Tensor* indices) {
  ops::PoolParams p = pool_params(op, self, nsp, kernel, stride, padding, dilation, ceil_mode);
  Kernel k(op, self);
  ops::MaxPool r = ops::max_pool(k.b(), k.in(self), p);
  at::Tensor v = k.result(r.values, self.scalar_type(), out);
  at::Tensor i = k.result(r.indices, at::kLong, indices);
  k.run();
  return {v, i};
}

at::Tensor max_pool_backward_impl(const char* op, size_t nsp, const at::Tensor& grad, const at::Tensor& self,
                                  at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                                  at::IntArrayRef dilation, bool ceil_mode, const at::Tensor& indices,
                                  const at::Tensor* grad_input) {
  ops::PoolParams p = pool_params(op, self, nsp, kernel, stride, padding, dilation, ceil_mode);
  TORCH_CHECK(grad.sizes() == indices.sizes(), op, ": grad_output ", grad.sizes(), " and indices ", indices.sizes(),
              " differ in shape");
  Kernel k(op, self);
  Value g = k.in(grad, self.scalar_type());
  Value r = ops::max_pool_backward(k.b(), g, k.in(indices, at::kLong), to_dims(self.sizes()), p);
  at::Tensor result = k.result(r, self.scalar_type(), grad_input);
  k.run();
  return result;
}

std::tuple<at::Tensor, at::Tensor> max_pool2d(const at::Tensor& s, at::IntArrayRef k, at::IntArrayRef st,
                                              at::IntArrayRef p, at::IntArrayRef d, bool c) {
  return max_pool_impl("aten::max_pool2d_with_indices", 2, s, k, st, p, d, c, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> max_pool2d_out(const at::Tensor& s, at::IntArrayRef k, at::IntArrayRef st,
                                                    at::IntArrayRef p, at::IntArrayRef d, bool c, at::Tensor& out,
                                                    at::Tensor& idx) {
  max_pool_impl("aten::max_pool2d_with_indices.out", 2, s, k, st, p, d, c, &out, &idx);
  return {out, idx};
}
at::Tensor& max_pool2d_backward_out(const at::Tensor& g, const at::Tensor& s, at::IntArrayRef k, at::IntArrayRef st,
                                    at::IntArrayRef p, at::IntArrayRef d, bool c, const at::Tensor& idx,
                                    at::Tensor& gi) {
  max_pool_backward_impl("aten::max_pool2d_with_indices_backward", 2, g, s, k, st, p, d, c, idx, &gi);
  return gi;
}
std::tuple<at::Tensor, at::Tensor> max_pool3d(const at::Tensor& s, at::IntArrayRef k, at::IntArrayRef st,
                                              at::IntArrayRef p, at::IntArrayRef d, bool c) {
  return max_pool_impl("aten::max_pool3d_with_indices", 3, s, k, st, p, d, c, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> max_pool3d_out(const at::Tensor& s, at::IntArrayRef k, at::IntArrayRef st,
                                                    at::IntArrayRef p, at::IntArrayRef d, bool c, at::Tensor& out,
                                                    at::Tensor& idx) {
  max_pool_impl("aten::max_pool3d_with_indices.out", 3, s, k, st, p, d, c, &out, &idx);
  return {out, idx};
}
at::Tensor& max_pool3d_backward_out(const at::Tensor& g, const at::Tensor& s, at::IntArrayRef k, at::IntArrayRef st,
                                    at::IntArrayRef p, at::IntArrayRef d, bool c, const at::Tensor& idx,
                                    at::Tensor& gi) {
  max_pool_backward_impl("aten::max_pool3d_with_indices_backward", 3, g, s, k, st, p, d, c, idx, &gi);
  return gi;
}

// ---- average pooling ------------------------------------------------------------------

void check_float(const char* op, const at::Tensor& t) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t.scalar_type()), op, ": dtype ", t.scalar_type(),
                              " is not supported on tpu (floating point only)");
}

void check_divisor(const char* op, std::optional<int64_t> divisor) {
  TORCH_CHECK(!divisor || *divisor != 0, op, ": divisor must be not zero");
}

at::Tensor avg_pool_impl(const char* op, size_t nsp, const at::Tensor& self, at::IntArrayRef kernel,
                         at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode, bool include_pad,
                         std::optional<int64_t> divisor, const at::Tensor* out) {
  ops::PoolParams p = pool_params(op, self, nsp, kernel, stride, padding, {}, ceil_mode);
  check_float(op, self);
  check_divisor(op, divisor);
  Kernel k(op, self);
  Value r = ops::avg_pool(k.b(), k.in(self, acc_type(self.scalar_type())), p, include_pad, divisor);
  at::Tensor result = k.result(r, self.scalar_type(), out);
  k.run();
  return result;
}

at::Tensor avg_pool_backward_impl(const char* op, size_t nsp, const at::Tensor& grad, const at::Tensor& self,
                                  at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                                  bool ceil_mode, bool include_pad, std::optional<int64_t> divisor,
                                  const at::Tensor* grad_input) {
  ops::PoolParams p = pool_params(op, self, nsp, kernel, stride, padding, {}, ceil_mode);
  check_float(op, self);
  check_divisor(op, divisor);
  ir::Dims out = ops::pool_output_spatial(to_dims(self.sizes()), p);
  TORCH_CHECK(ir::Dims(grad.sizes().end() - nsp, grad.sizes().end()) == out && grad.dim() == self.dim(), op,
              ": grad_output has shape ", grad.sizes(), ", expected spatial sizes ", ops::shape_str(out));
  Kernel k(op, self);
  Value g = k.in(grad, acc_type(self.scalar_type()));
  Value r = ops::avg_pool_backward(k.b(), g, to_dims(self.sizes()), p, include_pad, divisor);
  at::Tensor result = k.result(r, self.scalar_type(), grad_input);
  k.run();
  return result;
}

at::Tensor& avg_pool2d_out(const at::Tensor& s, at::IntArrayRef k, at::IntArrayRef st, at::IntArrayRef p, bool c,
                           bool inc, std::optional<int64_t> div, at::Tensor& out) {
  avg_pool_impl("aten::avg_pool2d.out", 2, s, k, st, p, c, inc, div, &out);
  return out;
}
at::Tensor& avg_pool2d_backward_out(const at::Tensor& g, const at::Tensor& s, at::IntArrayRef k, at::IntArrayRef st,
                                    at::IntArrayRef p, bool c, bool inc, std::optional<int64_t> div, at::Tensor& gi) {
  avg_pool_backward_impl("aten::avg_pool2d_backward", 2, g, s, k, st, p, c, inc, div, &gi);
  return gi;
}
at::Tensor& avg_pool3d_out(const at::Tensor& s, at::IntArrayRef k, at::IntArrayRef st, at::IntArrayRef p, bool c,
                           bool inc, std::optional<int64_t> div, at::Tensor& out) {
  avg_pool_impl("aten::avg_pool3d.out", 3, s, k, st, p, c, inc, div, &out);
  return out;
}
at::Tensor& avg_pool3d_backward_out(const at::Tensor& g, const at::Tensor& s, at::IntArrayRef k, at::IntArrayRef st,
                                    at::IntArrayRef p, bool c, bool inc, std::optional<int64_t> div, at::Tensor& gi) {
  avg_pool_backward_impl("aten::avg_pool3d_backward", 3, g, s, k, st, p, c, inc, div, &gi);
  return gi;
}

// ---- adaptive average pooling ------------------------------------------------------------

at::Tensor adaptive_impl(const char* op, size_t nsp, const at::Tensor& self, c10::SymIntArrayRef output_size,
                         const at::Tensor* out) {
  check_input(op, self, nsp);
  check_float(op, self);
  TORCH_CHECK(output_size.size() == nsp, op, ": output_size must be ", nsp);
  ir::Dims osz;
  for (const c10::SymInt& s : output_size) {
    osz.push_back(s.guard_int(__FILE__, __LINE__));
    TORCH_CHECK(osz.back() >= 0, op, ": elements of output_size must be greater than or equal to 0 but received ",
                osz.back());
  }
  Kernel k(op, self);
  Value r = ops::adaptive_avg_pool(k.b(), k.in(self, acc_type(self.scalar_type())), osz);
  at::Tensor result = k.result(r, self.scalar_type(), out);
  k.run();
  return result;
}

at::Tensor adaptive_backward_impl(const char* op, size_t nsp, const at::Tensor& grad, const at::Tensor& self) {
  check_input(op, self, nsp);
  check_float(op, self);
  TORCH_CHECK(grad.dim() == self.dim(), op, ": grad_output and input ranks differ (", grad.sizes(), " and ",
              self.sizes(), ")");
  Kernel k(op, self);
  ir::Dims in(self.sizes().end() - nsp, self.sizes().end());
  Value r = ops::adaptive_avg_pool_backward(k.b(), k.in(grad, acc_type(self.scalar_type())), in);
  at::Tensor result = k.out(r, self.scalar_type());
  k.run();
  return result;
}

at::Tensor adaptive_avg_pool2d(const at::Tensor& s, c10::SymIntArrayRef o) {
  return adaptive_impl("aten::_adaptive_avg_pool2d", 2, s, o, nullptr);
}
at::Tensor& adaptive_avg_pool2d_out(const at::Tensor& s, c10::SymIntArrayRef o, at::Tensor& out) {
  adaptive_impl("aten::adaptive_avg_pool2d.out", 2, s, o, &out);
  return out;
}
at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& g, const at::Tensor& s) {
  return adaptive_backward_impl("aten::_adaptive_avg_pool2d_backward", 2, g, s);
}
at::Tensor adaptive_avg_pool3d(const at::Tensor& s, c10::SymIntArrayRef o) {
  return adaptive_impl("aten::_adaptive_avg_pool3d", 3, s, o, nullptr);
}
at::Tensor& adaptive_avg_pool3d_out(const at::Tensor& s, c10::SymIntArrayRef o, at::Tensor& out) {
  adaptive_impl("aten::adaptive_avg_pool3d.out", 3, s, o, &out);
  return out;
}
at::Tensor adaptive_avg_pool3d_backward(const at::Tensor& g, const at::Tensor& s) {
  return adaptive_backward_impl("aten::_adaptive_avg_pool3d_backward", 3, g, s);
}

// ---- adaptive max pooling and max unpooling -----------------------------------------------

void check_nonempty(const char* op, const at::Tensor& self, size_t nsp) {
  const int64_t r = static_cast<int64_t>(nsp);
  TORCH_CHECK(self.dim() == r + 1 || self.dim() == r + 2, op, ": Expected ", r + 1, "D or ", r + 2,
              "D tensor, but got: ", self.sizes());
  for (int64_t i = 1; i < self.dim(); ++i)
    TORCH_CHECK(self.size(i) > 0, op, ": Expected input to have non-zero size for non-batch dimensions, but input "
                "has sizes ", self.sizes(), " with dimension ", i, " being empty");
}

std::tuple<at::Tensor, at::Tensor> adaptive_max_impl(const char* op, size_t nsp, const at::Tensor& self,
                                                     at::IntArrayRef output_size, const at::Tensor* out,
                                                     const at::Tensor* indices) {
  check_nonempty(op, self, nsp);
  TORCH_CHECK(output_size.size() == nsp, op, ": output_size must have ", nsp, " elements, but got ",
              output_size.size());
  for (int64_t o : output_size)
    TORCH_CHECK(o > 0, op, ": elements of output_size must be greater than 0, but got ", output_size);
  check_float(op, self);
  Kernel k(op, self);
  ops::MaxPool r = ops::adaptive_max_pool(k.b(), k.in(self), to_dims(output_size));
  at::Tensor v = k.result(r.values, self.scalar_type(), out);
  at::Tensor i = k.result(r.indices, at::kLong, indices);
  k.run();
  return {v, i};
}

// 16-bit gradients are summed in float32 and rounded once.
at::Tensor adaptive_max_backward_impl(const char* op, size_t nsp, const at::Tensor& grad, const at::Tensor& self,
                                      const at::Tensor& indices, const at::Tensor* grad_input) {
  check_nonempty(op, self, nsp);
  check_float(op, self);
  TORCH_CHECK(grad.sizes() == indices.sizes() && grad.dim() == self.dim(), op, ": grad_output ", grad.sizes(),
              " and indices ", indices.sizes(), " must have the same shape, of the rank of input ", self.sizes());
  TORCH_CHECK(indices.scalar_type() == at::kLong, op, ": indices must be int64, but got ", indices.scalar_type());
  Kernel k(op, self);
  ir::Dims in(self.sizes().end() - nsp, self.sizes().end());
  Value r = ops::max_pool_scatter_backward(k.b(), k.in(grad, acc_type(self.scalar_type())), k.in(indices), in);
  at::Tensor result = k.result(r, self.scalar_type(), grad_input);
  k.run();
  return result;
}

std::tuple<at::Tensor, at::Tensor> adaptive_max_pool2d(const at::Tensor& s, at::IntArrayRef o) {
  return adaptive_max_impl("aten::adaptive_max_pool2d", 2, s, o, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> adaptive_max_pool2d_out(const at::Tensor& s, at::IntArrayRef o, at::Tensor& out,
                                                             at::Tensor& idx) {
  adaptive_max_impl("aten::adaptive_max_pool2d.out", 2, s, o, &out, &idx);
  return {out, idx};
}
at::Tensor& adaptive_max_pool2d_backward_out(const at::Tensor& g, const at::Tensor& s, const at::Tensor& idx,
                                             at::Tensor& gi) {
  adaptive_max_backward_impl("aten::adaptive_max_pool2d_backward.grad_input", 2, g, s, idx, &gi);
  return gi;
}
std::tuple<at::Tensor, at::Tensor> adaptive_max_pool3d(const at::Tensor& s, at::IntArrayRef o) {
  return adaptive_max_impl("aten::adaptive_max_pool3d", 3, s, o, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> adaptive_max_pool3d_out(const at::Tensor& s, at::IntArrayRef o, at::Tensor& out,
                                                             at::Tensor& idx) {
  adaptive_max_impl("aten::adaptive_max_pool3d.out", 3, s, o, &out, &idx);
  return {out, idx};
}
at::Tensor& adaptive_max_pool3d_backward_out(const at::Tensor& g, const at::Tensor& s, const at::Tensor& idx,
                                             at::Tensor& gi) {
  adaptive_max_backward_impl("aten::adaptive_max_pool3d_backward.grad_input", 3, g, s, idx, &gi);
  return gi;
}

// An index outside the output plane is an error, raised as the CPU raises it
// (at the next sync point outside Debug Eager).
at::Tensor max_unpool_impl(const char* op, size_t nsp, const at::Tensor& self, const at::Tensor& indices,
                           c10::SymIntArrayRef output_size, const at::Tensor* out) {
  TORCH_CHECK(indices.scalar_type() == at::kLong, op, ": elements in indices should be type int64 but got: ",
              indices.scalar_type());
  TORCH_CHECK(output_size.size() == nsp, op, ": There should be exactly ", nsp, " elements in output_size, but got ",
              output_size.size(), " elements.");
  const int64_t r = static_cast<int64_t>(nsp);
  TORCH_CHECK(self.dim() == r + 1 || self.dim() == r + 2, op, ": Input to max_unpooling", nsp, "d should be a ",
              r + 1, "d or ", r + 2, "d Tensor, but got a tensor with ", self.dim(), " dimensions.");
  TORCH_CHECK(self.sizes() == indices.sizes(), op, ": Expected shape of indices to be same as that of the input "
              "tensor (", self.sizes(), ") but got indices tensor with shape: ", indices.sizes());
  for (int64_t i = 1; i < self.dim(); ++i)
    TORCH_CHECK(self.size(i) > 0, op, ": Expected input to have non-zero size for non-batch dimensions, but got ",
                self.sizes(), " with dimension ", i, " being empty.");
  ir::Dims osz;
  int64_t plane = 1;
  for (const c10::SymInt& s : output_size) {
    osz.push_back(s.guard_int(__FILE__, __LINE__));
    plane *= osz.back();
  }
  Kernel k(op, self);
  Value idx = k.in(indices);
  if (indices.numel() > 0)
    check_index(k, idx, plane, /*allow_negative=*/false, Kernel::CheckKind::kRuntime,
                "Found an invalid max index (output volumes are of size " + ops::shape_str(osz) + ")");
  Value v = ops::max_unpool(k.b(), k.in(self), idx, osz);
  at::Tensor result = k.result(v, self.scalar_type(), out);
  k.run();
  return result;
}

void check_unpool3d(const char* op, at::IntArrayRef stride, at::IntArrayRef padding) {
  TORCH_CHECK(stride.size() == 3, op, ": There should be exactly three elements (depth, height, width) in stride, "
              "but got: ", stride.size());
  TORCH_CHECK(padding.size() == 3, op, ": There should be exactly three elements (depth, height, width) in "
              "padding, but got: ", padding.size());
  TORCH_CHECK(stride[0] > 0 && stride[1] > 0 && stride[2] > 0, op,
              ": strides should be greater than zero, but got stride: ", stride);
}

at::Tensor& max_unpool2d_out(const at::Tensor& s, const at::Tensor& i, c10::SymIntArrayRef o, at::Tensor& out) {
  max_unpool_impl("aten::max_unpool2d.out", 2, s, i, o, &out);
  return out;
}
at::Tensor& max_unpool3d_out(const at::Tensor& s, const at::Tensor& i, c10::SymIntArrayRef o, at::IntArrayRef st,
                             at::IntArrayRef p, at::Tensor& out) {
  check_unpool3d("aten::max_unpool3d.out", st, p);
  max_unpool_impl("aten::max_unpool3d.out", 3, s, i, o, &out);
  return out;
}

// Fractional max pooling with the caller's random samples ([N, C, nsp]).
std::tuple<at::Tensor, at::Tensor> fractional_impl(const char* op, size_t nsp, const at::Tensor& self,
                                                   at::IntArrayRef kernel, at::IntArrayRef output_size,
                                                   const at::Tensor& samples, const at::Tensor* out,
                                                   const at::Tensor* indices) {
  check_nonempty(op, self, nsp);
  check_float(op, self);
  TORCH_CHECK(kernel.size() == nsp && output_size.size() == nsp, op, ": kernel_size and output_size must have ", nsp,
              " elements");
  // As the CPU's: at least N rows of samples (the first N are used; N is 1 unbatched), C columns.
  const bool batched = self.dim() == static_cast<int64_t>(nsp) + 2;
  const int64_t n = batched ? self.size(0) : 1, c = self.size(batched ? 1 : 0);
  TORCH_CHECK(samples.dim() == 3 && samples.size(-1) == static_cast<int64_t>(nsp), op,
              ": expected random_samples of shape [N, C, ", nsp, "], got ", samples.sizes());
  TORCH_CHECK(samples.size(0) >= n, "Expect _random_samples.size(0) no less then input batch size.");
  TORCH_CHECK(samples.size(1) == c, "Expect _random_samples.size(1) equals to input channel size.");
  const at::Tensor used = samples.size(0) == n ? samples : samples.narrow(0, 0, n);
  for (size_t d = 0; d < nsp; ++d) {
    const int64_t in = self.size(self.dim() - nsp + d);
    TORCH_CHECK(kernel[d] > 0 && output_size[d] > 0, op, ": kernel_size and output_size must be positive");
    TORCH_CHECK(output_size[d] + kernel[d] - 1 <= in, op, ": pool size ", kernel[d], " too large relative to input ",
                "size ", in, " for output size ", output_size[d]);
  }
  Kernel k(op, self);
  Builder& b = k.b();
  ops::MaxPool r = ops::fractional_max_pool(b, k.in(self), k.in(used, self.scalar_type()), to_dims(kernel),
                                            to_dims(output_size));
  at::Tensor v = k.result(r.values, self.scalar_type(), out);
  at::Tensor i = k.result(r.indices, at::kLong, indices);
  k.run();
  return {v, i};
}
std::tuple<at::Tensor&, at::Tensor&> fractional_max_pool2d_out(const at::Tensor& s, at::IntArrayRef kernel,
                                                               at::IntArrayRef os, const at::Tensor& samples,
                                                               at::Tensor& out, at::Tensor& idx) {
  fractional_impl("aten::fractional_max_pool2d", 2, s, kernel, os, samples, &out, &idx);
  return {out, idx};
}
std::tuple<at::Tensor&, at::Tensor&> fractional_max_pool3d_out(const at::Tensor& s, at::IntArrayRef kernel,
                                                               at::IntArrayRef os, const at::Tensor& samples,
                                                               at::Tensor& out, at::Tensor& idx) {
  fractional_impl("aten::fractional_max_pool3d", 3, s, kernel, os, samples, &out, &idx);
  return {out, idx};
}
at::Tensor& fractional_max_pool2d_backward_out(const at::Tensor& g, const at::Tensor& s, at::IntArrayRef,
                                               at::IntArrayRef, const at::Tensor& idx, at::Tensor& gi) {
  adaptive_max_backward_impl("aten::fractional_max_pool2d_backward", 2, g, s, idx, &gi);
  return gi;
}
at::Tensor& fractional_max_pool3d_backward_out(const at::Tensor& g, const at::Tensor& s, at::IntArrayRef,
                                               at::IntArrayRef, const at::Tensor& idx, at::Tensor& gi) {
  adaptive_max_backward_impl("aten::fractional_max_pool3d_backward", 3, g, s, idx, &gi);
  return gi;
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("max_pool2d_with_indices", TORCH_FN(max_pool2d));
  m.impl("max_pool2d_with_indices.out", TORCH_FN(max_pool2d_out));
  m.out("max_pool2d_with_indices_backward.grad_input", TORCH_FN(max_pool2d_backward_out),
        "max_pool2d_with_indices_backward");
  m.impl("max_pool3d_with_indices", TORCH_FN(max_pool3d));
  m.impl("max_pool3d_with_indices.out", TORCH_FN(max_pool3d_out));
  m.out("max_pool3d_with_indices_backward.grad_input", TORCH_FN(max_pool3d_backward_out),
        "max_pool3d_with_indices_backward");
  m.out("avg_pool2d.out", TORCH_FN(avg_pool2d_out), "avg_pool2d");
  m.out("avg_pool2d_backward.grad_input", TORCH_FN(avg_pool2d_backward_out), "avg_pool2d_backward");
  m.out("avg_pool3d.out", TORCH_FN(avg_pool3d_out), "avg_pool3d");
  m.out("avg_pool3d_backward.grad_input", TORCH_FN(avg_pool3d_backward_out), "avg_pool3d_backward");
  m.impl("_adaptive_avg_pool2d", TORCH_FN(adaptive_avg_pool2d));
  m.impl("adaptive_avg_pool2d.out", TORCH_FN(adaptive_avg_pool2d_out));
  m.impl("_adaptive_avg_pool2d_backward", TORCH_FN(adaptive_avg_pool2d_backward));
  m.impl("_adaptive_avg_pool3d", TORCH_FN(adaptive_avg_pool3d));
  m.impl("adaptive_avg_pool3d.out", TORCH_FN(adaptive_avg_pool3d_out));
  m.impl("_adaptive_avg_pool3d_backward", TORCH_FN(adaptive_avg_pool3d_backward));
  m.impl("adaptive_max_pool2d", TORCH_FN(adaptive_max_pool2d));
  m.impl("adaptive_max_pool2d.out", TORCH_FN(adaptive_max_pool2d_out));
  m.out("adaptive_max_pool2d_backward.grad_input", TORCH_FN(adaptive_max_pool2d_backward_out),
        "adaptive_max_pool2d_backward");
  m.impl("adaptive_max_pool3d", TORCH_FN(adaptive_max_pool3d));
  m.impl("adaptive_max_pool3d.out", TORCH_FN(adaptive_max_pool3d_out));
  m.out("adaptive_max_pool3d_backward.grad_input", TORCH_FN(adaptive_max_pool3d_backward_out),
        "adaptive_max_pool3d_backward");
  m.impl("fractional_max_pool2d.output", TORCH_FN(fractional_max_pool2d_out));
  m.impl("fractional_max_pool3d.output", TORCH_FN(fractional_max_pool3d_out));
  m.impl("fractional_max_pool2d_backward.grad_input", TORCH_FN(fractional_max_pool2d_backward_out));
  m.out("fractional_max_pool3d_backward.grad_input", TORCH_FN(fractional_max_pool3d_backward_out),
        "fractional_max_pool3d_backward");
  m.out("max_unpool2d.out", TORCH_FN(max_unpool2d_out), "max_unpool2d");
  m.out("max_unpool3d.out", TORCH_FN(max_unpool3d_out), "max_unpool3d");
}

}  // namespace torchtpu::aten
