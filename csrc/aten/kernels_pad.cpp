// Edge padding: reflection_pad and replication_pad, 1-D to 3-D, forward and
// backward, with the argument checks of PyTorch's kernels.

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "ops/pad.h"

namespace torchtpu::aten {
namespace {

using ops::EdgePad;

const char* mode_name(EdgePad m) { return m == EdgePad::kReflect ? "reflection" : "replication"; }

ir::Dims concrete(c10::SymIntArrayRef a) {
  ir::Dims r;
  for (const c10::SymInt& s : a) r.push_back(s.guard_int(__FILE__, __LINE__));
  return r;
}

// PyTorch's padding order (last dim first, {left, right} each) as pairs for
// the trailing dims, outermost first.
ops::EdgePads pairs(const ir::Dims& padding) {
  ops::EdgePads r;
  for (size_t i = padding.size() / 2; i-- > 0;) r.emplace_back(padding[2 * i], padding[2 * i + 1]);
  return r;
}

ops::EdgePads check_forward(const char* op, EdgePad mode, const at::Tensor& self, const ir::Dims& padding,
                            int64_t nsp) {
  TORCH_CHECK(static_cast<int64_t>(padding.size()) == 2 * nsp, op, ": padding size is expected to be ", 2 * nsp,
              ", but got: ", padding.size());
  const int64_t rank = self.dim();
  bool valid = rank == nsp + 1 || rank == nsp + 2;
  for (int64_t d = rank == nsp + 2 ? 1 : 0; valid && d < rank; ++d) valid = self.size(d) != 0;
  TORCH_CHECK(valid, op, ": Expected ", nsp + 1, "D or ", nsp + 2,
              "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: ",
              self.sizes());
  bool positive = true;
  for (int64_t i = 0; i < nsp; ++i) {
    const int64_t d = rank - 1 - i, lo = padding[2 * i], hi = padding[2 * i + 1];
    if (mode == EdgePad::kReflect)
      TORCH_CHECK(lo < self.size(d) && hi < self.size(d), op, ": Argument #", 4 + 2 * i,
                  ": Padding size should be less than the corresponding input dimension, but got: padding (", lo,
                  ", ", hi, ") at dimension ", d, " of input ", self.sizes());
    positive = positive && self.size(d) + lo + hi >= 1;
  }
  TORCH_CHECK(positive, op, ": input ", self.sizes(), " is too small for padding ", padding,
              ": every padded size must be at least 1");
  return pairs(padding);
}

at::Tensor pad_impl(const char* op, EdgePad mode, int64_t nsp, const at::Tensor& self, c10::SymIntArrayRef padding,
                    const at::Tensor* out) {
  ops::EdgePads pads = check_forward(op, mode, self, concrete(padding), nsp);
  Kernel k(op, self);
  at::Tensor result = k.result(ops::edge_pad(k.b(), k.in(self), pads, mode), self.scalar_type(), out);
  k.run();
  return result;
}

// 16-bit floats accumulate in their own type on the CPU, one rounding per
// addition; the lowering sums at most three terms per element per dim in the
// gradient's type.
at::Tensor pad_backward_impl(const char* op, EdgePad mode, int64_t nsp, const at::Tensor& grad,
                             const at::Tensor& self, c10::SymIntArrayRef padding, const at::Tensor* grad_input) {
  const ir::Dims pad = concrete(padding);
  TORCH_CHECK(static_cast<int64_t>(pad.size()) == 2 * nsp, op, ": padding size is expected to be ", 2 * nsp,
              ", but got: ", pad.size());
  TORCH_CHECK(self.dim() == nsp + 1 || self.dim() == nsp + 2, op, ": Expected ", nsp + 1, "D or ", nsp + 2,
              "D input, but got: ", self.sizes());
  TORCH_CHECK(grad.dim() == self.dim(), op, ": grad_output ", grad.sizes(), " and input ", self.sizes(),
              " differ in rank");
  static const char* labels[] = {"width", "height", "depth"};
  for (int64_t d = 0; d < self.dim() - nsp; ++d)
    TORCH_CHECK(grad.size(d) == self.size(d), op, ": grad_output ", grad.sizes(), " does not match input ",
                self.sizes(), " at dimension ", d);
  for (int64_t i = 0; i < nsp; ++i) {
    const int64_t d = self.dim() - 1 - i, expect = self.size(d) + pad[2 * i] + pad[2 * i + 1];
    TORCH_CHECK(grad.size(d) == expect, op, ": grad_output ", labels[i], " unexpected. Expected: ", expect,
                ", Got: ", grad.size(d));
  }
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()), op, ": ",
              mode_name(mode), " padding backward is not implemented for ", self.scalar_type());
  Kernel k(op, self);
  Value g = k.in(grad, self.scalar_type());
  Value r = ops::edge_pad_backward(k.b(), g, to_dims(self.sizes()), pairs(pad), mode);
  at::Tensor result = k.result(r, self.scalar_type(), grad_input);
  k.run();
  return result;
}

