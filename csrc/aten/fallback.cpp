// CPU fallback for ops with no tpu lowering (DESIGN decision 10): copy the
// arguments to the CPU, run PyTorch's CPU kernel, copy results back. Counted
// per op, warned once per op, or an error when fallback is disabled.
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <mutex>
#include <set>

#include "aten/fallback.h"
#include "eager/capture.h"
#include "eager/metrics.h"
#include "eager/site_log.h"
#include "eager/trace.h"

namespace torchtpu::aten {

namespace {
std::atomic<bool> fallback_is_error{false};
std::mutex warned_mu;
std::set<std::string> warned;

}  // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& opname = op.schema().operator_name();
  std::string name = opname.name + (opname.overload_name.empty() ? "" : "." + opname.overload_name);
  TORCH_CHECK_NOT_IMPLEMENTED(!fallback_is_error.load(), "The operator '", name,
                              "' has no tpu lowering and CPU fallback is disabled (TORCHTPU_CPU_FALLBACK=error).");
  eager::metrics().count_fallback(name);
  eager::site_log().record(eager::SiteLog::Kind::kFallback, name);
  // Its results come from the host: a compiled function capturing it would
  // replay this call's values.
  eager::Capture::abandon_this_thread("an op with no tpu lowering (CPU fallback)");
  bool first;
  {
    std::lock_guard<std::mutex> lock(warned_mu);
    first = warned.insert(name).second;
  }
  if (first) {
    // The user's line, not the library frame PyTorch's warning would name.
    const std::string where = eager::current_op() ? "" : eager::format_site(eager::capture_site());
    TORCH_WARN("The operator '", name, "' has no tpu lowering; it runs on the CPU (copying its tensors), which is slow",
               where.empty() ? "" : " (first reached from " + where + ")",
               ". torchtpu.debug.metrics_report() lists the lines that reach it.");
  }
  eager::SiteLog::Cause cause(name + " (CPU fallback)");
  eager::Trace::Span span("cpu fallback", "fallback");
  span.detail(name);
  at::native::cpu_fallback(op, stack);
}

void set_fallback_error(bool error) { fallback_is_error = error; }
bool fallback_error() { return fallback_is_error; }

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

}  // namespace torchtpu::aten
