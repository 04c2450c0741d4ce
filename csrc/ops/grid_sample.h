// Grid sampling (grid_sampler_2d / grid_sampler_3d) and its gradients, as
// PyTorch's CPU kernels compute them (aten/src/ATen/native/GridSampler.h):
// grid coordinates in [-1, 1] are unnormalized to pixel positions, then
// clamped (border) or reflected (reflection) for bilinear and nearest
// sampling; bicubic (2-D only) pads the 4x4 integer taps instead. Taps
// outside the input contribute zero. Values are gathered per batch from the
// input laid out [N, P, C] (P the flattened spatial positions), so each tap
// is one gather of C-long rows; the input gradient scatter-adds the same
// rows back. Computes in float32.
#pragma once

#include <utility>

#include "ops/builder.h"

namespace torchtpu::ops {

enum class GridInterp { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum class GridPadding { kZeros = 0, kBorder = 1, kReflection = 2 };

struct GridSpec {
  GridInterp interp = GridInterp::kBilinear;
  GridPadding padding = GridPadding::kZeros;
  bool align_corners = false;
};

// `x` [N, C, *S] and `grid` [N, *O, k] (k = rank of S; coordinates in
// x, y[, z] order, i.e. the last spatial dim first) -> [N, C, *O].
Value grid_sample(Builder& b, Value x, Value grid, const GridSpec& s);

// `grad` [N, C, *O] -> (grad of x, grad of grid); each only when asked for
// (else an invalid Value).
std::pair<Value, Value> grid_sample_backward(Builder& b, Value grad, Value x, Value grid, const GridSpec& s,
                                             bool want_input, bool want_grid);

}  // namespace torchtpu::ops
