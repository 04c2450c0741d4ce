// Linear algebra built on the LU kernels (kernels_linalg.cpp) the way
// PyTorch's CPU implementation composes them: linalg.solve, linalg.inv,
// det and slogdet. They factor what the CPU factors (solve: A; det and
// slogdet: A^T when A is contiguous), so the LU and pivots they return, which
// the backward formulas read, match the CPU's. Also LDL^T (ldl_factor,
// ldl_solve) for float32 and float64; complex matrices go to the CPU
// fallback.
#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>

#include "aten/fallback.h"
#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "ops/linalg.h"

namespace torchtpu::aten {
namespace {

at::Tensor meta(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

// An out of another shape is resized and takes the meta result's strides
// (LAPACK's column-major), as PyTorch's structured out= ops.
void resize_like(at::Tensor& out, const at::Tensor& m) {
  if (at::native::resize_output(out, m.sizes())) out.as_strided_(m.sizes(), m.strides());
}

// det(P) of the pivots: +1 for an even permutation, -1 for an odd one.
at::Tensor lu_det_P(const at::Tensor& pivots) {
  return (at::arange(1, pivots.size(-1) + 1, pivots.options()) != pivots)
      .sum(-1, /*keepdim=*/false, /*dtype=*/at::kLong)
      .fmod_(2)
      .mul_(-2)
      .add_(1);
}

void solve_ex_into(const at::Tensor& A, const at::Tensor& B, bool left, bool check_errors, at::Tensor& result,
                   at::Tensor& LU, at::Tensor& pivots, at::Tensor& info) {
  auto [mr, mlu, mp, mi] = at::_linalg_solve_ex(meta(A), meta(B), left, check_errors);
  resize_like(result, mr);
  at::linalg_lu_factor_ex_out(LU, pivots, info, A);
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.solve_ex", A.dim() == 2);
  const bool vector_case = at::native::linalg_solve_is_vector_rhs(LU, B);
  at::Tensor result_ = vector_case ? result.unsqueeze(-1) : result;
  at::Tensor B_ = vector_case ? B.unsqueeze(-1) : B;
  at::linalg_lu_solve_out(result_, LU, pivots, B_, left, /*adjoint=*/false);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> linalg_solve_ex(const at::Tensor& A, const at::Tensor& B,
                                                                           bool left, bool check_errors) {
  at::Tensor result = at::empty({0}, B.options()), LU = at::empty({0}, A.options());
  at::Tensor pivots = at::empty({0}, A.options().dtype(at::kInt)), info = at::empty({0}, A.options().dtype(at::kInt));
  solve_ex_into(A, B, left, check_errors, result, LU, pivots, info);
  return {result, LU, pivots, info};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> linalg_solve_ex_out(
    const at::Tensor& A, const at::Tensor& B, bool left, bool check_errors, at::Tensor& result, at::Tensor& LU,
    at::Tensor& pivots, at::Tensor& info) {
  solve_ex_into(A, B, left, check_errors, result, LU, pivots, info);
  return {result, LU, pivots, info};
}

void inv_ex_into(const at::Tensor& A, bool check_errors, at::Tensor& result, at::Tensor& info) {
  auto [mr, mi] = at::linalg_inv_ex(meta(A), check_errors);
  at::Tensor eye = at::zeros(A.sizes(), A.options());
  eye.diagonal(0, -2, -1).fill_(1.);
  at::linalg_solve_ex_out(result, info, A, eye, /*left=*/true);
  if (check_errors) at::_linalg_check_errors(info, "linalg.inv_ex", A.dim() == 2);
}

std::tuple<at::Tensor, at::Tensor> linalg_inv_ex(const at::Tensor& A, bool check_errors) {
  at::Tensor result = at::empty({0}, A.options()), info = at::empty({0}, A.options().dtype(at::kInt));
  inv_ex_into(A, check_errors, result, info);
  return {result, info};
}

std::tuple<at::Tensor&, at::Tensor&> linalg_inv_ex_out(const at::Tensor& A, bool check_errors, at::Tensor& result,
                                                       at::Tensor& info) {
  inv_ex_into(A, check_errors, result, info);
  return {result, info};
}

bool lowered(const at::Tensor& A) {
  return (A.scalar_type() == at::kFloat || A.scalar_type() == at::kDouble) &&
         A.size(-1) <= ops::kMaxUnrolledColumns;
}

// det and slogdet in one graph: factor A (A^T when real and contiguous, as the CPU),
// then the pivots' sign and the diagonal of U. Outputs are written into the
// given tensors (resized).
void det_into(const at::Tensor& A, at::Tensor& result, at::Tensor& LU, at::Tensor& pivots) {
  auto [mr, mlu, mp] = at::_linalg_det(meta(A));
  const at::Tensor A_ = A.is_contiguous() && !A.is_complex() ? A.mH() : A;
  if (!lowered(A)) {
    at::Tensor info = at::empty({0}, A.options().dtype(at::kInt));
    at::linalg_lu_factor_ex_out(LU, pivots, info, A_);
    resize_like(result, mr);
    at::mul_out(result, lu_det_P(pivots), at::prod(LU.diagonal(0, -2, -1), /*dim=*/-1));
    return;
  }
  Kernel k("aten::_linalg_det", A);
  Builder& b = k.b();
  ops::LuResult r = ops::lu_factor(b, k.in(A_));
  const DType t = b.dtype(r.lu);
  Value diag = ops::diagonal(b, r.lu);
  Value prod = b.reduce(diag, {b.rank(diag) - 1}, ir::Body::kMul, 1);
  k.into_resized(result, b.mul(ops::pivots_sign(b, r.pivots, t), prod));
  k.into_resized(LU, r.lu);
  k.into_resized(pivots, r.pivots);
  k.run();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linalg_det(const at::Tensor& A) {
  at::Tensor result = at::empty({0}, A.options()), LU = at::empty({0}, A.options());
  at::Tensor pivots = at::empty({0}, A.options().dtype(at::kInt));
  det_into(A, result, LU, pivots);
  return {result, LU, pivots};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_det_out(const at::Tensor& A, at::Tensor& result,
                                                                 at::Tensor& LU, at::Tensor& pivots) {
  det_into(A, result, LU, pivots);
  return {result, LU, pivots};
}

void slogdet_into(const at::Tensor& A, at::Tensor& sign, at::Tensor& logabsdet, at::Tensor& LU, at::Tensor& pivots) {
  auto [ms, ml, mlu, mp] = at::_linalg_slogdet(meta(A));
  const at::Tensor A_ = A.is_contiguous() && !A.is_complex() ? A.mH() : A;
  if (!lowered(A)) {
    at::Tensor info = at::empty({0}, A.options().dtype(at::kInt));
    at::linalg_lu_factor_ex_out(LU, pivots, info, A_);
    at::Tensor diag_U = LU.diagonal(0, -2, -1);
    resize_like(sign, ms);
    resize_like(logabsdet, ml);
    at::mul_out(sign, diag_U.sgn().prod(-1), lu_det_P(pivots));
    at::sum_out(logabsdet, diag_U.abs().log_(), -1);
    return;
  }
  Kernel k("aten::_linalg_slogdet", A);
  Builder& b = k.b();
  ops::LuResult r = ops::lu_factor(b, k.in(A_));
  const DType t = b.dtype(r.lu);
  Value diag = ops::diagonal(b, r.lu);
  const int64_t last = b.rank(diag) - 1;
  // sgn: 0 for zeros and NaN, as PyTorch's.
  Value sgn = b.select(b.compare(diag, b.zeros_like(diag), ops::Cmp::kGT), b.full_like(diag, 1),
                       b.select(b.compare(diag, b.zeros_like(diag), ops::Cmp::kLT), b.full_like(diag, -1),
                                b.zeros_like(diag)));
  Value s_prod = b.reduce(sgn, {last}, ir::Body::kMul, 1);
  k.into_resized(sign, b.mul(s_prod, ops::pivots_sign(b, r.pivots, t)));
  k.into_resized(logabsdet, b.reduce_sum(b.log(b.abs(diag)), {last}));
  k.into_resized(LU, r.lu);
  k.into_resized(pivots, r.pivots);
  k.run();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> linalg_slogdet(const at::Tensor& A) {
  at::Tensor sign = at::empty({0}, A.options());
  at::Tensor logabsdet = at::empty({0}, A.options().dtype(c10::toRealValueType(A.scalar_type())));
  at::Tensor LU = at::empty({0}, A.options()), pivots = at::empty({0}, A.options().dtype(at::kInt));
  slogdet_into(A, sign, logabsdet, LU, pivots);
  return {sign, logabsdet, LU, pivots};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> linalg_slogdet_out(const at::Tensor& A,
                                                                                  at::Tensor& sign,
                                                                                  at::Tensor& logabsdet,
                                                                                  at::Tensor& LU,
                                                                                  at::Tensor& pivots) {
  slogdet_into(A, sign, logabsdet, LU, pivots);
  return {sign, logabsdet, LU, pivots};
}

// --- LDL^T ---

// float32 and float64 are lowered, complex goes to the CPU fallback, and
// the rest raise the CPU's error.
bool real_float(const at::Tensor& t, const char* cpu_kernel) {
  const bool real = t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble;
  TORCH_CHECK_NOT_IMPLEMENTED(real || t.is_complex(), "\"", cpu_kernel, "\" not implemented for '", t.scalar_type(),
                              "'");
  return real;
}

// The CPU's structured out= check, in its words.
void check_out_dtype(const at::Tensor& out, caffe2::TypeMeta want) {
  TORCH_CHECK(out.dtype() == want, "Expected out tensor to have dtype ", want, ", but got ", out.dtype(), " instead");
}

void ldl_factor_into(const at::Tensor& A, bool hermitian, bool check_errors, at::Tensor* LD, at::Tensor* pivots,
                     at::Tensor* info, at::Tensor (&res)[3]) {
  Kernel k("aten::linalg_ldl_factor_ex", A);
  ops::LdlResult r = ops::ldl_factor(k.b(), k.in(A));
  k.column_major(true);
  res[0] = k.result(r.ld, A.scalar_type(), LD);
  k.column_major(false);
  res[1] = k.result(r.pivots, at::kInt, pivots);
  res[2] = k.result(r.info, at::kInt, info);
  k.run();
  if (check_errors) at::_linalg_check_errors(res[2], "torch.linalg.ldl_factor_ex", A.dim() == 2);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linalg_ldl_factor_ex(const at::Tensor& A, bool hermitian,
                                                                    bool check_errors) {
  at::linalg_ldl_factor_ex(meta(A), hermitian, check_errors);
  if (!real_float(A, "ldl_factor_kernel_cpu"))
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP(linalg_ldl_factor_ex)>::call(A, hermitian,
                                                                                           check_errors);
  at::Tensor res[3];
  ldl_factor_into(A, hermitian, check_errors, nullptr, nullptr, nullptr, res);
  return {res[0], res[1], res[2]};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_ldl_factor_ex_out(const at::Tensor& A, bool hermitian,
                                                                           bool check_errors, at::Tensor& LD,
                                                                           at::Tensor& pivots, at::Tensor& info) {
  at::linalg_ldl_factor_ex(meta(A), hermitian, check_errors);
  check_out_dtype(LD, A.dtype());
  check_out_dtype(pivots, caffe2::TypeMeta::Make<int32_t>());
  check_out_dtype(info, caffe2::TypeMeta::Make<int32_t>());
  if (!real_float(A, "ldl_factor_kernel_cpu"))
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP2(linalg_ldl_factor_ex, out)>::call(
        A, hermitian, check_errors, LD, pivots, info);
  at::Tensor res[3];
  ldl_factor_into(A, hermitian, check_errors, &LD, &pivots, &info, res);
  return {LD, pivots, info};
}

// LD, pivots and B broadcast to their common batch dims, as the CPU's.
at::Tensor ldl_solve_impl(const at::Tensor& LD, const at::Tensor& pivots, const at::Tensor& B, bool hermitian,
                          const at::Tensor* out) {
  at::Tensor m = at::linalg_ldl_solve(meta(LD), meta(pivots), meta(B), hermitian);
  std::vector<int64_t> batch(m.sizes().begin(), m.sizes().end() - 2);
  const int64_t n = LD.size(-1);
  std::vector<int64_t> ld_size = batch, piv_size = batch;
  ld_size.insert(ld_size.end(), {n, n});
  piv_size.push_back(n);
  Kernel k("aten::linalg_ldl_solve", B);
  k.column_major(true);
  Value x = ops::ldl_solve(k.b(), k.in(LD.expand(ld_size)), k.in(pivots.expand(piv_size)), k.in(B.expand(m.sizes())));
  at::Tensor r = k.result(x, B.scalar_type(), out);
  k.run();
  return r;
}

at::Tensor linalg_ldl_solve(const at::Tensor& LD, const at::Tensor& pivots, const at::Tensor& B, bool hermitian) {
  at::linalg_ldl_solve(meta(LD), meta(pivots), meta(B), hermitian);
  if (!real_float(LD, "ldl_solve_kernel_cpu"))
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP(linalg_ldl_solve)>::call(LD, pivots, B, hermitian);
  return ldl_solve_impl(LD, pivots, B, hermitian, nullptr);
}

at::Tensor& linalg_ldl_solve_out(const at::Tensor& LD, const at::Tensor& pivots, const at::Tensor& B, bool hermitian,
                                 at::Tensor& out) {
  at::linalg_ldl_solve(meta(LD), meta(pivots), meta(B), hermitian);
  check_out_dtype(out, B.dtype());
  if (!real_float(LD, "ldl_solve_kernel_cpu"))
    return at::native::call_fallback_fn<&cpu_fallback, ATEN_OP2(linalg_ldl_solve, out)>::call(LD, pivots, B,
                                                                                             hermitian, out);
  ldl_solve_impl(LD, pivots, B, hermitian, &out);
  return out;
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("_linalg_det", TORCH_FN(linalg_det));
  m.impl("_linalg_det.result", TORCH_FN(linalg_det_out));
  m.impl("_linalg_slogdet", TORCH_FN(linalg_slogdet));
  m.impl("_linalg_slogdet.sign", TORCH_FN(linalg_slogdet_out));
  m.impl("_linalg_solve_ex", TORCH_FN(linalg_solve_ex));
  m.impl("_linalg_solve_ex.result", TORCH_FN(linalg_solve_ex_out));
  m.impl("linalg_inv_ex", TORCH_FN(linalg_inv_ex));
  m.impl("linalg_ldl_factor_ex", TORCH_FN(linalg_ldl_factor_ex));
  m.impl("linalg_ldl_factor_ex.out", TORCH_FN(linalg_ldl_factor_ex_out));
  m.impl("linalg_ldl_solve", TORCH_FN(linalg_ldl_solve));
  m.impl("linalg_ldl_solve.out", TORCH_FN(linalg_ldl_solve_out));
  m.impl("linalg_inv_ex.inverse", TORCH_FN(linalg_inv_ex_out));
}

}  // namespace torchtpu::aten
