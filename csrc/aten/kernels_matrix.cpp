// Small matrix and vector ops: eye, trace, linalg_cross, and
// the products with a
// bias (baddbmm, addbmm, addmv) and vdot. 16-bit products, scaling and bias
// are computed in float32 and rounded once, as PyTorch's CPU addmm does.
// Also cdist and pdist (ops/distance.h), forward and backward.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "ops/distance.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

at::Tensor& eye_m_out(int64_t n, int64_t m, at::Tensor& out) {
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
  return eye_m_out(n, n, out);
}

at::Tensor trace(const at::Tensor& self) {
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
  TORCH_CHECK(self.dim() == other.dim(), "linalg.cross: inputs must have the same number of dimensions.");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "expected scalar type ", self.scalar_type(),
              " but found ", other.scalar_type());
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), other.sizes());
  const int64_t w = at::maybe_wrap_dim(dim, static_cast<int64_t>(shape.size()));
  TORCH_CHECK(self.size(w) == 3 && other.size(w) == 3, "linalg.cross: inputs dimension ", dim,
              " must have length 3. Got ", self.size(w), " and ", other.size(w));
  TORCH_CHECK(!out.defined() || out.scalar_type() == self.scalar_type(), "linalg.cross: Expected out tensor to have dtype ",
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
  k.result(b.concatenate(parts, w), self.scalar_type(), &out);
  k.run();
  return out;
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
  Kernel k("aten::baddbmm", b1);
  k.result(bmm_bias_value(k, self, b1, b2, beta, alpha, true), self.scalar_type(), &out);
  k.run();
  return out;
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
  Kernel k("aten::addbmm", b1);
  k.result(bmm_bias_value(k, self, b1, b2, beta, alpha, false), self.scalar_type(), &out);
  k.run();
  return out;
}
at::Tensor& addbmm_(at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                    const at::Scalar& alpha) {
  if (self.dim() == 2 && b1.dim() == 3 && b2.dim() == 3 && self.size(0) == b1.size(1) && self.size(1) == b2.size(2))
    return addbmm_out(self, b1, b2, beta, alpha, self);
  // As the CPU: self takes the product's shape.
  at::Tensor r = at::addbmm(self, b1, b2, beta, alpha);
  self.resize_(r.sizes());
  return self.copy_(r);
}

at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && mat.size(1) == vec.size(0), "size mismatch, got input (",
              self.sizes(), "), mat (", mat.sizes(), "), vec (", vec.sizes(), ")");
  TORCH_CHECK(self.dim() <= 1 && (self.dim() == 0 || self.size(0) == mat.size(0) || self.size(0) == 1),
              "size mismatch, got input (", self.sizes(), "), mat (", mat.sizes(), "), vec (", vec.sizes(), ")");
  const at::ScalarType t = product_type(self, mat, vec);
  Kernel k("aten::addmv", mat);
  Value p = k.b().dot_general(k.in(mat), k.in(vec), {}, {}, {1}, {0}, to_ir(t));
  k.result(add_scaled(k, p, self, beta, alpha, t), self.scalar_type(), &out);
  k.run();
  return out;
}
at::Tensor& addmv_(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                   const at::Scalar& alpha) {
  TORCH_CHECK(self.dim() == 1 && self.size(0) == mat.size(0), "addmv_: self of shape ", self.sizes(),
              " must be the product's shape");
  return addmv_out(self, mat, vec, beta, alpha, self);
}

// vdot of real tensors is dot.
at::Tensor vdot(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(), "D and ",
              other.dim(), "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              self.scalar_type(), " and ", other.scalar_type());
  return at::dot(self, other);
}

// ---- cdist / pdist ---------------------------------------------------------------------

void check_dist_input(const char* name, const char* which, const at::Tensor& x, int64_t min_dim) {
  TORCH_CHECK(x.dim() >= min_dim, name, " only supports at least ", min_dim, "D tensors, ", which, " got: ", x.dim(),
              "D");
  TORCH_CHECK(at::isFloatingType(x.scalar_type()), name, " only supports floating-point dtypes, ", which,
              " got: ", x.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble, "\"", name,
                              "\" not implemented for '", x.scalar_type(), "'");
}

