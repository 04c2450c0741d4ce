// Random ops on the device generator: uniform, normal (scalar and tensor
// parameters), bernoulli, cauchy, exponential, geometric, log-normal,
// random_ / randint, randperm, multinomial and dropout. Every op draws
// counter-based bits (ops/random.h) from two keys that the generator hands
// out as runtime scalars, so a new draw never recompiles. Parameter checks
// on tensors (probabilities, standard deviations) are device-side checks,
// raised at the next sync point.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>

#include <cmath>
#include <limits>

#include "aten/registry.h"
#include "aten/device.h"
#include "aten/tensor_ir.h"
#include "ops/random.h"
#include "ops/scan.h"
#include "ops/sort.h"

namespace torchtpu::aten {

// The keys are drawn again on every run of a compiled program holding the
// op, from the same generator, so a compiled step draws new numbers as an
// eager one does.
std::pair<Value, Value> random_keys(Kernel& k, const std::optional<at::Generator>& g, const at::Tensor& t) {
  at::Generator gen = g.has_value() && g->defined() ? *g : default_generator(t.device().index());
  at::check_generator<TpuGenerator>(gen);
  auto source = std::make_shared<eager::Redraw>();
  source->draw = [gen]() {
    auto* impl = at::check_generator<TpuGenerator>(gen);
    std::lock_guard<std::mutex> lock(impl->mutex_);
    const std::pair<uint32_t, uint32_t> kv = impl->next_keys();
    return std::vector<eager::HostScalar>{eager::HostScalar::of_int(kv.first), eager::HostScalar::of_int(kv.second)};
  };
  std::vector<Value> v = k.drawn({at::kUInt32, at::kUInt32}, std::move(source));
  return {v[0], v[1]};
}

namespace {

using ops::Cmp;

// Mantissa digits of a float dtype (the grid uniform draws are on).
at::ScalarType float_compute(at::ScalarType st) { return st == at::kDouble ? at::kDouble : at::kFloat; }

// Uniform in (0, 1) (never 0 or 1), as f32: the centre of a 2^-24 grid cell.
Value open01(Builder& b, Value k0, Value k1, const ir::Dims& d, uint32_t stream = 0) {
  Value u = ops::uniform01(b, k0, k1, d, stream);
  return b.add(u, b.constant(DType::kF32, std::ldexp(1.0, -25), d));
}

// Fills `self` with f(u) for u uniform in (0, 1) computed in float32 (float64
// for double), where f gets the kernel, u and the compute type.
template <class F>
at::Tensor& fill_from_uniform(const char* op, at::Tensor& self, const std::optional<at::Generator>& g, F f) {
  if (self.numel() == 0) return self;
  Kernel k(op, self);
  Builder& b = k.b();
  auto [k0, k1] = random_keys(k, g, self);
  const at::ScalarType ct = float_compute(self.scalar_type());
  Value u = b.convert(open01(b, k0, k1, to_dims(self.sizes())), to_ir(ct));
  k.into(self, f(k, u, ct));
  k.run();
  return self;
}

void check_floating(const char* name, const at::Tensor& self) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), name, " only supports floating-point dtypes, got: ",
              self.scalar_type());
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> g) {
  if (self.numel() == 0) return self;
  Kernel k("aten::uniform_", self);
  Builder& b = k.b();
  auto [k0, k1] = random_keys(k, g, self);
  ir::Dims d = to_dims(self.sizes());
  at::ScalarType st = self.scalar_type();
  int digits = st == at::kBFloat16 ? 8 : st == at::kHalf ? 11 : 24;
  Value u = ops::uniform01(b, k0, k1, d, 0, digits);
  at::ScalarType ct = st == at::kDouble ? at::kDouble : at::kFloat;
  u = b.convert(u, to_ir(ct));
  Value r = b.add(b.broadcast_to(k.scalar(from, ct), d), b.mul(u, b.broadcast_to(k.scalar(to - from, ct), d)));
  k.into(self, r);
  k.run();
  return self;
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> g) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (self.numel() == 0) return self;
  Kernel k("aten::normal_", self);
  Builder& b = k.b();
  auto [k0, k1] = random_keys(k, g, self);
  ir::Dims d = to_dims(self.sizes());
  at::ScalarType ct = self.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  Value z = b.convert(ops::normal01(b, k0, k1, d), to_ir(ct));
  Value r = b.add(b.broadcast_to(k.scalar(mean, ct), d), b.mul(z, b.broadcast_to(k.scalar(std, ct), d)));
  k.into(self, r);
  k.run();
  return self;
}

