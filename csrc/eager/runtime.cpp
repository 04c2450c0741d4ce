#include "eager/runtime.h"

#include <cstring>
#include <stdexcept>

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
  throw std::invalid_argument("unknown eager mode '" + name + "': expected 'debug' or 'strict'");
}

const char* mode_name(EagerMode m) {
  switch (m) {
    case EagerMode::kDebug: return "debug";
    case EagerMode::kStrict: return "strict";
  }
  return "?";
}

pjrt::BufferPtr StorageValue::buffer() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buffer_;
}

void StorageValue::set(pjrt::BufferPtr buffer, ir::DType dtype) {
  std::lock_guard<std::mutex> lock(mu_);
  buffer_ = std::move(buffer);
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
  instance() = std::move(r);
}

bool Runtime::initialized() { return instance() != nullptr; }

Runtime& Runtime::get() {
  if (!instance()) throw std::runtime_error("torchtpu runtime is not initialized (import torchtpu first)");
  return *instance();
}

pjrt::BufferPtr Runtime::scalar_buffer(ir::DType dtype, double value, int device) {
  uint64_t bits;
  std::memcpy(&bits, &value, 8);
  const ScalarKey key{bits, dtype, device};
  {
    std::lock_guard<std::mutex> lock(scalar_mu_);
    auto it = scalars_.find(key);
    if (it != scalars_.end()) return it->second;
  }
  alignas(8) unsigned char buf[8] = {0};
  switch (dtype) {
    case ir::DType::kBool: buf[0] = value != 0; break;
    case ir::DType::kU8: buf[0] = static_cast<uint8_t>(value); break;
    case ir::DType::kS8: { int8_t v = static_cast<int8_t>(value); std::memcpy(buf, &v, 1); break; }
    case ir::DType::kS16: { int16_t v = static_cast<int16_t>(value); std::memcpy(buf, &v, 2); break; }
    case ir::DType::kS32: { int32_t v = static_cast<int32_t>(value); std::memcpy(buf, &v, 4); break; }
    case ir::DType::kS64: { int64_t v = static_cast<int64_t>(value); std::memcpy(buf, &v, 8); break; }
    case ir::DType::kU32: { uint32_t v = static_cast<uint32_t>(value); std::memcpy(buf, &v, 4); break; }
    case ir::DType::kU64: { uint64_t v = static_cast<uint64_t>(value); std::memcpy(buf, &v, 8); break; }
    case ir::DType::kF32: { float v = static_cast<float>(value); std::memcpy(buf, &v, 4); break; }
    case ir::DType::kF64: std::memcpy(buf, &value, 8); break;
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

void Runtime::download(const pjrt::Buffer& buf, void* dst, int64_t nbytes) {
  metrics().d2h_bytes += nbytes;
  buf.to_host(dst, nbytes);
}

void Runtime::track(std::shared_ptr<pjrt::Event> done) {
  std::lock_guard<std::mutex> lock(events_mu_);
  if (in_flight_.size() >= 256) {
    std::vector<std::shared_ptr<pjrt::Event>> keep;
    for (auto& e : in_flight_)
      if (!e->is_ready()) keep.push_back(std::move(e));
    in_flight_.swap(keep);
  }
  in_flight_.push_back(std::move(done));
}

void Runtime::synchronize() {
  std::vector<std::shared_ptr<pjrt::Event>> events;
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    events.swap(in_flight_);
  }
  for (auto& e : events) e->wait();
}

}  // namespace torchtpu::eager
