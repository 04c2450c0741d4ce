// CTC loss (nn.functional.ctc_loss: _ctc_loss and _ctc_loss_backward, with
// int-list or tensor lengths) as PyTorch's CPU kernels compute it
// (LossCTC.cpp): log_probs [T, B, C] in float32 or float64, targets padded
// [B, S] or concatenated [sum of lengths], lengths on the host (tensor
// lengths are read once, as the CPU and CUDA kernels read them). The
// extended labels and masks are built with device ops; the recursions are
// device loops (ops/ctc.cpp). The result is (neg_log_likelihood [B],
// log_alpha [B, T, 2 max(L) + 1]); reductions are ctc_loss's own (composite).
#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "ops/loss.h"

namespace torchtpu::aten {
namespace {

// The extended labels of every sequence and the masks of its states.
struct Setup {
  at::Tensor lprime;  // [B, S] int64: blank, l1, blank, l2, ... (garbage past 2 L_b)
  at::Tensor skip;    // [B, S] bool: state s may take from s - 2
  at::Tensor valid;   // [B, S] bool: s <= 2 L_b
  at::Tensor in_len, tgt_len;  // [B] int64 on the device
  at::ScalarType st;
};

Setup setup(const char* op, const at::Tensor& lp, const at::Tensor& targets, at::IntArrayRef in_lens,
            at::IntArrayRef tgt_lens, int64_t blank) {
  TORCH_CHECK(lp.dim() == 3, op, ": log_probs must be [T, B, C], got ", lp.sizes());
  check_same_device(op, lp.device(), {&targets});
  const at::ScalarType st = lp.scalar_type();
  TORCH_CHECK(st == at::kFloat || st == at::kDouble, "\"ctc_loss_cpu\" not implemented for '", c10::toString(st),
              "'");
  TORCH_CHECK(targets.scalar_type() == at::kLong || targets.scalar_type() == at::kInt, op,
              ": targets must be int32 or int64, got ", targets.scalar_type());
  const int64_t T = lp.size(0), B = lp.size(1), C = lp.size(2);
  TORCH_CHECK(blank < C && blank >= 0, "blank must be in label range");
  TORCH_CHECK(static_cast<int64_t>(in_lens.size()) == B, "input_lengths must be of size batch_size");
  TORCH_CHECK(static_cast<int64_t>(tgt_lens.size()) == B, "target_lengths must be of size batch_size");
  int64_t max_len = 0, total = 0;
  std::vector<int64_t> offsets(B);
  for (int64_t b = 0; b < B; ++b) {
    TORCH_CHECK(tgt_lens[b] >= 0, "Expected target_lengths to have value at least 0, but got value ", tgt_lens[b],
                " (while checking arguments for ", op, ")");
    TORCH_CHECK(in_lens[b] >= 0, "Expected input_lengths to have value at least 0, but got value ", in_lens[b],
                " (while checking arguments for ", op, ")");
    TORCH_CHECK(in_lens[b] <= T, "Expected input_lengths to have value at most ", T, ", but got value ", in_lens[b],
                " (while checking arguments for ", op, ")");
    offsets[b] = total;
    total += tgt_lens[b];
    max_len = std::max(max_len, tgt_lens[b]);
  }
  const auto dev = lp.device();
  const auto longs = at::TensorOptions().dtype(at::kLong);
  at::Tensor labels;
  if (targets.dim() == 1) {
    TORCH_CHECK(targets.size(0) >= total, "Expected tensor to have size at least ", total,
                " at dimension 0, but got size ", targets.size(0), " for argument #2 'targets' (while checking "
                "arguments for ", op, ")");
    std::vector<int64_t> idx(B * max_len);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t k = 0; k < max_len; ++k)
        idx[b * max_len + k] = offsets[b] + std::min(k, std::max<int64_t>(tgt_lens[b] - 1, 0));
    labels = total ? targets.index_select(0, at::tensor(idx, longs).to(dev)).view({B, max_len})
                   : at::full({B, max_len}, blank, longs.device(dev));
  } else {
    TORCH_CHECK(targets.dim() == 2 && targets.size(0) == B, op, ": targets must be [batch, S] or 1-D, got ",
                targets.sizes());
    TORCH_CHECK(targets.size(1) >= max_len, "Expected tensor to have size at least ", max_len,
                " at dimension 1, but got size ", targets.size(1), " for argument #2 'targets' (while checking "
                "arguments for ", op, ")");
    labels = targets.narrow(1, 0, max_len);
  }
  labels = labels.to(at::kLong);
  at::Tensor blanks = at::full({B, max_len}, blank, longs.device(dev));
  at::Tensor lprime = at::cat({at::stack({blanks, labels}, 2).view({B, 2 * max_len}),
                               at::full({B, 1}, blank, longs.device(dev))}, 1);
  const int64_t S = 2 * max_len + 1;
  at::Tensor state = at::arange(S, longs.device(dev)).unsqueeze(0);
  at::Tensor two_back = at::cat({at::full({B, std::min<int64_t>(2, S)}, blank, longs.device(dev)),
                                 lprime.narrow(1, 0, S - std::min<int64_t>(2, S))}, 1);
  at::Tensor skip = (state >= 2).logical_and(lprime != blank).logical_and(lprime != two_back);
  at::Tensor tgt_len = at::tensor(tgt_lens.vec(), longs).to(dev);
  at::Tensor valid = state <= (tgt_len * 2).unsqueeze(1);
  return {lprime, skip, valid, at::tensor(in_lens.vec(), longs).to(dev), tgt_len, st};
}

// log_probs at each sequence's extended labels: [T, B, S].
at::Tensor at_labels(const at::Tensor& lp, const Setup& s) {
  return at::gather(lp, 2, s.lprime.unsqueeze(0).expand({lp.size(0), -1, -1}));
}

std::tuple<at::Tensor, at::Tensor> ctc_loss(const at::Tensor& lp, const at::Tensor& targets, at::IntArrayRef in_lens,
                                            at::IntArrayRef tgt_lens, int64_t blank, bool /*zero_infinity*/) {
  const char* op = "aten::_ctc_loss";
  Setup s = setup(op, lp, targets, in_lens, tgt_lens, blank);
  const at::Tensor lpl = at_labels(lp, s);
  if (lp.size(0) == 0) {  // no frames: every loss is that of an empty input
    at::Tensor nll = at::where(s.tgt_len == 0, at::zeros({}, lp.options()),
                               at::full({}, std::numeric_limits<double>::infinity(), lp.options()));
    return {nll, at::empty({lp.size(1), 0, s.lprime.size(1)}, lp.options())};
  }
  Kernel k(op, lp);
  ops::CtcForward f = ops::ctc_forward(k.b(), k.in(lpl), k.in(s.skip), k.in(s.valid), k.in(s.in_len),
                                       k.in(s.tgt_len));
  at::Tensor nll = k.out(f.nll, s.st), log_alpha = k.out(f.log_alpha, s.st);
  k.run();
  return {nll, log_alpha};
}

at::Tensor ctc_loss_backward(const at::Tensor& grad, const at::Tensor& lp, const at::Tensor& targets,
                             at::IntArrayRef in_lens, at::IntArrayRef tgt_lens, const at::Tensor& nll,
                             const at::Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  const char* op = "aten::_ctc_loss_backward";
  Setup s = setup(op, lp, targets, in_lens, tgt_lens, blank);
  if (lp.numel() == 0) return at::zeros_like(lp);
  const at::Tensor lpl = at_labels(lp, s);
  const at::Tensor onehot = (s.lprime.unsqueeze(2) == at::arange(lp.size(2), s.lprime.options())).to(s.st);
  Kernel k(op, lp);
  Builder& b = k.b();
  Value g = ops::ctc_backward(b, b.reshape(k.in(grad, s.st), {lp.size(1)}), k.in(lp), k.in(lpl), k.in(onehot),
                              k.in(s.skip), k.in(s.valid), k.in(s.in_len), k.in(s.tgt_len),
                              b.reshape(k.in(nll, s.st), {lp.size(1)}), k.in(log_alpha, s.st), zero_infinity);
  at::Tensor result = k.out(g, s.st);
  k.run();
  return result;
}

std::vector<int64_t> host_lengths(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.dim() == 1 && (t.scalar_type() == at::kLong || t.scalar_type() == at::kInt),
              "ctc_loss: ", what, " must be a 1-D integer tensor");
  at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

std::tuple<at::Tensor, at::Tensor> ctc_loss_tensor(const at::Tensor& lp, const at::Tensor& targets,
                                                   const at::Tensor& in_lens, const at::Tensor& tgt_lens,
                                                   int64_t blank, bool zero_infinity) {
  return ctc_loss(lp, targets, host_lengths(in_lens, "input_lengths"), host_lengths(tgt_lens, "target_lengths"),
                  blank, zero_infinity);
}

at::Tensor ctc_loss_backward_tensor(const at::Tensor& grad, const at::Tensor& lp, const at::Tensor& targets,
                                    const at::Tensor& in_lens, const at::Tensor& tgt_lens, const at::Tensor& nll,
                                    const at::Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  return ctc_loss_backward(grad, lp, targets, host_lengths(in_lens, "input_lengths"),
                           host_lengths(tgt_lens, "target_lengths"), nll, log_alpha, blank, zero_infinity);
}

}  // namespace

TPU_KERNELS(m) {
  m.impl("_ctc_loss", TORCH_FN(ctc_loss));
  m.impl("_ctc_loss.Tensor", TORCH_FN(ctc_loss_tensor), Devices::kAny);
  m.impl("_ctc_loss_backward", TORCH_FN(ctc_loss_backward));
  m.impl("_ctc_loss_backward.Tensor", TORCH_FN(ctc_loss_backward_tensor), Devices::kAny);
}

}  // namespace torchtpu::aten
