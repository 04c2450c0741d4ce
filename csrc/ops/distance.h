// p-norm distances between rows (torch.cdist, torch.nn.functional.pdist) and
// their gradients, as PyTorch's CPU kernels compute them: p = 0 counts
// differing coordinates, 1 / 2 / inf have their own forms, other p go
// through pow; the gradient of each pair is the CPU's per-p formula
// (zero where the distance is zero).
#pragma once

#include "ops/builder.h"

namespace torchtpu::ops {

// Distances between the rows of x1 [B, P, M] and x2 [B, R, M]: [B, P, R].
// `pv` is p as a 0-d value of x1's dtype (used only for general p). For
// p = inf, `max_skips_nan` ignores NaN coordinates (cdist's CPU kernel).
Value cdist(Builder& b, Value x1, Value x2, double p, Value pv, bool max_skips_nan = true);
// The same for p = 2 through matrix products (PyTorch's _euclidean_dist:
// |x|^2 - 2 x.y + |y|^2, clamped at 0, square root).
Value euclidean_dist(Builder& b, Value x1, Value x2);
// d cdist / d x1 for the incoming gradient `grad` and the forward result
// `dist` ([B, P, R]): [B, P, M].
Value cdist_backward(Builder& b, Value grad, Value x1, Value x2, Value dist, double p, Value pv);

// The condensed pairwise distances of the rows of x [N, M] (pairs i < j,
// row-major): [N (N - 1) / 2].
Value pdist(Builder& b, Value x, double p, Value pv);
Value pdist_backward(Builder& b, Value grad, Value x, Value dist, double p, Value pv);

}  // namespace torchtpu::ops
