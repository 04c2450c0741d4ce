// PJRT C API wrapper: plugin loading, Client, Device, Buffer, Executable and
// Event with RAII ownership. No torch and no IR here: this layer speaks only of
// PJRT objects, element types and bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

struct PJRT_Api;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_Buffer;
struct PJRT_Event;
struct PJRT_LoadedExecutable;
struct PJRT_Error;

namespace torchtpu::pjrt {

// Element types, numbered as PJRT_Buffer_Type in pjrt_c_api.h.
enum class ElementType : int {
  kPred = 1, kS8 = 2, kS16 = 3, kS32 = 4, kS64 = 5, kU8 = 6, kU16 = 7,
  kU32 = 8, kU64 = 9, kF16 = 10, kF32 = 11, kF64 = 12, kBF16 = 13, kC64 = 14, kC128 = 15,
  kF8E5M2 = 16, kF8E4M3FN = 17, kF8E5M2FNUZ = 19, kF8E4M3FNUZ = 20,
};
int64_t element_size(ElementType t);

// A failed PJRT call. `code` is the absl status code the plugin reported
// (3 invalid argument, 8 resource exhausted, 12 unimplemented, 13 internal).
class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }
 private:
  int code_;
};

// The loaded plugin: dlopen'd library plus its PJRT_Api table. Lives for the
// process (plugins are never unloaded). Throws Error if the library cannot be
// opened, lacks GetPjrtApi, or its major API version differs from our header.
class Plugin {
 public:
  static const Plugin& load(const std::string& path);
  const PJRT_Api* api() const { return api_; }
  const std::string& path() const { return path_; }
  int major_version() const;
  int minor_version() const;
  // Plugin attributes as "name=value" text lines (for fingerprints and logs).
  std::vector<std::pair<std::string, std::string>> attributes() const;
 private:
  Plugin(const PJRT_Api* api, std::string path) : api_(api), path_(std::move(path)) {}
  const PJRT_Api* api_;
  std::string path_;
};

// Throws Error from a PJRT_Error (destroying it); no-op when err is null.
void check(const PJRT_Api* api, PJRT_Error* err, const char* what);

// A completion event. wait() blocks and throws Error if the work it tracks
// failed. on_ready() runs the callback (with an empty string, or the error
// message) on a plugin thread once ready.
class Event {
 public:
  Event(const PJRT_Api* api, PJRT_Event* ev) : api_(api), ev_(ev) {}
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  bool is_ready() const;
  void wait() const;
  void on_ready(std::function<void(const std::string& error)> cb);
 private:
  const PJRT_Api* api_;
  PJRT_Event* ev_;
};

// A device buffer. Owns its PJRT_Buffer; destroyed when the last shared_ptr
// goes. Dims and type are cached at creation.
class Buffer {
 public:
  Buffer(const PJRT_Api* api, PJRT_Buffer* buf);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  PJRT_Buffer* raw() const { return buf_; }
  ElementType type() const { return type_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t byte_size() const;  // dense size: product(dims) * element_size
  // Copies the whole buffer to dst (byte_size() bytes, dense row-major) and
  // waits for it. Throws Error if the buffer's producing computation failed.
  void to_host(void* dst, int64_t nbytes) const;
  // Blocks until the buffer is ready; throws if its computation failed.
  void await_ready() const;
  // The device address of the buffer's memory (PJRT_Buffer_UnsafePointer),
  // for checking that a donated buffer was reused.
  uintptr_t device_address() const;
 private:
  const PJRT_Api* api_;
  PJRT_Buffer* buf_;
  ElementType type_;
  std::vector<int64_t> dims_;
};
using BufferPtr = std::shared_ptr<Buffer>;

// Result of one execution: one output buffer per result, plus the event that
// fires when the device finished.
struct ExecuteResult {
  std::vector<BufferPtr> outputs;
  std::shared_ptr<Event> done;
};

class Client;

// A compiled, loaded executable for one device (portable) or all devices.
class Executable {
 public:
  Executable(const Client* client, PJRT_LoadedExecutable* exe);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;
  size_t num_outputs() const { return num_outputs_; }
  // Runs on `device` (index into Client::devices()). `donated` lists argument
  // indices whose buffers may be donated; all others are passed as
  // non-donatable. Returns without waiting for the device.
  ExecuteResult execute(const std::vector<Buffer*>& args, int device,
                        const std::vector<int64_t>& donatable = {}) const;
  // Runs a replicated executable once on all its devices: args[r] are
  // replica r's arguments; returns replica r's results at [r].
  std::vector<ExecuteResult> execute_replicated(const std::vector<std::vector<Buffer*>>& args) const;
  // Serialized executable (PJRT_Executable_Serialize); throws Error if the
  // plugin cannot serialize.
  std::string serialize() const;
  // Compiled memory sizes in bytes (argument, output, temp, ...); -1 if unknown.
  int64_t peak_memory_bytes() const;
 private:
  std::vector<ExecuteResult> run(const std::vector<std::vector<Buffer*>>& args, int device,
                                 const std::vector<int64_t>& donatable) const;
  const Client* client_;
  PJRT_LoadedExecutable* exe_;
  size_t num_outputs_ = 0;
};
using ExecutablePtr = std::shared_ptr<Executable>;

// A PJRT client over the plugin's devices.
class Client {
 public:
  // cpu_device_count <= 0 leaves the plugin's own default (the CPU plugin's
  // default is 4, so callers pass an explicit count).
  static std::unique_ptr<Client> create(const Plugin& plugin, int64_t cpu_device_count);
  ~Client();
  const PJRT_Api* api() const { return api_; }
  PJRT_Client* raw() const { return client_; }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  int num_devices() const { return static_cast<int>(devices_.size()); }
  PJRT_Device* device(int i) const { return devices_.at(i); }
  // The device's kind ("cpu", "NVIDIA H100 80GB HBM3", "TPU v5 lite") and
  // its description's attributes as "name" -> text (PJRT_DeviceDescription).
  std::string device_kind(int device) const;
  std::vector<std::pair<std::string, std::string>> device_attributes(int device) const;
  // Bytes of memory the device can hold (PJRT_Device_MemoryStats'
  // bytes_limit), or -1 when the plugin does not say (XLA:CPU).
  int64_t memory_limit(int device) const;
  // What the plugin's allocator says of a device (PJRT_Device_MemoryStats);
  // false when it says nothing (XLA:CPU). Fields it leaves unset are -1.
  struct MemoryStats {
    int64_t in_use = -1, peak_in_use = -1, limit = -1, reserved = -1, peak_reserved = -1;
  };
  bool memory_stats(int device, MemoryStats* out) const;
  // Copies dense row-major host data to the device; the copy is complete (host
  // memory reusable) when this returns.
  BufferPtr buffer_from_host(const void* data, ElementType type,
                             const std::vector<int64_t>& dims, int device) const;
  // Compiles a program in format "mlir" (StableHLO text) with serialized
  // CompileOptionsProto bytes.
  ExecutablePtr compile(const std::string& mlir, const std::string& options) const;
  // Reloads Executable::serialize() output.
  ExecutablePtr deserialize(const std::string& blob, const std::string& options) const;
 private:
  Client(const PJRT_Api* api, PJRT_Client* client);
  const PJRT_Api* api_;
  PJRT_Client* client_;
  std::string platform_name_, platform_version_;
  std::vector<PJRT_Device*> devices_;
};

}  // namespace torchtpu::pjrt
