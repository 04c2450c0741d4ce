// The fused LSTM and GRU cells that nn.LSTM / nn.GRU / nn.LSTMCell /
// nn.GRUCell call on accelerator devices (_thnn_fused_*), and their
// backward. The gate matmuls stay separate ops; each cell is one graph.
// 16-bit inputs compute in float32 and round each output once.

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "ops/rnn.h"

namespace torchtpu::aten {
namespace {

bool defined(const std::optional<at::Tensor>& t) { return t && t->defined(); }

at::ScalarType compute_type(const at::Tensor& t) { return at::isReducedFloatingType(t.scalar_type()) ? at::kFloat : t.scalar_type(); }

// The shapes and devices the CUDA kernels require: gates [B, n*H], state
// [B, H], biases [n*H].
void check_cell(const char* op, int64_t n, const at::Tensor& ig, const at::Tensor& hg, const at::Tensor& state,
                const std::optional<at::Tensor>& ib, const std::optional<at::Tensor>& hb) {
  TORCH_CHECK(at::isFloatingType(ig.scalar_type()), op, ": expected floating point gates, got ", ig.scalar_type());
  TORCH_CHECK(hg.scalar_type() == ig.scalar_type() && state.scalar_type() == ig.scalar_type(), op,
              ": expected all tensors to have the same dtype, got ", ig.scalar_type(), ", ", hg.scalar_type(),
              " and ", state.scalar_type());
  TORCH_CHECK(ig.dim() == 2 && state.dim() == 2 && ig.sizes() == hg.sizes() && ig.size(0) == state.size(0) &&
                  ig.size(1) == n * state.size(1),
              op, ": expected gates of size [B, ", n, "*H] and a state of size [B, H], got ", ig.sizes(), ", ",
              hg.sizes(), " and ", state.sizes());
  TORCH_CHECK(defined(ib) == defined(hb), op, ": expected both biases or none");
  for (const auto* b : {&ib, &hb})
    if (defined(*b)) {
      TORCH_CHECK(b->value().dim() == 1 && b->value().size(0) == ig.size(1) &&
                      b->value().scalar_type() == ig.scalar_type(),
                  op, ": expected a bias of size [", ig.size(1), "] and dtype ", ig.scalar_type(), ", got ",
                  b->value().sizes(), " ", b->value().scalar_type());
    }
}

Value opt_in(Kernel& k, const std::optional<at::Tensor>& t, at::ScalarType ct) { return defined(t) ? k.in(*t, ct) : Value{}; }

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell(const at::Tensor& ig, const at::Tensor& hg, const at::Tensor& cx,
                                                         const std::optional<at::Tensor>& ib,
                                                         const std::optional<at::Tensor>& hb) {
  const char* op = "aten::_thnn_fused_lstm_cell";
  check_cell(op, 4, ig, hg, cx, ib, hb);
  const at::ScalarType ct = compute_type(ig), dt = ig.scalar_type();
  Kernel k(op, ig);
  auto r = ops::lstm_cell(k.b(), k.in(ig, ct), k.in(hg, ct), k.in(cx, ct), opt_in(k, ib, ct), opt_in(k, hb, ct));
  auto out = std::make_tuple(k.out(r.hy, dt), k.out(r.cy, dt), k.out(r.workspace, dt));
  k.run();
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell_backward_impl(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy, const at::Tensor& cx,
    const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  const char* op = "aten::_thnn_fused_lstm_cell_backward_impl";
  if (!defined(grad_hy) && !defined(grad_cy)) return {at::Tensor(), at::Tensor(), at::Tensor()};
  TORCH_CHECK(cx.dim() == 2 && cy.sizes() == cx.sizes() && workspace.dim() == 2 &&
                  workspace.size(0) == cx.size(0) && workspace.size(1) == 4 * cx.size(1),
              op, ": expected cx, cy of size [B, H] and a workspace of size [B, 4*H], got ", cx.sizes(), ", ",
              cy.sizes(), " and ", workspace.sizes());
  const at::ScalarType ct = compute_type(cx), dt = cx.scalar_type();
  Kernel k(op, cx);
  auto r = ops::lstm_cell_backward(k.b(), opt_in(k, grad_hy, ct), opt_in(k, grad_cy, ct), k.in(cx, ct),
                                   k.in(cy, ct), k.in(workspace, ct));
  at::Tensor gg = k.out(r.grad_gates, dt), gcx = k.out(r.grad_cx, dt), gb;
  if (has_bias) gb = k.out(k.b().reduce_sum(r.grad_gates, {0}), dt);
  k.run();
  return {gg, gcx, gb};
}

std::tuple<at::Tensor, at::Tensor> gru_cell(const at::Tensor& ig, const at::Tensor& hg, const at::Tensor& hx,
                                            const std::optional<at::Tensor>& ib, const std::optional<at::Tensor>& hb) {
  const char* op = "aten::_thnn_fused_gru_cell";
  check_cell(op, 3, ig, hg, hx, ib, hb);
  const at::ScalarType ct = compute_type(ig), dt = ig.scalar_type();
  Kernel k(op, ig);
  auto r = ops::gru_cell(k.b(), k.in(ig, ct), k.in(hg, ct), k.in(hx, ct), opt_in(k, ib, ct), opt_in(k, hb, ct));
  auto out = std::make_tuple(k.out(r.hy, dt), k.out(r.workspace, dt));
  k.run();
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  const char* op = "aten::_thnn_fused_gru_cell_backward";
  TORCH_CHECK(grad_hy.dim() == 2 && workspace.dim() == 2 && workspace.size(0) == grad_hy.size(0) &&
                  workspace.size(1) == 5 * grad_hy.size(1),
              op, ": expected grad_hy of size [B, H] and a workspace of size [B, 5*H], got ", grad_hy.sizes(),
              " and ", workspace.sizes());
  const at::ScalarType ct = compute_type(grad_hy), dt = grad_hy.scalar_type();
  Kernel k(op, grad_hy);
  auto r = ops::gru_cell_backward(k.b(), k.in(grad_hy, ct), k.in(workspace, ct));
  at::Tensor gi = k.out(r.grad_input_gates, dt), gh = k.out(r.grad_hidden_gates, dt), ghx = k.out(r.grad_hx, dt);
  at::Tensor gib, ghb;
  if (has_bias) {
    gib = k.out(k.b().reduce_sum(r.grad_input_gates, {0}), dt);
    ghb = k.out(k.b().reduce_sum(r.grad_hidden_gates, {0}), dt);
  }
  k.run();
  return {gi, gh, ghx, gib, ghb};
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("_thnn_fused_gru_cell", TORCH_FN(gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(gru_cell_backward));
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(lstm_cell_backward_impl));
}

}  // namespace torchtpu::aten