at::Tensor& bernoulli_(at::Tensor& self, double p, std::optional<at::Generator> g) {
  TORCH_CHECK(p >= 0 && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  if (self.numel() == 0) return self;
  Kernel k("aten::bernoulli_", self);
  Builder& b = k.b();
  auto [k0, k1] = random_keys(k, g, self);
  ir::Dims d = to_dims(self.sizes());
  Value u = ops::uniform01(b, k0, k1, d);
  k.into(self, b.compare(u, b.broadcast_to(k.scalar(p, at::kFloat), d), Cmp::kLT));
  k.run();
  return self;
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  Kernel k("aten::native_dropout", input);
  Builder& b = k.b();
  Value x = k.in(input);
  ir::Dims d = b.dims(x);
  at::Tensor out, mask;
  k.elementwise({&input});  // as the CPU: the output in input's layout, a training mask row-major
  if (!train.value_or(true) || p == 0) {
    out = k.out(x, input.scalar_type());
    mask = k.out(b.constant(DType::kBool, 1, d), at::kBool);
  } else {
    auto [k0, k1] = random_keys(k, std::nullopt, input);
    Value u = ops::uniform01(b, k0, k1, d);
    Value keep = b.compare(u, b.broadcast_to(k.scalar(1.0 - p, at::kFloat), d), Cmp::kLT);
    Value scale = b.broadcast_to(k.scalar(p == 1 ? 0.0 : 1.0 / (1.0 - p), input.scalar_type()), d);
    out = k.out(b.select(keep, b.mul(x, scale), b.zeros_like(x)), input.scalar_type());
    k.elementwise(false);
    mask = k.out(keep, at::kBool);
  }
  k.run();
  return {out, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  Kernel k("aten::native_dropout_backward", grad);
  k.elementwise({&grad, &mask});
  Builder& b = k.b();
  // grad * mask * scale, as the CPU: integer and bool gradients give the
  // default float dtype; 16-bit ones multiply by the scale in float32; a NaN
  // gradient stays NaN where dropped. (XLA turns a product with a converted
  // mask into a select.)
  const at::ScalarType rt = at::isIntegralType(grad.scalar_type(), /*includeBool=*/true)
                                ? at::typeMetaToScalarType(at::get_default_dtype())
                                : grad.scalar_type();
  const at::ScalarType mt = at::isReducedFloatingType(rt) ? at::kFloat : rt;
  Value g = k.in(grad);
  Value m = k.in(mask, at::kBool);
  Value kept = b.select(m, g, b.dtype(g) == ir::DType::kBool ? b.zeros_like(g) : b.mul(g, b.zeros_like(g)));
  kept = b.convert(kept, to_ir(mt));
  Value scaled = b.mul(kept, b.broadcast_to(k.scalar(scale, mt), b.dims(kept)));
  at::Tensor out = k.out(scaled, rt);
  k.run();
  return out;
}


// median + sigma * tan(pi * (u - 1/2)).
at::Tensor& cauchy_(at::Tensor& self, double median, double sigma, std::optional<at::Generator> g) {
  check_floating("cauchy_", self);
  TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  return fill_from_uniform("aten::cauchy_", self, g, [&](Kernel& k, Value u, at::ScalarType ct) {
    Builder& b = k.b();
    const ir::Dims d = b.dims(u);
    Value t = b.tan(b.mul(b.sub(u, b.constant(to_ir(ct), 0.5, d)), b.constant(to_ir(ct), M_PI, d)));
    return b.add(b.broadcast_to(k.scalar(median, ct), d), b.mul(b.broadcast_to(k.scalar(sigma, ct), d), t));
  });
}

// -log(1 - u) / lambda: positive and finite.
at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> g) {
  check_floating("exponential_", self);
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  return fill_from_uniform("aten::exponential_", self, g, [&](Kernel& k, Value u, at::ScalarType ct) {
    Builder& b = k.b();
    const ir::Dims d = b.dims(u);
    Value e = b.neg(b.log1p(b.neg(u)));
    return b.div(e, b.broadcast_to(k.scalar(lambd, ct), d));
  });
}

// ceil(log(u) / log(1 - p)): the number of trials up to the first success (>= 1).
at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> g) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  TORCH_CHECK(self.scalar_type() != at::kBool, "geometric_ is not implemented for 'Bool'");
  return fill_from_uniform("aten::geometric_", self, g, [&](Kernel& k, Value u, at::ScalarType ct) {
    Builder& b = k.b();
    const ir::Dims d = b.dims(u);
    Value r = b.div(b.log(u), b.broadcast_to(k.scalar(std::log1p(-p), ct), d));
    return b.max(b.ceil(r), b.constant(to_ir(ct), 1, d));
  });
}

