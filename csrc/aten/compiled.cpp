#include "aten/compiled.h"

#include <c10/core/DeviceGuard.h>
#include <torch/csrc/autograd/function.h>

#include "ir/printer.h"

namespace torchtpu::aten {

namespace {

// The thread errors of a program belong to: the caller's, or any thread's
// inside a backward pass (the engine's thread runs it for another).
uint64_t issuer() { return torch::autograd::get_current_node() ? eager::kAnyIssuer : eager::thread_token(); }

// A new device tensor over a storage of `nbytes` that holds `slot`.
at::Tensor tensor_on(const eager::SlotPtr& slot, ir::DType stored, int64_t nbytes, at::ScalarType dtype,
                     at::IntArrayRef sizes, at::IntArrayRef strides, int64_t offset) {
  c10::Storage st(c10::Storage::use_byte_size_t(), nbytes, device_allocator(), /*resizable=*/true);
  static_cast<eager::StorageValue*>(st.data_ptr().get_context())->set_slot(slot, stored);
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(std::move(st), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                        caffe2::TypeMeta::fromScalarType(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
  return t;
}

std::vector<eager::StorageValue*> storages_of(const std::vector<at::Tensor>& inputs) {
  std::vector<eager::StorageValue*> in(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined()) in[i] = storage_value(inputs[i]);
  return in;
}

}  // namespace

CaptureSession::CaptureSession(c10::DeviceIndex device) : device_(device), cap_(new eager::Capture(device)) {}

std::shared_ptr<CompiledProgram> CaptureSession::finish(const std::vector<at::Tensor>& inputs,
                                                        const std::vector<at::Tensor>& storages,
                                                        std::vector<OutputSpec> specs) {
  eager::Runtime& rt = eager::Runtime::get();
  std::vector<CheckRecord> checks;
  std::vector<eager::StorageValue*> outs;
  {
    std::lock_guard<std::recursive_mutex> lock(rt.device_lock(device_));
    if (!cap_->abandoned())
      checks = take_checks([&](const at::Tensor& f) { return cap_->graph().holds(storage_value(f)); });
    for (const at::Tensor& t : storages) outs.push_back(storage_value(t));
    for (const CheckRecord& c : checks) outs.push_back(storage_value(c.flag));
  }
  std::shared_ptr<eager::Program> program;
  try {
    program = cap_->finish(storages_of(inputs), outs, issuer());
  } catch (const eager::DeviceError& e) {
    rethrow_device_error(e.described());
  }
  // The flags now hold this call's values (or the abandoned capture's).
  queue_checks(checks, /*raise_in_debug=*/true);
  if (!program) return nullptr;
  auto compiled = std::shared_ptr<CompiledProgram>(new CompiledProgram());
  compiled->program_ = std::move(program);
  compiled->device_ = device_;
  for (const at::Tensor& t : storages) compiled->storage_bytes_.push_back(static_cast<int64_t>(t.storage().nbytes()));
  compiled->specs_ = std::move(specs);
  for (const at::Tensor& t : inputs) {
    CompiledProgram::InputLayout l;
    if (t.defined()) {
      l.tensor = true;
      l.sizes = t.sizes().vec();
      l.strides = t.strides().vec();
      l.offset = t.storage_offset();
      l.storage_bytes = static_cast<int64_t>(t.storage().nbytes());
      l.dtype = t.scalar_type();
    }
    compiled->layouts_.push_back(std::move(l));
  }
  for (size_t j = 0; j < checks.size(); ++j) {
    CheckRecord c = checks[j];
    c.flag = at::Tensor();
    compiled->checks_.push_back({static_cast<int>(storages.size() + j), std::move(c)});
  }
  return compiled;
}

bool CompiledProgram::same_layout(const std::vector<at::Tensor>& inputs) const {
  if (inputs.size() != layouts_.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputLayout& l = layouts_[i];
    const at::Tensor& t = inputs[i];
    if (t.defined() != l.tensor) return false;
    if (!l.tensor) continue;
    if (t.scalar_type() != l.dtype || t.storage_offset() != l.offset || t.sizes() != at::IntArrayRef(l.sizes) ||
        t.strides() != at::IntArrayRef(l.strides) || static_cast<int64_t>(t.storage().nbytes()) != l.storage_bytes)
      return false;
  }
  return true;
}

std::optional<std::vector<at::Tensor>> CompiledProgram::run(const std::vector<at::Tensor>& inputs) {
  if (!same_layout(inputs)) return std::nullopt;
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
  std::vector<eager::StorageValue*> in = storages_of(inputs);
  eager::Runtime& rt = eager::Runtime::get();
  eager::Runtime::Entry entry(/*admit=*/true);
  std::unique_lock<std::recursive_mutex> lock(rt.device_lock(device_));
  std::vector<eager::SlotPtr> slots;
  bool ran = false;
  std::unique_ptr<eager::Task> grouped;
  try {
    slots = program_->run(in, issuer(), &ran, &grouped);
  } catch (const eager::DeviceError& e) {
    lock.unlock();
    rethrow_device_error(e.described());
  }
  if (!ran) return std::nullopt;
  std::vector<at::Tensor> base;
  for (size_t i = 0; i < storage_bytes_.size(); ++i) {
    const ir::DType stored = program_->output_dtype(i);
    const int64_t n = storage_bytes_[i] / ir::byte_size(stored);
    base.push_back(tensor_on(slots[i], stored, storage_bytes_[i], to_aten(stored), {n}, {1}, 0));
  }
  std::vector<at::Tensor> out;
  out.reserve(specs_.size());
  for (const OutputSpec& s : specs_) {
    const at::Tensor& b = base.at(static_cast<size_t>(s.storage));
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(b.storage()),
                                                          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                          caffe2::TypeMeta::fromScalarType(s.dtype));
    t.unsafeGetTensorImpl()->set_sizes_and_strides(s.sizes, s.strides, s.offset);
    out.push_back(std::move(t));
  }
  std::vector<CheckRecord> checks;
  for (const auto& [o, c] : checks_) {
    CheckRecord r = c;
    r.flag = tensor_on(slots.at(static_cast<size_t>(o)), ir::DType::kBool, 1, at::kBool, {}, {}, 0);
    checks.push_back(std::move(r));
  }
  lock.unlock();
  // A program holding collectives runs with the other ranks' (thread ranks).
  if (grouped) program_->group()->run_program(program_->group_rank(), std::move(grouped), program_->collectives());
  queue_checks(std::move(checks), /*raise_in_debug=*/true);
  return out;
}

std::vector<std::tuple<std::string, int, at::Tensor>> CompiledProgram::arguments() const {
  std::vector<std::tuple<std::string, int, at::Tensor>> out;
  const ir::Graph& g = program_->graph();
  for (size_t i = 0; i < program_->args().size(); ++i) {
    const eager::Program::Arg& a = program_->args()[i];
    if (a.kind == eager::Program::Arg::Kind::kInput) {
      out.emplace_back("input", a.input, at::Tensor());
      continue;
    }
    const ir::Type& ty = g.parameter_type(static_cast<int>(i));
    eager::SlotPtr slot = a.kind == eager::Program::Arg::Kind::kConstant ? a.constant
                          : a.kind == eager::Program::Arg::Kind::kScalar ? eager::Slot::ready(a.scalar)
                                                                         : nullptr;
    if (!slot) {  // drawn keys: the value is drawn per run; report its type
      out.emplace_back("drawn", -1, at::zeros(ty.dims, at::TensorOptions().dtype(to_aten(ty.dtype))));
      continue;
    }
    const int64_t nbytes = ty.numel() * ir::byte_size(ty.dtype);
    std::vector<int64_t> strides(ty.dims.size(), 1);
    for (size_t d = ty.dims.size(); d-- > 1;) strides[d - 1] = strides[d] * ty.dims[d];
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    out.emplace_back("value", -1, tensor_on(slot, ty.dtype, nbytes, to_aten(ty.dtype), ty.dims, strides, 0));
  }
  return out;
}

std::string CompiledProgram::stablehlo() const { return ir::print_stablehlo(program_->graph()); }

}  // namespace torchtpu::aten
