// The device runtime: one PJRT client, the compile cache, the eager mode, and
// the storage values that device tensors hold. Torch-free; the aten layer maps
// tensors onto StorageValue.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/executable_cache.h"
#include "eager/eager_mode.h"
#include "ir/graph.h"
#include "pjrt/pjrt.h"

namespace torchtpu::eager {

// What one device storage holds: a flat 1-D PJRT buffer of `numel(dtype)`
// elements, or nothing yet (a fresh allocation reads as zeros). The buffer is
// immutable; a write swaps in a new one, so every alias sees it.
class StorageValue {
 public:
  StorageValue(int64_t nbytes, int device) : nbytes_(nbytes), device_(device) {}
  int64_t nbytes() const { return nbytes_; }
  int device() const { return device_; }
  // Number of elements of `dtype` the storage holds.
  int64_t numel(ir::DType dtype) const { return nbytes_ / ir::byte_size(dtype); }

  pjrt::BufferPtr buffer() const;
  ir::DType dtype() const { return dtype_; }
  void set(pjrt::BufferPtr buffer, ir::DType dtype);
  // Grows (or shrinks) the storage; contents are kept by the caller.
  void set_nbytes(int64_t nbytes) { nbytes_ = nbytes; }

 private:
  mutable std::mutex mu_;
  int64_t nbytes_;
  int device_;
  ir::DType dtype_ = ir::DType::kF32;
  pjrt::BufferPtr buffer_;
};

pjrt::ElementType to_pjrt(ir::DType t);

class Runtime {
 public:
  // Loads the plugin and creates the client; idempotent for the same args.
  static void init(const std::string& plugin_path, int64_t cpu_devices);
  static bool initialized();
  static Runtime& get();

  pjrt::Client& client() { return *client_; }
  int num_devices() const { return client_->num_devices(); }
  const std::string& platform() const { return client_->platform_name(); }

  EagerMode mode() const { return mode_; }
  void set_mode(EagerMode m) { mode_ = m; }

  cache::ExecutableCache& cache() { return cache_; }
  int64_t compilations() const { return compilations_; }
  void reset_compilations() { compilations_ = 0; }

  // Compile cache (compile.cpp). Compiles or fetches the executable for a
  // graph (its outputs set).
  pjrt::ExecutablePtr executable_for(const ir::Graph& g, bool* hit);
  // Turns on the disk tiers (an empty directory leaves that tier off).
  void configure_cache(const std::string& local_dir, const std::string& shared_dir, int64_t max_bytes);

  // A 0-d device buffer holding `value` (recently used values are kept).
  pjrt::BufferPtr scalar_buffer(ir::DType dtype, double value, int device);
  pjrt::BufferPtr upload(const void* data, ir::DType dtype, const ir::Dims& dims, int device);
  void download(const pjrt::Buffer& buf, void* dst, int64_t nbytes);

  // Remembers an in-flight execution; synchronize() waits for all of them.
  void track(std::shared_ptr<pjrt::Event> done);
  void synchronize();

 private:
  Runtime() = default;
  std::unique_ptr<pjrt::Client> client_;
  EagerMode mode_ = EagerMode::kStrict;
  cache::ExecutableCache cache_;
  std::atomic<int64_t> compilations_{0};
  ir::GraphKey salt_;

  struct ScalarKey {
    uint64_t bits;
    ir::DType dtype;
    int device;
    bool operator==(const ScalarKey& o) const { return bits == o.bits && dtype == o.dtype && device == o.device; }
  };
  struct ScalarKeyHash {
    size_t operator()(const ScalarKey& k) const {
      return static_cast<size_t>(k.bits * 0x9E3779B97F4A7C15ULL ^ (static_cast<uint64_t>(k.dtype) << 56) ^
                                 (static_cast<uint64_t>(k.device) << 48));
    }
  };
  std::mutex scalar_mu_;
  std::unordered_map<ScalarKey, pjrt::BufferPtr, ScalarKeyHash> scalars_;

  std::mutex events_mu_;
  std::vector<std::shared_ptr<pjrt::Event>> in_flight_;
};

}  // namespace torchtpu::eager
