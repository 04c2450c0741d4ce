// Matrix products, concatenation, triangular masks, arange and linspace.
#include <ATen/WrapDimUtils.h>
#include <c10/core/DeviceGuard.h>

#include "aten/registry.h"
#include "aten/device.h"
#include "aten/linspace.h"
#include "aten/tensor_ir.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

// ---- matrix products ------------------------------------------------------------

at::ScalarType matmul_type(const char* op, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected m1 and m2 to have the same dtype, but got: ",
              a.scalar_type(), " != ", b.scalar_type());
  return a.scalar_type();
}

// `acc`: the result type of the product (float32 for a 16-bit product that
// is combined with a bias before rounding, as PyTorch's CPU addmm does).
Value mm_value(Kernel& k, const at::Tensor& a, const at::Tensor& b, std::optional<at::ScalarType> acc = std::nullopt) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, k.op(), ": expected 2-D tensors, got ", a.dim(), "-D and ", b.dim(), "-D");
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1),
              " and ", b.size(0), "x", b.size(1), ")");
  at::ScalarType t = matmul_type(k.op(), a, b);
  return k.b().dot_general(k.in(a), k.in(b), {}, {}, {1}, {0}, to_ir(acc.value_or(t)));
}

at::Tensor& mm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  Kernel k("aten::mm.out", a);
  k.result(mm_value(k, a, b), a.scalar_type(), &out);
  k.run();
  return out;
}

Value bmm_value(Kernel& k, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 3 && b.dim() == 3, "batch1 and batch2 must be 3D tensors");
  TORCH_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), "Expected size for first two dimensions of batch2 "
              "tensor to be: [", a.size(0), ", ", a.size(2), "] but got: [", b.size(0), ", ", b.size(1), "].");
  at::ScalarType t = matmul_type(k.op(), a, b);
  return k.b().dot_general(k.in(a), k.in(b), {0}, {0}, {2}, {1}, to_ir(t));
}
at::Tensor& bmm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  Kernel k("aten::bmm.out", a);
  k.result(bmm_value(k, a, b), a.scalar_type(), &out);
  k.run();
  return out;
}

bool is_one(const at::Scalar& s) { return s.isIntegral(true) ? s.toLong() == 1 : s.toDouble() == 1.0; }

Value addmm_value(Kernel& k, const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                  const at::Scalar& alpha) {
  Builder& bb = k.b();
  // 16-bit: product, scaling and bias in float32, rounded once.
  const at::ScalarType t = at::isReducedFloatingType(a.scalar_type()) ? at::kFloat : a.scalar_type();
  Value p = mm_value(k, a, b, t);
  if (!is_one(alpha)) p = bb.mul(p, bb.broadcast_to(k.scalar(alpha, t), bb.dims(p)));
  bool beta_zero = beta.isIntegral(true) ? beta.toLong() == 0 : beta.toDouble() == 0.0;
  if (beta_zero) return p;
  Value c = bb.broadcast_to(k.in(bias, t), bb.dims(p));
  if (!is_one(beta)) c = bb.mul(c, bb.broadcast_to(k.scalar(beta, t), bb.dims(c)));
  return bb.add(c, p);
}
at::Tensor& addmm_out(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  Kernel k("aten::addmm.out", a);
  k.result(addmm_value(k, bias, a, b, beta, alpha), a.scalar_type(), &out);
  k.run();
  return out;
}

// In place, the result has self's shape, so self must be the 2-D outer
// product's shape (PyTorch's CPU check); the value is the composite addr.
at::Tensor& addr_(at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2, const at::Scalar& beta,
                  const at::Scalar& alpha) {
  TORCH_CHECK(v1.dim() == 1, "addr: Expected 1-D argument vec1, but got ", v1.dim(), "-D");
  TORCH_CHECK(v2.dim() == 1, "addr: Expected 1-D argument vec2, but got ", v2.dim(), "-D");
  TORCH_CHECK(self.dim() == 2, "2D tensor expected, got ", self.dim(), "D tensor for input");
  TORCH_CHECK(self.size(0) == v1.size(0) && self.size(1) == v2.size(0), "size mismatch, input: ", self.sizes(),
              ", v1: ", v1.sizes(), ", v2: ", v2.sizes());
  return self.copy_(at::addr(self, v1, v2, beta, alpha));
}

