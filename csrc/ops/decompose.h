// Orthogonal decompositions of batches of real matrices [B, m, n]:
// Householder QR with LAPACK's conventions (geqrf's packed reflectors and
// tau, orgqr's Q, ormqr's products), the symmetric eigendecomposition by
// cyclic Jacobi rotations, and the SVD by one-sided (Hestenes) Jacobi. The
// loops are stablehlo.while loops over a dynamic column or rotation index,
// so the graph does not grow with n; the Jacobi loops run sweeps until the
// off-diagonal part is below the dtype's precision (at most kMaxSweeps).
#pragma once

#include "ops/builder.h"

namespace torchtpu::ops {

constexpr int64_t kMaxSweeps = 40;

// geqrf: R on and above the diagonal, the reflectors' tails below it
// (v_k = 1 at row k), and tau [B, min(m, n)].
struct Householder {
  Value packed;
  Value tau;
};
Householder householder_qr(Builder& b, Value a);
// orgqr / householder_product: the first `cols` columns of
// H_0 H_1 ... H_{k-1} (k = tau's length), [B, m, cols].
Value householder_q(Builder& b, Value packed, Value tau, int64_t cols);
// ormqr: op(Q) C (left) or C op(Q), op = transpose or not, Q = H_0 ... H_{k-1}.
Value householder_apply(Builder& b, Value packed, Value tau, Value c, bool left, bool transpose);

// Symmetric eigendecomposition of [B, n, n] (symmetric input): eigenvalues
// ascending [B, n] and the orthonormal eigenvectors as columns [B, n, n].
struct Eigh {
  Value values;
  Value vectors;
};
Eigh jacobi_eigh(Builder& b, Value a);

// SVD of [B, m, n]: singular values descending [B, k] (k = min(m, n)), U
// [B, m, m or k] and Vh [B, n or k, n] (full: the square ones).
struct Svd {
  Value u;
  Value s;
  Value vh;
};
Svd jacobi_svd(Builder& b, Value a, bool full, bool compute_uv);

// The matrix exponential of [B, n, n] by scaling and squaring: A / 2^s with
// s chosen per matrix from its 1-norm (so that the degree-18 Taylor
// polynomial is exact to the dtype's precision, as in PyTorch's CPU kernel),
// the polynomial in Horner form, then s squarings in a loop.
Value matrix_exp(Builder& b, Value a);

}  // namespace torchtpu::ops
