// Byte-for-byte checks of the CompileOptionsProto encoder. Expected bytes are
// written out by hand from the protobuf wire format.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "pjrt/compile_options.h"

namespace torchtpu::pjrt {
namespace {

std::string bytes(std::initializer_list<uint8_t> b) { return std::string(b.begin(), b.end()); }

std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
    out += ' ';
  }
  return out;
}

OptionOverride option(OptionOverride::Kind kind) {
  OptionOverride o{};
  o.kind = kind;
  return o;
}

#define EXPECT_BYTES(actual, expected) EXPECT_EQ(hex(actual), hex(expected))

TEST(ProtoWriter, Varint) {
  ProtoWriter w;
  w.varint_field(1, 150);
  w.varint_field(2, 300);
  w.varint_field(3, 0);
  EXPECT_BYTES(w.bytes(), bytes({0x08, 0x96, 0x01, 0x10, 0xac, 0x02, 0x18, 0x00}));
}

TEST(ProtoWriter, NegativeInt64IsTenBytes) {
  ProtoWriter w;
  w.varint_field(1, static_cast<uint64_t>(int64_t{-1}));
  w.varint_field(2, static_cast<uint64_t>(int64_t{-2}));
  EXPECT_BYTES(w.bytes(), bytes({0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                                 0x10, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
}

TEST(ProtoWriter, TwoByteTag) {
  ProtoWriter w;
  w.varint_field(24, 3);
  w.bool_field(16, true);
  EXPECT_BYTES(w.bytes(), bytes({0xc0, 0x01, 0x03, 0x80, 0x01, 0x01}));
}

TEST(ProtoWriter, BytesAndDouble) {
  ProtoWriter w;
  w.bytes_field(2, "testing");
  w.bytes_field(5, "");
  w.double_field(4, 1.5);
  EXPECT_BYTES(w.bytes(), bytes({0x12, 0x07, 0x74, 0x65, 0x73, 0x74, 0x69, 0x6e, 0x67,
                                 0x2a, 0x00,
                                 0x21, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f}));
}

TEST(CompileOptions, PortableDefault) {
  CompileOptions o;
  EXPECT_BYTES(o.encode(),
               bytes({0x1a, 0x0f,                                // executable_build_options, 15 bytes
                      0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  // device_ordinal = -1
                      0xff, 0xff, 0xff, 0x01,
                      0x20, 0x01,                                // num_replicas = 1
                      0x28, 0x01,                                // num_partitions = 1
                      0x20, 0x01}));                             // compile_portable_executable
}

TEST(CompileOptions, OptimizationLevel) {
  CompileOptions o;
  o.optimization_level = 2;
  EXPECT_BYTES(o.encode(),
               bytes({0x1a, 0x12,
                      0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                      0x20, 0x01,
                      0x28, 0x01,
                      0xc0, 0x01, 0x02,                          // optimization_level = 2
                      0x20, 0x01}));
}

TEST(CompileOptions, TwoReplicaDeviceAssignment) {
  CompileOptions o;
  o.num_replicas = 2;
  o.portable = false;
  o.device_ids = {1, 0};
  EXPECT_BYTES(o.encode(),
               bytes({0x1a, 0x1b,
                      0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                      0x20, 0x02,
                      0x28, 0x01,
                      0x4a, 0x0a,                    // device_assignment, 10 bytes
                      0x08, 0x02,                    //   replica_count = 2
                      0x10, 0x01,                    //   computation_count = 1
                      0x1a, 0x04,                    //   computation_devices[0]
                      0x0a, 0x02, 0x01, 0x00}));     //     replica_device_ids = [1, 0] (packed)
}

TEST(CompileOptions, DefaultDeviceIds) {
  CompileOptions o;
  o.num_replicas = 2;
  o.portable = false;
  EXPECT_BYTES(o.encode(),
               bytes({0x1a, 0x1b,
                      0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                      0x20, 0x02,
                      0x28, 0x01,
                      0x4a, 0x0a,
                      0x08, 0x02, 0x10, 0x01,
                      0x1a, 0x04, 0x0a, 0x02, 0x00, 0x01}));
}

TEST(CompileOptions, ReplicasByPartitions) {
  CompileOptions o;
  o.num_replicas = 2;
  o.num_partitions = 2;
  o.portable = false;
  o.device_ids = {0, 1, 2, 3};  // [replica][partition]
  EXPECT_BYTES(o.encode(),
               bytes({0x1a, 0x21,
                      0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                      0x20, 0x02,
                      0x28, 0x02,
                      0x4a, 0x10,
                      0x08, 0x02, 0x10, 0x02,
                      0x1a, 0x04, 0x0a, 0x02, 0x00, 0x02,    // partition 0: replicas on 0, 2
                      0x1a, 0x04, 0x0a, 0x02, 0x01, 0x03}));  // partition 1: replicas on 1, 3
}

TEST(CompileOptions, WrongDeviceIdCountThrows) {
  CompileOptions o;
  o.num_replicas = 2;
  o.portable = false;
  o.device_ids = {0};
  EXPECT_THROW(o.encode(), std::invalid_argument);
}

TEST(CompileOptions, EnvOverridesOfEachKind) {
  CompileOptions o;
  OptionOverride s = option(OptionOverride::kString);
  s.s = "ab";
  OptionOverride t = option(OptionOverride::kBool);
  t.b = true;
  OptionOverride f = option(OptionOverride::kBool);
  f.b = false;
  OptionOverride i = option(OptionOverride::kInt);
  i.i = -2;
  OptionOverride d = option(OptionOverride::kDouble);
  d.d = 0.25;
  o.env_overrides = {{"s", s}, {"b", t}, {"f", f}, {"i", i}, {"d", d}};
  EXPECT_BYTES(o.encode(),
               bytes({0x1a, 0x0f,
                      0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                      0x20, 0x01,
                      0x28, 0x01,
                      0x20, 0x01,
                      // {"s": string_field "ab"}
                      0x3a, 0x09, 0x0a, 0x01, 0x73, 0x12, 0x04, 0x0a, 0x02, 0x61, 0x62,
                      // {"b": bool_field true}
                      0x3a, 0x07, 0x0a, 0x01, 0x62, 0x12, 0x02, 0x10, 0x01,
                      // {"f": bool_field false}, written so the oneof is set
                      0x3a, 0x07, 0x0a, 0x01, 0x66, 0x12, 0x02, 0x10, 0x00,
                      // {"i": int_field -2}
                      0x3a, 0x10, 0x0a, 0x01, 0x69, 0x12, 0x0b,
                      0x18, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                      // {"d": double_field 0.25}
                      0x3a, 0x0e, 0x0a, 0x01, 0x64, 0x12, 0x09,
                      0x21, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd0, 0x3f}));
}

}  // namespace
}  // namespace torchtpu::pjrt
