#include "pjrt/pjrt.h"

#include <dlfcn.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

#include "pjrt/c_api.h"

namespace torchtpu::pjrt {
namespace {

// The PJRT_Executable behind a loaded executable, destroyed with this object.
class ExecutableView {
 public:
  ExecutableView(const PJRT_Api* api, PJRT_LoadedExecutable* loaded) : api_(api) {
    PJRT_ARGS(LoadedExecutable_GetExecutable, a);
    a.loaded_executable = loaded;
    check(api, api->PJRT_LoadedExecutable_GetExecutable(&a), "PJRT_LoadedExecutable_GetExecutable");
    exe_ = a.executable;
  }
  ~ExecutableView() {
    PJRT_ARGS(Executable_Destroy, d);
    d.executable = exe_;
    destroy_error(api_, api_->PJRT_Executable_Destroy(&d));
  }
  ExecutableView(const ExecutableView&) = delete;
  ExecutableView& operator=(const ExecutableView&) = delete;
  PJRT_Executable* get() const { return exe_; }
 private:
  const PJRT_Api* api_;
  PJRT_Executable* exe_ = nullptr;
};

}  // namespace

int64_t element_size(ElementType t) {
  switch (t) {
    case ElementType::kPred:
    case ElementType::kS8:
    case ElementType::kU8:
    case ElementType::kF8E5M2:
    case ElementType::kF8E4M3FN:
    case ElementType::kF8E5M2FNUZ:
    case ElementType::kF8E4M3FNUZ: return 1;
    case ElementType::kS16:
    case ElementType::kU16:
    case ElementType::kF16:
    case ElementType::kBF16: return 2;
    case ElementType::kS32:
    case ElementType::kU32:
    case ElementType::kF32: return 4;
    case ElementType::kS64:
    case ElementType::kU64:
    case ElementType::kF64:
    case ElementType::kC64: return 8;
    case ElementType::kC128: return 16;
  }
  throw Error(PJRT_Error_Code_INVALID_ARGUMENT,
              "element_size: unsupported element type " + std::to_string(static_cast<int>(t)));
}

void check(const PJRT_Api* api, PJRT_Error* err, const char* what) {
  if (err == nullptr) return;
  std::string message = error_message(api, err);
  int code = error_code(api, err);
  destroy_error(api, err);
  throw Error(code, std::string(what) + ": " + message);
}

// ---------------------------------------------------------------- Plugin

const Plugin& Plugin::load(const std::string& path) {
  static std::mutex mu;
  static auto* loaded = new std::map<std::string, const Plugin*>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded->find(path);
  if (it != loaded->end()) return *it->second;

  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw Error(PJRT_Error_Code_NOT_FOUND,
                "cannot load PJRT plugin '" + path + "': " + (why ? why : "dlopen failed"));
  }
  using GetPjrtApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetPjrtApiFn>(dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) {
    dlclose(handle);
    throw Error(PJRT_Error_Code_NOT_FOUND, "PJRT plugin '" + path + "' does not export GetPjrtApi");
  }
  const PJRT_Api* api = get_api();
  if (api == nullptr) {
    dlclose(handle);
    throw Error(PJRT_Error_Code_INTERNAL, "PJRT plugin '" + path + "': GetPjrtApi returned null");
  }
  const int major = api->pjrt_api_version.major_version;
  const int minor = api->pjrt_api_version.minor_version;
  if (major != PJRT_API_MAJOR) {
    dlclose(handle);
    throw Error(PJRT_Error_Code_FAILED_PRECONDITION,
                "PJRT plugin '" + path + "' implements PJRT C API " + std::to_string(major) + "." +
                    std::to_string(minor) + " but torchtpu was built against " +
                    std::to_string(PJRT_API_MAJOR) + "." + std::to_string(PJRT_API_MINOR) +
                    " (major versions must match)");
  }
  if (PJRT_HAS(api, PJRT_Plugin_Initialize)) {
    PJRT_ARGS(Plugin_Initialize, init);
    check(api, api->PJRT_Plugin_Initialize(&init), "PJRT_Plugin_Initialize");
  }
  const Plugin* plugin = new Plugin(api, path);
  loaded->emplace(path, plugin);
  return *plugin;
}

int Plugin::major_version() const { return api_->pjrt_api_version.major_version; }
int Plugin::minor_version() const { return api_->pjrt_api_version.minor_version; }

