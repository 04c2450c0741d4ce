#include "ops/decompose.h"

#include <cmath>
#include <limits>

#include "ops/linalg.h"

namespace torchtpu::ops {

namespace {

Value s64(Builder& b, int64_t v) { return b.constant(DType::kS64, static_cast<double>(v)); }
Value fc(Builder& b, Value like, double v) { return b.constant(b.dtype(like), v, b.dims(like)); }

// Where `axis` of `d` equals (or compares with) the 0-d int64 k.
Value at_index(Builder& b, const Dims& d, int64_t axis, Value k, Cmp c = Cmp::kEQ) {
  return b.compare(b.iota(DType::kS64, d, axis), b.broadcast_to(k, d), c);
}
// Row (axis 1) or column (axis 2) k of [B, m, n], as [B, n] or [B, m]; and
// that slice replaced by v.
Value slice_at(Builder& b, Value a, int64_t axis, Value k) {
  return b.reduce_sum(b.select(at_index(b, b.dims(a), axis, k), a, b.zeros_like(a)), {axis});
}
Value set_at(Builder& b, Value a, int64_t axis, Value k, Value v) {
  return b.select(at_index(b, b.dims(a), axis, k), b.broadcast_in_dim(v, b.dims(a), {0, 3 - axis}), a);
}
Value col(Builder& b, Value a, Value k) { return slice_at(b, a, 2, k); }
Value row(Builder& b, Value a, Value k) { return slice_at(b, a, 1, k); }
Value set_col(Builder& b, Value a, Value k, Value v) { return set_at(b, a, 2, k, v); }
// Element k of [B, K] as [B].
Value elem(Builder& b, Value v, Value k) {
  return b.reduce_sum(b.select(at_index(b, b.dims(v), 1, k), v, b.zeros_like(v)), {1});
}
Value bcast_b(Builder& b, Value v, const Dims& d) { return b.broadcast_in_dim(v, d, {0}); }

// The Householder vector v_k of a packed [B, m, n] matrix: 1 at row k, the
// stored tail below it, zeros above.
Value reflector(Builder& b, Value packed, Value k) {
  Value x = col(b, packed, k);
  const Dims d = b.dims(x);
  return b.select(at_index(b, d, 1, k), fc(b, x, 1), b.select(at_index(b, d, 1, k, Cmp::kGT), x, b.zeros_like(x)));
}

// Rows (axis 1) or columns (axis 2) p and q of x [B, m, n] rotated by
// (c, s) ([B]): p <- c p - s q, q <- s p + c q.
Value rotate(Builder& b, Value x, int64_t axis, Value p, Value q, Value c, Value s) {
  const Dims d = b.dims(x);
  const Dims sd{d[0], d[3 - axis]};
  Value xp = slice_at(b, x, axis, p), xq = slice_at(b, x, axis, q);
  Value cc = bcast_b(b, c, sd), ss = bcast_b(b, s, sd);
  Value np = b.sub(b.mul(cc, xp), b.mul(ss, xq));
  Value nq = b.add(b.mul(ss, xp), b.mul(cc, xq));
  return set_at(b, set_at(b, x, axis, p, np), axis, q, nq);
}
Value rotate_cols(Builder& b, Value x, Value p, Value q, Value c, Value s) { return rotate(b, x, 2, p, q, c, s); }

// t = sign(z) / (|z| + sqrt(1 + z^2)) (0 where `skip`), c = 1 / sqrt(1 + t^2), s = t c.
std::pair<Value, Value> rotation(Builder& b, Value z, Value skip) {
  Value one = fc(b, z, 1);
  Value az = b.abs(z);
  Value sg = b.select(b.compare(z, b.zeros_like(z), Cmp::kGE), one, b.neg(one));
  Value t = b.div(sg, b.add(az, b.sqrt(b.add(one, b.mul(z, z)))));
  t = b.select(b.logical_or(skip, b.compare(z, z, Cmp::kNE)), b.zeros_like(t), t);
  Value c = b.rsqrt(b.add(one, b.mul(t, t)));
  return {c, b.mul(t, c)};
}

double eps_of(DType t) { return t == DType::kF64 ? std::ldexp(1.0, -52) : std::ldexp(1.0, -23); }

// Sweeps of rotations over every pair p < q of n: `converged` (of the
// carried values) is checked once per sweep; `rotate` applies the rotation
// of pair (p, q) (0-d int64) to the carried values.
using Carried = std::vector<Value>;
Carried jacobi_sweeps(Builder& b, int64_t n, Carried init,
                      const std::function<Value(Builder&, const Carried&)>& converged,
                      const std::function<Carried(Builder&, const Carried&, Value, Value)>& rotate) {
  Carried outer_init{s64(b, 0)};
  outer_init.insert(outer_init.end(), init.begin(), init.end());
  Carried out = b.while_loop(
      outer_init,
      [&](Builder& rb, const Carried& a) {
        Carried vals(a.begin() + 1, a.end());
        return rb.logical_and(rb.compare(a[0], s64(rb, kMaxSweeps), Cmp::kLT), rb.logical_not(converged(rb, vals)));
      },
      [&](Builder& rb, const Carried& a) {
        Carried inner_init{s64(rb, 0)};
        inner_init.insert(inner_init.end(), a.begin() + 1, a.end());
        Carried in = rb.while_loop(
            inner_init,
            [&](Builder& ib, const Carried& x) { return ib.compare(x[0], s64(ib, n * n), Cmp::kLT); },
            [&](Builder& ib, const Carried& x) {
              Value p = ib.div(x[0], s64(ib, n));
              Value q = ib.rem(x[0], s64(ib, n));
              Carried vals(x.begin() + 1, x.end());
              // Pairs with p >= q are skipped inside `rotate` (their rotation is the identity).
              Carried next = rotate(ib, vals, p, q);
              Carried r{ib.add(x[0], s64(ib, 1))};
              r.insert(r.end(), next.begin(), next.end());
              return r;
            });
        Carried r{rb.add(a[0], s64(rb, 1))};
        r.insert(r.end(), in.begin() + 1, in.end());
        return r;
      });
  return Carried(out.begin() + 1, out.end());
}

// The permutation matrix [B, n, n] that reorders columns by `perm` ([B, n]):
// x P has column j = column perm[j] of x.
Value perm_matrix(Builder& b, Value perm, DType t) {
  const Dims pd = b.dims(perm);
  const Dims d{pd[0], pd[1], pd[1]};
  Value hit = b.compare(b.iota(DType::kS64, d, 1), b.broadcast_in_dim(perm, d, {0, 2}), Cmp::kEQ);
  return b.select(hit, b.constant(t, 1, d), b.constant(t, 0, d));
}

}  // namespace

Householder householder_qr(Builder& b, Value a) {
  const Dims d = b.dims(a);
  const int64_t m = d[1], n = d[2], k = std::min(m, n);
  Value tau0 = b.constant(b.dtype(a), 0, {d[0], k});
  if (k == 0) return {a, tau0};
  Carried out = b.while_loop(
      {s64(b, 0), a, tau0}, [k](Builder& rb, const Carried& x) { return rb.compare(x[0], s64(rb, k), Cmp::kLT); },
      [](Builder& rb, const Carried& x) {
        Value kk = x[0], A = x[1], tau = x[2];
        const Dims ad = rb.dims(A);
        const Dims cd{ad[0], ad[1]};
        Value xk = col(rb, A, kk);
        Value at = at_index(rb, cd, 1, kk), below = at_index(rb, cd, 1, kk, Cmp::kGT);
        Value zero = rb.zeros_like(xk);
        Value alpha = rb.reduce_sum(rb.select(at, xk, zero), {1});
        Value xn2 = rb.reduce_sum(rb.select(below, rb.mul(xk, xk), zero), {1});
        Value h = rb.sqrt(rb.add(rb.mul(alpha, alpha), xn2));
        Value trivial = rb.compare(xn2, rb.zeros_like(xn2), Cmp::kEQ);
        // LAPACK's dlarfg: beta = -sign(alpha) * hypot(alpha, ||x_tail||).
        Value beta = rb.select(rb.compare(alpha, rb.zeros_like(alpha), Cmp::kLT), h, rb.neg(h));
        beta = rb.select(trivial, alpha, beta);
        Value tk = rb.select(trivial, rb.zeros_like(alpha), rb.div(rb.sub(beta, alpha), beta));
        Value scale = rb.select(trivial, rb.zeros_like(alpha), rb.div(fc(rb, alpha, 1), rb.sub(alpha, beta)));
        Value v = rb.select(at, fc(rb, xk, 1), rb.select(below, rb.mul(xk, bcast_b(rb, scale, cd)), zero));
        // H A on rows >= k of the columns right of k.
        Value rows_ge = at_index(rb, ad, 1, kk, Cmp::kGE), right = at_index(rb, ad, 2, kk, Cmp::kGT);
        Value region = rb.logical_and(rows_ge, right);
        Value vb = rb.broadcast_in_dim(v, ad, {0, 1});
        Value w = rb.reduce_sum(rb.select(region, rb.mul(vb, A), rb.zeros_like(A)), {1});  // [B, n]
        Value upd = rb.mul(rb.mul(vb, rb.broadcast_in_dim(w, ad, {0, 2})), rb.broadcast_in_dim(tk, ad, {0}));
        Value A2 = rb.select(region, rb.sub(A, upd), A);
        Value newcol = rb.select(at, bcast_b(rb, beta, cd), rb.select(below, v, xk));
        A2 = set_col(rb, A2, kk, newcol);
        Value tau2 = rb.select(at_index(rb, rb.dims(tau), 1, kk), bcast_b(rb, tk, rb.dims(tau)), tau);
        return Carried{rb.add(kk, s64(rb, 1)), A2, tau2};
      });
  return {out[1], out[2]};
}

// Applies H_k = I - tau_k v_k v_k^T for k in order (ascending or descending)
// to c from the left ([B, m, p]) or the right ([B, p, m]). `q_form`: c is
// the identity being turned into Q (descending), whose columns < k are
// still unit vectors that H_k leaves alone.
static Value apply_reflectors(Builder& b, Value packed, Value tau, Value c, bool left, bool ascending,
                              bool q_form = false) {
  const int64_t k = b.dims(tau)[1];
  if (k == 0) return c;
  Value start = s64(b, ascending ? 0 : k - 1);
  Carried out = b.while_loop(
      {start, c, packed, tau},
      [k, ascending](Builder& rb, const Carried& x) {
        return ascending ? rb.compare(x[0], s64(rb, k), Cmp::kLT) : rb.compare(x[0], s64(rb, 0), Cmp::kGE);
      },
      [left, ascending, q_form](Builder& rb, const Carried& x) {
        Value kk = x[0], C = x[1];
        Value v = reflector(rb, x[2], kk);       // [B, m]
        Value t = elem(rb, x[3], kk);            // [B]
        const Dims cd = rb.dims(C);
        // H_k changes only rows (left) or columns (right) >= k, which is all
        // LAPACK's dorm2r / dorg2r touch: elsewhere a NaN or infinite tau
        // must not turn exact zeros into NaN.
        Value part = at_index(rb, cd, left ? 1 : 2, kk, Cmp::kGE);
        if (q_form) part = rb.logical_and(part, at_index(rb, cd, 2, kk, Cmp::kGE));
        Value r;
        if (left) {  // C - t v (v^T C)
          Value vb = rb.broadcast_in_dim(v, cd, {0, 1});
          Value w = rb.reduce_sum(rb.mul(vb, C), {1});  // [B, p]
          r = rb.sub(C, rb.mul(rb.mul(vb, rb.broadcast_in_dim(w, cd, {0, 2})), rb.broadcast_in_dim(t, cd, {0})));
        } else {  // C - t (C v) v^T
          Value vb = rb.broadcast_in_dim(v, cd, {0, 2});
          Value w = rb.reduce_sum(rb.mul(vb, C), {2});  // [B, p]
          r = rb.sub(C, rb.mul(rb.mul(vb, rb.broadcast_in_dim(w, cd, {0, 1})), rb.broadcast_in_dim(t, cd, {0})));
        }
        r = rb.select(part, r, C);
        Value next = rb.add(kk, s64(rb, ascending ? 1 : -1));
        return Carried{next, r, x[2], x[3]};
      });
  return out[1];
}

Value householder_q(Builder& b, Value packed, Value tau, int64_t cols) {
  const Dims d = b.dims(packed);
  const Dims qd{d[0], d[1], cols};
  Value eye = b.select(b.compare(b.iota(DType::kS64, qd, 1), b.iota(DType::kS64, qd, 2), Cmp::kEQ),
                       b.constant(b.dtype(packed), 1, qd), b.constant(b.dtype(packed), 0, qd));
  return apply_reflectors(b, packed, tau, eye, /*left=*/true, /*ascending=*/false, /*q_form=*/true);
}

Value householder_apply(Builder& b, Value packed, Value tau, Value c, bool left, bool transpose) {
  // Q = H_0 ... H_{k-1}: Q C applies H_{k-1} first; Q^T C, C Q apply H_0 first.
  const bool ascending = left ? transpose : !transpose;
  return apply_reflectors(b, packed, tau, c, left, ascending);
}

Eigh jacobi_eigh(Builder& b, Value a) {
  const Dims d = b.dims(a);
  const int64_t n = d[1];
  const DType t = b.dtype(a);
  const double tol = eps_of(t) * static_cast<double>(n);
  Value v0 = identity(b, t, d);
  Carried out = jacobi_sweeps(
      b, n, {a, v0},
      [tol, n](Builder& rb, const Carried& x) {
        Value A = x[0];
        const Dims ad = rb.dims(A);
        Value diag = rb.compare(rb.iota(DType::kS64, ad, 1), rb.iota(DType::kS64, ad, 2), Cmp::kEQ);
        Value sq = rb.mul(A, A);
        Value off = rb.reduce_sum(rb.select(diag, rb.zeros_like(sq), sq), {1, 2});
        Value all = rb.reduce_sum(sq, {1, 2});
        // off <= tol^2 * ||A||^2 (NaN compares false: a NaN matrix stops at once).
        Value bad = rb.compare(off, rb.mul(all, fc(rb, all, tol * tol)), Cmp::kGT);
        (void)n;
        return rb.logical_not(rb.reduce(bad, {0}, Body::kOr, 0));
      },
      [](Builder& rb, const Carried& x, Value p, Value q) {
        Value A = x[0], V = x[1];
        Value ap = row(rb, A, p), aq = row(rb, A, q);  // [B, n]
        Value app = elem(rb, ap, p), apq = elem(rb, ap, q), aqq = elem(rb, aq, q);
        Value skip = rb.logical_or(rb.broadcast_to(rb.compare(p, q, Cmp::kGE), rb.dims(apq)),
                                   rb.compare(apq, rb.zeros_like(apq), Cmp::kEQ));
        Value theta = rb.div(rb.sub(aqq, app), rb.mul(apq, fc(rb, apq, 2)));
        auto [c, s] = rotation(rb, theta, skip);
        Value A2 = rotate_cols(rb, rotate(rb, A, 1, p, q, c, s), p, q, c, s);
        // The rotated pair is zero by construction; the diagonal takes
        // a_pp - t a_pq and a_qq + t a_pq (more accurate than the products).
        const Dims ad = rb.dims(A);
        Value tt = rb.select(skip, rb.zeros_like(apq), rb.div(s, c));
        Value rp = at_index(rb, ad, 1, p), rq = at_index(rb, ad, 1, q);
        Value cp = at_index(rb, ad, 2, p), cq = at_index(rb, ad, 2, q);
        Value pq = rb.logical_or(rb.logical_and(rp, cq), rb.logical_and(rq, cp));
        Value sk = rb.broadcast_in_dim(skip, ad, {0});
        A2 = rb.select(rb.logical_and(pq, rb.logical_not(sk)), rb.zeros_like(A2), A2);
        Value npp = rb.sub(app, rb.mul(tt, apq)), nqq = rb.add(aqq, rb.mul(tt, apq));
        A2 = rb.select(rb.logical_and(rb.logical_and(rp, cp), rb.logical_not(sk)), rb.broadcast_in_dim(npp, ad, {0}), A2);
        A2 = rb.select(rb.logical_and(rb.logical_and(rq, cq), rb.logical_not(sk)), rb.broadcast_in_dim(nqq, ad, {0}), A2);
        return Carried{A2, rotate_cols(rb, V, p, q, c, s)};
      });
  Value values = diagonal(b, out[0]);
  auto sorted = b.sort({values, b.iota(DType::kS64, b.dims(values), 1)}, 1, /*descending=*/false, /*stable=*/true);
  Value vectors = matmul(b, out[1], perm_matrix(b, sorted[1], t));
  return {sorted[0], vectors};
}

Svd jacobi_svd(Builder& b, Value a, bool full, bool compute_uv) {
  const Dims d = b.dims(a);
  if (d[1] < d[2]) {  // A = (A^T)^T: U and V swap roles.
    Svd t = jacobi_svd(b, matrix_transpose(b, a), full, compute_uv);
    if (!compute_uv) return t;
    return {matrix_transpose(b, t.vh), t.s, matrix_transpose(b, t.u)};
  }
  const int64_t m = d[1], n = d[2];
  const DType t = b.dtype(a);
  const double tol = eps_of(t) * static_cast<double>(n);
  Value v0 = identity(b, t, {d[0], n, n});
  Carried out = jacobi_sweeps(
      b, n, {a, v0},
      [tol](Builder& rb, const Carried& x) {
        Value W = x[0];
        Value g = matmul(rb, matrix_transpose(rb, W), W);  // [B, n, n]
        const Dims gd = rb.dims(g);
        Value dg = diagonal(rb, g);
        Value dd = rb.mul(rb.broadcast_in_dim(dg, gd, {0, 1}), rb.broadcast_in_dim(dg, gd, {0, 2}));
        Value off = rb.compare(rb.iota(DType::kS64, gd, 1), rb.iota(DType::kS64, gd, 2), Cmp::kNE);
        // Every pair orthogonal to tol relative to its norms.
        Value bad = rb.logical_and(off, rb.compare(rb.mul(g, g), rb.mul(dd, fc(rb, dd, tol * tol)), Cmp::kGT));
        return rb.logical_not(rb.reduce(bad, {0, 1, 2}, Body::kOr, 0));
      },
      [](Builder& rb, const Carried& x, Value p, Value q) {
        Value W = x[0], V = x[1];
        Value wp = col(rb, W, p), wq = col(rb, W, q);
        Value alpha = rb.reduce_sum(rb.mul(wp, wp), {1}), beta = rb.reduce_sum(rb.mul(wq, wq), {1});
        Value gamma = rb.reduce_sum(rb.mul(wp, wq), {1});
        Value skip = rb.logical_or(rb.broadcast_to(rb.compare(p, q, Cmp::kGE), rb.dims(gamma)),
                                   rb.compare(gamma, rb.zeros_like(gamma), Cmp::kEQ));
        Value zeta = rb.div(rb.sub(beta, alpha), rb.mul(gamma, fc(rb, gamma, 2)));
        auto [c, s] = rotation(rb, zeta, skip);
        return Carried{rotate_cols(rb, W, p, q, c, s), rotate_cols(rb, V, p, q, c, s)};
      });
  Value W = out[0], V = out[1];
  Value s = b.sqrt(b.reduce_sum(b.mul(W, W), {1}));  // [B, n]
  auto sorted = b.sort({s, b.iota(DType::kS64, b.dims(s), 1)}, 1, /*descending=*/true, /*stable=*/true);
  if (!compute_uv) return {Value{}, sorted[0], Value{}};
  Value pm = perm_matrix(b, sorted[1], t);
  W = matmul(b, W, pm);
  V = matmul(b, V, pm);
  // U: the orthonormal Q of W's Householder QR (complete when `full`), each
  // of the first n columns signed as W's.
  Householder h = householder_qr(b, W);
  Value q = householder_q(b, h.packed, h.tau, full ? m : n);
  Value r_diag = diagonal(b, b.slice_dim(h.packed, 1, 0, n));
  const Dims qd = b.dims(q);
  Value neg = b.compare(r_diag, b.zeros_like(r_diag), Cmp::kLT);  // [B, n]
  Value sign = b.select(neg, b.constant(t, -1, b.dims(neg)), b.constant(t, 1, b.dims(neg)));
  if (qd[2] > n) sign = b.concatenate({sign, b.constant(t, 1, {qd[0], qd[2] - n})}, 1);
  Value u = b.mul(q, b.broadcast_in_dim(sign, qd, {0, 2}));
  return {u, sorted[0], matrix_transpose(b, V)};
}

Value matrix_exp(Builder& b, Value a) {
  const Dims d = b.dims(a);
  const DType t = b.dtype(a);
  const int64_t nb = d[0];
  // theta_18 of PyTorch's CPU kernel (Bader, Blanes, Casas): the largest
  // 1-norm for which the degree-18 approximant is exact to the dtype.
  const double theta = t == DType::kF64 ? 1.090863719290036e+00 : 3.010066362817634e+00;
  Value norm = b.reduce_max(b.reduce_sum(b.abs(a), {1}), {1});  // [B]
  Value ratio = b.div(norm, b.constant(t, theta, {nb}));
  Value s = b.ceil(b.div(b.log(ratio), b.constant(t, std::log(2.0), {nb})));
  s = b.select(b.compare(s, s, Cmp::kEQ), b.max(s, b.zeros_like(s)), b.zeros_like(s));  // NaN / -inf -> 0
  s = b.min(s, b.constant(t, 1000, {nb}));
  Value si = b.convert(s, DType::kS64);
  Value scale = b.pow(b.constant(t, 2, {nb}), s);
  Value x = b.div(a, b.broadcast_in_dim(scale, d, {0}));
  Value eye = identity(b, t, d);
  // Horner: I + x/1 (I + x/2 (I + ... (I + x/18))).
  Value e = eye;
  for (int k = 18; k >= 1; --k) e = b.add(eye, b.div(matmul(b, x, e), b.constant(t, k, d)));
  Value smax = b.reduce_max(si, {0});
  Carried out = b.while_loop(
      {s64(b, 0), smax, si, e},
      [](Builder& rb, const Carried& c) { return rb.compare(c[0], c[1], Cmp::kLT); },
      [](Builder& rb, const Carried& c) {
        Value sq = matmul(rb, c[3], c[3]);
        const Dims ed = rb.dims(c[3]);
        Value more = rb.compare(rb.broadcast_to(c[0], rb.dims(c[2])), c[2], Cmp::kLT);  // [B]
        Value next = rb.select(rb.broadcast_in_dim(more, ed, {0}), sq, c[3]);
        return Carried{rb.add(c[0], s64(rb, 1)), c[1], c[2], next};
      });
  return out[3];
}

}  // namespace torchtpu::ops
