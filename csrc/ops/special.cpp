#include "ops/special.h"

#include "ops/elementwise.h"

#include <cmath>
#include <limits>
#include <vector>

// The series below are derived from the Cephes Math Library as PyTorch's
// ATen/native/Math.h gives them (Copyright (c) 2018, Steven Moshier,
// 3-clause BSD license), with PyTorch's coefficients.
namespace torchtpu::ops {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

constexpr double kI0eA[] = {-4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16, 1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14, -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11, 9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9, -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7, 1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5, -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4, 1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2, -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2, 1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1};
constexpr double kI0eB[] = {-7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17, 3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16, 1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15, -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13, 7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11, -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10, 3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7, 2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3, 8.04490411014108831608E-1};
constexpr double kI1eA64[] = {2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16, -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14, 3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11, -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9, 9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7, -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5, 4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4, -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2, 2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1, -1.76416518357834055153E-1, 2.52587186443633654823E-1};
constexpr double kI1eA32[] = {9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7, -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5, 4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4, -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2, 2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1, -1.76416518357834055153E-1, 2.52587186443633654823E-1};
constexpr double kI1eB64[] = {7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17, -3.20952592199342395980E-17, 2.96262899764595013876E-16, 3.30820231092092828324E-16, -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14, 4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13, -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11, 3.25260358301548823856E-11, -1.89749581235054123450E-11, -5.58974346219658380687E-10, -3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7, -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3, 7.78576235018280120474E-1};
constexpr double kI1eB32[] = {-3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7, -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3, 7.78576235018280120474E-1};
constexpr double kNdtriP0[] = {-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1, 1.39312609387279679503E1, -1.23916583867381258016E0};
constexpr double kNdtriQ0[] = {1.00000000000000000000E0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1, -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1, 1.59056225126211695515E1, -1.18331621121330003142E0};
constexpr double kNdtriP1[] = {4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1, 4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0, -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4};
constexpr double kNdtriQ1[] = {1.00000000000000000000E0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1, 1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1, -3.80806407691578277194E-2, -9.33259480895457427372E-4};
constexpr double kNdtriP2[] = {3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0, 1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2, 3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9};
constexpr double kNdtriQ2[] = {1.00000000000000000000E0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0, 2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4, 2.89247864745380683936E-6, 6.79019408009981274425E-9};

Value K(Builder& b, Value like, double v) { return b.constant(b.dtype(like), v); }
Value abs(Builder& b, Value x) { return b.abs(x); }
Value isnan(Builder& b, Value x) { return b.compare(x, x, Cmp::kNE); }
Value lt(Builder& b, Value x, double v) { return b.compare(x, K(b, x, v), Cmp::kLT); }
Value le(Builder& b, Value x, double v) { return b.compare(x, K(b, x, v), Cmp::kLE); }
Value gt(Builder& b, Value x, double v) { return b.compare(x, K(b, x, v), Cmp::kGT); }
Value eq(Builder& b, Value x, double v) { return b.compare(x, K(b, x, v), Cmp::kEQ); }
Value sel(Builder& b, Value p, Value t, Value f) { return b.select(p, t, f); }
Value sel(Builder& b, Value p, double t, Value f) { return b.select(p, K(b, f, t), f); }
Value sub_from(Builder& b, double c, Value x) { return b.sub(K(b, x, c), x); }
Value recip(Builder& b, Value x) { return b.div(K(b, x, 1.0), x); }
Value trunc(Builder& b, Value x) {
  return b.select(lt(b, x, 0), b.ceil(x), b.floor(x));
}
Value sin(Builder& b, Value x) { return b.sin(x); }
Value pow(Builder& b, Value x, Value y) { return b.pow(x, y); }

// sum A[i] x^(n-i), Horner's rule from 0 as Cephes' polevl.
template <size_t N>
Value polevl(Builder& b, Value x, const double (&a)[N]) {
  Value r = b.mul(b.zeros_like(x), x);
  for (double c : a) r = b.add_c(b.mul(r, x), c);
  return r;
}

// Cephes' chbevl: a Chebyshev series at x / 2.
template <size_t N>
Value chbevl(Builder& b, Value x, const double (&a)[N]) {
  Value b0 = b.full_like(x, a[0]), b1 = b.zeros_like(x), b2 = b.zeros_like(x);
  for (size_t i = 1; i < N; ++i) {
    b2 = b1;
    b1 = b0;
    b0 = b.add_c(b.sub(b.mul(x, b1), b2), a[i]);
  }
  return b.mul_c(b.sub(b0, b2), 0.5);
}

// The integer type with x's width, and its exponent layout.
struct FloatBits {
  DType int_type;
  int mantissa_bits;
  int bias;
};
FloatBits bits_of(DType t) {
  if (t == DType::kF64) return {DType::kS64, 52, 1023};
  return {DType::kS32, 23, 127};
}
Value to_wide_float(Builder& b, Value x) {
  DType t = b.dtype(x);
  return (t == DType::kF16 || t == DType::kBF16) ? b.convert(x, DType::kF32) : x;
}

}  // namespace

