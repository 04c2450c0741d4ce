#include "eager/runtime.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "eager/fused_graph.h"
#include "eager/metrics.h"

namespace torchtpu::eager {

namespace {
std::unique_ptr<Runtime>& instance() {
  static std::unique_ptr<Runtime> r;
  return r;
}
std::mutex init_mu;
}  // namespace

EagerMode parse_mode(const std::string& name) {
  if (name == "debug") return EagerMode::kDebug;
  if (name == "strict") return EagerMode::kStrict;
  if (name == "fused") return EagerMode::kFused;
  throw std::invalid_argument("unknown eager mode '" + name + "': expected 'debug', 'strict' or 'fused'");
}

const char* mode_name(EagerMode m) {
  switch (m) {
    case EagerMode::kDebug: return "debug";
    case EagerMode::kStrict: return "strict";
    case EagerMode::kFused: return "fused";
  }
  return "?";
}

StorageValue::~StorageValue() {
  if ((pending_gen != 0 || param_gen != 0) && Runtime::initialized()) {
    Runtime& rt = Runtime::get();
    std::lock_guard<std::recursive_mutex> lock(rt.device_lock(device_));
    rt.fused(device_).forget(this);
  }
}

void StorageValue::set_slot(SlotPtr s, ir::DType dtype) {
  if (pending_gen != 0 || param_gen != 0) Runtime::get().fused(device_).forget(this);
  slot_ = std::move(s);
  dtype_ = dtype;
}

pjrt::ElementType to_pjrt(ir::DType t) {
  using E = pjrt::ElementType;
  switch (t) {
    case ir::DType::kBool: return E::kPred;
    case ir::DType::kU8: return E::kU8;
    case ir::DType::kS8: return E::kS8;
    case ir::DType::kS16: return E::kS16;
    case ir::DType::kS32: return E::kS32;
    case ir::DType::kS64: return E::kS64;
    case ir::DType::kF16: return E::kF16;
    case ir::DType::kBF16: return E::kBF16;
    case ir::DType::kF32: return E::kF32;
    case ir::DType::kF64: return E::kF64;
    case ir::DType::kU32: return E::kU32;
    case ir::DType::kU64: return E::kU64;
  }
  return E::kF32;
}

void Runtime::init(const std::string& plugin_path, int64_t cpu_devices) {
  std::lock_guard<std::mutex> lock(init_mu);
  if (instance()) return;
  std::unique_ptr<Runtime> r(new Runtime());
  const pjrt::Plugin& plugin = pjrt::Plugin::load(plugin_path);
  r->client_ = pjrt::Client::create(plugin, cpu_devices);
  ir::Hasher h;
  h.str(r->client_->platform_name().c_str());
  h.str(r->client_->platform_version().c_str());
  r->salt_ = h.key();
  for (int d = 0; d < r->client_->num_devices(); ++d) {
    r->device_locks_.push_back(std::make_unique<std::recursive_mutex>());
    r->fused_.push_back(std::make_unique<FusedGraph>(d));
  }
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  r->compile_pool_ = std::make_unique<ThreadPool>(std::max(1, cores - 1));
  Runtime* raw = r.get();
  r->executor_ = std::make_unique<Executor>([raw](std::shared_ptr<const DeviceError> e) { raw->record_error(e); });
  instance() = std::move(r);
}

bool Runtime::initialized() { return instance() != nullptr; }

Runtime& Runtime::get() {
  if (!instance()) throw std::runtime_error("torchtpu runtime is not initialized (import torchtpu first)");
  return *instance();
}

void Runtime::shutdown() {
  std::lock_guard<std::mutex> lock(init_mu);
  if (!instance()) return;
  Runtime& rt = *instance();
  try {
    rt.flush_fused();
    rt.executor_->wait_device();
  } catch (...) {
  }
  rt.executor_->stop();
}

Runtime::~Runtime() {
  if (executor_) executor_->stop();
  compile_pool_.reset();
}

void Runtime::set_mode(EagerMode m) {
  // Under every device lock (in index order), so no op of another thread
  // lands in a fused graph after its flush.
  std::vector<std::unique_lock<std::recursive_mutex>> locks;
  for (auto& mu : device_locks_) locks.emplace_back(*mu);
  for (auto& f : fused_) f->flush(FusedGraph::Reason::kSync);
  mode_ = m;
}

void Runtime::record_error(std::shared_ptr<const DeviceError> e) {
  std::lock_guard<std::mutex> lock(error_mu_);
  if (!first_error_) first_error_ = std::move(e);
}

void Runtime::raise_pending_error() {
  std::shared_ptr<const DeviceError> e;
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    e.swap(first_error_);
  }
  if (e) throw e->described();
}

pjrt::BufferPtr Runtime::wait_value(const SlotPtr& slot) {
  try {
    return slot->get();
  } catch (const DeviceError&) {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (first_error_ == slot->error()) first_error_.reset();  // raised here, once
    throw;
  }
}

