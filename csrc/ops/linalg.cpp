#include "ops/linalg.h"

namespace torchtpu::ops {
namespace {

Dims batch_of(const Dims& d) { return Dims(d.begin(), d.end() - 2); }

int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// [..., m, n] -> [..., m, n] slice of the last two dims.
Value slice_matrix(Builder& b, Value a, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const int64_t r = b.rank(a);
  Dims start(r, 0), limit = b.dims(a);
  start[r - 2] = r0, limit[r - 2] = r1;
  start[r - 1] = c0, limit[r - 1] = c1;
  return b.slice(a, start, limit);
}

// Row `p[i]` of each matrix a[i] ([B, m, n], p int32 [B]) as [B, n].
Value take_rows(Builder& b, Value a, Value p) {
  const Dims& d = b.dims(a);
  Value batch = b.iota(DType::kS32, {d[0], 1}, 0);
  Value idx = b.concatenate({batch, b.reshape(p, {d[0], 1})}, 1);
  return b.gather(a, idx, {0, 1}, {1}, {d[0], d[2]});
}

}  // namespace

Value matrix_transpose(Builder& b, Value a) {
  std::vector<int64_t> perm(b.rank(a));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return b.transpose(a, perm);
}

Value triangle(Builder& b, Value a, bool lower, int64_t diagonal) {
  const Dims& d = b.dims(a);
  const int64_t m = d[d.size() - 2], n = d[d.size() - 1];
  Value row = b.iota(DType::kS64, {m, n}, 0);
  Value col = b.iota(DType::kS64, {m, n}, 1);
  Value shifted = b.add(row, b.constant(DType::kS64, static_cast<double>(diagonal), {m, n}));
  Value keep = b.compare(col, shifted, lower ? Cmp::kLE : Cmp::kGE);
  return b.select(keep, a, b.zeros_like(a));
}

Value matmul(Builder& b, Value x, Value y) {
  const int64_t r = b.rank(x);
  std::vector<int64_t> batch(r - 2);
  for (int64_t i = 0; i < r - 2; ++i) batch[i] = i;
  return b.dot_general(x, y, batch, batch, {r - 1}, {r - 2}, b.dtype(x));
}

Value identity(Builder& b, DType t, const Dims& dims) {
  const int64_t n = dims.back();
  Value eye = b.select(b.compare(b.iota(DType::kS32, {n, n}, 0), b.iota(DType::kS32, {n, n}, 1), Cmp::kEQ),
                       b.constant(t, 1, {n, n}), b.constant(t, 0, {n, n}));
  return b.broadcast_to(eye, dims);
}

// Column-oriented substitution, as BLAS's trsm: once x_k is final it is
// subtracted from the rows it feeds, unless it is zero, so a NaN or infinity
// reaches only the entries that depend on it. Larger matrices use
// StableHLO's triangular_solve.
Value solve_triangular(Builder& b, Value a, Value rhs, bool upper, bool left, bool unit, bool transpose) {
  if (numel(b.dims(rhs)) == 0) return rhs;
  const int64_t n = b.dims(a).back();
  Value t = triangle(b, a, !upper);
  if (n > kMaxUnrolledColumns) return b.triangular_solve(t, rhs, left, !upper, unit, transpose);
  if (transpose) {
    t = matrix_transpose(b, t);
    upper = !upper;
  }
  Value x = rhs;
  if (!left) {
    x = matrix_transpose(b, x);
    t = matrix_transpose(b, t);
    upper = !upper;
  }
  const Dims xd = b.dims(x);
  const int64_t r = static_cast<int64_t>(xd.size()), c = xd.back();
  Value row = b.iota(DType::kS32, xd, r - 2);
  for (int64_t step = 0; step < n; ++step) {
    const int64_t k = upper ? n - 1 - step : step;
    Value xk = slice_matrix(b, x, k, k + 1, 0, c);
    Value nz = b.compare(xk, b.zeros_like(xk), Cmp::kNE);
    if (!unit) xk = b.select(nz, b.div(xk, slice_matrix(b, t, k, k + 1, k, k + 1)), xk);
    Value upd = b.sub(x, b.mul(slice_matrix(b, t, 0, n, k, k + 1), xk));
    Value kk = b.constant(DType::kS32, static_cast<double>(k), xd);
    Value feeds = b.logical_and(b.compare(row, kk, upper ? Cmp::kLT : Cmp::kGT), b.broadcast_to(nz, xd));
    x = b.select(b.compare(row, kk, Cmp::kEQ), b.broadcast_to(xk, xd), b.select(feeds, upd, x));
  }
  return left ? x : matrix_transpose(b, x);
}

// Right-looking Cholesky on the lower triangle: each step takes the pivot of
// the trailing matrix, scales its column by the reciprocal square root (as
// LAPACK's potf2) and subtracts the outer product from what remains.
CholeskyResult cholesky(Builder& b, Value a, bool upper) {
  const Dims d = b.dims(a);
  const Dims batch = batch_of(d);
  const int64_t n = d.back();
  const int64_t r = b.rank(a);
  const DType t = b.dtype(a);
  Value info = b.constant(DType::kS32, 0, batch);
  if (n == 0) return {a, info};
  if (n > kMaxUnrolledColumns)
    throw LoweringError("cholesky: matrices larger than " + std::to_string(kMaxUnrolledColumns) + " are not lowered");
  Value src = upper ? matrix_transpose(b, a) : a;
  const Value s0 = b.add(triangle(b, src, true), matrix_transpose(b, triangle(b, src, true, -1)));
  Value s = s0;
  std::vector<Value> cols;
  std::vector<int64_t> keep(batch.size());
  for (size_t i = 0; i < keep.size(); ++i) keep[i] = static_cast<int64_t>(i);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t m = n - j;
    Value pivot = slice_matrix(b, s, 0, 1, 0, 1);  // [..., 1, 1]
    Value bad = b.logical_not(b.compare(pivot, b.zeros_like(pivot), Cmp::kGT));
    Value before = b.compare(info, b.zeros_like(info), Cmp::kNE);
    Value first = b.logical_and(b.reshape(bad, batch), b.logical_not(before));
    info = b.select(first, b.constant(DType::kS32, static_cast<double>(j + 1), batch), info);
    Value root = b.sqrt(pivot);
    Value col = root;
    // As LAPACK's potf2, a failed column keeps its reduced pivot and the
    // input below it; later columns keep the input.
    Value failed_col = pivot;
    Value input_col = slice_matrix(b, s0, j, n, j, j + 1);
    if (m > 1) {
      Value rest = slice_matrix(b, s, 1, m, 0, 1);  // [..., m-1, 1]
      Value scaled = b.mul(rest, b.div(b.constant(t, 1, b.dims(root)), root));
      Dims outer = batch;
      outer.push_back(m - 1);
      outer.push_back(m - 1);
      Value update = b.mul(b.broadcast_to(scaled, outer), b.broadcast_to(matrix_transpose(b, scaled), outer));
      s = b.sub(slice_matrix(b, s, 1, m, 1, m), update);
      col = b.concatenate({root, scaled}, r - 2);
      failed_col = b.concatenate({pivot, slice_matrix(b, s0, j + 1, n, j, j + 1)}, r - 2);
    }
    Dims cd = b.dims(col);
    col = b.select(b.broadcast_in_dim(first, cd, keep), failed_col,
                   b.select(b.broadcast_in_dim(before, cd, keep), input_col, col));
    Dims low(r, 0), high(r, 0);
    low[r - 2] = j;
    cols.push_back(b.pad(col, b.constant(t, 0), low, high));
  }
  Value l = cols.size() == 1 ? cols[0] : b.concatenate(cols, r - 1);
  return {upper ? matrix_transpose(b, l) : l, info};
}

