#include "ops/views.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <utility>

namespace torchtpu::ops {

bool is_contiguous(const Dims& sizes, const Dims& strides) {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

std::vector<int64_t> dense_order(const Dims& sizes, const Dims& strides) {
  std::vector<int64_t> order, ones;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return {};
    (sizes[i] == 1 ? ones : order).push_back(static_cast<int64_t>(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return strides[a] > strides[c]; });
  int64_t expected = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (strides[*it] != expected) return {};
    expected *= sizes[*it];
  }
  ones.insert(ones.end(), order.begin(), order.end());
  return ones;
}

Value to_block(Builder& b, Value update, const std::vector<int64_t>& order) {
  const Dims& d = b.dims(update);
  int64_t count = 1;
  for (int64_t x : d) count *= x;
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity &= order[i] == static_cast<int64_t>(i);
  return b.reshape(identity ? update : b.transpose(update, order), {count});
}

static int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// Flat storage index of every element of the view, shape sizes + [1].
static Value flat_indices(Builder& b, const ViewMeta& v) {
  Dims d = v.sizes;
  Value idx = b.constant(DType::kS64, static_cast<double>(v.offset), d);
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i] == 1 || v.strides[i] == 0) continue;
    Value io = b.iota(DType::kS64, d, static_cast<int64_t>(i));
    idx = b.add(idx, b.mul(io, b.constant(DType::kS64, static_cast<double>(v.strides[i]), d)));
  }
  Dims with_vec = d;
  with_vec.push_back(1);
  return b.reshape(idx, with_vec);
}

namespace {

// A view whose memory dims nest (each stride a multiple of the next, with
// room for its extent): the storage cut into factor dims (the strides'
// ratios) holds it as a block. `order`: the dims that index memory,
// outermost first; `factors` the box's dims (the last one the innermost
// stride); `start`/`limit` the view's block in them when the offset falls
// inside the box as a multi-index (inside: a split or narrowed view of a
// contiguous tensor), the box then being the storage's first `box` elements.
struct Box {
  std::vector<int64_t> order;
  Dims factors, start, limit;
  bool inside = false;
  int64_t box = 0;
};

std::optional<Box> box_of(const ViewMeta& v, int64_t n) {
  Box x;
  for (size_t i = 0; i < v.sizes.size(); ++i)
    if (v.sizes[i] > 1 && v.strides[i] != 0) x.order.push_back(static_cast<int64_t>(i));
  std::stable_sort(x.order.begin(), x.order.end(),
                   [&](int64_t a, int64_t c) { return v.strides[a] > v.strides[c]; });
  if (x.order.empty()) return x;
  for (size_t j = 0; j + 1 < x.order.size(); ++j) {
    int64_t t = v.strides[x.order[j]], t2 = v.strides[x.order[j + 1]];
    if (t % t2 != 0 || t2 * v.sizes[x.order[j + 1]] > t) return std::nullopt;
  }
  const int64_t k = static_cast<int64_t>(x.order.size());
  x.factors = {v.sizes[x.order[0]]};
  for (int64_t j = 1; j < k; ++j) x.factors.push_back(v.strides[x.order[j - 1]] / v.strides[x.order[j]]);
  x.factors.push_back(v.strides[x.order[k - 1]]);
  for (int64_t j = 0; j < k; ++j) x.limit.push_back(v.sizes[x.order[j]]);
  x.limit.push_back(1);
  x.start.assign(k + 1, 0);
  int64_t rest = v.offset;
  for (int64_t j = 0; j <= k; ++j) {
    const int64_t stride = j < k ? v.strides[x.order[j]] : 1;
    x.start[j] = rest / stride;
    rest %= stride;
  }
  x.inside = (x.start[0] + x.limit[0]) * v.strides[x.order[0]] <= n;
  for (int64_t j = 1; j <= k; ++j) x.inside = x.inside && x.start[j] + x.limit[j] <= x.factors[j];
  if (x.inside) {
    x.factors[0] = x.start[0] + x.limit[0];
    x.box = x.factors[0] * v.strides[x.order[0]];
  }
  return x;
}

// The dims of `order` in dim order, and the permutation from that to `order`.
std::pair<std::vector<int64_t>, std::vector<int64_t>> by_dim(const std::vector<int64_t>& order) {
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> perm;
  for (int64_t d : order) perm.push_back(std::find(sorted.begin(), sorted.end(), d) - sorted.begin());
  return {sorted, perm};
}

}  // namespace

