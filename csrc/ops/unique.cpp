#include "ops/unique.h"

#include "ops/index.h"
#include "ops/scan.h"

namespace torchtpu::ops {

namespace {
// a[idx] along dim 0 of a [N] or [N, K] value; idx int64 [M].
Value take_rows(Builder& b, Value a, Value idx) {
  const Dims d = b.dims(a);
  const int64_t m = b.dims(idx)[0];
  Dims r = d;
  r[0] = m;
  std::vector<int64_t> offset;
  for (size_t i = 1; i < d.size(); ++i) offset.push_back(static_cast<int64_t>(i));
  return b.gather(a, b.reshape(idx, {m, 1}), {0}, offset, r);
}
}  // namespace

RowGroups row_groups(Builder& b, Value x, bool sorted) {
  const Dims d = b.dims(x);
  const int64_t n = d[0], k = d[1];
  Value order = b.iota(DType::kS64, {n}, 0);
  if (sorted) {
    for (int64_t c = k - 1; c >= 0; --c) {
      Value col = take_rows(b, b.reshape(b.slice_dim(x, 1, c, c + 1), {n}), order);
      order = b.sort({col, order}, 0, /*descending=*/false, /*stable=*/true)[1];
    }
  }
  Value xs = sorted ? take_rows(b, x, order) : x;
  Value first = b.constant(DType::kBool, 1, {1});
  if (n > 1) {
    Value ne = b.compare(b.slice_dim(xs, 0, 1, n), b.slice_dim(xs, 0, 0, n - 1), Cmp::kNE);
    Value differs = k > 0 ? b.reduce(ne, {1}, Body::kOr, 0) : b.constant(DType::kBool, 0, {n - 1});
    first = b.concatenate({first, differs}, 0);
  }
  Value id = b.sub(cumulative(b, b.convert(first, DType::kS64), 0, false), b.constant(DType::kS64, 1, {n}));
  return {order, first, id};
}

Value group_count(Builder& b, const RowGroups& g) { return b.reduce_sum(b.convert(g.first, DType::kS64), {0}); }

Unique unique_rows(Builder& b, Value x, const RowGroups& g, int64_t m) {
  const int64_t n = b.dims(x)[0];
  Value pos = b.reshape(true_positions(b, g.first, m, b.constant(DType::kS64, 0)), {m});
  Value values = take_rows(b, x, take_rows(b, g.order, pos));
  Value inverse = b.scatter(b.constant(DType::kS64, 0, {n}), b.reshape(g.order, {n, 1}), g.id, {0}, {}, Body::kReplace);
  Value counts = b.scatter(b.constant(DType::kS64, 0, {m}), b.reshape(g.id, {n, 1}), b.constant(DType::kS64, 1, {n}),
                           {0}, {}, Body::kAdd);
  return {values, inverse, counts};
}

}  // namespace torchtpu::ops
