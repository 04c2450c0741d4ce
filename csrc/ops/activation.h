// Activation lowerings of torch.nn.functional and their derivatives, written
// as PyTorch's CPU kernels compute them (Activation.cpp): inputs arrive in
// the compute type (float32 for 16-bit floats), user scalars as 0-d values of
// that type, so that a new slope or threshold does not recompile.
#pragma once

#include "ops/builder.h"

namespace torchtpu::ops {

// x <= 0 ? (exp(x * input_scale) - 1) * alpha * scale : x * scale
Value elu(Builder& b, Value x, Value alpha, Value scale, Value input_scale);
// From the input, or from the result (is_result: y <= 0 ? g * input_scale * (y + alpha * scale)).
Value elu_backward(Builder& b, Value g, Value x, Value alpha, Value scale, Value input_scale, bool is_result);
Value hardtanh_backward(Builder& b, Value g, Value x, Value lo, Value hi);
Value leaky_relu(Builder& b, Value x, Value slope);
Value leaky_relu_backward(Builder& b, Value g, Value x, Value slope);
Value softplus(Builder& b, Value x, Value beta, Value threshold);
Value softplus_backward(Builder& b, Value g, Value x, Value beta, Value threshold);
Value mish(Builder& b, Value x);
Value mish_backward(Builder& b, Value g, Value x);
Value hardshrink(Builder& b, Value x, Value lambd);
Value softshrink(Builder& b, Value x, Value lambd);
// The derivative of both shrinks: g outside [-lambd, lambd], else 0.
Value shrink_backward(Builder& b, Value g, Value x, Value lambd);
// `six` and `three` are passed as values: XLA turns a division by a constant
// into a product with its reciprocal, which rounds differently.
Value hardsigmoid(Builder& b, Value x, Value six);
Value hardsigmoid_backward(Builder& b, Value g, Value x);
Value hardswish(Builder& b, Value x, Value six);
Value hardswish_backward(Builder& b, Value g, Value x, Value three);
Value threshold(Builder& b, Value x, Value threshold, Value value);
// 1 / (1 + exp(-x)), the CPU's sigmoid formula.
Value sigmoid_exp(Builder& b, Value x);
// Both halves of glu's input: a * sigmoid(c).
Value glu(Builder& b, Value a, Value c);
// log_sigmoid_forward's output and buffer (exp(-|x|)), and its derivative.
std::pair<Value, Value> log_sigmoid(Builder& b, Value x);
Value log_sigmoid_backward(Builder& b, Value g, Value x, Value buffer);
Value prelu(Builder& b, Value x, Value w);

}  // namespace torchtpu::ops
