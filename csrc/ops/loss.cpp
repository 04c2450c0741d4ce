#include "ops/loss.h"

namespace torchtpu::ops {

namespace {
Value c(Builder& b, Value like, double v) { return b.constant(b.dtype(like), v); }
Value abs(Builder& b, Value x) { return b.abs(x); }
}  // namespace

Value mse(Builder& b, Value x, Value t, const Round& round) {
  Value d = round(b.sub(x, t));
  return b.mul(d, d);
}

Value mse_backward(Builder& b, Value x, Value t, Value g, Value norm, const Round& round) {
  return b.mul(round(b.mul(norm, round(b.sub(x, t)))), g);
}

Value huber(Builder& b, Value x, Value t, Value delta, const Round& round) {
  Value z = abs(b, round(b.sub(x, t)));
  Value half = c(b, z, 0.5);
  Value small = b.mul(round(b.mul(half, z)), z);
  Value large = b.mul(delta, round(b.sub(z, round(b.mul(half, delta)))));
  return b.select(b.compare(z, delta, Cmp::kGE), large, small);
}

Value huber_backward(Builder& b, Value x, Value t, Value g, Value norm, Value delta, const Round& round) {
  Value d = round(b.sub(x, t));
  Value pos = b.mul(round(b.mul(norm, g)), delta);
  Value neg = b.mul(round(b.mul(round(b.neg(norm)), g)), delta);
  Value mid = b.mul(round(b.mul(norm, d)), g);
  return b.select(b.compare(d, b.neg(delta), Cmp::kLE), neg, b.select(b.compare(d, delta, Cmp::kGE), pos, mid));
}

Value smooth_l1(Builder& b, Value x, Value t, Value beta) {
  Value z = abs(b, b.sub(x, t));
  Value half = c(b, z, 0.5);
  Value small = b.div(b.mul(b.mul(half, z), z), beta);
  Value large = b.sub(z, b.mul(half, beta));
  return b.select(b.compare(z, beta, Cmp::kLT), small, large);
}

Value smooth_l1_backward(Builder& b, Value x, Value t, Value g, Value norm, Value beta) {
  Value d = b.sub(x, t);
  Value pos = b.mul(norm, g);
  Value neg = b.mul(b.neg(norm), g);
  Value mid = b.div(b.mul(b.mul(norm, d), g), beta);
  return b.select(b.compare(d, b.neg(beta), Cmp::kLE), neg, b.select(b.compare(d, beta, Cmp::kGE), pos, mid));
}

Value binary_cross_entropy(Builder& b, Value x, Value t, const Round& round) {
  Value floor = c(b, x, -100);
  Value log1m = b.max(round(b.log1p(b.neg(x))), floor);
  Value logx = b.max(round(b.log(x)), floor);
  return b.sub(round(b.mul(round(b.sub(t, c(b, t, 1))), log1m)), round(b.mul(t, logx)));
}

Value binary_cross_entropy_backward(Builder& b, Value g, Value x, Value t, Value eps, const Round& round) {
  Value denom = b.max(round(b.mul(round(b.sub(c(b, x, 1), x)), x)), eps);
  return b.div(round(b.mul(g, round(b.sub(x, t)))), denom);
}


namespace {
// [n, dim] bool: d == target[n].
Value one_hot(Builder& b, Value target, const Dims& nd) {
  return b.compare(b.iota(DType::kS64, nd, 1), b.broadcast_in_dim(target, nd, {0}), Cmp::kEQ);
}
// The element of each row at its target: [n, dim] -> [n].
Value pick(Builder& b, Value onehot, Value v) { return b.reduce_sum(b.select(onehot, v, b.zeros_like(v)), {1}); }

// Per (frame, d): the terms z = margin - x[t] + x[d] that count (z > 0, d != t).
std::pair<Value, Value> margin_terms(Builder& b, Value x, Value target, Value margin) {
  const Dims nd = b.dims(x);
  Value onehot = one_hot(b, target, nd);
  Value xt = pick(b, onehot, x);
  Value z = b.add(b.broadcast_in_dim(b.sub(b.broadcast_to(margin, b.dims(xt)), xt), nd, {0}), x);
  Value live = b.logical_and(b.compare(z, b.zeros_like(z), Cmp::kGT), b.logical_not(onehot));
  return {z, live};
}
}  // namespace

Value multi_margin(Builder& b, Value x, Value target, Value weight, int p, Value margin, Value dim_value) {
  const Dims nd = b.dims(x);
  auto [z, live] = margin_terms(b, x, target, margin);
  Value h = p == 1 ? z : b.mul(z, z);
  if (weight.valid()) h = b.mul(h, b.broadcast_in_dim(pick(b, one_hot(b, target, nd), b.broadcast_to(weight, nd)), nd, {0}));
  Value sum = b.reduce_sum(b.select(live, h, b.zeros_like(h)), {1});
  return b.div(sum, dim_value);
}

Value multi_margin_backward(Builder& b, Value x, Value target, Value weight, int p, Value margin, Value g) {
  const Dims nd = b.dims(x);
  Value onehot = one_hot(b, target, nd);
  auto [z, live] = margin_terms(b, x, target, margin);
  Value h = p == 1 ? b.broadcast_to(g, nd) : b.mul(b.mul(c(b, g, 2), g), z);
  if (weight.valid()) h = b.mul(h, b.broadcast_in_dim(pick(b, onehot, b.broadcast_to(weight, nd)), nd, {0}));
  h = b.select(live, h, b.zeros_like(h));
  Value at_target = b.neg(b.reduce_sum(h, {1}));
  return b.select(onehot, b.broadcast_in_dim(at_target, nd, {0}), h);
}

namespace {
// [n, j, d] views of the multilabel terms: valid[n, j] (before the row's
// first negative target), hits[n, j, d] (target j names class d).
struct Multilabel {
  Value valid, hits, is_target, z, live;
};
Multilabel multilabel_terms(Builder& b, Value x, Value target) {
  const Dims nd = b.dims(x);
  const int64_t n = nd[0], dim = nd[1];
  const Dims njd{n, dim, dim};
  Value j = b.iota(DType::kS64, nd, 1);
  Value first_neg = b.reduce_min(b.select(b.compare(target, b.zeros_like(target), Cmp::kLT), j,
                                          b.constant(DType::kS64, static_cast<double>(dim), nd)), {1});
  Value valid = b.compare(j, b.broadcast_in_dim(first_neg, nd, {0}), Cmp::kLT);
  Value hits = b.logical_and(b.compare(b.broadcast_in_dim(target, njd, {0, 1}), b.iota(DType::kS64, njd, 2), Cmp::kEQ),
                             b.broadcast_in_dim(valid, njd, {0, 1}));
  Value is_target = b.reduce_max(b.convert(hits, DType::kS32), {1});  // [n, d]
  Value is_t = b.compare(is_target, b.constant(DType::kS32, 0), Cmp::kNE);
  Value x3 = b.broadcast_in_dim(x, njd, {0, 2});
  Value xt = b.reduce_sum(b.select(hits, x3, b.zeros_like(x3)), {2});  // [n, j]: x at target j
  Value z = b.add(b.broadcast_in_dim(b.sub(b.constant(b.dtype(x), 1, nd), xt), njd, {0, 1}), x3);
  Value live = b.logical_and(b.logical_and(b.broadcast_in_dim(valid, njd, {0, 1}),
                                           b.logical_not(b.broadcast_in_dim(is_t, njd, {0, 2}))),
                             b.compare(z, b.zeros_like(z), Cmp::kGT));
  return {valid, hits, b.convert(is_t, b.dtype(x)), z, live};
}
}  // namespace

std::pair<Value, Value> multilabel_margin(Builder& b, Value x, Value target, Value dim_value) {
  Multilabel m = multilabel_terms(b, x, target);
  Value sum = b.reduce_sum(b.select(m.live, m.z, b.zeros_like(m.z)), {1, 2});
  return {b.div(sum, dim_value), m.is_target};
}

Value multilabel_margin_backward(Builder& b, Value x, Value target, Value is_target, Value g) {
  (void)is_target;  // recomputed from target, as it is the same
  Multilabel m = multilabel_terms(b, x, target);
  Value ones = b.select(m.live, b.broadcast_to(g, b.dims(m.z)), b.zeros_like(m.z));
  Value plus = b.reduce_sum(ones, {1});   // [n, d]: +g per (target j, d) that counts
  Value per_j = b.reduce_sum(ones, {2});  // [n, j]: -g per d, at class target[j]
  const Dims& njd = b.dims(m.z);
  Value minus = b.reduce_sum(b.select(m.hits, b.broadcast_in_dim(per_j, njd, {0, 1}), b.zeros_like(m.z)), {1});
  return b.sub(plus, minus);
}

}  // namespace torchtpu::ops
