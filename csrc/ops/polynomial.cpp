// Orthogonal polynomials (torch.special.*_polynomial_*), following PyTorch's
// CPU kernels (ATen/native/Math.h) case by case: the same special values,
// the same closed forms past the same degrees, and the same three-term
// recurrences, run as one stablehlo.while whose trip count is the largest
// degree that still needs the recurrence (elements whose value became NaN
// stop, as the CPU's loops do).
#include <limits>

#include "ops/special.h"

namespace torchtpu::ops {

namespace {

struct Poly {
  Builder& b;
  Value x;      // float
  Value n;      // s64 degree (the CPU's truncating cast)
  Value nf;     // n in x's dtype
  DType t;
  Dims d;

  Value c(double v) { return b.constant(t, v, d); }
  Value ci(int64_t v) { return b.constant(DType::kS64, static_cast<double>(v), d); }
  Value cmp_n(Cmp cc, int64_t v) { return b.compare(n, ci(v), cc); }
  Value even() { return b.compare(b.rem(n, ci(2)), ci(0), Cmp::kEQ); }
  Value acos(Value v) { return chlo_unary(b, "chlo.acos", v); }
  Value sin(Value v) { return b.sin(v); }
  Value cos(Value v) { return b.cos(v); }
  Value abs(Value v) { return b.abs(v); }
  Value eq(Value a, double v) { return b.compare(a, c(v), Cmp::kEQ); }
  Value two_n_plus_1() { return b.add(b.add(nf, nf), c(1)); }
};

// (predicate, value) pairs, the first true one winning.
using Cases = std::vector<std::pair<Value, Value>>;

// The value of the first true case, else `rest`.
Value first_of(Builder& b, const Cases& cases, Value rest) {
  Value r = rest;
  for (auto it = cases.rbegin(); it != cases.rend(); ++it) r = b.select(it->first, it->second, r);
  return r;
}

// Runs q_{k} = step(k, p, q) for k = k0 .. last (per element; `last` s64,
// elements with last < k0 keep q0). Returns the final q.
using Step = std::function<Value(Builder&, Value k, Value x, Value p, Value q)>;
Value recurrence(Poly& P, Value q0, int64_t k0, Value last, const Step& step) {
  Builder& b = P.b;
  const Dims d = P.d;
  const DType t = P.t;
  Value k_init = b.constant(DType::kS64, static_cast<double>(k0));
  std::vector<Value> out = b.while_loop(
      {k_init, last, P.x, P.c(1), q0},
      [&](Builder& rb, const std::vector<Value>& a) {
        Value kb = rb.broadcast_to(a[0], d);
        Value live = rb.logical_and(rb.compare(kb, a[1], Cmp::kLE), rb.compare(a[4], a[4], Cmp::kEQ));
        std::vector<int64_t> all(d.size());
        for (size_t i = 0; i < d.size(); ++i) all[i] = static_cast<int64_t>(i);
        return rb.reduce(live, all, Body::kOr, 0);
      },
      [&](Builder& rb, const std::vector<Value>& a) {
        Value kb = rb.broadcast_to(a[0], d);
        Value kt = rb.broadcast_to(rb.convert(a[0], t), d);
        Value r = step(rb, kt, a[2], a[3], a[4]);
        Value on = rb.compare(kb, a[1], Cmp::kLE);
        Value k1 = rb.add(a[0], rb.constant(DType::kS64, 1));
        return std::vector<Value>{k1, a[1], a[2], rb.select(on, a[4], a[3]), rb.select(on, r, a[4])};
      });
  return out[4];
}

}  // namespace

Value orthogonal_polynomial(Builder& b, Polynomial kind, Value x, Value nv) {
  const DType t = b.dtype(x);
  const Dims d = broadcast_shapes(b.dims(x), b.dims(nv));
  x = b.broadcast_to(x, d);
  Value n = b.float_to_int(b.broadcast_to(nv, d), DType::kS64);
  Poly P{b, x, n, b.convert(n, t), t, d};
  Value one = P.c(1), zero = P.c(0);
  Value neg = P.cmp_n(Cmp::kLT, 0), n0 = P.cmp_n(Cmp::kEQ, 0), n1 = P.cmp_n(Cmp::kEQ, 1);
  Value sign1 = b.select(P.even(), one, P.c(-1));
  Value np1 = b.add(P.nf, one), tnp1 = P.two_n_plus_1();
  Value signed_np1 = b.select(P.even(), np1, b.neg(np1));
  Value signed_tnp1 = b.select(P.even(), tnp1, b.neg(tnp1));
  const bool shifted = kind == Polynomial::kShiftedT || kind == Polynomial::kShiftedU ||
                       kind == Polynomial::kShiftedV || kind == Polynomial::kShiftedW;
  // The Chebyshev families: y = x (or 2x - 1 shifted), r = (y + y) q - p for
  // k = 2 .. n, from q = q1(y).
  auto y_of = [shifted](Builder& rb, Value xv) {
    return shifted ? rb.sub(rb.add(xv, xv), rb.constant(rb.dtype(xv), 1, rb.dims(xv))) : xv;
  };
  Value y = y_of(b, x);
  auto cheb = [&](Value q1, Value special) {
    Value last = b.select(special, P.ci(0), n);
    return recurrence(P, q1, 2, last, [y_of](Builder& rb, Value, Value xv, Value p, Value q) {
      Value yv = y_of(rb, xv);
      return rb.sub(rb.mul(rb.add(yv, yv), q), p);
    });
  };
  // The CPU's closed forms, taken for |y| < 1 past a degree.
  Value th = P.acos(y);
  Value inside = b.compare(P.abs(y), one, Cmp::kLT);
  auto past = [&](int64_t deg) { return b.logical_and(P.cmp_n(Cmp::kGT, deg), inside); };
  // The special values at the interval's ends: |x| == 1, or x == 1 / x == 0 shifted.
  Value at_hi = shifted ? P.eq(x, 1) : b.logical_and(P.eq(P.abs(x), 1), b.compare(x, zero, Cmp::kGT));
  Value at_lo = shifted ? P.eq(x, 0) : b.logical_and(P.eq(P.abs(x), 1), b.logical_not(b.compare(x, zero, Cmp::kGT)));
  Value half = P.c(0.5), two = P.c(2);
  // Every family: the CPU's special cases in order, else the recurrence,
  // which skips the elements any case takes.
  auto cases_else = [&](const Cases& cases, const std::function<Value(Value special)>& rec) {
    Value special = cases.front().first;
    for (size_t i = 1; i < cases.size(); ++i) special = b.logical_or(special, cases[i].first);
    return first_of(b, cases, rec(special));
  };
  // The other families' recurrences run k = 1 .. n - 1.
  auto from1 = [&](Value q1, const Step& step) {
    return [&P, &b, q1, step, n](Value special) {
      return recurrence(P, q1, 1, b.select(special, P.ci(0), b.sub(n, P.ci(1))), step);
    };
  };
  switch (kind) {
    case Polynomial::kChebyshevT:
    case Polynomial::kShiftedT:
      return cases_else({{neg, zero}, {at_hi, one}, {at_lo, sign1}, {past(6), P.cos(b.mul(P.nf, th))}, {n0, one},
                         {n1, y}},
                        [&](Value sp) { return cheb(y, sp); });
    case Polynomial::kChebyshevU:
    case Polynomial::kShiftedU: {
      Value s = P.sin(th);
      Value closed_v = b.select(b.compare(s, zero, Cmp::kNE), b.div(P.sin(b.mul(np1, th)), s),
                                b.div(b.mul(np1, P.cos(b.mul(np1, th))), y));
      Value q1 = b.add(y, y);
      return cases_else({{neg, zero}, {at_hi, np1}, {at_lo, signed_np1}, {past(shifted ? 6 : 8), closed_v},
                         {n0, one}, {n1, q1}},
                        [&](Value sp) { return cheb(q1, sp); });
    }
    case Polynomial::kChebyshevV:
    case Polynomial::kShiftedV: {
      Value h = b.div(th, two);
      Value closed_v = b.select(b.compare(P.sin(h), one, Cmp::kNE), b.div(P.cos(b.mul(b.add(P.nf, half), th)), P.cos(h)),
                                signed_tnp1);
      Value q1 = b.sub(b.add(y, y), one);
      return cases_else({{neg, zero}, {at_hi, one}, {at_lo, signed_tnp1}, {past(shifted ? 6 : 8), closed_v},
                         {n0, one}, {n1, q1}},
                        [&](Value sp) { return cheb(q1, sp); });
    }
    case Polynomial::kChebyshevW:
    case Polynomial::kShiftedW: {
      Value h = b.div(th, two);
      // At cos(theta / 2) == 1 the CPU returns its end value (2n + 1 for x > 0 unshifted only).
      Value end = shifted ? sign1 : b.select(b.compare(x, zero, Cmp::kGT), tnp1, sign1);
      Value closed_v = b.select(b.compare(P.cos(h), one, Cmp::kNE), b.div(P.sin(b.mul(b.add(P.nf, half), th)), P.sin(h)),
                                end);
      Value q1 = b.add(b.add(y, y), one);
      return cases_else({{neg, zero}, {at_hi, tnp1}, {at_lo, sign1}, {past(shifted ? 4 : 8), closed_v}, {n0, one},
                         {n1, q1}},
                        [&](Value sp) { return cheb(q1, sp); });
    }
    case Polynomial::kHermiteH:
    case Polynomial::kHermiteHe: {
      const bool h = kind == Polynomial::kHermiteH;
      // The CPU returns NaN past these degrees (its getHermitianLimit).
      const int64_t limit = t == DType::kF64 ? 512 : t == DType::kF32 ? 128 : 1024;
      Value q1 = h ? b.add(x, x) : x;
      Value nan = P.c(std::numeric_limits<double>::quiet_NaN());
      return cases_else({{neg, zero}, {n0, one}, {n1, q1}, {P.cmp_n(Cmp::kGT, limit), nan}},
                        from1(q1, [h](Builder& rb, Value k, Value xv, Value p, Value q) {
                          // H: r = 2x q - 2k p (the CPU's k runs 2, 4, ..); He: r = x q - k p.
                          return h ? rb.sub(rb.mul(rb.add(xv, xv), q), rb.mul(rb.add(k, k), p))
                                   : rb.sub(rb.mul(xv, q), rb.mul(k, p));
                        }));
    }
    case Polynomial::kLaguerreL: {
      Value q1 = b.sub(one, x);
      return cases_else({{neg, zero}, {P.eq(P.abs(x), 0), one}, {n0, one}, {n1, q1}},
                        from1(q1, [](Builder& rb, Value k, Value xv, Value p, Value q) {
                          Value c1 = rb.constant(rb.dtype(xv), 1, rb.dims(xv));
                          Value a = rb.mul(rb.add(rb.add(k, k), rb.sub(c1, xv)), q);
                          return rb.div(rb.sub(a, rb.mul(k, p)), rb.add(k, c1));
                        }));
    }
    case Polynomial::kLegendreP:
      return cases_else({{neg, zero}, {at_hi, one}, {at_lo, sign1}, {n0, one}, {n1, x}},
                        from1(x, [](Builder& rb, Value k, Value xv, Value p, Value q) {
                          Value c1 = rb.constant(rb.dtype(xv), 1, rb.dims(xv));
                          Value a = rb.mul(rb.mul(rb.add(rb.add(k, k), c1), xv), q);
                          return rb.div(rb.sub(a, rb.mul(k, p)), rb.add(k, c1));
                        }));
  }
  throw LoweringError("orthogonal_polynomial: unknown polynomial");
}

}  // namespace torchtpu::ops
