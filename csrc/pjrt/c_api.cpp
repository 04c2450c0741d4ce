#include "pjrt/c_api.h"

#include <sstream>

namespace torchtpu::pjrt {

void ensure(bool has, const char* fn) {
  if (!has) throw Error(PJRT_Error_Code_UNIMPLEMENTED, std::string(fn) + ": not provided by the plugin");
}

void destroy_error(const PJRT_Api* api, PJRT_Error* err) {
  if (err == nullptr) return;
  PJRT_ARGS(Error_Destroy, d);
  d.error = err;
  api->PJRT_Error_Destroy(&d);
}

std::string error_message(const PJRT_Api* api, PJRT_Error* err) {
  PJRT_ARGS(Error_Message, m);
  m.error = err;
  api->PJRT_Error_Message(&m);
  return std::string(m.message, m.message_size);
}

int error_code(const PJRT_Api* api, PJRT_Error* err) {
  PJRT_ARGS(Error_GetCode, c);
  c.error = err;
  PJRT_Error* e = api->PJRT_Error_GetCode(&c);
  if (e != nullptr) {
    destroy_error(api, e);
    return PJRT_Error_Code_UNKNOWN;
  }
  return c.code;
}

void destroy_buffer(const PJRT_Api* api, PJRT_Buffer* buf) {
  if (buf == nullptr) return;
  PJRT_ARGS(Buffer_Destroy, d);
  d.buffer = buf;
  destroy_error(api, api->PJRT_Buffer_Destroy(&d));
}

void destroy_event(const PJRT_Api* api, PJRT_Event* ev) {
  if (ev == nullptr) return;
  PJRT_ARGS(Event_Destroy, d);
  d.event = ev;
  destroy_error(api, api->PJRT_Event_Destroy(&d));
}

void destroy_loaded_executable(const PJRT_Api* api, PJRT_LoadedExecutable* exe) {
  if (exe == nullptr) return;
  PJRT_ARGS(LoadedExecutable_Destroy, d);
  d.executable = exe;
  destroy_error(api, api->PJRT_LoadedExecutable_Destroy(&d));
}


std::string named_value_text(const PJRT_NamedValue& v) {
  switch (v.type) {
    case PJRT_NamedValue_kString: return std::string(v.string_value, v.value_size);
    case PJRT_NamedValue_kInt64: return std::to_string(v.int64_value);
    case PJRT_NamedValue_kInt64List: {
      std::string s;
      for (size_t i = 0; i < v.value_size; ++i) {
        if (i) s += ",";
        s += std::to_string(v.int64_array_value[i]);
      }
      return s;
    }
    case PJRT_NamedValue_kFloat: {
      std::ostringstream os;
      os << v.float_value;
      return os.str();
    }
    case PJRT_NamedValue_kBool: return v.bool_value ? "true" : "false";
  }
  return "?";
}

}  // namespace torchtpu::pjrt
