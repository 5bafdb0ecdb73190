#include "kv/mvcc_keys.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace raftkv {
namespace mvcc {
namespace {

// Keys made of the bytes that matter to the escaping: 0x00, 0x01, 0x02,
// 0xff and an ordinary letter, up to 4 long (all prefixes of one another
// included).
std::vector<std::string> AwkwardKeys() {
  const std::string alphabet("\x00\x01\x02\xff" "a", 5);
  std::vector<std::string> keys = {""};
  for (size_t len = 1; len <= 3; ++len) {
    std::vector<std::string> next;
    for (const std::string& k : keys) {
      if (k.size() != len - 1) continue;
      for (char c : alphabet) next.push_back(k + c);
    }
    keys.insert(keys.end(), next.begin(), next.end());
  }
  return keys;
}

TEST(MvccKeysTest, OrderedKeysRoundTripAndKeepTheKeysOrder) {
  const std::vector<std::string> keys = AwkwardKeys();
  ASSERT_EQ(keys.size(), 1u + 5 + 25 + 125);
  for (const std::string& a : keys) {
    std::string enc;
    AppendOrderedKey(&enc, a);
    const std::string with_tail = enc + "tail";
    EXPECT_EQ(OrderedKeyLength(with_tail), enc.size());
    for (size_t cut = 0; cut < enc.size(); ++cut) EXPECT_EQ(OrderedKeyLength(enc.substr(0, cut)), 0u);
    std::string_view in = with_tail;
    std::string decoded;
    ASSERT_TRUE(ConsumeOrderedKey(&in, &decoded));
    EXPECT_EQ(decoded, a);
    EXPECT_EQ(in, "tail");
    for (const std::string& b : keys) {
      std::string eb;
      AppendOrderedKey(&eb, b);
      // Whatever follows the encodings, they order as the keys do.
      EXPECT_EQ(a < b, enc + "\xff\xff" < eb + std::string("\x00", 1)) << testing::PrintToString(a)
                                                                       << " vs " << testing::PrintToString(b);
      EXPECT_EQ(a < b, KeyBound(a) < KeyBound(b));
    }
  }
}

TEST(MvccKeysTest, MalformedOrderedKeysAreRefusedWithoutConsuming) {
  for (const std::string& bad : {std::string(""), std::string("ab"), std::string("a\x00", 2),
                                std::string("a\x00\x02", 3), std::string("\x00\x00\x01", 3)}) {
    std::string_view in = bad;
    std::string key = "unchanged";
    EXPECT_EQ(OrderedKeyLength(bad), 0u) << testing::PrintToString(bad);
    EXPECT_FALSE(ConsumeOrderedKey(&in, &key)) << testing::PrintToString(bad);
    EXPECT_EQ(in.size(), bad.size());
    EXPECT_EQ(key, "unchanged");
  }
}

// The versions of a key: newest first, then by sub-revision, newest first;
// contiguous, between VersionsBegin and VersionsEnd, and a seek at R lands
// on the newest version at or below R.
TEST(MvccKeysTest, VersionsOfAKeyAreContiguousNewestFirst) {
  const std::vector<std::string> keys = AwkwardKeys();
  std::vector<std::tuple<std::string, int64_t, uint32_t>> versions;
  for (const std::string& k : keys) {
    for (int64_t rev : {int64_t{0}, int64_t{1}, int64_t{255}, int64_t{256},
                        std::numeric_limits<int64_t>::max()}) {
      for (uint32_t sub : {0u, 1u, 7u}) versions.emplace_back(k, rev, sub);
    }
  }
  std::vector<std::string> encoded;
  for (const auto& [k, rev, sub] : versions) {
    encoded.push_back(VersionKey(k, rev, sub));
    std::string key;
    int64_t r = -1;
    uint32_t s = 99;
    ASSERT_TRUE(ParseVersionKey(encoded.back(), &key, &r, &s));
    EXPECT_EQ(std::tie(key, r, s), std::tie(k, rev, sub));
    EXPECT_LE(VersionsBegin(k), encoded.back());
    EXPECT_LT(encoded.back(), VersionsEnd(k));
    EXPECT_LE(KeyBound(k), encoded.back());
    EXPECT_LT(encoded.back(), VersionsLimit());
  }
  std::vector<size_t> order(versions.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return encoded[a] < encoded[b]; });
  for (size_t i = 1; i < order.size(); ++i) {
    const auto& [ka, ra, sa] = versions[order[i - 1]];
    const auto& [kb, rb, sb] = versions[order[i]];
    // Key ascending, then revision descending, then sub descending.
    EXPECT_TRUE(ka < kb || (ka == kb && (ra > rb || (ra == rb && sa > sb))))
        << testing::PrintToString(ka) << "@" << ra << "." << sa << " before "
        << testing::PrintToString(kb) << "@" << rb << "." << sb;
  }
  // A seek to (k, R) lands on the newest version of k at or below R.
  const std::string k("a\x00", 2);
  const std::vector<std::string> sorted = [&] {
    std::vector<std::string> v = encoded;
    std::sort(v.begin(), v.end());
    return v;
  }();
  for (int64_t at : {int64_t{0}, int64_t{254}, int64_t{256}, int64_t{1000}}) {
    auto it = std::lower_bound(sorted.begin(), sorted.end(), VersionSeekKey(k, at));
    ASSERT_NE(it, sorted.end());
    std::string key;
    int64_t rev = 0;
    uint32_t sub = 0;
    ASSERT_TRUE(ParseVersionKey(*it, &key, &rev, &sub));
    EXPECT_EQ(key, k);
    EXPECT_EQ(rev, at >= 256 ? 256 : at >= 1 ? 1 : 0) << "at " << at;
    EXPECT_EQ(sub, 7u);
  }
}

TEST(MvccKeysTest, HistoryLeaseAndSessionKeysOrderAsTheirNumbers) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const int64_t r1 = static_cast<int64_t>(rng() >> 1), r2 = static_cast<int64_t>(rng() >> 1);
    const uint32_t s1 = static_cast<uint32_t>(rng()), s2 = static_cast<uint32_t>(rng());
    EXPECT_EQ(std::tie(r1, s1) < std::tie(r2, s2), HistoryKey(r1, s1) < HistoryKey(r2, s2));
    int64_t rev = 0;
    uint32_t sub = 0;
    ASSERT_TRUE(ParseHistoryKey(HistoryKey(r1, s1), &rev, &sub));
    EXPECT_EQ(std::tie(rev, sub), std::tie(r1, s1));
    EXPECT_EQ(r1 < r2, LeaseKey(r1) < LeaseKey(r2));
    const uint64_t c1 = rng(), c2 = rng(), q1 = rng(), q2 = rng();
    EXPECT_EQ(c1 < c2, SessionKey(c1) < SessionKey(c2));
    EXPECT_EQ(std::tie(c1, q1) < std::tie(c2, q2), ResultKey(c1, q1) < ResultKey(c2, q2));
  }
  int64_t lease = 0;
  std::string key;
  ASSERT_TRUE(ParseLeaseAttachKey(LeaseAttachKey(42, std::string("x\x00y", 3)), &lease, &key));
  EXPECT_EQ(lease, 42);
  EXPECT_EQ(key, std::string("x\x00y", 3));
  // Every kind keeps to its own prefix.
  EXPECT_EQ(LeaseAttachKey(1, "k")[0], kLeaseKeyPrefix);
  EXPECT_EQ(MetaKey("state"), "mstate");
  int64_t rev = 0;
  uint32_t sub = 0;
  EXPECT_FALSE(ParseHistoryKey(LeaseKey(1), &rev, &sub));
  EXPECT_FALSE(ParseHistoryKey(HistoryKey(1, 2) + "x", &rev, &sub));
  EXPECT_FALSE(ParseLeaseAttachKey(LeaseKey(1), &lease, &key));
}

