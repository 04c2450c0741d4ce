#include "cache/disk_entry.h"

#include <cstring>

namespace torchtpu::cache {

namespace {

constexpr char kMagic[8] = {'T', 'T', 'P', 'U', 'E', 'X', 'E', '\0'};
constexpr size_t kChecksumOffset = 40;

template <typename T>
void put(std::string& s, size_t off, T v) {
  std::memcpy(&s[off], &v, sizeof v);
}

template <typename T>
T get(const std::string& s, size_t off) {
  T v;
  std::memcpy(&v, s.data() + off, sizeof v);
  return v;
}

ir::GraphKey checksum(const char* header, const char* payload, size_t n) {
  ir::Hasher h;
  h.bytes(header, kChecksumOffset);
  h.bytes(payload, n);
  return h.key();
}

}  // namespace

std::string encode_entry(const ir::GraphKey& key, const std::string& payload) {
  std::string out(kEntryHeaderBytes + payload.size(), '\0');
  std::memcpy(&out[0], kMagic, sizeof kMagic);
  put<uint32_t>(out, 8, kEntryFormatVersion);
  put<uint32_t>(out, 12, static_cast<uint32_t>(kEntryHeaderBytes));
  put<uint64_t>(out, 16, key.hi);
  put<uint64_t>(out, 24, key.lo);
  put<uint64_t>(out, 32, payload.size());
  ir::GraphKey sum = checksum(out.data(), payload.data(), payload.size());
  put<uint64_t>(out, 40, sum.hi);
  put<uint64_t>(out, 48, sum.lo);
  std::memcpy(&out[kEntryHeaderBytes], payload.data(), payload.size());
  return out;
}

bool decode_entry(const std::string& bytes, const ir::GraphKey& key, std::string* payload, std::string* why) {
  if (bytes.size() < kEntryHeaderBytes) {
    *why = "shorter than its header (" + std::to_string(bytes.size()) + " bytes)";
    return false;
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    *why = "bad magic";
    return false;
  }
  if (get<uint32_t>(bytes, 8) != kEntryFormatVersion || get<uint32_t>(bytes, 12) != kEntryHeaderBytes ||
      get<uint64_t>(bytes, 56) != 0) {
    *why = "format version " + std::to_string(get<uint32_t>(bytes, 8)) + ", expected " +
           std::to_string(kEntryFormatVersion);
    return false;
  }
  if (get<uint64_t>(bytes, 16) != key.hi || get<uint64_t>(bytes, 24) != key.lo) {
    *why = "holds a different key";
    return false;
  }
  const uint64_t n = get<uint64_t>(bytes, 32);
  if (n != bytes.size() - kEntryHeaderBytes) {
    *why = "payload is " + std::to_string(bytes.size() - kEntryHeaderBytes) + " bytes, header says " +
           std::to_string(n) + " (truncated?)";
    return false;
  }
  ir::GraphKey sum = checksum(bytes.data(), bytes.data() + kEntryHeaderBytes, n);
  if (get<uint64_t>(bytes, 40) != sum.hi || get<uint64_t>(bytes, 48) != sum.lo) {
    *why = "checksum mismatch";
    return false;
  }
  payload->assign(bytes, kEntryHeaderBytes, n);
  return true;
}

}  // namespace torchtpu::cache
