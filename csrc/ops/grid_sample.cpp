#include "ops/grid_sample.h"

#include <cmath>

namespace torchtpu::ops {

namespace {

constexpr DType kF = DType::kF32;

// The shapes of one sampling: x [N, C, *S], grid [N, *O, k].
struct Layout {
  int64_t n = 0, c = 0, p = 1, q = 1, k = 0;
  Dims spatial, out;  // S and O
  // Size of the input along grid coordinate `a` (x: the last spatial dim).
  int64_t size(int64_t a) const { return spatial[k - 1 - a]; }
};

Layout layout_of(Builder& b, Value x, Value grid) {
  Layout l;
  const Dims xd = b.dims(x), gd = b.dims(grid);
  l.n = xd[0];
  l.c = xd[1];
  l.spatial.assign(xd.begin() + 2, xd.end());
  l.out.assign(gd.begin() + 1, gd.end() - 1);
  l.k = static_cast<int64_t>(l.spatial.size());
  for (int64_t s : l.spatial) l.p *= s;
  for (int64_t s : l.out) l.q *= s;
  return l;
}

Value cf(Builder& b, double v) { return b.constant(kF, v); }

// One grid coordinate `a` as a pixel position, and d(position)/d(coordinate).
// 2-D follows the CPU's vectorized kernel ((c + 1) * s - 0.5), 3-D its
// scalar one (((c + 1) * size - 1) / 2).
Value unnormalize(Builder& b, Value c, int64_t size, bool align, bool vectorized, double* mult) {
  if (align) {
    *mult = (size - 1) / 2.0;
    if (vectorized) return b.mul(b.add_c(c, 1), cf(b, *mult));
    return b.mul(b.div(b.add_c(c, 1), cf(b, 2)), cf(b, static_cast<double>(size - 1)));
  }
  *mult = size / 2.0;
  if (vectorized) return b.add_c(b.mul(b.add_c(c, 1), cf(b, *mult)), -0.5);
  return b.div(b.add_c(b.mul(b.add_c(c, 1), cf(b, static_cast<double>(size))), -1), cf(b, 2));
}

// clip_coordinates(_set_grad): min(size - 1, max(c, 0)); gradient 1 strictly
// inside. NaN becomes 0 in the CPU's vectorized (2-D) kernel and size - 1 in
// its scalar (3-D) one (std::max keeps the NaN, std::min then drops it).
Value clip(Builder& b, Value c, int64_t size, bool vectorized, Value* grad) {
  const Value hi = cf(b, static_cast<double>(size - 1)), zero = cf(b, 0);
  if (grad)
    *grad = b.convert(b.logical_and(b.compare(c, zero, Cmp::kGT), b.compare(c, hi, Cmp::kLT)), kF);
  if (vectorized) return b.min(b.select(b.compare(c, zero, Cmp::kGT), c, zero), hi);
  return b.select(b.compare(c, hi, Cmp::kLT), b.select(b.compare(c, zero, Cmp::kLT), zero, c), hi);
}

// reflect_coordinates(_set_grad) over [twice_low / 2, twice_high / 2].
Value reflect(Builder& b, Value c, int64_t twice_low, int64_t twice_high, Value* grad) {
  if (twice_low == twice_high) {
    if (grad) *grad = b.full_like(c, 0);
    return b.full_like(c, 0);
  }
  const double lo = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
  Value shifted = b.add_c(c, -lo);
  Value neg = b.compare(shifted, cf(b, 0), Cmp::kLT);
  Value in = b.abs(shifted);
  Value extra = b.rem(in, cf(b, span));
  Value flips = b.floor(b.div(in, cf(b, span)));
  Value even = b.compare(b.rem(flips, cf(b, 2)), cf(b, 0), Cmp::kEQ);
  if (grad) {
    Value sign = b.select(neg, cf(b, -1), cf(b, 1));
    *grad = b.select(even, sign, b.neg(sign));
  }
  return b.select(even, b.add_c(extra, lo), b.add_c(b.sub(cf(b, span), extra), lo));
}

// compute_coordinates(_set_grad): the padding mode on a pixel position.
Value pad_coordinate(Builder& b, Value c, int64_t size, const GridSpec& s, bool vectorized, Value* grad) {
  if (s.padding == GridPadding::kZeros) {
    if (grad) *grad = b.full_like(c, 1);
    return c;
  }
  Value g_reflect;
  if (s.padding == GridPadding::kReflection)
    c = s.align_corners ? reflect(b, c, 0, 2 * (size - 1), grad ? &g_reflect : nullptr)
                        : reflect(b, c, -1, 2 * size - 1, grad ? &g_reflect : nullptr);
  Value g_clip;
  c = clip(b, c, size, vectorized, grad ? &g_clip : nullptr);
  if (grad) *grad = s.padding == GridPadding::kReflection ? b.mul(g_reflect, g_clip) : g_clip;
  return c;
}

// One tap: per coordinate the (float, integral-valued) pixel position, the
// tap's weight, and whether it lies inside the input.
struct Tap {
  std::vector<Value> pos;  // [N, Q] each, by coordinate
  Value weight;            // [N, Q]
  Value valid;             // [N, Q] bool
};

Value inside(Builder& b, Value pos, int64_t size) {
  return b.logical_and(b.compare(pos, cf(b, 0), Cmp::kGE), b.compare(pos, cf(b, static_cast<double>(size - 1)), Cmp::kLE));
}

// The flat index [N, Q, 2] (batch, spatial position) of a tap; invalid taps
// point at position 0.
Value tap_index(Builder& b, const Layout& l, const Tap& t) {
  Value flat = b.constant(DType::kS64, 0, {l.n, l.q});
  int64_t stride = 1;
  for (int64_t a = 0; a < l.k; ++a) {
    Value i = b.convert(b.select(t.valid, t.pos[a], cf(b, 0)), DType::kS64);
    flat = b.add(flat, b.mul(i, b.constant(DType::kS64, static_cast<double>(stride))));
    stride *= l.size(a);
  }
  Value batch = b.iota(DType::kS64, {l.n, l.q, 1}, 0);
  return b.concatenate({batch, b.reshape(flat, {l.n, l.q, 1})}, 2);
}

// Rows [N, Q, C] of `xt` [N, P, C] at a tap, zero where it lies outside.
Value gather_tap(Builder& b, const Layout& l, Value xt, const Tap& t) {
  Value v = b.gather(xt, tap_index(b, l, t), {0, 1}, {2}, {l.n, l.q, l.c});
  return b.select(b.broadcast_in_dim(t.valid, {l.n, l.q, l.c}, {0, 1}), v, b.constant(kF, 0, {l.n, l.q, l.c}));
}

// PyTorch's cubic convolution coefficients (A = -0.75) of the 4 taps at
// offsets -1..2 for fraction t, and their derivatives as the CPU's backward
// uses them (it subtracts these).
std::vector<Value> cubic_coeffs(Builder& b, Value t) {
  const double A = -0.75;
  auto c1 = [&](Value x) {  // ((A + 2) x - (A + 3)) x x + 1
    return b.add_c(b.mul(b.mul(b.add_c(b.mul_c(x, A + 2), -(A + 3)), x), x), 1);
  };
  auto c2 = [&](Value x) {  // ((A x - 5A) x + 8A) x - 4A
    return b.add_c(b.mul(b.add_c(b.mul(b.add_c(b.mul_c(x, A), -5 * A), x), 8 * A), x), -4 * A);
  };
  Value x2 = b.sub(cf(b, 1), t);
  return {c2(b.add_c(t, 1)), c1(t), c1(x2), c2(b.add_c(x2, 1))};
}

std::vector<Value> cubic_coeffs_grad(Builder& b, Value t) {
  const double A = -0.75;
  Value x0 = b.sub(cf(b, -1), t), x1 = b.neg(t), x2 = b.sub(cf(b, 1), t), x3 = b.sub(cf(b, 2), t);
  return {b.add_c(b.mul(b.add_c(b.mul_c(x0, -3 * A), -10 * A), x0), -8 * A),
          b.mul(b.add_c(b.mul_c(x1, -3 * (A + 2)), -2 * (A + 3)), x1),
          b.mul(b.add_c(b.mul_c(x2, 3 * (A + 2)), -2 * (A + 3)), x2),
          b.add_c(b.mul(b.add_c(b.mul_c(x3, 3 * A), -10 * A), x3), 8 * A)};
}

// All taps of one sampling, with what the grid gradient needs: per tap and
// coordinate the derivative of the tap's weight (bilinear, bicubic).
struct Taps {
  std::vector<Tap> taps;
  std::vector<std::vector<Value>> dweight;  // [tap][coordinate]
  std::vector<Value> mult;                  // [coordinate]: d(position)/d(grid)
};

Taps make_taps(Builder& b, const Layout& l, Value grid, const GridSpec& s, bool want_grad) {
  Value g = b.reshape(grid, {l.n, l.q, l.k});
  const bool vectorized = l.k == 2;
  std::vector<Value> pos(l.k), mult(l.k);
  for (int64_t a = 0; a < l.k; ++a) {
    double m = 0;
    pos[a] = unnormalize(b, b.reshape(b.slice_dim(g, 2, a, a + 1), {l.n, l.q}), l.size(a), s.align_corners,
                         vectorized, &m);
    mult[a] = cf(b, m);
    if (s.interp != GridInterp::kBicubic) {
      Value pg;
      pos[a] = pad_coordinate(b, pos[a], l.size(a), s, vectorized, want_grad ? &pg : nullptr);
      if (want_grad) mult[a] = b.mul(mult[a], pg);
    }
  }
  Taps out;
  out.mult = mult;
  if (s.interp == GridInterp::kNearest) {
    Tap t;
    t.valid = b.constant(DType::kBool, 1, {l.n, l.q});
    for (int64_t a = 0; a < l.k; ++a) {
      t.pos.push_back(b.round_even(pos[a]));
      t.valid = b.logical_and(t.valid, inside(b, t.pos[a], l.size(a)));
    }
    t.weight = b.constant(kF, 1, {l.n, l.q});
    out.taps.push_back(t);
    return out;
  }
  std::vector<Value> base(l.k), frac(l.k);
  for (int64_t a = 0; a < l.k; ++a) {
    base[a] = b.floor(pos[a]);
    frac[a] = b.sub(pos[a], base[a]);
  }
  if (s.interp == GridInterp::kBilinear) {
    // Corners in the CPU's order: the last coordinate slowest (nw, ne, sw,
    // se in 2-D); weights (1 - f) for the low side and f for the high one,
    // multiplied from the last coordinate to the first.
    const int64_t corners = int64_t{1} << l.k;
    for (int64_t corner = 0; corner < corners; ++corner) {
      Tap t;
      t.valid = b.constant(DType::kBool, 1, {l.n, l.q});
      std::vector<Value> w(l.k);
      for (int64_t a = 0; a < l.k; ++a) {
        const bool high = (corner >> a) & 1;
        t.pos.push_back(high ? b.add_c(base[a], 1) : base[a]);
        t.valid = b.logical_and(t.valid, inside(b, t.pos[a], l.size(a)));
        w[a] = high ? frac[a] : b.sub(cf(b, 1), frac[a]);
      }
      for (int64_t a = l.k; a-- > 0;) t.weight = t.weight.valid() ? b.mul(t.weight, w[a]) : w[a];
      if (want_grad) {
        std::vector<Value> dw(l.k);
        for (int64_t a = 0; a < l.k; ++a) {
          Value rest;
          for (int64_t o = l.k; o-- > 0;)
            if (o != a) rest = rest.valid() ? b.mul(rest, w[o]) : w[o];
          const bool high = (corner >> a) & 1;
          Value one = cf(b, high ? 1 : -1);
          dw[a] = rest.valid() ? b.mul(rest, one) : b.full_like(frac[a], high ? 1 : -1);
        }
        out.dweight.push_back(dw);
      }
      out.taps.push_back(t);
    }
    return out;
  }
  // Bicubic (2-D): 4 x 4 taps at base - 1 .. base + 2, each padded as an
  // integer position; rows (y) outer, columns (x) inner.
  std::vector<Value> cx = cubic_coeffs(b, frac[0]), cy = cubic_coeffs(b, frac[1]);
  std::vector<Value> gx, gy;
  if (want_grad) gx = cubic_coeffs_grad(b, frac[0]), gy = cubic_coeffs_grad(b, frac[1]);
  for (int j = 0; j < 4; ++j) {
    for (int i = 0; i < 4; ++i) {
      Tap t;
      Value px = pad_coordinate(b, b.add_c(base[0], i - 1), l.size(0), s, true, nullptr);
      Value py = pad_coordinate(b, b.add_c(base[1], j - 1), l.size(1), s, true, nullptr);
      t.pos = {px, py};
      t.valid = b.logical_and(inside(b, px, l.size(0)), inside(b, py, l.size(1)));
      t.weight = b.mul(cx[i], cy[j]);
      if (want_grad) out.dweight.push_back({b.neg(b.mul(gx[i], cy[j])), b.neg(b.mul(cx[i], gy[j]))});
      out.taps.push_back(t);
    }
  }
  return out;
}

}  // namespace

Value grid_sample(Builder& b, Value x, Value grid, const GridSpec& s) {
  const Layout l = layout_of(b, x, grid);
  Value xt = b.transpose(b.reshape(x, {l.n, l.c, l.p}), {0, 2, 1});
  Taps taps = make_taps(b, l, grid, s, /*want_grad=*/false);
  Value acc;
  // 2-D multiplies every weight (a NaN coordinate gives NaN), 3-D adds only
  // the taps inside (a NaN coordinate gives 0), as the CPU's kernels.
  const Dims rows{l.n, l.q, l.c};
  for (const Tap& t : taps.taps) {
    Value term = b.mul(gather_tap(b, l, xt, t), b.broadcast_in_dim(t.weight, rows, {0, 1}));
    if (l.k != 2) term = b.select(b.broadcast_in_dim(t.valid, rows, {0, 1}), term, b.constant(kF, 0, rows));
    acc = acc.valid() ? b.add(acc, term) : term;
  }
  Dims shape{l.n, l.c};
  shape.insert(shape.end(), l.out.begin(), l.out.end());
  return b.reshape(b.transpose(acc, {0, 2, 1}), shape);
}

std::pair<Value, Value> grid_sample_backward(Builder& b, Value grad, Value x, Value grid, const GridSpec& s,
                                             bool want_input, bool want_grid) {
  const Layout l = layout_of(b, x, grid);
  Value gt = b.transpose(b.reshape(grad, {l.n, l.c, l.q}), {0, 2, 1});  // [N, Q, C]
  const bool grid_grad = want_grid && s.interp != GridInterp::kNearest;
  Taps taps = make_taps(b, l, grid, s, grid_grad);
  std::pair<Value, Value> out;
  if (want_input) {
    std::vector<Value> idx, upd;
    for (const Tap& t : taps.taps) {
      idx.push_back(tap_index(b, l, t));
      Value w = b.select(t.valid, t.weight, b.constant(kF, 0, {l.n, l.q}));
      upd.push_back(b.mul(gt, b.broadcast_in_dim(w, {l.n, l.q, l.c}, {0, 1})));
    }
    Value gi = b.scatter(b.constant(kF, 0, {l.n, l.p, l.c}), b.concatenate(idx, 1), b.concatenate(upd, 1), {0, 1},
                         {2}, ir::Body::kAdd);
    Dims shape{l.n, l.c};
    shape.insert(shape.end(), l.spatial.begin(), l.spatial.end());
    out.first = b.reshape(b.transpose(gi, {0, 2, 1}), shape);
  }
  if (want_grid) {
    Dims gshape{l.n};
    gshape.insert(gshape.end(), l.out.begin(), l.out.end());
    gshape.push_back(l.k);
    if (!grid_grad) {
      out.second = b.constant(kF, 0, gshape);
      return out;
    }
    Value xt = b.transpose(b.reshape(x, {l.n, l.c, l.p}), {0, 2, 1});
    std::vector<Value> gc(l.k);
    for (size_t i = 0; i < taps.taps.size(); ++i) {
      // sum over channels of grad * value at the tap
      Value dv = b.reduce_sum(b.mul(gather_tap(b, l, xt, taps.taps[i]), gt), {2});
      for (int64_t a = 0; a < l.k; ++a) {
        Value term = b.mul(dv, taps.dweight[i][a]);
        gc[a] = gc[a].valid() ? b.add(gc[a], term) : term;
      }
    }
    std::vector<Value> parts;
    for (int64_t a = 0; a < l.k; ++a) parts.push_back(b.reshape(b.mul(gc[a], taps.mult[a]), {l.n, l.q, 1}));
    out.second = b.reshape(b.concatenate(parts, 2), gshape);
  }
  return out;
}

}  // namespace torchtpu::ops
