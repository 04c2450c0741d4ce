// Histograms: histc, histogram (a bin count or bin edges, weights, density)
// and the pieces of histogramdd, as PyTorch's CPU kernels compute them. Bin
// edges for a bin count are linspace over the given range or over the data's
// extremes; the extremes stay on the device (a non-finite range raises at the
// next sync point). An element's bin is found by linear interpolation in the
// input's dtype corrected by a search of the neighbouring edges (bin counts),
// or by counting the edges at or below it (edge tensors); NaN and elements
// outside the edges are skipped, and the last bin includes its right edge.

#include "aten/registry.h"
#include "aten/linspace.h"
#include "aten/tensor_ir.h"
#include "ops/resample.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

Value is_finite(Builder& b, Value v) {
  return b.is_finite(v);
}

// ---- histc ----------------------------------------------------------------------------

// histc as PyTorch's CPU kernel: edges min and max (rounded to the input's
// dtype), or the data's extremes when they are equal (widened by 1 when
// those are equal too); bin = trunc((x - lo) * bins / (hi - lo)) in the
// input's dtype (16-bit floats round each step, as c10's arithmetic), the
// top edge counted in the last bin, NaN and values outside skipped. Counts
// accumulate in float32.
at::Tensor histc_impl(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                      at::Tensor* out) {
  const char* op = out ? "aten::histc.out" : "aten::histc";
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"histogram_cpu\" not implemented for '",
                              at::toString(self.scalar_type()), "'");
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  if (out) {
    TORCH_CHECK(out->scalar_type() == self.scalar_type(), "torch.histc: input tensor and hist tensor should have "
                "the same dtype, but got input ", self.scalar_type(), " and hist ", out->scalar_type());
  }
  double lo = min.to<double>(), hi = max.to<double>();
  const bool from_data = lo == hi && self.numel() > 0;
  if (!from_data) {
    if (lo == hi) {
      lo -= 1;
      hi += 1;
    }
    TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histc: range of [", lo, ", ", hi, "] is not finite");
    TORCH_CHECK(lo < hi, "torch.histc: max must be larger than min");
  }
  Kernel k(op, self);
  Builder& b = k.b();
  const at::ScalarType st = self.scalar_type();
  const DType t = to_ir(st);
  Value hist;
  if (self.numel() == 0) {
    hist = b.constant(t, 0, {bins});
  } else {
    const int64_t n = self.numel();
    Value x = b.reshape(k.in(self), {n});
    Value left, right;
    if (from_data) {
      left = b.reduce_min(x, {0});
      right = b.reduce_max(x, {0});
      Value same = b.compare(left, right, Cmp::kEQ);
      left = b.select(same, b.sub(left, b.constant(t, 1)), left);
      right = b.select(same, b.add(right, b.constant(t, 1)), right);
      Value finite = b.logical_and(is_finite(b, left), is_finite(b, right));
      k.check(b.logical_not(finite), Kernel::CheckKind::kRuntime, "torch.histc: range of the input is not finite");
    } else {
      left = k.scalar(lo, st);
      right = k.scalar(hi, st);
    }
    Value inside = b.logical_and(b.compare(x, left, Cmp::kGE), b.compare(x, right, Cmp::kLE));
    Value scaled = b.div(b.mul(b.sub(x, left), b.constant(t, static_cast<double>(bins))), b.sub(right, left));
    Value pos = b.convert(scaled, DType::kS64);
    const Value zero = b.constant(DType::kS64, 0, {n});
    pos = b.min(b.select(inside, pos, zero), b.constant(DType::kS64, static_cast<double>(bins - 1), {n}));
    Value ones = b.select(inside, b.constant(DType::kF32, 1, {n}), b.constant(DType::kF32, 0, {n}));
    hist = b.scatter(b.constant(DType::kF32, 0, {bins}), b.reshape(pos, {n, 1}), ones, {0}, {}, ir::Body::kAdd);
  }
  at::Tensor r = k.result(hist, st, out);
  k.run();
  return r;
}
at::Tensor histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  return histc_impl(self, bins, min, max, nullptr);
}
at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                      at::Tensor& out) {
  histc_impl(self, bins, min, max, &out);
  return out;
}

