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
Value read_view(Builder& b, Value flat, const ViewMeta& v);
// Returns the new flat base with the view's elements replaced by `update`
// (shaped like the view, same dtype as flat).
Value write_view(Builder& b, Value flat, const ViewMeta& v, Value update);

}  // namespace torchtpu::ops