// exp(mean + std * z).
at::Tensor& log_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> g) {
  check_floating("log_normal_", self);
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  if (self.numel() == 0) return self;
  Kernel k("aten::log_normal_", self);
  Builder& b = k.b();
  auto [k0, k1] = random_keys(k, g, self);
  const ir::Dims d = to_dims(self.sizes());
  const at::ScalarType ct = float_compute(self.scalar_type());
  Value z = b.convert(ops::normal01(b, k0, k1, d), to_ir(ct));
  k.into(self, b.exp(b.add(b.broadcast_to(k.scalar(mean, ct), d), b.mul(z, b.broadcast_to(k.scalar(std, ct), d)))));
  k.run();
  return self;
}

// ---- normal with tensor parameters ----------------------------------------------------

// mean + std * z over the broadcast shape, in `dtype`; tensor stds are
// checked on the device.
at::Tensor normal_impl(const char* op, const at::Tensor* mean_t, double mean, const at::Tensor* std_t, double std,
                       const std::optional<at::Generator>& g, at::Tensor* out) {
  const at::Tensor& ref = mean_t ? *mean_t : *std_t;
  TORCH_CHECK(std_t || std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  TORCH_CHECK(!ref.is_complex(), "normal expects floating-point tensors");
  std::vector<int64_t> shape = mean_t && std_t ? at::infer_size(mean_t->sizes(), std_t->sizes())
                                                : ref.sizes().vec();
  const at::ScalarType st = out ? out->scalar_type() : ref.scalar_type();
  TORCH_CHECK(at::isFloatingType(st), "normal expects floating-point outputs, got ", st);
  Kernel k(op, ref.device());
  Builder& b = k.b();
  const ir::Dims d(shape.begin(), shape.end());
  const at::ScalarType ct = float_compute(st);
  Value m = mean_t ? b.broadcast_to(k.in(*mean_t, ct), d) : b.broadcast_to(k.scalar(mean, ct), d);
  Value s = std_t ? b.broadcast_to(k.in(*std_t, ct), d) : b.broadcast_to(k.scalar(std, ct), d);
  if (std_t) k.check(b.logical_not(b.compare(s, b.constant(to_ir(ct), 0, d), Cmp::kGE)), Kernel::CheckKind::kRuntime,
                     "normal expects all elements of std >= 0.0");
  Value r = m;
  if (c10::multiply_integers(shape) > 0) {
    auto [k0, k1] = random_keys(k, g, ref);
    r = b.add(b.mul(b.convert(ops::normal01(b, k0, k1, d), to_ir(ct)), s), m);
  }
  if (out) {
    k.into_resized(*out, r);
    k.run();
    return *out;
  }
  at::Tensor res = k.out(r, st);
  k.run();
  return res;
}

at::Tensor normal_tf(const at::Tensor& mean, double std, std::optional<at::Generator> g) {
  return normal_impl("aten::normal.Tensor_float", &mean, 0, nullptr, std, g, nullptr);
}
at::Tensor& normal_tf_out(const at::Tensor& mean, double std, std::optional<at::Generator> g, at::Tensor& out) {
  return normal_impl("aten::normal.Tensor_float_out", &mean, 0, nullptr, std, g, &out), out;
}
at::Tensor normal_ft(double mean, const at::Tensor& std, std::optional<at::Generator> g) {
  return normal_impl("aten::normal.float_Tensor", nullptr, mean, &std, 0, g, nullptr);
}
at::Tensor& normal_ft_out(double mean, const at::Tensor& std, std::optional<at::Generator> g, at::Tensor& out) {
  return normal_impl("aten::normal.float_Tensor_out", nullptr, mean, &std, 0, g, &out), out;
}
at::Tensor normal_tt(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> g) {
  return normal_impl("aten::normal.Tensor_Tensor", &mean, 0, &std, 0, g, nullptr);
}
at::Tensor& normal_tt_out(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> g,
                          at::Tensor& out) {
  return normal_impl("aten::normal.Tensor_Tensor_out", &mean, 0, &std, 0, g, &out), out;
}

// ---- bernoulli with tensor probabilities ------------------------------------------------

// u < p, with p in [0, 1] checked on the device (as the CPU's assert).
void bernoulli_into(const char* op, const at::Tensor& p, const at::Tensor& dst, const std::optional<at::Generator>& g) {
  TORCH_CHECK(at::isFloatingType(p.scalar_type()), op, ": expected a floating-point probability tensor, got ",
              p.scalar_type());
  if (dst.numel() == 0) return;
  Kernel k(op, dst.device());
  Builder& b = k.b();
  const ir::Dims d = to_dims(dst.sizes());
  Value pv = b.broadcast_to(k.in(p, at::kFloat), d);
  Value bad = b.logical_not(b.logical_and(b.compare(pv, b.constant(DType::kF32, 0, d), Cmp::kGE),
                                          b.compare(pv, b.constant(DType::kF32, 1, d), Cmp::kLE)));
  k.check(bad, Kernel::CheckKind::kRuntime, std::string(op) + ": expected 0 <= p <= 1 for every probability");
  auto [k0, k1] = random_keys(k, g, dst);
  k.into(dst, b.compare(ops::uniform01(b, k0, k1, d), pv, Cmp::kLT));
  k.run();
}

at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> g) {
  at::infer_size(self.sizes(), p.sizes());  // p must broadcast to self
  TORCH_CHECK(at::is_expandable_to(p.sizes(), self.sizes()), "bernoulli_: p of shape ", p.sizes(),
              " cannot be broadcast to self of shape ", self.sizes());
  bernoulli_into("aten::bernoulli_.Tensor", p, self, g);
  return self;
}
at::Tensor& bernoulli_out(const at::Tensor& self, std::optional<at::Generator> g, at::Tensor& out) {
  at::native::resize_output(out, self.sizes());
  bernoulli_into("aten::bernoulli.out", self, out, g);
  return out;
}
at::Tensor bernoulli(const at::Tensor& self, std::optional<at::Generator> g) {
  at::Tensor out = empty_device(self.sizes(), self.scalar_type(), self.device().index());
  bernoulli_into("aten::bernoulli", self, out, g);
  return out;
}

