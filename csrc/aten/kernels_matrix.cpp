// Small matrix and vector ops: eye, trace, linalg_cross, and
// the products with a
// bias (baddbmm, addbmm, addmv) and vdot. 16-bit products, scaling and bias
// are computed in float32 and rounded once, as PyTorch's CPU addmm does.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include "aten/tensor_ir.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

at::Tensor& eye_m_out(int64_t n, int64_t m, at::Tensor& out) {
  TPU_COUNT("aten::eye.m_out");
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  Kernel k("aten::eye", out);
  Builder& b = k.b();
  Value diag = b.compare(b.iota(DType::kS64, {n, m}, 0), b.iota(DType::kS64, {n, m}, 1), Cmp::kEQ);
  k.into_resized(out, diag);
  k.run();
  return out;
}
at::Tensor& eye_out(int64_t n, at::Tensor& out) {
  TPU_COUNT("aten::eye.out");
  return eye_m_out(n, n, out);
}

at::Tensor trace(const at::Tensor& self) {
  TPU_COUNT("aten::trace");
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"trace\" not implemented for 'Bool'");
  const at::ScalarType rt = at::isIntegralType(self.scalar_type(), false) ? at::kLong : self.scalar_type();
  const at::ScalarType ct = at::isReducedFloatingType(rt) ? at::kFloat : rt;
  const int64_t n = std::min(self.size(0), self.size(1));
  Kernel k("aten::trace", self);
  Builder& b = k.b();
  Value x = k.in(self, ct);
  Value diag = b.compare(b.iota(DType::kS64, b.dims(x), 0), b.iota(DType::kS64, b.dims(x), 1), Cmp::kEQ);
  Value r = n == 0 ? b.constant(to_ir(ct), 0) : b.reduce_sum(b.select(diag, x, b.zeros_like(x)), {0, 1});
  at::Tensor out = k.out(r, rt);
  k.run();
  return out;
}

// a x b along `dim` (size 3) of the broadcast inputs, each product and
// difference in the dtype, as the CPU's kernel.
at::Tensor& linalg_cross_out(const at::Tensor& self, const at::Tensor& other, int64_t dim, at::Tensor& out) {
  TPU_COUNT("aten::linalg_cross.out");
  TORCH_CHECK(self.dim() == other.dim(), "linalg.cross: inputs must have the same number of dimensions.");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "expected scalar type ", self.scalar_type(),
              " but found ", other.scalar_type());
  check_same_device("aten::linalg_cross", self.device(), {&other, &out});
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), other.sizes());
  const int64_t w = at::maybe_wrap_dim(dim, static_cast<int64_t>(shape.size()));
  TORCH_CHECK(self.size(w) == 3 && other.size(w) == 3, "linalg.cross: inputs dimension ", dim,
              " must have length 3. Got ", self.size(w), " and ", other.size(w));
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "linalg.cross: Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", out.scalar_type(), " instead");
  Kernel k("aten::linalg_cross", self);
  Builder& b = k.b();
  const ir::Dims d = to_dims(shape);
  Value x = b.broadcast_to(k.in(self), d), y = b.broadcast_to(k.in(other), d);
  auto part = [&](Value v, int64_t i) { return b.slice_dim(v, w, i, i + 1); };
  std::vector<Value> parts;
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t j = (i + 1) % 3, l = (i + 2) % 3;
    parts.push_back(b.sub(b.mul(part(x, j), part(y, l)), b.mul(part(x, l), part(y, j))));
  }
  k.into_resized(out, b.concatenate(parts, w));
  k.run();
  return out;
}

at::Tensor linalg_cross(const at::Tensor& self, const at::Tensor& other, int64_t dim) {
  at::Tensor out = empty_device({0}, self.scalar_type(), self.device().index());
  return linalg_cross_out(self, other, dim, out);
}

bool is_value(const at::Scalar& s, double v) { return s.isIntegral(true) ? s.toLong() == v : s.toDouble() == v; }

