// TORCHTPU_CHECK_NAN (registry.h): an op's floating outputs checked for NaN
// and Inf as it returns.
#include <ATen/ATen.h>

#include "aten/registry.h"
#include "eager/capture.h"
#include "eager/site_log.h"

namespace torchtpu::aten {

std::atomic<bool> nan_check{false};

void check_finite(const char* op, const at::Tensor& t, int index) {
  thread_local bool checking = false;  // the check's own ops are not checked
  if (checking || !t.defined() || !t.device().is_privateuseone() || t.numel() == 0) return;
  if (!at::isFloatingType(t.scalar_type()) && !at::isComplexType(t.scalar_type())) return;
  // Inside another op's graph (the device lock is held) or a capture, a
  // host read would not be the user's; the outermost op checks.
  if (eager::current_op() || eager::Capture::active(t.device().index())) return;
  bool finite;
  checking = true;
  try {
    eager::SiteLog::Quiet quiet;
    at::NoGradGuard no_grad;
    finite = at::isfinite(t).all().item<bool>();
  } catch (...) {
    checking = false;
    throw;
  }
  checking = false;
  if (finite) return;
  const std::string where = eager::format_site(eager::capture_site(), /*with_source=*/true);
  TORCH_CHECK(false, op, ": output ", index, " holds NaN or Inf (shape ", t.sizes(), ", ", t.scalar_type(),
              "; TORCHTPU_CHECK_NAN=1)", where.empty() ? "" : " at " + where);
}

}  // namespace torchtpu::aten
