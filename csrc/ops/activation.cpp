#include "ops/activation.h"

namespace torchtpu::ops {

namespace {
Value zero(Builder& b, Value like) { return b.constant(b.dtype(like), 0); }
Value one(Builder& b, Value like) { return b.constant(b.dtype(like), 1); }
}  // namespace

Value elu(Builder& b, Value x, Value alpha, Value scale, Value input_scale) {
  Value negcoef = b.mul(alpha, scale);
  Value neg = b.mul(b.sub(b.exp(b.mul(x, input_scale)), one(b, x)), negcoef);
  return b.select(b.compare(x, zero(b, x), Cmp::kGT), b.mul(x, scale), neg);
}

Value elu_backward(Builder& b, Value g, Value x, Value alpha, Value scale, Value input_scale, bool is_result) {
  Value negcoef = b.mul(alpha, scale);
  Value neg = is_result ? b.mul(b.mul(g, input_scale), b.add(x, negcoef))
                        : b.mul(b.mul(b.mul(g, input_scale), negcoef), b.exp(b.mul(x, input_scale)));
  return b.select(b.compare(x, zero(b, x), Cmp::kGT), b.mul(g, scale), neg);
}

Value hardtanh_backward(Builder& b, Value g, Value x, Value lo, Value hi) {
  Value inside = b.logical_and(b.compare(x, lo, Cmp::kGT), b.compare(x, hi, Cmp::kLT));
  return b.select(inside, g, zero(b, g));
}

Value leaky_relu(Builder& b, Value x, Value slope) {
  return b.select(b.compare(x, zero(b, x), Cmp::kGT), x, b.mul(x, slope));
}

Value leaky_relu_backward(Builder& b, Value g, Value x, Value slope) {
  return b.select(b.compare(x, zero(b, x), Cmp::kGT), g, b.mul(g, slope));
}

Value softplus(Builder& b, Value x, Value beta, Value threshold) {
  Value xb = b.mul(x, beta);
  Value soft = b.div(b.log1p(b.exp(xb)), beta);
  return b.select(b.compare(xb, threshold, Cmp::kGT), x, soft);
}

Value softplus_backward(Builder& b, Value g, Value x, Value beta, Value threshold) {
  Value xb = b.mul(x, beta);
  Value z = b.exp(xb);
  Value soft = b.div(b.mul(g, z), b.add(z, one(b, z)));
  return b.select(b.compare(xb, threshold, Cmp::kGT), g, soft);
}

namespace {
Value tanh_softplus(Builder& b, Value x) { return b.tanh(b.log1p(b.exp(x))); }
}  // namespace

Value mish(Builder& b, Value x) { return b.mul(x, tanh_softplus(b, x)); }

Value mish_backward(Builder& b, Value g, Value x) {
  Value s = sigmoid_exp(b, x);
  Value t = tanh_softplus(b, x);
  Value rest = b.mul(b.mul(x, s), b.sub(one(b, t), b.mul(t, t)));
  return b.mul(g, b.add(t, rest));
}

namespace {
// -lambd <= x <= lambd (false for NaN).
Value within(Builder& b, Value x, Value lambd) {
  return b.logical_and(b.compare(x, b.neg(lambd), Cmp::kGE), b.compare(x, lambd, Cmp::kLE));
}
}  // namespace

Value hardshrink(Builder& b, Value x, Value lambd) { return b.select(within(b, x, lambd), zero(b, x), x); }

Value softshrink(Builder& b, Value x, Value lambd) {
  Value above = b.compare(x, lambd, Cmp::kGT), below = b.compare(x, b.neg(lambd), Cmp::kLT);
  return b.select(above, b.sub(x, lambd), b.select(below, b.add(x, lambd), b.mul(x, zero(b, x))));
}

Value shrink_backward(Builder& b, Value g, Value x, Value lambd) {
  Value outside = b.logical_or(b.compare(x, b.neg(lambd), Cmp::kLT), b.compare(x, lambd, Cmp::kGT));
  return b.select(outside, g, zero(b, g));
}

namespace {
// min(max(x + 3, 0), 6), NaN propagating.
Value relu6_shifted(Builder& b, Value x) {
  return b.min(b.max(b.add(x, b.constant(b.dtype(x), 3)), zero(b, x)), b.constant(b.dtype(x), 6));
}
}  // namespace

Value hardsigmoid(Builder& b, Value x, Value six) { return b.div(relu6_shifted(b, x), six); }

Value hardsigmoid_backward(Builder& b, Value g, Value x) {
  Value inside = b.logical_and(b.compare(x, b.constant(b.dtype(x), -3), Cmp::kGT),
                               b.compare(x, b.constant(b.dtype(x), 3), Cmp::kLT));
  return b.select(inside, b.mul(g, b.constant(b.dtype(g), 1.0f / 6.0f)), zero(b, g));
}

Value hardswish(Builder& b, Value x, Value six) { return b.div(b.mul(x, relu6_shifted(b, x)), six); }

Value hardswish_backward(Builder& b, Value g, Value x, Value three) {
  Value mid = b.mul(g, b.add(b.div(x, three), b.constant(b.dtype(x), 0.5)));
  Value r = b.select(b.compare(x, b.constant(b.dtype(x), 3), Cmp::kGE), g, mid);
  return b.select(b.compare(x, b.constant(b.dtype(x), -3), Cmp::kLT), zero(b, g), r);
}

Value threshold(Builder& b, Value x, Value threshold, Value value) {
  return b.select(b.compare(x, threshold, Cmp::kLE), value, x);
}

Value sigmoid_exp(Builder& b, Value x) { return b.div(one(b, x), b.add(one(b, x), b.exp(b.neg(x)))); }

Value glu(Builder& b, Value a, Value c) { return b.mul(a, sigmoid_exp(b, c)); }

std::pair<Value, Value> log_sigmoid(Builder& b, Value x) {
  Value buffer = b.exp(b.neg(b.abs(x)));
  Value out = b.sub(b.min(x, zero(b, x)), b.log1p(buffer));
  return {out, buffer};
}

Value log_sigmoid_backward(Builder& b, Value g, Value x, Value buffer) {
  Value neg = b.compare(x, zero(b, x), Cmp::kLT);
  Value ratio = b.div(buffer, b.add(one(b, buffer), buffer));
  Value d = b.select(neg, b.sub(one(b, ratio), ratio), ratio);
  return b.mul(d, g);
}

Value prelu(Builder& b, Value x, Value w) {
  return b.select(b.compare(x, zero(b, x), Cmp::kGT), x, b.mul(w, x));
}

}  // namespace torchtpu::ops
