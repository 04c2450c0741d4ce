// Resampling of the trailing spatial dims: nearest, linear and cubic
// upsampling as PyTorch computes them (aten/src/ATen/native/UpSample.h and
// cpu/UpSampleKernel.cpp). Each spatial dim is resampled on its own, the last
// dim first, so a multi-dim interpolation sums the same products in the same
// nesting as the CPU kernel. Source indices and weights depend only on the
// sizes, scales and align_corners (structure): nearest indices are computed on
// the host with the CPU's float arithmetic and rebuilt exactly in the graph;
// linear and cubic weights are computed in the graph in float32. Backward
// passes scatter-add the weighted gradient onto the same source positions.
#pragma once

#include <optional>
#include <vector>

#include "ops/builder.h"

namespace torchtpu::ops {

// Which of PyTorch's formulas picks the nearest source index (they differ in
// the last bit of float rounding): kFloor: floor(o * s) (HelperInterpNearest);
// kFloorIdx: nearest_idx (identity and 2x cases first, else kFloor);
// kExact: floor((o + 0.5) * s) (nearest_exact_idx); kExactFma: the rounding of
// HelperInterpNearestExact, floor(fma(s, o + 0.5, -0.5) + 0.5).
enum class NearestRule { kFloor, kFloorIdx, kExact, kExactFma };

// One resampled dim: input and output size, the user's scale (output/input)
// when given.
struct ResampleAxis {
  int64_t in = 1, out = 1;
  std::optional<double> scale;
};

// Host-side source indices of one dim, for each output position.
std::vector<int64_t> nearest_indices(const ResampleAxis& a, NearestRule rule);

// `x` [..., *in] -> [..., *out]; one rule per dim.
Value upsample_nearest(Builder& b, Value x, const std::vector<ResampleAxis>& axes,
                       const std::vector<NearestRule>& rules);
// `grad` [..., *out] -> [..., *in], summed in grad's dtype.
Value upsample_nearest_backward(Builder& b, Value grad, const std::vector<ResampleAxis>& axes,
                                const std::vector<NearestRule>& rules);

// Linear (2 taps per dim) or cubic (4 taps, A = -0.75) interpolation in
// float32. `weights_as`: the weights are rounded to this dtype first (the CPU
// keeps them in the tensor's dtype); pass kF32 for none.
Value upsample_interp(Builder& b, Value x, const std::vector<ResampleAxis>& axes, bool align_corners, bool cubic,
                      DType weights_as);
Value upsample_interp_backward(Builder& b, Value grad, const std::vector<ResampleAxis>& axes, bool align_corners,
                               bool cubic);

// Antialiased resampling (PIL's triangle and a = -0.5 cubic filters, the
// support widened by the scale when downsampling, each output's weights
// normalized), with PyTorch's float arithmetic, computed on the host: per
// output position a window of up to `taps` input positions. Row-major
// [taps, out] tables; index -1 marks a tap past the window.
struct AntialiasTaps {
  int64_t taps = 0;
  std::vector<int64_t> index;
  std::vector<float> weight;
};
AntialiasTaps antialias_taps(const ResampleAxis& a, bool align_corners, bool cubic);
// Resamples dim `dim` of `x` (float32) with the tables (s64 and f32
// [taps, out]): each output sums its window's weighted values in window
// order; values outside the window are never read.
Value antialias_apply(Builder& b, Value x, int64_t dim, Value index, Value weight);
// The gradient: `grad` (dim sized out) scatter-added back onto `in_size`.
Value antialias_apply_backward(Builder& b, Value grad, int64_t dim, Value index, Value weight, int64_t in_size);

// s64 [n] holding `table`, rebuilt from integer arithmetic: the floor of
// (o * mul + add) / div, capped at `hi`, with the positions where `table`
// differs patched; or, when that needs many patches, from runs of equal
// values.
Value index_vector(Builder& b, const std::vector<int64_t>& table, int64_t mul, int64_t add, int64_t div,
                   int64_t hi);

// Gathers positions `idx` (s64 [n]) of dim `dim`; scatter-adds `v` (dim sized
// n) back onto `size` positions.
Value take_along(Builder& b, Value x, int64_t dim, Value idx);
Value put_add_along(Builder& b, Value v, int64_t dim, Value idx, int64_t size);

}  // namespace torchtpu::ops
