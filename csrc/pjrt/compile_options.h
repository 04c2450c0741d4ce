// Encoder for xla.CompileOptionsProto: a small protobuf writer that writes only
// the fields torchtpu sets. Never writes debug_options (a partial DebugOptions
// replaces all of XLA's defaults); single flags go in env_option_overrides.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace torchtpu::pjrt {

// Minimal protobuf wire-format writer (varint, length-delimited fields).
class ProtoWriter {
 public:
  void varint_field(int field, uint64_t value);
  void bool_field(int field, bool value) { varint_field(field, value ? 1 : 0); }
  void bytes_field(int field, const std::string& bytes);
  void double_field(int field, double value);
  const std::string& bytes() const { return out_; }
 private:
  void tag(int field, int wire_type);
  void varint(uint64_t v);
  std::string out_;
};

struct OptionOverride {
  enum Kind { kString, kBool, kInt, kDouble } kind;
  std::string s;
  bool b = false;
  int64_t i = 0;
  double d = 0;
};

// The options torchtpu compiles with.
struct CompileOptions {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  // One device: portable executable (device chosen at execute time).
  bool portable = true;
  // Device ids for a non-portable replicated executable (size num_replicas).
  std::vector<int64_t> device_ids;
  // ExecutableBuildOptionsProto.optimization_level (xla.ExecutionOptions
  // effort level enum); 0 leaves XLA's default.
  int64_t optimization_level = 0;
  std::vector<std::pair<std::string, OptionOverride>> env_overrides;

  // Serialized xla.CompileOptionsProto.
  std::string encode() const;
};

}  // namespace torchtpu::pjrt
