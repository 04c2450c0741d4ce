// LDL^T with Bunch-Kaufman pivoting, as LAPACK's sytf2 / sytrs on the lower
// triangle. Each matrix of a batch takes its own pivots, so its position k
// (one or two columns a step) is carried per matrix in a device while loop
// and rows are picked by gathers; a finished matrix is carried unchanged.
// The trailing matrix is kept whole and symmetric: a symmetric interchange
// of rows and columns kk and kp there is what sytf2 does to its lower
// triangle, and every update is computed on the lower triangle (in LAPACK's
// order of operations) and mirrored. Columns already factored are never
// interchanged, so the pivots read as LAPACK's.
#include <cmath>

#include "ops/linalg.h"

namespace torchtpu::ops {
namespace {

constexpr DType kI = DType::kS32;

int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// [B] s32 index per matrix as gather indices [B, 2] (matrix, index).
Value per_matrix(Builder& b, Value idx) {
  const int64_t B = b.dims(idx)[0];
  return b.concatenate({b.iota(kI, {B, 1}, 0), b.reshape(idx, {B, 1})}, 1);
}

// Row r[b] of m[b] ([B, n, c]) as [B, c].
Value row_at(Builder& b, Value m, Value r) {
  const Dims d = b.dims(m);
  return b.gather(m, per_matrix(b, r), {0, 1}, {1}, {d[0], d[2]});
}

// v[b, r[b]] ([B, n]) as [B].
Value elem_at(Builder& b, Value v, Value r) { return b.gather(v, per_matrix(b, r), {0, 1}, {}, {b.dims(v)[0]}); }

// out[b, i] = m[b, perm[b, i]] (m [B, n, c], perm s32 [B, n]).
Value permute_rows(Builder& b, Value m, Value perm) {
  const Dims d = b.dims(m);
  Value idx = b.concatenate({b.iota(kI, {d[0], d[1], 1}, 0), b.reshape(perm, {d[0], d[1], 1})}, 2);
  return b.gather(m, idx, {0, 1}, {2}, d);
}

// The identity order with i and j exchanged ([B] each; [B, n]).
Value swap_order(Builder& b, Value iota, Value i, Value j) {
  const int64_t B = b.dims(i)[0];
  Value ib = b.reshape(i, {B, 1}), jb = b.reshape(j, {B, 1});
  return b.select(b.compare(iota, ib, Cmp::kEQ), jb, b.select(b.compare(iota, jb, Cmp::kEQ), ib, iota));
}

Value col(Builder& b, Value v) { return b.reshape(v, {b.dims(v)[0], 1}); }     // [B] -> [B, 1]
Value col3(Builder& b, Value v) { return b.reshape(v, {b.dims(v)[0], 1, 1}); }  // [B] -> [B, 1, 1]
// x_i * y_j ([B, n], [B, m] -> [B, n, m]).
Value outer(Builder& b, Value x, Value y) {
  const Dims dx = b.dims(x), dy = b.dims(y);
  return b.mul(b.reshape(x, {dx[0], dx[1], 1}), b.reshape(y, {dy[0], 1, dy[1]}));
}

// The lower triangle of u mirrored onto the upper one.
Value mirror_lower(Builder& b, Value u) {
  return b.add(triangle(b, u, true), matrix_transpose(b, triangle(b, u, true, -1)));
}

// Row `k` of x ([B, n, r]) replaced by `v` ([B, r]) where `on` ([B]).
Value put_row(Builder& b, Value x, Value k, Value v, Value on) {
  const Dims d = b.dims(x);
  Value at = b.logical_and(b.compare(b.iota(kI, d, 1), col3(b, k), Cmp::kEQ), col3(b, on));
  return b.select(at, b.reshape(v, {d[0], 1, d[2]}), x);
}

// One sytf2 step on every unfinished matrix. Carried: S (trailing matrix,
// whole), LD, pivots, k, info.
std::vector<Value> factor_step(Builder& b, const std::vector<Value>& v, int64_t n, DType t) {
  Value S = v[0], LD = v[1], piv = v[2], k = v[3], info = v[4];
  const int64_t B = b.dims(k)[0];
  auto ci = [&](double x, Dims d) { return b.constant(kI, x, std::move(d)); };
  auto cf = [&](double x, Dims d) { return b.constant(t, x, std::move(d)); };
  Value act = b.compare(k, ci(n, {B}), Cmp::kLT);
  Value kc = b.min(k, ci(n - 1, {B}));
  Value kc1 = b.min(b.add(kc, ci(1, {B})), ci(n - 1, {B}));
  Value iota = b.iota(kI, {B, n}, 1);
  Value below = b.compare(iota, col(b, kc), Cmp::kGT);

  // Pivot choice (NaN entries of the column are passed over).
  Value ck = row_at(b, S, kc);
  Value absakk = b.abs(elem_at(b, ck, kc));
  Value absc = b.abs(ck);
  absc = b.select(b.logical_and(below, b.compare(absc, absc, Cmp::kEQ)), absc, cf(-1, {B, n}));
  Value colmax = b.max(b.reduce_max(absc, {1}), cf(0, {B}));
  Value is_max = b.logical_and(below, b.compare(absc, col(b, colmax), Cmp::kEQ));
  Value imax = b.min(b.reduce_min(b.select(is_max, iota, ci(n, {B, n})), {1}), ci(n - 1, {B}));
  Value ri = row_at(b, S, imax);
  Value rmask = b.logical_and(b.compare(iota, col(b, kc), Cmp::kGE), b.compare(iota, col(b, imax), Cmp::kNE));
  Value rowmax = b.reduce_max(b.select(rmask, b.abs(ri), cf(-1, {B, n})), {1});
  Value aii = b.abs(elem_at(b, ri, imax));
  Value alpha = cf((1 + std::sqrt(17.0)) / 8, {B});
  Value skip = b.compare(b.max(absakk, colmax), cf(0, {B}), Cmp::kEQ);
  Value keep = b.logical_or(b.compare(absakk, b.mul(alpha, colmax), Cmp::kGE),
                            b.compare(absakk, b.mul(b.mul(alpha, colmax), b.div(colmax, rowmax)), Cmp::kGE));
  keep = b.logical_or(skip, keep);
  Value two = b.logical_and(b.logical_not(keep), b.logical_not(b.compare(aii, b.mul(alpha, rowmax), Cmp::kGE)));
  Value kp = b.select(keep, kc, imax);
  Value kk = b.select(two, kc1, kc);

  // Interchange kk and kp in the trailing matrix: P S P^T.
  Value perm = swap_order(b, iota, kk, kp);
  Value S1 = permute_rows(b, matrix_transpose(b, permute_rows(b, S, perm)), perm);
  Value ck2 = row_at(b, S1, kc), ck1 = row_at(b, S1, kc1);
  Value akk = elem_at(b, ck2, kc);

  // 1x1: S -= x (x / d)^T as dsyr with alpha = -1/d (a column j with x_j = 0 is skipped), L = x / d.
  Value d11 = b.div(cf(1, {B}), akk);
  Value x = b.select(below, ck2, cf(0, {B, n}));
  Value temp = b.mul(col(b, b.neg(d11)), x);
  Value nz = b.reshape(b.compare(x, cf(0, {B, n}), Cmp::kNE), {B, 1, n});
  Value upd1 = b.select(nz, b.add(S1, outer(b, x, temp)), S1);
  Value at_k = b.compare(iota, col(b, kc), Cmp::kEQ), at_k1 = b.compare(iota, col(b, kc1), Cmp::kEQ);
  Value col1 = b.select(at_k, b.broadcast_to(col(b, akk), {B, n}),
                        b.select(below, b.mul(x, col(b, d11)), cf(0, {B, n})));

  // 2x2 (sytf2's explicit loop).
  Value below2 = b.compare(iota, col(b, kc1), Cmp::kGT);
  Value b21 = elem_at(b, ck2, kc1), cv = elem_at(b, ck1, kc1);
  Value e11 = b.div(cv, b21), e22 = b.div(akk, b21);
  Value f21 = b.div(b.div(cf(1, {B}), b.sub(b.mul(e11, e22), cf(1, {B}))), b21);
  Value xk = b.select(below2, ck2, cf(0, {B, n})), xk1 = b.select(below2, ck1, cf(0, {B, n}));
  Value wk = b.mul(col(b, f21), b.sub(b.mul(col(b, e11), xk), xk1));
  Value wkp1 = b.mul(col(b, f21), b.sub(b.mul(col(b, e22), xk1), xk));
  Value upd2 = b.sub(b.sub(S1, outer(b, xk, wk)), outer(b, xk1, wkp1));
  Value zero = cf(0, {B, n});
  Value colA2 = b.select(at_k, b.broadcast_to(col(b, akk), {B, n}),
                         b.select(at_k1, b.broadcast_to(col(b, b21), {B, n}), b.select(below2, wk, zero)));
  Value colB2 = b.select(at_k1, b.broadcast_to(col(b, cv), {B, n}), b.select(below2, wkp1, zero));

  // A zero or NaN pivot column: info, and the column stays as it is.
  Value colS = b.select(b.compare(iota, col(b, kc), Cmp::kGE), ck2, zero);
  Value upd = b.select(col3(b, skip), S1, b.select(col3(b, two), upd2, upd1));
  Dims md{B, n, n};
  Value rI = b.iota(kI, md, 1), cJ = b.iota(kI, md, 2);
  Value alive = b.logical_and(b.compare(rI, col3(b, kk), Cmp::kGT), b.compare(cJ, col3(b, kk), Cmp::kGT));
  Value S2 = b.select(alive, mirror_lower(b, upd), b.constant(t, 0, md));
  Value colA = b.select(col(b, skip), colS, b.select(col(b, two), colA2, col1));
  Value LD2 = b.select(b.compare(cJ, col3(b, kc), Cmp::kEQ), b.reshape(colA, {B, n, 1}),
                       b.select(b.logical_and(col3(b, two), b.compare(cJ, col3(b, kc1), Cmp::kEQ)),
                                b.reshape(colB2, {B, n, 1}), LD));
  Value kp1 = b.add(kp, ci(1, {B}));
  Value pv = b.select(two, b.neg(kp1), kp1);
  Value piv_at = b.logical_or(at_k, b.logical_and(col(b, two), at_k1));
  Value piv2 = b.select(piv_at, b.broadcast_to(col(b, pv), {B, n}), piv);
  Value info2 = b.select(b.logical_and(skip, b.compare(info, ci(0, {B}), Cmp::kEQ)), b.add(kc, ci(1, {B})), info);
  Value k2 = b.add(k, b.select(two, ci(2, {B}), ci(1, {B})));
  return {b.select(col3(b, act), S2, S), b.select(col3(b, act), LD2, LD), b.select(col(b, act), piv2, piv),
          b.select(act, k2, k), b.select(act, info2, info)};
}

Value kmin(Builder& b, Value k) { return b.reduce_min(k, {0}); }

}  // namespace

LdlResult ldl_factor(Builder& b, Value a) {
  const Dims d = b.dims(a);
  const Dims batch(d.begin(), d.end() - 2);
  const int64_t n = d.back(), B = numel(batch);
  const DType t = b.dtype(a);
  Dims pd = batch;
  pd.push_back(n);
  if (n == 0 || B == 0) return {a, b.constant(kI, 0, pd), b.constant(kI, 0, batch)};
  Value s0 = b.reshape(mirror_lower(b, a), {B, n, n});
  std::vector<Value> out = b.while_loop(
      {s0, b.constant(t, 0, {B, n, n}), b.constant(kI, 0, {B, n}), b.constant(kI, 0, {B}),
       b.constant(kI, 0, {B})},
      [&](Builder& lb, const std::vector<Value>& v) {
        return lb.compare(kmin(lb, v[3]), lb.constant(kI, static_cast<double>(n)), Cmp::kLT);
      },
      [&](Builder& lb, const std::vector<Value>& v) { return factor_step(lb, v, n, t); });
  return {b.reshape(out[1], d), b.reshape(out[2], pd), b.reshape(out[4], batch)};
}

namespace {

// sytrs's first half (L D X = B, rows interchanged as the pivots say), one
// block a step. Carried: X, k, L^T, pivots.
std::vector<Value> forward_step(Builder& b, const std::vector<Value>& v, int64_t n) {
  Value X = v[0], k = v[1], LT = v[2], P = v[3];
  const Dims xd = b.dims(X);
  const int64_t B = xd[0], r = xd[2];
  const DType t = b.dtype(X);
  auto ci = [&](double x, Dims d) { return b.constant(kI, x, std::move(d)); };
  Value act = b.compare(k, ci(n, {B}), Cmp::kLT);
  Value kc = b.min(k, ci(n - 1, {B}));
  Value kc1 = b.min(b.add(kc, ci(1, {B})), ci(n - 1, {B}));
  Value pk = elem_at(b, P, kc);
  Value two = b.compare(pk, ci(0, {B}), Cmp::kLT);
  Value kp = b.max(b.min(b.select(two, b.sub(b.neg(pk), ci(1, {B})), b.sub(pk, ci(1, {B}))), ci(n - 1, {B})),
                   ci(0, {B}));
  Value iota = b.iota(kI, {B, n}, 1);
  Value X1 = permute_rows(b, X, swap_order(b, iota, b.select(two, kc1, kc), kp));
  Value lk = row_at(b, LT, kc), lk1 = row_at(b, LT, kc1);  // columns k and k + 1 of L
  Value xk = row_at(b, X1, kc), xk1 = row_at(b, X1, kc1);
  Value rows = b.iota(kI, xd, 1);
  // dger: X_i -= L_ik x_k for rows below, skipping columns where x_k is 0.
  auto ger = [&](Value X0, Value l, Value y, Value from) {
    Value on = b.logical_and(b.compare(rows, col3(b, from), Cmp::kGT),
                             b.reshape(b.compare(y, b.constant(t, 0, {B, r}), Cmp::kNE), {B, 1, r}));
    return b.select(on, b.sub(X0, outer(b, l, y)), X0);
  };
  Value one = b.constant(t, 1, {B});
  Value X2 = put_row(b, ger(X1, lk, xk, kc), kc, b.mul(xk, col(b, b.div(one, elem_at(b, lk, kc)))),
                     b.constant(DType::kBool, 1, {B}));
  Value Xb = ger(ger(X1, lk, xk, kc1), lk1, xk1, kc1);
  Value akm1k = elem_at(b, lk, kc1);
  Value akm1 = b.div(elem_at(b, lk, kc), akm1k), ak = b.div(elem_at(b, lk1, kc1), akm1k);
  Value denom = col(b, b.sub(b.mul(akm1, ak), one));
  Value bkm1 = b.div(xk, col(b, akm1k)), bk = b.div(xk1, col(b, akm1k));
  Value nk = b.div(b.sub(b.mul(col(b, ak), bkm1), bk), denom);
  Value nk1 = b.div(b.sub(b.mul(col(b, akm1), bk), bkm1), denom);
  Value yes = b.constant(DType::kBool, 1, {B});
  Value X3 = put_row(b, put_row(b, Xb, kc, nk, yes), kc1, nk1, yes);
  Value Xn = b.select(col3(b, two), X3, X2);
  Value k2 = b.add(k, b.select(two, ci(2, {B}), ci(1, {B})));
  return {b.select(col3(b, act), Xn, X), b.select(act, k2, k), LT, P};
}

// sytrs's second half (L^T X = B), from the last block to the first.
std::vector<Value> backward_step(Builder& b, const std::vector<Value>& v, int64_t n) {
  Value X = v[0], k = v[1], LT = v[2], P = v[3];
  const Dims xd = b.dims(X);
  const int64_t B = xd[0];
  auto ci = [&](double x, Dims d) { return b.constant(kI, x, std::move(d)); };
  Value act = b.compare(k, ci(0, {B}), Cmp::kGE);
  Value kc = b.max(k, ci(0, {B}));
  Value km1 = b.max(b.sub(kc, ci(1, {B})), ci(0, {B}));
  Value pk = elem_at(b, P, kc);
  Value two = b.compare(pk, ci(0, {B}), Cmp::kLT);
  Value kp = b.max(b.min(b.select(two, b.sub(b.neg(pk), ci(1, {B})), b.sub(pk, ci(1, {B}))), ci(n - 1, {B})),
                   ci(0, {B}));
  Value rows = b.iota(kI, xd, 1);
  Value below = b.compare(rows, col3(b, kc), Cmp::kGT);
  // dgemv: x_j -= sum over rows i > k of L_ij X_i.
  auto dot = [&](Value l) {
    Value prod = b.mul(b.reshape(l, {B, n, 1}), X);
    return b.reduce_sum(b.select(below, prod, b.zeros_like(prod)), {1});
  };
  Value yes = b.constant(DType::kBool, 1, {B});
  Value X1 = put_row(b, X, kc, b.sub(row_at(b, X, kc), dot(row_at(b, LT, kc))), yes);
  X1 = put_row(b, X1, km1, b.sub(row_at(b, X, km1), dot(row_at(b, LT, km1))), two);
  Value iota = b.iota(kI, {B, n}, 1);
  Value X2 = permute_rows(b, X1, swap_order(b, iota, kc, kp));
  Value k2 = b.sub(k, b.select(two, ci(2, {B}), ci(1, {B})));
  return {b.select(col3(b, act), X2, X), b.select(act, k2, k), LT, P};
}

}  // namespace

Value ldl_solve(Builder& b, Value ld, Value pivots, Value rhs) {
  const Dims xd = b.dims(rhs);
  const Dims batch(xd.begin(), xd.end() - 2);
  const int64_t n = xd[xd.size() - 2], r = xd.back(), B = numel(batch);
  if (n == 0 || r == 0 || B == 0) return rhs;
  Value LT = matrix_transpose(b, b.reshape(ld, {B, n, n}));
  Value P = b.reshape(pivots, {B, n});
  Value X = b.reshape(rhs, {B, n, r});
  const double nd = static_cast<double>(n);
  std::vector<Value> f = b.while_loop(
      {X, b.constant(kI, 0, {B}), LT, P},
      [&](Builder& lb, const std::vector<Value>& v) {
        return lb.compare(kmin(lb, v[1]), lb.constant(kI, nd), Cmp::kLT);
      },
      [&](Builder& lb, const std::vector<Value>& v) { return forward_step(lb, v, n); });
  std::vector<Value> s = b.while_loop(
      {f[0], b.constant(kI, nd - 1, {B}), LT, P},
      [&](Builder& lb, const std::vector<Value>& v) {
        return lb.compare(lb.reduce_max(v[1], {0}), lb.constant(kI, 0), Cmp::kGE);
      },
      [&](Builder& lb, const std::vector<Value>& v) { return backward_step(lb, v, n); });
  return b.reshape(s[0], xd);
}

}  // namespace torchtpu::ops
