#include "aten/device.h"

#include <ATen/ATen.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "eager/buckets.h"
#include "eager/metrics.h"
#include "eager/runtime.h"

namespace torchtpu::aten {

namespace {

thread_local c10::DeviceIndex current_device = 0;

c10::DeviceIndex device_count() { return static_cast<c10::DeviceIndex>(eager::Runtime::device_count()); }

void delete_storage_value(void* ctx) {
  delete static_cast<eager::StorageValue*>(ctx);
  eager::Runtime::park_if_closing();
}

// torch.OutOfMemoryError for an allocation the device cannot hold, naming
// the op and the user's line. Resolving the line takes the GIL, which the
// allocating thread may not wait for (it may hold a device lock), so the
// message is made when first read: by PyTorch's error translation, on a
// thread that holds the GIL.
class DeviceOutOfMemory final : public c10::OutOfMemoryError {
 public:
  DeviceOutOfMemory(std::string why, eager::OpSite site)
      : c10::OutOfMemoryError(why, nullptr), state_(std::make_shared<State>()) {
    state_->why = std::move(why);
    state_->site = site;
  }
  const char* what() const noexcept override { return text(); }
  const char* what_without_backtrace() const noexcept override { return text(); }

 private:
  struct State {
    std::string why;
    eager::OpSite site;
    std::once_flag once;
    std::string text;
  };
  const char* text() const noexcept {
    std::call_once(state_->once, [this] {
      try {
        state_->text = eager::describe_failure({state_->site}, state_->why);
      } catch (const std::exception&) {
        state_->text = state_->why;
      }
    });
    return state_->text.c_str();
  }
  std::shared_ptr<State> state_;
};

// Hands out unique fake addresses so data_ptr() differs per storage. An
// allocation is checked against the device's memory (values are computed
// later, so this is the only place a too-large tensor can be refused at the
// user's line). A c10::DeviceAllocator, so torch.accelerator's memory
// functions read the same counters as torch.tpu's; nothing is cached, so
// emptyCache only lets queued work finish (freeing what it held).
class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex dev = current_device;
    eager::Runtime& rt = eager::Runtime::get();  // raises in a forked child
    std::string why = rt.allocation_failure(static_cast<int64_t>(nbytes), dev);
    if (!why.empty()) {
      rt.memory(dev).refused();
      const eager::OpSite* op = eager::current_op();
      throw DeviceOutOfMemory(why, op ? *op : eager::OpSite{eager::last_op(), eager::capture_site()});
    }
    uint64_t span = (static_cast<uint64_t>(nbytes) + 255) & ~uint64_t{255};
    uint64_t addr = next_.fetch_add(span + 256);
    auto* value = new eager::StorageValue(static_cast<int64_t>(nbytes), dev, addr);
    return {reinterpret_cast<void*>(addr), value, &delete_storage_value,
            c10::Device(c10::DeviceType::PrivateUse1, dev)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    TORCH_CHECK(false, "tpu storages cannot be copied by address; copy the tensors instead");
  }