// beta * bias + alpha * product, in the product's type `t` (bias broadcast
// to the product's shape; ignored, NaN included, when beta is 0).
Value add_scaled(Kernel& k, Value product, const at::Tensor& bias, const at::Scalar& beta, const at::Scalar& alpha,
                 at::ScalarType t) {
  Builder& b = k.b();
  const ir::Dims d = b.dims(product);
  if (!is_value(alpha, 1)) product = b.mul(product, b.broadcast_to(k.scalar(alpha, t), d));
  if (is_value(beta, 0)) return product;
  TORCH_CHECK(static_cast<int64_t>(d.size()) >= bias.dim(), k.op(), ": self of shape ", bias.sizes(),
              " cannot be broadcast to ", c10::IntArrayRef(d));
  Value c = b.broadcast_to(k.in(bias, t), d);
  if (!is_value(beta, 1)) c = b.mul(c, b.broadcast_to(k.scalar(beta, t), d));
  return b.add(c, product);
}

at::ScalarType product_type(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type() && self.scalar_type() == a.scalar_type(),
              "expected scalar type ", self.scalar_type(), " but found ",
              a.scalar_type() != self.scalar_type() ? a.scalar_type() : b.scalar_type());
  return at::isReducedFloatingType(a.scalar_type()) ? at::kFloat : a.scalar_type();
}

// `batched`: baddbmm (one product per batch), else addbmm (their sum).
Value bmm_bias_value(Kernel& k, const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
                     const at::Scalar& beta, const at::Scalar& alpha, bool batched) {
  TORCH_CHECK(b1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(b1.size(0) == b2.size(0), "batch1 and batch2 must have same number of batches, got ", b1.size(0),
              " and ", b2.size(0));
  TORCH_CHECK(b1.size(2) == b2.size(1), "Incompatible matrix sizes for bmm (", b1.size(1), "x", b1.size(2), " and ",
              b2.size(1), "x", b2.size(2), ")");
  check_same_device(k.op(), b1.device(), {&self, &b2});
  const at::ScalarType t = product_type(self, b1, b2);
  Builder& b = k.b();
  if (batched || !at::isReducedFloatingType(b1.scalar_type()) || b1.size(0) == 0) {
    Value p = batched ? b.dot_general(k.in(b1), k.in(b2), {0}, {0}, {2}, {1}, to_ir(t))
                      : b.dot_general(k.in(b1), k.in(b2), {}, {}, {0, 2}, {0, 1}, to_ir(t));
    return add_scaled(k, p, self, beta, alpha, t);
  }
  // 16-bit addbmm: as the CPU, one addmm per batch, each rounded to the dtype.
  const DType rt = to_ir(b1.scalar_type());
  Value x1 = k.in(b1), x2 = k.in(b2), acc;
  for (int64_t i = 0; i < b1.size(0); ++i) {
    Value m1 = b.reshape(b.slice_dim(x1, 0, i, i + 1), {b1.size(1), b1.size(2)});
    Value m2 = b.reshape(b.slice_dim(x2, 0, i, i + 1), {b2.size(1), b2.size(2)});
    Value p = b.dot_general(m1, m2, {}, {}, {1}, {0}, to_ir(t));
    Value r = i == 0 ? add_scaled(k, p, self, beta, alpha, t)
                     : b.add(b.convert(acc, to_ir(t)),
                             is_value(alpha, 1) ? p : b.mul(p, b.broadcast_to(k.scalar(alpha, t), b.dims(p))));
    acc = b.convert(r, rt);
  }
  return acc;
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                        const at::Scalar& alpha, at::Tensor& out) {
  TPU_COUNT("aten::baddbmm.out");
  Kernel k("aten::baddbmm", b1);
  k.into_resized(out, bmm_bias_value(k, self, b1, b2, beta, alpha, true));
  k.run();
  return out;
}
at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                   const at::Scalar& alpha) {
  at::Tensor out = empty_device({0}, self.scalar_type(), self.device().index());
  return baddbmm_out(self, b1, b2, beta, alpha, out);
}
at::Tensor& baddbmm_(at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                     const at::Scalar& alpha) {
  TORCH_CHECK(self.dim() == 3 && self.size(0) == b1.size(0) && self.size(1) == b1.size(1) &&
                  self.size(2) == b2.size(2),
              "baddbmm_: self of shape ", self.sizes(), " must be the product's shape");
  return baddbmm_out(self, b1, b2, beta, alpha, self);
}