Value chlo_unary(Builder& b, const char* op, Value x) { return b.graph().add(op, {x}, b.type(x)); }

Value acos(Builder& b, Value x) { return chlo_unary(b, "chlo.acos", x); }
Value acosh(Builder& b, Value x) { return chlo_unary(b, "chlo.acosh", x); }
Value asin(Builder& b, Value x) { return chlo_unary(b, "chlo.asin", x); }
Value asinh(Builder& b, Value x) { return chlo_unary(b, "chlo.asinh", x); }
Value atan(Builder& b, Value x) { return chlo_unary(b, "chlo.atan", x); }
Value atanh(Builder& b, Value x) { return chlo_unary(b, "chlo.atanh", x); }
Value cosh(Builder& b, Value x) { return chlo_unary(b, "chlo.cosh", x); }
Value sinh(Builder& b, Value x) { return chlo_unary(b, "chlo.sinh", x); }
// XLA's erfc past 2 is exp(-x^2) R(x) with x^2 rounded first, a relative
// error of 2 x^2 eps (65 ulps of float32 at 9, 5e-14 in float64 at 20).
// With x^2 = hi + lo exactly (Dekker's split), erfc (1 - lo) restores it.
Value erfc(Builder& b, Value x) {
  Value e = chlo_unary(b, "chlo.erfc", x);
  const DType t = b.dtype(x);
  if (t != DType::kF32 && t != DType::kF64) return e;
  Value c = b.mul_c(x, t == DType::kF64 ? 134217729.0 : 4097.0);
  Value xh = b.sub(c, b.sub(c, x));
  Value xl = b.sub(x, xh);
  Value hi = b.mul(x, x);
  Value lo = b.add(b.add(b.sub(b.mul(xh, xh), hi), b.mul(b.mul_c(xh, 2.0), xl)), b.mul(xl, xl));
  return b.select(b.logical_and(gt(b, x, 2.0), lt(b, x, 30.0)), b.mul(e, sub_from(b, 1.0, lo)), e);
}
// XLA's float32 lgamma (Lanczos in float32) is off by up to 5e-7 over
// [-11, 8], lgamma(1) included (4.8e-7, not 0), where the CPU's is within an
// ulp or two; its float64 lgamma is accurate, so narrower types are computed
// there and rounded once.
Value lgamma(Builder& b, Value x) {
  const DType t = b.dtype(x);
  if (t == DType::kF64) return chlo_unary(b, "chlo.lgamma", x);
  return b.convert(chlo_unary(b, "chlo.lgamma", b.convert(x, DType::kF64)), t);
}

Value tan(Builder& b, Value x) { return b.tan(x); }

Value log10(Builder& b, Value x) { return b.mul_c(b.log(x), 1.0 / M_LN10); }

Value exp2(Builder& b, Value x) { return pow(b, K(b, x, 2.0), x); }

