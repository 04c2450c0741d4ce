// Upsampling: nearest and nearest-exact (1-D to 3-D), linear, bilinear,
// trilinear and bicubic, antialiased bilinear and bicubic, and grid sampling
// (2-D and 3-D), forward and backward, with the argument checks of PyTorch's
// kernels. Nearest source indices follow the formula the CPU kernel
// picks for the input's layout and sizes (its vectorized kernels use
// nearest_idx, the generic one HelperInterpNearest), so the same pixel is
// chosen. Interpolation computes in float32 and rounds once.
#include <ATen/Parallel.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/UpSample.h>
#include <ATen/ops/grid_sampler_2d_backward_ops.h>
#include <ATen/ops/grid_sampler_2d_ops.h>
#include <ATen/ops/grid_sampler_3d_backward_ops.h>
#include <ATen/ops/grid_sampler_3d_ops.h>
#include <c10/util/accumulate.h>

#include "aten/registry.h"
#include "aten/fallback.h"
#include "aten/tensor_ir.h"
#include "ops/grid_sample.h"
#include "ops/resample.h"

namespace torchtpu::aten {
namespace {

using ops::NearestRule;
using ops::ResampleAxis;
using Scales = std::vector<std::optional<double>>;

ir::Dims concrete(c10::SymIntArrayRef a) {
  ir::Dims r;
  for (const c10::SymInt& s : a) r.push_back(s.guard_int(__FILE__, __LINE__));
  return r;
}

// PyTorch's upsample_{1,2,3}d_common_check: the full output shape.
ir::Dims common_check(const char* op, at::IntArrayRef input_size, at::IntArrayRef output_size, size_t nsp) {
  try {
    if (nsp == 1) {
      auto r = at::native::upsample_1d_common_check(input_size, output_size);
      return {r.begin(), r.end()};
    }
    if (nsp == 2) {
      auto r = at::native::upsample_2d_common_check(input_size, output_size);
      return {r.begin(), r.end()};
    }
    auto r = at::native::upsample_3d_common_check(input_size, output_size);
    return {r.begin(), r.end()};
  } catch (c10::Error& e) {
    e.add_context(std::string("in ") + op);
    throw;
  }
}

std::vector<ResampleAxis> axes_of(at::IntArrayRef in, const ir::Dims& out, const Scales& scales) {
  std::vector<ResampleAxis> axes;
  const size_t nsp = scales.size();
  for (size_t i = 0; i < nsp; ++i)
    axes.push_back({in[in.size() - nsp + i], out[out.size() - nsp + i], scales[i]});
  return axes;
}

void check_input(const char* op, const at::Tensor& self, size_t nsp) {
  TORCH_CHECK(self.numel() != 0 || c10::multiply_integers(self.sizes().begin() + 1, self.sizes().end()), op,
              ": Non-empty ", nsp + 2, "D data tensor expected but got a tensor with sizes ", self.sizes());
}

void check_dtype(const char* op, at::ScalarType t, bool allow_byte) {
  TORCH_CHECK_NOT_IMPLEMENTED(t == at::kFloat || at::isReducedFloatingType(t) || (allow_byte && t == at::kByte), op,
                              ": dtype ", t, " is not supported on tpu");
}

void check_grad(const char* op, const at::Tensor& grad, const ir::Dims& full_out) {
  TORCH_CHECK(grad.dim() == static_cast<int64_t>(full_out.size()), op, ": Expected grad_output to be a tensor of ",
              full_out.size(), " dimensions but got: dimension ", grad.dim());
  for (int64_t i = 0; i < grad.dim(); ++i)
    TORCH_CHECK(grad.size(i) == full_out[i], op, ": Expected grad_output to have the same shape as output; ",
                "output.size(", i, ") = ", full_out[i], " but got grad_output.size(", i, ") = ", grad.size(i));
}

at::ScalarType acc_type(at::ScalarType t) { return at::isReducedFloatingType(t) ? at::kFloat : t; }

// The CPU's vectorized nearest kernels (channels-last with more than three
// channels, or a small 2-D output) use nearest_idx; the generic kernel the
// HelperInterpNearest formulas.
bool vectorized_nearest(const at::Tensor& self, const ir::Dims& out, size_t nsp) {
  if (nsp == 2)
    return (self.is_contiguous(at::MemoryFormat::ChannelsLast) && self.size(1) > 3) ||
           out[out.size() - 2] + out[out.size() - 1] <= 128;
  if (nsp == 3) return self.is_contiguous(at::MemoryFormat::ChannelsLast3d) && self.size(1) > 3;
  return false;
}

at::Tensor nearest_impl(const char* op, bool exact, const at::Tensor& self, c10::SymIntArrayRef output_size,
                        const Scales& scales, const at::Tensor* out) {
  const size_t nsp = scales.size();
  const ir::Dims full = common_check(op, self.sizes(), concrete(output_size), nsp);
  check_input(op, self, nsp);
  check_dtype(op, self.scalar_type(), /*allow_byte=*/true);
  const bool vec = vectorized_nearest(self, full, nsp);
  const NearestRule rule = exact ? (vec ? NearestRule::kExact : NearestRule::kExactFma)
                                 : (vec ? NearestRule::kFloorIdx : NearestRule::kFloor);
  Kernel k(op, self);
  Value r = ops::upsample_nearest(k.b(), k.in(self), axes_of(self.sizes(), full, scales),
                                  std::vector<NearestRule>(nsp, rule));
  at::Tensor result = k.result(r, self.scalar_type(), out);
  k.run();
  return result;
}

// The backward kernels always use nearest_idx / nearest_exact_idx; 16-bit
// gradients accumulate in float32, as the CPU's buffer does.
at::Tensor nearest_backward_impl(const char* op, bool exact, const at::Tensor& grad, c10::SymIntArrayRef output_size,
                                 c10::SymIntArrayRef input_size, const Scales& scales, const at::Tensor* grad_input) {
  const size_t nsp = scales.size();
  const ir::Dims in = concrete(input_size);
  const ir::Dims full = common_check(op, in, concrete(output_size), nsp);
  check_grad(op, grad, full);
  check_dtype(op, grad.scalar_type(), /*allow_byte=*/false);
  Kernel k(op, grad);
  Value r = ops::upsample_nearest_backward(k.b(), k.in(grad, acc_type(grad.scalar_type())), axes_of(in, full, scales),
                                           std::vector<NearestRule>(nsp, exact ? NearestRule::kExact
                                                                               : NearestRule::kFloorIdx));
  at::Tensor result = k.result(r, grad.scalar_type(), grad_input);
  k.run();
  return result;
}

// The CPU keeps interpolation weights in the tensor's dtype, except in its
// vectorized bilinear kernel, which computes 16-bit inputs in float and rounds
// once. PyTorch takes that kernel for channels-last inputs of more than 3
// channels, outputs whose height + width is at most 128, and 3 channels on
// one thread.
bool bilinear_in_float(const at::Tensor& self, const ir::Dims& full) {
  const int64_t c = self.size(1);
  return (self.is_contiguous(at::MemoryFormat::ChannelsLast) && c > 3) ||
         full[full.size() - 2] + full.back() <= 128 || (at::get_num_threads() == 1 && c == 3);
}

at::Tensor interp_impl(const char* op, bool cubic, const at::Tensor& self, c10::SymIntArrayRef output_size,
                       bool align_corners, const Scales& scales, const at::Tensor* out) {
  const size_t nsp = scales.size();
  const ir::Dims full = common_check(op, self.sizes(), concrete(output_size), nsp);
  check_input(op, self, nsp);
  check_dtype(op, self.scalar_type(), /*allow_byte=*/false);
  Kernel k(op, self);
  const bool in_float = !cubic && nsp == 2 && bilinear_in_float(self, full);
  Value r = ops::upsample_interp(k.b(), k.in(self, at::kFloat), axes_of(self.sizes(), full, scales), align_corners,
                                 cubic, in_float ? ir::DType::kF32 : to_ir(self.scalar_type()));
  at::Tensor result = k.result(r, self.scalar_type(), out);
  k.run();
  return result;
}

at::Tensor interp_backward_impl(const char* op, bool cubic, const at::Tensor& grad, c10::SymIntArrayRef output_size,
                                c10::SymIntArrayRef input_size, bool align_corners, const Scales& scales,
                                const at::Tensor* grad_input) {
  const size_t nsp = scales.size();
  const ir::Dims in = concrete(input_size);
  const ir::Dims full = common_check(op, in, concrete(output_size), nsp);
  check_grad(op, grad, full);
  check_dtype(op, grad.scalar_type(), /*allow_byte=*/false);
  Kernel k(op, grad);
  Value r = ops::upsample_interp_backward(k.b(), k.in(grad, at::kFloat), axes_of(in, full, scales), align_corners,
                                          cubic);
  at::Tensor result = k.result(r, grad.scalar_type(), grad_input);
  k.run();
  return result;
}

// Antialiased bilinear and bicubic: each resized dim sums a window of
// input positions with weights that the host computes as the CPU does and
// hands to the device as two small tables. The forward pass leaves dims of
// unchanged size alone and resizes the width first, as the CPU's separable
// kernel does.
struct AaTables {
  at::Tensor index, weight;
};

AaTables aa_tables(const ResampleAxis& a, bool align_corners, bool cubic, c10::Device device) {
  ops::AntialiasTaps t = ops::antialias_taps(a, align_corners, cubic);
  return {at::from_blob(t.index.data(), {t.taps, a.out}, at::kLong).to(device),
          at::from_blob(t.weight.data(), {t.taps, a.out}, at::kFloat).to(device)};
}

at::Tensor aa_impl(const char* op, bool cubic, const at::Tensor& self, c10::SymIntArrayRef output_size,
                   bool align_corners, const Scales& scales, const at::Tensor* out) {
  const ir::Dims full = common_check(op, self.sizes(), concrete(output_size), 2);
  check_input(op, self, 2);
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() == at::kFloat, op, ": dtype ", self.scalar_type(),
                              " is not supported (float32 only, as on the CPU)");
  const std::vector<ResampleAxis> axes = axes_of(self.sizes(), full, scales);
  AaTables t[2];
  for (int d = 0; d < 2; ++d)
    if (axes[d].in != axes[d].out) t[d] = aa_tables(axes[d], align_corners, cubic, self.device());
  Kernel k(op, self);
  Value x = k.in(self, at::kFloat);
  for (int d = 1; d >= 0; --d)
    if (t[d].index.defined()) x = ops::antialias_apply(k.b(), x, 2 + d, k.in(t[d].index), k.in(t[d].weight));
  at::Tensor result = k.result(x, self.scalar_type(), out);
  k.run();
  return result;
}

at::Tensor aa_backward_impl(const char* op, bool cubic, const at::Tensor& grad, c10::SymIntArrayRef output_size,
                            c10::SymIntArrayRef input_size, bool align_corners, const Scales& scales,
                            const at::Tensor* grad_input) {
  const ir::Dims in = concrete(input_size);
  const ir::Dims full = common_check(op, in, concrete(output_size), 2);
  check_grad(op, grad, full);
  TORCH_CHECK_NOT_IMPLEMENTED(grad.scalar_type() == at::kFloat, op, ": dtype ", grad.scalar_type(),
                              " is not supported (float32 only, as on the CPU)");
  const std::vector<ResampleAxis> axes = axes_of(in, full, scales);
  AaTables t[2];
  for (int d = 0; d < 2; ++d) t[d] = aa_tables(axes[d], align_corners, cubic, grad.device());
  Kernel k(op, grad);
  Value g = k.in(grad, at::kFloat);
  for (int d = 0; d < 2; ++d)
    g = ops::antialias_apply_backward(k.b(), g, 2 + d, k.in(t[d].index), k.in(t[d].weight), axes[d].in);
  at::Tensor result = k.result(g, grad.scalar_type(), grad_input);
  k.run();
  return result;
}

// ---- grid_sampler_2d / 3d --------------------------------------------------------------

// check_grid_sampler_common and the 2-D / 3-D checks.
ops::GridSpec grid_check(const char* op, const at::Tensor& input, const at::Tensor& grid, int64_t interp,
                         int64_t padding, bool align_corners, int64_t dim) {
  TORCH_CHECK(input.dim() == dim && grid.dim() == dim, "grid_sampler(): expected ", dim,
              "D input and grid with same number of dimensions, but got input with sizes ", input.sizes(),
              " and grid with sizes ", grid.sizes());
  TORCH_CHECK(input.size(0) == grid.size(0), "grid_sampler(): expected grid and input to have same batch size, "
              "but got input with sizes ", input.sizes(), " and grid with sizes ", grid.sizes());
  TORCH_CHECK(grid.size(-1) == dim - 2, "grid_sampler(): expected grid to have size ", dim - 2,
              " in last dimension, but got grid with sizes ", grid.sizes());
  for (int64_t i = 2; i < dim; ++i)
    TORCH_CHECK(input.size(i) > 0, "grid_sampler(): expected input to have non-empty spatial dimensions, but input "
                "has sizes ", input.sizes(), " with dimension ", i, " being empty");
  TORCH_CHECK(interp >= 0 && interp <= 2 && padding >= 0 && padding <= 2, op, ": unknown interpolation mode ",
              interp, " or padding mode ", padding);
  TORCH_CHECK(!(dim == 5 && interp == 2), "grid_sampler(): bicubic interpolation only supports 4D input");
  TORCH_CHECK(input.scalar_type() == grid.scalar_type(), "grid_sampler(): expected input and grid to have the same "
              "dtype, but input has ", input.scalar_type(), " and grid has ", grid.scalar_type());
  check_dtype(op, input.scalar_type(), /*allow_byte=*/false);
  return {static_cast<ops::GridInterp>(interp), static_cast<ops::GridPadding>(padding), align_corners};
}

at::Tensor grid_sampler_impl(const char* op, const at::Tensor& input, const at::Tensor& grid, int64_t interp,
                             int64_t padding, bool align_corners, int64_t dim) {
  const ops::GridSpec spec = grid_check(op, input, grid, interp, padding, align_corners, dim);
  std::vector<int64_t> shape{input.size(0), input.size(1)};
  for (int64_t i = 1; i < grid.dim() - 1; ++i) shape.push_back(grid.size(i));
  if (c10::multiply_integers(shape) == 0) return at::empty(shape, input.options());
  Kernel k(op, input);
  Value r = ops::grid_sample(k.b(), k.in(input, at::kFloat), k.in(grid, at::kFloat), spec);
  at::Tensor out = k.out(r, input.scalar_type());
  k.run();
  return out;
}

std::tuple<at::Tensor, at::Tensor> grid_sampler_backward_impl(const char* op, const at::Tensor& grad,
                                                              const at::Tensor& input, const at::Tensor& grid,
                                                              int64_t interp, int64_t padding, bool align_corners,
                                                              std::array<bool, 2> mask, int64_t dim) {
  const ops::GridSpec spec = grid_check(op, input, grid, interp, padding, align_corners, dim);
  at::Tensor gi, gg;
  if (input.numel() == 0 || grid.numel() == 0 || grad.numel() == 0) {
    if (mask[0]) gi = at::zeros_like(input);
    if (mask[1]) gg = at::zeros_like(grid);
    return {gi, gg};
  }
  Kernel k(op, input);
  auto [vi, vg] = ops::grid_sample_backward(k.b(), k.in(grad, at::kFloat), k.in(input, at::kFloat),
                                            k.in(grid, at::kFloat), spec, mask[0], mask[1]);
  if (mask[0]) gi = k.out(vi, input.scalar_type());
  if (mask[1]) gg = k.out(vg, grid.scalar_type());
  k.run();
  return {gi, gg};
}

at::Tensor grid_sampler_2d(const at::Tensor& input, const at::Tensor& grid, int64_t interp, int64_t padding,
                           bool align_corners) {
  return grid_sampler_impl("aten::grid_sampler_2d", input, grid, interp, padding, align_corners, 4);
}
at::Tensor grid_sampler_3d(const at::Tensor& input, const at::Tensor& grid, int64_t interp, int64_t padding,
                           bool align_corners) {
  return grid_sampler_impl("aten::grid_sampler_3d", input, grid, interp, padding, align_corners, 5);
}
std::tuple<at::Tensor, at::Tensor> grid_sampler_2d_backward(const at::Tensor& grad, const at::Tensor& input,
                                                            const at::Tensor& grid, int64_t interp, int64_t padding,
                                                            bool align_corners, std::array<bool, 2> mask) {
  return grid_sampler_backward_impl("aten::grid_sampler_2d_backward", grad, input, grid, interp, padding,
                                    align_corners, mask, 4);
}
std::tuple<at::Tensor, at::Tensor> grid_sampler_3d_backward(const at::Tensor& grad, const at::Tensor& input,
                                                            const at::Tensor& grid, int64_t interp, int64_t padding,
                                                            bool align_corners, std::array<bool, 2> mask) {
  return grid_sampler_backward_impl("aten::grid_sampler_3d_backward", grad, input, grid, interp, padding,
                                    align_corners, mask, 5);
}

using OptD = std::optional<double>;
#define TPU_SCALES_1 OptD s0
#define TPU_SCALES_2 OptD s0, OptD s1
#define TPU_SCALES_3 OptD s0, OptD s1, OptD s2
#define TPU_LIST_1 {s0}
#define TPU_LIST_2 {s0, s1}
#define TPU_LIST_3 {s0, s1, s2}

// The out= kernels of a resampling op and its backward (functional forms derived).
#define TPU_NEAREST(NAME, NSP, EXACT)                                                                     \
  at::Tensor& NAME##_out(const at::Tensor& s, c10::SymIntArrayRef o, TPU_SCALES_##NSP, at::Tensor& out) { \
    return handed(out, nearest_impl("aten::" #NAME ".out", EXACT, s, o, TPU_LIST_##NSP, given(out)));      \
  }                                                                                                       \
  at::Tensor& NAME##_backward_out(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i,      \
                                  TPU_SCALES_##NSP, at::Tensor& gi) {                                     \
    return handed(gi, nearest_backward_impl("aten::" #NAME "_backward.grad_input", EXACT, g, o, i,        \
                                            TPU_LIST_##NSP, given(gi)));                                  \
  }

#define TPU_INTERP(NAME, NSP, CUBIC)                                                                     \
  at::Tensor& NAME##_out(const at::Tensor& s, c10::SymIntArrayRef o, bool ac, TPU_SCALES_##NSP,          \
                         at::Tensor& out) {                                                              \
    return handed(out, interp_impl("aten::" #NAME ".out", CUBIC, s, o, ac, TPU_LIST_##NSP, given(out))); \
  }                                                                                                      \
  at::Tensor& NAME##_backward_out(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i,     \
                                  bool ac, TPU_SCALES_##NSP, at::Tensor& gi) {                           \
    return handed(gi, interp_backward_impl("aten::" #NAME "_backward.grad_input", CUBIC, g, o, i, ac,    \
                                           TPU_LIST_##NSP, given(gi)));                                  \
  }

#define TPU_AA(NAME, CUBIC)                                                                                  \
  at::Tensor& NAME##_out(const at::Tensor& s, c10::SymIntArrayRef o, bool ac, TPU_SCALES_2, at::Tensor& out) { \
    return handed(out, aa_impl("aten::" #NAME ".out", CUBIC, s, o, ac, TPU_LIST_2, given(out)));              \
  }                                                                                                          \
  at::Tensor& NAME##_backward_out(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i,         \
                                  bool ac, TPU_SCALES_2, at::Tensor& gi) {                                   \
    return handed(gi, aa_backward_impl("aten::" #NAME "_backward.grad_input", CUBIC, g, o, i, ac,            \
                                       TPU_LIST_2, given(gi)));                                              \
  }

TPU_AA(_upsample_bilinear2d_aa, false)
TPU_AA(_upsample_bicubic2d_aa, true)
#undef TPU_AA
TPU_NEAREST(upsample_nearest1d, 1, false)
TPU_NEAREST(upsample_nearest2d, 2, false)
TPU_NEAREST(upsample_nearest3d, 3, false)
TPU_NEAREST(_upsample_nearest_exact1d, 1, true)
TPU_NEAREST(_upsample_nearest_exact2d, 2, true)
TPU_NEAREST(_upsample_nearest_exact3d, 3, true)
TPU_INTERP(upsample_linear1d, 1, false)
TPU_INTERP(upsample_bilinear2d, 2, false)
TPU_INTERP(upsample_trilinear3d, 3, false)
TPU_INTERP(upsample_bicubic2d, 2, true)
#undef TPU_NEAREST
#undef TPU_INTERP

}  // namespace

TPU_KERNELS(m) {
  m.impl("grid_sampler_2d", TORCH_FN(grid_sampler_2d));
  m.impl("grid_sampler_2d_backward", TORCH_FN(grid_sampler_2d_backward));
  m.impl("grid_sampler_3d", TORCH_FN(grid_sampler_3d));
  m.impl("grid_sampler_3d_backward", TORCH_FN(grid_sampler_3d_backward));
  m.out("_upsample_bicubic2d_aa.out", TORCH_FN(_upsample_bicubic2d_aa_out), "_upsample_bicubic2d_aa");
  m.out("_upsample_bicubic2d_aa_backward.grad_input", TORCH_FN(_upsample_bicubic2d_aa_backward_out),
        "_upsample_bicubic2d_aa_backward");
  m.out("_upsample_bilinear2d_aa.out", TORCH_FN(_upsample_bilinear2d_aa_out), "_upsample_bilinear2d_aa");
  m.out("_upsample_bilinear2d_aa_backward.grad_input", TORCH_FN(_upsample_bilinear2d_aa_backward_out),
        "_upsample_bilinear2d_aa_backward");
  m.out("_upsample_nearest_exact1d.out", TORCH_FN(_upsample_nearest_exact1d_out), "_upsample_nearest_exact1d");
  m.out("_upsample_nearest_exact1d_backward.grad_input", TORCH_FN(_upsample_nearest_exact1d_backward_out),
        "_upsample_nearest_exact1d_backward");
  m.out("_upsample_nearest_exact2d.out", TORCH_FN(_upsample_nearest_exact2d_out), "_upsample_nearest_exact2d");
  m.out("_upsample_nearest_exact2d_backward.grad_input", TORCH_FN(_upsample_nearest_exact2d_backward_out),
        "_upsample_nearest_exact2d_backward");
  m.out("_upsample_nearest_exact3d.out", TORCH_FN(_upsample_nearest_exact3d_out), "_upsample_nearest_exact3d");
  m.out("_upsample_nearest_exact3d_backward.grad_input", TORCH_FN(_upsample_nearest_exact3d_backward_out),
        "_upsample_nearest_exact3d_backward");
  m.out("upsample_bicubic2d.out", TORCH_FN(upsample_bicubic2d_out), "upsample_bicubic2d");
  m.out("upsample_bicubic2d_backward.grad_input", TORCH_FN(upsample_bicubic2d_backward_out),
        "upsample_bicubic2d_backward");
  m.out("upsample_bilinear2d.out", TORCH_FN(upsample_bilinear2d_out), "upsample_bilinear2d");
  m.out("upsample_bilinear2d_backward.grad_input", TORCH_FN(upsample_bilinear2d_backward_out),
        "upsample_bilinear2d_backward");
  m.out("upsample_linear1d.out", TORCH_FN(upsample_linear1d_out), "upsample_linear1d");
  m.out("upsample_linear1d_backward.grad_input", TORCH_FN(upsample_linear1d_backward_out),
        "upsample_linear1d_backward");
  m.out("upsample_nearest1d.out", TORCH_FN(upsample_nearest1d_out), "upsample_nearest1d");
  m.out("upsample_nearest1d_backward.grad_input", TORCH_FN(upsample_nearest1d_backward_out),
        "upsample_nearest1d_backward");
  m.out("upsample_nearest2d.out", TORCH_FN(upsample_nearest2d_out), "upsample_nearest2d");
  m.out("upsample_nearest2d_backward.grad_input", TORCH_FN(upsample_nearest2d_backward_out),
        "upsample_nearest2d_backward");
  m.out("upsample_nearest3d.out", TORCH_FN(upsample_nearest3d_out), "upsample_nearest3d");
  m.out("upsample_nearest3d_backward.grad_input", TORCH_FN(upsample_nearest3d_backward_out),
        "upsample_nearest3d_backward");
  m.out("upsample_trilinear3d.out", TORCH_FN(upsample_trilinear3d_out), "upsample_trilinear3d");
  m.out("upsample_trilinear3d_backward.grad_input", TORCH_FN(upsample_trilinear3d_backward_out),
        "upsample_trilinear3d_backward");
}

}  // namespace torchtpu::aten