at::Tensor& addbmm_out(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                       const at::Scalar& alpha, at::Tensor& out) {
  TPU_COUNT("aten::addbmm.out");
  Kernel k("aten::addbmm", b1);
  k.into_resized(out, bmm_bias_value(k, self, b1, b2, beta, alpha, false));
  k.run();
  return out;
}
at::Tensor addbmm(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                  const at::Scalar& alpha) {
  at::Tensor out = empty_device({0}, self.scalar_type(), self.device().index());
  return addbmm_out(self, b1, b2, beta, alpha, out);
}
at::Tensor& addbmm_(at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                    const at::Scalar& alpha) {
  if (self.dim() == 2 && b1.dim() == 3 && b2.dim() == 3 && self.size(0) == b1.size(1) && self.size(1) == b2.size(2))
    return addbmm_out(self, b1, b2, beta, alpha, self);
  // As the CPU: self takes the product's shape.
  at::Tensor r = torchtpu::aten::addbmm(self, b1, b2, beta, alpha);
  self.resize_(r.sizes());
  return self.copy_(r);
}

at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  TPU_COUNT("aten::addmv.out");
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && mat.size(1) == vec.size(0), "size mismatch, got input (",
              self.sizes(), "), mat (", mat.sizes(), "), vec (", vec.sizes(), ")");
  TORCH_CHECK(self.dim() <= 1 && (self.dim() == 0 || self.size(0) == mat.size(0) || self.size(0) == 1),
              "size mismatch, got input (", self.sizes(), "), mat (", mat.sizes(), "), vec (", vec.sizes(), ")");
  check_same_device("aten::addmv", mat.device(), {&self, &vec, &out});
  const at::ScalarType t = product_type(self, mat, vec);
  Kernel k("aten::addmv", mat);
  Value p = k.b().dot_general(k.in(mat), k.in(vec), {}, {}, {1}, {0}, to_ir(t));
  k.into_resized(out, add_scaled(k, p, self, beta, alpha, t));
  k.run();
  return out;
}
at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  at::Tensor out = empty_device({0}, self.scalar_type(), self.device().index());
  return addmv_out(self, mat, vec, beta, alpha, out);
}
at::Tensor& addmv_(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                   const at::Scalar& alpha) {
  TORCH_CHECK(self.dim() == 1 && self.size(0) == mat.size(0), "addmv_: self of shape ", self.sizes(),
              " must be the product's shape");
  return addmv_out(self, mat, vec, beta, alpha, self);
}

// vdot of real tensors is dot.
at::Tensor vdot(const at::Tensor& self, const at::Tensor& other) {
  TPU_COUNT("aten::vdot");
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(), "D and ",
              other.dim(), "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              self.scalar_type(), " and ", other.scalar_type());
  return at::dot(self, other);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("addbmm", TORCH_FN(addbmm));
  m.impl("addbmm.out", TORCH_FN(addbmm_out));
  m.impl("addbmm_", TORCH_FN(addbmm_));
  m.impl("addmv", TORCH_FN(addmv));
  m.impl("addmv.out", TORCH_FN(addmv_out));
  m.impl("addmv_", TORCH_FN(addmv_));
  m.impl("baddbmm", TORCH_FN(baddbmm));
  m.impl("baddbmm.out", TORCH_FN(baddbmm_out));
  m.impl("baddbmm_", TORCH_FN(baddbmm_));
  m.impl("eye.m_out", TORCH_FN(eye_m_out));
  m.impl("eye.out", TORCH_FN(eye_out));
  m.impl("linalg_cross", TORCH_FN(linalg_cross));
  m.impl("linalg_cross.out", TORCH_FN(linalg_cross_out));
  m.impl("trace", TORCH_FN(trace));
  m.impl("vdot", TORCH_FN(vdot));
}

}  // namespace torchtpu::aten