Value erfinv(Builder& b, Value y) {
  static const double a[4] = {0.886226899, -1.645349621, 0.914624893, -0.140543331};
  static const double bb[4] = {-2.118377725, 1.442710462, -0.329097515, 0.012229801};
  static const double c[4] = {-1.970840454, -1.624906493, 3.429567803, 1.641345311};
  static const double d[2] = {3.543889200, 1.637067800};
  Value y_abs = abs(b, y);
  Value z = b.mul(y, y);
  Value num = b.add_c(b.mul(b.add_c(b.mul(b.add_c(b.mul_c(z, a[3]), a[2]), z), a[1]), z), a[0]);
  Value dem = b.add_c(
      b.mul(b.add_c(b.mul(b.add_c(b.mul(b.add_c(b.mul_c(z, bb[3]), bb[2]), z), bb[1]), z), bb[0]), z), 1.0);
  Value central = b.div(b.mul(y, num), dem);
  Value zt = b.sqrt(b.neg(b.log(b.div(sub_from(b, 1.0, y_abs), K(b, y, 2.0)))));
  Value numt = b.add_c(b.mul(b.add_c(b.mul(b.add_c(b.mul_c(zt, c[3]), c[2]), zt), c[1]), zt), c[0]);
  Value demt = b.add_c(b.mul(b.add_c(b.mul_c(zt, d[1]), d[0]), zt), 1.0);
  Value tail = b.div(copysign(b, numt, y), demt);
  Value x = b.select(le(b, y_abs, 0.7), central, tail);
  // The Newton steps divide erf's rounding by erf's derivative (small in the
  // tails): past |x| = 1.5, 1 - erfc(|x|) rounds erf as closely as the CPU's erff.
  for (int i = 0; i < 2; ++i) {
    Value deriv = b.mul(K(b, x, M_2_SQRTPI), b.exp(b.neg(b.mul(x, x))));
    Value ax = abs(b, x);
    Value erf_x = b.select(gt(b, ax, 1.5), copysign(b, sub_from(b, 1.0, erfc(b, ax)), x), erf(b, x));
    x = b.sub(x, b.div(b.sub(erf_x, y), deriv));
  }
  // Tiny |y|: sqrt(pi) / 2 y (the next term is pi / 12 y^2 smaller); there
  // the Newton correction would be a subnormal, which the platform flushes.
  x = b.select(lt(b, y_abs, 1e-8), b.mul_c(y, std::sqrt(M_PI) / 2), x);
  x = b.select(eq(b, y_abs, 1.0), copysign(b, K(b, y, kInf), y), x);
  return sel(b, gt(b, y_abs, 1.0), kNaN, x);
}

Value frac(Builder& b, Value x) { return b.sub(x, trunc(b, x)); }

Value sinc(Builder& b, Value x) {
  Value p = b.mul_c(x, M_PI);
  return sel(b, eq(b, x, 0), 1.0, b.div(sin(b, p), p));
}

Value signbit(Builder& b, Value x) {
  DType t = b.dtype(x);
  if (t == DType::kBool || is_unsigned_int(t)) return b.constant(DType::kBool, 0, b.dims(x));
  if (!is_float(t)) return lt(b, x, 0);
  Value w = to_wide_float(b, x);
  Value bits = b.bitcast_convert(w, bits_of(b.dtype(w)).int_type);
  return lt(b, bits, 0);
}

Value nan_to_num(Builder& b, Value x, Value nan, Value posinf, Value neginf) {
  if (!is_float(b.dtype(x))) return x;
  Value r = b.select(eq(b, x, kInf), posinf, x);
  r = b.select(eq(b, x, -kInf), neginf, r);
  return b.select(isnan(b, x), nan, r);
}

Value angle(Builder& b, Value x) {
  if (ir::is_complex(b.dtype(x))) return b.atan2(b.imag(x), b.real(x));
  return b.select(isnan(b, x), x, sel(b, lt(b, x, 0), M_PI, b.zeros_like(x)));
}

Value entr(Builder& b, Value x) {
  Value pos = b.mul(b.neg(x), b.log(x));
  Value r = sel(b, gt(b, x, 0), pos, sel(b, eq(b, x, 0), 0.0, b.full_like(x, -kInf)));
  return b.select(isnan(b, x), x, r);
}

Value ndtri(Builder& b, Value y0) {
  const double e2 = 0.13533528323661269189;  // exp(-2)
  Value code = b.compare(y0, sub_from(b, 1.0, K(b, y0, e2)), Cmp::kLE);
  Value y = b.select(code, y0, sub_from(b, 1.0, y0));
  Value yc = b.add_c(y, -0.5);
  Value y2 = b.mul(yc, yc);
  Value xc = b.add(yc, b.mul(yc, b.div(b.mul(y2, polevl(b, y2, kNdtriP0)), polevl(b, y2, kNdtriQ0))));
  Value central = b.mul_c(xc, 2.50662827463100050242);
  Value x = b.sqrt(b.mul_c(b.log(y), -2.0));
  Value x0 = b.sub(x, b.div(b.log(x), x));
  Value z = recip(b, x);
  Value x1 = b.select(lt(b, x, 8.0), b.div(b.mul(z, polevl(b, z, kNdtriP1)), polevl(b, z, kNdtriQ1)),
                      b.div(b.mul(z, polevl(b, z, kNdtriP2)), polevl(b, z, kNdtriQ2)));
  Value tail = b.sub(x0, x1);
  tail = b.select(code, b.neg(tail), tail);
  Value r = b.select(gt(b, y, e2), central, tail);
  r = sel(b, eq(b, y0, 0), -kInf, sel(b, eq(b, y0, 1), kInf, r));
  return sel(b, b.logical_or(lt(b, y0, 0), gt(b, y0, 1)), kNaN, r);
}