TEST(MvccKeysTest, MalformedVersionKeysAreRefused) {
  const std::string good = VersionKey("key", 5, 1);
  std::string key;
  int64_t rev = 0;
  uint32_t sub = 0;
  ASSERT_TRUE(ParseVersionKey(good, &key, &rev, &sub));
  for (const std::string& bad :
       {std::string(), HistoryKey(5, 1), good.substr(0, good.size() - 1), good + "x",
        std::string(1, kVersionPrefix) + "key", VersionsBegin("key"),
        // A revision above INT64_MAX (its complement below 2^63).
        VersionsBegin("key") + std::string(8, '\x00') + std::string(4, '\xff')}) {
    EXPECT_FALSE(ParseVersionKey(bad, &key, &rev, &sub)) << testing::PrintToString(bad);
  }
}

// History, metadata, session and answer rows are grouped by their first
// byte; versions, leases and their keys are in no group.
TEST(MvccKeysTest, InsertGroupsAreTheRowsWrittenInOrderOrOverAgain) {
  EXPECT_EQ(InsertGroupPrefix(HistoryKey(12, 0)), 1u);
  EXPECT_EQ(InsertGroupPrefix(MetaKey("state")), 1u);
  EXPECT_EQ(InsertGroupPrefix(SessionKey(3)), 1u);
  EXPECT_EQ(InsertGroupPrefix(ResultKey(3, 9)), 1u);
  EXPECT_EQ(InsertGroupPrefix(VersionKey("k", 5, 0)), 0u);
  EXPECT_EQ(InsertGroupPrefix(LeaseKey(4)), 0u);
  EXPECT_EQ(InsertGroupPrefix(LeaseAttachKey(4, "k")), 0u);
  EXPECT_EQ(InsertGroupPrefix(""), 0u);
}

// A lookup prefix is a key's versions: every version and seek key of a key
// has it, keys that are prefixes of each other have different ones, and
// other rows have none.
TEST(MvccKeysTest, TheLookupPrefixNamesOneKeysVersions) {
  for (const std::string& key : {std::string(), std::string("k"), std::string("a\0b", 3),
                                 std::string(1, '\0'), std::string("\0\xff\x01", 3), std::string("ab")}) {
    const size_t want = VersionsBegin(key).size();
    EXPECT_EQ(LookupPrefix(VersionKey(key, 5, 2)), want) << testing::PrintToString(key);
    EXPECT_EQ(LookupPrefix(VersionKey(key, 0, 0)), want);
    EXPECT_EQ(LookupPrefix(VersionSeekKey(key, 1000)), want);
    EXPECT_EQ(VersionKey(key, 5, 2).substr(0, want), VersionsBegin(key));
  }
  EXPECT_NE(VersionKey("a", 1, 0).substr(0, LookupPrefix(VersionKey("a", 1, 0))),
            VersionKey("ab", 1, 0).substr(0, LookupPrefix(VersionKey("ab", 1, 0))));
  EXPECT_EQ(LookupPrefix(HistoryKey(12, 0)), 0u);
  EXPECT_EQ(LookupPrefix(MetaKey("state")), 0u);
  EXPECT_EQ(LookupPrefix(LeaseAttachKey(4, "k")), 0u);
  EXPECT_EQ(LookupPrefix(""), 0u);
  EXPECT_EQ(LookupPrefix(std::string(1, kVersionPrefix) + "key"), 0u);  // no terminator
  EXPECT_EQ(LookupPrefix(std::string(1, kVersionPrefix) + std::string("k\0\x05", 3)), 0u);
}

}  // namespace
}  // namespace mvcc
}  // namespace raftkv