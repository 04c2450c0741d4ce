// The tpu device as PyTorch sees it: the PrivateUse1 allocator (storages hold
// an eager::StorageValue, data_ptr() is a unique, never-dereferenced address),
// the device guard, the hooks, and the random generator.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/GeneratorImpl.h>

namespace torchtpu::aten {

// Counter-based generator: a seed and an offset that every random op
// advances; device random bits are a hash of (seed, offset, element index).
class TpuGenerator : public c10::GeneratorImpl {
 public:
  explicit TpuGenerator(c10::DeviceIndex device, uint64_t seed = 67280421310721ULL);
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }
  // Two 32-bit keys for one random op; advances the offset.
  std::pair<uint32_t, uint32_t> next_keys();

 private:
  TpuGenerator* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex device);
// Whether a CPU tensor's memory came from the pinned host allocator.
bool is_pinned_host(const at::Tensor& t);
// Registers allocator, guard and hooks (once, at import).
void register_device();

}  // namespace torchtpu::aten