// erfcx(u) for large u from its asymptotic series
// sum_k (-1)^k (2k - 1)!! / (2 u^2)^k / (u sqrt(pi)): 5 terms in float32
// (error 3e-8 at u = 8), 17 in float64 (1e-17 at u = 8).
Value erfcx_series(Builder& b, Value u) {
  const int terms = b.dtype(u) == DType::kF64 ? 17 : 5;
  std::vector<double> c(terms);
  c[0] = 1;
  for (int k = 1; k < terms; ++k) c[k] = -c[k - 1] * (2 * k - 1) / 2;
  Value iu2 = recip(b, b.mul(u, u));
  Value sum = K(b, u, c[terms - 1]);
  for (int k = terms - 2; k >= 0; --k) sum = b.add_c(b.mul(sum, iu2), c[k]);
  return b.div(sum, b.mul_c(u, std::sqrt(M_PI)));
}

Value log_ndtr(Builder& b, Value x) {
  // x / sqrt 2 rounded once, as the CPU's float x * M_SQRT1_2 (a double
  // product): near erfc's underflow one ulp of t is 60 ulps of the result.
  const double hi = static_cast<float>(M_SQRT1_2);
  Value t = b.dtype(x) == DType::kF32 ? b.add(b.mul_c(x, hi), b.mul_c(x, M_SQRT1_2 - hi)) : b.mul_c(x, M_SQRT1_2);
  Value upper = log1p(b, b.neg(b.div(erfc(b, t), K(b, x, 2.0))));
  // x < -1: log(erfcx(u) / 2) - u^2 with u = -t. erfc(u) is exact enough
  // while it stays normal; past u = 8 erfcx's asymptotic series is.
  Value u = b.neg(t);
  Value direct = b.log(b.div(erfc(b, u), K(b, x, 2.0)));
  Value erfcx = erfcx_series(b, u);
  Value asym = b.sub(b.log(b.div(erfcx, K(b, x, 2.0))), b.mul(t, t));
  Value lower = b.select(lt(b, u, 8.0), direct, asym);
  return b.select(lt(b, x, -1.0), lower, upper);
}

// erfcx(x) = exp(x^2) erfc(x). For 0 <= x < 8: exp of x^2 split exactly
// into hi + lo (Dekker), times erfc; 8 <= x < 50: the asymptotic series;
// beyond, and for x < 0, the CPU's own formulas.
Value erfcx(Builder& b, Value x) {
  const bool f64 = b.dtype(x) == DType::kF64;
  Value ax = abs(b, x);
  Value c = b.mul_c(ax, f64 ? 134217729.0 : 4097.0);
  Value xh = b.sub(c, b.sub(c, ax));
  Value xl = b.sub(ax, xh);
  Value hi = b.mul(ax, ax);
  Value lo = b.add(b.add(b.sub(b.mul(xh, xh), hi), b.mul(b.mul_c(xh, 2.0), xl)), b.mul(xl, xl));
  Value ex2 = b.mul(b.exp(hi), b.add_c(lo, 1.0));  // exp(x^2)
  Value direct = b.mul(ex2, erfc(b, ax));
  Value asym = erfcx_series(b, ax);
  const double ispi = 0.56418958354775628694807945156;  // 1 / sqrt(pi)
  Value xx = b.mul(ax, ax);
  Value cf = b.div(b.mul_c(b.add_c(b.mul(xx, b.add_c(xx, 4.5)), 2.0), ispi),
                   b.mul(ax, b.add_c(b.mul(xx, b.add_c(xx, 5.0)), 3.75)));
  cf = b.select(gt(b, ax, 5e7), b.div(K(b, x, ispi), ax), cf);
  Value pos = b.select(lt(b, ax, 8.0), direct, b.select(lt(b, ax, 50.0), asym, cf));
  // x < 0: 2 exp(x^2) - erfcx(-x), exp(x^2) alone below -6.1, inf below -26.7.
  Value two_ex2 = b.mul_c(b.exp(b.mul(x, x)), 2.0);
  Value neg = b.select(lt(b, x, -6.1), two_ex2, b.sub(two_ex2, pos));
  neg = sel(b, lt(b, x, -26.7), kInf, neg);
  return b.select(lt(b, x, 0), neg, pos);
}

Value logit(Builder& b, Value x, Value lo, DType round_to) {
  if (lo.valid()) {
    Value hi = b.sub(K(b, lo, 1.0), lo);
    if (round_to != b.dtype(x)) hi = b.convert(b.convert(hi, round_to), b.dtype(x));
    const Dims d = b.dims(x);
    x = b.select(b.compare(x, lo, Cmp::kLT), b.broadcast_to(lo, d),
                 b.select(b.compare(x, hi, Cmp::kGT), b.broadcast_to(hi, d), x));
  }
  auto round = [&](Value v) { return round_to == b.dtype(v) ? v : b.convert(b.convert(v, round_to), b.dtype(v)); };
  Value ratio = round(b.div(x, round(sub_from(b, 1.0, x))));
  return sel(b, eq(b, x, 1.0), kInf, b.log(ratio));
}

