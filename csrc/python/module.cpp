// torchtpu._C: the only pybind layer. Thin bindings over the runtime, the
// device registration, metrics and the generator.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <stdlib.h>
#include <torch/csrc/autograd/function.h>
#include <torch/extension.h>

#include "aten/device.h"
#include "aten/fallback.h"
#include "aten/op_memo.h"
#include "aten/registry.h"
#include "aten/tensor_ir.h"
#include "distributed/staging.h"
#include "eager/metrics.h"
#include "eager/fused_graph.h"
#include "eager/buckets.h"
#include "eager/recompiles.h"
#include "eager/runtime.h"
#include "eager/site_log.h"
#include "python/sites.h"

namespace py = pybind11;
using torchtpu::eager::Runtime;

namespace torchtpu::python {
void bind_cache(py::module_& m);    // cache_bindings.cpp
void bind_compile(py::module_& m);  // compile_bindings.cpp
void bind_distributed(py::module_& m);  // distributed_bindings.cpp
void bind_kernels(py::module_& m);      // kernel_bindings.cpp
void bind_debug(py::module_& m);        // debug_bindings.cpp
py::dict distributed_metrics();
void reset_distributed_metrics();
}  // namespace torchtpu::python

namespace {

torchtpu::aten::TpuGenerator* generator(int device) {
  return at::check_generator<torchtpu::aten::TpuGenerator>(torchtpu::aten::default_generator(device));
}

// A thread that enters the runtime after interpreter exit began waits there
// for good when returning would take it back into the finalizing interpreter:
// a Python thread that released the GIL, or the autograd engine's thread
// running a backward pass for such a thread (one whose forward ops another
// thread than the exiting one issued). Others run their work.
bool may_park(uint64_t exiting_thread) {
  if (torch::autograd::get_current_node()) {
    const uint64_t issuer = torchtpu::eager::capture_site().issuer;  // the forward op's thread
    if (issuer == exiting_thread || issuer == torchtpu::eager::kAnyIssuer) return false;
    // The engine would wait 10 s at exit for this thread to end; it never
    // will (a user's own setting is kept).
    setenv("TORCH_AUTOGRAD_SHUTDOWN_WAIT_LIMIT", "0", /*overwrite=*/0);
    return true;
  }
  return Py_IsInitialized() && PyGILState_GetThisThreadState() != nullptr && !PyGILState_Check();
}

py::dict queue_state() {
  auto& ex = Runtime::get().executor();
  py::dict d;
  d["pending_ops"] = ex.pending_ops();
  d["pending_bytes"] = ex.pending_bytes();
  d["max_ops"] = ex.max_ops();
  d["max_bytes"] = ex.max_bytes();
  return d;
}

py::dict metrics() {
  auto& m = torchtpu::eager::metrics();
  py::dict d;
  Runtime& rt = Runtime::get();
  {
    py::gil_scoped_release nogil;
    rt.drain();
  }
  auto s = rt.cache().stats();
  d["compilations"] = rt.compilations();
  d["compilations_by_cause"] = torchtpu::eager::recompile_log().counts();
  d["compile_seconds"] = s.compile_seconds;
  d["executions"] = m.executions.load();
  d["cache_hits"] = s.hits;
  d["cache_misses"] = s.misses;
  d["ops"] = m.op_counts();
  d["cpu_fallbacks"] = m.fallbacks();
  d["h2d_bytes"] = m.h2d_bytes.load();
  d["d2h_bytes"] = m.d2h_bytes.load();
  d["cached_executables"] = rt.cache().size();
  d["donated_buffers"] = m.donated_buffers.load();
  d["fused_graphs"] = m.fused_graphs.load();
  d["fused_ops"] = m.fused_ops.load();
  d["fused_outputs"] = m.fused_outputs.load();
  d["fused_cuts"] = py::dict(py::arg("sync") = m.cuts_sync.load(), py::arg("loop") = m.cuts_loop.load(),
                             py::arg("size") = m.cuts_size.load());
  d["fused_replayed_ops"] = m.fused_replayed_ops.load();
  d["fused_replay_misses"] = m.fused_replay_misses.load();
  d["compiled"] = py::dict(py::arg("programs") = m.captured_programs.load(),
                           py::arg("abandoned") = m.captures_abandoned.load(),
                           py::arg("runs") = m.program_runs.load());
  d["op_memo"] = py::dict(py::arg("hits") = torchtpu::aten::OpMemo::hits(),
                          py::arg("records") = torchtpu::aten::OpMemo::records());
  d["distributed"] = torchtpu::python::distributed_metrics();
  return d;
}

}  // namespace