  bool initialized() override { return eager::Runtime::device_count() > 0; }
  void emptyCache(c10::MempoolId_t) override { eager::Runtime::get().synchronize(); }
  void recordStream(const c10::DataPtr&, c10::Stream) override {}  // one queue per device: nothing to order
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    eager::Runtime& rt = runtime_for(device);
    const auto s = rt.memory(device).snapshot();
    c10::CachingDeviceAllocator::DeviceStats out;
    auto set = [](c10::CachingDeviceAllocator::StatArray& a, int64_t current, int64_t peak, int64_t allocated,
                  int64_t freed) {
      auto& all = a[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
      all.current = current;
      all.peak = peak;
      all.allocated = allocated;
      all.freed = freed;
    };
    set(out.allocation, s.count, s.peak_count, s.allocations, s.frees);
    set(out.segment, s.count, s.peak_count, s.allocations, s.frees);  // each storage is its own device buffer
    set(out.active, s.count, s.peak_count, s.allocations, s.frees);
    set(out.allocated_bytes, s.bytes, s.peak_bytes, s.allocated_bytes, s.freed_bytes);
    set(out.active_bytes, s.bytes, s.peak_bytes, s.allocated_bytes, s.freed_bytes);
    set(out.requested_bytes, s.bytes, s.peak_bytes, s.allocated_bytes, s.freed_bytes);
    pjrt::Client::MemoryStats p;
    if (rt.client().memory_stats(device, &p) && p.reserved >= 0)
      set(out.reserved_bytes, p.reserved, std::max(p.peak_reserved, p.reserved), s.allocated_bytes, s.freed_bytes);
    else
      set(out.reserved_bytes, s.bytes, s.peak_bytes, s.allocated_bytes, s.freed_bytes);
    out.num_ooms = s.ooms;
    return out;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override { runtime_for(device).memory(device).reset_totals(); }
  void resetPeakStats(c10::DeviceIndex device) override {
    runtime_for(device).memory(device).reset_peak();
    eager::buckets().reset_padding_peak(device);
  }
  // Free and total bytes: the plugin's figures where it has them, else the
  // capacity less what live tpu tensors hold (all devices' when they share
  // the host's memory), as torch.tpu.mem_get_info.
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    eager::Runtime& rt = runtime_for(device);
    pjrt::Client::MemoryStats p;
    if (rt.client().memory_stats(device, &p) && p.limit > 0)
      return {static_cast<size_t>(std::max<int64_t>(p.limit - p.in_use, 0)), static_cast<size_t>(p.limit)};
    const int64_t cap = std::max<int64_t>(rt.memory_capacity(device), 0);
    const int64_t free = std::max<int64_t>(cap - rt.memory_held(device), 0);
    return {static_cast<size_t>(free), static_cast<size_t>(cap)};
  }

 private:
  static eager::Runtime& runtime_for(c10::DeviceIndex& device) {
    if (device < 0) device = current_device;
    eager::Runtime& rt = eager::Runtime::get();
    TORCH_CHECK(device < rt.num_devices(), "tpu device index ", int(device), " out of range (", rt.num_devices(),
                " devices)");
    return rt;
  }
  std::atomic<uint64_t> next_{uint64_t{1} << 44};
};

TpuAllocator allocator;

// Page-locked host memory has no meaning for a PJRT client that copies on its
// own: "pinned" host tensors (pin_memory=True, non_blocking copies to the CPU)
// are ordinary host memory, remembered so that is_pinned() answers true. The
// host allocator of the tpu device type (torch.accelerator.empty_host_cache);
// it caches nothing.
class PinnedAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* p = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    if (p) {
      std::lock_guard<std::mutex> lock(mu());
      live()[p] = nbytes;
      bytes() += static_cast<int64_t>(nbytes);
    }
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
  static bool owns(const void* p) {
    std::lock_guard<std::mutex> lock(mu());
    return live().count(const_cast<void*>(p)) > 0;
  }
  bool record_event(void*, void*, c10::Stream) override { return true; }  // freed memory is never reused early
  void empty_cache() override {}
  at::HostStats get_stats() override {
    at::HostStats s;
    std::lock_guard<std::mutex> lock(mu());
    s.active_requests.current = s.allocations.current = static_cast<int64_t>(live().size());
    s.active_bytes.current = s.allocated_bytes.current = bytes();
    return s;
  }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::unordered_map<void*, size_t>& live() {
    static auto* s = new std::unordered_map<void*, size_t>();
    return *s;
  }
  static int64_t& bytes() {
    static int64_t b = 0;
    return b;
  }
  static void release(void* p) {
    if (!p) return;
    {
      std::lock_guard<std::mutex> lock(mu());
      auto it = live().find(p);
      if (it != live().end()) {
        bytes() -= static_cast<int64_t>(it->second);
        live().erase(it);
      }
    }
    c10::free_cpu(p);
  }
};

