// Signed cache entries (the shared tier with a key): HMAC-SHA256 against
// RFC 4231's vectors; every flipped byte, an unsigned entry, an entry signed
// with another key and a forged payload with a recomputed checksum are
// refused; a shared tier without a key stays off.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "cache/disk_entry.h"
#include "cache/disk_tier.h"
#include "cache_test_util.h"
#include "ir/graph_key.h"

using namespace torchtpu;
using cache::DiskTier;
using cachetest::TempDir;
using cachetest::read_file;
using cachetest::write_file;

namespace {

const ir::GraphKey kKey{7, 8};
const std::string kFp = "00112233445566778899aabbccddeeff";
const std::string kSecret = "0123456789abcdef-shared-tier-key";

std::string hex(const std::string& s) {
  std::string out;
  char buf[3];
  for (unsigned char c : s) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    out += buf;
  }
  return out;
}

}  // namespace

TEST(SignedEntry, HmacMatchesRfc4231) {
  // Test case 2: key "Jefe", split anywhere between the two parts.
  const std::string data = "what do ya want for nothing?";
  for (size_t cut : {size_t{0}, size_t{5}, data.size()})
    EXPECT_EQ(hex(cache::hmac_sha256("Jefe", data.data(), cut, data.data() + cut, data.size() - cut)),
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 1: 20 bytes of 0x0b, "Hi There".
  EXPECT_EQ(hex(cache::hmac_sha256(std::string(20, '\x0b'), "Hi There", 8, "", 0)),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(SignedEntry, RoundTripAndEveryFlippedByteIsRefused) {
  const std::string payload(300, 'q');
  const std::string bytes = cache::encode_entry(kKey, payload, kSecret);
  EXPECT_EQ(bytes.size(), cache::kSignedEntryHeaderBytes + payload.size());
  std::string out, why;
  ASSERT_TRUE(cache::decode_entry(bytes, kKey, &out, &why, kSecret)) << why;
  EXPECT_EQ(out, payload);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] ^= 0x01;
    EXPECT_FALSE(cache::decode_entry(bad, kKey, &out, &why, kSecret)) << "byte " << i << " flipped";
  }
  for (size_t n = 0; n < bytes.size(); n += 7)
    EXPECT_FALSE(cache::decode_entry(bytes.substr(0, n), kKey, &out, &why, kSecret)) << "truncated to " << n;
}

TEST(SignedEntry, UnsignedOtherKeyAndForgedEntriesAreRefused) {
  const std::string payload = "an executable";
  std::string out, why;
  // Unsigned (what a host without the key, or an attacker, writes).
  EXPECT_FALSE(cache::decode_entry(cache::encode_entry(kKey, payload), kKey, &out, &why, kSecret));
  EXPECT_EQ(why.rfind("unsigned", 0), 0u) << why;
  // Signed with another key.
  EXPECT_FALSE(cache::decode_entry(cache::encode_entry(kKey, payload, kSecret + "x"), kKey, &out, &why, kSecret));
  EXPECT_EQ(why.rfind("signature mismatch", 0), 0u) << why;
  // Forged: a payload swapped in with its checksum recomputed (the checksum
  // is public), the old MAC left in place.
  const std::string good = cache::encode_entry(kKey, payload, kSecret);
  const std::string other = "another program";
  std::string forged = cache::encode_entry(kKey, other, kSecret + "attacker");
  std::memcpy(&forged[cache::kEntryHeaderBytes], good.data() + cache::kEntryHeaderBytes, cache::kMacBytes);
  EXPECT_FALSE(cache::decode_entry(forged, kKey, &out, &why, kSecret));
  EXPECT_EQ(why.rfind("signature mismatch", 0), 0u) << why;
  // A signed entry read without a key (a local tier) is refused too.
  EXPECT_FALSE(cache::decode_entry(good, kKey, &out, &why));
  EXPECT_EQ(why.rfind("signed", 0), 0u) << why;
}

TEST(SignedTier, WithoutAKeyTheSharedTierIsOff) {
  TempDir tmp;
  DiskTier off(tmp.path() + "/shared", kFp, 1 << 20, true, "", "", true);
  EXPECT_FALSE(off.enabled());
  EXPECT_NE(off.reason().find("TORCHTPU_CACHE_KEY_FILE"), std::string::npos) << off.reason();
  struct stat st;
  EXPECT_NE(stat((tmp.path() + "/shared").c_str(), &st), 0);  // never even created
  EXPECT_FALSE(off.store(kKey, "x"));
}

TEST(SignedTier, OnlyEntriesSignedWithTheKeyLoad) {
  TempDir tmp;
  const std::string root = tmp.path() + "/shared";
  DiskTier tier(root, kFp, 1 << 20, true, "", kSecret, true);
  ASSERT_TRUE(tier.enabled()) << tier.reason();
  EXPECT_TRUE(tier.is_signed());
  ASSERT_TRUE(tier.store(kKey, "payload"));
  const std::string path = tier.dir() + "/" + kKey.hex() + ".tte";
  EXPECT_EQ(read_file(path).size(), cache::kSignedEntryHeaderBytes + 7);
  EXPECT_EQ(tier.load(kKey).value_or(""), "payload");

  // Another host with the same key reads it; one with another key refuses it.
  DiskTier same(root, kFp, 1 << 20, true, "", kSecret, true);
  EXPECT_EQ(same.load(kKey).value_or(""), "payload");
  DiskTier other(root, kFp, 1 << 20, true, "", "another key of 16+ bytes", true);
  std::string rejected;
  EXPECT_FALSE(other.load(kKey, &rejected).has_value());
  EXPECT_NE(rejected.find("signature mismatch"), std::string::npos) << rejected;

  // An unsigned entry planted in the directory is refused and removed.
  write_file(path, cache::encode_entry(kKey, "planted"));
  rejected.clear();
  EXPECT_FALSE(tier.load(kKey, &rejected).has_value());
  EXPECT_NE(rejected.find("unsigned"), std::string::npos) << rejected;
  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0);
}
