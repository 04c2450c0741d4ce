// Counter-based random numbers: element i of a random op is a hash of
// (i, key0, key1), where the keys come from the generator's (seed, offset) as
// runtime scalars. Reproducible per seed; a new offset does not recompile.
#pragma once

#include "ops/builder.h"

namespace torchtpu::ops {

// Uniform u32 bits of shape `dims`; key0/key1 are 0-d u32 values.
Value random_bits(Builder& b, Value key0, Value key1, const Dims& dims, uint32_t stream = 0);
// Uniform floats in [0, 1) as f32, on a grid of 2^-digits (digits <= 24), so a
// type with that many mantissa digits holds every value exactly (never 1).
Value uniform01(Builder& b, Value key0, Value key1, const Dims& dims, uint32_t stream = 0, int digits = 24);
// Standard normal f32 (Box-Muller).
Value normal01(Builder& b, Value key0, Value key1, const Dims& dims);

}  // namespace torchtpu::ops
