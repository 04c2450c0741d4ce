// Kernels from outside PyTorch inlined into the device's programs: a JAX (or
// Pallas) function exported to StableHLO (torchtpu/jax_kernel.py) becomes
// one "func.call" node of the current op graph, whose callee and helper
// functions are printed into the module (ir::kFunctionsAttr). The call joins
// the surrounding program like any op: fused in Fused Eager, captured by
// torch.compile.
#include <torch/extension.h>

#include "aten/tensor_ir.h"
#include "ir/printer.h"

namespace torchtpu::python {
namespace py = pybind11;

namespace {

std::vector<at::Tensor> call_inlined(const std::string& callee, const std::string& functions, int device_index,
                                     const std::vector<at::Tensor>& inputs,
                                     const std::vector<std::vector<int64_t>>& out_shapes,
                                     const std::vector<at::ScalarType>& out_dtypes) {
  TORCH_CHECK(out_shapes.size() == out_dtypes.size(), "jax kernel ", callee, ": ", out_shapes.size(),
              " output shapes but ", out_dtypes.size(), " dtypes");
  const c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device_index));
  for (size_t i = 0; i < inputs.size(); ++i)
    TORCH_CHECK(inputs[i].device() == device, "jax kernel ", callee, ": input ", i, " is on ", inputs[i].device(),
                ", the kernel runs on ", device, " (all inputs must be on one tpu device)");
  aten::Kernel k("torchtpu::jax_kernel", device);
  ops::Builder& b = k.b();
  std::vector<ir::Value> args;
  for (const at::Tensor& t : inputs) args.push_back(k.in(t));
  std::vector<ir::Type> types;
  for (size_t i = 0; i < out_shapes.size(); ++i) types.push_back(ir::Type{aten::to_ir(out_dtypes[i]), out_shapes[i]});
  std::vector<at::Tensor> out;
  if (types.empty()) return out;
  std::vector<ir::Attr> attrs{ir::Attr::text("callee", "@" + callee),
                              ir::Attr::text(ir::kFunctionsAttr, functions)};
  const std::vector<ir::Value> results = b.graph().add_multi("func.call", std::move(args), types, std::move(attrs));
  for (size_t i = 0; i < results.size(); ++i) out.push_back(k.out(results[i], out_dtypes[i]));
  k.run();
  return out;
}

}  // namespace

void bind_kernels(py::module_& m) {
  m.def("_jax_call", &call_inlined, py::arg("callee"), py::arg("functions"), py::arg("device"), py::arg("inputs"),
        py::arg("out_shapes"), py::arg("out_dtypes"));
}

}  // namespace torchtpu::python
