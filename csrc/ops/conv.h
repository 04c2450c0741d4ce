// Convolution lowerings in PyTorch's terms, on stablehlo.convolution. Values
// are channels-first: input [N, C, *S], weight [O, C/groups, *K], or for a
// transposed convolution [C, O/groups, *K]; any number of spatial dims.
// Backward ops are convolutions too: the input gradient convolves the output
// gradient with the flipped kernel (lhs dilation = stride); the weight
// gradient convolves the input with the output gradient, batch and feature
// dims swapped (batch_group_count = groups).
#pragma once

#include "ops/builder.h"

namespace torchtpu::ops {

// One entry per spatial dim in each list.
struct ConvParams {
  Dims stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

// Spatial sizes of the forward result (PyTorch's formula).
Dims conv_output_spatial(const Dims& input, const Dims& weight, const ConvParams& p);
Value conv_forward(Builder& b, Value input, Value weight, const ConvParams& p);
// Gradients of conv_forward with respect to its input and its weight.
Value conv_backward_input(Builder& b, Value grad_out, Value weight, const Dims& input_dims, const ConvParams& p);
Value conv_backward_weight(Builder& b, Value grad_out, Value input, const Dims& weight_dims, const ConvParams& p);

}  // namespace torchtpu::ops