// x1 [..., r1, c] and x2 [..., r2, c] with their batch dims broadcast, as [B, r, c].
struct DistBatch {
  std::vector<int64_t> batch;
  int64_t nb, r1, r2, c;
};
DistBatch dist_batch(const at::Tensor& x1, const at::Tensor& x2) {
  std::vector<int64_t> b1(x1.sizes().begin(), x1.sizes().end() - 2), b2(x2.sizes().begin(), x2.sizes().end() - 2);
  std::vector<int64_t> batch = at::infer_size(b1, b2);
  return {batch, c10::multiply_integers(batch), x1.size(-2), x2.size(-2), x1.size(-1)};
}
Value batched(Kernel& k, const at::Tensor& x, const DistBatch& db, int64_t rows) {
  std::vector<int64_t> full = db.batch;
  full.push_back(rows);
  full.push_back(db.c);
  Builder& b = k.b();
  return b.reshape(b.broadcast_to(k.in(x), to_dims(full)), {db.nb, rows, db.c});
}

at::Tensor cdist_forward(const at::Tensor& x1, const at::Tensor& x2, double p, std::optional<int64_t> mode) {
  check_dist_input("cdist", "X1", x1, 2);
  check_dist_input("cdist", "X2", x2, 2);
  TORCH_CHECK(x1.size(-1) == x2.size(-1), "X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
              " X2: ", x2.size(-1));
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
  TORCH_CHECK(!mode || (*mode >= 0 && *mode <= 2), "possible modes: None, 1, 2, but was: ", *mode);
  const DistBatch db = dist_batch(x1, x2);
  std::vector<int64_t> out_shape = db.batch;
  out_shape.push_back(db.r1);
  out_shape.push_back(db.r2);
  Kernel k("aten::_cdist_forward", x1);
  Builder& b = k.b();
  const at::ScalarType st = x1.scalar_type();
  Value r;
  if (db.nb * db.r1 * db.r2 == 0 || db.c == 0) {
    r = b.constant(to_ir(st), 0, to_dims(out_shape));
  } else {
    Value a = batched(k, x1, db, db.r1), c = batched(k, x2, db, db.r2);
    const int64_t m = mode.value_or(0);
    const bool mm = p == 2 && (m == 1 || (m == 0 && (db.r1 > 25 || db.r2 > 25)));
    r = mm ? ops::euclidean_dist(b, a, c) : ops::cdist(b, a, c, p, k.scalar(p, st));
    r = b.reshape(r, to_dims(out_shape));
  }
  at::Tensor out = k.out(r, st);
  k.run();
  return out;
}

at::Tensor cdist_backward(const at::Tensor& grad, const at::Tensor& x1, const at::Tensor& x2, double p,
                          const at::Tensor& dist) {
  const DistBatch db = dist_batch(x1, x2);
  std::vector<int64_t> shape = db.batch;
  shape.push_back(db.r1);
  shape.push_back(db.c);
  Kernel k("aten::_cdist_backward", x1);
  Builder& b = k.b();
  const at::ScalarType st = x1.scalar_type();
  Value r;
  if (db.nb * db.r1 * db.r2 * db.c == 0) {
    r = b.constant(to_ir(st), 0, to_dims(shape));
  } else {
    Value g = b.reshape(k.in(grad, st), {db.nb, db.r1, db.r2});
    Value d = b.reshape(k.in(dist, st), {db.nb, db.r1, db.r2});
    r = ops::cdist_backward(b, g, batched(k, x1, db, db.r1), batched(k, x2, db, db.r2), d, p, k.scalar(p, st));
    r = b.reshape(r, to_dims(shape));
  }
  at::Tensor out = k.out(r, st);
  k.run();
  return out;
}

at::Tensor pdist_forward(const at::Tensor& x, double p) {
  TORCH_CHECK(x.dim() == 2, "pdist only supports 2D tensors, got: ", x.dim(), "D");
  check_dist_input("pdist", "input", x, 2);
  TORCH_CHECK(p >= 0, "pdist only supports non-negative p values");
  const int64_t n = x.size(0), pairs = n * (n - 1) / 2;
  Kernel k("aten::_pdist_forward", x);
  Builder& b = k.b();
  const at::ScalarType st = x.scalar_type();
  Value r = pairs == 0 ? b.constant(to_ir(st), 0, {pairs})
                       : x.size(1) == 0 ? b.constant(to_ir(st), 0, {pairs}) : ops::pdist(b, k.in(x), p, k.scalar(p, st));
  at::Tensor out = k.out(r, st);
  k.run();
  return out;
}

