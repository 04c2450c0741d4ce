// Views over a storage value (DESIGN decision 5). A storage value is a flat
// 1-D array; a view is ATen's (sizes, strides, offset) over it. Reads lower to
// slice / reshape / transpose / broadcast where the strides allow, to a gather
// where they do not. Writes build the new flat base value.
#pragma once

#include "ops/builder.h"

namespace torchtpu::ops {

struct ViewMeta {
  Dims sizes;
  Dims strides;
  int64_t offset = 0;
};

bool is_contiguous(const Dims& sizes, const Dims& strides);
// When the view is a dense block of memory laid out in some dimension order
// (a transposed or channels-last tensor): that order, outermost first, with
// every dim listed (size-1 dims first). Empty when it is not.
std::vector<int64_t> dense_order(const Dims& sizes, const Dims& strides);
// `update` (shaped like a dense_order view) as the flat block it lays out.
Value to_block(Builder& b, Value update, const std::vector<int64_t>& order);
Value read_view(Builder& b, Value flat, const ViewMeta& v);
// Returns the new flat base with the view's elements replaced by `update`
// (shaped like the view, same dtype as flat).
Value write_view(Builder& b, Value flat, const ViewMeta& v, Value update);

}  // namespace torchtpu::ops
