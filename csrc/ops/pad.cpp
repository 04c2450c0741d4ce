#include "ops/pad.h"

#include <algorithm>

namespace torchtpu::ops {

namespace {

// The padded range of one dim in input coordinates, [c0, c1), split into the
// part before the input, the part inside it and the part after it.
struct Regions {
  int64_t c0, c1;
  int64_t left_end;     // left: [c0, left_end)
  int64_t mid0, mid1;   // inside: [mid0, mid1)
  int64_t right_begin;  // right: [right_begin, c1)
};

Regions regions(int64_t w, int64_t low, int64_t high) {
  Regions r;
  r.c0 = -low;
  r.c1 = w + high;
  r.left_end = std::min<int64_t>(0, r.c1);
  r.mid0 = std::max<int64_t>(r.c0, 0);
  r.mid1 = std::min(r.c1, w);
  r.right_begin = std::max(w, r.c0);
  return r;
}

Value resized(Builder& b, Value v, int64_t dim, int64_t n) {
  Dims d = b.dims(v);
  d[dim] = n;
  return b.broadcast_to(v, d);
}

Value pad_dim(Builder& b, Value x, int64_t dim, int64_t low, int64_t high, EdgePad mode) {
  const int64_t w = b.dims(x)[dim];
  const Regions r = regions(w, low, high);
  std::vector<Value> parts;
  if (r.left_end > r.c0) {
    if (mode == EdgePad::kReflect)  // c -> -c, for c = c0 .. left_end-1
      parts.push_back(b.reverse(b.slice_dim(x, dim, 1 - r.left_end, 1 - r.c0), {dim}));
    else
      parts.push_back(resized(b, b.slice_dim(x, dim, 0, 1), dim, r.left_end - r.c0));
  }
  if (r.mid1 > r.mid0) parts.push_back(b.slice_dim(x, dim, r.mid0, r.mid1));
  if (r.c1 > r.right_begin) {
    if (mode == EdgePad::kReflect)  // c -> 2(w-1) - c
      parts.push_back(b.reverse(b.slice_dim(x, dim, 2 * w - 1 - r.c1, 2 * w - 1 - r.right_begin), {dim}));
    else
      parts.push_back(resized(b, b.slice_dim(x, dim, w - 1, w), dim, r.c1 - r.right_begin));
  }
  return b.concatenate(parts, dim);
}

// `g` (this dim sized like the padded output) summed back onto `w` input
// positions.
Value unpad_dim(Builder& b, Value g, int64_t dim, int64_t w, int64_t low, int64_t high, EdgePad mode) {
  const Regions r = regions(w, low, high);
  const size_t rank = b.dims(g).size();
  Value zero = b.constant(b.dtype(g), 0);
  auto place = [&](Value v, int64_t at) {
    Dims lo(rank, 0), hi(rank, 0);
    lo[dim] = at;
    hi[dim] = w - at - b.dims(v)[dim];
    return b.pad(v, zero, lo, hi);
  };
  auto piece = [&](int64_t c_begin, int64_t c_end) { return b.slice_dim(g, dim, c_begin - r.c0, c_end - r.c0); };
  auto edge_sum = [&](Value v) { return b.keepdim(b.reduce_sum(v, {dim}), b.dims(v), {dim}); };
  Value acc;
  auto add = [&](Value v) { acc = acc.valid() ? b.add(acc, v) : v; };
  if (r.left_end > r.c0) {
    Value v = piece(r.c0, r.left_end);
    add(mode == EdgePad::kReflect ? place(b.reverse(v, {dim}), 1 - r.left_end) : place(edge_sum(v), 0));
  }
  if (r.mid1 > r.mid0) add(place(piece(r.mid0, r.mid1), r.mid0));
  if (r.c1 > r.right_begin) {
    Value v = piece(r.right_begin, r.c1);
    add(mode == EdgePad::kReflect ? place(b.reverse(v, {dim}), 2 * w - 1 - r.c1) : place(edge_sum(v), w - 1));
  }
  if (!acc.valid()) {
    Dims d = b.dims(g);
    d[dim] = w;
    return b.constant(b.dtype(g), 0, d);
  }
  return acc;
}

}  // namespace

Value edge_pad(Builder& b, Value x, const EdgePads& pads, EdgePad mode) {
  const int64_t lead = b.rank(x) - static_cast<int64_t>(pads.size());
  for (size_t i = 0; i < pads.size(); ++i)
    x = pad_dim(b, x, lead + static_cast<int64_t>(i), pads[i].first, pads[i].second, mode);
  return x;
}

Value edge_pad_backward(Builder& b, Value grad, const Dims& input_dims, const EdgePads& pads, EdgePad mode) {
  const int64_t lead = b.rank(grad) - static_cast<int64_t>(pads.size());
  for (size_t i = pads.size(); i-- > 0;) {
    const int64_t dim = lead + static_cast<int64_t>(i);
    grad = unpad_dim(b, grad, dim, input_dims[dim], pads[i].first, pads[i].second, mode);
  }
  return grad;
}

}  // namespace torchtpu::ops
