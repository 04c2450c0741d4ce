#include "ops/resample.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace torchtpu::ops {

namespace {

// compute_scales_value<float>: 1/scale when given, else in/out.
float scales_value(const ResampleAxis& a) {
  return (a.scale && *a.scale > 0.) ? static_cast<float>(1.0 / *a.scale)
                                    : static_cast<float>(a.in) / static_cast<float>(a.out);
}

// area_pixel_compute_scale<float>.
float area_scale(const ResampleAxis& a, bool align_corners) {
  if (align_corners) return a.out > 1 ? static_cast<float>(a.in - 1) / static_cast<float>(a.out - 1) : 0.f;
  return scales_value(a);
}

// s = m / 2^k exactly (a float has 24 significant bits).
bool dyadic(float s, int64_t& m, int64_t& k) {
  if (!(s > 0) || !std::isfinite(s)) return false;
  int e = 0;
  const float f = std::frexp(s, &e);
  m = static_cast<int64_t>(std::ldexp(f, 24));
  k = 24 - e;
  while (k > 0 && m % 2 == 0) m /= 2, --k;
  if (k < 0) {
    if (k < -30) return false;
    m <<= -k;
    k = 0;
  }
  return k <= 60;
}

Value index_for(Builder& b, const ResampleAxis& a, NearestRule rule) {
  const std::vector<int64_t> t = nearest_indices(a, rule);
  const int64_t hi = a.in - 1;
  if (rule == NearestRule::kFloorIdx && a.out == a.in) return index_vector(b, t, 1, 0, 1, hi);
  if (rule == NearestRule::kFloorIdx && a.out == 2 * a.in) return index_vector(b, t, 1, 0, 2, hi);
  int64_t m = 0, k = 0;
  if (!dyadic(scales_value(a), m, k)) return index_vector(b, t, 0, 0, 1, hi);
  const bool half = rule == NearestRule::kExact || rule == NearestRule::kExactFma;
  // floor(o * s) = (o * m) / 2^k; floor((o + 0.5) * s) = (2o + 1) * m / 2^(k+1).
  if (half) return index_vector(b, t, 2 * m, m, int64_t{1} << (k + 1), hi);
  return index_vector(b, t, m, 0, int64_t{1} << k, hi);
}

Value row(Builder& b, Value v, const Dims& dims, int64_t dim) { return b.broadcast_in_dim(v, dims, {dim}); }

// The source positions and weights of one dim, each [out].
struct Taps {
  std::vector<Value> idx, w;
};

// ((A + 2) x - (A + 3)) x x + 1 and ((A x - 5A) x + 8A) x - 4A, A = -0.75.
Value cubic1(Builder& b, Value x) { return b.add_c(b.mul(b.mul(b.add_c(b.mul_c(x, 1.25), -2.25), x), x), 1); }
Value cubic2(Builder& b, Value x) {
  return b.add_c(b.mul(b.add_c(b.mul(b.add_c(b.mul_c(x, -0.75), 3.75), x), -6), x), 3);
}

Taps interp_taps(Builder& b, const ResampleAxis& a, bool align_corners, bool cubic, DType weights_as) {
  const Dims n{a.out};
  Value o = b.iota(DType::kS64, n, 0);
  Taps t;
  auto rounded = [&](Value w) {
    return weights_as == DType::kF32 ? w : b.convert(b.convert(w, weights_as), DType::kF32);
  };
  if (!cubic && a.in == a.out) {
    t.idx = {o, o};
    t.w = {b.constant(DType::kF32, 1, n), b.constant(DType::kF32, 0, n)};
    return t;
  }
  // area_pixel_compute_source_index, then guard_index_and_lambda.
  Value of = b.convert(o, DType::kF32);
  Value s = b.constant(DType::kF32, area_scale(a, align_corners));
  Value real = align_corners ? b.mul(of, s) : b.add_c(b.mul(b.add_c(of, 0.5), s), -0.5);
  if (!cubic) real = b.max(real, b.constant(DType::kF32, 0));
  Value hi = b.constant(DType::kS64, static_cast<double>(a.in - 1));
  Value i0 = b.min(b.convert(b.floor(real), DType::kS64), hi);
  Value lam = b.min(b.max(b.sub(real, b.convert(i0, DType::kF32)), b.constant(DType::kF32, 0)),
                    b.constant(DType::kF32, 1));
  if (!cubic) {
    Value step = b.convert(b.compare(i0, hi, Cmp::kLT), DType::kS64);
    Value w1 = rounded(lam);
    t.idx = {i0, b.add(i0, step)};
    t.w = {rounded(b.sub(b.constant(DType::kF32, 1), w1)), w1};
    return t;
  }
  Value x2 = b.sub(b.constant(DType::kF32, 1), lam);
  t.w = {rounded(cubic2(b, b.add_c(lam, 1))), rounded(cubic1(b, lam)), rounded(cubic1(b, x2)),
         rounded(cubic2(b, b.add_c(x2, 1)))};
  Value zero = b.constant(DType::kS64, 0);
  for (int j = 0; j < 4; ++j) t.idx.push_back(b.max(b.min(b.add_c(i0, j - 1), hi), zero));
  return t;
}

// PIL's filters (Resample.c) as PyTorch's aa_filter computes them.
float triangle_filter(float x) {
  if (x < 0) x = -x;
  return x < 1 ? static_cast<float>(1.0 - x) : 0.f;
}

float cubic_filter(float x) {
  const float a = -0.5f;
  x = std::abs(x);
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.f;
}

}  // namespace

