// Index lowerings shared by gather/scatter and the index_* ops: full index
// tuples along one dim, and scatters that combine by a reduction (sum,
// prod, mean, amax, amin) with or without the destination's own values.
#pragma once

#include "ops/builder.h"

namespace torchtpu::ops {

// Index tuples [d..., rank] for gather/scatter along `dim` of a rank-`rank`
// operand: `index` (int64, shape d of that rank) at column `dim`, each
// other column the element's own position.
Value dim_tuples(Builder& b, Value index, int64_t rank, int64_t dim);

// Advanced indexing (x[i0, :, i2]) as one gather/scatter: `indices` are the
// index values (int64, negatives already wrapped) of the indexed dims
// `indexed` (ascending) of an operand of shape `self`. They broadcast
// together (a mismatch throws LoweringError); the result puts the broadcast
// shape where the indexed dims were when they are adjacent, else first, as
// NumPy does.
struct IndexLayout {
  std::vector<int64_t> window;       // dims of self taken whole, ascending
  std::vector<int64_t> offset_dims;  // where the window dims sit in the result
  Dims result;
  Value stacked;  // [B..., k] int64 index tuples
};
IndexLayout index_layout(Builder& b, const Dims& self, const std::vector<int64_t>& indexed,
                         const std::vector<Value>& indices);

enum class Reduce { kSum, kProd, kMean, kAmax, kAmin };

// `a` with `updates` combined in at `indices` (as Builder::scatter) by `r`.
// Without `include_self`, a position that receives an update starts from
// r's identity instead of its value in `a`. kMean divides each position's
// sum by its count (plus one with include_self), by floor division for
// integers; a position that receives nothing keeps its value.
Value scatter_reduce(Builder& b, Value a, Value indices, Value updates, const std::vector<int64_t>& index_dims,
                     const std::vector<int64_t>& window_dims, Reduce r, bool include_self);

}  // namespace torchtpu::ops

namespace torchtpu::ops {

// Coordinates [size, rank] (int64) of the true elements of `mask` in
// row-major order; rows past the number of true elements hold `fill`
// (an int64 0-d value), and true elements past `size` are dropped.
Value true_positions(Builder& b, Value mask, int64_t size, Value fill);
// The elements of `values` (shaped as `mask`) where `mask` is true, in
// row-major order, as [size] (zeros past the number of true elements).
Value true_values(Builder& b, Value mask, Value values, int64_t size);

}  // namespace torchtpu::ops