at::Tensor dot(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 1 && b.dim() == 1, "1D tensors expected, but got ", a.dim(), "D and ", b.dim(), "D tensors");
  TORCH_CHECK(a.size(0) == b.size(0), "inconsistent tensor size, expected tensor [", a.size(0),
              "] and src [", b.size(0), "] to have the same number of elements, but got ", a.size(0), " and ",
              b.size(0), " elements respectively");
  Kernel k("aten::dot", a);
  at::ScalarType t = matmul_type("aten::dot", a, b);
  at::Tensor out = k.out(k.b().dot_general(k.in(a), k.in(b), {}, {}, {0}, {0}, to_ir(t)), t);
  k.run();
  return out;
}
at::Tensor mv(const at::Tensor& a, const at::Tensor& v) {
  TORCH_CHECK(a.dim() == 2 && v.dim() == 1 && a.size(1) == v.size(0), "size mismatch, got input (", a.size(0),
              "), mat (", a.sizes(), "), vec (", v.sizes(), ")");
  Kernel k("aten::mv", a);
  at::ScalarType t = matmul_type("aten::mv", a, v);
  at::Tensor out = k.out(k.b().dot_general(k.in(a), k.in(v), {}, {}, {1}, {0}, to_ir(t)), t);
  k.run();
  return out;
}

// ---- concatenation ------------------------------------------------------------------

at::Tensor cat_impl(const at::ITensorListRef& tensors, int64_t dim, const at::Tensor* out) {
  std::vector<at::Tensor> ts;
  const at::Tensor* ref = nullptr;
  for (const at::Tensor& t : tensors) ts.push_back(t);
  TORCH_CHECK(!ts.empty(), "torch.cat(): expected a non-empty list of Tensors");
  at::ScalarType rt = ts[0].scalar_type();
  for (const at::Tensor& t : ts) rt = at::promote_types(rt, t.scalar_type());
  for (size_t i = 0; i < ts.size(); ++i)
    TORCH_CHECK(ts[i].dim() > 0, "zero-dimensional tensor (at position ", i, ") cannot be concatenated");
  std::vector<const at::Tensor*> used;
  for (const at::Tensor& t : ts) {
    // Legacy behavior: 1-D empty tensors are skipped.
    if (t.dim() == 1 && t.numel() == 0) continue;
    used.push_back(&t);
    if (!ref) ref = &t;
  }
  if (!ref) ref = &ts[0];
  int64_t w = at::maybe_wrap_dim(dim, ref->dim());
  for (const at::Tensor* t : used) {
    TORCH_CHECK(t->dim() == ref->dim(), "Tensors must have same number of dimensions: got ", ref->dim(), " and ",
                t->dim());
    for (int64_t i = 0; i < t->dim(); ++i)
      TORCH_CHECK(i == w || t->size(i) == ref->size(i), "Sizes of tensors must match except in dimension ", w,
                  ". Expected size ", ref->size(i), " but got size ", t->size(i), " for tensor number ",
                  &*t - &ts[0], " in the list.");
  }
  Kernel k("aten::cat", out ? out->device() : ref->device());
  std::vector<Value> vs;
  for (const at::Tensor* t : used) vs.push_back(k.in(*t, rt));
  Value r = vs.empty() ? k.in(*ref, rt) : k.b().concatenate(vs, w);
  at::Tensor result = k.result(r, rt, out);
  k.run();
  return result;
}
at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  return handed(out, cat_impl(tensors, dim, given(out)));
}

// ---- triangular masks, arange ------------------------------------------------------------

Value tri_value(Kernel& k, const at::Tensor& self, int64_t diagonal, bool upper) {
  TORCH_CHECK(self.dim() >= 2, upper ? "triu" : "tril", ": input tensor must have at least 2 dimensions");
  Builder& b = k.b();
  Value x = k.in(self);
  ir::Dims d = b.dims(x);
  int64_t r = static_cast<int64_t>(d.size());
  Value row = b.iota(DType::kS64, d, r - 2), col = b.iota(DType::kS64, d, r - 1);
  Value diff = b.sub(col, row);
  Value keep = b.compare(diff, b.constant(DType::kS64, static_cast<double>(diagonal), d), upper ? Cmp::kGE : Cmp::kLE);
  return b.select(keep, x, b.zeros_like(x));
}
at::Tensor& triu_out(const at::Tensor& s, int64_t diag, at::Tensor& out) {
  Kernel k("aten::triu.out", s);
  k.result(tri_value(k, s, diag, true), s.scalar_type(), &out);
  k.run();
  return out;
}
at::Tensor& tril_out(const at::Tensor& s, int64_t diag, at::Tensor& out) {
  Kernel k("aten::tril.out", s);
  k.result(tri_value(k, s, diag, false), s.scalar_type(), &out);
  k.run();
  return out;
}