// ---- histogram and histogramdd ----------------------------------------------------------

using OptRange = std::optional<at::ArrayRef<double>>;
using OptTensor = std::optional<at::Tensor>;

// One histogram's input as the CPU kernel sees it: M points of N coordinates.
struct Points {
  const char* who;  // "torch.histogram" or "torch.histogramdd"
  at::ScalarType st;
  int64_t m = 0, n = 0;
};

void check_dtype(const Points& p) {
  TORCH_CHECK_NOT_IMPLEMENTED(p.st == at::kFloat || p.st == at::kDouble, "\"histogramdd\" not implemented for '",
                              at::toString(p.st), "'");
}

// histogramdd_check_inputs: the input, the weight and (when given) the edge tensors.
// `dd`: histogramdd's form (points along the last dim), else histogram's (every element a point).
Points check_inputs(bool dd, const at::Tensor& self, const OptTensor& weight, const at::TensorList* bins) {
  const char* who = dd ? "torch.histogramdd" : "torch.histogram";
  Points p{who, self.scalar_type()};
  if (dd) {
    TORCH_CHECK(self.dim() >= 2, who, ": input tensor should have at least 2 dimensions, but got ", self.dim());
    p.n = self.size(-1);
    p.m = p.n ? self.numel() / p.n : 0;
  } else {
    p.n = 1;
    p.m = self.numel();
  }
  check_dtype(p);
  if (bins) {
    TORCH_CHECK(static_cast<int64_t>(bins->size()) == p.n, who, ": expected ", p.n,
                " sequences of bin edges for each of the ", p.n, " dimensions of the input, but got ", bins->size());
    for (int64_t d = 0; d < p.n; ++d) {
      const at::Tensor& e = (*bins)[d];
      TORCH_CHECK(e.scalar_type() == p.st, who, ": input tensor and bins tensors should have the same dtype, but got "
                  "input with dtype ", p.st, " and bins for dimension ", d, " with dtype ", e.scalar_type());
      TORCH_CHECK(e.dim() == 1, who, ": bins tensor should have one dimension, but got ", e.dim(),
                  " dimensions in the bins tensor for dimension ", d);
      TORCH_CHECK(e.numel() > 0, who, ": bins tensor should have at least 1 element, but got ", e.numel(),
                  " elements in the bins tensor for dimension ", d);
    }
  }
  if (weight) {
    TORCH_CHECK(weight->scalar_type() == p.st, who, ": if weight tensor is provided, it should have the same dtype "
                "as the input tensor, but got weight with dtype ", weight->scalar_type(), " and input with dtype ",
                p.st);
    const bool ok = dd ? (weight->dim() + 1 == self.dim() &&
                          weight->sizes() == self.sizes().slice(0, static_cast<size_t>(self.dim() - 1)))
                       : weight->sizes() == self.sizes();
    TORCH_CHECK(ok, who, ": if weight tensor is provided it should have the same shape as the input tensor",
                dd ? " excluding its innermost dimension" : "", ", but got input with shape ", self.sizes(),
                " and weight with shape ", weight->sizes());
  }
  return p;
}