AntialiasTaps antialias_taps(const ResampleAxis& a, bool align_corners, bool cubic) {
  const int interp = cubic ? 4 : 2;
  const float scale = area_scale(a, align_corners);
  const float support = scale >= 1.0 ? static_cast<float>((interp * 0.5) * scale) : static_cast<float>(interp * 0.5);
  AntialiasTaps t;
  t.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.index.assign(static_cast<size_t>(t.taps * a.out), -1);
  t.weight.assign(static_cast<size_t>(t.taps * a.out), 0.f);
  const float invscale = scale >= 1.0 ? static_cast<float>(1.0 / scale) : 1.f;
  std::vector<float> w(static_cast<size_t>(t.taps));
  for (int64_t i = 0; i < a.out; ++i) {
    const float center = static_cast<float>(scale * (i + 0.5));
    const int64_t xmin = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
    const int64_t xsize =
        std::clamp(std::min(static_cast<int64_t>(center + support + 0.5), a.in) - xmin, int64_t{0}, t.taps);
    float total = 0;
    for (int64_t j = 0; j < xsize; ++j) {
      const float x = static_cast<float>((static_cast<float>(j + xmin) - center + 0.5) * invscale);
      w[j] = cubic ? cubic_filter(x) : triangle_filter(x);
      total += w[j];
    }
    for (int64_t j = 0; j < xsize; ++j) {
      t.index[static_cast<size_t>(j * a.out + i)] = xmin + j;
      t.weight[static_cast<size_t>(j * a.out + i)] = total != 0 ? w[j] / total : w[j];
    }
  }
  return t;
}

Value antialias_apply(Builder& b, Value x, int64_t dim, Value index, Value weight) {
  const int64_t taps = b.dims(index)[0], out = b.dims(index)[1];
  Value acc;
  for (int64_t j = 0; j < taps; ++j) {
    Value idx = b.reshape(b.slice_dim(index, 0, j, j + 1), {out});
    Value w = b.reshape(b.slice_dim(weight, 0, j, j + 1), {out});
    Value v = take_along(b, x, dim, b.max(idx, b.constant(DType::kS64, 0)));
    const Dims d = b.dims(v);
    Value term = b.select(row(b, b.compare(idx, b.constant(DType::kS64, 0), Cmp::kGE), d, dim),
                          b.mul(v, row(b, w, d, dim)), b.constant(DType::kF32, 0, d));
    acc = acc.valid() ? b.add(acc, term) : term;
  }
  return acc;
}