void Runtime::submit(std::unique_ptr<Task> t) {
  try {
    t->key = ir::graph_key(*t->graph, salt_);
    t->ready_exe = cache_.find(t->key);
    if (!t->ready_exe) {
      auto promise = std::make_shared<std::promise<pjrt::ExecutablePtr>>();
      t->exe = promise->get_future().share();
      std::shared_ptr<const ir::Graph> graph = t->graph;
      compile_pool_->submit([this, graph, promise] {
        try {
          bool hit = false;
          promise->set_value(executable_for(*graph, &hit));
        } catch (...) {
          promise->set_exception(std::current_exception());
        }
      });
    }
  } catch (const std::exception& e) {
    // Its outputs are installed already: they fail rather than wait forever.
    auto failure = std::make_shared<DeviceError>(std::string("could not queue the program: ") + e.what(), 0, t->sites);
    for (const SlotPtr& o : t->outputs) o->fail(failure);
    throw DeviceError(*failure);
  }
  executor_->submit(std::move(t), /*may_run_here=*/mode_ == EagerMode::kDebug);
  if (mode_ == EagerMode::kDebug) {
    executor_->wait_device();
    raise_pending_error();
  }
}

void Runtime::flush_fused() {
  for (size_t d = 0; d < fused_.size(); ++d) {
    std::lock_guard<std::recursive_mutex> lock(*device_locks_[d]);
    fused_[d]->flush(FusedGraph::Reason::kSync);
  }
}

void Runtime::host_read(StorageValue* s, void* dst, int64_t nbytes) {
  SlotPtr slot;
  {
    std::lock_guard<std::recursive_mutex> lock(device_lock(s->device()));
    if (s->pending_gen != 0) fused_[s->device()]->flush(FusedGraph::Reason::kSync);
    slot = s->slot();
  }
  if (!slot) {
    std::memset(dst, 0, nbytes);
    raise_pending_error();
    return;
  }
  pjrt::BufferPtr buf = wait_value(slot);
  raise_pending_error();
  metrics().d2h_bytes += nbytes;
  buf->to_host(dst, nbytes);
}

void Runtime::synchronize() {
  flush_fused();
  executor_->wait_device();
  raise_pending_error();
}

namespace {
// `s` converted to the integer type T as C++ converts (an integer wraps).
template <typename T>
T to_int(const HostScalar& s) {
  return s.integral ? static_cast<T>(s.i) : static_cast<T>(s.d);
}
template <typename T>
T to_float(const HostScalar& s) {
  return s.integral ? static_cast<T>(s.i) : static_cast<T>(s.d);
}
}  // namespace

pjrt::BufferPtr Runtime::scalar_buffer(ir::DType dtype, HostScalar s, int device) {
  uint64_t bits;
  if (s.integral) {
    std::memcpy(&bits, &s.i, 8);
  } else {
    std::memcpy(&bits, &s.d, 8);
  }
  const ScalarKey key{bits, s.integral, dtype, device};
  {
    std::lock_guard<std::mutex> lock(scalar_mu_);
    auto it = scalars_.find(key);
    if (it != scalars_.end()) return it->second;
  }
  alignas(8) unsigned char buf[8] = {0};
  switch (dtype) {
    case ir::DType::kBool: buf[0] = s.integral ? s.i != 0 : s.d != 0; break;
    case ir::DType::kU8: buf[0] = to_int<uint8_t>(s); break;
    case ir::DType::kS8: { int8_t v = to_int<int8_t>(s); std::memcpy(buf, &v, 1); break; }
    case ir::DType::kS16: { int16_t v = to_int<int16_t>(s); std::memcpy(buf, &v, 2); break; }
    case ir::DType::kS32: { int32_t v = to_int<int32_t>(s); std::memcpy(buf, &v, 4); break; }
    case ir::DType::kS64: { int64_t v = to_int<int64_t>(s); std::memcpy(buf, &v, 8); break; }
    case ir::DType::kU32: { uint32_t v = to_int<uint32_t>(s); std::memcpy(buf, &v, 4); break; }
    case ir::DType::kU64: { uint64_t v = s.integral ? static_cast<uint64_t>(s.i) : static_cast<uint64_t>(s.d); std::memcpy(buf, &v, 8); break; }
    case ir::DType::kF32: { float v = to_float<float>(s); std::memcpy(buf, &v, 4); break; }
    case ir::DType::kF64: { double v = to_float<double>(s); std::memcpy(buf, &v, 8); break; }
    case ir::DType::kF16: case ir::DType::kBF16: {
      // Converted on the device from f32 to keep rounding XLA's.
      throw std::logic_error("scalar_buffer: 16-bit scalars are passed as f32");
    }
  }
  pjrt::BufferPtr b = upload(buf, dtype, {}, device);
  std::lock_guard<std::mutex> lock(scalar_mu_);
  if (scalars_.size() > 4096) scalars_.clear();
  scalars_[key] = b;
  return b;
}

pjrt::BufferPtr Runtime::upload(const void* data, ir::DType dtype, const ir::Dims& dims, int device) {
  int64_t n = ir::byte_size(dtype);
  for (int64_t d : dims) n *= d;
  metrics().h2d_bytes += n;
  return client_->buffer_from_host(data, to_pjrt(dtype), dims, device);
}

}  // namespace torchtpu::eager