Value logit_backward(Builder& b, Value grad, Value x, Value lo) {
  Value out_of_range, fill;
  if (lo.valid()) {
    Value hi = b.sub(K(b, lo, 1.0), lo);
    out_of_range = b.logical_or(b.compare(x, lo, Cmp::kLT), b.compare(x, hi, Cmp::kGT));
    fill = K(b, x, 0.0);
  } else {
    out_of_range = b.logical_or(lt(b, x, 0), gt(b, x, 1));
    fill = K(b, x, kNaN);
  }
  Value edge = b.logical_or(eq(b, x, 0), eq(b, x, 1));
  Value r = b.select(edge, b.mul_c(grad, kInf), b.div(grad, b.mul(x, sub_from(b, 1.0, x))));
  return b.select(out_of_range, fill, r);
}

Value round_decimals(Builder& b, Value x, Value scale, bool negative) {
  if (negative) return b.mul(b.round_even(b.div(x, scale)), scale);
  return b.div(b.round_even(b.mul(x, scale)), scale);
}

// On the bits of |x| (integer ops only, so subnormals survive a CPU that
// flushes them in float arithmetic): normal numbers rescale their exponent
// field to bias - 1; subnormals shift their mantissa up by its leading zeros.
std::pair<Value, Value> frexp(Builder& b, Value x) {
  const DType t = b.dtype(x);
  Value w = to_wide_float(b, x);
  const DType wt = b.dtype(w);
  const FloatBits fb = bits_of(wt);
  const DType it = fb.int_type;
  const int width = wt == DType::kF64 ? 64 : 32, m_bits = fb.mantissa_bits, bias = fb.bias;
  auto I = [&](double v) { return b.constant(it, v); };
  Value bits = b.bitcast_convert(abs(b, w), it);
  Value field = b.shift_right_logical(bits, I(m_bits));
  const double mant_mask = std::ldexp(1.0, m_bits) - 1;
  Value mant = b.logical_and(bits, I(mant_mask));
  // Subnormal: the top set bit p = width - 1 - clz moves to the implicit bit.
  Value clz = b.unary("stablehlo.count_leading_zeros", mant);
  Value shift = b.sub(clz, I(width - 1 - m_bits));
  Value sub_mant = b.logical_and(b.shift_left(mant, shift), I(mant_mask));
  Value sub_e = b.sub(I(width + 1 - m_bits - bias), clz);
  Value is_sub = b.compare(field, I(0), Cmp::kEQ);
  Value e = b.select(is_sub, sub_e, b.sub(field, I(bias - 1)));
  mant = b.select(is_sub, sub_mant, mant);
  Value m = b.bitcast_convert(b.logical_or(mant, I(std::ldexp(bias - 1, m_bits))), wt);
  m = b.select(signbit(b, w), b.neg(m), m);
  // Zero, infinities and NaN: the value itself and exponent 0.
  Value special = b.logical_or(b.compare(bits, I(0), Cmp::kEQ), b.compare(field, I(2 * bias + 1), Cmp::kEQ));
  m = b.select(special, w, m);
  e = b.select(special, I(0), e);
  return {b.convert(m, t), b.convert(e, DType::kS32)};
}

Value digamma(Builder& b, Value x0) {
  const double psi_10 = 2.25175258906672110764;
  static const double A[] = {8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
                             -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
                             8.33333333333333333333E-2};
  Value neg = lt(b, x0, 0);
  Value x = b.select(neg, sub_from(b, 1.0, x0), x0);
  Value result = b.zeros_like(x);
  for (int i = 0; i < 10; ++i) {
    Value small = lt(b, x, 10.0);
    result = b.select(small, b.sub(result, recip(b, x)), result);
    x = b.select(small, b.add_c(x, 1.0), x);
  }
  Value z = recip(b, b.mul(x, x));
  Value y = sel(b, lt(b, x, 1e17), b.mul(z, polevl(b, z, A)), b.zeros_like(x));
  Value r = b.sub(b.sub(b.add(result, b.log(x)), b.div(K(b, x, 0.5), x)), y);
  r = b.select(eq(b, x, 10.0), b.add_c(result, psi_10), r);
  // Reflection for x < 0: pi / tan(pi * r) with r = x - round(x), the
  // distance to the nearest integer (exact: the two are within a factor of
  // two), so the tangent's argument keeps its digits next to the poles (the
  // CPU reduces in double for float32).
  Value fr = b.sub(x0, b.round_even(x0));
  Value refl = b.div(K(b, x, M_PI), tan(b, b.mul_c(fr, M_PI)));
  r = b.select(neg, b.sub(r, refl), r);
  r = sel(b, b.logical_and(neg, eq(b, fr, 0)), kNaN, r);
  Value zero_inf = copysign(b, K(b, x0, kInf), b.neg(x0));
  return b.select(eq(b, x0, 0), zero_inf, r);
}