Value antialias_apply_backward(Builder& b, Value grad, int64_t dim, Value index, Value weight, int64_t in_size) {
  const int64_t taps = b.dims(index)[0], out = b.dims(index)[1];
  const Dims d = b.dims(grad);
  std::vector<Value> parts, idx;
  for (int64_t j = 0; j < taps; ++j) {
    Value ij = b.reshape(b.slice_dim(index, 0, j, j + 1), {out});
    Value w = b.reshape(b.slice_dim(weight, 0, j, j + 1), {out});
    // A tap past the window adds 0 at position 0.
    Value in = row(b, b.compare(ij, b.constant(DType::kS64, 0), Cmp::kGE), d, dim);
    parts.push_back(b.select(in, b.mul(grad, row(b, w, d, dim)), b.constant(DType::kF32, 0, d)));
    idx.push_back(b.max(ij, b.constant(DType::kS64, 0)));
  }
  return put_add_along(b, b.concatenate(parts, dim), dim, b.concatenate(idx, 0), in_size);
}

std::vector<int64_t> nearest_indices(const ResampleAxis& a, NearestRule rule) {
  std::vector<int64_t> t(static_cast<size_t>(a.out));
  const float s = scales_value(a);
  for (int64_t o = 0; o < a.out; ++o) {
    int64_t i = 0;
    switch (rule) {
      case NearestRule::kFloorIdx:
        if (a.out == a.in) {
          i = o;
          break;
        }
        if (a.out == 2 * a.in) {
          i = o >> 1;
          break;
        }
        [[fallthrough]];
      case NearestRule::kFloor:
        i = static_cast<int64_t>(std::floor(static_cast<float>(o) * s));
        break;
      case NearestRule::kExact:
        i = static_cast<int64_t>(std::floor(static_cast<float>((static_cast<double>(o) + 0.5) * s)));
        break;
      case NearestRule::kExactFma: {
        float r = std::fma(s, static_cast<float>(o) + 0.5f, -0.5f);
        if (r < 0) r = 0;
        i = static_cast<int64_t>(std::floor(static_cast<float>(static_cast<double>(r) + 0.5)));
        break;
      }
    }
    t[static_cast<size_t>(o)] = std::min(i, a.in - 1);
  }
  return t;
}

Value index_vector(Builder& b, const std::vector<int64_t>& table, int64_t mul, int64_t add, int64_t div,
                   int64_t hi) {
  const int64_t n = static_cast<int64_t>(table.size());
  const Dims d{n};
  constexpr int64_t kMaxPatches = 8;
  // Runs [begin, end) where the table is base + delta, delta != 0.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> patches;
  bool formula = mul > 0 && div > 0 && add >= 0 && (n - 1) <= ((int64_t{1} << 52) - add) / mul;
  for (int64_t o = 0; formula && o < n; ++o) {
    const int64_t delta = table[static_cast<size_t>(o)] - std::min((o * mul + add) / div, hi);
    if (delta == 0) continue;
    if (!patches.empty() && std::get<1>(patches.back()) == o && std::get<2>(patches.back()) == delta)
      std::get<1>(patches.back()) = o + 1;
    else
      patches.emplace_back(o, o + 1, delta);
    formula = static_cast<int64_t>(patches.size()) <= kMaxPatches;
  }
  if (formula) {
    Value o = b.iota(DType::kS64, d, 0);
    Value v = b.div(b.add_c(b.mul_c(o, static_cast<double>(mul)), static_cast<double>(add)),
                    b.constant(DType::kS64, static_cast<double>(div)));
    v = b.min(v, b.constant(DType::kS64, static_cast<double>(hi)));
    for (const auto& [begin, end, delta] : patches) {
      Value in = b.logical_and(b.compare(o, b.constant(DType::kS64, static_cast<double>(begin)), Cmp::kGE),
                               b.compare(o, b.constant(DType::kS64, static_cast<double>(end)), Cmp::kLT));
      v = b.select(in, b.add_c(v, static_cast<double>(delta)), v);
    }
    return v;
  }
  std::vector<Value> parts;
  for (int64_t o = 0; o < n;) {
    int64_t e = o + 1;
    while (e < n && table[static_cast<size_t>(e)] == table[static_cast<size_t>(o)]) ++e;
    parts.push_back(b.constant(DType::kS64, static_cast<double>(table[static_cast<size_t>(o)]), {e - o}));
    o = e;
  }
  if (parts.empty()) return b.constant(DType::kS64, 0, d);
  return b.concatenate(parts, 0);
}

