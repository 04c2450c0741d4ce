#include "cache/disk_entry.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cstring>
#include <memory>
#include <stdexcept>

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

std::string hmac_sha256(const std::string& key, const char* a, size_t na, const char* b, size_t nb) {
  std::unique_ptr<EVP_MAC, decltype(&EVP_MAC_free)> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr), EVP_MAC_free);
  if (!mac) throw std::runtime_error("OpenSSL has no HMAC");
  std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> ctx(EVP_MAC_CTX_new(mac.get()), EVP_MAC_CTX_free);
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_construct_end()};
  std::string out(kMacBytes, '\0');
  size_t n = 0;
  const auto* k = reinterpret_cast<const unsigned char*>(key.data());
  if (!ctx || EVP_MAC_init(ctx.get(), k, key.size(), params) != 1 ||
      EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(a), na) != 1 ||
      EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(b), nb) != 1 ||
      EVP_MAC_final(ctx.get(), reinterpret_cast<unsigned char*>(&out[0]), &n, out.size()) != 1 || n != kMacBytes)
    throw std::runtime_error("HMAC-SHA256 failed");
  return out;
}

std::string encode_entry(const ir::GraphKey& key, const std::string& payload, const std::string& mac_key) {
  const bool sign = !mac_key.empty();
  const size_t header = sign ? kSignedEntryHeaderBytes : kEntryHeaderBytes;
  std::string out(header + payload.size(), '\0');
  std::memcpy(&out[0], kMagic, sizeof kMagic);
  put<uint32_t>(out, 8, sign ? kSignedEntryFormatVersion : kEntryFormatVersion);
  put<uint32_t>(out, 12, static_cast<uint32_t>(header));
  put<uint64_t>(out, 16, key.hi);
  put<uint64_t>(out, 24, key.lo);
  put<uint64_t>(out, 32, payload.size());
  ir::GraphKey sum = checksum(out.data(), payload.data(), payload.size());
  put<uint64_t>(out, 40, sum.hi);
  put<uint64_t>(out, 48, sum.lo);
  if (sign) {
    const std::string m = hmac_sha256(mac_key, out.data(), kEntryHeaderBytes, payload.data(), payload.size());
    std::memcpy(&out[kEntryHeaderBytes], m.data(), kMacBytes);
  }
  std::memcpy(&out[header], payload.data(), payload.size());
  return out;
}

bool decode_entry(const std::string& bytes, const ir::GraphKey& key, std::string* payload, std::string* why,
                  const std::string& mac_key) {
  const bool sign = !mac_key.empty();
  const size_t header = sign ? kSignedEntryHeaderBytes : kEntryHeaderBytes;
  if (bytes.size() >= 16 && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0) {
    const uint32_t version = get<uint32_t>(bytes, 8);
    if (sign && version == kEntryFormatVersion) {
      *why = "unsigned: the shared tier takes only entries signed with the cache key";
      return false;
    }
    if (!sign && version == kSignedEntryFormatVersion) {
      *why = "signed, and this tier has no cache key to verify it";
      return false;
    }
  }
  if (bytes.size() < header) {
    *why = "shorter than its header (" + std::to_string(bytes.size()) + " bytes)";
    return false;
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    *why = "bad magic";
    return false;
  }
  const uint32_t want = sign ? kSignedEntryFormatVersion : kEntryFormatVersion;
  if (get<uint32_t>(bytes, 8) != want || get<uint32_t>(bytes, 12) != header || get<uint64_t>(bytes, 56) != 0) {
    *why = "format version " + std::to_string(get<uint32_t>(bytes, 8)) + ", expected " + std::to_string(want);
    return false;
  }
  if (get<uint64_t>(bytes, 16) != key.hi || get<uint64_t>(bytes, 24) != key.lo) {
    *why = "holds a different key";
    return false;
  }
  const uint64_t n = get<uint64_t>(bytes, 32);
  if (n != bytes.size() - header) {
    *why = "payload is " + std::to_string(bytes.size() - header) + " bytes, header says " +
           std::to_string(n) + " (truncated?)";
    return false;
  }
  ir::GraphKey sum = checksum(bytes.data(), bytes.data() + header, n);
  if (get<uint64_t>(bytes, 40) != sum.hi || get<uint64_t>(bytes, 48) != sum.lo) {
    *why = "checksum mismatch";
    return false;
  }
  if (sign) {
    const std::string m = hmac_sha256(mac_key, bytes.data(), kEntryHeaderBytes, bytes.data() + header, n);
    if (CRYPTO_memcmp(m.data(), bytes.data() + kEntryHeaderBytes, kMacBytes) != 0) {
      *why = "signature mismatch: not written with this cache key";
      return false;
    }
  }
  payload->assign(bytes, header, n);
  return true;
}

}  // namespace torchtpu::cache
