// Shared by the elementwise kernel files: where a result goes (a new tensor,
// `self` in place, or an out= tensor) and how it gets there with PyTorch's
// checks, and Python numbers as wrapped-number tensors.
#pragma once

#include <ATen/ScalarOps.h>

#include "aten/tensor_ir.h"

namespace torchtpu::aten {

inline at::Tensor wrap(const at::Scalar& s) {
  at::Tensor t = c10::scalar_to_tensor(s);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// The device of a binary op: the tpu operand's (the other may be a CPU scalar).
inline c10::Device device_of(const at::Tensor& a, const at::Tensor& b) {
  return a.device().is_privateuseone() ? a.device() : b.device();
}

// Where the result goes: a new tensor, `self` (in place) or `out`.
enum class Dest { kNew, kInplace, kOut };

inline at::Tensor finish(Kernel& k, Value r, at::ScalarType rt, Dest dest, const at::Tensor* target) {
  at::Tensor result;
  if (dest == Dest::kNew || !target->defined()) {
    k.elementwise();
    result = k.out(r, rt);
    // An out= kernel called with an undefined `out` (the functional form
    // registry.h derives from it) hands back the new tensor through `out`.
    if (target) const_cast<at::Tensor&>(*target) = result;
  } else {
    const at::Tensor& t = *target;
    TORCH_CHECK(at::canCast(rt, t.scalar_type()), "result type ", rt, " can't be cast to the desired output type ",
                t.scalar_type());
    // Computed in a wider type (16-bit floats in float32): rounded to the
    // result type first, then cast to the output's, as TensorIterator does.
    if (t.scalar_type() != rt && k.b().dtype(r) != to_ir(rt)) r = k.b().convert(r, to_ir(rt));
    if (dest == Dest::kInplace) {
      TORCH_CHECK(k.b().dims(r).size() <= static_cast<size_t>(t.dim()) || t.numel() == 0,
                  "output with shape ", t.sizes(), " doesn't match the broadcast shape ", k.b().dims(r));
      ir::Dims td = to_dims(t.sizes());
      if (k.b().dims(r) != td) {
        try {
          r = k.b().broadcast_to(r, td);
        } catch (const std::exception&) {
          TORCH_CHECK(false, "output with shape ", t.sizes(), " doesn't match the broadcast shape ",
                      ops::shape_str(k.b().dims(r)));
        }
      }
      k.into(t, r);
    } else {
      k.into_resized(t, r);
    }
    result = t;
  }
  k.run();
  return result;
}

}  // namespace torchtpu::aten
