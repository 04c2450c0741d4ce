// The on-disk format of one cache entry: a fixed 64-byte header, then the
// payload (a serialized executable).
//
//   offset  size  field
//   0       8     magic "TTPUEXE\0"
//   8       4     format version (kEntryFormatVersion)
//   12      4     header size (64)
//   16      16    graph key (hi, lo)
//   32      8     payload length in bytes
//   40      16    checksum (ir::Hasher over header bytes 0..40, then payload)
//   56      8     zero
//
// Integers are little-endian (native on every platform torchtpu builds for;
// the directory fingerprint names the machine). decode_entry never trusts the
// file: any mismatch (short file, wrong magic, version, key, length or
// checksum) is a rejection with a reason, not an exception.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph_key.h"

namespace torchtpu::cache {

constexpr uint32_t kEntryFormatVersion = 1;
constexpr size_t kEntryHeaderBytes = 64;

// Header + payload, ready to write.
std::string encode_entry(const ir::GraphKey& key, const std::string& payload);

// Extracts the payload of an entry stored for `key`. Returns false (with
// `why` set) when the bytes are not a whole, intact entry for that key.
bool decode_entry(const std::string& bytes, const ir::GraphKey& key, std::string* payload, std::string* why);

}  // namespace torchtpu::cache