Value take_along(Builder& b, Value x, int64_t dim, Value idx) {
  const int64_t n = b.dims(idx)[0];
  Dims out = b.dims(x);
  out[dim] = n;
  std::vector<int64_t> offset;
  for (int64_t i = 0; i < b.rank(x); ++i)
    if (i != dim) offset.push_back(i);
  return b.gather(x, b.reshape(idx, {n, 1}), {dim}, offset, out);
}

Value put_add_along(Builder& b, Value v, int64_t dim, Value idx, int64_t size) {
  const int64_t n = b.dims(idx)[0];
  Dims out = b.dims(v);
  out[dim] = size;
  std::vector<int64_t> window;
  for (int64_t i = 0; i < b.rank(v); ++i)
    if (i != dim) window.push_back(i);
  return b.scatter(b.constant(b.dtype(v), 0, out), b.reshape(idx, {n, 1}), v, {dim}, window, ir::Body::kAdd);
}

Value upsample_nearest(Builder& b, Value x, const std::vector<ResampleAxis>& axes,
                       const std::vector<NearestRule>& rules) {
  const int64_t lead = b.rank(x) - static_cast<int64_t>(axes.size());
  for (size_t i = axes.size(); i-- > 0;)
    x = take_along(b, x, lead + static_cast<int64_t>(i), index_for(b, axes[i], rules[i]));
  return x;
}

Value upsample_nearest_backward(Builder& b, Value grad, const std::vector<ResampleAxis>& axes,
                                const std::vector<NearestRule>& rules) {
  const int64_t lead = b.rank(grad) - static_cast<int64_t>(axes.size());
  for (size_t i = 0; i < axes.size(); ++i)
    grad = put_add_along(b, grad, lead + static_cast<int64_t>(i), index_for(b, axes[i], rules[i]), axes[i].in);
  return grad;
}

Value upsample_interp(Builder& b, Value x, const std::vector<ResampleAxis>& axes, bool align_corners, bool cubic,
                      DType weights_as) {
  const int64_t lead = b.rank(x) - static_cast<int64_t>(axes.size());
  for (size_t i = axes.size(); i-- > 0;) {
    const int64_t dim = lead + static_cast<int64_t>(i);
    Taps t = interp_taps(b, axes[i], align_corners, cubic, weights_as);
    Value acc;
    for (size_t j = 0; j < t.idx.size(); ++j) {
      Value v = take_along(b, x, dim, t.idx[j]);
      Value term = b.mul(v, row(b, t.w[j], b.dims(v), dim));
      acc = acc.valid() ? b.add(acc, term) : term;
    }
    x = acc;
  }
  return x;
}

Value upsample_interp_backward(Builder& b, Value grad, const std::vector<ResampleAxis>& axes, bool align_corners,
                               bool cubic) {
  const int64_t lead = b.rank(grad) - static_cast<int64_t>(axes.size());
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t dim = lead + static_cast<int64_t>(i);
    Taps t = interp_taps(b, axes[i], align_corners, cubic, DType::kF32);
    std::vector<Value> parts;
    for (Value w : t.w) parts.push_back(b.mul(grad, row(b, w, b.dims(grad), dim)));
    grad = put_add_along(b, b.concatenate(parts, dim), dim, b.concatenate(t.idx, 0), axes[i].in);
  }
  return grad;
}

}  // namespace torchtpu::ops
