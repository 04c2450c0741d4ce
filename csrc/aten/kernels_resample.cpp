// Upsampling: nearest and nearest-exact (1-D to 3-D), linear, bilinear,
// trilinear and bicubic, forward and backward, with the argument checks of
// PyTorch's kernels. Nearest source indices follow the formula the CPU kernel
// picks for the input's layout and sizes (its vectorized kernels use
// nearest_idx, the generic one HelperInterpNearest), so the same pixel is
// chosen. Interpolation computes in float32 and rounds once.
#include <ATen/native/UpSample.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include "aten/tensor_ir.h"
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
  if (out) check_same_device(op, self.device(), {out});
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
  if (grad_input) check_same_device(op, grad.device(), {grad_input});
  Kernel k(op, grad);
  Value r = ops::upsample_nearest_backward(k.b(), k.in(grad, acc_type(grad.scalar_type())), axes_of(in, full, scales),
                                           std::vector<NearestRule>(nsp, exact ? NearestRule::kExact
                                                                               : NearestRule::kFloorIdx));
  at::Tensor result = k.result(r, grad.scalar_type(), grad_input);
  k.run();
  return result;
}

// The CPU keeps interpolation weights in the tensor's dtype.
at::Tensor interp_impl(const char* op, bool cubic, const at::Tensor& self, c10::SymIntArrayRef output_size,
                       bool align_corners, const Scales& scales, const at::Tensor* out) {
  const size_t nsp = scales.size();
  const ir::Dims full = common_check(op, self.sizes(), concrete(output_size), nsp);
  check_input(op, self, nsp);
  check_dtype(op, self.scalar_type(), /*allow_byte=*/false);
  if (out) check_same_device(op, self.device(), {out});
  Kernel k(op, self);
  Value r = ops::upsample_interp(k.b(), k.in(self, at::kFloat), axes_of(self.sizes(), full, scales), align_corners,
                                 cubic, to_ir(self.scalar_type()));
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
  if (grad_input) check_same_device(op, grad.device(), {grad_input});
  Kernel k(op, grad);
  Value r = ops::upsample_interp_backward(k.b(), k.in(grad, at::kFloat), axes_of(in, full, scales), align_corners,
                                          cubic);
  at::Tensor result = k.result(r, grad.scalar_type(), grad_input);
  k.run();
  return result;
}

using OptD = std::optional<double>;
#define TPU_SCALES_1 OptD s0
#define TPU_SCALES_2 OptD s0, OptD s1
#define TPU_SCALES_3 OptD s0, OptD s1, OptD s2
#define TPU_LIST_1 {s0}
#define TPU_LIST_2 {s0, s1}
#define TPU_LIST_3 {s0, s1, s2}

#define TPU_NEAREST(NAME, NSP, EXACT)                                                                             \
  at::Tensor NAME(const at::Tensor& s, c10::SymIntArrayRef o, TPU_SCALES_##NSP) {                                 \
    TPU_COUNT("aten::" #NAME);                                                                                    \
    return nearest_impl("aten::" #NAME, EXACT, s, o, TPU_LIST_##NSP, nullptr);                                    \
  }                                                                                                               \
  at::Tensor& NAME##_out(const at::Tensor& s, c10::SymIntArrayRef o, TPU_SCALES_##NSP, at::Tensor& out) {         \
    TPU_COUNT("aten::" #NAME ".out");                                                                             \
    nearest_impl("aten::" #NAME ".out", EXACT, s, o, TPU_LIST_##NSP, &out);                                       \
    return out;                                                                                                   \
  }                                                                                                               \
  at::Tensor NAME##_backward(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i, TPU_SCALES_##NSP) { \
    TPU_COUNT("aten::" #NAME "_backward");                                                                        \
    return nearest_backward_impl("aten::" #NAME "_backward", EXACT, g, o, i, TPU_LIST_##NSP, nullptr);           \
  }                                                                                                               \
  at::Tensor& NAME##_backward_out(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i,              \
                                  TPU_SCALES_##NSP, at::Tensor& gi) {                                             \
    TPU_COUNT("aten::" #NAME "_backward.grad_input");                                                             \
    nearest_backward_impl("aten::" #NAME "_backward.grad_input", EXACT, g, o, i, TPU_LIST_##NSP, &gi);           \
    return gi;                                                                                                    \
  }

#define TPU_INTERP(NAME, NSP, CUBIC)                                                                              \
  at::Tensor NAME(const at::Tensor& s, c10::SymIntArrayRef o, bool ac, TPU_SCALES_##NSP) {                        \
    TPU_COUNT("aten::" #NAME);                                                                                    \
    return interp_impl("aten::" #NAME, CUBIC, s, o, ac, TPU_LIST_##NSP, nullptr);                                 \
  }                                                                                                               \
  at::Tensor& NAME##_out(const at::Tensor& s, c10::SymIntArrayRef o, bool ac, TPU_SCALES_##NSP, at::Tensor& out) { \
    TPU_COUNT("aten::" #NAME ".out");                                                                             \
    interp_impl("aten::" #NAME ".out", CUBIC, s, o, ac, TPU_LIST_##NSP, &out);                                    \
    return out;                                                                                                   \
  }                                                                                                               \
  at::Tensor NAME##_backward(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i, bool ac,          \
                             TPU_SCALES_##NSP) {                                                                  \
    TPU_COUNT("aten::" #NAME "_backward");                                                                        \
    return interp_backward_impl("aten::" #NAME "_backward", CUBIC, g, o, i, ac, TPU_LIST_##NSP, nullptr);        \
  }                                                                                                               \
  at::Tensor& NAME##_backward_out(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i, bool ac,     \
                                  TPU_SCALES_##NSP, at::Tensor& gi) {                                             \
    TPU_COUNT("aten::" #NAME "_backward.grad_input");                                                             \
    interp_backward_impl("aten::" #NAME "_backward.grad_input", CUBIC, g, o, i, ac, TPU_LIST_##NSP, &gi);        \
    return gi;                                                                                                    \
  }

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

#define TPU_REGISTER(NAME)                                                  \
  m.impl(#NAME, TORCH_FN(NAME));                                            \
  m.impl(#NAME ".out", TORCH_FN(NAME##_out));                               \
  m.impl(#NAME "_backward", TORCH_FN(NAME##_backward));                     \
  m.impl(#NAME "_backward.grad_input", TORCH_FN(NAME##_backward_out))

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  TPU_REGISTER(_upsample_nearest_exact1d);
  TPU_REGISTER(_upsample_nearest_exact2d);
  TPU_REGISTER(_upsample_nearest_exact3d);
  TPU_REGISTER(upsample_bicubic2d);
  TPU_REGISTER(upsample_bilinear2d);
  TPU_REGISTER(upsample_linear1d);
  TPU_REGISTER(upsample_nearest1d);
  TPU_REGISTER(upsample_nearest2d);
  TPU_REGISTER(upsample_nearest3d);
  TPU_REGISTER(upsample_trilinear3d);
}
#undef TPU_REGISTER

}  // namespace torchtpu::aten