at::Tensor& arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out) {
  // As PyTorch's CPU kernel: integer results take the bounds and step as
  // int64 (truncated); int64 results are sized in integer arithmetic.
  const bool integral = at::isIntegralType(out.scalar_type(), /*includeBool=*/false);
  double s = start.toDouble(), e = end.toDouble(), st = step.toDouble();
  int64_t n = 0;
  if (integral) {
    const int64_t xs = start.toLong(), xe = end.toLong(), xst = step.toLong();
    TORCH_CHECK(xst != 0, "step must be nonzero");
    TORCH_CHECK((xst > 0 && xe >= xs) || (xst < 0 && xe <= xs),
                "upper bound and larger bound inconsistent with step sign");
    n = out.scalar_type() == at::kLong ? (xe - xs + xst - (xst > 0 ? 1 : -1)) / xst
                                       : static_cast<int64_t>(std::ceil(static_cast<double>(e - s) / st));
  } else {
    TORCH_CHECK(st != 0, "step must be nonzero");
    TORCH_CHECK(std::isfinite(s) && std::isfinite(e), "unsupported range: ", s, " -> ", e);
    TORCH_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), "upper bound and larger bound inconsistent with step sign");
    n = static_cast<int64_t>(std::ceil((e - s) / st));
  }
  if (out.numel() != n) out.resize_({n});
  if (n == 0) return out;
  Kernel k("aten::arange", out);
  Builder& b = k.b();
  // PyTorch's accumulate type: int64 for integers, double for float32 and
  // float64, float32 for 16-bit floats; the value is rounded once.
  at::ScalarType ct = integral ? at::kLong : at::isReducedFloatingType(out.scalar_type()) ? at::kFloat : at::kDouble;
  Value i = b.iota(to_ir(ct), {n}, 0);
  const at::Scalar first = integral ? at::Scalar(start.toLong()) : start;
  const at::Scalar stride = integral ? at::Scalar(step.toLong()) : step;
  Value r = b.add(b.broadcast_to(k.scalar(first, ct), {n}), b.mul(i, b.broadcast_to(k.scalar(stride, ct), {n})));
  k.into(out, r);
  k.run();
  return out;
}

}  // namespace

// As PyTorch's CPU kernel: step = (end - start) / (steps - 1) in the result
// dtype (double for integers); the first half counts up from start, the
// second down from end; 16-bit floats round after each operation.
Value linspace_values(Kernel& k, Value s0, Value e0, int64_t steps, at::ScalarType rt) {
  Builder& b = k.b();
  const bool half = at::isReducedFloatingType(rt);
  const at::ScalarType ct = linspace_compute_type(rt);
  auto round = [&](Value v) { return half ? b.convert(b.convert(v, to_ir(rt)), to_ir(ct)) : v; };
  if (steps == 1) return b.reshape(s0, {1});
  // The divisor is a parameter: XLA turns a division by a constant into a
  // multiplication by its reciprocal, which rounds differently.
  Value step = round(b.div(round(b.sub(e0, s0)), k.scalar(at::Scalar(steps - 1), ct)));
  const ir::Dims n{steps};
  // The index becomes the result's float type first (16-bit: rounded). The
  // CPU's compiler fuses start + step * idx into one multiply-add for
  // float32: computed in float64 and rounded once here.
  const bool fma = rt == at::kFloat;
  const at::ScalarType mt = fma ? at::kDouble : ct;
  auto as_index = [&](Value i) { return b.convert(round(b.convert(i, to_ir(ct))), to_ir(mt)); };
  Value iota = b.iota(DType::kS64, n, 0);
  Value idx = as_index(iota);
  Value back = as_index(b.sub(b.constant(DType::kS64, static_cast<double>(steps - 1), n), iota));
  Value stepm = b.broadcast_to(b.convert(step, to_ir(mt)), n);
  auto finish = [&](Value v) { return round(b.convert(v, to_ir(ct))); };
  Value up = finish(b.add(b.broadcast_to(b.convert(s0, to_ir(mt)), n), fma ? b.mul(stepm, idx) : round(b.mul(stepm, idx))));
  Value down =
      finish(b.sub(b.broadcast_to(b.convert(e0, to_ir(mt)), n), fma ? b.mul(stepm, back) : round(b.mul(stepm, back))));
  Value first_half = b.compare(b.iota(DType::kS64, n, 0), b.constant(DType::kS64, static_cast<double>(steps / 2), n),
                               ops::Cmp::kLT);
  return b.select(first_half, up, down);
}

