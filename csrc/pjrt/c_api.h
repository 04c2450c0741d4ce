// Helpers over the PJRT C API shared by the pjrt layer's sources (not
// part of its interface): argument structs, feature checks, destruction of
// C API objects and text of named values.
#pragma once

#include <cstddef>
#include <string>

#include "pjrt/pjrt.h"
#include "pjrt_c_api.h"

// Declares `var` as a zeroed PJRT_<Name>_Args with its struct_size set.
#define PJRT_ARGS(Name, var) \
  PJRT_##Name##_Args var{};  \
  var.struct_size = PJRT_##Name##_Args_STRUCT_SIZE

// Whether the plugin's PJRT_Api table is long enough to hold `fn` and sets it.
#define PJRT_HAS(api, fn) \
  (offsetof(PJRT_Api, fn) < (api)->struct_size && (api)->fn != nullptr)

namespace torchtpu::pjrt {

// Throws UNIMPLEMENTED naming `fn` unless `has`.
void ensure(bool has, const char* fn);
// Each destroys its object (null: nothing); an error destroying it is dropped.
void destroy_error(const PJRT_Api* api, PJRT_Error* err);
void destroy_buffer(const PJRT_Api* api, PJRT_Buffer* buf);
void destroy_event(const PJRT_Api* api, PJRT_Event* ev);
void destroy_loaded_executable(const PJRT_Api* api, PJRT_LoadedExecutable* exe);
// An error's message and code (UNKNOWN when the code cannot be read).
std::string error_message(const PJRT_Api* api, PJRT_Error* err);
int error_code(const PJRT_Api* api, PJRT_Error* err);
// A named value (a device attribute) as text.
std::string named_value_text(const PJRT_NamedValue& v);

}  // namespace torchtpu::pjrt
