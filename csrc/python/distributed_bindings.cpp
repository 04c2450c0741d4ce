// Bindings of the c10d backend (distributed/backend.h) for torchtpu.distributed.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

#include "distributed/backend.h"

namespace py = pybind11;

namespace torchtpu::python {

py::dict distributed_metrics() {
  auto& s = distributed::stats();
  py::dict d;
  d["collectives"] = s.collectives.load();
  d["host_staged"] = s.host_staged.load();
  d["host_staged_bytes"] = s.host_staged_bytes.load();
  d["point_to_point"] = s.point_to_point.load();
  d["device_programs"] = s.device_programs.load();
  d["fused_programs"] = s.fused_programs.load();
  d["staged_programs"] = s.staged_programs.load();
  return d;
}

void reset_distributed_metrics() {
  auto& s = distributed::stats();
  s.collectives = 0;
  s.host_staged = 0;
  s.host_staged_bytes = 0;
  s.point_to_point = 0;
  s.device_programs = 0;
  s.fused_programs = 0;
  s.staged_programs = 0;
}

void bind_distributed(py::module_& m) {
  m.def(
      "_dist_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
         const c10::intrusive_ptr<c10d::Backend>& host) -> c10::intrusive_ptr<c10d::Backend> {
        return c10::make_intrusive<distributed::TpuBackend>(store, rank, size, timeout, host);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("host"));
  m.def(
      "_dist_thread_backend",
      [](const std::string& name, int rank, int size, std::chrono::milliseconds timeout)
          -> c10::intrusive_ptr<c10d::Backend> {
        return c10::make_intrusive<distributed::TpuBackend>(distributed::LocalGroup::get(name, size), rank, timeout);
      },
      py::arg("name"), py::arg("rank"), py::arg("size"), py::arg("timeout"));
  m.def("_dist_collective_programs", &distributed::LocalGroup::compiled_programs);
}

}  // namespace torchtpu::python