Value read_view(Builder& b, Value flat, const ViewMeta& v) {
  const int64_t n = b.dims(flat)[0];
  const int64_t count = numel(v.sizes);
  DType dt = b.dtype(flat);
  if (count == 0) return b.constant(dt, 0, v.sizes);
  if (is_contiguous(v.sizes, v.strides)) {
    Value s = b.slice(flat, {v.offset}, {v.offset + count});
    return b.reshape(s, v.sizes);
  }
  std::optional<Box> box = box_of(v, n);
  if (box && box->order.empty()) {
    Value s = b.reshape(b.slice(flat, {v.offset}, {v.offset + 1}), {});
    return b.broadcast_in_dim(s, v.sizes, {});
  }
  if (!box) {
    // Overlapping or irregular strides: gather element by element.
    Value idx = flat_indices(b, v);
    return b.gather(flat, idx, {0}, {}, v.sizes);
  }
  // The box sliced to the view's block, then transposed and broadcast into
  // the view's order. Where the offset is not inside the box, the box is
  // [offset, offset + n_1 * t_1) instead.
  const std::vector<int64_t>& order = box->order;
  Dims factors = box->factors, start = box->start;
  Value r = flat;
  if (box->inside) {
    if (box->box < n) r = b.slice(r, {0}, {box->box});
  } else {
    const int64_t region = v.sizes[order[0]] * v.strides[order[0]];
    if (v.offset + region > n) {
      Value z = b.constant(dt, 0);
      r = b.pad(r, z, {0}, {v.offset + region - n});
    }
    r = b.slice(r, {v.offset}, {v.offset + region});
    start.assign(start.size(), 0);
  }
  r = b.reshape(r, factors);
  Dims end = box->limit;
  for (size_t j = 0; j < end.size(); ++j) end[j] += start[j];
  r = b.slice(r, start, end);
  Dims limit = box->limit;
  limit.pop_back();
  r = b.reshape(r, limit);
  auto [sorted, perm] = by_dim(order);
  std::vector<int64_t> inverse(perm.size());
  for (size_t j = 0; j < perm.size(); ++j) inverse[perm[j]] = static_cast<int64_t>(j);
  r = b.transpose(r, inverse);
  return b.broadcast_in_dim(r, v.sizes, sorted);
}

Value write_view(Builder& b, Value flat, const ViewMeta& v, Value update) {
  const int64_t n = b.dims(flat)[0];
  const int64_t count = numel(v.sizes);
  if (count == 0) return flat;
  if (is_contiguous(v.sizes, v.strides)) {
    Value u = b.reshape(update, {count});
    if (v.offset == 0 && count == n) return u;
    return b.dynamic_update_slice(flat, u, {v.offset});
  }
  const std::vector<int64_t> order = dense_order(v.sizes, v.strides);
  if (!order.empty() && v.offset + count <= n) {
    Value u = to_block(b, update, order);
    if (v.offset == 0 && count == n) return u;
    return b.dynamic_update_slice(flat, u, {v.offset});
  }
  for (size_t i = 0; i < v.sizes.size(); ++i)
    if (v.sizes[i] > 1 && v.strides[i] == 0)
      throw LoweringError(
          "unsupported operation: more than one element of the written-to tensor refers to a single memory "
          "location. Please clone() the tensor before performing the operation.");
  std::optional<Box> box = box_of(v, n);
  if (box && box->inside && !box->order.empty()) {
    // The block written into the box cut into factor dims: a reshape and
    // an update of a slice, with every dim of the tensor kept.
    auto [sorted, perm] = by_dim(box->order);
    Dims kept;
    for (int64_t d : sorted) kept.push_back(v.sizes[d]);
    Value u = b.transpose(b.reshape(update, kept), perm);
    u = b.reshape(u, box->limit);
    Value r = box->box < n ? b.slice(flat, {0}, {box->box}) : flat;
    r = b.dynamic_update_slice(b.reshape(r, box->factors), u, box->start);
    r = b.reshape(r, {box->box});
    return box->box < n ? b.dynamic_update_slice(flat, r, {0}) : r;
  }
  Value idx = flat_indices(b, v);
  return b.scatter(flat, idx, update, {0}, {}, Body::kReplace);
}

}  // namespace torchtpu::ops
