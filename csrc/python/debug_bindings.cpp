// Debugging: the sync points and CPU fallbacks each user line reached
// (eager::SiteLog), the NaN/Inf check of op outputs (TORCHTPU_CHECK_NAN),
// the errors of device work nothing read, reported at exit, and the spans
// of a timeline (eager::Trace).
#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/profiler/orchestration/observer.h>
#include <torch/extension.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "eager/runtime.h"
#include "eager/site_log.h"
#include "eager/trace.h"

namespace torchtpu::python {
namespace py = pybind11;

namespace {

// torch.profiler's view of a span: "torchtpu::<name>" (interned, as a
// RecordFunction keeps the pointer).
const char* profiler_name(const char* name) {
  static std::mutex mu;
  static auto& names = *new std::unordered_map<const char*, std::string>;
  std::lock_guard<std::mutex> lock(mu);
  auto it = names.find(name);
  if (it == names.end()) it = names.emplace(name, std::string("torchtpu::") + name).first;
  return it->second.c_str();
}

// A span in torch.profiler's trace while it records. On the thread that
// started the profiler it is a RecordFunction. torchtpu's own threads (the
// executor, the compile pool) do not join the profiler (PyTorch's way for a
// child thread to join swaps the profiling thread's callback handle); their
// finished spans wait here and the profiling thread's next span hands them
// to the profiler as events with their own times.
struct ProfiledSpan {
  at::RecordFunction* rf = nullptr;
  const char* name;
  int64_t begin_us;
};
struct FinishedSpan {
  const char* name;
  int64_t begin_us, end_us;
};
constexpr size_t kMaxFinished = 1 << 16;
std::mutex finished_mu;
std::vector<FinishedSpan>& finished = *new std::vector<FinishedSpan>;

int64_t unix_us() {  // the profiler's time base for reported events
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool profiling_here() { return torch::profiler::impl::ProfilerStateBase::get(/*global=*/false) != nullptr; }

void hand_over_finished() {
  std::vector<FinishedSpan> mine;
  {
    std::lock_guard<std::mutex> lock(finished_mu);
    mine.swap(finished);
  }
  for (const FinishedSpan& f : mine)
    torch::autograd::profiler::reportBackendEventToActiveKinetoProfiler(f.begin_us, f.end_us, -1,
                                                                        at::RecordScope::USER_SCOPE, f.name, "tpu");
}

void* profiler_begin(const char* name) {
  if (!torch::autograd::profiler::isProfilerEnabledInMainThread()) return nullptr;
  try {
    auto span = std::make_unique<ProfiledSpan>(ProfiledSpan{nullptr, profiler_name(name), unix_us()});
    if (profiling_here()) {
      hand_over_finished();
      auto rf = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
      if (rf->isActive()) {
        rf->before(span->name);
        span->rf = rf.release();
      }
    }
    return span.release();
  } catch (const std::exception&) {  // a profiler stopping meanwhile: no span
    return nullptr;
  }
}

bool profiler_on() { return torch::autograd::profiler::isProfilerEnabledInMainThread(); }

// A span that ran elsewhere (steady-clock ns), handed over like a worker's.
void profiler_finished(const char* name, int64_t begin_ns, int64_t end_ns) {
  const int64_t steady_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now().time_since_epoch())
                                .count();
  const int64_t shift = unix_us() - steady_us;
  std::lock_guard<std::mutex> lock(finished_mu);
  if (finished.size() < kMaxFinished)
    finished.push_back({profiler_name(name), begin_ns / 1000 + shift, end_ns / 1000 + shift});
}

void profiler_end(void* handle) {
  std::unique_ptr<ProfiledSpan> span(static_cast<ProfiledSpan*>(handle));
  if (span->rf) {
    std::unique_ptr<at::RecordFunction> rf(span->rf);
    rf->end();
    hand_over_finished();
    return;
  }
  std::lock_guard<std::mutex> lock(finished_mu);
  if (finished.size() < kMaxFinished) finished.push_back({span->name, span->begin_us, unix_us()});
}

}  // namespace

void bind_debug(py::module_& m) {
  using eager::SiteLog;
  eager::Trace::set_profiler_hooks(&profiler_begin, &profiler_end, &profiler_on, &profiler_finished);
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
      eager::Runtime& rt = eager::Runtime::get();
      rt.flush_fused();
      rt.drain();
      // Until the work finished, for its device spans (errors stay for the next sync point).
      std::shared_ptr<eager::Marker> m = rt.record_marker(false);
      rt.wait_marker(*m);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // completion callbacks trail the wait a moment
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
