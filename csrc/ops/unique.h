// unique and unique_consecutive: groups of equal rows of a [N, K] matrix (a
// flat tensor is [n, 1]). Sorted groups order the rows lexicographically
// (stable sorts from the last column to the first, with PyTorch's NaN
// order); consecutive groups keep the rows in place. NaN never equals NaN,
// so each NaN is its own group, as on the CPU.
#pragma once

#include "ops/builder.h"

namespace torchtpu::ops {

struct RowGroups {
  Value order;  // int64 [N]: the source row of each ordered position
  Value first;  // bool [N]: the ordered position starts a group
  Value id;     // int64 [N]: the group of each ordered position
};
// x: [N, K] with N >= 1.
RowGroups row_groups(Builder& b, Value x, bool sorted);
// The number of groups (int64 0-d).
Value group_count(Builder& b, const RowGroups& g);

struct Unique {
  Value values;   // [m, K]: the first row of each group
  Value inverse;  // int64 [N]: the group of each source row
  Value counts;   // int64 [m]: rows per group
};
// `m` is the number of groups (group_count, read back by the caller).
Unique unique_rows(Builder& b, Value x, const RowGroups& g, int64_t m);

}  // namespace torchtpu::ops