std::vector<std::pair<std::string, std::string>> Plugin::attributes() const {
  std::vector<std::pair<std::string, std::string>> out;
  if (!PJRT_HAS(api_, PJRT_Plugin_Attributes)) return out;
  PJRT_ARGS(Plugin_Attributes, a);
  check(api_, api_->PJRT_Plugin_Attributes(&a), "PJRT_Plugin_Attributes");
  for (size_t i = 0; i < a.num_attributes; ++i) {
    const PJRT_NamedValue& v = a.attributes[i];
    out.emplace_back(std::string(v.name, v.name_size), named_value_text(v));
  }
  return out;
}

// ----------------------------------------------------------------- Event

Event::~Event() { destroy_event(api_, ev_); }

bool Event::is_ready() const {
  if (ev_ == nullptr) return true;
  PJRT_ARGS(Event_IsReady, a);
  a.event = ev_;
  check(api_, api_->PJRT_Event_IsReady(&a), "PJRT_Event_IsReady");
  return a.is_ready;
}

void Event::wait() const {
  if (ev_ == nullptr) return;
  PJRT_ARGS(Event_Await, a);
  a.event = ev_;
  check(api_, api_->PJRT_Event_Await(&a), "PJRT_Event_Await");
}

namespace {
struct OnReadyState {
  const PJRT_Api* api;
  std::function<void(const std::string&)> cb;
};

void on_ready_trampoline(PJRT_Error* err, void* user_arg) {
  std::unique_ptr<OnReadyState> state(static_cast<OnReadyState*>(user_arg));
  std::string message;
  if (err != nullptr) {
    message = error_message(state->api, err);
    destroy_error(state->api, err);
  }
  try {
    state->cb(message);
  } catch (...) {
  }
}
}  // namespace

void Event::on_ready(std::function<void(const std::string& error)> cb) {
  if (ev_ == nullptr) {
    cb(std::string());
    return;
  }
  auto* state = new OnReadyState{api_, std::move(cb)};
  PJRT_ARGS(Event_OnReady, a);
  a.event = ev_;
  a.callback = &on_ready_trampoline;
  a.user_arg = state;
  PJRT_Error* err = api_->PJRT_Event_OnReady(&a);
  if (err != nullptr) {
    delete state;
    check(api_, err, "PJRT_Event_OnReady");
  }
}

// ---------------------------------------------------------------- Buffer

Buffer::Buffer(const PJRT_Api* api, PJRT_Buffer* buf) : api_(api), buf_(buf) {
  try {
    PJRT_ARGS(Buffer_ElementType, t);
    t.buffer = buf;
    check(api, api->PJRT_Buffer_ElementType(&t), "PJRT_Buffer_ElementType");
    type_ = static_cast<ElementType>(t.type);
    PJRT_ARGS(Buffer_Dimensions, d);
    d.buffer = buf;
    check(api, api->PJRT_Buffer_Dimensions(&d), "PJRT_Buffer_Dimensions");
    dims_.assign(d.dims, d.dims + d.num_dims);
  } catch (...) {
    destroy_buffer(api, buf);
    throw;
  }
}

Buffer::~Buffer() { destroy_buffer(api_, buf_); }

int64_t Buffer::byte_size() const {
  int64_t n = element_size(type_);
  for (int64_t d : dims_) n *= d;
  return n;
}

void Buffer::to_host(void* dst, int64_t nbytes) const {
  const int64_t need = byte_size();
  if (nbytes < need) {
    throw Error(PJRT_Error_Code_INVALID_ARGUMENT,
                "Buffer::to_host: destination holds " + std::to_string(nbytes) +
                    " bytes, buffer needs " + std::to_string(need));
  }
  // An explicit major-to-minor host layout keeps dst row-major whatever the
  // device layout is.
  std::vector<int64_t> minor_to_major(dims_.size());
  for (size_t i = 0; i < dims_.size(); ++i) minor_to_major[i] = static_cast<int64_t>(dims_.size() - 1 - i);
  PJRT_Buffer_MemoryLayout layout{};
  layout.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
  layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  layout.tiled.minor_to_major = minor_to_major.data();
  layout.tiled.minor_to_major_size = minor_to_major.size();

  PJRT_ARGS(Buffer_ToHostBuffer, a);
  a.src = buf_;
  a.host_layout = &layout;
  a.dst = dst;
  a.dst_size = static_cast<size_t>(need);
  check(api_, api_->PJRT_Buffer_ToHostBuffer(&a), "PJRT_Buffer_ToHostBuffer");
  Event(api_, a.event).wait();
}

