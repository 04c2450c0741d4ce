#include "ops/index.h"

#include <algorithm>

#include "ops/scan.h"

namespace torchtpu::ops {

Value dim_tuples(Builder& b, Value index, int64_t rank, int64_t dim) {
  const Dims d = b.dims(index);
  Dims vec = d;
  vec.push_back(1);
  std::vector<Value> cols;
  for (int64_t i = 0; i < rank; ++i) cols.push_back(b.reshape(i == dim ? index : b.iota(DType::kS64, d, i), vec));
  return b.concatenate(cols, static_cast<int64_t>(d.size()));
}

namespace {

Body body_of(Reduce r, DType t) {
  const bool boolean = t == DType::kBool;
  switch (r) {
    case Reduce::kSum: case Reduce::kMean: return boolean ? Body::kOr : Body::kAdd;
    case Reduce::kProd: return boolean ? Body::kAnd : Body::kMul;
    case Reduce::kAmax: return boolean ? Body::kOr : Body::kMax;
    case Reduce::kAmin: return boolean ? Body::kAnd : Body::kMin;
  }
  return Body::kAdd;
}

double identity_of(Reduce r, DType t) {
  switch (r) {
    case Reduce::kSum: case Reduce::kMean: return 0;
    case Reduce::kProd: return 1;
    case Reduce::kAmax: return Builder::lowest(t);
    case Reduce::kAmin: return Builder::highest(t);
  }
  return 0;
}

// Integer division rounding toward -inf (for positive divisors).
Value floor_div(Builder& b, Value s, Value c) {
  Value q = b.div(s, c);
  Value rem = b.rem(s, c);
  Value adjust = b.logical_and(b.compare(rem, b.zeros_like(rem), Cmp::kNE), b.compare(s, b.zeros_like(s), Cmp::kLT));
  return b.select(adjust, b.sub(q, b.constant(b.dtype(q), 1)), q);
}

}  // namespace

Value scatter_reduce(Builder& b, Value a, Value indices, Value updates, const std::vector<int64_t>& index_dims,
                     const std::vector<int64_t>& window_dims, Reduce r, bool include_self) {
  const DType t = b.dtype(a);
  Value count;
  if (r == Reduce::kMean || !include_self) {
    Value ones = b.constant(DType::kS64, 1, b.dims(updates));
    count = b.scatter(b.constant(DType::kS64, 0, b.dims(a)), indices, ones, index_dims, window_dims, Body::kAdd);
  }
  Value base = a;
  if (!include_self) {
    Value touched = b.compare(count, b.zeros_like(count), Cmp::kGT);
    base = b.select(touched, b.constant(t, identity_of(r, t), b.dims(a)), a);
  }
  Value out = b.scatter(base, indices, updates, index_dims, window_dims, body_of(r, t));
  if (r != Reduce::kMean) return out;
  if (include_self) count = b.add(count, b.constant(DType::kS64, 1));
  Value none = b.compare(count, b.zeros_like(count), Cmp::kEQ);
  Value c = b.convert(b.select(none, b.full_like(count, 1), count), t);
  return ir::is_float(t) ? b.div(out, c) : floor_div(b, out, c);
}

}  // namespace torchtpu::ops

namespace torchtpu::ops {

namespace {

// Where each element of the flat bool `flat` goes in the compacted result:
// its rank among the true elements, or `size` (out of range: dropped).
Value slots(Builder& b, Value flat, int64_t size) {
  const int64_t n = b.dims(flat)[0];
  Value slot = b.sub(cumulative(b, b.convert(flat, DType::kS64), 0, false), b.constant(DType::kS64, 1));
  slot = b.select(flat, slot, b.constant(DType::kS64, static_cast<double>(size), {n}));
  return b.reshape(slot, {n, 1});
}

}  // namespace

Value true_values(Builder& b, Value mask, Value values, int64_t size) {
  Value base = b.constant(b.dtype(values), 0, {size});
  int64_t n = 1;
  for (int64_t s : b.dims(mask)) n *= s;
  if (n == 0 || size == 0) return base;
  return b.scatter(base, slots(b, b.reshape(mask, {n}), size), b.reshape(values, {n}), {0}, {}, Body::kReplace);
}

Value true_positions(Builder& b, Value mask, int64_t size, Value fill) {
  const Dims d = b.dims(mask);
  const int64_t rank = static_cast<int64_t>(d.size());
  int64_t n = 1;
  for (int64_t s : d) n *= s;
  Value base = b.broadcast_to(fill, {size, rank});
  if (n == 0 || rank == 0 || size == 0) return base;
  Value linear = b.iota(DType::kS64, {n}, 0);
  std::vector<Value> cols;
  int64_t stride = n;
  for (int64_t i = 0; i < rank; ++i) {
    stride /= d[i];
    Value c = b.div(linear, b.constant(DType::kS64, static_cast<double>(stride)));
    c = b.rem(c, b.constant(DType::kS64, static_cast<double>(d[i])));
    cols.push_back(b.reshape(c, {n, 1}));
  }
  Value coords = b.concatenate(cols, 1);
  return b.scatter(base, slots(b, b.reshape(mask, {n}), size), coords, {0}, {1}, Body::kReplace);
}

}  // namespace torchtpu::ops

namespace torchtpu::ops {

IndexLayout index_layout(Builder& b, const Dims& self, const std::vector<int64_t>& indexed,
                         const std::vector<Value>& indices) {
  IndexLayout p;
  for (int64_t d = 0; d < static_cast<int64_t>(self.size()); ++d)
    if (std::find(indexed.begin(), indexed.end(), d) == indexed.end()) p.window.push_back(d);
  Dims bshape;
  for (Value v : indices) {
    try {
      bshape = broadcast_shapes(bshape, b.dims(v));
    } catch (const LoweringError&) {
      throw LoweringError("shape mismatch: indexing tensors could not be broadcast together");
    }
  }
  Dims vec = bshape;
  vec.push_back(1);
  std::vector<Value> cols;
  for (Value v : indices) cols.push_back(b.reshape(b.broadcast_to(v, bshape), vec));
  p.stacked = b.concatenate(cols, static_cast<int64_t>(bshape.size()));
  const bool adjacent = indexed.back() - indexed.front() + 1 == static_cast<int64_t>(indexed.size());
  const int64_t nb = static_cast<int64_t>(bshape.size());
  if (adjacent) {
    int64_t pos = 0;
    for (int64_t d : p.window)
      if (d < indexed.front()) {
        p.offset_dims.push_back(pos++);
        p.result.push_back(self[d]);
      }
    for (int64_t s : bshape) p.result.push_back(s);
    pos += nb;
    for (int64_t d : p.window)
      if (d > indexed.back()) {
        p.offset_dims.push_back(pos++);
        p.result.push_back(self[d]);
      }
  } else {
    p.result = bshape;
    for (size_t i = 0; i < p.window.size(); ++i) {
      p.offset_dims.push_back(nb + static_cast<int64_t>(i));
      p.result.push_back(self[p.window[i]]);
    }
  }
  return p;
}

}  // namespace torchtpu::ops
