// segment_reduce (sum, mean, max, min, prod over runs given by lengths or
// offsets along the last dim of those) and its backward, as PyTorch's CPU
// kernel: empty segments hold `initial` (else the reduction's identity; NaN
// for mean), max/min propagate NaN, mean divides unless the value is NaN;
// the backward splits a max/min gradient among tied positive entries and
// computes the exclusive product at zeros and NaN. Each element finds its
// segment by counting the segment ends at or before it, then one scatter
// reduces; the !unsafe argument checks run on the device.

#include <cmath>
#include <limits>
#include <string>

#include "aten/registry.h"
#include "aten/opmath.h"
#include "aten/tensor_ir.h"
#include "ops/scan.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

enum class Red { kSum, kMean, kMax, kMin, kProd };

// An optional tensor that is given and defined (autograd passes undefined ones).
std::optional<at::Tensor> given(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? t : std::nullopt;
}

Red reduction_of(c10::string_view r) {
  if (r == "sum") return Red::kSum;
  if (r == "mean") return Red::kMean;
  if (r == "max") return Red::kMax;
  if (r == "min") return Red::kMin;
  if (r == "prod") return Red::kProd;
  TORCH_CHECK(false, "reduce argument must be either sum, prod, max, min or mean, got ", r);
}

// The layout: data as [O, L, I] (O: dims before the axis, I: after), the
// segment bounds as [O, S], and each element's segment [O, L] (S: none).
struct Segments {
  int64_t outer, len, inner, count;
  Value start, end, seg, length;
};

Segments segments_of(Kernel& k, const at::Tensor& data, const std::optional<at::Tensor>& lengths,
                     const std::optional<at::Tensor>& offsets, int64_t axis, bool check) {
  Builder& b = k.b();
  Segments s;
  s.outer = c10::multiply_integers(data.sizes().begin(), data.sizes().begin() + axis);
  s.len = data.size(axis);
  s.inner = c10::multiply_integers(data.sizes().begin() + axis + 1, data.sizes().end());
  if (lengths) {
    s.count = lengths->size(-1);
    Value l = b.reshape(k.in(*lengths, at::kLong), {s.outer, s.count});
    if (check) {
      k.check(b.reduce_max(b.compare(l, b.zeros_like(l), Cmp::kLT), {0, 1}), Kernel::CheckKind::kRuntime,
              "segment_reduce(): lengths contains negative value!");
      k.check(b.reduce_max(b.compare(b.reduce_sum(l, {1}), b.constant(DType::kS64, s.len, {s.outer}), Cmp::kNE), {0}),
              Kernel::CheckKind::kRuntime,
              "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) when "
              "!unsafe.");
    }
    s.end = s.count ? ops::cumulative(b, l, 1, false) : l;
    s.start = b.sub(s.end, l);
    s.length = l;
  } else {
    s.count = offsets->size(-1) - 1;
    Value o = b.reshape(k.in(*offsets, at::kLong), {s.outer, s.count + 1});
    s.start = b.slice_dim(o, 1, 0, s.count);
    s.end = b.slice_dim(o, 1, 1, s.count + 1);
    s.length = b.sub(s.end, s.start);
  }
  // Segment of element j: the number of segments ending at or before j, if
  // j lies at or after the first start; else none (S).
  const ir::Dims jd{s.outer, s.len, std::max<int64_t>(s.count, 1)};
  Value j = b.iota(DType::kS64, {s.outer, s.len}, 1);
  Value none = b.constant(DType::kS64, static_cast<double>(s.count), {s.outer, s.len});
  if (s.count == 0 || s.len == 0) {
    s.seg = none;
    return s;
  }
  Value ended = b.compare(b.broadcast_in_dim(s.end, jd, {0, 2}), b.broadcast_in_dim(j, jd, {0, 1}), Cmp::kLE);
  Value seg = b.reduce_sum(b.convert(ended, DType::kS64), {2});
  Value first = b.broadcast_in_dim(b.slice_dim(s.start, 1, 0, 1), {s.outer, s.len, 1}, {0, 2});
  Value before = b.compare(j, b.reshape(first, {s.outer, s.len}), Cmp::kLT);
  s.seg = b.select(before, none, seg);
  return s;
}