// getf2: for each column, the first row of largest magnitude at or below the
// diagonal (a NaN on the diagonal stays, as LAPACK's idamax keeps its first
// element) is swapped up, the column below is multiplied by the pivot's
// reciprocal and the trailing block gets the rank-1 update. A zero pivot
// leaves the column unscaled and sets info.
LuResult lu_factor(Builder& b, Value a) {
  const Dims d = b.dims(a);
  const Dims batch = batch_of(d);
  const int64_t m = d[d.size() - 2], n = d.back(), k = std::min(m, n);
  const int64_t bs = numel(batch);
  const DType t = b.dtype(a);
  if (k > kMaxUnrolledColumns)
    throw LoweringError("lu_factor: matrices larger than " + std::to_string(kMaxUnrolledColumns) +
                        " columns are not lowered");
  Value x = b.reshape(a, {bs, m, n});
  Value perm = b.broadcast_to(b.iota(DType::kS32, {m}, 0), {bs, m});
  Value info = b.constant(DType::kS32, 0, {bs});
  std::vector<Value> pivots;
  Value row3 = b.iota(DType::kS32, {bs, m, n}, 1);
  Value col3 = b.iota(DType::kS32, {bs, m, n}, 2);
  Value row2 = b.iota(DType::kS32, {bs, m}, 1);
  auto c32 = [&](int64_t v, const Dims& dims) { return b.constant(DType::kS32, static_cast<double>(v), dims); };
  for (int64_t j = 0; j < k && bs > 0; ++j) {
    Value col = b.reshape(slice_matrix(b, x, 0, m, j, j + 1), {bs, m});
    // Complex pivots by |re| + |im|, as LAPACK's izamax.
    Value mag = ir::is_complex(t) ? b.add(b.abs(b.real(col)), b.abs(b.imag(col))) : b.abs(col);
    Value below = b.compare(row2, c32(j, {bs, m}), Cmp::kGE);
    Value is_nan = b.compare(mag, mag, Cmp::kNE);
    Value cand = b.select(b.logical_and(below, b.logical_not(is_nan)), mag, b.constant(b.dtype(mag), -1, {bs, m}));
    Value best = b.reduce_max(cand, {1});
    Value at_best = b.logical_and(below, b.compare(mag, b.broadcast_in_dim(best, {bs, m}, {0}), Cmp::kEQ));
    Value p = b.reduce_min(b.select(at_best, row2, c32(m, {bs, m})), {1});
    Value diag_mag = b.reshape(b.slice(mag, {0, j}, {bs, j + 1}), {bs});
    Value diag_nan = b.compare(diag_mag, diag_mag, Cmp::kNE);
    p = b.select(b.logical_or(diag_nan, b.compare(p, c32(m, {bs}), Cmp::kEQ)), c32(j, {bs}), p);
    pivots.push_back(b.reshape(b.add(p, c32(1, {bs})), {bs, 1}));
    // Swap rows j and p (of the matrix and of the permutation).
    Value row_j = b.reshape(slice_matrix(b, x, j, j + 1, 0, n), {bs, n});
    Value row_p = take_rows(b, x, p);
    Value p3 = b.broadcast_in_dim(p, {bs, m, n}, {0});
    Value is_j = b.compare(row3, c32(j, {bs, m, n}), Cmp::kEQ);
    Value is_p = b.compare(row3, p3, Cmp::kEQ);
    x = b.select(is_j, b.broadcast_in_dim(row_p, {bs, m, n}, {0, 2}),
                 b.select(is_p, b.broadcast_in_dim(row_j, {bs, m, n}, {0, 2}), x));
    Value p2 = b.broadcast_in_dim(p, {bs, m}, {0});
    Value perm_j = b.reshape(b.slice(perm, {0, j}, {bs, j + 1}), {bs});
    Value perm_p = b.reduce_sum(b.select(b.compare(row2, p2, Cmp::kEQ), perm, c32(0, {bs, m})), {1});
    perm = b.select(b.compare(row2, c32(j, {bs, m}), Cmp::kEQ), b.broadcast_in_dim(perm_p, {bs, m}, {0}),
                    b.select(b.compare(row2, p2, Cmp::kEQ), b.broadcast_in_dim(perm_j, {bs, m}, {0}), perm));
    // Scale the column below the pivot, then update the trailing block.
    Value piv = b.reshape(b.slice(x, {0, j, j}, {bs, j + 1, j + 1}), {bs});
    Value zero = b.compare(piv, b.constant(t, 0, {bs}), Cmp::kEQ);
    info = b.select(b.logical_and(zero, b.compare(info, c32(0, {bs}), Cmp::kEQ)), c32(j + 1, {bs}), info);
    Value recip = b.div(b.constant(t, 1, {bs}), piv);
    Value colx = b.reshape(slice_matrix(b, x, 0, m, j, j + 1), {bs, m});
    Value scaled = b.select(b.broadcast_in_dim(zero, {bs, m}, {0}), colx,
                            b.mul(colx, b.broadcast_in_dim(recip, {bs, m}, {0})));
    Value urow = b.reshape(slice_matrix(b, x, j, j + 1, 0, n), {bs, n});
    Value outer = b.mul(b.broadcast_in_dim(scaled, {bs, m, n}, {0, 1}), b.broadcast_in_dim(urow, {bs, m, n}, {0, 2}));
    Value lower_rows = b.compare(row3, c32(j, {bs, m, n}), Cmp::kGT);
    Value trailing = b.logical_and(lower_rows, b.compare(col3, c32(j, {bs, m, n}), Cmp::kGT));
    Value in_col = b.logical_and(lower_rows, b.compare(col3, c32(j, {bs, m, n}), Cmp::kEQ));
    x = b.select(trailing, b.sub(x, outer), b.select(in_col, b.broadcast_in_dim(scaled, {bs, m, n}, {0, 1}), x));
  }
  Dims pdims = batch;
  pdims.push_back(k);
  Dims mdims = batch;
  mdims.push_back(m);
  Value piv_all = k == 0 || bs == 0 ? b.constant(DType::kS32, 0, pdims)
                                    : b.reshape(pivots.size() == 1 ? pivots[0] : b.concatenate(pivots, 1), pdims);
  return {b.reshape(x, d), piv_all, b.reshape(info, batch), b.reshape(perm, mdims)};
}

