// Elementwise lowerings on IR values whose dtypes the caller already
// promoted: activations, their derivatives, and math helpers.
#pragma once

#include "ops/builder.h"

namespace torchtpu::ops {

Value erf(Builder& b, Value x);
// log1p accurate to a few ulps in every float dtype.
Value log1p(Builder& b, Value x);
Value sigmoid(Builder& b, Value x);
Value gelu(Builder& b, Value x, bool tanh_approx);
Value gelu_backward(Builder& b, Value grad, Value x, bool tanh_approx);
Value silu(Builder& b, Value x);
Value silu_backward(Builder& b, Value grad, Value x);
Value relu(Builder& b, Value x);
Value sign(Builder& b, Value x);
// Division for integers with floor rounding (Python semantics).
Value floor_divide(Builder& b, Value a, Value c);
Value remainder(Builder& b, Value a, Value c);

}  // namespace torchtpu::ops