at::ScalarType linspace_compute_type(at::ScalarType rt) {
  if (at::isIntegralType(rt, /*includeBool=*/true)) return at::kDouble;
  return at::isReducedFloatingType(rt) ? at::kFloat : rt;
}

namespace {

at::Tensor& linspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  TORCH_CHECK(!start.isComplex() && !end.isComplex() && !at::isComplexType(out.scalar_type()),
              "linspace: complex values are not supported on tpu");
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 0) return out;
  const at::ScalarType rt = out.scalar_type();
  const at::ScalarType ct = linspace_compute_type(rt);
  Kernel k("aten::linspace", out);
  Builder& b = k.b();
  // start and end in the result dtype first (an integer result truncates them).
  auto in_result = [&](const at::Scalar& s) { return b.convert(b.convert(k.scalar(s, ct), to_ir(rt)), to_ir(ct)); };
  k.into(out, linspace_values(k, in_result(start), in_result(end), steps, rt));
  k.run();
  return out;
}

// As PyTorch's CPU kernel: exponents start + step * i (first half) and
// end - step * (steps - 1 - i) in float64, from start and end in the result
// dtype; base^exponent in float64 (an integer result takes the base as
// float32 first), then converted once.
at::Tensor& logspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps, double base, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  TORCH_CHECK(!start.isComplex() && !end.isComplex() && !at::isComplexType(out.scalar_type()),
              "logspace: complex values are not supported on tpu");
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 0) return out;
  const at::ScalarType rt = out.scalar_type(), ct = at::kDouble;
  const bool integral = at::isIntegralType(rt, /*includeBool=*/true);
  Kernel k("aten::logspace", out);
  Builder& b = k.b();
  const ir::Dims n{steps};
  Value bv = b.broadcast_to(k.scalar(integral ? static_cast<double>(static_cast<float>(base)) : base, ct), n);
  if (steps == 1) {
    k.into(out, b.pow(bv, b.broadcast_to(k.scalar(start.toDouble(), ct), n)));
    k.run();
    return out;
  }
  auto in_result = [&](const at::Scalar& s) { return b.convert(b.convert(k.scalar(s, ct), to_ir(rt)), to_ir(ct)); };
  Value s0 = in_result(start), e0 = in_result(end);
  Value step = b.div(b.sub(e0, s0), k.scalar(at::Scalar(steps - 1), ct));
  Value iota = b.iota(DType::kS64, n, 0);
  Value idx = b.convert(iota, DType::kF64);
  Value back = b.convert(b.sub(b.constant(DType::kS64, static_cast<double>(steps - 1), n), iota), DType::kF64);
  Value stepn = b.broadcast_to(step, n);
  Value up = b.add(b.broadcast_to(s0, n), b.mul(stepn, idx));
  Value down = b.sub(b.broadcast_to(e0, n), b.mul(stepn, back));
  Value first_half = b.compare(iota, b.constant(DType::kS64, static_cast<double>(steps / 2), n), ops::Cmp::kLT);
  k.into(out, b.pow(bv, b.select(first_half, up, down)));
  k.run();
  return out;
}

}  // namespace

TPU_KERNELS(m) {
  m.out("mm.out", TORCH_FN(mm_out), "mm");
  m.out("bmm.out", TORCH_FN(bmm_out), "bmm");
  m.out("addmm.out", TORCH_FN(addmm_out), "addmm", "addmm_");
  m.impl("addr_", TORCH_FN(addr_));
  m.impl("dot", TORCH_FN(dot));
  m.impl("mv", TORCH_FN(mv));
  m.out("cat.out", TORCH_FN(cat_out), "cat");
  m.out("triu.out", TORCH_FN(triu_out), "triu", "triu_");
  m.out("tril.out", TORCH_FN(tril_out), "tril", "tril_");
  m.impl("arange.start_out", TORCH_FN(arange_out));
  m.impl("linspace.out", TORCH_FN(linspace_out));
  m.impl("logspace.out", TORCH_FN(logspace_out));
}

}  // namespace torchtpu::aten
