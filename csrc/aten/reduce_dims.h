// Shared by the reduction kernels: PyTorch's rules for the dims a reduction
// runs over, its accumulation type and keepdim.
#pragma once

#include <ATen/WrapDimUtilsMulti.h>

#include "aten/tensor_ir.h"

namespace torchtpu::aten {

// The dims a reduction runs over, with PyTorch's checks: each dim wraps (a
// 0-d tensor has one wrappable dim, 0 or -1, with nothing to reduce) and
// appears once; none given (or an empty list) means all.
inline std::vector<int64_t> reduce_dims(const at::Tensor& t, at::OptionalIntArrayRef dim) {
  std::vector<int64_t> out;
  if (!dim || dim->empty()) {
    for (int64_t i = 0; i < t.dim(); ++i) out.push_back(i);
    return out;
  }
  std::bitset<at::dim_bitset_size> seen = at::dim_list_to_bitset(*dim, t.dim());
  for (int64_t i = 0; i < t.dim(); ++i)
    if (seen[i]) out.push_back(i);
  return out;
}

// Accumulation type: 16-bit floats reduce in float32.
inline at::ScalarType acc_type(at::ScalarType t) {
  return (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t;
}

inline Value keep(Builder& b, Value r, const at::Tensor& t, const std::vector<int64_t>& dims, bool keepdim) {
  return keepdim ? b.keepdim(r, to_dims(t.sizes()), dims) : r;
}

inline int64_t count_of(const at::Tensor& t, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= t.size(d);
  return n;
}

}  // namespace torchtpu::aten
