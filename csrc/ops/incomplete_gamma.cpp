// The regularized incomplete gamma functions P(a, x) (igamma) and
// Q(a, x) = 1 - P (igammac). Computed in float64 whatever the input dtype:
// below x = a + 1 the power series of P, above it the continued fraction of
// Q (modified Lentz), each in one device loop that runs until every element
// has converged to float64 precision, times exp(a log x - x - lgamma(a)).
// The boundary values are SciPy's and PyTorch's.
#include "ops/special.h"

#include <cmath>

namespace torchtpu::ops {

namespace {

constexpr DType kD = DType::kF64;
constexpr double kEps = 1e-16;
constexpr double kTiny = 1e-300;
// More terms than any float64 argument below ~1e8 needs.
constexpr int64_t kMaxTerms = 100000;

Value all_dims_or(Builder& b, Value v) {
  std::vector<int64_t> all;
  for (int64_t i = 0; i < b.rank(v); ++i) all.push_back(i);
  return all.empty() ? v : b.reduce(v, all, ir::Body::kOr, 0);
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
  Value series = b.compare(x, b.add_c(a, 1), Cmp::kLT);

  // Carried: k, a, x, series?, done, sum, term, lentz c, lentz d, h, b_k.
  Value b0 = b.sub(b.add_c(x, 1), a);
  Value d0 = b.div(c(1), b0);
  Value inv_a = b.div(c(1), a);
  std::vector<Value> out = b.while_loop(
      {b.constant(DType::kS64, 1), a, x, series, b.logical_or(special, is_nan), inv_a, inv_a, c(1 / kTiny), d0, d0, b0},
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
  r = b.select(is_nan, nan, r);
  for (auto it = cases.rbegin(); it != cases.rend(); ++it) r = b.select(it->first, it->second, r);
  return b.convert(r, t);
}

}  // namespace torchtpu::ops
