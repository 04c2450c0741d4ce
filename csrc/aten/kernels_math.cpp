// Special and transcendental math kernels (inverse trigonometric and
// hyperbolic functions, gamma and Bessel families, logit, frexp, xlogy,
// hypot, ...) with PyTorch's CPU dtype rules: integer inputs promote to the
// default float type where PyTorch's do, 16-bit floats compute in float32
// and round once, and float-only kernels refuse other dtypes as the CPU does.
#include <ATen/ScalarOps.h>
#include <ATen/native/Resize.h>
#include <functional>
#include <string_view>
#include <limits>

#include "aten/registry.h"
#include "aten/opmath.h"
#include "aten/pointwise.h"
#include "ops/special.h"

namespace torchtpu::aten {
namespace {

using Un = std::function<Value(Builder&, Value)>;
using Bin = std::function<Value(Builder&, Value, Value)>;

// How the computation dtype follows from the input dtype.
enum class Rule {
  kIntToFloat,  // integers and bool promote to the default float type
  kFloatOnly,   // integers and bool are refused (NotImplementedError, as the CPU)
  kNoHalf,      // integers promote; 16-bit floats are refused (NotImplementedError)
  kAny,         // every dtype computes in its own type
};
// Ops computed on the operands' own dtype even for 16-bit floats (their result
// depends on the bits of that dtype).
bool exact_in_own_dtype(const char* name) { return std::string_view(name) == "nextafter"; }

at::ScalarType compute_type(const char* name, Rule rule, at::ScalarType t) {
  const bool integral = at::isIntegralType(t, /*includeBool=*/true);
  if ((rule == Rule::kIntToFloat || rule == Rule::kNoHalf) && integral)
    return at::typeMetaToScalarType(at::get_default_dtype());
  TORCH_CHECK_NOT_IMPLEMENTED(!(integral && rule == Rule::kFloatOnly), "\"", name, "_cpu\" not implemented for '",
                              at::toString(t), "'");
  TORCH_CHECK_NOT_IMPLEMENTED(!(rule == Rule::kNoHalf && at::isReducedFloatingType(t)), "\"", name,
                              "_cpu\" not implemented for '", at::toString(t), "'");
  return t;
}

at::Tensor unary(const char* op, const char* name, Rule rule, const Un& f, const at::Tensor& a, Dest dest,
                 const at::Tensor* target) {
  const at::ScalarType ct = compute_type(name, rule, a.scalar_type());
  Kernel k(op, a);
  k.elementwise();
  Value r;
  try {
    r = f(k.b(), k.b().convert(k.in(a, ct), to_ir(opmath(ct))));
  } catch (const ops::LoweringError& e) {
    rethrow_lowering(op, e);
  }
  // angle of a complex tensor is real, as PyTorch's.
  return finish(k, r, ir::is_complex(k.b().dtype(r)) ? ct : c10::toRealValueType(ct), dest, target);
}

at::Tensor binary(const char* op, const char* name, Rule rule, const Bin& f, const at::Tensor& a, const at::Tensor& b,
                  Dest dest, const at::Tensor* target) {
  c10::Device dev = target && target->defined() ? target->device() : device_of(a, b);
  const at::ScalarType ct = compute_type(name, rule, at::result_type(a, b));
  Kernel k(op, dev);
  k.elementwise({&a, &b});
  Value r;
  try {
    const DType o = to_ir(exact_in_own_dtype(name) ? ct : opmath(ct));
    r = f(k.b(), k.b().convert(k.in(a, ct), o), k.b().convert(k.in(b, ct), o));
  } catch (const ops::LoweringError& e) {
    rethrow_lowering(op, e);
  }
  return finish(k, r, ct, dest, target);
}

// The out= kernel of a unary op (functional and in-place forms derived).
#define TPU_MATH_UNARY(NAME, RULE, FN)                                  \
  at::Tensor& NAME##_out(const at::Tensor& a, at::Tensor& out) {        \
    unary("aten::" #NAME ".out", #NAME, RULE, FN, a, Dest::kOut, &out); \
    return out;                                                         \
  }

TPU_MATH_UNARY(acos, Rule::kIntToFloat, ops::acos)
TPU_MATH_UNARY(acosh, Rule::kIntToFloat, ops::acosh)
TPU_MATH_UNARY(asin, Rule::kIntToFloat, ops::asin)
TPU_MATH_UNARY(asinh, Rule::kIntToFloat, ops::asinh)
TPU_MATH_UNARY(atan, Rule::kIntToFloat, ops::atan)
TPU_MATH_UNARY(atanh, Rule::kIntToFloat, ops::atanh)
TPU_MATH_UNARY(cosh, Rule::kIntToFloat, ops::cosh)
TPU_MATH_UNARY(sinh, Rule::kIntToFloat, ops::sinh)
TPU_MATH_UNARY(erfc, Rule::kIntToFloat, ops::erfc)
TPU_MATH_UNARY(lgamma, Rule::kIntToFloat, ops::lgamma)
TPU_MATH_UNARY(tan, Rule::kIntToFloat, ops::tan)
TPU_MATH_UNARY(log10, Rule::kIntToFloat, ops::log10)
TPU_MATH_UNARY(exp2, Rule::kIntToFloat, ops::exp2)
TPU_MATH_UNARY(erfinv, Rule::kIntToFloat, ops::erfinv)
TPU_MATH_UNARY(frac, Rule::kFloatOnly, ops::frac)
TPU_MATH_UNARY(sinc, Rule::kIntToFloat, ops::sinc)
TPU_MATH_UNARY(digamma, Rule::kIntToFloat, ops::digamma)
TPU_MATH_UNARY(i0, Rule::kIntToFloat, ops::i0)
TPU_MATH_UNARY(special_i0e, Rule::kIntToFloat, ops::i0e)
TPU_MATH_UNARY(special_i1, Rule::kIntToFloat, ops::i1)
TPU_MATH_UNARY(special_i1e, Rule::kIntToFloat, ops::i1e)
TPU_MATH_UNARY(special_ndtri, Rule::kNoHalf, ops::ndtri)
TPU_MATH_UNARY(special_log_ndtr, Rule::kNoHalf, ops::log_ndtr)
TPU_MATH_UNARY(special_entr, Rule::kIntToFloat, ops::entr)
TPU_MATH_UNARY(special_erfcx, Rule::kNoHalf, ops::erfcx)
TPU_MATH_UNARY(angle, Rule::kIntToFloat, ops::angle)
TPU_MATH_UNARY(special_bessel_j0, Rule::kNoHalf, ops::bessel_j0)
TPU_MATH_UNARY(special_bessel_j1, Rule::kNoHalf, ops::bessel_j1)
TPU_MATH_UNARY(special_bessel_y0, Rule::kNoHalf, ops::bessel_y0)
TPU_MATH_UNARY(special_bessel_y1, Rule::kNoHalf, ops::bessel_y1)
TPU_MATH_UNARY(special_modified_bessel_i0, Rule::kNoHalf, ops::i0)
TPU_MATH_UNARY(special_modified_bessel_i1, Rule::kNoHalf, ops::modified_bessel_i1)
TPU_MATH_UNARY(special_modified_bessel_k0, Rule::kNoHalf, [](Builder& b, Value x) {
  return ops::modified_bessel_k(b, x, 0, false);
})
TPU_MATH_UNARY(special_modified_bessel_k1, Rule::kNoHalf, [](Builder& b, Value x) {
  return ops::modified_bessel_k(b, x, 1, false);
})
TPU_MATH_UNARY(special_scaled_modified_bessel_k0, Rule::kNoHalf, [](Builder& b, Value x) {
  return ops::modified_bessel_k(b, x, 0, true);
})
TPU_MATH_UNARY(special_scaled_modified_bessel_k1, Rule::kNoHalf, [](Builder& b, Value x) {
  return ops::modified_bessel_k(b, x, 1, true);
})
TPU_MATH_UNARY(special_spherical_bessel_j0, Rule::kNoHalf, ops::spherical_bessel_j0)
TPU_MATH_UNARY(special_airy_ai, Rule::kNoHalf, ops::airy_ai)

// signbit: any dtype, bool result, on the input's own values.
at::Tensor& signbit_out(const at::Tensor& a, at::Tensor& out) {
  TORCH_CHECK(!out.defined() || out.scalar_type() == at::kBool, "signbit does not support non-boolean outputs.");
  Kernel k("aten::signbit.out", a);
  k.elementwise();
  k.result(ops::signbit(k.b(), k.in(a)), at::kBool, &out);
  k.run();
  return out;
}

// conj_physical of a real tensor is a copy.
at::Tensor& conj_physical_out(const at::Tensor& a, at::Tensor& out) {
  Kernel k("aten::conj_physical.out", a);
  k.elementwise();
  finish(k, k.b().conj(k.in(a)), a.scalar_type(), Dest::kOut, &out);
  return out;
}

// nan_to_num: replacements are graph parameters in the input's dtype; the
// infinities default to its largest finite values.
at::Tensor nan_to_num_impl(const char* op, const at::Tensor& a, std::optional<double> nan, std::optional<double> posinf,
                           std::optional<double> neginf, Dest dest, const at::Tensor* target) {
  const at::ScalarType t = a.scalar_type();
  Kernel k(op, a);
  k.elementwise();
  Value x = k.in(a);
  if (at::isFloatingType(t)) {
    double hi = 0, lo = 0;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "nan_to_num", [&] {
      hi = static_cast<double>(std::numeric_limits<scalar_t>::max());
      lo = static_cast<double>(std::numeric_limits<scalar_t>::lowest());
    });
    x = ops::nan_to_num(k.b(), x, k.scalar(nan.value_or(0.0), t), k.scalar(posinf.value_or(hi), t),
                        k.scalar(neginf.value_or(lo), t));
  }
  return finish(k, x, t, dest, target);
}
at::Tensor& nan_to_num_out(const at::Tensor& a, std::optional<double> n, std::optional<double> p,
                           std::optional<double> m, at::Tensor& out) {
  TORCH_CHECK(!out.defined() || out.scalar_type() == a.scalar_type(), "nan_to_num: dtype of out: ", out.scalar_type(),
              " should be same as input: ", a.scalar_type());
  nan_to_num_impl("aten::nan_to_num.out", a, n, p, m, Dest::kOut, &out);
  return out;
}

// round(x, decimals): 10^|decimals| is a graph parameter.
at::Tensor round_decimals_impl(const char* op, const at::Tensor& a, int64_t decimals, Dest dest,
                               const at::Tensor* target) {
  const at::ScalarType ct = compute_type("round", Rule::kFloatOnly, a.scalar_type());
  if (decimals == 0) {
    return unary(op, "round", Rule::kFloatOnly, [](Builder& b, Value x) {
      return b.round_even(x);
    }, a, dest, target);
  }
  const int64_t d = decimals < 0 ? -decimals : decimals;
  Kernel k(op, a);
  k.elementwise();
  const at::ScalarType o = opmath(ct);
  Value s = k.scalar(std::pow(10.0, static_cast<double>(d)), o);
  Value r = ops::round_decimals(k.b(), k.b().convert(k.in(a, ct), to_ir(o)), s, decimals < 0);
  return finish(k, r, ct, dest, target);
}
at::Tensor& round_decimals_out(const at::Tensor& a, int64_t decimals, at::Tensor& out) {
  round_decimals_impl("aten::round.decimals_out", a, decimals, Dest::kOut, &out);
  return out;
}

std::tuple<at::Tensor&, at::Tensor&> frexp_out(const at::Tensor& a, at::Tensor& mantissa, at::Tensor& exponent) {
  TORCH_CHECK(at::isFloatingType(a.scalar_type()), "torch.frexp() only supports floating-point dtypes");
  TORCH_CHECK(mantissa.scalar_type() == a.scalar_type(), "torch.frexp() expects mantissa to have dtype ",
              a.scalar_type(), " but got ", mantissa.scalar_type());
  TORCH_CHECK(exponent.scalar_type() == at::kInt, "torch.frexp() expects exponent to have int dtype but got ",
              exponent.scalar_type());
  Kernel k("aten::frexp.Tensor_out", a);
  k.elementwise();
  auto [m, e] = ops::frexp(k.b(), k.in(a));
  k.into_resized(mantissa, m);
  k.into_resized(exponent, e);
  k.run();
  return {mantissa, exponent};
}

// logit and its derivative; eps (when given) is a graph parameter in the
// input's dtype, as the CPU kernel rounds it.
at::Tensor logit_impl(const char* op, const at::Tensor& a, std::optional<double> eps, Dest dest,
                      const at::Tensor* target) {
  const at::ScalarType ct = compute_type("logit", Rule::kIntToFloat, a.scalar_type());
  Kernel k(op, a);
  k.elementwise();
  const DType o = to_ir(opmath(ct));
  Value lo = eps ? k.b().convert(k.scalar(*eps, ct), o) : Value{};
  Value r = ops::logit(k.b(), k.b().convert(k.in(a, ct), o), lo, to_ir(ct));
  return finish(k, r, ct, dest, target);
}
at::Tensor& logit_out(const at::Tensor& a, std::optional<double> eps, at::Tensor& out) {
  logit_impl("aten::logit.out", a, eps, Dest::kOut, &out);
  return out;
}
at::Tensor& logit_backward_out(const at::Tensor& grad, const at::Tensor& a, std::optional<double> eps,
                               at::Tensor& out) {
  const char* op = "aten::logit_backward.grad_input";
  const at::ScalarType ct = compute_type("logit_backward", Rule::kFloatOnly, at::result_type(grad, a));
  Kernel k(op, grad);
  k.elementwise({&grad, &a});
  const DType o = to_ir(opmath(ct));
  Value lo = eps ? k.b().convert(k.scalar(*eps, ct), o) : Value{};
  Value r = ops::logit_backward(k.b(), k.b().convert(k.in(grad, ct), o), k.b().convert(k.in(a, ct), o), lo);
  finish(k, r, ct, Dest::kOut, &out);
  return out;
}
// polygamma(n, x): digamma (n = 0), trigamma (n = 1), else n! zeta(n + 1, x).
at::Tensor polygamma_impl(const char* op, int64_t n, const at::Tensor& a, Dest dest, const at::Tensor* target) {
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
  const at::ScalarType ct = compute_type("polygamma", Rule::kIntToFloat, a.scalar_type());
  Kernel k(op, a);
  k.elementwise();
  Builder& b = k.b();
  Value x = b.convert(k.in(a, ct), to_ir(opmath(ct)));
  Value r;
  if (n == 0) {
    r = ops::digamma(b, x);
  } else if (n == 1) {
    r = ops::trigamma(b, x);
  } else {
    r = ops::polygamma(b, n, x);
  }
  return finish(k, r, ct, dest, target);
}
at::Tensor& polygamma_(at::Tensor& a, int64_t n) {
  polygamma_impl("aten::polygamma_", n, a, Dest::kInplace, &a);
  return a;
}
at::Tensor& polygamma_out(int64_t n, const at::Tensor& a, at::Tensor& out) {
  polygamma_impl("aten::polygamma.out", n, a, Dest::kOut, &out);
  return out;
}

// mvlgamma's out= form, as PyTorch's: the functional result copied into out.
at::Tensor& mvlgamma_out(const at::Tensor& a, int64_t p, at::Tensor& out) {
  at::Tensor r = at::mvlgamma(a, p);
  TORCH_CHECK(at::canCast(r.scalar_type(), out.scalar_type()), "result type ", r.scalar_type(),
              " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

// The out= kernel of a binary op (functional and in-place forms derived).
#define TPU_MATH_BINARY(NAME, OUT_NAME, RULE, FN)                                     \
  at::Tensor& NAME##_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) { \
    binary("aten::" #NAME OUT_NAME, #NAME, RULE, FN, a, b, Dest::kOut, &out);         \
    return out;                                                                       \
  }

TPU_MATH_BINARY(xlogy, ".OutTensor", Rule::kIntToFloat, ops::xlogy)
TPU_MATH_BINARY(special_xlog1py, ".out", Rule::kIntToFloat, ops::xlog1py)
TPU_MATH_BINARY(hypot, ".out", Rule::kFloatOnly, ops::hypot)
TPU_MATH_BINARY(nextafter, ".out", Rule::kFloatOnly, ops::nextafter)
TPU_MATH_BINARY(copysign, ".out", Rule::kIntToFloat, ops::copysign)
TPU_MATH_BINARY(fmax, ".out", Rule::kAny, ops::fmax)
TPU_MATH_BINARY(fmin, ".out", Rule::kAny, ops::fmin)
TPU_MATH_BINARY(logaddexp, ".out", Rule::kFloatOnly, ops::logaddexp)
TPU_MATH_BINARY(logaddexp2, ".out", Rule::kFloatOnly, ops::logaddexp2)
TPU_MATH_BINARY(igamma, ".out", Rule::kFloatOnly,
                [](Builder& b, Value a, Value x) { return ops::igamma(b, a, x, /*upper=*/false); })
TPU_MATH_BINARY(igammac, ".out", Rule::kFloatOnly,
                [](Builder& b, Value a, Value x) { return ops::igamma(b, a, x, /*upper=*/true); })

at::Tensor& heaviside_out(const at::Tensor& a, const at::Tensor& v, at::Tensor& out) {
  TORCH_CHECK(!a.is_complex() && !v.is_complex(), "heaviside is not yet implemented for complex tensors.");
  TORCH_CHECK(a.scalar_type() == v.scalar_type(), "heaviside is not yet implemented for tensors with different dtypes");
  binary("aten::heaviside.out", "heaviside", Rule::kAny, ops::heaviside, a, v, Dest::kOut, &out);
  return out;
}

// Hurwitz zeta, float32 and float64 only (as the CPU kernel).
at::Tensor& special_zeta_out(const at::Tensor& x, const at::Tensor& q, at::Tensor& out) {
  const char* op = "aten::special_zeta.out";
  const at::ScalarType ct = compute_type("zeta", Rule::kNoHalf, at::result_type(x, q));
  Kernel k(op, out.device());
  k.elementwise({&x, &q});
  // Summed in float64, as the CPU sums float32 in its accumulation type.
  Builder& b = k.b();
  Value z = ops::zeta(b, b.convert(k.in(x, ct), DType::kF64), b.convert(k.in(q, ct), DType::kF64));
  finish(k, b.convert(z, to_ir(ct)), ct, Dest::kOut, &out);
  return out;
}

// torch.special's orthogonal polynomials: float32 and float64 (integers
// promote; 16-bit floats are refused, as on the CPU).
#define TPU_POLYNOMIAL(NAME, KIND)                                                                 \
  at::Tensor& NAME##_out(const at::Tensor& x, const at::Tensor& n, at::Tensor& out) {              \
    const Bin f = [](Builder& b, Value xv, Value nv) {                                              \
      return ops::orthogonal_polynomial(b, ops::Polynomial::KIND, xv, nv);                         \
    };                                                                                             \
    binary("aten::" #NAME ".out", #NAME, Rule::kNoHalf, f, x, n, Dest::kOut, &out);                \
    return out;                                                                                    \
  }
TPU_POLYNOMIAL(special_chebyshev_polynomial_t, kChebyshevT)
TPU_POLYNOMIAL(special_chebyshev_polynomial_u, kChebyshevU)
TPU_POLYNOMIAL(special_chebyshev_polynomial_v, kChebyshevV)
TPU_POLYNOMIAL(special_chebyshev_polynomial_w, kChebyshevW)
TPU_POLYNOMIAL(special_shifted_chebyshev_polynomial_t, kShiftedT)
TPU_POLYNOMIAL(special_shifted_chebyshev_polynomial_u, kShiftedU)
TPU_POLYNOMIAL(special_shifted_chebyshev_polynomial_v, kShiftedV)
TPU_POLYNOMIAL(special_shifted_chebyshev_polynomial_w, kShiftedW)
TPU_POLYNOMIAL(special_hermite_polynomial_h, kHermiteH)
TPU_POLYNOMIAL(special_hermite_polynomial_he, kHermiteHe)
TPU_POLYNOMIAL(special_laguerre_polynomial_l, kLaguerreL)
TPU_POLYNOMIAL(special_legendre_polynomial_p, kLegendreP)

}  // namespace

TPU_KERNELS(m) {
  m.out("acos.out", TORCH_FN(acos_out), "acos", "acos_");
  m.out("acosh.out", TORCH_FN(acosh_out), "acosh", "acosh_");
  m.out("angle.out", TORCH_FN(angle_out), "angle");
  m.out("asin.out", TORCH_FN(asin_out), "asin", "asin_");
  m.out("asinh.out", TORCH_FN(asinh_out), "asinh", "asinh_");
  m.out("atan.out", TORCH_FN(atan_out), "atan", "atan_");
  m.out("atanh.out", TORCH_FN(atanh_out), "atanh", "atanh_");
  m.impl("conj_physical.out", TORCH_FN(conj_physical_out));
  m.out("copysign.out", TORCH_FN(copysign_out), "copysign.Tensor", "copysign_.Tensor");
  m.out("cosh.out", TORCH_FN(cosh_out), "cosh", "cosh_");
  m.out("digamma.out", TORCH_FN(digamma_out), "digamma", "digamma_");
  m.out("erfc.out", TORCH_FN(erfc_out), "erfc", "erfc_");
  m.out("erfinv.out", TORCH_FN(erfinv_out), "erfinv", "erfinv_");
  m.out("exp2.out", TORCH_FN(exp2_out), "exp2", "exp2_");
  m.out("fmax.out", TORCH_FN(fmax_out), "fmax");
  m.out("fmin.out", TORCH_FN(fmin_out), "fmin");
  m.out("frac.out", TORCH_FN(frac_out), "frac", "frac_");
  m.impl("frexp.Tensor_out", TORCH_FN(frexp_out));
  m.impl("heaviside.out", TORCH_FN(heaviside_out));
  m.out("hypot.out", TORCH_FN(hypot_out), "hypot", "hypot_");
  m.out("i0.out", TORCH_FN(i0_out), "i0", "i0_");
  m.out("igamma.out", TORCH_FN(igamma_out), "igamma", "igamma_");
  m.out("igammac.out", TORCH_FN(igammac_out), "igammac", "igammac_");
  m.out("lgamma.out", TORCH_FN(lgamma_out), "lgamma", "lgamma_");
  m.out("log10.out", TORCH_FN(log10_out), "log10", "log10_");
  m.out("logaddexp.out", TORCH_FN(logaddexp_out), "logaddexp");
  m.out("logaddexp2.out", TORCH_FN(logaddexp2_out), "logaddexp2");
  m.out("logit.out", TORCH_FN(logit_out), "logit", "logit_");
  m.out("logit_backward.grad_input", TORCH_FN(logit_backward_out), "logit_backward");
  m.impl("mvlgamma.out", TORCH_FN(mvlgamma_out));
  m.out("nan_to_num.out", TORCH_FN(nan_to_num_out), "nan_to_num", "nan_to_num_");
  m.out("nextafter.out", TORCH_FN(nextafter_out), "nextafter", "nextafter_");
  m.out("polygamma.out", TORCH_FN(polygamma_out), "polygamma");
  m.impl("polygamma_", TORCH_FN(polygamma_));
  m.out("round.decimals_out", TORCH_FN(round_decimals_out), "round.decimals", "round_.decimals");
  m.out("signbit.out", TORCH_FN(signbit_out), "signbit");
  m.out("sinc.out", TORCH_FN(sinc_out), "sinc", "sinc_");
  m.out("sinh.out", TORCH_FN(sinh_out), "sinh", "sinh_");
  m.impl("special_chebyshev_polynomial_t.out", TORCH_FN(special_chebyshev_polynomial_t_out));
  m.impl("special_chebyshev_polynomial_u.out", TORCH_FN(special_chebyshev_polynomial_u_out));
  m.impl("special_chebyshev_polynomial_v.out", TORCH_FN(special_chebyshev_polynomial_v_out));
  m.impl("special_chebyshev_polynomial_w.out", TORCH_FN(special_chebyshev_polynomial_w_out));
  m.impl("special_hermite_polynomial_h.out", TORCH_FN(special_hermite_polynomial_h_out));
  m.impl("special_hermite_polynomial_he.out", TORCH_FN(special_hermite_polynomial_he_out));
  m.impl("special_laguerre_polynomial_l.out", TORCH_FN(special_laguerre_polynomial_l_out));
  m.impl("special_legendre_polynomial_p.out", TORCH_FN(special_legendre_polynomial_p_out));
  m.impl("special_shifted_chebyshev_polynomial_t.out", TORCH_FN(special_shifted_chebyshev_polynomial_t_out));
  m.impl("special_shifted_chebyshev_polynomial_u.out", TORCH_FN(special_shifted_chebyshev_polynomial_u_out));
  m.impl("special_shifted_chebyshev_polynomial_v.out", TORCH_FN(special_shifted_chebyshev_polynomial_v_out));
  m.impl("special_shifted_chebyshev_polynomial_w.out", TORCH_FN(special_shifted_chebyshev_polynomial_w_out));
  m.out("special_airy_ai.out", TORCH_FN(special_airy_ai_out), "special_airy_ai");
  m.out("special_bessel_j0.out", TORCH_FN(special_bessel_j0_out), "special_bessel_j0");
  m.out("special_bessel_j1.out", TORCH_FN(special_bessel_j1_out), "special_bessel_j1");
  m.out("special_bessel_y0.out", TORCH_FN(special_bessel_y0_out), "special_bessel_y0");
  m.out("special_bessel_y1.out", TORCH_FN(special_bessel_y1_out), "special_bessel_y1");
  m.out("special_entr.out", TORCH_FN(special_entr_out), "special_entr");
  m.out("special_erfcx.out", TORCH_FN(special_erfcx_out), "special_erfcx");
  m.out("special_i0e.out", TORCH_FN(special_i0e_out), "special_i0e");
  m.out("special_i1.out", TORCH_FN(special_i1_out), "special_i1");
  m.out("special_i1e.out", TORCH_FN(special_i1e_out), "special_i1e");
  m.out("special_log_ndtr.out", TORCH_FN(special_log_ndtr_out), "special_log_ndtr");
  m.out("special_modified_bessel_i0.out", TORCH_FN(special_modified_bessel_i0_out), "special_modified_bessel_i0");
  m.out("special_modified_bessel_i1.out", TORCH_FN(special_modified_bessel_i1_out), "special_modified_bessel_i1");
  m.out("special_modified_bessel_k0.out", TORCH_FN(special_modified_bessel_k0_out), "special_modified_bessel_k0");
  m.out("special_modified_bessel_k1.out", TORCH_FN(special_modified_bessel_k1_out), "special_modified_bessel_k1");
  m.out("special_ndtri.out", TORCH_FN(special_ndtri_out), "special_ndtri");
  m.out("special_scaled_modified_bessel_k0.out", TORCH_FN(special_scaled_modified_bessel_k0_out),
        "special_scaled_modified_bessel_k0");
  m.out("special_scaled_modified_bessel_k1.out", TORCH_FN(special_scaled_modified_bessel_k1_out),
        "special_scaled_modified_bessel_k1");
  m.out("special_spherical_bessel_j0.out", TORCH_FN(special_spherical_bessel_j0_out), "special_spherical_bessel_j0");
  m.out("special_xlog1py.out", TORCH_FN(special_xlog1py_out), "special_xlog1py");
  m.impl("special_zeta.out", TORCH_FN(special_zeta_out));
  m.out("tan.out", TORCH_FN(tan_out), "tan", "tan_");
  m.out("xlogy.OutTensor", TORCH_FN(xlogy_out), "xlogy.Tensor", "xlogy_.Tensor");
}

}  // namespace torchtpu::aten