uintptr_t Buffer::device_address() const {
  PJRT_ARGS(Buffer_UnsafePointer, a);
  a.buffer = buf_;
  check(api_, api_->PJRT_Buffer_UnsafePointer(&a), "PJRT_Buffer_UnsafePointer");
  return a.buffer_pointer;
}

void Buffer::await_ready() const {
  PJRT_ARGS(Buffer_ReadyEvent, a);
  a.buffer = buf_;
  check(api_, api_->PJRT_Buffer_ReadyEvent(&a), "PJRT_Buffer_ReadyEvent");
  Event(api_, a.event).wait();
}

// ------------------------------------------------------------ Executable

Executable::Executable(const Client* client, PJRT_LoadedExecutable* exe)
    : client_(client), exe_(exe) {
  const PJRT_Api* api = client->api();
  try {
    ExecutableView view(api, exe);
    PJRT_ARGS(Executable_NumOutputs, n);
    n.executable = view.get();
    check(api, api->PJRT_Executable_NumOutputs(&n), "PJRT_Executable_NumOutputs");
    num_outputs_ = n.num_outputs;
  } catch (...) {
    destroy_loaded_executable(api, exe);
    throw;
  }
}

Executable::~Executable() { destroy_loaded_executable(client_->api(), exe_); }

ExecuteResult Executable::execute(const std::vector<Buffer*>& args, int device,
                                  const std::vector<int64_t>& donatable) const {
  return std::move(run({args}, device, donatable).front());
}

std::vector<ExecuteResult> Executable::execute_replicated(const std::vector<std::vector<Buffer*>>& args) const {
  return run(args, -1, {});
}

std::vector<ExecuteResult> Executable::run(const std::vector<std::vector<Buffer*>>& args, int device,
                                           const std::vector<int64_t>& donatable) const {
  const PJRT_Api* api = client_->api();
  const size_t n = args.size(), num_args = args.front().size();
  std::vector<std::vector<PJRT_Buffer*>> arg_lists(n, std::vector<PJRT_Buffer*>(num_args));
  for (size_t d = 0; d < n; ++d)
    for (size_t i = 0; i < num_args; ++i) arg_lists[d][i] = args[d][i]->raw();
  std::vector<int64_t> non_donatable;
  non_donatable.reserve(num_args);
  for (int64_t i = 0; i < static_cast<int64_t>(num_args); ++i) {
    bool donate = false;
    for (int64_t d : donatable) donate |= (d == i);
    if (!donate) non_donatable.push_back(i);
  }

  PJRT_ExecuteOptions options{};
  options.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  options.non_donatable_input_indices = non_donatable.data();
  options.num_non_donatable_input_indices = non_donatable.size();

  std::vector<std::vector<PJRT_Buffer*>> outputs(n, std::vector<PJRT_Buffer*>(num_outputs_, nullptr));
  std::vector<PJRT_Buffer* const*> argument_lists(n);
  std::vector<PJRT_Buffer**> output_lists(n);
  for (size_t d = 0; d < n; ++d) {
    argument_lists[d] = arg_lists[d].data();
    output_lists[d] = outputs[d].data();
  }
  std::vector<PJRT_Event*> done(n, nullptr);

  PJRT_ARGS(LoadedExecutable_Execute, a);
  a.executable = exe_;
  a.options = &options;
  a.argument_lists = argument_lists.data();
  a.num_devices = n;
  a.num_args = num_args;
  a.output_lists = output_lists.data();
  a.device_complete_events = done.data();
  a.execute_device = device >= 0 ? client_->device(device) : nullptr;  // replicated: its own assignment
  check(api, api->PJRT_LoadedExecutable_Execute(&a), "PJRT_LoadedExecutable_Execute");

  std::vector<ExecuteResult> results(n);
  for (size_t d = 0; d < n; ++d) {
    results[d].done = std::make_shared<Event>(api, done[d]);
    results[d].outputs.reserve(num_outputs_);
    for (size_t i = 0; i < num_outputs_; ++i) {
      try {
        results[d].outputs.push_back(std::make_shared<Buffer>(api, outputs[d][i]));
      } catch (...) {
        for (size_t j = i + 1; j < num_outputs_; ++j) destroy_buffer(api, outputs[d][j]);
        for (size_t e = d + 1; e < n; ++e)
          for (auto* b : outputs[e]) destroy_buffer(api, b);
        throw;
      }
    }
  }
  return results;
}

