#include "ops/patches.h"

namespace torchtpu::ops {

int64_t patch_count(int64_t size, int64_t kernel, int64_t dilation, int64_t padding, int64_t stride) {
  const int64_t span = size + 2 * padding - (dilation * (kernel - 1) + 1);
  return (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
}

Value im2col(Builder& b, Value x, const PatchParams& p) {
  const Dims d = b.dims(x);
  const int64_t n = d[0], c = d[1];
  const int64_t oh = patch_count(d[2], p.kernel[0], p.dilation[0], p.padding[0], p.stride[0]);
  const int64_t ow = patch_count(d[3], p.kernel[1], p.dilation[1], p.padding[1], p.stride[1]);
  Value xp = b.pad(x, b.constant(b.dtype(x), 0), {0, 0, p.padding[0], p.padding[1]},
                   {0, 0, p.padding[0], p.padding[1]});
  std::vector<Value> parts;
  for (int64_t i = 0; i < p.kernel[0]; ++i)
    for (int64_t j = 0; j < p.kernel[1]; ++j) {
      const int64_t h0 = i * p.dilation[0], w0 = j * p.dilation[1];
      Value s = b.slice(xp, {0, 0, h0, w0}, {n, c, h0 + (oh - 1) * p.stride[0] + 1, w0 + (ow - 1) * p.stride[1] + 1},
                        {1, 1, p.stride[0], p.stride[1]});
      parts.push_back(b.reshape(s, {n, c, 1, oh * ow}));
    }
  return b.reshape(b.concatenate(parts, 2), {n, c * p.kernel[0] * p.kernel[1], oh * ow});
}

Value col2im(Builder& b, Value cols, const Dims& size, const PatchParams& p) {
  const Dims d = b.dims(cols);
  const int64_t n = d[0], k = p.kernel[0] * p.kernel[1], c = d[1] / k;
  const int64_t oh = patch_count(size[0], p.kernel[0], p.dilation[0], p.padding[0], p.stride[0]);
  const int64_t ow = patch_count(size[1], p.kernel[1], p.dilation[1], p.padding[1], p.stride[1]);
  Value v = b.reshape(cols, {n, c, k, oh, ow});
  Value zero = b.constant(b.dtype(cols), 0);
  Value acc;
  for (int64_t i = 0; i < p.kernel[0]; ++i)
    for (int64_t j = 0; j < p.kernel[1]; ++j) {
      const int64_t at = i * p.kernel[1] + j;
      Value piece = b.reshape(b.slice_dim(v, 2, at, at + 1), {n, c, oh, ow});
      // Column (y, x) of this offset lands on pixel (y * stride + i * dilation - padding, ...).
      const int64_t lh = i * p.dilation[0] - p.padding[0], lw = j * p.dilation[1] - p.padding[1];
      Value placed = b.pad(piece, zero, {0, 0, lh, lw},
                           {0, 0, size[0] - lh - ((oh - 1) * p.stride[0] + 1),
                            size[1] - lw - ((ow - 1) * p.stride[1] + 1)},
                           {0, 0, p.stride[0] - 1, p.stride[1] - 1});
      acc = acc.valid() ? b.add(acc, placed) : placed;
    }
  return acc;
}

Value channel_shuffle(Builder& b, Value x, int64_t groups) {
  const Dims d = b.dims(x);
  Dims split{d[0], groups, d[1] / groups};
  std::vector<int64_t> perm{0, 2, 1};
  for (size_t i = 2; i < d.size(); ++i) {
    split.push_back(d[i]);
    perm.push_back(static_cast<int64_t>(i + 1));
  }
  return b.reshape(b.transpose(b.reshape(x, split), perm), d);
}

}  // namespace torchtpu::ops