// ---- integers: random_, randint, randperm ------------------------------------------------

// from + (bits mod range) for range in [1, 2^63), as the CPU's kernel (32-bit
// draws below 2^32, 64-bit ones above), converted to self's dtype.
at::Tensor& random_range(const char* op, at::Tensor& self, int64_t from, uint64_t range,
                         const std::optional<at::Generator>& g) {
  const bool pow2 = range != 0 && (range & (range - 1)) == 0;
  TORCH_CHECK_NOT_IMPLEMENTED(range < (uint64_t{1} << 63) || range == 0 || pow2, op,
                              ": ranges of more than 2^63 values are not supported on tpu");
  if (self.numel() == 0) return self;
  Kernel k(op, self);
  Builder& b = k.b();
  auto [k0, k1] = random_keys(k, g, self);
  const ir::Dims d = to_dims(self.sizes());
  // 64 random bits from two 32-bit streams; a draw r as int64 plus `from`.
  auto bits64 = [&] {
    Value hi = b.convert(ops::random_bits(b, k0, k1, d, 1), DType::kU64);
    Value lo = b.convert(ops::random_bits(b, k0, k1, d, 2), DType::kU64);
    return b.logical_or(b.shift_left(hi, b.constant(DType::kU64, 32, d)), lo);
  };
  auto plus_from = [&](Value r) { return b.add(r, b.broadcast_to(k.scalar(from, at::kLong), d)); };
  Value v;
  if (range == 0) {  // the whole int64 range
    v = b.bitcast_convert(bits64(), DType::kS64);
  } else if (range < (uint64_t{1} << 32)) {
    Value bits = ops::random_bits(b, k0, k1, d, 0);
    Value r = b.rem(bits, b.broadcast_to(k.scalar(static_cast<int64_t>(range), at::kUInt32), d));
    v = plus_from(b.convert(r, DType::kS64));
  } else if (pow2) {  // the top log2(range) bits
    const int log2 = 63 - __builtin_clzll(range);
    Value r = b.shift_right_logical(bits64(), b.constant(DType::kU64, 64 - log2, d));
    v = plus_from(b.bitcast_convert(r, DType::kS64));
  } else {
    Value r = b.rem(bits64(), b.broadcast_to(k.scalar(static_cast<int64_t>(range), at::kUInt64), d));
    v = plus_from(b.bitcast_convert(r, DType::kS64));
  }
  k.into(self, self.scalar_type() == at::kBool ? b.compare(v, b.constant(DType::kS64, 0, d), Cmp::kNE) : v);
  k.run();
  return self;
}