Value permutation_matrix(Builder& b, Value perm, DType t) {
  const Dims pd = b.dims(perm);
  const int64_t m = pd.back();
  Dims full = pd;
  full.push_back(m);
  const int64_t r = static_cast<int64_t>(full.size());
  // P[perm[i], i] = 1: column i of P selects row perm[i].
  std::vector<int64_t> keep(pd.size());
  for (size_t i = 0; i + 1 < pd.size(); ++i) keep[i] = static_cast<int64_t>(i);
  keep.back() = r - 1;
  Value pcol = b.broadcast_in_dim(perm, full, keep);
  Value rows = b.iota(DType::kS32, full, r - 2);
  return b.select(b.compare(rows, pcol, Cmp::kEQ), b.constant(t, 1, full), b.constant(t, 0, full));
}

Value diagonal(Builder& b, Value a) {
  const Dims d = b.dims(a);
  const int64_t n = d.back();
  Dims flat = batch_of(d);
  flat.push_back(n * n);
  Value f = b.reshape(a, flat);
  return b.slice_dim(f, static_cast<int64_t>(flat.size()) - 1, 0, n * n, n + 1);
}

Value pivots_sign(Builder& b, Value pivots, DType t) {
  const Dims pd = b.dims(pivots);
  const int64_t r = static_cast<int64_t>(pd.size());
  Value pos = b.add(b.iota(DType::kS32, pd, r - 1), b.constant(DType::kS32, 1, pd));
  Value moved = b.convert(b.compare(pivots, pos, Cmp::kNE), DType::kS32);
  Value count = b.reduce_sum(moved, {r - 1});
  Value odd = b.compare(b.rem(count, b.constant(DType::kS32, 2, b.dims(count))),
                        b.constant(DType::kS32, 1, b.dims(count)), Cmp::kEQ);
  return b.select(odd, b.constant(t, -1, b.dims(count)), b.constant(t, 1, b.dims(count)));
}

}  // namespace torchtpu::ops
