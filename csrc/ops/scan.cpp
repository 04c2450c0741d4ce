#include "ops/scan.h"

namespace torchtpu::ops {

Value cumulative(Builder& b, Value x, int64_t dim, bool product) {
  const int64_t n = b.dims(x)[dim];
  const Value identity = b.constant(b.dtype(x), product ? 1 : 0);
  for (int64_t k = 1; k < n; k *= 2) {
    Dims low(b.rank(x), 0), high(b.rank(x), 0);
    low[dim] = k;
    Value shifted = b.pad(b.slice_dim(x, dim, 0, n - k), identity, low, high);
    if (b.dtype(x) == DType::kBool)
      x = product ? b.logical_and(x, shifted) : b.logical_or(x, shifted);
    else
      x = product ? b.mul(x, shifted) : b.add(x, shifted);
  }
  return x;
}

}  // namespace torchtpu::ops