// The edges of bin counts `bins` (select_outer_bin_edges, then linspace):
// over `range`, else the data's extremes (checked finite on the device),
// else (no data) [0, 1]; an empty range widens by 0.5 on each side.
std::vector<Value> count_edges(Kernel& k, const Points& p, Value x, at::IntArrayRef bins, const OptRange& range) {
  Builder& b = k.b();
  const DType t = to_ir(p.st);
  TORCH_CHECK(static_cast<int64_t>(bins.size()) == p.n, p.who, ": expected ", p.n,
              " sequences of bin edges for each of the ", p.n, " dimensions of the input, but got ", bins.size());
  if (range)
    TORCH_CHECK(static_cast<int64_t>(range->size()) == 2 * p.n, p.who, ": for a ", p.n,
                "-dimensional histogram range should have ", 2 * p.n, " elements, but got ", range->size());
  std::vector<Value> edges;
  for (int64_t d = 0; d < p.n; ++d) {
    TORCH_CHECK(bins[d] > 0, p.who, "(): bins must be > 0, but got ", bins[d], " for dimension ", d);
    Value lo, hi;
    if (range || p.m == 0) {
      double l = range ? (*range)[2 * d] : 0., h = range ? (*range)[2 * d + 1] : 1.;
      TORCH_CHECK(std::isfinite(l) && std::isfinite(h), p.who, ": dimension ", d, "'s range [", l, ", ", h,
                  "] is not finite");
      TORCH_CHECK(l <= h, p.who, ": min should not exceed max, but got min ", l, " max ", h, " for dimension ", d);
      if (l == h) l -= 0.5, h += 0.5;
      // linspace takes its ends in the result dtype.
      lo = b.convert(k.scalar(l, at::kDouble), t);
      hi = b.convert(k.scalar(h, at::kDouble), t);
    } else {
      Value col = b.reshape(b.slice_dim(x, 1, d, d + 1), {p.m});
      lo = b.reduce_min(col, {0});
      hi = b.reduce_max(col, {0});
      Value finite = b.logical_and(is_finite(b, lo), is_finite(b, hi));
      k.check(b.logical_not(finite), Kernel::CheckKind::kRuntime,
              std::string(p.who) + ": dimension " + std::to_string(d) + "'s range of the input is not finite");
      Value same = b.compare(lo, hi, Cmp::kEQ);
      lo = b.select(same, b.sub(lo, b.constant(t, 0.5)), lo);
      hi = b.select(same, b.add(hi, b.constant(t, 0.5)), hi);
    }
    edges.push_back(linspace_values(k, lo, hi, bins[d] + 1, p.st));
  }
  return edges;
}

// The histogram of the points `x` [m, n] over `edges` (each [k_d] in the
// input's dtype), weighted by `w` [m] when valid; `linear`: edges that are a
// linear progression (interpolation and a local search), else any sorted
// edges (a count of the edges at or below each point).
Value histogram_values(Kernel& k, const Points& p, Value x, Value w, const std::vector<Value>& edges, bool linear,
                       bool density) {
  Builder& b = k.b();
  const DType t = to_ir(p.st);
  ir::Dims shape;
  for (Value e : edges) shape.push_back(std::max<int64_t>(b.dims(e)[0] - 1, 0));
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  const int64_t m = p.m;
  Value hist;
  if (m == 0 || total == 0) {
    hist = b.constant(t, 0, shape);
  } else {
    Value valid = b.constant(DType::kBool, 1, {m});
    Value flat = b.constant(DType::kS64, 0, {m});
    int64_t stride = total;
    for (int64_t d = 0; d < p.n; ++d) {
      const int64_t ne = b.dims(edges[d])[0];
      stride /= shape[d];
      Value col = b.reshape(b.slice_dim(x, 1, d, d + 1), {m});
      Value left = b.reshape(b.slice_dim(edges[d], 0, 0, 1), {});
      Value right = b.reshape(b.slice_dim(edges[d], 0, ne - 1, ne), {});
      Value inside = b.logical_and(b.compare(col, left, Cmp::kGE), b.compare(col, right, Cmp::kLE));
      Value pos;
      if (linear) {
        // (x - left) * (edges - 1) / (right - left), then upper_bound over
        // the edges [pos - 1, pos + 2).
        Value guess = b.convert(b.div(b.mul(b.sub(col, left), b.constant(t, static_cast<double>(ne - 1))),
                                      b.sub(right, left)),
                                DType::kS64);
        guess = b.select(inside, guess, b.constant(DType::kS64, 0));
        guess = b.max(b.min(guess, b.constant(DType::kS64, static_cast<double>(ne - 1))), b.constant(DType::kS64, 0));
        Value lo = b.max(b.add_c(guess, -1), b.constant(DType::kS64, 0));
        Value hi = b.min(b.add_c(guess, 2), b.constant(DType::kS64, static_cast<double>(ne)));
        Value count = b.constant(DType::kS64, 0, {m});
        for (int j = 0; j < 3; ++j) {
          Value at = b.add_c(lo, j);
          Value e = ops::take_along(b, edges[d], 0, b.min(at, b.constant(DType::kS64, static_cast<double>(ne - 1))));
          Value hit = b.logical_and(b.compare(at, hi, Cmp::kLT), b.compare(e, col, Cmp::kLE));
          count = b.add(count, b.convert(hit, DType::kS64));
        }
        pos = b.add_c(b.add(lo, count), -1);
      } else {
        Value le = b.compare(b.broadcast_in_dim(edges[d], {m, ne}, {1}), b.broadcast_in_dim(col, {m, ne}, {0}),
                             Cmp::kLE);
        pos = b.add_c(b.reduce_sum(b.convert(le, DType::kS64), {1}), -1);
      }
      // The last bin includes its right edge.
      pos = b.select(b.compare(pos, b.constant(DType::kS64, static_cast<double>(ne - 1)), Cmp::kEQ),
                     b.add_c(pos, -1), pos);
      Value in_range = b.logical_and(b.compare(pos, b.constant(DType::kS64, 0), Cmp::kGE),
                                     b.compare(pos, b.constant(DType::kS64, static_cast<double>(shape[d])), Cmp::kLT));
      valid = b.logical_and(valid, b.logical_and(inside, in_range));
      flat = b.add(flat, b.mul(b.select(in_range, pos, b.constant(DType::kS64, 0)),
                               b.constant(DType::kS64, static_cast<double>(stride))));
    }
    Value add = w.valid() ? w : b.constant(t, 1, {m});
    add = b.select(valid, add, b.constant(t, 0, {m}));
    hist = b.scatter(b.constant(t, 0, {total}), b.reshape(flat, {m, 1}), add, {0}, {}, ir::Body::kAdd);
    hist = b.reshape(hist, shape);
  }
  if (density) {
    // hist / hist.sum(), then over each dim's bin widths.
    std::vector<int64_t> all;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) all.push_back(d);
    hist = b.div(hist, b.reduce_sum(hist, all));
    for (int64_t d = 0; d < p.n; ++d) {
      const int64_t ne = b.dims(edges[d])[0];
      if (ne < 2) continue;
      Value widths = b.sub(b.slice_dim(edges[d], 0, 1, ne), b.slice_dim(edges[d], 0, 0, ne - 1));
      hist = b.div(hist, b.broadcast_in_dim(widths, shape, {d}));
    }
  }
  return hist;
}

