// Scans along one dim: cumulative sums and products, computed in log2(n)
// shifted steps (each element adds the partial result `k` places before it,
// k = 1, 2, 4, ...), so a scan is a few elementwise ops XLA fuses, not a loop.
#pragma once

#include "ops/builder.h"

namespace torchtpu::ops {

// Inclusive scan of `x` along `dim` with + (product false) or * (true).
Value cumulative(Builder& b, Value x, int64_t dim, bool product);

}  // namespace torchtpu::ops
