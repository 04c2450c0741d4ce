// Fused recurrent cells, as PyTorch's CUDA kernels define them (what
// nn.LSTM / nn.GRU call on accelerator devices): the gate pre-activations
// come in as two matmul results plus optional biases; the cells return the
// new state and a workspace of activated gates that their backward reads.
#pragma once

#include "ops/builder.h"

namespace torchtpu::ops {

struct LstmCell {
  Value hy, cy, workspace;  // workspace [B, 4H]: i, f, g, o after activation
};
// Gates in (i, f, g, o) order along dim 1; biases [4H] or invalid.
LstmCell lstm_cell(Builder& b, Value input_gates, Value hidden_gates, Value cx, Value input_bias, Value hidden_bias);
struct LstmCellGrad {
  Value grad_gates, grad_cx;
};
// grad_hy / grad_cy may be invalid (zero).
LstmCellGrad lstm_cell_backward(Builder& b, Value grad_hy, Value grad_cy, Value cx, Value cy, Value workspace);

struct GruCell {
  Value hy, workspace;  // workspace [B, 5H]: r, z, n, hx, hn (+ hidden bias)
};
// Gates in (r, z, n) order along dim 1.
GruCell gru_cell(Builder& b, Value input_gates, Value hidden_gates, Value hx, Value input_bias, Value hidden_bias);
struct GruCellGrad {
  Value grad_input_gates, grad_hidden_gates, grad_hx;
};
GruCellGrad gru_cell_backward(Builder& b, Value grad_hy, Value workspace);

}  // namespace torchtpu::ops