// One device's memory: our ledger of its storages, its capacity and
// per-process fraction, and what the plugin's allocator says (keys
// "device_*", only where the plugin has memory stats).
py::dict memory_stats(int device) {
  Runtime& rt = Runtime::get();
  TORCH_CHECK(device >= 0 && device < rt.num_devices(), "tpu device index ", device, " out of range (",
              rt.num_devices(), " devices)");
  const auto s = rt.memory(device).snapshot();
  py::dict d;
  d["bytes"] = s.bytes;
  d["peak_bytes"] = s.peak_bytes;
  d["allocated_bytes"] = s.allocated_bytes;
  d["freed_bytes"] = s.freed_bytes;
  d["count"] = s.count;
  d["peak_count"] = s.peak_count;
  d["allocations"] = s.allocations;
  d["frees"] = s.frees;
  d["ooms"] = s.ooms;
  d["capacity"] = rt.memory_capacity(device);
  d["held_on_capacity"] = rt.memory_held(device);
  d["fraction"] = rt.memory_fraction(device);
  d["padding_bytes"] = torchtpu::eager::buckets().padding_bytes(device);
  d["padding_peak_bytes"] = torchtpu::eager::buckets().padding_peak_bytes(device);
  torchtpu::pjrt::Client::MemoryStats p;
  if (rt.client().memory_stats(device, &p)) {
    d["device_in_use"] = p.in_use;
    d["device_peak_in_use"] = p.peak_in_use;
    d["device_reserved"] = p.reserved;
    d["device_peak_reserved"] = p.peak_reserved;
    d["device_limit"] = p.limit;
  }
  return d;
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "torchtpu native core";
  torchtpu::aten::register_kernels();
  m.def("_kernel_table", &torchtpu::aten::kernel_table);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const torchtpu::pjrt::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const torchtpu::eager::DeviceError& e) {
      PyObject* type = PyExc_RuntimeError;
      if (e.out_of_memory()) type = py::module_::import("torch").attr("OutOfMemoryError").ptr();
      PyErr_SetString(type, e.what());
    }
  });
  m.def("_init", [](const std::string& plugin, int64_t devices) {
    Runtime::init(plugin, devices);
    Runtime::set_park_hook(&may_park);
    torchtpu::aten::register_device();
  });
  m.def("_set_queue_limits", [](int64_t max_ops, int64_t max_bytes) {
    Runtime::get().set_queue_limits(max_ops, max_bytes);
  });
  m.def("_queue_state", &queue_state);
  m.def("_set_memory_capacity", [](int64_t bytes) { Runtime::get().set_memory_capacity(bytes); });
  m.def("_memory_capacity", [](int device) { return Runtime::get().memory_capacity(device); });
  m.def("_memory_held", [](int device) { return Runtime::get().memory_held(device); });
  m.def("_memory_stats", &memory_stats);
  m.def("_set_precision_override", &torchtpu::aten::set_precision_override);
  // Events (torch.tpu.Event): a recorded position of the compute and copy queues.
  using torchtpu::eager::Marker;
  py::class_<Marker, std::shared_ptr<Marker>>(m, "_Marker")
      .def("query", [](Marker& mk) { return Runtime::get().marker_done(mk); })
      .def("synchronize", [](Marker& mk) {
        py::gil_scoped_release nogil;
        Runtime::get().wait_marker(mk);
      })
      .def("time_ns", [](Marker& mk) {
        py::gil_scoped_release nogil;
        return Runtime::get().marker_time(mk);
      });
  m.def("_record_marker", [](bool timing) {
    py::gil_scoped_release nogil;
    return Runtime::get().record_marker(timing);
  });
  m.def("_async_uploads", [] { return Runtime::get().async_uploads(); });
  m.def("_reset_peak_memory", [](int device) {
    Runtime::get().memory(device).reset_peak();
    torchtpu::eager::buckets().reset_padding_peak(device);
  });
  m.def("_memory_live", [](int device) { return Runtime::get().memory(device).live(); });
  m.def("_record_memory_history", [](int device, int64_t max_entries) {
    Runtime::get().memory(device).record_history(max_entries);
  });
  m.def("_memory_history", [](int device) {
    py::list out;
    for (const auto& e : Runtime::get().memory(device).history())
      out.append(py::make_tuple(e.alloc, e.address, e.nbytes, e.time_us));
    return out;
  });
  m.def("_reset_memory_totals", [](int device) { Runtime::get().memory(device).reset_totals(); });
  m.def("_set_memory_fraction", [](int device, double f) { Runtime::get().set_memory_fraction(device, f); });
  m.def("_install_site_hooks", &torchtpu::python::install_site_hooks);
  m.def("_set_site_text", &torchtpu::python::set_site_text);
  m.def("_shutdown", [] {
    py::gil_scoped_release nogil;
    Runtime::shutdown();
  });
  m.def("_set_cpp_stacktraces", &torchtpu::eager::set_cpp_stacktraces);
  m.def("_fused_pending_ops", [](int device) {
    Runtime& rt = Runtime::get();
    std::lock_guard<std::recursive_mutex> lock(rt.device_lock(device));
    return rt.fused(device).pending_ops();
  });
  // The device address of a tensor's storage (after its value is computed).
  m.def("_storage_address", [](const at::Tensor& t) -> uintptr_t {
    torchtpu::eager::SlotPtr slot;
    {
      Runtime& rt = Runtime::get();
      std::lock_guard<std::recursive_mutex> lock(rt.device_lock(t.device().index()));
      rt.fused(t.device().index()).flush_for(torchtpu::aten::storage_value(t));
      slot = torchtpu::aten::storage_value(t)->slot();
    }
    if (!slot) return 0;
    py::gil_scoped_release nogil;
    return Runtime::get().wait_value(slot)->device_address();
  });
  m.def("_set_fused_max_ops", &torchtpu::eager::set_fused_max_ops);
  m.def("_fused_max_ops", &torchtpu::eager::fused_max_ops);
  m.def("_initialized", &Runtime::initialized);
  m.def("_device_count", [] { return Runtime::device_count(); });
  m.def("_set_device", [](int index) {
    c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)
        ->setDevice(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)));
  });
  m.def("_get_device", [] {
    return static_cast<int>(c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index());
  });
  m.def("_platform", [] { return Runtime::get().platform(); });
  m.def("_device_description", [](int device) {
    Runtime& rt = Runtime::get();
    TORCH_CHECK(device >= 0 && device < rt.num_devices(), "tpu device index ", device, " out of range (",
                rt.num_devices(), " devices)");
    py::dict attrs;
    for (const auto& [k, v] : rt.client().device_attributes(device)) attrs[py::str(k)] = v;
    return py::make_tuple(rt.client().device_kind(device), attrs);
  });
  m.def("_set_mode", [](const std::string& mode) {
    auto m = torchtpu::eager::parse_mode(mode);
    py::gil_scoped_release nogil;
    Runtime::get().set_mode(m);
  });
  m.def("_get_mode", [] { return std::string(torchtpu::eager::mode_name(Runtime::get().mode())); });
  // Queues pending Fused Eager work without waiting for it.
  m.def("_flush", [] {
    py::gil_scoped_release nogil;
    Runtime::get().flush_fused();
  });
  m.def("_synchronize", [] {
    py::gil_scoped_release nogil;
    torchtpu::distributed::StagingQueue::wait_all();  // host-staged collectives still queued
    Runtime::get().synchronize();
    try {
      torchtpu::aten::raise_failed_checks();
    } catch (const c10::IndexError& e) {
      throw py::index_error(e.what_without_backtrace());
    } catch (const c10::Error& e) {
      throw std::runtime_error(e.what_without_backtrace());
    }
  });
  m.def("_metrics", &metrics);
  m.def("_reset_metrics", [] {
    {
      py::gil_scoped_release nogil;
      Runtime::get().drain();
    }
    torchtpu::eager::metrics().reset();
    torchtpu::python::reset_distributed_metrics();
    Runtime::get().cache().reset_stats();
    Runtime::get().reset_compilations();
    torchtpu::eager::recompile_log().reset();
    torchtpu::eager::buckets().reset_stats();
    torchtpu::eager::site_log().clear();
    torchtpu::aten::OpMemo::reset_counts();
  });
  m.def("_set_fused_replay", &torchtpu::eager::set_fused_replay);
  m.def("_fused_replay", &torchtpu::eager::fused_replay);
  m.def("_set_op_memo", &torchtpu::aten::OpMemo::set_enabled);
  m.def("_op_memo", &torchtpu::aten::OpMemo::enabled);
  m.def("_clear_cache", [] { Runtime::get().cache().clear(); });
  m.def("_set_fallback_error", &torchtpu::aten::set_fallback_error);
  m.def("_manual_seed", [](int device, uint64_t seed) {
    auto* g = generator(device);
    std::lock_guard<std::mutex> lock(g->mutex_);
    g->set_current_seed(seed);
  });
  m.def("_initial_seed", [](int device) { return generator(device)->current_seed(); });
  m.def("_default_generator", [](int device) { return torchtpu::aten::default_generator(device); });
  m.def("_get_rng_state", [](int device) {
    auto* g = generator(device);
    std::lock_guard<std::mutex> lock(g->mutex_);
    return at::Tensor(g->get_state());
  });
  m.def("_set_rng_state", [](int device, const at::Tensor& state) {
    auto* g = generator(device);
    std::lock_guard<std::mutex> lock(g->mutex_);
    g->set_state(*state.contiguous().unsafeGetTensorImpl());
  });
  torchtpu::python::bind_cache(m);
  torchtpu::python::bind_compile(m);
  torchtpu::python::bind_distributed(m);
  torchtpu::python::bind_kernels(m);
  torchtpu::python::bind_debug(m);
}
