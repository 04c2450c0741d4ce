#include "ops/views.h"

#include <algorithm>
#include <numeric>

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

Value read_view(Builder& b, Value flat, const ViewMeta& v) {
  const int64_t n = b.dims(flat)[0];
  const int64_t count = numel(v.sizes);
  DType dt = b.dtype(flat);
  if (count == 0) return b.constant(dt, 0, v.sizes);
  if (is_contiguous(v.sizes, v.strides)) {
    Value s = b.slice(flat, {v.offset}, {v.offset + count});
    return b.reshape(s, v.sizes);
  }
  // Dims that index memory, outermost (largest stride) first.
  std::vector<int64_t> order;
  for (size_t i = 0; i < v.sizes.size(); ++i)
    if (v.sizes[i] > 1 && v.strides[i] != 0) order.push_back(static_cast<int64_t>(i));
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return v.strides[a] > v.strides[c]; });
  if (order.empty()) {
    Value s = b.reshape(b.slice(flat, {v.offset}, {v.offset + 1}), {});
    return b.broadcast_in_dim(s, v.sizes, {});
  }
  bool boxed = true;
  for (size_t j = 0; j + 1 < order.size(); ++j) {
    int64_t t = v.strides[order[j]], t2 = v.strides[order[j + 1]];
    if (t % t2 != 0 || t2 * v.sizes[order[j + 1]] > t) boxed = false;
  }
  if (!boxed) {
    // Overlapping or irregular strides: gather element by element.
    Value idx = flat_indices(b, v);
    return b.gather(flat, idx, {0}, {}, v.sizes);
  }
  // Cut the box [offset, offset + n_1 * t_1) into factor dims, slice each to
  // the view's size, then transpose and broadcast into the view's order.
  const int64_t k = static_cast<int64_t>(order.size());
  const int64_t region = v.sizes[order[0]] * v.strides[order[0]];
  Value r = flat;
  if (v.offset + region > n) {
    Value z = b.constant(dt, 0);
    r = b.pad(r, z, {0}, {v.offset + region - n});
  }
  r = b.slice(r, {v.offset}, {v.offset + region});
  Dims factors{v.sizes[order[0]]};
  for (int64_t j = 1; j < k; ++j) factors.push_back(v.strides[order[j - 1]] / v.strides[order[j]]);
  factors.push_back(v.strides[order[k - 1]]);
  r = b.reshape(r, factors);
  Dims limit;
  for (int64_t j = 0; j < k; ++j) limit.push_back(v.sizes[order[j]]);
  limit.push_back(1);
  r = b.slice(r, Dims(k + 1, 0), limit);
  limit.pop_back();
  r = b.reshape(r, limit);
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> perm;
  for (int64_t d : sorted) perm.push_back(std::find(order.begin(), order.end(), d) - order.begin());
  r = b.transpose(r, perm);
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
  Value idx = flat_indices(b, v);
  return b.scatter(flat, idx, update, {0}, {}, Body::kReplace);
}

}  // namespace torchtpu::ops
