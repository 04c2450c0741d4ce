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
// A signed entry (the shared tier's, when a cache key is set) has format
// version kSignedEntryFormatVersion and a 96-byte header: the same 64 bytes,
// then HMAC-SHA256 under the key over header bytes 0..64 and the payload.
// Decoding with a key accepts only signed entries whose MAC verifies; decoding
// without one accepts only unsigned entries.
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
constexpr uint32_t kSignedEntryFormatVersion = 2;
constexpr size_t kEntryHeaderBytes = 64;
constexpr size_t kMacBytes = 32;
constexpr size_t kSignedEntryHeaderBytes = kEntryHeaderBytes + kMacBytes;

// Header + payload, ready to write; signed when `mac_key` is not empty.
std::string encode_entry(const ir::GraphKey& key, const std::string& payload, const std::string& mac_key = "");

// Extracts the payload of an entry stored for `key`. Returns false (with
// `why` set) when the bytes are not a whole, intact entry for that key, or,
// with a `mac_key`, not signed with it.
bool decode_entry(const std::string& bytes, const ir::GraphKey& key, std::string* payload, std::string* why,
                  const std::string& mac_key = "");

// HMAC-SHA256 under `key` of a then b (OpenSSL's libcrypto); 32 bytes.
std::string hmac_sha256(const std::string& key, const char* a, size_t na, const char* b, size_t nb);

}  // namespace torchtpu::cache
