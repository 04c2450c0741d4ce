// Debugging: the sync points and CPU fallbacks each user line reached
// (eager::SiteLog), the NaN/Inf check of op outputs (TORCHTPU_CHECK_NAN),
// the errors of device work nothing read, reported at exit, and the spans
// of a timeline (eager::Trace).
#include <torch/extension.h>

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "eager/runtime.h"
#include "eager/site_log.h"
#include "eager/trace.h"

namespace torchtpu::python {
namespace py = pybind11;

void bind_debug(py::module_& m) {
  using eager::SiteLog;
  m.def("_site_log", [] {
    py::list out;
    for (const SiteLog::Entry& e : eager::site_log().entries()) {
      py::dict d;
      d["kind"] = e.kind == SiteLog::Kind::kSync ? "sync" : "fallback";
      d["what"] = e.what;
      d["site"] = eager::format_site(e.site);
      d["count"] = e.count;
      out.append(d);
    }
    return out;
  });
  m.def("_clear_site_log", [] { eager::site_log().clear(); });
  m.def("_set_print_syncs", [](bool on) { eager::site_log().set_print_syncs(on); });
  m.def("_set_nan_check", [](bool on) { aten::nan_check = on; });
  m.def("_trace_start", [] { eager::Trace::start(); });
  // Queues pending work and waits until it was handed to the device, then
  // stops: (spans as (name, category, thread, begin ns, end ns, detail), dropped).
  m.def("_trace_stop", [] {
    {
      py::gil_scoped_release nogil;
      eager::Runtime::get().flush_fused();
      eager::Runtime::get().drain();
    }
    int64_t dropped = 0;
    py::list out;
    for (const eager::Trace::Event& e : eager::Trace::stop(&dropped))
      out.append(py::make_tuple(e.name, e.cat, e.thread, e.begin_ns, e.end_ns, e.detail));
    return py::make_tuple(out, dropped);
  });
  m.def("_thread_token", [] { return eager::thread_token(); });
  // Waits for all queued work, then describes every error nothing raised:
  // the first of this thread's (and a failed device-side check), then the
  // rest of every thread's.
  m.def("_unobserved_errors", [] {
    std::vector<std::string> out;
    {
      py::gil_scoped_release nogil;
      try {
        eager::Runtime::get().synchronize();
      } catch (const std::exception& e) {
        out.push_back(e.what());
      }
    }
    try {
      aten::raise_failed_checks();
    } catch (const c10::Error& e) {
      out.push_back(e.what_without_backtrace());
    }
    for (std::string& s : eager::Runtime::get().unobserved_errors()) out.push_back(std::move(s));
    return out;
  });
}

}  // namespace torchtpu::python