at::Tensor pdist_backward(const at::Tensor& grad, const at::Tensor& x, double p, const at::Tensor& dist) {
  Kernel k("aten::_pdist_backward", x);
  Builder& b = k.b();
  const at::ScalarType st = x.scalar_type();
  Value r = x.numel() == 0 || x.size(0) < 2
                ? b.constant(to_ir(st), 0, to_dims(x.sizes()))
                : ops::pdist_backward(b, k.in(grad, st), k.in(x), k.in(dist, st), p, k.scalar(p, st));
  at::Tensor out = k.out(r, st);
  k.run();
  return out;
}

}  // namespace

// torch._scaled_mm: float8 matrices scaled per tensor (float scalars) or
// per row of a and column of b ([M, 1] and [1, N] floats), multiplied in
// float32 as the CPU's emulation does, plus bias, rescaled by 1/scale_result
// into a float8 result, in out_dtype (a's dtype by default).
at::Tensor scaled_mm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& scale_a, const at::Tensor& scale_b,
                     const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& scale_result,
                     std::optional<at::ScalarType> out_dtype, bool /*use_fast_accum*/) {
  TORCH_CHECK(a.dim() == 2, "mat_a must be a matrix");
  TORCH_CHECK(b.dim() == 2, "mat_b must be a matrix");
  TORCH_CHECK(a.size(1) == b.size(0), "mat_a and mat_b shapes cannot be multiplied (", a.size(0), "x", a.size(1),
              " and ", b.size(0), "x", b.size(1), ")");
  auto f8 = [](const at::Tensor& t) { return c10::isFloat8Type(t.scalar_type()); };
  auto tensorwise = [&](const at::Tensor& t, const at::Tensor& s) {
    return f8(t) && s.scalar_type() == at::kFloat && s.numel() == 1;
  };
  const bool rowwise = f8(a) && f8(b) && scale_a.scalar_type() == at::kFloat && scale_b.scalar_type() == at::kFloat &&
                       scale_a.dim() == 2 && scale_a.size(0) == a.size(0) && scale_a.size(1) == 1 &&
                       scale_b.dim() == 2 && scale_b.size(0) == 1 && scale_b.size(1) == b.size(1);
  TORCH_CHECK_VALUE((tensorwise(a, scale_a) && tensorwise(b, scale_b)) || rowwise,
                    "Invalid scaling configuration.\n- For TensorWise scaling, a and b should be float8, scales should "
                    "be float and singletons.\n- For RowWise scaling, a and b should be float8, scales should be float, "
                    "scale_a should be (", a.size(0), ", 1) and scale_b should be (1, ", b.size(1), ")");
  TORCH_CHECK(!scale_result || (scale_result->numel() == 1 && scale_result->scalar_type() == at::kFloat),
              "scale_result must be a float scalar");
  TORCH_CHECK(!bias || bias->numel() == b.size(1), "Bias must be size ", b.size(1), " but got ", bias->numel());
  const at::ScalarType ot = out_dtype.value_or(a.scalar_type());
  const at::Tensor sa = scale_a.numel() == 1 ? scale_a.reshape({}) : scale_a;
  const at::Tensor sb = scale_b.numel() == 1 ? scale_b.reshape({}) : scale_b;
  at::Tensor r = at::mm(a.to(at::kFloat) * sa, b.to(at::kFloat) * sb);
  if (bias) r = r + *bias;
  if (scale_result && (ot == at::kFloat8_e4m3fn || ot == at::kFloat8_e5m2)) r = r / scale_result->reshape({});
  return r.to(ot);
}

TPU_KERNELS(m) {
  m.impl("_scaled_mm", TORCH_FN(scaled_mm));
  m.impl("_cdist_forward", TORCH_FN(cdist_forward));
  m.impl("_cdist_backward", TORCH_FN(cdist_backward));
  m.impl("_pdist_forward", TORCH_FN(pdist_forward));
  m.impl("_pdist_backward", TORCH_FN(pdist_backward));
  m.out("addbmm.out", TORCH_FN(addbmm_out), "addbmm");
  m.impl("addbmm_", TORCH_FN(addbmm_));
  m.out("addmv.out", TORCH_FN(addmv_out), "addmv");
  m.impl("addmv_", TORCH_FN(addmv_));
  m.out("baddbmm.out", TORCH_FN(baddbmm_out), "baddbmm");
  m.impl("baddbmm_", TORCH_FN(baddbmm_));
  m.impl("eye.m_out", TORCH_FN(eye_m_out));
  m.impl("eye.out", TORCH_FN(eye_out));
  m.out("linalg_cross.out", TORCH_FN(linalg_cross_out), "linalg_cross");
  m.impl("trace", TORCH_FN(trace));
  m.impl("vdot", TORCH_FN(vdot));
}

}  // namespace torchtpu::aten