// Scatter coordinates (o, seg) per element, [O, L, 2].
Value coords(Builder& b, const Segments& s) {
  Value o = b.iota(DType::kS64, {s.outer, s.len}, 0);
  return b.concatenate({b.reshape(o, {s.outer, s.len, 1}), b.reshape(s.seg, {s.outer, s.len, 1})}, 2);
}

at::Tensor segment_reduce(const at::Tensor& data, c10::string_view reduce, const std::optional<at::Tensor>& lengths_in,
                          const std::optional<at::Tensor>& indices_in, const std::optional<at::Tensor>& offsets_in,
                          int64_t axis, bool unsafe, const std::optional<at::Scalar>& initial) {
  const auto lengths = given(lengths_in), indices = given(indices_in), offsets = given(offsets_in);
  const char* op = "aten::segment_reduce";
  axis = at::maybe_wrap_dim(axis, data.dim());
  TORCH_CHECK(!indices.has_value(), "segment_reduce(): indices based reduction is not supported yet.");
  TORCH_CHECK(lengths.has_value() || offsets.has_value(), "segment_reduce(): Either lengths or offsets must be defined.");
  const Red red = reduction_of(reduce);
  const at::Tensor& bounds = offsets ? *offsets : *lengths;
  TORCH_CHECK(data.dim() >= bounds.dim());
  TORCH_CHECK(axis == bounds.dim() - 1, "segment_reduce(): Expected axis to be the last dimension of ",
              offsets ? "offsets" : "lengths", " but got ", axis, ".");
  TORCH_CHECK(at::isFloatingType(data.scalar_type()), "segment_reduce(): expected a floating-point data tensor, got ",
              data.scalar_type());
  const at::ScalarType st = data.scalar_type(), ct = opmath(st);
  const DType c = to_ir(ct);
  Kernel k(op, data);
  Builder& b = k.b();
  Segments s = segments_of(k, data, offsets ? std::nullopt : lengths, offsets, axis, !unsafe && !offsets);
  std::vector<int64_t> out_shape = data.sizes().vec();
  out_shape[axis] = s.count;
  const ir::Dims od{s.outer, s.count, s.inner};
  double ident = 0;
  ir::Body body = ir::Body::kAdd;
  switch (red) {
    case Red::kSum: case Red::kMean: break;
    case Red::kMax: ident = -std::numeric_limits<double>::infinity(); body = ir::Body::kMax; break;
    case Red::kMin: ident = std::numeric_limits<double>::infinity(); body = ir::Body::kMin; break;
    case Red::kProd: ident = 1; body = ir::Body::kMul; break;
  }
  Value init = initial ? b.broadcast_to(k.scalar(*initial, ct), od) : b.constant(c, ident, od);
  Value r = init;
  if (s.count > 0 && s.len > 0 && s.inner > 0 && s.outer > 0) {
    Value x = b.reshape(k.in(data, ct), {s.outer, s.len, s.inner});
    r = b.scatter(init, coords(b, s), x, {0, 1}, {2}, body);
  }
  if (red == Red::kMean) {
    Value n = b.broadcast_in_dim(b.convert(s.length, c), od, {0, 1});
    Value empty = b.compare(n, b.zeros_like(n), Cmp::kEQ);
    Value divided = b.select(b.logical_or(empty, b.compare(r, r, Cmp::kNE)), r, b.div(r, n));
    r = initial ? divided : b.select(empty, b.constant(c, std::numeric_limits<double>::quiet_NaN(), od), divided);
  }
  at::Tensor out = k.out(b.reshape(r, to_dims(out_shape)), st);
  k.run();
  return out;
}

