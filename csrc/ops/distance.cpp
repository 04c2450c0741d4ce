#include "ops/distance.h"

#include <cmath>

#include "ops/index.h"
#include "ops/linalg.h"

namespace torchtpu::ops {

namespace {

// x1[:, :, None, :] - x2[:, None, :, :]: [B, P, R, M].
Value pair_diff(Builder& b, Value x1, Value x2) {
  const Dims d1 = b.dims(x1), d2 = b.dims(x2);
  const Dims d{d1[0], d1[1], d2[1], d1[2]};
  return b.sub(b.broadcast_in_dim(x1, d, {0, 1, 3}), b.broadcast_in_dim(x2, d, {0, 2, 3}));
}

Value sign(Builder& b, Value x) {
  Value z = b.zeros_like(x);
  Value one = b.full_like(x, 1);
  return b.sub(b.select(b.compare(z, x, Cmp::kLT), one, z), b.select(b.compare(x, z, Cmp::kLT), one, z));
}

Value pow(Builder& b, Value x, Value e) { return b.pow(x, e); }

}  // namespace

Value cdist(Builder& b, Value x1, Value x2, double p, Value pv, bool max_skips_nan) {
  Value diff = pair_diff(b, x1, x2);
  Value ad = b.abs(diff);
  const DType t = b.dtype(diff);
  // p = 0: the CPU's min(ceil(|d|), 1), so a NaN coordinate gives NaN.
  if (p == 0) return b.reduce_sum(b.min(b.ceil(ad), b.full_like(ad, 1)), {3});
  if (p == 1) return b.reduce_sum(ad, {3});
  if (p == 2) return b.sqrt(b.reduce_sum(b.mul(diff, diff), {3}));
  // p = inf: cdist's CPU kernel keeps a running std::max from 0, which never
  // takes a NaN; pdist's vectorized maximum propagates it.
  if (std::isinf(p))
    return b.reduce_max(max_skips_nan ? b.select(b.compare(ad, ad, Cmp::kNE), b.zeros_like(ad), ad) : ad, {3});
  Value s = b.reduce_sum(pow(b, ad, b.broadcast_to(pv, b.dims(ad))), {3});
  Value inv = b.div(b.constant(t, 1), pv);
  return pow(b, s, b.broadcast_to(inv, b.dims(s)));
}

Value euclidean_dist(Builder& b, Value x1, Value x2) {
  const Dims d1 = b.dims(x1), d2 = b.dims(x2);
  const DType t = b.dtype(x1);
  Value n1 = b.reduce_sum(b.mul(x1, x1), {2}), n2 = b.reduce_sum(b.mul(x2, x2), {2});
  Value a = b.concatenate({b.mul(x1, b.constant(t, -2, d1)), b.reshape(n1, {d1[0], d1[1], 1}),
                           b.constant(t, 1, {d1[0], d1[1], 1})}, 2);
  Value c = b.concatenate({x2, b.constant(t, 1, {d2[0], d2[1], 1}), b.reshape(n2, {d2[0], d2[1], 1})}, 2);
  Value r = matmul(b, a, matrix_transpose(b, c));
  return b.sqrt(b.max(r, b.zeros_like(r)));
}

Value cdist_backward(Builder& b, Value grad, Value x1, Value x2, Value dist, double p, Value pv) {
  Value diff = pair_diff(b, x1, x2);  // [B, P, R, M]
  const Dims d = b.dims(diff);
  Value g = b.broadcast_in_dim(grad, d, {0, 1, 2});
  Value dd = b.broadcast_in_dim(dist, d, {0, 1, 2});
  Value zero = b.zeros_like(diff);
  Value dist0 = b.compare(dd, zero, Cmp::kEQ);
  Value ad = b.abs(diff);
  Value r;
  if (p == 0) {
    r = zero;
  } else if (p == 1) {
    r = b.mul(g, sign(b, diff));
  } else if (std::isinf(p)) {
    // grad * sign(diff) * (1 - min(1, ceil(| |diff| - dist |))): where |diff| is the max.
    Value hit = b.sub(b.full_like(diff, 1), b.min(b.full_like(diff, 1),
                                                  b.ceil(b.abs(b.sub(ad, dd)))));
    r = b.mul(b.mul(g, sign(b, diff)), hit);
  } else if (p == 2) {
    r = b.select(dist0, zero, b.div(b.mul(g, diff), dd));
  } else {
    Value pb = b.broadcast_to(pv, d);
    Value one = b.full_like(diff, 1), two = b.full_like(diff, 2);
    Value denom = pow(b, dd, b.sub(pb, one));
    if (p < 2) {
      Value skip = b.logical_or(dist0, b.logical_and(b.compare(diff, zero, Cmp::kEQ),
                                                     b.compare(pb, one, Cmp::kLT)));
      r = b.select(skip, zero, b.div(b.mul(b.mul(sign(b, diff), pow(b, ad, b.sub(pb, one))), g), denom));
    } else {
      r = b.select(dist0, zero, b.div(b.mul(b.mul(diff, pow(b, ad, b.sub(pb, two))), g), denom));
    }
  }
  return b.reduce_sum(r, {2});
}

Value pdist(Builder& b, Value x, double p, Value pv) {
  const Dims d = b.dims(x);
  const int64_t n = d[0], pairs = n * (n - 1) / 2;
  Value x3 = b.reshape(x, {1, n, d[1]});
  Value full = b.reshape(cdist(b, x3, x3, p, pv, /*max_skips_nan=*/false), {n, n});
  Value upper = b.compare(b.iota(DType::kS64, {n, n}, 0), b.iota(DType::kS64, {n, n}, 1), Cmp::kLT);
  return true_values(b, upper, full, pairs);
}

Value pdist_backward(Builder& b, Value grad, Value x, Value dist, double p, Value pv) {
  const Dims d = b.dims(x);
  const int64_t n = d[0];
  // The condensed index of pair (i, j), i < j: i n - i (i + 1) / 2 + j - i - 1.
  Value i = b.iota(DType::kS64, {n, n}, 0), j = b.iota(DType::kS64, {n, n}, 1);
  Value upper = b.compare(i, j, Cmp::kLT);
  auto c = [&](int64_t v) { return b.constant(DType::kS64, static_cast<double>(v), {n, n}); };
  Value idx = b.add(b.sub(b.mul(i, c(n)), b.div(b.mul(i, b.add(i, c(1))), c(2))),
                    b.sub(b.sub(j, i), c(1)));
  idx = b.select(upper, idx, c(0));
  auto spread = [&](Value v) {  // [pairs] -> symmetric [n, n] with a zero diagonal
    Value m = b.gather(v, b.reshape(idx, {n, n, 1}), {0}, {}, {n, n});
    m = b.select(upper, m, b.zeros_like(m));
    return b.add(m, b.transpose(m, {1, 0}));
  };
  const int64_t pairs = b.dims(grad)[0];
  if (pairs == 0) return b.zeros_like(x);
  Value g = spread(grad), dm = spread(dist);
  Value x3 = b.reshape(x, {1, n, d[1]});
  return b.reshape(cdist_backward(b, b.reshape(g, {1, n, n}), x3, x3, b.reshape(dm, {1, n, n}), p, pv), d);
}

}  // namespace torchtpu::ops
