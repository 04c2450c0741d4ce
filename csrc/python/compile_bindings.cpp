// Bindings of compiled functions (aten/compiled.h) for torchtpu.dynamo.
#include <torch/csrc/Dtype.h>
#include <torch/extension.h>

#include "aten/compiled.h"

namespace py = pybind11;

namespace torchtpu::python {

namespace {

using aten::CaptureSession;
using aten::CompiledProgram;
using aten::OutputSpec;

// The function's arguments as the capture saw them: tpu tensors where they
// are, undefined elsewhere.
std::vector<at::Tensor> tensors_of(const py::list& args) {
  std::vector<at::Tensor> out(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    py::handle a = args[i];
    if (THPVariable_Check(a.ptr())) {
      const at::Tensor& t = THPVariable_Unpack(a.ptr());
      if (t.device().type() == c10::DeviceType::PrivateUse1) out[i] = t;
    }
  }
  return out;
}

at::ScalarType scalar_type_of(pjrt::ElementType t) {
  using E = pjrt::ElementType;
  switch (t) {
    case E::kPred: return at::kBool;
    case E::kS8: return at::kChar;
    case E::kS16: return at::kShort;
    case E::kS32: return at::kInt;
    case E::kS64: return at::kLong;
    case E::kU8: return at::kByte;
    case E::kU16: return at::kUInt16;
    case E::kU32: return at::kUInt32;
    case E::kU64: return at::kUInt64;
    case E::kF16: return at::kHalf;
    case E::kF32: return at::kFloat;
    case E::kF64: return at::kDouble;
    case E::kBF16: return at::kBFloat16;
    case E::kC64: return at::kComplexFloat;
    case E::kC128: return at::kComplexDouble;
    case E::kF8E4M3FN: return at::kFloat8_e4m3fn;
    case E::kF8E5M2: return at::kFloat8_e5m2;
    case E::kF8E4M3FNUZ: return at::kFloat8_e4m3fnuz;
    case E::kF8E5M2FNUZ: return at::kFloat8_e5m2fnuz;
  }
  TORCH_CHECK(false, "unknown PJRT element type ", static_cast<int>(t));
}

// Compiles module text with the plugin and runs it on host tensors: a
// StableHLO export checked by the plugin itself, outside torchtpu's graphs.
std::vector<at::Tensor> run_stablehlo(const std::string& text, const std::vector<at::Tensor>& inputs, int device) {
  eager::Runtime& rt = eager::Runtime::get();
  pjrt::ExecutablePtr exe = rt.compile_text(text);
  std::vector<pjrt::BufferPtr> held;
  std::vector<pjrt::Buffer*> args;
  for (const at::Tensor& t : inputs) {
    at::Tensor c = t.to(at::kCPU).contiguous();
    ir::Dims dims(c.sizes().begin(), c.sizes().end());
    held.push_back(rt.upload(c.data_ptr(), aten::to_ir(c.scalar_type()), dims, device));
    args.push_back(held.back().get());
  }
  pjrt::ExecuteResult r = exe->execute(args, device, {});
  if (r.done) r.done->wait();
  std::vector<at::Tensor> out;
  for (const pjrt::BufferPtr& b : r.outputs) {
    at::Tensor t = at::empty(b->dims(), at::TensorOptions().dtype(scalar_type_of(b->type())));
    b->to_host(t.data_ptr(), b->byte_size());
    out.push_back(t);
  }
  return out;
}

}  // namespace

void bind_compile(py::module_& m) {
  m.def("_run_stablehlo", &run_stablehlo, py::call_guard<py::gil_scoped_release>());
  py::class_<CompiledProgram, std::shared_ptr<CompiledProgram>>(m, "_CompiledProgram")
      .def("run",
           [](CompiledProgram& p, const py::list& args) -> py::object {
             std::vector<at::Tensor> in = tensors_of(args);
             std::optional<std::vector<at::Tensor>> out;
             {
               py::gil_scoped_release nogil;
               out = p.run(in);
             }
             if (!out) return py::none();
             py::list r(out->size());
             for (size_t i = 0; i < out->size(); ++i) r[i] = py::reinterpret_steal<py::object>(THPVariable_Wrap((*out)[i]));
             return r;
           })
      .def_property_readonly("ops", &CompiledProgram::ops)
      .def("arguments", &CompiledProgram::arguments)
      .def("stablehlo", &CompiledProgram::stablehlo);
  py::class_<CaptureSession>(m, "_Capture")
      .def(py::init<c10::DeviceIndex>())
      .def("finish",
           [](CaptureSession& c, const py::list& args, const std::vector<at::Tensor>& storages,
              const std::vector<std::tuple<int, std::vector<int64_t>, std::vector<int64_t>, int64_t, py::object>>&
                  specs) -> py::object {
             std::vector<OutputSpec> s;
             for (const auto& [storage, sizes, strides, offset, dtype] : specs) {
               TORCH_CHECK(THPDtype_Check(dtype.ptr()), "_Capture.finish: expected a torch.dtype");
               s.push_back({storage, sizes, strides, offset, reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type});
             }
             std::shared_ptr<CompiledProgram> p = c.finish(tensors_of(args), storages, std::move(s));
             if (!p) return py::none();
             return py::cast(p);
           })
      .def_property_readonly("why", &CaptureSession::why);
}

}  // namespace torchtpu::python
