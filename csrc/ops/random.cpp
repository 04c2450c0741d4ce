#include "ops/random.h"

#include <cmath>

namespace torchtpu::ops {

namespace {
Value u32c(Builder& b, double v, const Dims& d) { return b.constant(DType::kU32, v, d); }

// lowbias32 (Chris Wellons): an invertible u32 hash with low bias.
Value hash32(Builder& b, Value x) {
  const Dims& d = b.dims(x);
  auto xorshift = [&](Value v, int s) {
    return b.logical_xor(v, b.shift_right_logical(v, u32c(b, s, d)));
  };
  x = xorshift(x, 16);
  x = b.mul(x, u32c(b, 0x7feb352d, d));
  x = xorshift(x, 15);
  x = b.mul(x, u32c(b, 0x846ca68b, d));
  return xorshift(x, 16);
}
}  // namespace

Value random_bits(Builder& b, Value key0, Value key1, const Dims& dims, uint32_t stream) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  Dims flat{n};
  Value counter = b.iota(DType::kU32, flat, 0);
  // Each stream starts the counter at a different (Knuth-hashed) offset.
  const uint32_t start = stream * 2654435761u;
  if (start) counter = b.add(counter, u32c(b, start, flat));
  Value k0 = b.broadcast_to(key0, flat), k1 = b.broadcast_to(key1, flat);
  Value h = hash32(b, b.logical_xor(counter, k0));
  h = hash32(b, b.add(h, k1));
  return b.reshape(h, dims);
}

Value uniform01(Builder& b, Value key0, Value key1, const Dims& dims, uint32_t stream, int digits) {
  Value bits = random_bits(b, key0, key1, dims, stream);
  Value top = b.shift_right_logical(bits, u32c(b, 32 - digits, dims));
  return b.mul(b.convert(top, DType::kF32), b.constant(DType::kF32, std::ldexp(1.0, -digits), dims));
}

Value normal01(Builder& b, Value key0, Value key1, const Dims& dims) {
  Value u1 = uniform01(b, key0, key1, dims, 1);
  Value u2 = uniform01(b, key0, key1, dims, 2);
  // 1 - u1 lies in (0, 1], so the log is finite.
  Value r = b.sqrt(b.mul(b.log(b.sub(b.constant(DType::kF32, 1.0, dims), u1)), b.constant(DType::kF32, -2.0, dims)));
  Value theta = b.mul(u2, b.constant(DType::kF32, 2.0 * M_PI, dims));
  return b.mul(r, b.cos(theta));
}

}  // namespace torchtpu::ops