Value trigamma(Builder& b, Value x0) {
  Value refl = lt(b, x0, 0.5);
  const float pi_f = static_cast<float>(M_PI);
  const double pi2 = b.dtype(x0) == DType::kF64 ? M_PI * M_PI : static_cast<double>(pi_f * pi_f);
  Value s = sin(b, b.mul_c(x0, M_PI));
  Value result = b.select(refl, b.neg(b.div(K(b, x0, pi2), b.mul(s, s))), b.zeros_like(x0));
  Value x = b.select(refl, sub_from(b, 1.0, x0), x0);
  for (int i = 0; i < 6; ++i) {
    result = b.add(result, recip(b, b.mul(x, x)));
    x = b.add_c(x, 1.0);
  }
  Value ixx = recip(b, b.mul(x, x));
  Value inner = b.sub(K(b, x, 1.0 / 30), b.mul_c(ixx, 1.0 / 42));
  inner = b.sub(K(b, x, 1.0 / 6), b.mul(ixx, inner));
  Value series = b.add(b.add_c(recip(b, b.mul_c(x, 2.0)), 1.0), b.mul(ixx, inner));
  result = b.add(result, b.div(series, x));
  return b.select(refl, b.neg(result), result);
}

Value zeta(Builder& b, Value x, Value q) {
  static const double A[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                             7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
                             -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18};
  const double machep = 1.11022302462515654042E-16;
  const Dims d = b.dims(b.add(x, q));
  x = b.broadcast_to(x, d);
  q = b.broadcast_to(q, d);
  Value neg_x = b.neg(x);
  // The direct sum q^-x + (q+1)^-x + ... as Cephes runs it: at least 9
  // terms, then on while the base is at most 9 (a q far below zero takes
  // about -q terms), stopping early where a term is below machine epsilon.
  // One device loop runs until every element has stopped; elements whose
  // value is a domain case (below) do not enter it, and one still running
  // after 2^24 terms (only a float64 q below -2^24 gets there, where the
  // CPU loops for as many terms as |q|) gives NaN.
  const int64_t kMaxTerms = int64_t{1} << 24;
  Value floor_q = b.floor(q);
  Value q_nonpos = le(b, q, 0);
  Value early = b.logical_or(b.logical_or(le(b, x, 1.0), isnan(b, x)), b.logical_and(q_nonpos, b.logical_or(
      b.compare(q, floor_q, Cmp::kEQ), b.compare(x, b.floor(x), Cmp::kNE))));
  early = b.logical_or(early, b.logical_or(isnan(b, q), eq(b, abs(b, q), kInf)));
  auto keep_going = [&](Builder& lb, Value i, Value a_, Value done_) {
    Value more = lb.logical_or(lb.broadcast_to(lb.compare(i, lb.constant(DType::kS64, 9), Cmp::kLT), lb.dims(a_)),
                               lb.compare(a_, lb.full_like(a_, 9.0), Cmp::kLE));
    return lb.logical_and(lb.logical_not(done_), more);
  };
  std::vector<Value> sum = b.while_loop(
      {b.constant(DType::kS64, 0), x, q, b.zeros_like(q), pow(b, q, neg_x), early},
      [&](Builder& lb, const std::vector<Value>& v) {
        Value active = keep_going(lb, v[0], v[2], v[5]);
        std::vector<int64_t> all(lb.rank(active));
        for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
        Value any = all.empty() ? active : lb.reduce(active, all, ir::Body::kOr, 0);
        return lb.logical_and(any, lb.compare(v[0], lb.constant(DType::kS64, static_cast<double>(kMaxTerms)),
                                              Cmp::kLT));
      },
      [&](Builder& lb, const std::vector<Value>& v) {
        Value active = keep_going(lb, v[0], v[2], v[5]);
        Value a1 = lb.add_c(v[2], 1.0);
        Value b1 = pow(lb, a1, lb.neg(v[1]));
        Value s1 = lb.add(v[4], b1);
        Value conv = lb.logical_and(lb.compare(lb.mul_c(s1, -machep), b1, Cmp::kLT),
                                    lb.compare(b1, lb.mul_c(s1, machep), Cmp::kLT));
        return std::vector<Value>{lb.add(v[0], lb.constant(DType::kS64, 1)), v[1], lb.select(active, a1, v[2]),
                                  lb.select(active, b1, v[3]), lb.select(active, s1, v[4]),
                                  lb.logical_or(v[5], lb.logical_and(active, conv))};
      });
  Value a = sum[2], bb = sum[3], s = sum[4], done = sum[5];
  Value unfinished = keep_going(b, sum[0], a, done);
  Value w = a;
  s = b.add(s, b.div(b.mul(bb, w), b.add_c(x, -1.0)));
  s = b.sub(s, b.mul_c(bb, 0.5));
  Value fa = b.full_like(x, 1.0), k = b.zeros_like(x);
  Value tail_done = b.logical_and(done, b.logical_not(early));
  for (double ai : A) {
    Value not_done = b.logical_not(tail_done);
    fa = b.mul(fa, b.add(x, k));
    bb = b.div(bb, w);
    Value t = b.div(b.mul(fa, bb), K(b, x, ai));
    Value s1 = b.add(s, t);
    s = b.select(not_done, s1, s);
    tail_done = b.logical_or(tail_done, lt(b, abs(b, b.div(t, s1)), machep));
    k = b.add_c(k, 1.0);
    fa = b.mul(fa, b.add(x, k));
    bb = b.div(bb, w);
    k = b.add_c(k, 1.0);
  }
  Value r = sel(b, unfinished, kNaN, s);
  r = sel(b, b.logical_and(q_nonpos, b.compare(x, b.floor(x), Cmp::kNE)), kNaN, r);
  r = sel(b, b.logical_and(q_nonpos, b.compare(q, floor_q, Cmp::kEQ)), kInf, r);
  r = sel(b, lt(b, x, 1.0), kNaN, r);
  r = sel(b, eq(b, x, 1.0), kInf, r);
  return r;
}

