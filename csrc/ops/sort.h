// Sorting and order statistics along one dim: stable sorts with PyTorch's
// NaN order (Builder::sort), picking one position per slice, cumulative
// max/min with their indices and logcumsumexp as log-step scans (as
// ops/scan.h), and searchsorted's bucket counts.
#pragma once

#include <utility>

#include "ops/builder.h"

namespace torchtpu::ops {

// Stable sort of `x` (rank >= 1) along `dim`: the sorted values and their
// int64 source indices.
std::pair<Value, Value> sort_with_indices(Builder& b, Value x, int64_t dim, bool descending);

// x[..., pos, ...] along `dim`: `pos` (int64) has x's dims without `dim`.
Value take_at(Builder& b, Value x, Value pos, int64_t dim);

// Number of NaNs of each slice along `dim` (int64; zeros for non-floats).
Value nan_count(Builder& b, Value x, int64_t dim);

// Inclusive running max (or min) along `dim` and the index where it was
// taken, as PyTorch's CPU scan: a NaN takes over (and each later NaN), ties
// take the later index.
std::pair<Value, Value> cumulative_extreme(Builder& b, Value x, int64_t dim, bool is_max);

// Inclusive log(cumsum(exp(x))) along `dim`, combining partial results as
// PyTorch's _log_add_exp_helper (NaN propagates, equal infinities stay).
Value logcumsumexp(Builder& b, Value x, int64_t dim);

// The most frequent value of each row of `x` ([R, n]) and its index, as
// PyTorch's CPU kernel: the row sorted by `<`, runs of equal values counted
// (NaN never equals), the first longest run taken, with its last element's
// index. Up to 16 elements the CPU's libstdc++ insertion sort is replayed
// step by step (ties and NaN land where the CPU puts them); longer rows use
// a stable sort with NaN last, where the CPU's introsort may pick another
// position of the same value (or, with NaN, another value).
std::pair<Value, Value> mode_rows(Builder& b, Value x);

// For each value of `v` ([R, M]), the result of PyTorch's CPU binary search
// in row r of `bnd` ([R, N]), read through `sorter` ([R, N] int64) when it is
// valid: the first position whose boundary is >= the value (> when `right`).
// Replays the search step by step, so unsorted rows and NaN give the CPU's
// answer. int64 [R, M].
Value search_sorted(Builder& b, Value bnd, Value sorter, Value v, bool right);

}  // namespace torchtpu::ops
