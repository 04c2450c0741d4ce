// Orthogonal decompositions (ops/decompose.h): QR (linalg_qr, geqrf,
// householder_product, ormqr) with LAPACK's Householder conventions, the
// symmetric eigendecomposition (_linalg_eigh) and the SVD (_linalg_svd),
// which the composite linalg ops (eigvalsh, svdvals, pinv, matrix_rank,
// matrix_norm, cond, ...) reach, and linalg_lstsq through the SVD. Batch dims are
// flattened to one; float32 and float64 only, as the CPU's LAPACK.
// Eigenvectors and singular vectors are unique only up to sign (as between
// LAPACK and cuSOLVER); the rest matches LAPACK's to rounding.
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>

#include <limits>

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "ops/decompose.h"
#include "ops/linalg.h"

namespace torchtpu::aten {
namespace {

void check_matrix(const char* name, const at::Tensor& a) {
  TORCH_CHECK(a.dim() >= 2, name, ": The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(at::isFloatingType(a.scalar_type()) || a.is_complex(), name,
              ": Expected a floating point or complex tensor as input. Got ", a.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(a.scalar_type() == at::kFloat || a.scalar_type() == at::kDouble, name,
                              ": only float32 and float64 are supported on tpu, got ", a.scalar_type());
}

std::vector<int64_t> batch_of(const at::Tensor& a, int64_t drop = 2) {
  return std::vector<int64_t>(a.sizes().begin(), a.sizes().end() - drop);
}
int64_t batch_count(const at::Tensor& a, int64_t drop = 2) { return c10::multiply_integers(batch_of(a, drop)); }
std::vector<int64_t> with(std::vector<int64_t> batch, std::initializer_list<int64_t> tail) {
  batch.insert(batch.end(), tail);
  return batch;
}

// `v` ([B, ...]) written to `out` (resized) or a new tensor, shaped `shape`.
at::Tensor emit(Kernel& k, Value v, const std::vector<int64_t>& shape, at::ScalarType st, at::Tensor* out) {
  Value r = k.b().reshape(v, to_dims(shape));
  return k.result(r, st, out);
}

// emit() for a matrix result: batched column-major, as LAPACK returns it.
at::Tensor emit_matrix(Kernel& k, Value v, const std::vector<int64_t>& shape, at::ScalarType st, at::Tensor* out) {
  k.column_major(true);
  at::Tensor r = emit(k, v, shape, st, out);
  k.column_major(false);
  return r;
}

// An identity (or zeros) [batch..., r, c] tensor, for empty inputs.
at::Tensor eye_like(Kernel& k, const std::vector<int64_t>& shape, at::ScalarType st, bool eye, at::Tensor* out) {
  Builder& b = k.b();
  const ir::Dims d = to_dims(shape);
  const int64_t r = static_cast<int64_t>(d.size());
  Value v = b.constant(to_ir(st), 0, d);
  if (eye) v = b.select(b.compare(b.iota(DType::kS64, d, r - 2), b.iota(DType::kS64, d, r - 1), ops::Cmp::kEQ),
                        b.constant(to_ir(st), 1, d), v);
  return k.result(v, st, out);
}

// LAPACK's eigen and singular value drivers fail on a non-finite matrix; so
// does the device, at the next sync point (a device-side check).
void check_finite(Kernel& k, Value a, const std::string& what) {
  Builder& b = k.b();
  const ir::Dims d = b.dims(a);
  std::vector<int64_t> all(d.size());
  for (size_t i = 0; i < d.size(); ++i) all[i] = static_cast<int64_t>(i);
  Value diff = b.sub(a, a);  // 0 where finite, NaN where not
  Value bad = b.reduce(b.compare(diff, diff, ops::Cmp::kNE), all, ir::Body::kOr, 0);
  k.check(bad, Kernel::CheckKind::kRuntime, what);
}

// ---- QR -------------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> qr_impl(const at::Tensor& A, c10::string_view mode, at::Tensor* qo, at::Tensor* ro) {
  const char* op = "aten::linalg_qr";
  check_matrix("linalg.qr", A);
  TORCH_CHECK(mode == "reduced" || mode == "r" || mode == "complete", "qr received unrecognized mode '", mode,
              "' but expected one of 'reduced' (default), 'r', or 'complete'");
  const int64_t m = A.size(-2), n = A.size(-1), kk = std::min(m, n), B = batch_count(A);
  const bool complete = mode == "complete", want_q = mode != "r";
  const int64_t qc = complete ? m : kk;
  const std::vector<int64_t> rshape = with(batch_of(A), {complete ? m : kk, n});
  const std::vector<int64_t> qshape = want_q ? with(batch_of(A), {m, qc}) : std::vector<int64_t>{0};
  Kernel k(op, A);
  Builder& b = k.b();
  at::Tensor Q, R;
  if (A.numel() == 0) {
    R = eye_like(k, rshape, A.scalar_type(), false, ro);
    Q = want_q ? eye_like(k, qshape, A.scalar_type(), true, qo) : k.result(b.constant(to_ir(A.scalar_type()), 0, {0}), A.scalar_type(), qo);
    k.run();
    return {Q, R};
  }
  Value a = b.reshape(k.in(A), {B, m, n});
  ops::Householder h = ops::householder_qr(b, a);
  Value r = ops::triangle(b, b.slice_dim(h.packed, 1, 0, complete ? m : kk), /*lower=*/false);
  R = emit_matrix(k, r, rshape, A.scalar_type(), ro);
  Q = want_q ? emit_matrix(k, ops::householder_q(b, h.packed, h.tau, qc), qshape, A.scalar_type(), qo)
             : k.result(b.constant(to_ir(A.scalar_type()), 0, {0}), A.scalar_type(), qo);
  k.run();
  return {Q, R};
}
std::tuple<at::Tensor, at::Tensor> linalg_qr(const at::Tensor& A, c10::string_view mode) {
  return qr_impl(A, mode, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> linalg_qr_out(const at::Tensor& A, c10::string_view mode, at::Tensor& Q,
                                                   at::Tensor& R) {
  qr_impl(A, mode, &Q, &R);
  return {Q, R};
}

std::tuple<at::Tensor, at::Tensor> geqrf_impl(const at::Tensor& A, at::Tensor* ao, at::Tensor* to) {
  const char* op = "aten::geqrf";
  TORCH_CHECK(A.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  check_matrix("torch.geqrf", A);
  const int64_t m = A.size(-2), n = A.size(-1), kk = std::min(m, n), B = batch_count(A);
  Kernel k(op, A);
  Builder& b = k.b();
  if (A.numel() == 0) {
    at::Tensor p = k.result(b.reshape(k.in(A), to_dims(A.sizes())), A.scalar_type(), ao);
    at::Tensor t = eye_like(k, with(batch_of(A), {kk}), A.scalar_type(), false, to);
    k.run();
    return {p, t};
  }
  ops::Householder h = ops::householder_qr(b, b.reshape(k.in(A), {B, m, n}));
  at::Tensor p = emit_matrix(k, h.packed, A.sizes().vec(), A.scalar_type(), ao);
  at::Tensor t = emit(k, h.tau, with(batch_of(A), {kk}), A.scalar_type(), to);
  k.run();
  return {p, t};
}
std::tuple<at::Tensor, at::Tensor> geqrf(const at::Tensor& A) {
  return geqrf_impl(A, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> geqrf_out(const at::Tensor& A, at::Tensor& a, at::Tensor& tau) {
  geqrf_impl(A, &a, &tau);
  return {a, tau};
}

void check_reflectors(const char* name, const at::Tensor& A, const at::Tensor& tau) {
  TORCH_CHECK(A.dim() >= 2, name, ": input must have at least 2 dimensions.");
  TORCH_CHECK(tau.dim() == A.dim() - 1, name, ": input.dim() must be greater than tau.dim() by 1");
  TORCH_CHECK(A.scalar_type() == tau.scalar_type(), name, ": Expected input and tau to have the same dtype, but ",
              "input has dtype ", A.scalar_type(), " and tau has dtype ", tau.scalar_type());
  for (int64_t i = 0; i < A.dim() - 2; ++i)
    TORCH_CHECK(A.size(i) == tau.size(i), name, ": Expected batch dimensions of tau to be equal to input.shape[:-2], ",
                "but got ", tau.sizes());
  check_matrix(name, A);
}

at::Tensor householder_product_impl(const at::Tensor& A, const at::Tensor& tau, at::Tensor* out) {
  const char* name = "torch.linalg.householder_product";
  check_reflectors(name, A, tau);
  TORCH_CHECK(A.size(-2) >= A.size(-1), name, ": input.shape[-2] must be greater than or equal to input.shape[-1]");
  TORCH_CHECK(A.size(-1) >= tau.size(-1), name, ": input.shape[-1] must be greater than or equal to tau.shape[-1]");
  const int64_t m = A.size(-2), n = A.size(-1), B = batch_count(A);
  Kernel k("aten::linalg_householder_product", A);
  Builder& b = k.b();
  if (A.numel() == 0) {
    at::Tensor r = eye_like(k, A.sizes().vec(), A.scalar_type(), true, out);
    k.run();
    return r;
  }
  Value q = ops::householder_q(b, b.reshape(k.in(A), {B, m, n}), b.reshape(k.in(tau), {B, tau.size(-1)}), n);
  at::Tensor r = emit_matrix(k, q, A.sizes().vec(), A.scalar_type(), out);
  k.run();
  return r;
}
at::Tensor householder_product(const at::Tensor& A, const at::Tensor& tau) {
  return householder_product_impl(A, tau, nullptr);
}
at::Tensor& householder_product_out(const at::Tensor& A, const at::Tensor& tau, at::Tensor& out) {
  householder_product_impl(A, tau, &out);
  return out;
}

at::Tensor ormqr_impl(const at::Tensor& A, const at::Tensor& tau, const at::Tensor& C, bool left, bool transpose,
                      at::Tensor* out) {
  const char* name = "torch.ormqr";
  check_reflectors(name, A, tau);
  TORCH_CHECK(C.dim() >= 2, name, ": other must have at least 2 dimensions.");
  TORCH_CHECK(C.dim() == A.dim(), name, ": input.dim() must be equal to other.dim()");
  TORCH_CHECK(C.scalar_type() == A.scalar_type(), name, ": Expected input and other to have the same dtype, but ",
              "input has dtype ", A.scalar_type(), " and other has dtype ", C.scalar_type());
  const int64_t m = A.size(-2), kk = tau.size(-1), B = batch_count(A);
  const int64_t mq = left ? C.size(-2) : C.size(-1);
  TORCH_CHECK(mq == m, name, ": other.shape[", left ? -2 : -1, "] must be equal to input.shape[-2]");
  TORCH_CHECK(kk <= mq, name, ": tau.shape[-1] must be less than or equal to input.shape[-2]");
  TORCH_CHECK(A.size(-1) >= kk, name, ": input.shape[-1] must be greater than or equal to tau.shape[-1]");
  for (int64_t i = 0; i < A.dim() - 2; ++i)
    TORCH_CHECK(A.size(i) == C.size(i), name, ": Expected batch dimensions of other to be equal to input.shape[:-2]");
  Kernel k("aten::ormqr", C);
  Builder& b = k.b();
  Value c = k.in(C);
  if (C.numel() > 0 && kk > 0 && B > 0) {
    Value cb = b.reshape(c, {B, C.size(-2), C.size(-1)});
    Value pk = b.reshape(k.in(A), {B, m, A.size(-1)});
    c = b.reshape(ops::householder_apply(b, pk, b.reshape(k.in(tau), {B, kk}), cb, left, transpose),
                  to_dims(C.sizes()));
  }
  k.column_major(true);
  at::Tensor r = k.result(c, C.scalar_type(), out);
  k.run();
  return r;
}
at::Tensor ormqr(const at::Tensor& A, const at::Tensor& tau, const at::Tensor& C, bool left, bool transpose) {
  return ormqr_impl(A, tau, C, left, transpose, nullptr);
}
at::Tensor& ormqr_out(const at::Tensor& A, const at::Tensor& tau, const at::Tensor& C, bool left, bool transpose,
                      at::Tensor& out) {
  ormqr_impl(A, tau, C, left, transpose, &out);
  return out;
}

// ---- eigh and SVD -----------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> eigh_impl(const at::Tensor& A, c10::string_view uplo, bool compute_v,
                                             at::Tensor* lo, at::Tensor* vo) {
  const char* op = "aten::_linalg_eigh";
  check_matrix("linalg.eigh", A);
  TORCH_CHECK(A.size(-1) == A.size(-2), "linalg.eigh: A must be batches of square matrices, but they are ",
              A.size(-2), " by ", A.size(-1), " matrices");
  TORCH_CHECK(uplo == "L" || uplo == "U", "Expected UPLO argument to be 'L' or 'U', but got ", uplo);
  const int64_t n = A.size(-1), B = batch_count(A);
  Kernel k(op, A);
  Builder& b = k.b();
  const std::vector<int64_t> lshape = with(batch_of(A), {n});
  const std::vector<int64_t> vshape = compute_v ? A.sizes().vec() : std::vector<int64_t>{0};
  at::Tensor L, V;
  if (A.numel() == 0) {
    L = eye_like(k, lshape, A.scalar_type(), false, lo);
    V = compute_v ? eye_like(k, vshape, A.scalar_type(), true, vo) : eye_like(k, {0}, A.scalar_type(), false, vo);
    k.run();
    return {L, V};
  }
  Value a = b.reshape(k.in(A), {B, n, n});
  // The symmetric matrix whose `uplo` triangle is A's.
  const bool lower = uplo == "L";
  Value tri = ops::triangle(b, a, lower);
  Value strict = ops::triangle(b, a, lower, lower ? -1 : 1);
  Value sym = b.add(tri, ops::matrix_transpose(b, strict));
  check_finite(k, sym, "linalg.eigh: The algorithm failed to converge because the input matrix contained "
                       "non-finite values.");
  ops::Eigh e = ops::jacobi_eigh(b, sym);
  L = emit(k, e.values, lshape, A.scalar_type(), lo);
  V = compute_v ? emit_matrix(k, e.vectors, vshape, A.scalar_type(), vo) : eye_like(k, {0}, A.scalar_type(), false, vo);
  k.run();
  return {L, V};
}
std::tuple<at::Tensor, at::Tensor> linalg_eigh(const at::Tensor& A, c10::string_view uplo, bool compute_v) {
  return eigh_impl(A, uplo, compute_v, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> linalg_eigh_out(const at::Tensor& A, c10::string_view uplo, bool compute_v,
                                                     at::Tensor& L, at::Tensor& V) {
  eigh_impl(A, uplo, compute_v, &L, &V);
  return {L, V};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> svd_impl(const at::Tensor& A, bool full, bool compute_uv,
                                                        std::optional<c10::string_view> driver, at::Tensor* uo,
                                                        at::Tensor* so, at::Tensor* vo) {
  const char* op = "aten::_linalg_svd";
  check_matrix("linalg.svd", A);
  TORCH_CHECK(!driver.has_value(), "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs ",
              "with cuSOLVER backend.");
  const int64_t m = A.size(-2), n = A.size(-1), kk = std::min(m, n), B = batch_count(A);
  const bool fm = full && compute_uv;
  const std::vector<int64_t> ushape = compute_uv ? with(batch_of(A), {m, fm ? m : kk}) : std::vector<int64_t>{0};
  const std::vector<int64_t> vshape = compute_uv ? with(batch_of(A), {fm ? n : kk, n}) : std::vector<int64_t>{0};
  const std::vector<int64_t> sshape = with(batch_of(A), {kk});
  const at::ScalarType st = A.scalar_type();
  Kernel k(op, A);
  Builder& b = k.b();
  at::Tensor U, S, Vh;
  if (A.numel() == 0) {
    U = eye_like(k, ushape, st, compute_uv, uo);
    S = eye_like(k, sshape, st, false, so);
    Vh = eye_like(k, vshape, st, compute_uv, vo);
    k.run();
    return {U, S, Vh};
  }
  Value a = b.reshape(k.in(A), {B, m, n});
  check_finite(k, a, "linalg.svd: The algorithm failed to converge because the input matrix contained non-finite "
                     "values.");
  ops::Svd r = ops::jacobi_svd(b, a, fm, compute_uv);
  S = emit(k, r.s, sshape, st, so);
  U = compute_uv ? emit_matrix(k, r.u, ushape, st, uo) : eye_like(k, {0}, st, false, uo);
  Vh = compute_uv ? emit_matrix(k, r.vh, vshape, st, vo) : eye_like(k, {0}, st, false, vo);
  k.run();
  return {U, S, Vh};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> linalg_svd(const at::Tensor& A, bool full, bool compute_uv,
                                                          std::optional<c10::string_view> driver) {
  return svd_impl(A, full, compute_uv, driver, nullptr, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_svd_out(const at::Tensor& A, bool full, bool compute_uv,
                                                                 std::optional<c10::string_view> driver, at::Tensor& U,
                                                                 at::Tensor& S, at::Tensor& Vh) {
  svd_impl(A, full, compute_uv, driver, &U, &S, &Vh);
  return {U, S, Vh};
}

// ---- least squares ----------------------------------------------------------------------

// linalg_lstsq for every CPU driver through the SVD: the minimum-norm
// solution V diag(1/s) U^T B over the singular values above rcond * s_max
// (LAPACK's gelsd/gelss; gelsy's rank-revealing QR and gels's QR give the
// same solution on the full-rank problems they are for). What each driver
// returns is kept: rank (not gels), singular values (gelsd/gelss), the
// squared residuals for tall problems (not gelsy; gelsd/gelss only when
// every matrix has full rank).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> lstsq_impl(const at::Tensor& A, const at::Tensor& Bm,
                                                                      std::optional<double> rcond,
                                                                      std::optional<c10::string_view> driver_opt,
                                                                      std::array<at::Tensor*, 4> outs) {
  const char* op = "aten::linalg_lstsq";
  TORCH_CHECK(A.dim() >= 2, "torch.linalg.lstsq: input must have at least 2 dimensions.");
  TORCH_CHECK(Bm.dim() >= 1, "torch.linalg.lstsq: other must have at least 1 dimension.");
  TORCH_CHECK(A.scalar_type() == Bm.scalar_type(), "torch.linalg.lstsq: Expected input and other to have the same ",
              "dtype, but got input's dtype ", A.scalar_type(), " and other's dtype ", Bm.scalar_type());
  check_matrix("torch.linalg.lstsq", A);
  const bool vector = at::native::linalg_solve_is_vector_rhs(A, Bm);
  const at::Tensor B2 = vector ? Bm.unsqueeze(-1) : Bm;
  TORCH_CHECK(A.size(-2) == B2.size(-2), "torch.linalg.lstsq: input.size(-2) should match other.size(-2)");
  const std::string driver(driver_opt.value_or("gelsy"));
  TORCH_CHECK(driver == "gels" || driver == "gelsy" || driver == "gelsd" || driver == "gelss",
              "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  auto [Bx, Ax] = at::native::_linalg_broadcast_batch_dims(B2, A, nullptr);
  const int64_t m = Ax.size(-2), n = Ax.size(-1), nrhs = Bx.size(-1), kk = std::min(m, n);
  const std::vector<int64_t> batch = batch_of(Ax);
  const int64_t nb = c10::multiply_integers(batch);
  const at::ScalarType st = A.scalar_type();
  const double eps = st == at::kDouble ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
  const double rc = rcond.value_or(eps * static_cast<double>(std::max(m, n)));
  const bool want_rank = driver != "gels", want_sv = driver == "gelsd" || driver == "gelss";
  const bool want_res = m > n && driver != "gelsy";
  // gelsd/gelss return residuals only when every matrix has full rank: a
  // data-dependent shape, so that case reads the smallest rank back first
  // (a sync point, as on the CPU).
  bool full = true;
  if (want_res && driver != "gels" && Ax.numel() > 0 && Bx.numel() > 0) {
    Kernel kr(op, A);
    Builder& br = kr.b();
    ops::Svd d2 = ops::jacobi_svd(br, br.reshape(kr.in(Ax), {nb, m, n}), false, false);
    const ir::Dims sd{nb, kk};
    Value sm = br.reduce_max(d2.s, {1});
    Value ct = br.mul(br.broadcast_in_dim(sm, sd, {0}), br.broadcast_to(kr.scalar(rc, st), sd));
    Value rk2 = br.reduce_sum(br.convert(br.compare(d2.s, ct, ops::Cmp::kGT), DType::kS64), {1});
    at::Tensor mn = kr.out(br.reduce_min(rk2, {0}), at::kLong);
    kr.run();
    full = mn.item<int64_t>() == n;
  }
  Kernel k(op, A);
  Builder& b = k.b();
  std::vector<int64_t> sol_shape = with(batch, {n, nrhs});
  if (vector) sol_shape.pop_back();
  at::Tensor sol, res, rank, sv;
  if (Ax.numel() == 0 || Bx.numel() == 0) {
    sol = eye_like(k, sol_shape, st, false, outs[0]);
    res = eye_like(k, want_res && nb * nrhs > 0 && m > 0 ? with(batch, {nrhs}) : std::vector<int64_t>{0}, st, false,
                   outs[1]);
    rank = k.result(b.constant(DType::kS64, 0, to_dims(want_rank ? batch : std::vector<int64_t>{0})), at::kLong,
                    outs[2]);
    sv = eye_like(k, want_sv ? with(batch, {kk}) : std::vector<int64_t>{0}, st, false, outs[3]);
    k.run();
    return {sol, res, rank, sv};
  }
  Value a = b.reshape(k.in(Ax), {nb, m, n});
  Value rhs = b.reshape(k.in(Bx), {nb, m, nrhs});
  ops::Svd d = ops::jacobi_svd(b, a, /*full=*/false, /*compute_uv=*/true);
  const ir::DType t = to_ir(st);
  const ir::Dims sd{nb, kk};
  Value smax = b.reduce_max(d.s, {1});  // [B]
  Value cut = b.mul(b.broadcast_in_dim(smax, sd, {0}), b.broadcast_to(k.scalar(rc, st), sd));
  Value keep = b.compare(d.s, cut, ops::Cmp::kGT);
  Value inv = b.select(keep, b.div(b.constant(t, 1, sd), d.s), b.constant(t, 0, sd));
  Value ut_b = ops::matmul(b, ops::matrix_transpose(b, d.u), rhs);  // [B, k, nrhs]
  Value scaled = b.mul(ut_b, b.broadcast_in_dim(inv, {nb, kk, nrhs}, {0, 1}));
  Value x = ops::matmul(b, ops::matrix_transpose(b, d.vh), scaled);  // [B, n, nrhs]
  sol = vector ? emit(k, x, sol_shape, st, outs[0]) : emit_matrix(k, x, sol_shape, st, outs[0]);
  Value rk = b.reduce_sum(b.convert(keep, DType::kS64), {1});
  rank = want_rank ? emit(k, rk, batch, at::kLong, outs[2])
                   : k.result(b.constant(DType::kS64, 0, {0}), at::kLong, outs[2]);
  sv = want_sv ? emit(k, d.s, with(batch, {kk}), st, outs[3]) : eye_like(k, {0}, st, false, outs[3]);
  if (want_res) {
    Value r = b.sub(ops::matmul(b, a, x), rhs);
    Value rr = b.reduce_sum(b.mul(r, r), {1});  // [B, nrhs]
    res = full ? emit(k, rr, with(batch, {nrhs}), st, outs[1]) : eye_like(k, {0}, st, false, outs[1]);
  } else {
    res = eye_like(k, {0}, st, false, outs[1]);
  }
  k.run();
  return {sol, res, rank, sv};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> linalg_lstsq(const at::Tensor& A, const at::Tensor& B,
                                                                        std::optional<double> rcond,
                                                                        std::optional<c10::string_view> driver) {
  return lstsq_impl(A, B, rcond, driver, {nullptr, nullptr, nullptr, nullptr});
}
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> linalg_lstsq_out(
    const at::Tensor& A, const at::Tensor& B, std::optional<double> rcond, std::optional<c10::string_view> driver,
    at::Tensor& sol, at::Tensor& res, at::Tensor& rank, at::Tensor& sv) {
  lstsq_impl(A, B, rcond, driver, {&sol, &res, &rank, &sv});
  return {sol, res, rank, sv};
}

at::Tensor linalg_matrix_exp(const at::Tensor& A) {
  TORCH_CHECK(A.dim() >= 2, "linalg.matrix_exp: The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(A.size(-1) == A.size(-2), "linalg.matrix_exp: A must be batches of square matrices, but they are ",
              A.size(-2), " by ", A.size(-1), " matrices");
  // 16-bit inputs are computed in float32 and rounded once (the CPU's own
  // 16-bit kernel overflows: inf and NaN for a 3x3 of norm 1).
  const bool narrow = at::isReducedFloatingType(A.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(narrow || A.scalar_type() == at::kFloat || A.scalar_type() == at::kDouble,
                              "linalg.matrix_exp: only floating types are supported on tpu, got ", A.scalar_type());
  const int64_t n = A.size(-1), B = batch_count(A);
  Kernel k("aten::linalg_matrix_exp", A);
  Builder& b = k.b();
  at::Tensor r;
  if (A.numel() == 0) {
    r = eye_like(k, A.sizes().vec(), A.scalar_type(), true, nullptr);
  } else {
    const Value a = narrow ? k.in(A, at::kFloat) : k.in(A);
    r = emit(k, ops::matrix_exp(b, b.reshape(a, {B, n, n})), A.sizes().vec(), A.scalar_type(), nullptr);
  }
  k.run();
  return r;
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("linalg_matrix_exp", TORCH_FN(linalg_matrix_exp));
  m.impl("linalg_lstsq", TORCH_FN(linalg_lstsq));
  m.impl("linalg_lstsq.out", TORCH_FN(linalg_lstsq_out));
  m.impl("linalg_qr", TORCH_FN(linalg_qr));
  m.impl("linalg_qr.out", TORCH_FN(linalg_qr_out));
  m.impl("geqrf", TORCH_FN(geqrf));
  m.impl("geqrf.a", TORCH_FN(geqrf_out));
  m.impl("linalg_householder_product", TORCH_FN(householder_product));
  m.impl("linalg_householder_product.out", TORCH_FN(householder_product_out));
  m.impl("ormqr", TORCH_FN(ormqr));
  m.impl("ormqr.out", TORCH_FN(ormqr_out));
  m.impl("_linalg_eigh", TORCH_FN(linalg_eigh));
  m.impl("_linalg_eigh.eigenvalues", TORCH_FN(linalg_eigh_out));
  m.impl("_linalg_svd", TORCH_FN(linalg_svd));
  m.impl("_linalg_svd.U", TORCH_FN(linalg_svd_out));
}

}  // namespace torchtpu::aten
