// Foreach ops (torch._foreach_*), which optimizers, clip_grad_norm_ and
// GradScaler call once per step and tensor group. Each runs PyTorch's own
// loop over the lists (the op's CompositeExplicitAutograd kernel, one
// per-tensor op each) inside a KernelBatch, so the whole list is one op for
// the mode: one program in Strict Eager, one graph append in Fused Eager,
// one site and one lock, instead of one per tensor; results and checks are
// the per-tensor kernels'. When the tensors are not all on one tpu device
// (CPU 0-d tensors count as numbers), or the batch cannot finish (a kernel
// raises, or reaches a sync point or a host copy), nothing was written and
// the loop runs again op by op, as PyTorch runs it on other devices, so
// results, partial updates and errors are exactly the per-tensor ops'.
// An in-place call over the same tensors, numbers and layouts as an earlier
// one reuses the graph that call built (op_memo.h).
#include <ATen/core/dispatch/Dispatcher.h>

#include <mutex>
#include <set>
#include <string>

#include "aten/op_memo.h"
#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "eager/capture.h"

namespace torchtpu::aten {
namespace {

// The one tpu device of the top `n` stack values' tensors, or none;
// `cpu`: whether CPU 0-d tensors are among them.
std::optional<c10::Device> one_device(const torch::jit::Stack& stack, size_t n, bool* cpu) {
  std::optional<c10::Device> dev;
  bool ok = true;
  auto see = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.device().is_privateuseone()) {
      if (!dev) dev = t.device();
      ok &= *dev == t.device();
    } else {
      ok &= t.is_cpu() && t.dim() == 0;
      *cpu = true;
    }
  };
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      see(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) see(t);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef())
        if (e.isTensor()) see(e.toTensor());
    }
  }
  return ok ? dev : std::nullopt;
}

// Ops whose loop reached a sync point once (by name, and whether CPU
// tensors were among the arguments): they run op by op from then on.
std::mutex unbatched_mu;
std::set<std::string> unbatched;

void loop(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  op.callBoxedForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd, *stack);
}

void foreach_kernel(const c10::OperatorHandle& op, const char* name, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  bool cpu = false;
  const std::optional<c10::Device> dev = one_device(*stack, n, &cpu);
  if (!dev || KernelBatch::building()) return loop(op, stack);
  const std::string memo = std::string(name) + (cpu ? " with CPU tensors" : "");
  {
    std::lock_guard<std::mutex> lock(unbatched_mu);
    if (unbatched.count(memo)) return loop(op, stack);
  }
  const size_t base = stack->size() - n;
  // An in-place op over the same tensors as an earlier call (an optimizer's
  // step) takes the graph that call built (op_memo.h).
  OpMemo::Call call;
  if (!cpu && OpMemo::enabled() && op.schema().returns().empty() && !nan_check.load(std::memory_order_relaxed) &&
      !eager::Capture::active(dev->index())) {
    call = OpMemo::key(name, dev->index(), *stack, n);
    if (std::optional<OpMemo::Hit> hit = OpMemo::find(call)) {
      stack->resize(base);
      run_built(name, *dev, std::move(hit->built));
      return;
    }
  }
  const torch::jit::Stack args(stack->begin() + static_cast<std::ptrdiff_t>(base), stack->end());
  {
    KernelBatch batch(name, *dev);
    bool built = false;
    try {
      loop(op, stack);
      built = true;
    } catch (const eager::BatchInterrupted&) {
      std::lock_guard<std::mutex> lock(unbatched_mu);
      unbatched.insert(memo);
    } catch (const std::exception&) {
      // Raised again below by the op that raised it, with PyTorch's partial updates.
    }
    if (built) {
      if (call.ok)
        if (std::optional<eager::OpGraph::Built> b = batch.built()) OpMemo::record(call, *b);
      batch.run();
      return;
    }
  }
  stack->resize(base);
  stack->insert(stack->end(), args.begin(), args.end());
  loop(op, stack);
}

// Every functional and in-place foreach overload PyTorch runs as a loop.
std::vector<std::string> foreach_overloads() {
  std::vector<std::string> out;
  for (const c10::OperatorName& o : c10::Dispatcher::singleton().getAllOpNames()) {
    if (o.name.rfind("aten::_foreach_", 0) != 0) continue;
    const std::string& ov = o.overload_name;
    if (ov == "out" || (ov.size() > 4 && ov.compare(ov.size() - 4, 4, "_out") == 0)) continue;
    const std::optional<c10::OperatorHandle> h = c10::Dispatcher::singleton().findOp(o);
    if (!h || !h->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) continue;
    out.push_back(o.name.substr(6) + (ov.empty() ? "" : "." + ov));
  }
  return out;
}

}  // namespace

TPU_KERNELS(m) {
  static const std::vector<std::string> names = foreach_overloads();
  for (const std::string& name : names) m.boxed(name.c_str(), &foreach_kernel);
}

}  // namespace torchtpu::aten
