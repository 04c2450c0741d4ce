// The regularized incomplete gamma functions P(a, x) (igamma) and
// Q(a, x) = 1 - P (igammac). Computed in float64 whatever the input dtype:
// below x = a + 1 the power series of P, above it the continued fraction of
// Q (modified Lentz), each in one device loop that runs until every element
// has converged to float64 precision, times exp(a log x - x - lgamma(a)).
// For a above 1e4 (where those need thousands of terms and the prefactor
// loses digits) Temme's uniform asymptotic expansion (DLMF 8.12.3-8.12.10)
// with its first two terms, whose next term is below 1e-16 there. The
// boundary values are SciPy's and PyTorch's.
#include "ops/special.h"

#include <cmath>

namespace torchtpu::ops {

namespace {

constexpr DType kD = DType::kF64;
constexpr double kEps = 1e-16;
constexpr double kTiny = 1e-300;
// More terms than any float64 argument below ~1e8 needs.
constexpr int64_t kMaxTerms = 100000;
// Where the asymptotic expansion takes over.
constexpr double kLargeA = 1e4;
// Taylor coefficients in eta of DLMF 8.12.9 and 8.12.10 (c0 and c1; derived
// by series reversion of eta^2 / 2 = lambda - 1 - ln(lambda)), used where the
// closed forms cancel (|eta| < 0.3).
constexpr double kC0[] = {-1.0 / 3, 1.0 / 12, -2.0 / 135, 1.0 / 864, 1.0 / 2835, -139.0 / 777600,
                          1.0 / 25515, -571.0 / 261273600, -281.0 / 151559100, 163879.0 / 197522841600,
                          -5221.0 / 29554024500, 5246819.0 / 782190452736000};
constexpr double kC1[] = {-1.0 / 540, -1.0 / 288, 1.0 / 378, -77.0 / 77760, 1.0 / 4860, -1.0 / 2488320,
                          -2743.0 / 151559100, 41969.0 / 5486745600, -11.0 / 6823440,
                          47207.0 / 10158317568000, 3761.0 / 27280638000};

Value all_dims_or(Builder& b, Value v) {
  std::vector<int64_t> all;
  for (int64_t i = 0; i < b.rank(v); ++i) all.push_back(i);
  return all.empty() ? v : b.reduce(v, all, ir::Body::kOr, 0);
}

// Q(a, x) (P when !upper) by Temme's expansion, for large a (float64).
Value temme(Builder& b, Value a, Value x, bool upper) {
  auto c = [&](double w) { return b.full_like(a, w); };
  auto horner = [&](Value t, const double* k, int n) {
    Value r = c(k[n - 1]);
    for (int i = n - 2; i >= 0; --i) r = b.add(b.mul(r, t), c(k[i]));
    return r;
  };
  // mu = lambda - 1 = (x - a) / a; eta^2 / 2 = mu - log1p(mu), by its series
  // where that difference cancels.
  Value mu = b.div(b.sub(x, a), a);
  Value small = b.compare(b.abs(mu), c(0.1), Cmp::kLT);
  Value series = b.zeros_like(mu), pw = b.mul(mu, mu);
  for (int k = 2; k <= 24; ++k) {
    series = b.add(series, b.mul(pw, c((k % 2 ? -1.0 : 1.0) / k)));
    pw = b.mul(pw, mu);
  }
  Value half_eta2 = b.select(small, series, b.sub(mu, b.log1p(mu)));
  half_eta2 = b.max(half_eta2, b.zeros_like(half_eta2));
  Value eta = b.sqrt(b.mul(half_eta2, c(2.0)));
  eta = b.select(b.compare(mu, c(0), Cmp::kLT), b.neg(eta), eta);
  // c0 + c1 / a: closed forms away from eta = 0, Taylor series near it.
  Value near = b.compare(b.abs(eta), c(0.3), Cmp::kLT);
  Value safe_mu = b.select(near, c(1.0), mu), safe_eta = b.select(near, c(1.0), eta);
  Value im = b.div(c(1.0), safe_mu), ie = b.div(c(1.0), safe_eta);
  Value c0 = b.sub(im, ie);
  Value c1 = b.sub(b.sub(b.sub(b.mul(b.mul(ie, ie), ie), b.mul(b.mul(im, im), im)), b.mul(im, im)),
                   b.mul(im, c(1.0 / 12)));
  c0 = b.select(near, horner(eta, kC0, 12), c0);
  c1 = b.select(near, horner(eta, kC1, 11), c1);
  Value sum = b.add(c0, b.div(c1, a));
  Value r = b.div(b.mul(b.exp(b.neg(b.mul(a, half_eta2))), sum), b.sqrt(b.mul(a, c(2 * M_PI))));
  Value arg = b.mul(eta, b.sqrt(b.div(a, c(2.0))));
  // Q = erfc(eta sqrt(a/2)) / 2 + R, P = erfc(-eta sqrt(a/2)) / 2 - R.
  return upper ? b.add(b.mul(erfc(b, arg), c(0.5)), r) : b.sub(b.mul(erfc(b, b.neg(arg)), c(0.5)), r);
}

}  // namespace

Value igamma(Builder& b, Value a, Value x, bool upper) {
  const DType t = b.dtype(a);
  const Dims d = broadcast_shapes(b.dims(a), b.dims(x));
  a = b.convert(b.broadcast_to(a, d), kD);
  x = b.convert(b.broadcast_to(x, d), kD);
  auto c = [&](double v) { return b.constant(kD, v, d); };
  auto is = [&](Value v, Cmp cmp, double w) { return b.compare(v, c(w), cmp); };
  Value inf_a = is(b.abs(a), Cmp::kEQ, INFINITY);
  Value inf_x = is(b.abs(x), Cmp::kEQ, INFINITY);
  // Boundary cases, first match wins; `rest` marks the elements computed.
  Value nan = c(NAN);
  const double below = upper ? 1 : 0, above = upper ? 0 : 1;  // value at x = 0 and as x -> inf
  std::vector<std::pair<Value, Value>> cases = {
      {b.logical_or(is(x, Cmp::kLT, 0), is(a, Cmp::kLT, 0)), nan},
      {is(a, Cmp::kEQ, 0), b.select(is(x, Cmp::kGT, 0), c(above), nan)},
      {is(x, Cmp::kEQ, 0), c(below)},
      {inf_a, b.select(inf_x, nan, c(below))},
      {inf_x, c(above)},
  };
  Value special = b.constant(DType::kBool, 0, d);
  for (auto& [when, v] : cases) special = b.logical_or(special, when);
  Value is_nan = b.logical_or(b.compare(a, a, Cmp::kNE), b.compare(x, x, Cmp::kNE));
  Value large = b.logical_and(is(a, Cmp::kGT, kLargeA), b.logical_not(special));
  Value series = b.compare(x, b.add_c(a, 1), Cmp::kLT);

  // Carried: k, a, x, series?, done, sum, term, lentz c, lentz d, h, b_k.
  Value b0 = b.sub(b.add_c(x, 1), a);
  Value d0 = b.div(c(1), b0);
  Value inv_a = b.div(c(1), a);
  std::vector<Value> out = b.while_loop(
      {b.constant(DType::kS64, 1), a, x, series, b.logical_or(b.logical_or(special, is_nan), large), inv_a, inv_a,
       c(1 / kTiny), d0, d0, b0},
      [&](Builder& rb, const std::vector<Value>& v) {
        Value more = rb.compare(v[0], rb.constant(DType::kS64, static_cast<double>(kMaxTerms)), Cmp::kLE);
        return rb.logical_and(more, all_dims_or(rb, rb.logical_not(v[4])));
      },
      [&](Builder& rb, const std::vector<Value>& v) {
        const Dims dd = rb.dims(v[1]);
        auto k = [&](double w) { return rb.constant(kD, w, dd); };
        Value kf = rb.broadcast_to(rb.convert(v[0], kD), dd);
        Value av = v[1], xv = v[2];
        // Series: term *= x / (a + k); sum += term.
        Value term = rb.mul(v[6], rb.div(xv, rb.add(av, kf)));
        Value sum = rb.add(v[5], term);
        Value conv_s = rb.compare(rb.abs(term), rb.mul(rb.abs(sum), k(kEps)),
                                  Cmp::kLT);
        // Continued fraction: an = -k (k - a), b += 2.
        Value an = rb.neg(rb.mul(kf, rb.sub(kf, av)));
        Value bk = rb.add(v[10], k(2));
        auto floor_tiny = [&](Value z) {
          return rb.select(rb.compare(rb.abs(z), k(kTiny), Cmp::kLT), k(kTiny), z);
        };
        Value dl = rb.div(k(1), floor_tiny(rb.add(rb.mul(an, v[8]), bk)));
        Value cl = floor_tiny(rb.add(bk, rb.div(an, v[7])));
        Value delta = rb.mul(dl, cl);
        Value h = rb.mul(v[9], delta);
        Value conv_f = rb.compare(rb.abs(rb.sub(delta, k(1))), k(kEps), Cmp::kLT);
        Value done = v[4];
        auto keep = [&](Value old, Value now) { return rb.select(done, old, now); };
        Value conv = rb.select(v[3], conv_s, conv_f);
        return std::vector<Value>{rb.add(v[0], rb.constant(DType::kS64, 1)), av, xv, v[3],
                                  rb.logical_or(done, conv), keep(v[5], sum), keep(v[6], term), keep(v[7], cl),
                                  keep(v[8], dl), keep(v[9], h), keep(v[10], bk)};
      });
  Value lg = chlo_unary(b, "chlo.lgamma", a);
  Value pre = b.exp(b.sub(b.sub(b.mul(a, b.log(x)), x), lg));
  Value p_series = b.mul(pre, out[5]);
  Value q_frac = b.mul(pre, out[9]);
  Value r = upper ? b.select(series, b.sub(c(1), p_series), q_frac) : b.select(series, p_series, b.sub(c(1), q_frac));
  r = b.select(large, temme(b, a, x, upper), r);
  r = b.select(is_nan, nan, r);
  for (auto it = cases.rbegin(); it != cases.rend(); ++it) r = b.select(it->first, it->second, r);
  return b.convert(r, t);
}

}  // namespace torchtpu::ops
