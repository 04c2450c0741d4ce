#include "ops/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/resample.h"

namespace torchtpu::ops {

using ir::Attr;

namespace {

Value logical(Builder& b, const char* op, Value x, Value y) {
  y = b.broadcast_to(y, b.dims(x));
  return b.graph().add(op, {x, y}, b.type(x));
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Calls f(offset) for every kernel offset, last dim fastest.
template <typename F>
void each_offset(const Dims& kernel, F f) {
  Dims k(kernel.size(), 0);
  for (;;) {
    f(k);
    size_t i = k.size();
    while (i > 0 && ++k[i - 1] == kernel[i - 1]) k[--i] = 0;
    if (i == 0) return;
  }
}

// For one kernel offset: the flat in-plane input index each output position
// reads, and whether that position lies inside the input (not padding).
struct Taps {
  Value flat;   // s64 [*O]
  Value valid;  // bool [*O]
};

Taps taps(Builder& b, const Dims& in, const Dims& out, const PoolParams& p, const Dims& offset) {
  const size_t nsp = out.size();
  Value flat, valid;
  for (size_t i = 0; i < nsp; ++i) {
    Value o = b.iota(DType::kS64, out, static_cast<int64_t>(i));
    Value pos = b.add_c(b.mul_c(o, static_cast<double>(p.stride[i])),
                        static_cast<double>(offset[i] * p.dilation[i] - p.padding[i]));
    Value ok = logical(b, "stablehlo.and", b.compare(pos, b.constant(DType::kS64, 0), Cmp::kGE),
                       b.compare(pos, b.constant(DType::kS64, static_cast<double>(in[i])), Cmp::kLT));
    valid = i == 0 ? ok : logical(b, "stablehlo.and", valid, ok);
    flat = i == 0 ? pos : b.add(b.mul_c(flat, static_cast<double>(in[i])), pos);
  }
  return {flat, valid};
}

Dims trailing(const Dims& d, size_t n) { return Dims(d.end() - n, d.end()); }

Dims with_spatial(const Dims& d, const Dims& sp) {
  Dims r(d.begin(), d.end() - sp.size());
  r.insert(r.end(), sp.begin(), sp.end());
  return r;
}

Value reduce_window_sum(Builder& b, Value x, const Dims& window, const Dims& strides) {
  const Dims& d = b.dims(x);
  Dims out;
  for (size_t i = 0; i < d.size(); ++i) out.push_back((d[i] - window[i]) / strides[i] + 1);
  Value init = b.constant(b.dtype(x), 0);
  return b.graph().add("stablehlo.reduce_window", {x, init}, Type{b.dtype(x), out},
                       {Attr::array("window_dimensions", window), Attr::array("window_strides", strides)},
                       ir::Body::kAdd);
}

// The per-spatial-dim list `sp` behind rank - sp.size() lead dims of `fill`.
Dims full_rank(size_t rank, const Dims& sp, int64_t fill) {
  Dims r(rank - sp.size(), fill);
  r.insert(r.end(), sp.begin(), sp.end());
  return r;
}

// The divisor of each output window, [*O] in `t`.
Value avg_divisor(Builder& b, DType t, const Dims& in, const Dims& out, const PoolParams& p, bool include_pad,
                  std::optional<int64_t> divisor) {
  if (divisor) return b.constant(t, static_cast<double>(*divisor), out);
  Value count;
  for (size_t i = 0; i < out.size(); ++i) {
    Value start = b.add_c(b.mul_c(b.iota(DType::kS64, out, static_cast<int64_t>(i)), static_cast<double>(p.stride[i])),
                          static_cast<double>(-p.padding[i]));
    Value end = b.min(b.add_c(start, static_cast<double>(p.kernel[i])),
                      b.constant(DType::kS64, static_cast<double>(in[i] + p.padding[i]), out));
    if (!include_pad) {
      start = b.max(start, b.constant(DType::kS64, 0, out));
      end = b.min(end, b.constant(DType::kS64, static_cast<double>(in[i]), out));
    }
    Value c = b.sub(end, start);
    count = i == 0 ? c : b.mul(count, c);
  }
  return b.convert(count, t);
}

// [O, S] weights of PyTorch's adaptive windows: row o averages
// [floor(o*S/O), ceil((o+1)*S/O)).
Value adaptive_table(Builder& b, DType t, int64_t out, int64_t in) {
  Dims d{out, in};
  Value o = b.iota(DType::kS64, d, 0), h = b.iota(DType::kS64, d, 1);
  Value so = b.constant(DType::kS64, static_cast<double>(out), d);
  Value start = b.div(b.mul_c(o, static_cast<double>(in)), so);
  Value end = b.div(b.add_c(b.mul_c(b.add_c(o, 1), static_cast<double>(in)), static_cast<double>(out - 1)), so);
  Value inside = logical(b, "stablehlo.and", b.compare(h, start, Cmp::kGE), b.compare(h, end, Cmp::kLT));
  Value w = b.div(b.constant(t, 1, d), b.convert(b.sub(end, start), t));
  return b.select(inside, w, b.constant(t, 0, d));
}

}  // namespace

Dims pool_output_spatial(const Dims& input, const PoolParams& p) {
  const size_t nsp = p.kernel.size();
  Dims out;
  for (size_t i = 0; i < nsp; ++i) {
    int64_t s = input[input.size() - nsp + i];
    int64_t eff = p.dilation[i] * (p.kernel[i] - 1) + 1;
    int64_t o = floor_div(s + 2 * p.padding[i] - eff + (p.ceil_mode ? p.stride[i] - 1 : 0), p.stride[i]) + 1;
    if (p.ceil_mode && (o - 1) * p.stride[i] >= s + p.padding[i]) --o;
    out.push_back(o);
  }
  return out;
}

MaxPool max_pool(Builder& b, Value x, const PoolParams& p) {
  const Dims d = b.dims(x);
  const size_t nsp = p.kernel.size(), lead = d.size() - nsp;
  const Dims in = trailing(d, nsp), out = pool_output_spatial(d, p), full = with_spatial(d, out);
  Dims low(d.size(), 0), high(d.size(), 0);
  for (size_t i = 0; i < nsp; ++i) {
    int64_t extent = (out[i] - 1) * p.stride[i] + (p.kernel[i] - 1) * p.dilation[i] + 1;
    low[lead + i] = p.padding[i];
    high[lead + i] = std::max<int64_t>(0, extent - in[i] - p.padding[i]);
  }
  const DType t = b.dtype(x);
  Value xp = b.pad(x, b.constant(t, Builder::lowest(t)), low, high);
  Value cur, idx, have;
  each_offset(p.kernel, [&](const Dims& k) {
    Dims start(d.size(), 0), limit = b.dims(xp), step(d.size(), 1);
    for (size_t i = 0; i < nsp; ++i) {
      start[lead + i] = k[i] * p.dilation[i];
      limit[lead + i] = start[lead + i] + (out[i] - 1) * p.stride[i] + 1;
      step[lead + i] = p.stride[i];
    }
    Value v = b.slice(xp, start, limit, step);
    Taps tp = taps(b, in, out, p, k);
    Value flat = b.broadcast_to(tp.flat, full), valid = b.broadcast_to(tp.valid, full);
    if (!cur.valid()) {
      cur = v, idx = flat, have = valid;
      return;
    }
    Value better = b.compare(v, cur, Cmp::kGT);
    if (ir::is_float(t)) better = logical(b, "stablehlo.or", better, b.compare(v, v, Cmp::kNE));
    Value first = b.graph().add("stablehlo.not", {have}, b.type(have));
    Value take = logical(b, "stablehlo.and", valid, logical(b, "stablehlo.or", better, first));
    cur = b.select(take, v, cur);
    idx = b.select(take, flat, idx);
    have = logical(b, "stablehlo.or", have, valid);
  });
  return {cur, idx};
}

Value max_pool_backward(Builder& b, Value grad, Value indices, const Dims& input_dims, const PoolParams& p) {
  const size_t nsp = p.kernel.size(), lead = input_dims.size() - nsp;
  const Dims in = trailing(input_dims, nsp), out = trailing(b.dims(grad), nsp);
  Value zero = b.constant(b.dtype(grad), 0);
  Value acc;
  each_offset(p.kernel, [&](const Dims& k) {
    Taps tp = taps(b, in, out, p, k);
    Value hit = logical(b, "stablehlo.and", b.compare(indices, tp.flat, Cmp::kEQ), tp.valid);
    Value g = b.select(hit, grad, b.zeros_like(grad));
    // Output position o read input o * stride + offset * dilation - padding.
    Dims low(input_dims.size(), 0), high(input_dims.size(), 0), interior(input_dims.size(), 0);
    for (size_t i = 0; i < nsp; ++i) {
      low[lead + i] = k[i] * p.dilation[i] - p.padding[i];
      interior[lead + i] = p.stride[i] - 1;
      high[lead + i] = in[i] - low[lead + i] - ((out[i] - 1) * p.stride[i] + 1);
    }
    Value placed = b.pad(g, zero, low, high, interior);
    acc = acc.valid() ? b.add(acc, placed) : placed;
  });
  return acc;
}

Value avg_pool(Builder& b, Value x, const PoolParams& p, bool count_include_pad, std::optional<int64_t> divisor) {
  const Dims d = b.dims(x);
  const size_t nsp = p.kernel.size(), lead = d.size() - nsp;
  const Dims in = trailing(d, nsp), out = pool_output_spatial(d, p);
  Dims low(d.size(), 0), high(d.size(), 0);
  for (size_t i = 0; i < nsp; ++i) {
    low[lead + i] = p.padding[i];
    high[lead + i] = (out[i] - 1) * p.stride[i] + p.kernel[i] - in[i] - p.padding[i];
  }
  Value xp = b.pad(x, b.constant(b.dtype(x), 0), low, high);
  Value sum = reduce_window_sum(b, xp, full_rank(d.size(), p.kernel, 1), full_rank(d.size(), p.stride, 1));
  return b.div(sum, b.broadcast_to(avg_divisor(b, b.dtype(x), in, out, p, count_include_pad, divisor), b.dims(sum)));
}

Value avg_pool_backward(Builder& b, Value grad, const Dims& input_dims, const PoolParams& p, bool count_include_pad,
                        std::optional<int64_t> divisor) {
  const size_t nsp = p.kernel.size(), lead = input_dims.size() - nsp;
  const Dims in = trailing(input_dims, nsp), out = trailing(b.dims(grad), nsp);
  Value g = b.div(grad, b.broadcast_to(avg_divisor(b, b.dtype(grad), in, out, p, count_include_pad, divisor),
                                       b.dims(grad)));
  // Dilate by the stride, pad so that each input position sees the windows
  // that cover it, and sum a kernel-sized window.
  Dims low(input_dims.size(), 0), high(input_dims.size(), 0), interior(input_dims.size(), 0);
  for (size_t i = 0; i < nsp; ++i) {
    low[lead + i] = p.kernel[i] - 1 - p.padding[i];
    interior[lead + i] = p.stride[i] - 1;
    high[lead + i] = in[i] + p.padding[i] - 1 - (out[i] - 1) * p.stride[i];
  }
  Value gp = b.pad(g, b.constant(b.dtype(g), 0), low, high, interior);
  return reduce_window_sum(b, gp, full_rank(input_dims.size(), p.kernel, 1), Dims(input_dims.size(), 1));
}

// Window averages as contractions with the weight tables (0 outside a
// window). Each contraction moves the pooled dim last, so after all of them
// the spatial dims are back in order.
static Value adaptive_contract(Builder& b, Value x, const Dims& out) {
  const size_t nsp = out.size(), lead = b.rank(x) - nsp;
  for (size_t i = 0; i < nsp; ++i) {
    Value a = adaptive_table(b, b.dtype(x), out[i], b.dims(x)[lead]);
    x = b.dot_general(x, a, {}, {}, {static_cast<int64_t>(lead)}, {1}, b.dtype(x));
  }
  return x;
}

Value adaptive_avg_pool(Builder& b, Value x, const Dims& out) {
  if (!is_float(b.dtype(x))) return adaptive_contract(b, x, out);
  // A zero weight times an infinity would be NaN outside the window: the
  // finite values are averaged, and each window's infinities and NaNs are
  // found by contracting indicators (nonnegative, so > 0 means "some").
  Value zero = b.zeros_like(x), inf = b.full_like(x, INFINITY);
  Value is_nan = b.compare(x, x, Cmp::kNE);
  Value is_pos = b.compare(x, inf, Cmp::kEQ), is_neg = b.compare(x, b.neg(inf), Cmp::kEQ);
  Value finite = b.logical_and(b.logical_not(is_nan),
                               b.logical_not(b.logical_or(is_pos, is_neg)));
  Value r = adaptive_contract(b, b.select(finite, x, zero), out);
  auto any = [&](Value ind) {
    Value c = adaptive_contract(b, b.convert(ind, b.dtype(x)), out);
    return b.compare(c, b.zeros_like(c), Cmp::kGT);
  };
  Value nan = any(is_nan), pos = any(is_pos), neg = any(is_neg);
  Value rinf = b.full_like(r, INFINITY);
  r = b.select(neg, b.neg(rinf), r);
  r = b.select(pos, rinf, r);
  return b.select(b.logical_or(nan, b.logical_and(pos, neg)), b.full_like(r, NAN), r);
}

Value adaptive_avg_pool_backward(Builder& b, Value grad, const Dims& in) {
  const size_t nsp = in.size(), lead = b.rank(grad) - nsp;
  for (size_t i = 0; i < nsp; ++i) {
    Value a = adaptive_table(b, b.dtype(grad), b.dims(grad)[lead], in[i]);
    grad = b.dot_general(grad, a, {}, {}, {static_cast<int64_t>(lead)}, {0}, b.dtype(grad));
  }
  return grad;
}

// The window of output position o over S inputs: [o*S/O, ceil((o+1)*S/O)).
static Value window_start(Builder& b, int64_t out, int64_t in) {
  Value o = b.iota(DType::kS64, {out}, 0);
  return b.div(b.mul_c(o, static_cast<double>(in)), b.constant(DType::kS64, static_cast<double>(out)));
}
static Value window_end(Builder& b, int64_t out, int64_t in) {
  Value o = b.iota(DType::kS64, {out}, 0);
  return b.div(b.add_c(b.mul_c(o, static_cast<double>(in)), static_cast<double>(in + out - 1)),
               b.constant(DType::kS64, static_cast<double>(out)));
}

MaxPool adaptive_max_pool(Builder& b, Value x, const Dims& out) {
  const Dims d = b.dims(x);
  const size_t nsp = out.size(), lead = d.size() - nsp;
  const Dims in = trailing(d, nsp), full = with_spatial(d, out);
  Dims widest(nsp, 1);
  for (size_t i = 0; i < nsp; ++i)
    for (int64_t o = 0; o < out[i]; ++o)
      widest[i] = std::max(widest[i], ((o + 1) * in[i] + out[i] - 1) / out[i] - o * in[i] / out[i]);
  std::vector<Value> start, end;
  for (size_t i = 0; i < nsp; ++i) {
    start.push_back(window_start(b, out[i], in[i]));
    end.push_back(window_end(b, out[i], in[i]));
  }
  const DType t = b.dtype(x);
  Value cur, idx, have;
  each_offset(widest, [&](const Dims& k) {
    Value v = x, flat, valid;
    for (size_t i = 0; i < nsp; ++i) {
      Value pos = b.add_c(start[i], static_cast<double>(k[i]));
      Value ok = b.compare(pos, end[i], Cmp::kLT);
      v = take_along(b, v, static_cast<int64_t>(lead + i),
                     b.min(pos, b.constant(DType::kS64, static_cast<double>(in[i] - 1))));
      Value p = b.broadcast_in_dim(pos, out, {static_cast<int64_t>(i)});
      Value okb = b.broadcast_in_dim(ok, out, {static_cast<int64_t>(i)});
      flat = i == 0 ? p : b.add(b.mul_c(flat, static_cast<double>(in[i])), p);
      valid = i == 0 ? okb : b.logical_and(valid, okb);
    }
    flat = b.broadcast_to(flat, full);
    valid = b.broadcast_to(valid, full);
    if (!cur.valid()) {
      cur = v, idx = flat, have = valid;
      return;
    }
    Value better = b.compare(v, cur, Cmp::kGT);
    if (ir::is_float(t)) better = b.logical_or(better, b.compare(v, v, Cmp::kNE));
    Value take = b.logical_and(valid, b.logical_or(better, b.logical_not(have)));
    cur = b.select(take, v, cur);
    idx = b.select(take, flat, idx);
    have = b.logical_or(have, valid);
  });
  return {cur, idx};
}

// `v` [..., *S] written at (plane, indices) of zero planes [..., *plane].
static Value plane_scatter(Builder& b, Value v, Value indices, const Dims& plane, ir::Body body) {
  const Dims d = b.dims(v);
  const size_t nsp = plane.size(), lead = d.size() - nsp;
  int64_t planes = 1, n = 1, size = 1;
  for (size_t i = 0; i < lead; ++i) planes *= d[i];
  for (size_t i = lead; i < d.size(); ++i) n *= d[i];
  for (int64_t s : plane) size *= s;
  Value zeros = b.constant(b.dtype(v), 0, {planes, size});
  Value result = zeros;
  if (planes * n > 0) {
    Value p = b.iota(DType::kS64, {planes, n, 1}, 0);
    Value at = b.concatenate({p, b.reshape(indices, {planes, n, 1})}, 2);
    result = b.scatter(zeros, at, b.reshape(v, {planes, n}), {0, 1}, {}, body);
  }
  return b.reshape(result, with_spatial(d, plane));
}

Value max_pool_scatter_backward(Builder& b, Value grad, Value indices, const Dims& in) {
  return plane_scatter(b, grad, indices, in, ir::Body::kAdd);
}

Value max_unpool(Builder& b, Value x, Value indices, const Dims& out) {
  return plane_scatter(b, x, indices, out, ir::Body::kReplace);
}

MaxPool fractional_max_pool(Builder& b, Value x, Value samples, const Dims& kernel, const Dims& out) {
  const Dims xd = b.dims(x);
  const size_t nsp = kernel.size();
  const Dims in(xd.end() - nsp, xd.end());
  const DType t = b.dtype(x);
  // The CPU computes the starts in the input's dtype: 16-bit values round after each step.
  const DType ct = (t == DType::kBF16 || t == DType::kF16) ? DType::kF32 : t;
  auto rnd = [&](Value v) { return ct == t ? v : b.convert(b.convert(v, t), ct); };
  int64_t planes = 1;
  for (size_t i = 0; i + nsp < xd.size(); ++i) planes *= xd[i];
  int64_t in_total = 1, out_total = 1, k_total = 1;
  for (size_t d = 0; d < nsp; ++d) in_total *= in[d], out_total *= out[d], k_total *= kernel[d];
  if (planes * out_total == 0) {  // nothing to pool (a zero batch): empty results
    Dims res(xd.begin(), xd.end() - nsp);
    for (int64_t o : out) res.push_back(o);
    return {b.constant(t, 0, res), b.constant(DType::kS64, 0, res)};
  }
  Value u_all = b.convert(b.reshape(samples, {planes, static_cast<int64_t>(nsp)}), ct);
  // Flat in-plane index of every (output, kernel offset) pair: [P, *O, *K].
  Dims full{planes};
  for (int64_t o : out) full.push_back(o);
  for (int64_t k : kernel) full.push_back(k);
  Value flat = b.constant(DType::kS64, 0, full);
  for (size_t d = 0; d < nsp; ++d) {
    const int64_t sample_col = nsp == 2 ? (d == 0 ? 1 : 0) : static_cast<int64_t>(d);
    Value u = b.reshape(b.slice_dim(u_all, 1, sample_col, sample_col + 1), {planes});
    const Dims od{planes, out[d]};
    Value last = b.constant(DType::kS64, static_cast<double>(in[d] - kernel[d]), od);
    Value start = last;
    if (out[d] > 1) {
      const double alpha = static_cast<double>(in[d] - kernel[d]) / static_cast<double>(out[d] - 1);
      Value a = b.constant(ct, static_cast<double>(static_cast<float>(alpha)), od);
      if (ct == DType::kF64) a = b.constant(ct, alpha, od);
      Value ub = b.broadcast_in_dim(u, od, {0});
      Value o = b.convert(b.iota(DType::kS64, od, 1), ct);
      Value first = b.convert(rnd(b.mul(rnd(b.add(o, ub)), a)), DType::kS32);
      Value base = b.convert(rnd(b.mul(ub, a)), DType::kS32);
      Value st = b.convert(b.sub(first, base), DType::kS64);
      start = b.select(b.compare(b.iota(DType::kS64, od, 1), b.constant(DType::kS64, static_cast<double>(out[d] - 1), od),
                                 Cmp::kLT),
                       st, last);
    }
    // Position along dim d of each pair: start[o_d] + k_d.
    Value pos = b.add(b.broadcast_in_dim(start, full, {0, static_cast<int64_t>(1 + d)}),
                      b.iota(DType::kS64, full, static_cast<int64_t>(1 + nsp + d)));
    int64_t stride = 1;
    for (size_t e = d + 1; e < nsp; ++e) stride *= in[e];
    flat = b.add(flat, b.mul(pos, b.constant(DType::kS64, static_cast<double>(stride), full)));
  }
  const Dims pm{planes, out_total * k_total};
  Value idx = b.reshape(flat, pm);
  Value coords = b.concatenate({b.reshape(b.iota(DType::kS64, pm, 0), {planes, out_total * k_total, 1}),
                                b.reshape(idx, {planes, out_total * k_total, 1})},
                               2);
  Value vals = b.gather(b.reshape(x, {planes, in_total}), coords, {0, 1}, {}, pm);
  const Dims wk{planes, out_total, k_total};
  vals = b.reshape(vals, wk);
  idx = b.reshape(idx, wk);
  // The CPU's walk: `val > max || isnan(val)` from max = -inf: the last NaN,
  // else the first maximum (the first element when all are -inf).
  Value kpos = b.iota(DType::kS64, wk, 2);
  Value nan = b.compare(vals, vals, Cmp::kNE);
  Value last_nan = b.reduce_max(b.select(nan, kpos, b.constant(DType::kS64, -1, wk)), {2});
  Value mx = b.reduce_max(b.select(nan, b.constant(t, -std::numeric_limits<double>::infinity(), wk), vals), {2});
  Value at_max = b.compare(vals, b.broadcast_in_dim(mx, wk, {0, 1}), Cmp::kEQ);
  Value first_max = b.reduce_min(b.select(at_max, kpos, b.constant(DType::kS64, static_cast<double>(k_total), wk)), {2});
  first_max = b.select(b.compare(first_max, b.constant(DType::kS64, static_cast<double>(k_total), {planes, out_total}),
                                 Cmp::kEQ),
                       b.constant(DType::kS64, 0, {planes, out_total}), first_max);
  Value has_nan = b.compare(last_nan, b.constant(DType::kS64, 0, {planes, out_total}), Cmp::kGE);
  Value pick = b.select(has_nan, last_nan, first_max);  // [P, O]
  Value pick3 = b.reshape(pick, {planes, out_total, 1});
  const Dims po{planes, out_total};
  Value sel = b.concatenate({b.reshape(b.iota(DType::kS64, po, 0), {planes, out_total, 1}),
                             b.reshape(b.iota(DType::kS64, po, 1), {planes, out_total, 1}), pick3},
                            2);
  Value v = b.gather(vals, sel, {0, 1, 2}, {}, po);
  Value i = b.gather(idx, sel, {0, 1, 2}, {}, po);
  Dims res(xd.begin(), xd.end() - nsp);
  for (int64_t o : out) res.push_back(o);
  return {b.reshape(v, res), b.reshape(i, res)};
}

}  // namespace torchtpu::ops