at::Tensor segment_reduce_backward(const at::Tensor& grad, const at::Tensor& output, const at::Tensor& data,
                                   c10::string_view reduce, const std::optional<at::Tensor>& lengths_in,
                                   const std::optional<at::Tensor>& offsets_in, int64_t axis,
                                   const std::optional<at::Scalar>& initial) {
  const auto lengths = given(lengths_in), offsets = given(offsets_in);
  const char* op = "aten::_segment_reduce_backward";
  axis = at::maybe_wrap_dim(axis, data.dim());
  TORCH_CHECK(lengths.has_value() || offsets.has_value(), "segment_reduce(): Either lengths or offsets must be defined.");
  const Red red = reduction_of(reduce);
  const at::ScalarType st = data.scalar_type(), ct = opmath(st);
  const DType c = to_ir(ct);
  Kernel k(op, data);
  Builder& b = k.b();
  Segments s = segments_of(k, data, offsets ? std::nullopt : lengths, offsets, axis, false);
  const ir::Dims dd{s.outer, s.len, s.inner}, od{s.outer, s.count, s.inner};
  Value gi = b.constant(c, 0, dd);
  if (s.count > 0 && s.len > 0 && s.inner > 0 && s.outer > 0) {
    Value x = b.reshape(k.in(data, ct), dd);
    Value g = b.reshape(k.in(grad, ct), od);
    Value out = b.reshape(k.in(output, ct), od);
    // Per element: its segment's gradient, output and length (padded with a
    // zero segment for elements in none).
    auto per_elem = [&](Value v) {
      Value padded = b.concatenate({v, b.constant(c, 0, {s.outer, 1, s.inner})}, 1);
      Value idx = b.concatenate({b.reshape(b.iota(DType::kS64, {s.outer, s.len}, 0), {s.outer, s.len, 1}),
                                 b.reshape(s.seg, {s.outer, s.len, 1})}, 2);
      return b.gather(padded, idx, {0, 1}, {2}, dd);
    };
    Value in_seg = b.broadcast_in_dim(
        b.compare(s.seg, b.constant(DType::kS64, static_cast<double>(s.count), {s.outer, s.len}), Cmp::kLT), dd, {0, 1});
    Value ge = per_elem(g);
    Value len = per_elem(b.broadcast_in_dim(b.convert(s.length, c), od, {0, 1}));
    Value nan = b.compare(x, x, Cmp::kNE);
    Value r;
    switch (red) {
      case Red::kSum: r = ge; break;
      case Red::kMean: r = b.div(ge, len); break;
      case Red::kMax: case Red::kMin: {
        Value hit = b.logical_and(in_seg, b.logical_or(nan, b.compare(x, per_elem(out), Cmp::kEQ)));
        Value cnt = b.scatter(b.constant(c, 0, od), coords(b, s), b.select(hit, b.full_like(x, 1), b.zeros_like(x)),
                              {0, 1}, {2}, ir::Body::kAdd);
        Value n = per_elem(cnt);
        Value split = b.logical_and(b.compare(n, b.full_like(n, 2), Cmp::kGE), b.compare(ge, b.zeros_like(ge), Cmp::kGT));
        r = b.select(hit, b.select(split, b.div(ge, n), ge), b.zeros_like(ge));
        break;
      }
      case Red::kProd: {
        Value zero = b.compare(x, b.zeros_like(x), Cmp::kEQ);
        Value special = b.logical_or(zero, nan);
        auto seg_sum = [&](Value v, ir::Body body, double id) {
          return per_elem(b.scatter(b.constant(c, id, od), coords(b, s), v, {0, 1}, {2}, body));
        };
        Value p_plain = seg_sum(b.select(special, b.full_like(x, 1), x), ir::Body::kMul, 1);
        Value zc = seg_sum(b.select(zero, b.full_like(x, 1), b.zeros_like(x)), ir::Body::kAdd, 0);
        Value nc = seg_sum(b.select(nan, b.full_like(x, 1), b.zeros_like(x)), ir::Body::kAdd, 0);
        Value z_other = b.sub(zc, b.select(zero, b.full_like(x, 1), b.zeros_like(x)));
        Value n_other = b.sub(nc, b.select(nan, b.full_like(x, 1), b.zeros_like(x)));
        Value init = initial ? b.broadcast_to(k.scalar(*initial, ct), dd) : b.full_like(x, 1);
        Value excl = b.mul(init, p_plain);
        excl = b.select(b.compare(z_other, b.zeros_like(z_other), Cmp::kGT), b.mul(excl, b.zeros_like(excl)), excl);
        excl = b.select(b.compare(n_other, b.zeros_like(n_other), Cmp::kGT),
                        b.full_like(excl, std::numeric_limits<double>::quiet_NaN()), excl);
        r = b.select(special, b.mul(ge, excl), b.div(b.mul(ge, per_elem(out)), x));
        break;
      }
    }
    gi = b.select(in_seg, r, b.zeros_like(r));
  }
  at::Tensor result = k.out(b.reshape(gi, to_dims(data.sizes())), st);
  k.run();
  return result;
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("segment_reduce", TORCH_FN(segment_reduce));
  m.impl("_segment_reduce_backward", TORCH_FN(segment_reduce_backward));
}

}  // namespace torchtpu::aten