// The largest value random_ draws for self's dtype: 2^digits for floats,
// the type's maximum for integers, 1 for bool.
int64_t random_max(at::ScalarType st) {
  switch (st) {
    case at::kBool: return 1;
    case at::kByte: return 255;
    case at::kChar: return 127;
    case at::kShort: return 32767;
    case at::kInt: return 2147483647;
    case at::kLong: return std::numeric_limits<int64_t>::max();
    case at::kDouble: return int64_t{1} << 53;
    case at::kFloat: return int64_t{1} << 24;
    case at::kHalf: return int64_t{1} << 11;
    case at::kBFloat16: return int64_t{1} << 8;
    default: TORCH_CHECK(false, "random_ handles only integral, floating-point and boolean types, got ", st);
  }
}

void check_in_range(int64_t v, at::ScalarType st, const char* what) {
  if (at::isFloatingType(st)) {
    const int64_t m = random_max(st);
    TORCH_CHECK(v >= -m && v <= m, what, " is out of bounds [", -m, ", ", m, "]. If you want to draw from a "
                "larger range, use a wider floating-point type");
    return;
  }
  const int64_t lo = st == at::kBool ? 0 : st == at::kByte ? 0 : st == at::kLong ? std::numeric_limits<int64_t>::min()
                                                                                  : -random_max(st) - 1;
  TORCH_CHECK(v >= lo && v <= random_max(st), what, " is out of bounds for ", c10::toString(st));
}

at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> g) {
  const at::ScalarType st = self.scalar_type();
  if (to) {
    TORCH_CHECK(from < *to, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", *to);
    check_in_range(from, st, "from");
    check_in_range(*to - 1, st, "to - 1");
    return random_range("aten::random_.from", self, from, static_cast<uint64_t>(*to) - static_cast<uint64_t>(from), g);
  }
  if (from == std::numeric_limits<int64_t>::lowest()) return random_range("aten::random_.from", self, from, 0, g);
  const int64_t to_inc = random_max(st);
  TORCH_CHECK(from <= to_inc, "random_ expects 'from' to be less than or equal to 'to_inc', but got from=", from,
              " > to_inc=", to_inc);
  check_in_range(from, st, "from");
  return random_range("aten::random_.from", self, from, static_cast<uint64_t>(to_inc) - static_cast<uint64_t>(from) + 1,
                      g);
}
at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> g) {
  TORCH_CHECK(0 < to, "random_ expects 'from' to be less than 'to', but got from=0 >= to=", to);
  check_in_range(to - 1, self.scalar_type(), "to - 1");
  return random_range("aten::random_.to", self, 0, static_cast<uint64_t>(to), g);
}
at::Tensor& random_all_(at::Tensor& self, std::optional<at::Generator> g) {
  const int64_t m = random_max(self.scalar_type());
  return random_range("aten::random_", self, 0, static_cast<uint64_t>(m) + 1, g);
}

// A uniform permutation: indices sorted by random 32-bit keys (stable, so
// equal keys keep index order).
at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> g, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  if (at::isFloatingType(out.scalar_type()))
    TORCH_CHECK(n <= random_max(out.scalar_type()) + 1, "n cannot be greater than ", random_max(out.scalar_type()) + 1,
                " for ", out.scalar_type(), " type.");
  at::native::resize_output(out, {n});
  if (n == 0) return out;
  Kernel k("aten::randperm.generator_out", out);
  Builder& b = k.b();
  auto [k0, k1] = random_keys(k, g, out);
  Value bits = ops::random_bits(b, k0, k1, {n}, 0);
  auto sorted = b.sort({bits, b.iota(DType::kS64, {n}, 0)}, 0, false, true);
  k.into(out, sorted[1]);
  k.run();
  return out;
}

// ---- multinomial ---------------------------------------------------------------------------