std::string Executable::serialize() const {
  const PJRT_Api* api = client_->api();
  ensure(PJRT_HAS(api, PJRT_Executable_Serialize), "PJRT_Executable_Serialize");
  ExecutableView view(api, exe_);
  PJRT_ARGS(Executable_Serialize, a);
  a.executable = view.get();
  check(api, api->PJRT_Executable_Serialize(&a), "PJRT_Executable_Serialize");
  std::string blob(a.serialized_bytes, a.serialized_bytes_size);
  if (a.serialized_executable_deleter != nullptr) a.serialized_executable_deleter(a.serialized_executable);
  return blob;
}

int64_t Executable::peak_memory_bytes() const {
  const PJRT_Api* api = client_->api();
  if (!PJRT_HAS(api, PJRT_Executable_GetCompiledMemoryStats)) return -1;
  try {
    ExecutableView view(api, exe_);
    PJRT_ARGS(Executable_GetCompiledMemoryStats, a);
    a.executable = view.get();
    PJRT_Error* err = api->PJRT_Executable_GetCompiledMemoryStats(&a);
    if (err != nullptr) {
      destroy_error(api, err);
      return -1;
    }
    return a.peak_memory_in_bytes;
  } catch (const Error&) {
    return -1;
  }
}

// ---------------------------------------------------------------- Client

std::unique_ptr<Client> Client::create(const Plugin& plugin, int64_t cpu_device_count) {
  const PJRT_Api* api = plugin.api();
  static const char kDeviceCount[] = "cpu_device_count";
  PJRT_NamedValue option{};
  option.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  option.name = kDeviceCount;
  option.name_size = sizeof(kDeviceCount) - 1;
  option.type = PJRT_NamedValue_kInt64;
  option.int64_value = cpu_device_count;
  option.value_size = 1;

  PJRT_ARGS(Client_Create, a);
  if (cpu_device_count > 0) {
    a.create_options = &option;
    a.num_options = 1;
    // The device count is a CPU plugin option; other plugins (XLA's GPU one)
    // reject names they do not know, so they are created without it.
    PJRT_Error* err = api->PJRT_Client_Create(&a);
    if (err == nullptr) return std::unique_ptr<Client>(new Client(api, a.client));
    if (error_message(api, err).find(kDeviceCount) == std::string::npos)
      check(api, err, "PJRT_Client_Create");
    destroy_error(api, err);
    a = PJRT_Client_Create_Args{};
    a.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  }
  check(api, api->PJRT_Client_Create(&a), "PJRT_Client_Create");
  return std::unique_ptr<Client>(new Client(api, a.client));
}

Client::Client(const PJRT_Api* api, PJRT_Client* client) : api_(api), client_(client) {
  try {
    PJRT_ARGS(Client_PlatformName, n);
    n.client = client;
    check(api, api->PJRT_Client_PlatformName(&n), "PJRT_Client_PlatformName");
    platform_name_.assign(n.platform_name, n.platform_name_size);

    PJRT_ARGS(Client_PlatformVersion, v);
    v.client = client;
    check(api, api->PJRT_Client_PlatformVersion(&v), "PJRT_Client_PlatformVersion");
    platform_version_.assign(v.platform_version, v.platform_version_size);

    PJRT_ARGS(Client_AddressableDevices, d);
    d.client = client;
    check(api, api->PJRT_Client_AddressableDevices(&d), "PJRT_Client_AddressableDevices");
    devices_.assign(d.addressable_devices, d.addressable_devices + d.num_addressable_devices);
  } catch (...) {
    PJRT_ARGS(Client_Destroy, x);
    x.client = client;
    destroy_error(api, api->PJRT_Client_Destroy(&x));
    throw;
  }
}

Client::~Client() {
  PJRT_ARGS(Client_Destroy, a);
  a.client = client_;
  destroy_error(api_, api_->PJRT_Client_Destroy(&a));
}

int64_t Client::memory_limit(int device) const {
  MemoryStats m;
  return memory_stats(device, &m) ? m.limit : -1;
}

namespace {
PJRT_DeviceDescription* description_of(const PJRT_Api* api, PJRT_Device* device) {
  PJRT_ARGS(Device_GetDescription, a);
  a.device = device;
  check(api, api->PJRT_Device_GetDescription(&a), "PJRT_Device_GetDescription");
  return a.device_description;
}
}  // namespace

std::string Client::device_kind(int device) const {
  PJRT_ARGS(DeviceDescription_Kind, a);
  a.device_description = description_of(api_, devices_.at(device));
  check(api_, api_->PJRT_DeviceDescription_Kind(&a), "PJRT_DeviceDescription_Kind");
  return std::string(a.device_kind, a.device_kind_size);
}