Value polygamma(Builder& b, int64_t n, Value x) {
  // In float64 whatever x's dtype, as the CPU sums zeta in its accumulation
  // type (double): the sum cancels heavily for negative x.
  const DType t = b.dtype(x);
  x = b.convert(x, DType::kF64);
  const double fact = std::exp(std::lgamma(static_cast<double>(n) + 1.0));
  Value z = zeta(b, b.full_like(x, static_cast<double>(n + 1)), x);
  return b.convert(b.mul(b.full_like(x, (n % 2 ? 1.0 : -1.0) * fact), z), t);
}

Value i0e(Builder& b, Value x0) {
  Value x = abs(b, x0);
  Value lo = chbevl(b, b.add_c(b.div(x, K(b, x, 2.0)), -2.0), kI0eA);
  Value hi = b.div(chbevl(b, b.add_c(b.div(K(b, x, 32.0), x), -2.0), kI0eB), b.sqrt(x));
  return b.select(le(b, x, 8.0), lo, hi);
}

Value i0(Builder& b, Value x0) {
  Value x = abs(b, x0);
  Value ex = b.exp(x);
  Value lo = b.mul(ex, chbevl(b, b.add_c(b.div(x, K(b, x, 2.0)), -2.0), kI0eA));
  Value hi = b.div(b.mul(ex, chbevl(b, b.add_c(b.div(K(b, x, 32.0), x), -2.0), kI0eB)), b.sqrt(x));
  return b.select(le(b, x, 8.0), lo, hi);
}

Value i1e(Builder& b, Value x0) {
  const bool f64 = b.dtype(x0) == DType::kF64;
  Value x = abs(b, x0);
  Value y = b.add_c(b.div(x, K(b, x, 2.0)), -2.0), yb = b.add_c(b.div(K(b, x, 32.0), x), -2.0);
  Value lo = b.mul(f64 ? chbevl(b, y, kI1eA64) : chbevl(b, y, kI1eA32), x);
  Value hi = b.div(f64 ? chbevl(b, yb, kI1eB64) : chbevl(b, yb, kI1eB32), b.sqrt(x));
  Value out = b.select(le(b, x, 8.0), lo, hi);
  return b.select(lt(b, x0, 0), b.neg(out), out);
}

