// embedding_renorm_ (nn.functional.embedding with max_norm): the rows of the
// weight named by `indices` whose p-norm exceeds max_norm are scaled by
// max_norm / (norm + 1e-7) in place, as PyTorch's CPU kernel does; norms and
// the scaling in float32 for 16-bit weights.
#include <torch/library.h>

#include <cmath>

#include "aten/opmath.h"
#include "aten/tensor_ir.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;

at::Tensor& embedding_renorm_(at::Tensor& self, const at::Tensor& indices, double max_norm, double norm_type) {
  TPU_COUNT("aten::embedding_renorm_");
  const char* op = "aten::embedding_renorm_";
  TORCH_CHECK(self.dim() == 2, "Expected 2-dimensional tensor, but got ", self.dim(),
              "-dimensional tensor for argument #1 'self' (while checking arguments for embedding_renorm_)");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "Expected tensor for argument #2 'indices' to have one of the following scalar types: Long, Int; but "
              "got ", indices.scalar_type(), " instead (while checking arguments for embedding_renorm_)");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), op, ": expected a floating point weight, got ",
              self.scalar_type());
  check_same_device(op, self.device(), {&indices});
  if (indices.numel() == 0 || self.numel() == 0) return self;
  Kernel k(op, self);
  Builder& b = k.b();
  const at::ScalarType ct = opmath(self.scalar_type());
  const DType c = to_ir(ct);
  const int64_t rows = self.size(0), cols = self.size(1), n = indices.numel();
  Value idx = b.reshape(k.in(indices, at::kLong), {n});
  check_index(k, idx, rows, /*allow_negative=*/true, Kernel::CheckKind::kIndex,
              "index out of range in self (embedding_renorm_)");
  idx = b.select(b.compare(idx, b.constant(DType::kS64, 0), Cmp::kLT),
                 b.add(idx, b.constant(DType::kS64, static_cast<double>(rows))), idx);
  // used[r]: some index names row r.
  const ir::Dims rn{rows, n};
  Value hit = b.compare(b.iota(DType::kS64, rn, 0), b.broadcast_in_dim(idx, rn, {1}), Cmp::kEQ);
  Value used = b.compare(b.reduce_max(b.convert(hit, DType::kS32), {1}), b.constant(DType::kS32, 0), Cmp::kNE);
  Value w = k.in(self, ct);
  Value a = b.unary("stablehlo.abs", w);
  Value norm;
  if (norm_type == 2) {
    norm = b.sqrt(b.reduce_sum(b.mul(w, w), {1}));
  } else if (norm_type == 1) {
    norm = b.reduce_sum(a, {1});
  } else if (std::isinf(norm_type) && norm_type > 0) {
    norm = b.reduce_max(a, {1});
  } else if (norm_type == 0) {
    norm = b.reduce_sum(b.convert(b.convert(b.compare(w, b.zeros_like(w), Cmp::kNE), DType::kS32), c), {1});
  } else {
    Value p = k.scalar(norm_type, ct);
    Value s = b.reduce_sum(b.binary_bcast("stablehlo.power", a, p), {1});
    norm = b.binary_bcast("stablehlo.power", s, b.div(b.constant(c, 1), p));
  }
  // The CPU reads the norm back from a tensor of the weight's dtype.
  norm = b.convert(b.convert(norm, to_ir(self.scalar_type())), c);
  Value mx = k.scalar(max_norm, ct);
  // row *= scale: the CPU rounds the scale to the weight's dtype first.
  Value scale = b.convert(b.convert(b.div(mx, b.add(norm, b.constant(c, 1e-7))), to_ir(self.scalar_type())), c);
  Value renorm = b.logical_and(used, b.compare(norm, mx, Cmp::kGT));
  const ir::Dims rc{rows, cols};
  Value r = b.select(b.broadcast_in_dim(renorm, rc, {0}), b.mul(w, b.broadcast_in_dim(scale, rc, {0})), w);
  k.into(self, r);
  k.run();
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("embedding_renorm_", TORCH_FN(embedding_renorm_));
}

}  // namespace torchtpu::aten
