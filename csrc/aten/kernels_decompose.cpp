// Orthogonal decompositions (ops/decompose.h): QR (linalg_qr, geqrf,
// householder_product, ormqr) with LAPACK's Householder conventions, the
// symmetric eigendecomposition (_linalg_eigh) and the SVD (_linalg_svd),
// which the composite linalg ops (eigvalsh, svdvals, pinv, matrix_rank,
// matrix_norm, cond, lstsq's gelsd-style paths, ...) reach. Batch dims are
// flattened to one; float32 and float64 only, as the CPU's LAPACK.
// Eigenvectors and singular vectors are unique only up to sign (as between
// LAPACK and cuSOLVER); the rest matches LAPACK's to rounding.
#include <ATen/native/Resize.h>
#include <torch/library.h>

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
  check_same_device(op, A.device(), {qo, ro});
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
  R = emit(k, r, rshape, A.scalar_type(), ro);
  Q = want_q ? emit(k, ops::householder_q(b, h.packed, h.tau, qc), qshape, A.scalar_type(), qo)
             : k.result(b.constant(to_ir(A.scalar_type()), 0, {0}), A.scalar_type(), qo);
  k.run();
  return {Q, R};
}
std::tuple<at::Tensor, at::Tensor> linalg_qr(const at::Tensor& A, c10::string_view mode) {
  TPU_COUNT("aten::linalg_qr");
  return qr_impl(A, mode, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> linalg_qr_out(const at::Tensor& A, c10::string_view mode, at::Tensor& Q,
                                                   at::Tensor& R) {
  TPU_COUNT("aten::linalg_qr.out");
  qr_impl(A, mode, &Q, &R);
  return {Q, R};
}

std::tuple<at::Tensor, at::Tensor> geqrf_impl(const at::Tensor& A, at::Tensor* ao, at::Tensor* to) {
  const char* op = "aten::geqrf";
  TORCH_CHECK(A.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  check_matrix("torch.geqrf", A);
  check_same_device(op, A.device(), {ao, to});
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
  at::Tensor p = emit(k, h.packed, A.sizes().vec(), A.scalar_type(), ao);
  at::Tensor t = emit(k, h.tau, with(batch_of(A), {kk}), A.scalar_type(), to);
  k.run();
  return {p, t};
}
std::tuple<at::Tensor, at::Tensor> geqrf(const at::Tensor& A) {
  TPU_COUNT("aten::geqrf");
  return geqrf_impl(A, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> geqrf_out(const at::Tensor& A, at::Tensor& a, at::Tensor& tau) {
  TPU_COUNT("aten::geqrf.a");
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
  check_same_device("aten::linalg_householder_product", A.device(), {&tau, out});
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
  at::Tensor r = emit(k, q, A.sizes().vec(), A.scalar_type(), out);
  k.run();
  return r;
}
at::Tensor householder_product(const at::Tensor& A, const at::Tensor& tau) {
  TPU_COUNT("aten::linalg_householder_product");
  return householder_product_impl(A, tau, nullptr);
}
at::Tensor& householder_product_out(const at::Tensor& A, const at::Tensor& tau, at::Tensor& out) {
  TPU_COUNT("aten::linalg_householder_product.out");
  householder_product_impl(A, tau, &out);
  return out;
}

at::Tensor ormqr_impl(const at::Tensor& A, const at::Tensor& tau, const at::Tensor& C, bool left, bool transpose,
                      at::Tensor* out) {
  const char* name = "torch.ormqr";
  check_reflectors(name, A, tau);
  check_same_device("aten::ormqr", A.device(), {&tau, &C, out});
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
  at::Tensor r = k.result(c, C.scalar_type(), out);
  k.run();
  return r;
}
at::Tensor ormqr(const at::Tensor& A, const at::Tensor& tau, const at::Tensor& C, bool left, bool transpose) {
  TPU_COUNT("aten::ormqr");
  return ormqr_impl(A, tau, C, left, transpose, nullptr);
}
at::Tensor& ormqr_out(const at::Tensor& A, const at::Tensor& tau, const at::Tensor& C, bool left, bool transpose,
                      at::Tensor& out) {
  TPU_COUNT("aten::ormqr.out");
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
  check_same_device(op, A.device(), {lo, vo});
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
  V = compute_v ? emit(k, e.vectors, vshape, A.scalar_type(), vo) : eye_like(k, {0}, A.scalar_type(), false, vo);
  k.run();
  return {L, V};
}
std::tuple<at::Tensor, at::Tensor> linalg_eigh(const at::Tensor& A, c10::string_view uplo, bool compute_v) {
  TPU_COUNT("aten::_linalg_eigh");
  return eigh_impl(A, uplo, compute_v, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> linalg_eigh_out(const at::Tensor& A, c10::string_view uplo, bool compute_v,
                                                     at::Tensor& L, at::Tensor& V) {
  TPU_COUNT("aten::_linalg_eigh.eigenvalues");
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
  check_same_device(op, A.device(), {uo, so, vo});
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
  U = compute_uv ? emit(k, r.u, ushape, st, uo) : eye_like(k, {0}, st, false, uo);
  Vh = compute_uv ? emit(k, r.vh, vshape, st, vo) : eye_like(k, {0}, st, false, vo);
  k.run();
  return {U, S, Vh};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> linalg_svd(const at::Tensor& A, bool full, bool compute_uv,
                                                          std::optional<c10::string_view> driver) {
  TPU_COUNT("aten::_linalg_svd");
  return svd_impl(A, full, compute_uv, driver, nullptr, nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_svd_out(const at::Tensor& A, bool full, bool compute_uv,
                                                                 std::optional<c10::string_view> driver, at::Tensor& U,
                                                                 at::Tensor& S, at::Tensor& Vh) {
  TPU_COUNT("aten::_linalg_svd.U");
  svd_impl(A, full, compute_uv, driver, &U, &S, &Vh);
  return {U, S, Vh};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
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
