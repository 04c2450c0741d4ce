// Pointwise loss terms of torch.nn.functional and their derivatives, as
// PyTorch's CPU kernels compute them (Loss.cpp, PointwiseOpsKernel.cpp).
// Values arrive in the compute type (float32 for 16-bit floats); `round`
// rounds a value to the tensors' own dtype and back where the CPU kernel
// computes in that dtype one operation at a time (identity otherwise).
#pragma once

#include <functional>

#include "ops/builder.h"

namespace torchtpu::ops {

using Round = std::function<Value(Value)>;

Value mse(Builder& b, Value x, Value t, const Round& round);
Value mse_backward(Builder& b, Value x, Value t, Value g, Value norm, const Round& round);
// delta in the compute type, already rounded as the CPU rounds it.
Value huber(Builder& b, Value x, Value t, Value delta, const Round& round);
Value huber_backward(Builder& b, Value x, Value t, Value g, Value norm, Value delta, const Round& round);
Value smooth_l1(Builder& b, Value x, Value t, Value beta);
Value smooth_l1_backward(Builder& b, Value x, Value t, Value g, Value norm, Value beta);
// -(t * max(log(x), -100) + (1 - t) * max(log1p(-x), -100))
Value binary_cross_entropy(Builder& b, Value x, Value t, const Round& round);
// g * (x - t) / max((1 - x) * x, eps)
Value binary_cross_entropy_backward(Builder& b, Value g, Value x, Value t, Value eps, const Round& round);


// multi_margin_loss of x [n, dim] with in-range int64 targets [n]:
// per frame sum_{d != t, z > 0} z^p * w[t] / dim with z = margin - x[t] + x[d].
// `weight` ([dim]) may be invalid; `dim_value` is dim as a value (it divides).
Value multi_margin(Builder& b, Value x, Value target, Value weight, int p, Value margin, Value dim_value);
// Its derivative before the factor of grad_output; `g` is 1 / dim (or
// 1 / (n * dim) for a mean) in the compute type.
Value multi_margin_backward(Builder& b, Value x, Value target, Value weight, int p, Value margin, Value g);
// multilabel_margin_loss of x [n, dim] with targets [n, dim] in [-1, dim)
// (each row's targets end at its first -1): the per-frame loss
// sum_{target j, non-target d, z > 0} z / dim with z = 1 - x[j] + x[d], and
// is_target [n, dim] (0 or 1, in x's type).
std::pair<Value, Value> multilabel_margin(Builder& b, Value x, Value target, Value dim_value);
Value multilabel_margin_backward(Builder& b, Value x, Value target, Value is_target, Value g);

// CTC (ops/ctc.cpp). lpl [T, B, S]: log_probs at each sequence's extended
// labels; skip [B, S]: state s may take from s - 2; valid [B, S]: s <= 2 L_b;
// in_len, tgt_len [B] int64. The forward gives nll [B] and log_alpha
// [B, T, S] (-inf outside each sequence's frames and states).
struct CtcForward {
  Value nll;
  Value log_alpha;
};
CtcForward ctc_forward(Builder& b, Value lpl, Value skip, Value valid, Value in_len, Value tgt_len);
// The gradient for log_probs lp [T, B, C] given grad_out [B]; onehot [B, S, C]
// marks each state's label (in lp's dtype).
Value ctc_backward(Builder& b, Value grad_out, Value lp, Value lpl, Value onehot, Value skip, Value valid,
                   Value in_len, Value tgt_len, Value nll, Value log_alpha, bool zero_infinity);

}  // namespace torchtpu::ops
