// Sliding-window patches and channel reordering: im2col (unfold) and its
// adjoint col2im (fold) over [N, C, H, W], built from strided slices and
// interior padding (no gather or scatter; col2im sums the kernel offsets in
// the CPU's order), and channel_shuffle as a reshape and transpose.
#pragma once

#include "ops/builder.h"

namespace torchtpu::ops {

// {height, width} each.
struct PatchParams {
  Dims kernel, dilation, padding, stride;
};

// Number of sliding positions along one dim.
int64_t patch_count(int64_t size, int64_t kernel, int64_t dilation, int64_t padding, int64_t stride);

// [N, C, H, W] -> [N, C * kh * kw, L].
Value im2col(Builder& b, Value x, const PatchParams& p);
// [N, C * kh * kw, L] -> [N, C, H, W] with {H, W} = `size`.
Value col2im(Builder& b, Value cols, const Dims& size, const PatchParams& p);

// [N, C, ...]: channel c = g * (C / groups) + k moves to k * groups + g.
Value channel_shuffle(Builder& b, Value x, int64_t groups);

}  // namespace torchtpu::ops