struct Inputs {
  Value x, w;
};

Inputs read_points(Kernel& k, const Points& p, const at::Tensor& self, const OptTensor& weight) {
  Builder& b = k.b();
  Inputs in;
  in.x = b.reshape(k.in(self), {p.m, p.n});
  if (weight) in.w = b.reshape(k.in(*weight), {p.m});
  return in;
}

std::tuple<at::Tensor, at::Tensor> histogram_bin_ct_impl(const char* op, const at::Tensor& self, int64_t bins,
                                                         const OptRange& range, const OptTensor& weight,
                                                         bool density, at::Tensor* hist_out, at::Tensor* edges_out) {
  const Points p = check_inputs(/*dd=*/false, self, weight, nullptr);
  Kernel k(op, self);
  Inputs in = read_points(k, p, self, weight);
  std::vector<Value> edges = count_edges(k, p, in.x, {bins}, range);
  Value hist = histogram_values(k, p, in.x, in.w, edges, /*linear=*/true, density);
  at::Tensor h = k.result(hist, p.st, hist_out);
  at::Tensor e = k.result(edges[0], p.st, edges_out);
  k.run();
  return {h, e};
}

std::tuple<at::Tensor, at::Tensor> histogram_bins_impl(const char* op, const at::Tensor& self, const at::Tensor& bins,
                                                       const OptTensor& weight, bool density, at::Tensor* hist_out,
                                                       at::Tensor* edges_out) {
  TORCH_CHECK(bins.dim() == 1, "torch.histogram: bins tensor should have one dimension, but got ", bins.dim(),
              " dimensions in the bins tensor");
  const at::TensorList list(bins);
  const Points p = check_inputs(/*dd=*/false, self, weight, &list);
  Kernel k(op, self);
  Inputs in = read_points(k, p, self, weight);
  Value e = k.in(bins);
  Value hist = histogram_values(k, p, in.x, in.w, {e}, /*linear=*/false, density);
  at::Tensor h = k.result(hist, p.st, hist_out);
  at::Tensor edges = k.result(e, p.st, edges_out);
  k.run();
  return {h, edges};
}

