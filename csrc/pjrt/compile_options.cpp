#include "pjrt/compile_options.h"

#include <cstring>
#include <stdexcept>

namespace torchtpu::pjrt {
namespace {

enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };

void append_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Field numbers of xla.CompileOptionsProto, xla.ExecutableBuildOptionsProto,
// xla.DeviceAssignmentProto and xla.OptionOverrideProto.
namespace compile_options_proto {
constexpr int kExecutableBuildOptions = 3;
constexpr int kCompilePortableExecutable = 4;
constexpr int kEnvOptionOverrides = 7;
}  // namespace compile_options_proto

namespace build_options_proto {
constexpr int kDeviceOrdinal = 1;
constexpr int kNumReplicas = 4;
constexpr int kNumPartitions = 5;
constexpr int kDeviceAssignment = 9;
constexpr int kOptimizationLevel = 24;
}  // namespace build_options_proto

namespace device_assignment_proto {
constexpr int kReplicaCount = 1;
constexpr int kComputationCount = 2;
constexpr int kComputationDevices = 3;
constexpr int kReplicaDeviceIds = 1;  // in ComputationDevice
}  // namespace device_assignment_proto

namespace option_override_proto {
constexpr int kString = 1;
constexpr int kBool = 2;
constexpr int kInt = 3;
constexpr int kDouble = 4;
}  // namespace option_override_proto

// DeviceAssignmentProto: one ComputationDevice per partition, each listing the
// device of every replica. `device_ids` is row-major [replica][partition];
// empty means device r * num_partitions + p.
std::string encode_device_assignment(int64_t replicas, int64_t partitions,
                                     const std::vector<int64_t>& device_ids) {
  namespace da = device_assignment_proto;
  if (!device_ids.empty() && static_cast<int64_t>(device_ids.size()) != replicas * partitions) {
    throw std::invalid_argument(
        "CompileOptions: device_ids has " + std::to_string(device_ids.size()) +
        " entries, expected num_replicas * num_partitions = " +
        std::to_string(replicas * partitions));
  }
  ProtoWriter w;
  w.varint_field(da::kReplicaCount, static_cast<uint64_t>(replicas));
  w.varint_field(da::kComputationCount, static_cast<uint64_t>(partitions));
  for (int64_t p = 0; p < partitions; ++p) {
    std::string packed;
    for (int64_t r = 0; r < replicas; ++r) {
      int64_t id = device_ids.empty() ? r * partitions + p : device_ids[r * partitions + p];
      append_varint(packed, static_cast<uint64_t>(id));
    }
    ProtoWriter computation;
    computation.bytes_field(da::kReplicaDeviceIds, packed);
    w.bytes_field(da::kComputationDevices, computation.bytes());
  }
  return w.bytes();
}

std::string encode_override(const OptionOverride& o) {
  namespace oo = option_override_proto;
  ProtoWriter w;
  switch (o.kind) {
    case OptionOverride::kString: w.bytes_field(oo::kString, o.s); break;
    case OptionOverride::kBool: w.bool_field(oo::kBool, o.b); break;
    case OptionOverride::kInt: w.varint_field(oo::kInt, static_cast<uint64_t>(o.i)); break;
    case OptionOverride::kDouble: w.double_field(oo::kDouble, o.d); break;
  }
  return w.bytes();
}

}  // namespace

void ProtoWriter::tag(int field, int wire_type) {
  varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

void ProtoWriter::varint(uint64_t v) { append_varint(out_, v); }

void ProtoWriter::varint_field(int field, uint64_t value) {
  tag(field, kVarint);
  varint(value);
}

void ProtoWriter::bytes_field(int field, const std::string& bytes) {
  tag(field, kLengthDelimited);
  varint(bytes.size());
  out_.append(bytes);
}

void ProtoWriter::double_field(int field, double value) {
  static_assert(sizeof(double) == 8, "IEEE double expected");
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  tag(field, kFixed64);
  for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

std::string CompileOptions::encode() const {
  namespace bo = build_options_proto;
  namespace co = compile_options_proto;

  ProtoWriter build;
  build.varint_field(bo::kDeviceOrdinal, static_cast<uint64_t>(int64_t{-1}));
  build.varint_field(bo::kNumReplicas, static_cast<uint64_t>(num_replicas));
  build.varint_field(bo::kNumPartitions, static_cast<uint64_t>(num_partitions));
  if (!portable) {
    build.bytes_field(bo::kDeviceAssignment,
                      encode_device_assignment(num_replicas, num_partitions, device_ids));
  }
  if (optimization_level != 0) {
    build.varint_field(bo::kOptimizationLevel, static_cast<uint64_t>(optimization_level));
  }

  ProtoWriter w;
  w.bytes_field(co::kExecutableBuildOptions, build.bytes());
  if (portable) w.bool_field(co::kCompilePortableExecutable, true);
  for (const auto& [key, value] : env_overrides) {
    ProtoWriter entry;
    entry.bytes_field(1, key);
    entry.bytes_field(2, encode_override(value));
    w.bytes_field(co::kEnvOptionOverrides, entry.bytes());
  }
  return w.bytes();
}

}  // namespace torchtpu::pjrt
