// torchtpu._C: the only pybind layer. Thin bindings over the runtime, the
// device registration, metrics and the generator.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/extension.h>

#include "aten/device.h"
#include "aten/fallback.h"
#include "eager/metrics.h"
#include "eager/runtime.h"

namespace py = pybind11;
using torchtpu::eager::Runtime;

namespace {

torchtpu::aten::TpuGenerator* generator(int device) {
  return at::check_generator<torchtpu::aten::TpuGenerator>(torchtpu::aten::default_generator(device));
}

py::dict metrics() {
  auto& m = torchtpu::eager::metrics();
  py::dict d;
  Runtime& rt = Runtime::get();
  auto s = rt.cache().stats();
  d["compilations"] = rt.compilations();
  d["compile_seconds"] = s.compile_seconds;
  d["executions"] = m.executions.load();
  d["cache_hits"] = s.hits;
  d["cache_misses"] = s.misses;
  d["ops"] = m.op_counts();
  d["cpu_fallbacks"] = m.fallbacks();
  d["h2d_bytes"] = m.h2d_bytes.load();
  d["d2h_bytes"] = m.d2h_bytes.load();
  d["cached_executables"] = rt.cache().size();
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torchtpu native core";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const torchtpu::pjrt::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  m.def("_init", [](const std::string& plugin, int64_t devices) {
    Runtime::init(plugin, devices);
    torchtpu::aten::register_device();
  });
  m.def("_initialized", &Runtime::initialized);
  m.def("_device_count", [] { return Runtime::get().num_devices(); });
  m.def("_set_device", [](int index) {
    c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)
        ->setDevice(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)));
  });
  m.def("_get_device", [] {
    return static_cast<int>(c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index());
  });
  m.def("_platform", [] { return Runtime::get().platform(); });
  m.def("_set_mode", [](const std::string& mode) { Runtime::get().set_mode(torchtpu::eager::parse_mode(mode)); });
  m.def("_get_mode", [] { return std::string(torchtpu::eager::mode_name(Runtime::get().mode())); });
  m.def("_synchronize", [] {
    py::gil_scoped_release nogil;
    Runtime::get().synchronize();
  });
  m.def("_metrics", &metrics);
  m.def("_reset_metrics", [] {
    torchtpu::eager::metrics().reset();
    Runtime::get().cache().reset_stats();
    Runtime::get().reset_compilations();
  });
  m.def("_clear_cache", [] { Runtime::get().cache().clear(); });
  m.def("_set_fallback_error", &torchtpu::aten::set_fallback_error);
  m.def("_manual_seed", [](int device, uint64_t seed) {
    auto* g = generator(device);
    std::lock_guard<std::mutex> lock(g->mutex_);
    g->set_current_seed(seed);
  });
  m.def("_initial_seed", [](int device) { return generator(device)->current_seed(); });
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
}