// The out= kernels of a padding mode and its backward (functional forms derived).
#define TPU_PAD_KERNELS(NAME, MODE, NSP)                                                           \
  at::Tensor& NAME##_out(const at::Tensor& s, c10::SymIntArrayRef p, at::Tensor& out) {            \
    pad_impl("aten::" #NAME ".out", MODE, NSP, s, p, &out);                                        \
    return out;                                                                                    \
  }                                                                                                \
  at::Tensor& NAME##_backward_out(const at::Tensor& g, const at::Tensor& s, c10::SymIntArrayRef p, \
                                  at::Tensor& gi) {                                                \
    pad_backward_impl("aten::" #NAME "_backward.grad_input", MODE, NSP, g, s, p, &gi);             \
    return gi;                                                                                     \
  }

TPU_PAD_KERNELS(reflection_pad1d, EdgePad::kReflect, 1)
TPU_PAD_KERNELS(reflection_pad2d, EdgePad::kReflect, 2)
TPU_PAD_KERNELS(reflection_pad3d, EdgePad::kReflect, 3)
TPU_PAD_KERNELS(replication_pad1d, EdgePad::kReplicate, 1)
TPU_PAD_KERNELS(replication_pad2d, EdgePad::kReplicate, 2)
TPU_PAD_KERNELS(replication_pad3d, EdgePad::kReplicate, 3)
#undef TPU_PAD_KERNELS

}  // namespace

TPU_KERNELS(m) {
  m.out("reflection_pad1d.out", TORCH_FN(reflection_pad1d_out), "reflection_pad1d");
  m.out("reflection_pad1d_backward.grad_input", TORCH_FN(reflection_pad1d_backward_out), "reflection_pad1d_backward");
  m.out("reflection_pad2d.out", TORCH_FN(reflection_pad2d_out), "reflection_pad2d");
  m.out("reflection_pad2d_backward.grad_input", TORCH_FN(reflection_pad2d_backward_out), "reflection_pad2d_backward");
  m.out("reflection_pad3d.out", TORCH_FN(reflection_pad3d_out), "reflection_pad3d");
  m.out("reflection_pad3d_backward.grad_input", TORCH_FN(reflection_pad3d_backward_out), "reflection_pad3d_backward");
  m.out("replication_pad1d.out", TORCH_FN(replication_pad1d_out), "replication_pad1d");
  m.out("replication_pad1d_backward.grad_input", TORCH_FN(replication_pad1d_backward_out),
        "replication_pad1d_backward");
  m.out("replication_pad2d.out", TORCH_FN(replication_pad2d_out), "replication_pad2d");
  m.out("replication_pad2d_backward.grad_input", TORCH_FN(replication_pad2d_backward_out),
        "replication_pad2d_backward");
  m.out("replication_pad3d.out", TORCH_FN(replication_pad3d_out), "replication_pad3d");
  m.out("replication_pad3d_backward.grad_input", TORCH_FN(replication_pad3d_backward_out),
        "replication_pad3d_backward");
}

}  // namespace torchtpu::aten
