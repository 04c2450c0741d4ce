// Edge padding of trailing dims, as PyTorch's reflection_pad and
// replication_pad: output position j of a padded dim reads input coordinate
// c = j - low, mirrored (reflect: -c, 2(W-1)-c) or clamped (replicate) into
// [0, W); a negative pad crops. Built from slices, reverses, broadcasts and
// concatenations, no gather. The backward sums each output gradient into the
// input position it was read from.
#pragma once

#include <utility>
#include <vector>

#include "ops/builder.h"

namespace torchtpu::ops {

enum class EdgePad { kReflect, kReplicate };

// One {low, high} pair per padded dim, for the trailing pads.size() dims of
// the value, outermost first.
using EdgePads = std::vector<std::pair<int64_t, int64_t>>;

Value edge_pad(Builder& b, Value x, const EdgePads& pads, EdgePad mode);
// `input_dims`: the shape of the forward input; `grad` is shaped like its
// output. Computes in grad's dtype.
Value edge_pad_backward(Builder& b, Value grad, const Dims& input_dims, const EdgePads& pads, EdgePad mode);

}  // namespace torchtpu::ops
