// linspace as a graph piece, for ops whose ends are device values
// (histogram edges from the data's extremes) as well as for linspace itself.
#pragma once

#include "aten/tensor_ir.h"

namespace torchtpu::aten {

// The type linspace computes in for result dtype `rt`: float64 for integer
// results, float32 for 16-bit floats, else `rt`.
at::ScalarType linspace_compute_type(at::ScalarType rt);

// `steps` (>= 1) values from `start` to `end` (0-d, already rounded to `rt`
// and held in linspace_compute_type(rt)) as PyTorch's CPU kernel computes
// them; the result is in linspace_compute_type(rt).
Value linspace_values(Kernel& k, Value start, Value end, int64_t steps, at::ScalarType rt);

}  // namespace torchtpu::aten