// Without replacement (or one sample): the n largest p / q with q ~ Exp(1)
// (the CPU's Gumbel trick); with replacement: inverse-CDF lookups of uniform
// draws by PyTorch's binary search on the normalized running sum.
at::Tensor& multinomial_out(const at::Tensor& self, int64_t n, bool replacement, std::optional<at::Generator> g,
                            at::Tensor& out) {
  const char* op = "aten::multinomial";
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(out.scalar_type() == at::kLong, "multinomial expects Long tensor out, got: ", out.scalar_type());
  TORCH_CHECK(n > 0, "cannot sample n_sample <= 0 samples");
  const int64_t cats = self.size(-1);
  TORCH_CHECK(replacement || n <= cats, "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(cats <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
  const int64_t rows = self.dim() == 1 ? 1 : self.size(0);
  if (self.dim() == 1) at::native::resize_output(out, {n});
  else at::native::resize_output(out, {rows, n});
  if (out.numel() == 0) return out;
  Kernel k(op, self);
  Builder& b = k.b();
  const ir::Dims pd{rows, cats};
  Value p = b.reshape(k.in(self, at::kFloat), pd);
  Value zero = b.constant(DType::kF32, 0, pd);
  Value finite_nonneg = b.logical_and(b.compare(p, zero, Cmp::kGE),
                                      b.compare(p, b.constant(DType::kF32, std::numeric_limits<double>::infinity(), pd), Cmp::kLT));
  k.check(b.logical_not(finite_nonneg), Kernel::CheckKind::kRuntime,
          "probability tensor contains either `inf`, `nan` or element < 0");
  Value sums = b.reduce_sum(p, {1});
  k.check(b.compare(sums, b.constant(DType::kF32, 0, {rows}), Cmp::kLE), Kernel::CheckKind::kRuntime,
          "invalid multinomial distribution (sum of probabilities <= 0)");
  auto [k0, k1] = random_keys(k, g, self);
  Value idx;
  if (!replacement || n == 1) {
    Value u = open01(b, k0, k1, pd);
    Value q = b.neg(b.log(u));  // Exp(1)
    auto [vals, order] = ops::sort_with_indices(b, b.div(p, q), 1, /*descending=*/true);
    (void)vals;
    idx = b.slice_dim(order, 1, 0, n);
  } else {
    Value cdf = b.div(ops::cumulative(b, p, 1, false), b.broadcast_in_dim(sums, pd, {0}));
    // The last bucket reads 1, as the CPU sets it.
    Value last = b.compare(b.iota(DType::kS64, pd, 1), b.constant(DType::kS64, static_cast<double>(cats - 1), pd), Cmp::kEQ);
    cdf = b.select(last, b.constant(DType::kF32, 1, pd), cdf);
    Value u = ops::uniform01(b, k0, k1, {rows, n});
    idx = ops::search_sorted(b, cdf, Value{}, u, /*right=*/false);
  }
  k.into(out, b.reshape(idx, to_dims(out.sizes())));
  k.run();
  return out;
}

at::Tensor multinomial(const at::Tensor& self, int64_t n, bool replacement, std::optional<at::Generator> g) {
  at::Tensor out = empty_device({0}, at::kLong, self.device().index());
  return multinomial_out(self, n, replacement, g, out);
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("uniform_", TORCH_FN(uniform_));
  m.impl("normal_", TORCH_FN(normal_));
  m.impl("normal.Tensor_float", TORCH_FN(normal_tf));
  m.impl("normal.Tensor_float_out", TORCH_FN(normal_tf_out));
  m.impl("normal.float_Tensor", TORCH_FN(normal_ft));
  m.impl("normal.float_Tensor_out", TORCH_FN(normal_ft_out));
  m.impl("normal.Tensor_Tensor", TORCH_FN(normal_tt));
  m.impl("normal.Tensor_Tensor_out", TORCH_FN(normal_tt_out));
  m.impl("bernoulli_.float", TORCH_FN(bernoulli_));
  m.impl("bernoulli_.Tensor", TORCH_FN(bernoulli_tensor_));
  m.impl("bernoulli", TORCH_FN(bernoulli));
  m.impl("bernoulli.out", TORCH_FN(bernoulli_out));
  m.impl("cauchy_", TORCH_FN(cauchy_));
  m.impl("exponential_", TORCH_FN(exponential_));
  m.impl("geometric_", TORCH_FN(geometric_));
  m.impl("log_normal_", TORCH_FN(log_normal_));
  m.impl("random_.from", TORCH_FN(random_from_));
  m.impl("random_.to", TORCH_FN(random_to_));
  m.impl("random_", TORCH_FN(random_all_));
  m.impl("randperm.generator_out", TORCH_FN(randperm_out));
  m.impl("multinomial", TORCH_FN(multinomial));
  m.impl("multinomial.out", TORCH_FN(multinomial_out));
  m.impl("native_dropout", TORCH_FN(native_dropout));
  m.impl("native_dropout_backward", TORCH_FN(native_dropout_backward));
}

}  // namespace torchtpu::aten