Value i1(Builder& b, Value x0) {
  const bool f64 = b.dtype(x0) == DType::kF64;
  Value x = abs(b, x0);
  Value ex = b.exp(x);
  Value y = b.add_c(b.div(x, K(b, x, 2.0)), -2.0), yb = b.add_c(b.div(K(b, x, 32.0), x), -2.0);
  Value lo = b.mul(b.mul(ex, x), f64 ? chbevl(b, y, kI1eA64) : chbevl(b, y, kI1eA32));
  Value hi = b.div(b.mul(ex, f64 ? chbevl(b, yb, kI1eB64) : chbevl(b, yb, kI1eB32)), b.sqrt(x));
  Value out = b.select(le(b, x, 8.0), lo, hi);
  return b.select(lt(b, x0, 0), b.neg(out), out);
}

Value xlogy(Builder& b, Value x, Value y) {
  Value r = b.mul(x, b.log(y));
  const Dims d = b.dims(r);
  r = b.select(b.broadcast_to(eq(b, x, 0), d), b.zeros_like(r), r);
  return b.select(b.broadcast_to(isnan(b, y), d), b.full_like(r, kNaN), r);
}

Value xlog1py(Builder& b, Value x, Value y) {
  Value r = b.mul(x, log1p(b, y));
  const Dims d = b.dims(r);
  r = b.select(b.broadcast_to(eq(b, x, 0), d), b.zeros_like(r), r);
  return b.select(b.broadcast_to(isnan(b, y), d), b.full_like(r, kNaN), r);
}

Value hypot(Builder& b, Value x, Value y) {
  Value ax = abs(b, x), ay = abs(b, y);
  Value m = b.max(ax, ay), n = b.min(ax, ay);
  Value plain = b.sqrt(b.add(b.mul(x, x), b.mul(y, y)));
  Value r = b.div(n, m);
  Value scaled = b.mul(m, b.sqrt(b.add_c(b.mul(r, r), 1.0)));
  const bool f64 = b.dtype(m) == DType::kF64;
  Value safe = b.logical_and(lt(b, m, f64 ? 1e150 : 1e18), gt(b, m, f64 ? 1e-150 : 1e-18));
  Value h = b.select(safe, plain, scaled);
  h = sel(b, eq(b, m, 0), 0.0, h);
  return sel(b, b.logical_or(eq(b, ax, kInf), eq(b, ay, kInf)), kInf, h);
}

Value nextafter(Builder& b, Value x, Value y) {
  const Dims d = b.dims(b.add(x, y));
  x = b.broadcast_to(x, d);
  y = b.broadcast_to(y, d);
  return b.graph().add("chlo.next_after", {x, y}, b.type(x));
}

Value copysign(Builder& b, Value x, Value y) {
  Value ax = abs(b, x);
  Value neg = signbit(b, y);
  return b.select(neg, b.neg(ax), ax);
}

Value heaviside(Builder& b, Value x, Value y) {
  const Dims d = b.dims(b.add(x, y));
  Value pos = b.convert(b.compare(x, b.zeros_like(x), Cmp::kGT), b.dtype(x));
  return b.select(b.broadcast_to(b.compare(x, b.zeros_like(x), Cmp::kEQ), d), b.broadcast_to(y, d),
                  b.broadcast_to(pos, d));
}

Value fmax(Builder& b, Value x, Value y) {
  if (b.dtype(x) == DType::kBool) return b.logical_or(x, y);
  Value m = b.max(x, y);
  if (!is_float(b.dtype(x))) return m;
  const Dims d = b.dims(m);
  return b.select(isnan(b, x), b.broadcast_to(y, d), b.select(isnan(b, y), b.broadcast_to(x, d), m));
}

Value fmin(Builder& b, Value x, Value y) {
  if (b.dtype(x) == DType::kBool) return b.logical_and(x, y);
  Value m = b.min(x, y);
  if (!is_float(b.dtype(x))) return m;
  const Dims d = b.dims(m);
  return b.select(isnan(b, x), b.broadcast_to(y, d), b.select(isnan(b, y), b.broadcast_to(x, d), m));
}

static Value logaddexp_impl(Builder& b, Value x, Value y, bool base2) {
  Value m = b.max(x, y);
  Value negd = b.neg(abs(b, b.sub(x, y)));
  Value r = base2 ? b.add(m, b.mul_c(log1p(b, exp2(b, negd)), 1.0 / M_LN2)) : b.add(m, log1p(b, b.exp(negd)));
  Value same_inf = b.logical_and(eq(b, abs(b, x), kInf), b.compare(x, y, Cmp::kEQ));
  const Dims d = b.dims(r);
  return b.select(same_inf, b.broadcast_to(x, d), r);
}

Value logaddexp(Builder& b, Value x, Value y) { return logaddexp_impl(b, x, y, false); }
Value logaddexp2(Builder& b, Value x, Value y) { return logaddexp_impl(b, x, y, true); }

}  // namespace torchtpu::ops
