#include "ops/sort.h"

#include <tuple>

namespace torchtpu::ops {

namespace {

Value logical(Builder& b, const char* op, Value x, Value y) { return b.graph().add(op, {x, y}, b.type(x)); }
Value not_(Builder& b, Value x) { return b.logical_not(x); }
Value is_nan(Builder& b, Value x) { return b.compare(x, x, Cmp::kNE); }

Dims without(const Dims& d, int64_t dim) {
  Dims out;
  for (int64_t i = 0; i < static_cast<int64_t>(d.size()); ++i)
    if (i != dim) out.push_back(d[i]);
  return out;
}

// `x` shifted `k` places later along `dim`, the first k filled with `fill`.
Value shift(Builder& b, Value x, int64_t dim, int64_t k, Value fill) {
  const int64_t n = b.dims(x)[dim];
  Dims low(b.rank(x), 0), high(b.rank(x), 0);
  low[dim] = k;
  return b.pad(b.slice_dim(x, dim, 0, n - k), fill, low, high);
}

}  // namespace

std::pair<Value, Value> sort_with_indices(Builder& b, Value x, int64_t dim, bool descending) {
  Value idx = b.iota(DType::kS64, b.dims(x), dim);
  std::vector<Value> r = b.sort({x, idx}, dim, descending, /*stable=*/true);
  return {r[0], r[1]};
}

Value take_at(Builder& b, Value x, Value pos, int64_t dim) {
  const Dims& d = b.dims(x);
  const Dims out = without(d, dim);
  Dims vec = out;
  vec.push_back(1);
  std::vector<Value> cols;
  std::vector<int64_t> all;
  for (int64_t i = 0; i < b.rank(x); ++i) {
    all.push_back(i);
    Value c = i == dim ? pos : b.iota(DType::kS64, out, i < dim ? i : i - 1);
    cols.push_back(b.reshape(c, vec));
  }
  Value tuples = b.concatenate(cols, static_cast<int64_t>(out.size()));
  return b.gather(x, tuples, all, {}, out);
}

Value nan_count(Builder& b, Value x, int64_t dim) {
  if (!ir::is_float(b.dtype(x))) return b.constant(DType::kS64, 0, without(b.dims(x), dim));
  return b.reduce_sum(b.convert(is_nan(b, x), DType::kS64), {dim});
}

std::pair<Value, Value> cumulative_extreme(Builder& b, Value x, int64_t dim, bool is_max) {
  const int64_t n = b.dims(x)[dim];
  Value idx = b.iota(DType::kS64, b.dims(x), dim);
  const bool fp = ir::is_float(b.dtype(x));
  const Value fill_v = b.constant(b.dtype(x), 0);
  const Value fill_i = b.constant(DType::kS64, -1);
  for (int64_t k = 1; k < n; k *= 2) {
    // (va, ia) comes before (x, idx); the later one is kept when it is NaN,
    // or when neither is NaN and it is at least as large (small).
    Value va = shift(b, x, dim, k, fill_v), ia = shift(b, idx, dim, k, fill_i);
    Value take = b.compare(x, va, is_max ? Cmp::kGE : Cmp::kLE);
    if (fp) take = logical(b, "stablehlo.or", is_nan(b, x), logical(b, "stablehlo.and", not_(b, is_nan(b, va)), take));
    take = logical(b, "stablehlo.or", take, b.compare(ia, b.zeros_like(ia), Cmp::kLT));
    x = b.select(take, x, va);
    idx = b.select(take, idx, ia);
  }
  return {x, idx};
}

Value logcumsumexp(Builder& b, Value x, int64_t dim) {
  const int64_t n = b.dims(x)[dim];
  const Value ninf = b.constant(b.dtype(x), Builder::lowest(b.dtype(x)));
  for (int64_t k = 1; k < n; k *= 2) {
    Value y = shift(b, x, dim, k, ninf);
    Value mn = b.min(x, y), mx = b.max(x, y);
    Value r = b.add(b.log1p(b.exp(b.sub(mn, mx))), mx);
    // Equal infinities: inf - inf would give NaN; the result is that infinity.
    Value same_inf = logical(b, "stablehlo.and", b.compare(mn, mx, Cmp::kEQ),
                             not_(b, b.graph().add("stablehlo.is_finite", {mn}, ir::Type{DType::kBool, b.dims(mn)})));
    x = b.select(same_inf, mx, r);
  }
  return x;
}

Value search_sorted(Builder& b, Value bnd, Value sorter, Value v, bool right) {
  const int64_t rows = b.dims(v)[0], m = b.dims(v)[1], n = b.dims(bnd)[1];
  const Dims d{rows, m};
  Value start = b.constant(DType::kS64, 0, d), end = b.constant(DType::kS64, static_cast<double>(n), d);
  if (n == 0) return start;
  Value row = b.reshape(b.iota(DType::kS64, d, 0), {rows, m, 1});
  auto read = [&](Value table, Value col) {
    Value tuples = b.concatenate({row, b.reshape(col, {rows, m, 1})}, 2);
    return b.gather(table, tuples, {0, 1}, {}, d);
  };
  const Value two = b.constant(DType::kS64, 2, d), last = b.constant(DType::kS64, static_cast<double>(n - 1), d);
  for (int64_t w = n; w > 0; w >>= 1) {
    Value active = b.compare(start, end, Cmp::kLT);
    Value mid = b.min(b.add(start, b.div(b.sub(end, start), two)), last);
    Value mid_val = read(bnd, sorter.valid() ? read(sorter, mid) : mid);
    // The CPU's test: !(mid_val >= v) (left) or !(mid_val > v) (right).
    Value go_right = not_(b, b.compare(mid_val, v, right ? Cmp::kGT : Cmp::kGE));
    Value next_start = b.add(mid, b.constant(DType::kS64, 1, d));
    start = b.select(logical(b, "stablehlo.and", active, go_right), next_start, start);
    end = b.select(logical(b, "stablehlo.and", active, not_(b, go_right)), mid, end);
  }
  return start;
}

namespace {

// libstdc++'s __insertion_sort (std::sort of at most 16 elements) of the
// rows of `a` by `<`, carrying `idx`: step i inserts a[i] at the front when it
// is below a[0], else just after the nearest element to its left that it
// is not below.
std::pair<Value, Value> insertion_sort_rows(Builder& b, Value a, Value idx) {
  const Dims d = b.dims(a);
  const int64_t rows = d[0], n = d[1];
  Value k = b.iota(DType::kS64, d, 1);
  auto col = [&](Value v, int64_t i) { return b.broadcast_to(b.slice_dim(v, 1, i, i + 1), d); };
  auto c = [&](double v) { return b.constant(DType::kS64, v, d); };
  for (int64_t i = 1; i < n; ++i) {
    Value val = col(a, i), vi = col(idx, i);
    Value front = b.compare(val, col(a, 0), Cmp::kLT);
    Value stop = logical(b, "stablehlo.and", b.compare(k, c(static_cast<double>(i)), Cmp::kLT),
                         not_(b, b.compare(val, a, Cmp::kLT)));
    Value last_stop = b.reduce_max(b.select(stop, k, c(-1)), {1});
    Value j = b.broadcast_in_dim(b.add(last_stop, b.constant(DType::kS64, 1, {rows})), d, {0});
    j = b.select(front, c(0), j);
    Value prev_a = shift(b, a, 1, 1, b.constant(b.dtype(a), 0)), prev_i = shift(b, idx, 1, 1, b.constant(DType::kS64, 0));
    Value after = logical(b, "stablehlo.and", b.compare(k, j, Cmp::kGT), b.compare(k, c(static_cast<double>(i)), Cmp::kLE));
    Value at = b.compare(k, j, Cmp::kEQ);
    a = b.select(at, val, b.select(after, prev_a, a));
    idx = b.select(at, vi, b.select(after, prev_i, idx));
  }
  return {a, idx};
}

}  // namespace

std::pair<Value, Value> mode_rows(Builder& b, Value x) {
  const Dims d = b.dims(x);
  const int64_t n = d[1];
  // Longer rows: a stable sort with NaN last (the CPU's introsort orders
  // equal elements, and NaN, its own way; the value agrees, the index is
  // one of the mode's positions).
  Value a, idx;
  if (n <= 16) {
    std::tie(a, idx) = insertion_sort_rows(b, x, b.iota(DType::kS64, d, 1));
  } else {
    std::vector<Value> s = b.sort({x, b.iota(DType::kS64, d, 1)}, 1, /*descending=*/false, /*stable=*/true);
    a = s[0];
    idx = s[1];
  }
  Value k = b.iota(DType::kS64, d, 1);
  // A run ends where the next element differs (NaN differs from itself).
  Value next = b.slice_dim(a, 1, 1, n);
  Value differs = b.compare(b.slice_dim(a, 1, 0, n - 1), next, Cmp::kNE);
  Value end = b.concatenate({differs, b.constant(DType::kBool, 1, {d[0], 1})}, 1);
  Value begins = b.concatenate({b.constant(DType::kBool, 1, {d[0], 1}), differs}, 1);
  Value start = b.select(begins, k, b.constant(DType::kS64, -1, d));
  for (int64_t s = 1; s < n; s *= 2) start = b.max(start, shift(b, start, 1, s, b.constant(DType::kS64, -1)));
  Value freq = b.select(end, b.add(b.sub(k, start), b.constant(DType::kS64, 1, d)), b.constant(DType::kS64, 0, d));
  Value best = b.broadcast_in_dim(b.reduce_max(freq, {1}), d, {0});
  Value first_best = b.reduce_min(b.select(b.compare(freq, best, Cmp::kEQ), k, b.constant(DType::kS64, n, d)), {1});
  return {take_at(b, a, first_best, 1), take_at(b, idx, first_best, 1)};
}

}  // namespace torchtpu::ops