PinnedAllocator pinned_allocator;

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(c10::DeviceType::PrivateUse1, current_device); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.index() < device_count(), "tpu device index ", int(d.index()), " out of range (",
                int(device_count()), " devices)");
    if (d.index() >= 0) current_device = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) current_device = d.index();
  }
  // Streams (torch.Stream, torch.accelerator): ids name them; every stream
  // shares the device's queues (torchtpu/device_module.py says why waits
  // need do nothing). The current stream is per thread, as on CUDA.
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, d, current_stream_id(d.index()));
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream old = getStream(s.device());
    current_stream_id(s.device_index()) = s.id();
    return old;
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    const c10::Device on(d.type(), d.index() < 0 ? current_device : d.index());
    return c10::Stream(c10::Stream::UNSAFE, on, next_stream_id.fetch_add(1));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return getNewStream(d, high_priority ? -1 : 0);
  }
  bool queryStream(const c10::Stream&) const override {
    return eager::Runtime::get().marker_done(*eager::Runtime::get().record_marker(false));
  }
  void synchronizeStream(const c10::Stream&) const override { eager::Runtime::get().synchronize(); }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
  // The dtypes a tpu tensor can hold (torch.accelerator.get_device_capability).
  c10::DeviceCapability getDeviceCapability(c10::Device) const override {
    c10::DeviceCapability cap;
    cap.capability_data.capability_bits = 0;
    for (int i : {c10::kIndex_Bool, c10::kIndex_Byte, c10::kIndex_Char, c10::kIndex_Short, c10::kIndex_Int,
                  c10::kIndex_Long, c10::kIndex_Half, c10::kIndex_BFloat16, c10::kIndex_Float, c10::kIndex_Double,
                  c10::kIndex_ComplexFloat, c10::kIndex_ComplexDouble})
      cap.capability_data.capability_bits |= 1ULL << i;
    return cap;
  }
  void synchronizeDevice(const c10::DeviceIndex) const override { eager::Runtime::get().synchronize(); }
  // Events (torch.Event): a recorded Marker of both queues; with timing
  // (enable_timing=True), elapsedTime comes from the device's completions.
  void record(void** event, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag flag) const override {
    auto* e = static_cast<RecordedEvent*>(*event);
    if (!e) *event = e = new RecordedEvent;
    e->timing = flag == c10::EventFlag::BACKEND_DEFAULT;
    e->marker = eager::Runtime::get().record_marker(e->timing);
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void* event) const override {
    auto* e = static_cast<RecordedEvent*>(event);
    return !e || !e->marker || eager::Runtime::get().marker_done(*e->marker);
  }
  void synchronizeEvent(void* event) const override {
    auto* e = static_cast<RecordedEvent*>(event);
    if (e && e->marker) eager::Runtime::get().wait_marker(*e->marker);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    auto* a = static_cast<RecordedEvent*>(start);
    auto* b = static_cast<RecordedEvent*>(end);
    TORCH_CHECK(a && b && a->marker && b->marker, "tpu events: both events must be recorded before elapsed_time");
    TORCH_CHECK(a->timing && b->timing, "tpu events: both events must be created with enable_timing=True");
    eager::Runtime& rt = eager::Runtime::get();
    return static_cast<double>(rt.marker_time(*b->marker) - rt.marker_time(*a->marker)) / 1e6;
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<RecordedEvent*>(event);
  }

 private:
  struct RecordedEvent {
    std::shared_ptr<eager::Marker> marker;
    bool timing = false;
  };
  static int64_t& current_stream_id(c10::DeviceIndex d) {
    thread_local std::array<int64_t, 256> ids{};
    return ids.at(d < 0 ? current_device : d);
  }
  static inline std::atomic<int64_t> next_stream_id{1};
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device; }
  void setCurrentDevice(c10::DeviceIndex d) const override { current_device = d; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override { return default_generator(d); }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    return at::make_generator<TpuGenerator>(d < 0 ? current_device : d);
  }
  bool isPinnedPtr(const void* data) const override { return PinnedAllocator::owns(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator; }
  at::Device getDeviceFromPtr(void*) const override { return c10::Device(c10::DeviceType::PrivateUse1, current_device); }
  // untyped_storage().resize_(n), as FSDP2 frees and re-allocates unsharded
  // parameters: the storage gets a fresh value of n bytes (reading as
  // zeros). Keeping the old bytes is supported only where there are none.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    if (newsize == impl->nbytes()) return;
    auto* old = static_cast<eager::StorageValue*>(impl->data_ptr().get_context());
    TORCH_CHECK(newsize == 0 || impl->nbytes() == 0 || !old || !old->has_value(),
                "resizing a tpu storage that holds data (", impl->nbytes(), " bytes) to ", newsize,
                " bytes is not supported; resize it to 0 first, or copy into a new tensor");
    c10::DeviceIndex previous = current_device;
    current_device = impl->device().index();
    c10::DataPtr fresh;
    try {
      fresh = allocator.allocate(newsize);
    } catch (...) {
      current_device = previous;
      throw;
    }
    current_device = previous;
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

uint64_t mix64(uint64_t x) {
  x ^= x >> 33; x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33; x *= 0xC4CEB9FE1A85EC53ULL;
  x ^= x >> 33;
  return x;
}

}  // namespace