std::tuple<at::Tensor, at::Tensor> histogram_bin_ct(const at::Tensor& self, int64_t bins, OptRange range,
                                                    const OptTensor& weight, bool density) {
  return histogram_bin_ct_impl("aten::histogram.bin_ct", self, bins, range, weight, density, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> histogram_bin_ct_out(const at::Tensor& self, int64_t bins, OptRange range,
                                                          const OptTensor& weight, bool density, at::Tensor& hist,
                                                          at::Tensor& bin_edges) {
  histogram_bin_ct_impl("aten::histogram.bin_ct_out", self, bins, range, weight, density, &hist, &bin_edges);
  return {hist, bin_edges};
}
std::tuple<at::Tensor, at::Tensor> histogram_bins(const at::Tensor& self, const at::Tensor& bins,
                                                  const OptTensor& weight, bool density) {
  return histogram_bins_impl("aten::histogram.bins_tensor", self, bins, weight, density, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> histogram_bins_out(const at::Tensor& self, const at::Tensor& bins,
                                                        const OptTensor& weight, bool density, at::Tensor& hist,
                                                        at::Tensor& bin_edges) {
  histogram_bins_impl("aten::histogram.bins_tensor_out", self, bins, weight, density, &hist, &bin_edges);
  return {hist, bin_edges};
}

std::vector<at::Tensor> histogramdd_bin_edges(const at::Tensor& self, at::IntArrayRef bins, OptRange range,
                                              const OptTensor& weight, bool density) {
  const Points p = check_inputs(/*dd=*/true, self, weight, nullptr);
  Kernel k("aten::_histogramdd_bin_edges", self);
  Inputs in = read_points(k, p, self, weight);
  std::vector<at::Tensor> out;
  for (Value e : count_edges(k, p, in.x, bins, range)) out.push_back(k.out(e, p.st));
  k.run();
  return out;
}

at::Tensor histogramdd_from_bin_cts(const at::Tensor& self, at::IntArrayRef bins, OptRange range,
                                    const OptTensor& weight, bool density) {
  const Points p = check_inputs(/*dd=*/true, self, weight, nullptr);
  Kernel k("aten::_histogramdd_from_bin_cts", self);
  Inputs in = read_points(k, p, self, weight);
  std::vector<Value> edges = count_edges(k, p, in.x, bins, range);
  at::Tensor h = k.out(histogram_values(k, p, in.x, in.w, edges, /*linear=*/true, density), p.st);
  k.run();
  return h;
}

at::Tensor histogramdd_from_bin_tensors(const at::Tensor& self, at::TensorList bins, const OptTensor& weight,
                                        bool density) {
  const Points p = check_inputs(/*dd=*/true, self, weight, &bins);
  Kernel k("aten::_histogramdd_from_bin_tensors", self);
  Inputs in = read_points(k, p, self, weight);
  std::vector<Value> edges;
  for (const at::Tensor& e : bins) edges.push_back(k.in(e));
  at::Tensor h = k.out(histogram_values(k, p, in.x, in.w, edges, /*linear=*/false, density), p.st);
  k.run();
  return h;
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("_histogramdd_bin_edges", TORCH_FN(histogramdd_bin_edges));
  m.impl("_histogramdd_from_bin_cts", TORCH_FN(histogramdd_from_bin_cts));
  m.impl("_histogramdd_from_bin_tensors", TORCH_FN(histogramdd_from_bin_tensors));
  m.impl("histc", TORCH_FN(histc));
  m.impl("histc.out", TORCH_FN(histc_out));
  m.impl("histogram.bin_ct", TORCH_FN(histogram_bin_ct));
  m.impl("histogram.bin_ct_out", TORCH_FN(histogram_bin_ct_out));
  m.impl("histogram.bins_tensor", TORCH_FN(histogram_bins));
  m.impl("histogram.bins_tensor_out", TORCH_FN(histogram_bins_out));
}

}  // namespace torchtpu::aten
