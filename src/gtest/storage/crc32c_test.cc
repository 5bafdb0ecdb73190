#include "storage/crc32c.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>

namespace raftkv {
namespace {

// Bit-at-a-time reference implementation.
uint32_t ReferenceCrc32c(const std::string& data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : data) {
    crc ^= c;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(crc32c::Value("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c::Value("", 0), 0u);

  // RFC 3720, appendix B.4.
  std::string zeros(32, '\0');
  EXPECT_EQ(crc32c::Value(zeros.data(), zeros.size()), 0x8A9136AAu);
  std::string ones(32, '\xFF');
  EXPECT_EQ(crc32c::Value(ones.data(), ones.size()), 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(crc32c::Value(ascending.data(), ascending.size()), 0x46DD794Eu);
  EXPECT_EQ(crc32c::Value(descending.data(), descending.size()), 0x113FDB5Cu);
}

TEST(Crc32cTest, MatchesReferenceAtEveryLengthAndAlignment) {
  std::mt19937 rng(42);
  std::string data(300, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t start = 0; start < 9; ++start) {
    for (size_t len = 0; start + len <= data.size(); len += 7) {
      std::string slice = data.substr(start, len);
      ASSERT_EQ(crc32c::Value(data.data() + start, len), ReferenceCrc32c(slice))
          << "start " << start << " len " << len;
    }
  }
}

// Extend uses the processor's instruction where there is one; both paths
// must agree with the reference at every length and alignment.
TEST(Crc32cTest, HardwareAndPortableAgree) {
  std::mt19937 rng(7);
  std::string data(4096 + 16, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t start = 0; start < 16; ++start) {
    for (size_t len = 0; start + len <= data.size(); len = len < 64 ? len + 1 : len * 2 + 3) {
      const uint32_t portable = crc32c::ExtendPortable(0x1234567u, data.data() + start, len);
      ASSERT_EQ(crc32c::Extend(0x1234567u, data.data() + start, len), portable)
          << "start " << start << " len " << len;
    }
  }
  ASSERT_EQ(crc32c::ExtendPortable(0, "123456789", 9), 0xE3069283u);
  std::printf("crc32c: processor instruction %s\n", crc32c::HardwareAvailable() ? "used" : "not available");
}

TEST(Crc32cTest, ExtendEqualsWholeValue) {
  const std::string data = "The quick brown fox jumps over the lazy dog, twice over.";
  const uint32_t whole = crc32c::Value(data.data(), data.size());
  for (size_t split = 0; split <= data.size(); ++split) {
    uint32_t crc = crc32c::Value(data.data(), split);
    crc = crc32c::Extend(crc, data.data() + split, data.size() - split);
    ASSERT_EQ(crc, whole) << "split " << split;
  }
}

}  // namespace
}  // namespace raftkv
