// Pooling lowerings over the trailing spatial dims of a value [..., *S], in
// PyTorch's terms (kernel, stride, padding, dilation, ceil_mode). Max pooling
// walks the kernel offsets as strided slices, keeping the first maximum (NaN
// wins, as on the CPU), so values and indices agree; an index is flat within
// one plane (h * W + w for 2-D). Its backward places each gradient back with
// interior padding, so no scatter is needed. Average pooling is a
// reduce_window; adaptive average pooling is one matmul per spatial dim with
// PyTorch's window table, for any output size.
#pragma once

#include <optional>

#include "ops/builder.h"

namespace torchtpu::ops {

// One entry per spatial dim in each list.
struct PoolParams {
  Dims kernel, stride, padding, dilation;
  bool ceil_mode = false;
};

// PyTorch's pooling_output_shape for each spatial dim of `input` (trailing).
Dims pool_output_spatial(const Dims& input, const PoolParams& p);

struct MaxPool {
  Value values;
  Value indices;  // s64
};
MaxPool max_pool(Builder& b, Value x, const PoolParams& p);
Value max_pool_backward(Builder& b, Value grad, Value indices, const Dims& input_dims, const PoolParams& p);

// Floating values only; the divisor follows count_include_pad and
// divisor_override as in PyTorch.
Value avg_pool(Builder& b, Value x, const PoolParams& p, bool count_include_pad, std::optional<int64_t> divisor);
Value avg_pool_backward(Builder& b, Value grad, const Dims& input_dims, const PoolParams& p, bool count_include_pad,
                        std::optional<int64_t> divisor);

// `out` / `in`: the output / input sizes of the trailing spatial dims.
Value adaptive_avg_pool(Builder& b, Value x, const Dims& out);
Value adaptive_avg_pool_backward(Builder& b, Value grad, const Dims& in);

// Adaptive max pooling over the same windows, walked in order as the CPU
// does: the first maximum, or the last NaN; indices flat within one plane.
MaxPool adaptive_max_pool(Builder& b, Value x, const Dims& out);
// Scatters (adds) `grad` [..., *O] at the flat in-plane `indices` of planes
// sized `in`; max_unpool scatters (replaces) `x` the same way into planes
// sized `out`.
Value max_pool_scatter_backward(Builder& b, Value grad, Value indices, const Dims& in);

// Fractional max pooling (x [N?, C, *S], samples [P, nsp] with P = the
// number of planes, in x's float dtype): the CPU's window starts per plane,
// int((o + u) * alpha) - int(u * alpha) with alpha = (S - K) / (O - 1) and
// the last window at S - K, with u the plane's sample for that dim (2-D: W
// then H; 3-D: T, H, W); each window walked as the CPU does (the first
// maximum, or the last NaN).
MaxPool fractional_max_pool(Builder& b, Value x, Value samples, const Dims& kernel, const Dims& out);
Value max_unpool(Builder& b, Value x, Value indices, const Dims& out);

}  // namespace torchtpu::ops
