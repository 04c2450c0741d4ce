// Linear algebra kernels: triangular solves, the Cholesky family and LU
// (factor, unpack, solve). Argument checks run PyTorch's own meta functions
// (the op called on meta tensors) so errors read as on the CPU. Like the
// CPU, float32, float64 and (LU, triangular solves) complex are computed;
// other dtypes raise. Complex Cholesky and matrices larger than
// ops::kMaxUnrolledColumns go to the CPU fallback.
#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>

#include "aten/registry.h"
#include "aten/fallback.h"
#include "aten/tensor_ir.h"
#include "ops/linalg.h"

namespace torchtpu::aten {
namespace {

namespace lin = ops;

at::Tensor meta(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

// `complex`: complex64 and complex128 are computed too.
void check_dtype(const char* op, const at::Tensor& t, bool complex = false) {
  const at::ScalarType s = t.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(s == at::kFloat || s == at::kDouble || (complex && (s == at::kComplexFloat ||
                                                                                 s == at::kComplexDouble)),
                              "\"", op, "\" not implemented for '", s, "'");
}

bool unrolled(const at::Tensor& a) {
  return std::min(a.size(-2), a.size(-1)) <= lin::kMaxUnrolledColumns;
}

std::vector<int64_t> batch_sizes(const at::Tensor& t, int64_t drop) {
  return std::vector<int64_t>(t.sizes().begin(), t.sizes().end() - drop);
}

// --- triangular solves ---

at::Tensor& solve_triangular_impl(const at::Tensor& A, const at::Tensor& B, bool upper, bool left,
                                  bool unitriangular, at::Tensor* out, at::Tensor& storage) {
  const char* op = "aten::linalg_solve_triangular";
  at::native::checkInputsSolver(A, B, left, "linalg.solve_triangular");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(), "linalg.solve_triangular: Expected A and B to have the same dtype, ",
              "but found A of type ", A.scalar_type(), " and B of type ", B.scalar_type(), " instead");
  check_dtype("linalg_solve_triangular", A, /*complex=*/true);
  auto [B_, A_] = at::native::_linalg_broadcast_batch_dims(B, A, nullptr);
  Kernel k(op, B);
  k.column_major(true);
  Value x = lin::solve_triangular(k.b(), k.in(A_), k.in(B_), upper, left, unitriangular);
  storage = k.result(x, B.scalar_type(), out);
  k.run();
  return out ? *out : storage;
}

at::Tensor linalg_solve_triangular(const at::Tensor& A, const at::Tensor& B, bool upper, bool left,
                                   bool unitriangular) {
  at::Tensor r;
  solve_triangular_impl(A, B, upper, left, unitriangular, nullptr, r);
  return r;
}

at::Tensor& linalg_solve_triangular_out(const at::Tensor& A, const at::Tensor& B, bool upper, bool left,
                                        bool unitriangular, at::Tensor& out) {
  at::Tensor r;
  solve_triangular_impl(A, B, upper, left, unitriangular, &out, r);
  return out;
}

// triangular_solve(b, A): A X = b (or A^T X = b), and a copy of A (both
// broadcast to common batch dims).
std::tuple<at::Tensor, at::Tensor> triangular_solve_impl(const at::Tensor& self, const at::Tensor& A, bool upper,
                                                         bool transpose, bool unitriangular, at::Tensor* X,
                                                         at::Tensor* M) {
  const char* op = "aten::triangular_solve";
  at::triangular_solve(meta(self), meta(A), upper, transpose, unitriangular);
  check_dtype("triangular_solve_cpu", self, /*complex=*/true);
  auto [self_, A_] = at::native::_linalg_broadcast_batch_dims(self, A, "triangular_solve");
  Kernel k(op, self);
  k.column_major(true);
  Value a = k.in(A_);
  Value x = lin::solve_triangular(k.b(), a, k.in(self_), upper, true, unitriangular, transpose);
  at::Tensor rx = k.result(x, self.scalar_type(), X);
  at::Tensor rm = k.result(a, A.scalar_type(), M);
  k.run();
  return {rx, rm};
}

std::tuple<at::Tensor, at::Tensor> triangular_solve(const at::Tensor& self, const at::Tensor& A, bool upper,
                                                    bool transpose, bool unitriangular) {
  return triangular_solve_impl(self, A, upper, transpose, unitriangular, nullptr, nullptr);
}

std::tuple<at::Tensor&, at::Tensor&> triangular_solve_out(const at::Tensor& self, const at::Tensor& A, bool upper,
                                                          bool transpose, bool unitriangular, at::Tensor& X,
                                                          at::Tensor& M) {
  triangular_solve_impl(self, A, upper, transpose, unitriangular, &X, &M);
  return {X, M};
}

// --- Cholesky ---

std::tuple<at::Tensor, at::Tensor> cholesky_impl(const char* op, const at::Tensor& A, bool upper, at::Tensor* L,
                                                 at::Tensor* info) {
  check_dtype("linalg_cholesky_cpu", A);
  Kernel k(op, A);
  lin::CholeskyResult r = lin::cholesky(k.b(), k.in(A), upper);
  k.column_major(true);
  at::Tensor l = k.result(r.factor, A.scalar_type(), L);
  k.column_major(false);
  at::Tensor i = k.result(r.info, at::kInt, info);
  k.run();
  return {l, i};
}

std::tuple<at::Tensor, at::Tensor> linalg_cholesky_ex(const at::Tensor& A, bool upper, bool check_errors) {
  at::linalg_cholesky_ex(meta(A), upper, check_errors);
  if (!unrolled(A) || A.is_complex())
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP(linalg_cholesky_ex)>::call(A, upper, check_errors);
  auto [l, info] = cholesky_impl("aten::linalg_cholesky_ex", A, upper, nullptr, nullptr);
  if (check_errors) at::_linalg_check_errors(info, "linalg.cholesky_ex", A.dim() == 2);
  return {l, info};
}

std::tuple<at::Tensor&, at::Tensor&> linalg_cholesky_ex_out(const at::Tensor& A, bool upper, bool check_errors,
                                                            at::Tensor& L, at::Tensor& info) {
  at::linalg_cholesky_ex(meta(A), upper, check_errors);
  if (!unrolled(A) || A.is_complex())
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP2(linalg_cholesky_ex, L)>::call(A, upper, check_errors,
                                                                                             L, info);
  cholesky_impl("aten::linalg_cholesky_ex.L", A, upper, &L, &info);
  if (check_errors) at::_linalg_check_errors(info, "linalg.cholesky_ex", A.dim() == 2);
  return {L, info};
}

// torch.cholesky (deprecated): as linalg.cholesky, errors named "cholesky".
at::Tensor cholesky_kernel(const at::Tensor& self, bool upper) {
  if (self.numel() == 0) return at::empty_like(self);
  at::native::squareCheckInputs(self, "cholesky");
  if (!unrolled(self) || self.is_complex())
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP(cholesky)>::call(self, upper);
  auto [l, info] = cholesky_impl("aten::cholesky", self, upper, nullptr, nullptr);
  at::_linalg_check_errors(info, "cholesky", self.dim() == 2);
  return l;
}

at::Tensor& cholesky_out(const at::Tensor& self, bool upper, at::Tensor& out) {
  at::Tensor r = cholesky_kernel(self, upper);
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return out;
}

// A X = B with A = L L^T (or U^T U) from its factor; B and A already
// broadcast by cholesky_solve.
at::Tensor cholesky_solve_helper(const at::Tensor& self, const at::Tensor& A, bool upper) {
  if (self.is_complex())  // conjugate-transposed factors: computed on the CPU
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP(_cholesky_solve_helper)>::call(self, A, upper);
  check_dtype("cholesky_solve_cpu", self);
  Kernel k("aten::_cholesky_solve_helper", self);
  k.column_major(true);
  Builder& b = k.b();
  Value f = k.in(A);
  Value y = lin::solve_triangular(b, f, k.in(self), upper, true, false, /*transpose=*/upper);
  Value x = lin::solve_triangular(b, f, y, upper, true, false, /*transpose=*/!upper);
  at::Tensor r = k.out(x, self.scalar_type());
  k.run();
  return r;
}

// LAPACK's info for a triangular factor: the first zero on the diagonal
// (1-based), else 0.
Value zero_diagonal_info(Builder& b, Value f) {
  const ir::Dims d = b.dims(f);
  const int64_t r = static_cast<int64_t>(d.size()), n = d.back();
  Value eye = b.compare(b.iota(DType::kS32, d, r - 2), b.iota(DType::kS32, d, r - 1), ops::Cmp::kEQ);
  Value diag = b.reduce_sum(b.select(eye, f, b.zeros_like(f)), {r - 1});
  ir::Dims dd(d.begin(), d.end() - 1);
  Value pos = b.add(b.iota(DType::kS32, dd, r - 2), b.constant(DType::kS32, 1, dd));
  Value none = b.constant(DType::kS32, static_cast<double>(n + 1), dd);
  Value first = b.reduce_min(b.select(b.compare(diag, b.zeros_like(diag), ops::Cmp::kEQ), pos, none), {r - 2});
  Value clean = b.compare(first, b.constant(DType::kS32, static_cast<double>(n + 1), b.dims(first)), ops::Cmp::kEQ);
  return b.select(clean, b.zeros_like(first), first);
}

// (L L^T)^{-1} (or (U^T U)^{-1}): the solve with the identity, symmetrized
// from its lower triangle as LAPACK's potri fills one triangle.
at::Tensor& cholesky_inverse_impl(const at::Tensor& self, bool upper, at::Tensor* out, at::Tensor& storage) {
  const char* op = "aten::cholesky_inverse";
  at::native::squareCheckInputs(self, "cholesky_inverse");
  at::native::checkFloatingOrComplex(self, "cholesky_inverse");
  if (out) at::native::checkSameDevice("cholesky_inverse", *out, self);
  if (out) at::native::checkLinalgCompatibleDtype("cholesky_inverse", *out, self);
  check_dtype("cholesky_inverse_out_cpu", self);
  Kernel k(op, self);
  Builder& b = k.b();
  Value f = k.in(self);
  Value eye = lin::identity(b, b.dtype(f), b.dims(f));
  Value x = eye;
  if (self.numel() > 0) {
    Value y = lin::solve_triangular(b, f, eye, upper, true, false, upper);
    x = lin::solve_triangular(b, f, y, upper, true, false, !upper);
    x = b.add(lin::triangle(b, x, true), lin::matrix_transpose(b, lin::triangle(b, x, true, -1)));
  }
  k.column_major(true);
  storage = k.result(x, self.scalar_type(), out);
  k.column_major(false);
  at::Tensor info = self.numel() > 0 ? k.out(zero_diagonal_info(b, f), at::kInt) : at::Tensor();
  k.run();
  if (info.defined()) at::_linalg_check_errors(info, "cholesky_inverse", self.dim() == 2);
  return out ? *out : storage;
}

at::Tensor cholesky_inverse(const at::Tensor& self, bool upper) {
  if (self.is_complex())
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP(cholesky_inverse)>::call(self, upper);
  at::Tensor r;
  cholesky_inverse_impl(self, upper, nullptr, r);
  return r;
}

at::Tensor& cholesky_inverse_out(const at::Tensor& self, bool upper, at::Tensor& out) {
  if (self.is_complex())
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP2(cholesky_inverse, out)>::call(self, upper, out);
  at::Tensor r;
  cholesky_inverse_impl(self, upper, &out, r);
  return out;
}

// --- LU ---

// The row order encoded by LAPACK pivots (1-based, int32 [..., k]) for m
// rows, with a device-side check that every pivot lies in [1, m].
Value pivots_to_perm(Kernel& k, Value piv, int64_t m, const char* what) {
  Builder& b = k.b();
  const ir::Dims pd = b.dims(piv);
  const int64_t n = pd.back();
  ir::Dims md = pd;
  md.back() = m;
  const int64_t r = static_cast<int64_t>(md.size());
  Value bad = b.logical_or(b.compare(piv, b.constant(DType::kS32, 1, pd), ops::Cmp::kLT),
                           b.compare(piv, b.constant(DType::kS32, static_cast<double>(m), pd), ops::Cmp::kGT));
  k.check(bad, Kernel::CheckKind::kRuntime, what);
  Value iota = b.iota(DType::kS32, md, r - 1);
  Value perm = iota;
  for (int64_t i = 0; i < n; ++i) {
    ir::Dims lo(r, 0), hi = pd;
    lo[r - 1] = i, hi[r - 1] = i + 1;
    ir::Dims keep(r - 1);
    for (int64_t d = 0; d + 1 < r; ++d) keep[d] = d;
    Value j = b.add(b.reshape(b.slice(piv, lo, hi), ir::Dims(md.begin(), md.end() - 1)),
                    b.constant(DType::kS32, -1, ir::Dims(md.begin(), md.end() - 1)));
    Value jb = b.broadcast_in_dim(j, md, keep);
    Value at_j = b.compare(iota, jb, ops::Cmp::kEQ);
    Value at_i = b.compare(iota, b.constant(DType::kS32, static_cast<double>(i), md), ops::Cmp::kEQ);
    Value perm_i = b.broadcast_in_dim(b.reduce_sum(b.select(at_i, perm, b.zeros_like(perm)), {r - 1}), md, keep);
    Value perm_j = b.broadcast_in_dim(b.reduce_sum(b.select(at_j, perm, b.zeros_like(perm)), {r - 1}), md, keep);
    perm = b.select(at_i, perm_j, b.select(at_j, perm_i, perm));
  }
  return perm;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lu_factor_impl(const at::Tensor& A, bool pivot, bool check_errors,
                                                              at::Tensor* LU, at::Tensor* piv, at::Tensor* info) {
  const char* op = "aten::linalg_lu_factor_ex";
  at::linalg_lu_factor_ex(meta(A), pivot, check_errors);
  check_dtype("lu_cpu", A, /*complex=*/true);
  TORCH_CHECK(pivot || A.numel() == 0, "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  Kernel k(op, A);
  lin::LuResult r = lin::lu_factor(k.b(), k.in(A));
  k.column_major(true);
  at::Tensor lu = k.result(r.lu, A.scalar_type(), LU);
  k.column_major(false);
  at::Tensor p = k.result(r.pivots, at::kInt, piv);
  at::Tensor i = k.result(r.info, at::kInt, info);
  k.run();
  if (check_errors) at::_linalg_check_errors(i, "torch.linalg.lu_factor_ex", A.dim() == 2);
  return {lu, p, i};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linalg_lu_factor_ex(const at::Tensor& A, bool pivot,
                                                                   bool check_errors) {
  if (A.dim() >= 2 && !unrolled(A))
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP(linalg_lu_factor_ex)>::call(A, pivot, check_errors);
  return lu_factor_impl(A, pivot, check_errors, nullptr, nullptr, nullptr);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_lu_factor_ex_out(const at::Tensor& A, bool pivot,
                                                                          bool check_errors, at::Tensor& LU,
                                                                          at::Tensor& pivots, at::Tensor& info) {
  if (A.dim() >= 2 && !unrolled(A))
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP2(linalg_lu_factor_ex, out)>::call(
        A, pivot, check_errors, LU, pivots, info);
  lu_factor_impl(A, pivot, check_errors, &LU, &pivots, &info);
  return {LU, pivots, info};
}

// L (unit lower, m x k) and U (upper, k x n) from packed factors.
std::pair<Value, Value> unpack_data(Builder& b, Value lu) {
  const ir::Dims d = b.dims(lu);
  const int64_t r = static_cast<int64_t>(d.size());
  const int64_t m = d[r - 2], n = d[r - 1], kk = std::min(m, n);
  ir::Dims z(r, 0), lhi = d, uhi = d;
  lhi[r - 1] = kk;
  uhi[r - 2] = kk;
  Value l = lin::triangle(b, b.slice(lu, z, lhi), true, -1);
  ir::Dims eye_dims = b.dims(l);
  Value row = b.iota(DType::kS32, eye_dims, r - 2), col = b.iota(DType::kS32, eye_dims, r - 1);
  l = b.select(b.compare(row, col, ops::Cmp::kEQ), b.constant(b.dtype(lu), 1, eye_dims), l);
  Value u = lin::triangle(b, b.slice(lu, z, uhi), false);
  return {l, u};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lu_unpack_impl(const at::Tensor& LU, const at::Tensor& pivots,
                                                              bool unpack_lu, bool unpack_piv, at::Tensor* P,
                                                              at::Tensor* L, at::Tensor* U) {
  const char* op = "aten::lu_unpack";
  auto [mp, ml, mu] = at::lu_unpack(meta(LU), meta(pivots), unpack_lu, unpack_piv);
  const int64_t m = LU.size(-2), kk = std::min(m, LU.size(-1));
  if (unpack_piv) {
    std::vector<int64_t> want = batch_sizes(LU, 2);
    want.push_back(kk);
    TORCH_CHECK(pivots.sizes().equals(want), "torch.lu_unpack: expected pivots of shape ", c10::IntArrayRef(want),
                ", got ", pivots.sizes());
  }
  Kernel k(op, LU);
  Builder& b = k.b();
  std::vector<at::Tensor> res;
  auto emit = [&](std::optional<Value> v, const at::Tensor& shape_of, at::Tensor* out) {
    if (v) return k.result(*v, LU.scalar_type(), out);
    if (out) {
      at::native::resize_output(*out, shape_of.sizes());
      return *out;
    }
    return at::empty(shape_of.sizes(), LU.options());
  };
  std::optional<Value> pv, lv, uv;
  if (unpack_piv) pv = lin::permutation_matrix(
      b, pivots_to_perm(k, k.in(pivots), m,
                        "pivots passed to lu_unpack must be between 1 and LU.size(-2) inclusive. "
                        "Did you call lu_factor_ex/linalg_lu_factor_ex?"),
      to_ir(LU.scalar_type()));
  if (unpack_lu) std::tie(lv, uv) = unpack_data(b, k.in(LU));
  at::Tensor p = emit(pv, mp, P), l = emit(lv, ml, L), u = emit(uv, mu, U);
  k.run();
  return {p, l, u};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lu_unpack(const at::Tensor& LU, const at::Tensor& pivots,
                                                         bool unpack_lu, bool unpack_piv) {
  if (LU.dim() >= 2 && !unrolled(LU))
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP(lu_unpack)>::call(LU, pivots, unpack_lu, unpack_piv);
  return lu_unpack_impl(LU, pivots, unpack_lu, unpack_piv, nullptr, nullptr, nullptr);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> lu_unpack_out(const at::Tensor& LU, const at::Tensor& pivots,
                                                                bool unpack_lu, bool unpack_piv, at::Tensor& P,
                                                                at::Tensor& L, at::Tensor& U) {
  if (LU.dim() >= 2 && !unrolled(LU))
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP2(lu_unpack, out)>::call(LU, pivots, unpack_lu,
                                                                                      unpack_piv, P, L, U);
  lu_unpack_impl(LU, pivots, unpack_lu, unpack_piv, &P, &L, &U);
  return {P, L, U};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linalg_lu_impl(const at::Tensor& A, bool pivot, at::Tensor* P,
                                                              at::Tensor* L, at::Tensor* U) {
  const char* op = "aten::linalg_lu";
  auto [mp, ml, mu] = at::linalg_lu(meta(A), pivot);
  check_dtype("lu_cpu", A, /*complex=*/true);
  TORCH_CHECK(pivot || A.numel() == 0, "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  Kernel k(op, A);
  Builder& b = k.b();
  lin::LuResult r = lin::lu_factor(b, k.in(A));
  auto [lv, uv] = unpack_data(b, r.lu);
  at::Tensor p = k.result(lin::permutation_matrix(b, r.perm, to_ir(A.scalar_type())), A.scalar_type(), P);
  at::Tensor l = k.result(lv, A.scalar_type(), L);
  at::Tensor u = k.result(uv, A.scalar_type(), U);
  k.run();
  return {p, l, u};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linalg_lu(const at::Tensor& A, bool pivot) {
  if (A.dim() >= 2 && !unrolled(A))
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP(linalg_lu)>::call(A, pivot);
  return linalg_lu_impl(A, pivot, nullptr, nullptr, nullptr);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_lu_out(const at::Tensor& A, bool pivot, at::Tensor& P,
                                                                at::Tensor& L, at::Tensor& U) {
  if (A.dim() >= 2 && !unrolled(A))
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP2(linalg_lu, out)>::call(A, pivot, P, L, U);
  linalg_lu_impl(A, pivot, &P, &L, &U);
  return {P, L, U};
}

// Rows `idx[..., i]` of x ([..., n, c]) as row i.
Value take_rows(Builder& b, Value x, Value idx) {
  const ir::Dims d = b.dims(x);
  const int64_t r = static_cast<int64_t>(d.size());
  int64_t bs = 1;
  for (int64_t i = 0; i < r - 2; ++i) bs *= d[i];
  const int64_t n = d[r - 2], c = d[r - 1];
  Value x3 = b.reshape(x, {bs, n, c});
  Value i3 = b.reshape(idx, {bs, n, 1});
  Value batch = b.iota(DType::kS32, {bs, n, 1}, 0);
  Value rows = b.gather(x3, b.concatenate({batch, i3}, 2), {0, 1}, {2}, {bs, n, c});
  return b.reshape(rows, d);
}

at::Tensor& lu_solve_impl(const at::Tensor& LU, const at::Tensor& pivots, const at::Tensor& B, bool left,
                          bool adjoint, at::Tensor* out, at::Tensor& storage) {
  const char* op = "aten::linalg_lu_solve";
  at::linalg_lu_solve(meta(LU), meta(pivots), meta(B), left, adjoint);
  check_dtype("linalg_lu_solve_cpu", LU, /*complex=*/true);
  auto [B_, LU_] = at::native::_linalg_broadcast_batch_dims(B, LU, nullptr);
  std::vector<int64_t> pshape = batch_sizes(LU_, 1);
  at::Tensor piv_ = pivots.expand(pshape);
  Kernel k(op, LU);
  Builder& b = k.b();
  Value x = k.in(B_);
  if (B_.numel() > 0) {
    Value lu = k.in(LU_);
    const int64_t n = LU.size(-1);
    // A^H X = B solves with conj(A) transposed; X A = B is A^T X^T = B^T.
    if (adjoint) lu = b.conj(lu);
    if (!left) {
      x = lin::matrix_transpose(b, x);
      adjoint = !adjoint;
    }
    Value perm = pivots_to_perm(k, k.in(piv_), n, "linalg.lu_solve: pivots must be between 1 and LU.size(-2)");
    if (!adjoint) {
      x = take_rows(b, x, perm);
      x = lin::solve_triangular(b, lu, x, false, true, true);
      x = lin::solve_triangular(b, lu, x, true, true, false);
    } else {
      x = lin::solve_triangular(b, lu, x, true, true, false, true);
      x = lin::solve_triangular(b, lu, x, false, true, true, true);
      // X = P V: row perm[i] of X is row i of V.
      const ir::Dims pd = b.dims(perm);
      const int64_t r = static_cast<int64_t>(pd.size());
      ir::Dims sq = pd;
      sq.push_back(n);
      ir::Dims keep(r);
      for (int64_t d = 0; d + 1 < r; ++d) keep[d] = d;
      keep[r - 1] = r;
      Value hit = b.compare(b.broadcast_in_dim(perm, sq, keep), b.iota(DType::kS32, sq, r - 1), ops::Cmp::kEQ);
      Value inv = b.reduce_sum(b.select(hit, b.iota(DType::kS32, sq, r), b.constant(DType::kS32, 0, sq)), {r});
      x = take_rows(b, x, inv);
    }
    if (!left) x = lin::matrix_transpose(b, x);
  }
  k.column_major(left);  // as the CPU: X of A X = B column-major, of X A = B row-major
  storage = k.result(x, B.scalar_type(), out);
  k.run();
  return out ? *out : storage;
}

at::Tensor linalg_lu_solve(const at::Tensor& LU, const at::Tensor& pivots, const at::Tensor& B, bool left,
                           bool adjoint) {
  if (LU.dim() >= 2 && !unrolled(LU))
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP(linalg_lu_solve)>::call(LU, pivots, B, left, adjoint);
  at::Tensor r;
  lu_solve_impl(LU, pivots, B, left, adjoint, nullptr, r);
  return r;
}

at::Tensor& linalg_lu_solve_out(const at::Tensor& LU, const at::Tensor& pivots, const at::Tensor& B, bool left,
                                bool adjoint, at::Tensor& out) {
  if (LU.dim() >= 2 && !unrolled(LU))
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP2(linalg_lu_solve, out)>::call(LU, pivots, B, left,
                                                                                            adjoint, out);
  at::Tensor r;
  lu_solve_impl(LU, pivots, B, left, adjoint, &out, r);
  return out;
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("_cholesky_solve_helper", TORCH_FN(cholesky_solve_helper));
  m.impl("cholesky", TORCH_FN(cholesky_kernel));
  m.impl("cholesky.out", TORCH_FN(cholesky_out));
  m.impl("cholesky_inverse", TORCH_FN(cholesky_inverse));
  m.impl("cholesky_inverse.out", TORCH_FN(cholesky_inverse_out));
  m.impl("linalg_cholesky_ex", TORCH_FN(linalg_cholesky_ex));
  m.impl("linalg_cholesky_ex.L", TORCH_FN(linalg_cholesky_ex_out));
  m.impl("linalg_lu", TORCH_FN(linalg_lu));
  m.impl("linalg_lu.out", TORCH_FN(linalg_lu_out));
  m.impl("linalg_lu_factor_ex", TORCH_FN(linalg_lu_factor_ex));
  m.impl("linalg_lu_factor_ex.out", TORCH_FN(linalg_lu_factor_ex_out));
  m.impl("linalg_lu_solve", TORCH_FN(linalg_lu_solve));
  m.impl("linalg_lu_solve.out", TORCH_FN(linalg_lu_solve_out));
  m.impl("linalg_solve_triangular", TORCH_FN(linalg_solve_triangular));
  m.impl("linalg_solve_triangular.out", TORCH_FN(linalg_solve_triangular_out));
  m.impl("lu_unpack", TORCH_FN(lu_unpack));
  m.impl("lu_unpack.out", TORCH_FN(lu_unpack_out));
  m.impl("triangular_solve", TORCH_FN(triangular_solve));
  m.impl("triangular_solve.X", TORCH_FN(triangular_solve_out));
}

}  // namespace torchtpu::aten
