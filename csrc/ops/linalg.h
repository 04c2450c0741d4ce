// Dense linear algebra on batches of matrices ([..., m, n], batch dims
// leading). Triangular solves use StableHLO's triangular_solve; Cholesky and
// LU are written out column by column (one unrolled step per column, so the
// graph grows with n: callers keep n <= kMaxUnrolledColumns) because they must
// report LAPACK's `info` and pivots, which XLA's own expansions do not give.
#pragma once

#include "ops/builder.h"

namespace torchtpu::ops {

// Largest matrix order the unrolled factorizations are built for.
constexpr int64_t kMaxUnrolledColumns = 64;

// The lower (or upper) triangle of the last two dims, others zero; `diagonal`
// shifts the boundary as in torch.tril / torch.triu.
Value triangle(Builder& b, Value a, bool lower, int64_t diagonal = 0);
// Swaps the last two dims.
Value matrix_transpose(Builder& b, Value a);
// Batched matrix product of the last two dims (batch dims equal).
Value matmul(Builder& b, Value x, Value y);
// The identity matrix broadcast to `dims` ([..., n, n]).
Value identity(Builder& b, DType t, const Dims& dims);

// Solves A X = B (left) or X A = B with A triangular (upper or lower, unit
// diagonal when `unit`); A [..., n, n] and B have equal batch dims. Only A's
// triangle is read.
Value solve_triangular(Builder& b, Value a, Value rhs, bool upper, bool left, bool unit, bool transpose = false);

// Cholesky factor of the Hermitian matrices whose lower (or upper) triangle
// is `a`, and LAPACK's info (int32, batch shape): 0, or the order k (1-based)
// of the first leading minor that is not positive definite. The factor is
// lower (upper: its transpose) with zeros in the other triangle.
struct CholeskyResult {
  Value factor;
  Value info;
};
CholeskyResult cholesky(Builder& b, Value a, bool upper);

// LU with partial pivoting as LAPACK's getrf: the packed factors (L unit
// lower below the diagonal, U on and above), the 1-based pivots (int32,
// [..., min(m, n)]), info (int32: first zero pivot, 1-based, or 0) and the
// row permutation (int32 [..., m]: row i of P A is row perm[i] of A).
struct LuResult {
  Value lu;
  Value pivots;
  Value info;
  Value perm;
};
LuResult lu_factor(Builder& b, Value a);

// The diagonal of square matrices [..., n, n] as [..., n].
Value diagonal(Builder& b, Value a);
// det(P) of LAPACK pivots ([..., k], 1-based): +1 for an even permutation,
// -1 for an odd one, in dtype `t` ([...]).
Value pivots_sign(Builder& b, Value pivots, DType t);

// LDL^T with Bunch-Kaufman pivoting of the symmetric matrices whose lower
// triangle is `a` ([..., n, n]), as LAPACK's sytrf with uplo = 'L': the
// packed factor (D's blocks and L's multipliers in the lower triangle, zeros
// above), the 1-based pivots (int32 [..., n]; negative for a 2x2 block) and
// info (int32: the first zero pivot, 1-based, or 0).
struct LdlResult {
  Value ld;
  Value pivots;
  Value info;
};
LdlResult ldl_factor(Builder& b, Value a);
// Solves A X = rhs from ldl_factor's `ld` and `pivots`, as LAPACK's sytrs
// (batch dims of all three equal).
Value ldl_solve(Builder& b, Value ld, Value pivots, Value rhs);

// The permutation matrix P (A = P L U) from the row order `perm`.
Value permutation_matrix(Builder& b, Value perm, DType t);

}  // namespace torchtpu::ops
