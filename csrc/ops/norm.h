// Normalizations as PyTorch's CPU kernels compute them: softmax and
// log_softmax along a dim, layer norm over trailing dims, batch norm over dim
// 1 of [N, C, *], group norm of [N, C, HW], and their derivatives. Values
// arrive in the compute type (float32 for 16-bit inputs); an absent optional
// operand is a default-constructed Value.
#pragma once

#include <array>
#include <optional>

#include "ops/builder.h"

namespace torchtpu::ops {

// `round_log_sum`: the CPU's log_softmax over the last dim of a 16-bit input
// stores the sum of exponentials, then its log, in that dtype.
Value softmax(Builder& b, Value x, int64_t dim, bool log, std::optional<DType> round_log_sum = std::nullopt);
Value softmax_backward(Builder& b, Value grad, Value output, int64_t dim, bool log);

struct Normalized {
  Value y, mean, rstd;  // mean and rstd keep the normalized dims as size 1
};
// Normalizes over `dims` with the biased variance, then weight and bias
// (broadcast against the trailing dims).
Normalized layer_norm(Builder& b, Value x, const std::vector<int64_t>& dims, Value weight, Value bias, double eps);
struct NormGrads {
  Value input, weight, bias;  // those not asked for stay empty
};
NormGrads layer_norm_backward(Builder& b, Value grad, Value x, Value mean, Value rstd, Value weight,
                              const std::vector<int64_t>& norm_dims, std::array<bool, 3> mask);

struct BatchNorm {
  Value y, mean, invstd;                // batch stats ([C]) in training
  Value running_mean, running_var;      // updated running stats, when given in training
};
// Training: batch statistics (biased variance to normalize, unbiased for the
// running variance, updated with `momentum`); `stats` is the dtype the CPU
// stores the batch stats in, read back before the affine step. Eval: the
// running statistics.
BatchNorm batch_norm(Builder& b, Value x, Value weight, Value bias, Value running_mean, Value running_var,
                     bool training, Value momentum, double eps, DType stats);
// `mean` and `invstd`: the saved batch stats (training) or the running mean
// and 1/sqrt(running_var + eps) (eval).
NormGrads batch_norm_backward(Builder& b, Value grad, Value x, Value weight, Value mean, Value invstd, bool training,
                              std::array<bool, 3> mask);
// 1/sqrt(var + eps) of a [C] variance.
Value inverse_std(Builder& b, Value var, double eps);

// x of [N, C, HW] in `group` groups; mean and rstd are [N, group].
Normalized group_norm(Builder& b, Value x, int64_t group, Value weight, Value bias, double eps);

}  // namespace torchtpu::ops
