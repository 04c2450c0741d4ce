#include "ops/elementwise.h"

#include <cmath>

namespace torchtpu::ops {

namespace {

Value chlo(Builder& b, const char* op, Value x) { return b.graph().add(op, {x}, b.type(x)); }

Value sign_of(Builder& b, Value x) {
  return b.select(b.compare(x, b.zeros_like(x), Cmp::kLT), b.full_like(x, -1), b.full_like(x, 1));
}

// gelu's erf: XLA's float32 erf (a rational approximation clamped at 4)
// stops 1-2 ulps short of +-1 where erf rounds to +-1 in float32 (|x| >=
// 3.919206, where erfc(x) <= 2^-25), so it is held at +-1 there: 1 + erf(x)
// in the CDF must cancel to 0, not to 9e-8.
Value erf_saturating(Builder& b, Value x) {
  Value e = chlo(b, "chlo.erf", x);
  if (b.dtype(x) != DType::kF32) return e;
  return b.select(b.compare(b.abs(x), b.constant(DType::kF32, 3.919206), Cmp::kGE), sign_of(b, x), e);
}

}  // namespace

// torch.erf: past |x| = 1.5 (float32), 1 - erfc(|x|), which rounds as the
// CPU's erff does; XLA's erf is 1-2 ulps off in the tails, and the normal
// CDF 0.5 (1 + erf(x / sqrt 2)) (torch.special.ndtr) turns that into large
// relative errors.
Value erf(Builder& b, Value x) {
  Value e = chlo(b, "chlo.erf", x);
  if (b.dtype(x) != DType::kF32) return e;
  Value ax = b.abs(x);
  Value tail = b.mul(sign_of(b, x), b.sub(b.full_like(x, 1), chlo(b, "chlo.erfc", ax)));
  return b.select(b.compare(ax, b.constant(DType::kF32, 1.5), Cmp::kGT), tail, e);
}

// log1p: XLA's float64 log1p is up to 127 ulps off around -0.41; past
// |x| = 1/4 log(1 + x) is within an ulp (the rounding of 1 + x moves the
// log by at most 1.5e-16, against a result of at least 0.22).
Value log1p(Builder& b, Value x) {
  if (b.dtype(x) != DType::kF64) return b.log1p(x);
  Value direct = b.log(b.add(x, b.full_like(x, 1)));
  return b.select(b.compare(b.abs(x), b.full_like(x, 0.25), Cmp::kLT), b.log1p(x), direct);
}

Value sigmoid(Builder& b, Value x) { return b.unary("stablehlo.logistic", x); }

Value gelu(Builder& b, Value x, bool tanh_approx) {
  if (tanh_approx) {
    const double k = std::sqrt(2.0 / M_PI);
    Value x3 = b.mul(b.mul(x, x), x);
    Value inner = b.mul_c(b.add(x, b.mul_c(x3, 0.044715)), k);
    return b.mul(b.mul_c(x, 0.5), b.add_c(b.tanh(inner), 1.0));
  }
  Value cdf = b.mul_c(b.add_c(erf_saturating(b, b.mul_c(x, M_SQRT1_2)), 1.0), 0.5);
  // PyTorch's CPU kernel gives NaN for both infinities.
  Value inf = b.compare(b.abs(x), b.full_like(x, INFINITY), Cmp::kEQ);
  return b.select(inf, b.full_like(x, NAN), b.mul(x, cdf));
}

Value gelu_backward(Builder& b, Value grad, Value x, bool tanh_approx) {
  if (tanh_approx) {
    const double k = std::sqrt(2.0 / M_PI);
    Value x2 = b.mul(x, x);
    Value inner = b.mul_c(b.add(x, b.mul_c(b.mul(x2, x), 0.044715)), k);
    Value t = b.tanh(inner);
    Value dinner = b.mul_c(b.add_c(b.mul_c(x2, 3 * 0.044715), 1.0), k);
    Value left = b.mul_c(b.add_c(t, 1.0), 0.5);
    Value one_minus_t2 = b.sub(b.full_like(t, 1.0), b.mul(t, t));
    Value right = b.mul(b.mul(b.mul_c(x, 0.5), one_minus_t2), dinner);
    return b.mul(grad, b.add(left, right));
  }
  Value cdf = b.mul_c(b.add_c(erf_saturating(b, b.mul_c(x, M_SQRT1_2)), 1.0), 0.5);
  Value pdf = b.mul_c(b.exp(b.mul_c(b.mul(x, x), -0.5)), 1.0 / std::sqrt(2.0 * M_PI));
  return b.mul(grad, b.add(cdf, b.mul(x, pdf)));
}

Value silu(Builder& b, Value x) { return b.mul(x, sigmoid(b, x)); }

Value silu_backward(Builder& b, Value grad, Value x) {
  Value s = sigmoid(b, x);
  Value one = b.full_like(x, 1.0);
  return b.mul(grad, b.mul(s, b.add(one, b.mul(x, b.sub(one, s)))));
}

Value relu(Builder& b, Value x) {
  if (b.dtype(x) == DType::kBool) return x;
  return b.max(x, b.zeros_like(x));
}

Value sign(Builder& b, Value x) {
  if (b.dtype(x) == DType::kBool) return x;
  if (is_unsigned_int(b.dtype(x)))
    return b.convert(b.compare(x, b.zeros_like(x), Cmp::kNE), b.dtype(x));
  // PyTorch's (0 < x) - (x < 0): NaN and -0.0 give 0.
  Value zero = b.zeros_like(x);
  return b.sub(b.convert(b.compare(zero, x, Cmp::kLT), b.dtype(x)), b.convert(b.compare(x, zero, Cmp::kLT), b.dtype(x)));
}

// PyTorch's float floor division (c10's div_floor_floating): from fmod, so
// that a // b and a % b agree, with IEEE division by zero.
static Value floor_divide_float(Builder& b, Value a, Value c) {
  Value q = b.div(a, c);
  const Dims& d = b.dims(q);
  a = b.broadcast_to(a, d);
  c = b.broadcast_to(c, d);
  Value zero = b.zeros_like(q), one = b.full_like(q, 1.0);
  Value mod = b.rem(a, c);
  Value div = b.div(b.sub(a, mod), c);
  Value fix = b.logical_and(b.compare(mod, zero, Cmp::kNE),
                            b.compare(b.compare(c, zero, Cmp::kLT), b.compare(mod, zero, Cmp::kLT), Cmp::kNE));
  div = b.select(fix, b.sub(div, one), div);
  Value fl = b.floor(div);
  fl = b.select(b.compare(b.sub(div, fl), b.full_like(q, 0.5), Cmp::kGT), b.add(fl, one), fl);
  Value signed_zero = b.mul(q, zero);  // copysign(0, a / b)
  Value r = b.select(b.compare(div, zero, Cmp::kNE), fl, signed_zero);
  return b.select(b.compare(c, zero, Cmp::kEQ), q, r);
}

Value floor_divide(Builder& b, Value a, Value c) {
  if (is_float(b.dtype(a))) return floor_divide_float(b, a, c);
  // Truncating division, then step down where the signs differ and it is inexact.
  Value q = b.div(a, c);
  Value r = b.rem(a, c);
  Value zero = b.zeros_like(r);
  Value inexact = b.compare(r, zero, Cmp::kNE);
  Value signs_differ = b.compare(b.compare(r, zero, Cmp::kLT), b.compare(b.broadcast_to(c, b.dims(r)), zero, Cmp::kLT), Cmp::kNE);
  Value fix = b.graph().add("stablehlo.and", {inexact, signs_differ}, b.type(inexact));
  return b.select(fix, b.sub(q, b.full_like(q, 1)), q);
}

Value remainder(Builder& b, Value a, Value c) {
  // Python remainder: result has the divisor's sign.
  Value r = b.rem(a, c);
  Value cb = b.broadcast_to(c, b.dims(r));
  Value zero = b.zeros_like(r);
  Value nonzero = b.compare(r, zero, Cmp::kNE);
  Value signs_differ = b.compare(b.compare(r, zero, Cmp::kLT), b.compare(cb, zero, Cmp::kLT), Cmp::kNE);
  Value fix = b.graph().add("stablehlo.and", {nonzero, signs_differ}, b.type(nonzero));
  return b.select(fix, b.add(r, cb), r);
}

}  // namespace torchtpu::ops
