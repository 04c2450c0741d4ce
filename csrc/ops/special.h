// Special and transcendental elementwise functions on values whose dtype the
// caller already chose (16-bit floats arrive in float32). Where PyTorch's CPU
// kernel uses its own algorithm (Cephes series in ATen/native/Math.h), the
// lowering follows it step by step, with its data-dependent loops unrolled to
// their bound, so results agree with the CPU's to a few ulps.
#pragma once

#include <utility>

#include "ops/builder.h"

namespace torchtpu::ops {

// Elementary functions XLA decomposes itself (the chlo dialect, which every
// PJRT plugin legalizes): chlo_unary(b, "chlo.<name>", x) and these.
Value chlo_unary(Builder& b, const char* op, Value x);
Value acos(Builder& b, Value x);
Value acosh(Builder& b, Value x);
Value asin(Builder& b, Value x);
Value asinh(Builder& b, Value x);
Value atan(Builder& b, Value x);
Value atanh(Builder& b, Value x);
Value cosh(Builder& b, Value x);
Value sinh(Builder& b, Value x);
Value erfc(Builder& b, Value x);
Value lgamma(Builder& b, Value x);
Value tan(Builder& b, Value x);
Value log10(Builder& b, Value x);
Value exp2(Builder& b, Value x);
Value erfinv(Builder& b, Value x);
Value frac(Builder& b, Value x);
Value sinc(Builder& b, Value x);
// Sign bit of any dtype (-0.0 and -NaN included), as bool.
Value signbit(Builder& b, Value x);
// Replacement values are 0-d values of x's dtype.
Value nan_to_num(Builder& b, Value x, Value nan, Value posinf, Value neginf);
Value angle(Builder& b, Value x);
Value entr(Builder& b, Value x);
Value ndtri(Builder& b, Value x);
Value log_ndtr(Builder& b, Value x);
Value erfcx(Builder& b, Value x);
// logit with optional clamping to [lo, 1 - lo] (lo a 0-d value; invalid: none).
// With `round_to` narrower than x's dtype, each step rounds to it, as the
// CPU's 16-bit kernel does.
Value logit(Builder& b, Value x, Value lo, DType round_to);
Value logit_backward(Builder& b, Value grad, Value x, Value lo);
// round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d for negative d
// (`scale` = 10^|d| as a 0-d value).
Value round_decimals(Builder& b, Value x, Value scale, bool negative);
// Mantissa in [0.5, 1) with x's dtype, and int32 exponent (std::frexp).
std::pair<Value, Value> frexp(Builder& b, Value x);

Value digamma(Builder& b, Value x);
Value trigamma(Builder& b, Value x);
// Hurwitz zeta (Cephes' Euler-Maclaurin summation, every q), in the
// dtype of x and q (the CPU sums float32 in float64: callers convert).
Value zeta(Builder& b, Value x, Value q);
// polygamma of order n >= 2 (n! * zeta(n + 1, x) with the sign of n + 1).
Value polygamma(Builder& b, int64_t n, Value x);

// Regularized lower (P) or, when `upper`, upper (Q) incomplete gamma
// function of a and x (broadcastable, one float dtype).
Value igamma(Builder& b, Value a, Value x, bool upper);

Value i0(Builder& b, Value x);
Value i0e(Builder& b, Value x);
Value i1(Builder& b, Value x);
Value i1e(Builder& b, Value x);

// Bessel and Airy functions (bessel.cpp); modified_bessel_i0 is i0.
Value bessel_j0(Builder& b, Value x);
Value bessel_j1(Builder& b, Value x);
Value bessel_y0(Builder& b, Value x);
Value bessel_y1(Builder& b, Value x);
Value modified_bessel_i1(Builder& b, Value x);
// K0 (order 0) or K1, optionally scaled by exp(x).
Value modified_bessel_k(Builder& b, Value x, int order, bool scaled);
Value spherical_bessel_j0(Builder& b, Value x);
Value airy_ai(Builder& b, Value x);

// Binary ops (operands already broadcastable and of one dtype).
Value xlogy(Builder& b, Value x, Value y);
Value xlog1py(Builder& b, Value x, Value y);
Value hypot(Builder& b, Value x, Value y);
Value nextafter(Builder& b, Value x, Value y);
Value copysign(Builder& b, Value x, Value y);
Value heaviside(Builder& b, Value x, Value y);
Value fmax(Builder& b, Value x, Value y);
Value fmin(Builder& b, Value x, Value y);
Value logaddexp(Builder& b, Value x, Value y);
Value logaddexp2(Builder& b, Value x, Value y);

// torch.special's orthogonal polynomials of degree n (x's float dtype; n is
// truncated toward zero as the CPU casts it) at x, as PyTorch's CPU kernels.
enum class Polynomial {
  kChebyshevT, kChebyshevU, kChebyshevV, kChebyshevW,
  kShiftedT, kShiftedU, kShiftedV, kShiftedW,
  kHermiteH, kHermiteHe, kLaguerreL, kLegendreP,
};
Value orthogonal_polynomial(Builder& b, Polynomial kind, Value x, Value n);

}  // namespace torchtpu::ops