c10::Allocator* device_allocator() { return &allocator; }

bool is_pinned_host(const at::Tensor& t) {
  return t.device().is_cpu() && t.has_storage() && PinnedAllocator::owns(t.storage().data());
}

TpuGenerator::TpuGenerator(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void TpuGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t TpuGenerator::seed() {
  uint64_t s = c10::detail::getNonDeterministicRandom();
  set_current_seed(s);
  return s;
}

void TpuGenerator::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.numel() == 16 && new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
              "tpu generator state must be a uint8 tensor of 16 bytes, got ", new_state.numel(), " elements");
  const uint8_t* p = static_cast<const uint8_t*>(new_state.data());
  std::memcpy(&seed_, p, 8);
  std::memcpy(&offset_, p + 8, 8);
}

c10::intrusive_ptr<c10::TensorImpl> TpuGenerator::get_state() const {
  at::Tensor t = at::empty({16}, at::kByte);
  std::memcpy(t.data_ptr(), &seed_, 8);
  std::memcpy(static_cast<uint8_t*>(t.data_ptr()) + 8, &offset_, 8);
  return t.getIntrusivePtr();
}

TpuGenerator* TpuGenerator::clone_impl() const {
  auto* g = new TpuGenerator(device().index(), seed_);
  g->offset_ = offset_;
  return g;
}

std::pair<uint32_t, uint32_t> TpuGenerator::next_keys() {
  uint64_t h = mix64(seed_ ^ mix64(offset_ + 0x9E3779B97F4A7C15ULL));
  ++offset_;
  return {static_cast<uint32_t>(h), static_cast<uint32_t>(h >> 32)};
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::vector<at::Generator> gens;
  std::call_once(once, [] {
    for (c10::DeviceIndex i = 0; i < std::max<c10::DeviceIndex>(device_count(), 1); ++i)
      gens.push_back(at::make_generator<TpuGenerator>(i));
  });
  if (device < 0) device = current_device;
  TORCH_CHECK(device < static_cast<c10::DeviceIndex>(gens.size()), "tpu device index ", int(device), " out of range");
  return gens[device];
}

void register_device() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::SetAllocator(c10::DeviceType::PrivateUse1, &allocator);
    at::setHostAllocator(c10::DeviceType::PrivateUse1, &pinned_allocator);
    static TpuHooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks);
  });
}

}  // namespace torchtpu::aten