std::vector<std::pair<std::string, std::string>> Client::device_attributes(int device) const {
  PJRT_ARGS(DeviceDescription_Attributes, a);
  a.device_description = description_of(api_, devices_.at(device));
  check(api_, api_->PJRT_DeviceDescription_Attributes(&a), "PJRT_DeviceDescription_Attributes");
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < a.num_attributes; ++i) {
    const PJRT_NamedValue& v = a.attributes[i];
    out.emplace_back(std::string(v.name, v.name_size), named_value_text(v));
  }
  return out;
}

bool Client::memory_stats(int device, MemoryStats* out) const {
  if (!PJRT_HAS(api_, PJRT_Device_MemoryStats)) return false;
  PJRT_ARGS(Device_MemoryStats, a);
  a.device = devices_.at(device);
  PJRT_Error* err = api_->PJRT_Device_MemoryStats(&a);
  if (err != nullptr) {
    destroy_error(api_, err);
    return false;
  }
  *out = MemoryStats{};
  out->in_use = a.bytes_in_use;
  if (a.peak_bytes_in_use_is_set) out->peak_in_use = a.peak_bytes_in_use;
  if (a.bytes_limit_is_set) out->limit = a.bytes_limit;
  // The allocator's pool (a BFC allocator holds more than is in use), else
  // what it reserved.
  if (a.pool_bytes_is_set) {
    out->reserved = a.pool_bytes;
    if (a.peak_pool_bytes_is_set) out->peak_reserved = a.peak_pool_bytes;
  } else if (a.bytes_reserved_is_set) {
    out->reserved = a.bytes_reserved;
    if (a.peak_bytes_reserved_is_set) out->peak_reserved = a.peak_bytes_reserved;
  }
  return true;
}

BufferPtr Client::buffer_from_host(const void* data, ElementType type,
                                   const std::vector<int64_t>& dims, int device) const {
  PJRT_Device* dev = devices_.at(device);
  PJRT_Memory* memory = nullptr;
  if (PJRT_HAS(api_, PJRT_Device_DefaultMemory)) {
    PJRT_ARGS(Device_DefaultMemory, m);
    m.device = dev;
    PJRT_Error* err = api_->PJRT_Device_DefaultMemory(&m);
    if (err == nullptr) {
      memory = m.memory;
    } else {
      destroy_error(api_, err);
    }
  }

  PJRT_ARGS(Client_BufferFromHostBuffer, a);
  a.client = client_;
  a.data = data;
  a.type = static_cast<PJRT_Buffer_Type>(type);
  a.dims = dims.data();
  a.num_dims = dims.size();
  a.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  a.device = dev;
  a.memory = memory;
  check(api_, api_->PJRT_Client_BufferFromHostBuffer(&a), "PJRT_Client_BufferFromHostBuffer");
  destroy_event(api_, a.done_with_host_buffer);
  return std::make_shared<Buffer>(api_, a.buffer);
}

ExecutablePtr Client::compile(const std::string& mlir, const std::string& options) const {
  static const char kFormat[] = "mlir";
  PJRT_Program program{};
  program.struct_size = PJRT_Program_STRUCT_SIZE;
  program.code = const_cast<char*>(mlir.data());
  program.code_size = mlir.size();
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;

  PJRT_ARGS(Client_Compile, a);
  a.client = client_;
  a.program = &program;
  a.compile_options = options.data();
  a.compile_options_size = options.size();
  check(api_, api_->PJRT_Client_Compile(&a), "PJRT_Client_Compile");
  return std::make_shared<Executable>(this, a.executable);
}

ExecutablePtr Client::deserialize(const std::string& blob, const std::string& options) const {
  ensure(PJRT_HAS(api_, PJRT_Executable_DeserializeAndLoad), "PJRT_Executable_DeserializeAndLoad");
  PJRT_ARGS(Executable_DeserializeAndLoad, a);
  a.client = client_;
  a.serialized_executable = blob.data();
  a.serialized_executable_size = blob.size();
  if (!options.empty()) {
    a.overridden_serialized_compile_options = options.data();
    a.overridden_serialized_compile_options_size = options.size();
  }
  check(api_, api_->PJRT_Executable_DeserializeAndLoad(&a), "PJRT_Executable_DeserializeAndLoad");
  return std::make_shared<Executable>(this, a.loaded_executable);
}

}  // namespace torchtpu::pjrt
