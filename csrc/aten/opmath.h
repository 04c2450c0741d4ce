// PyTorch's CPU arithmetic for 16-bit floats (its "opmath" type): bfloat16
// and float16 compute in float32 and round once; reductions accumulate in
// float32.
#pragma once

#include <utility>

#include "aten/tensor_ir.h"

namespace torchtpu::aten {

inline at::ScalarType opmath(at::ScalarType t) {
  return (t == at::kHalf || t == at::kBFloat16 || c10::isFloat8Type(t)) ? at::kFloat : t;
}

// The operands of a binary op in compute type `ct`. With `scalar_in_opmath`
// (mul and div), a 16-bit `ct` and a broadcast scalar `b` (one element), the
// CPU kernel reads b's value at float32 from its own dtype (TensorIterator's
// original_scalar_value) and computes in float32: x * 3.14159 uses the
// float32 constant, not its rounding to `ct`; both values are then float32.
inline std::pair<Value, Value> binary_operands(Kernel& k, const at::Tensor& a, const at::Tensor& b,
                                               at::ScalarType ct, bool scalar_in_opmath) {
  const at::ScalarType o = opmath(ct);
  // The CPU's kernel for a reduced-float tensor times a host scalar has no
  // float8 case.
  TORCH_CHECK_NOT_IMPLEMENTED(!(scalar_in_opmath && c10::isFloat8Type(ct) && !b.device().is_privateuseone()),
                              "\"mul_cpu_reduced_float\" not implemented for '", c10::toString(ct), "'");
  k.elementwise({&a, &b});
  if (!scalar_in_opmath || o == ct || b.numel() != 1) {
    Value y = k.in(b, ct);
    return {k.in(a, ct), y};
  }
  Value y = k.in(b, o);
  return {k.b().convert(k.in(a, ct), to_ir(o)), y};
}

}  // namespace torchtpu::aten
