// The lease table on its own: grant, duplicate grants, keys attached and
// detached, revocation handing back the keys, the generation, and the
// ordered adds and swap of a restore.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kv/lease_table.h"

namespace raftkv {
namespace {

TEST(LeaseTable, GrantCreatesALeaseWithoutKeys) {
  LeaseTable t;
  EXPECT_FALSE(t.Contains(7));
  ASSERT_TRUE(t.Grant(7, 30, 12));
  EXPECT_TRUE(t.Contains(7));
  EXPECT_EQ(t.size(), 1u);
  int64_t ttl = 0;
  std::vector<std::string> keys{"stale"};
  ASSERT_TRUE(t.Get(7, &ttl, &keys));
  EXPECT_EQ(ttl, 30);
  EXPECT_TRUE(keys.empty());
  EXPECT_EQ(t.GrantedIndex(7), std::optional<uint64_t>(12));
  EXPECT_EQ(t.GrantedIndex(8), std::nullopt);
  EXPECT_FALSE(t.Get(8, &ttl, nullptr));
}

TEST(LeaseTable, DuplicateGrantChangesNothing) {
  LeaseTable t;
  ASSERT_TRUE(t.Grant(7, 30, 12));
  const uint64_t generation = t.generation();
  EXPECT_FALSE(t.Grant(7, 99, 20));
  EXPECT_EQ(t.generation(), generation);
  int64_t ttl = 0;
  ASSERT_TRUE(t.Get(7, &ttl, nullptr));
  EXPECT_EQ(ttl, 30) << "the first grant stays";
  EXPECT_EQ(t.GrantedIndex(7), std::optional<uint64_t>(12));
  EXPECT_EQ(t.size(), 1u);
}

TEST(LeaseTable, AttachAndDetachKeys) {
  LeaseTable t;
  ASSERT_TRUE(t.Grant(7, 30, 1));
  EXPECT_TRUE(t.Attach("b", 7));
  EXPECT_TRUE(t.Attach("a", 7));
  EXPECT_TRUE(t.Attach("a", 7));  // once is enough
  EXPECT_FALSE(t.Attach("c", 8)) << "no lease 8";
  EXPECT_FALSE(t.Attach("c", 0)) << "0 is no lease";
  int64_t ttl = 0;
  std::vector<std::string> keys;
  ASSERT_TRUE(t.Get(7, &ttl, &keys));
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "b"}));

  t.Detach("a", 7);
  t.Detach("b", 8);  // no such lease: nothing
  t.Detach("b", 0);
  t.Detach("z", 7);  // not attached: nothing
  ASSERT_TRUE(t.Get(7, &ttl, &keys));
  EXPECT_EQ(keys, (std::vector<std::string>{"b"}));
}

TEST(LeaseTable, RevokeRemovesTheLeaseAndHandsBackItsKeys) {
  LeaseTable t;
  ASSERT_TRUE(t.Grant(7, 30, 1));
  ASSERT_TRUE(t.Grant(9, 10, 2));
  t.Attach("a", 7);
  t.Attach("b", 7);
  t.Attach("c", 9);
  std::set<std::string> keys;
  ASSERT_TRUE(t.Revoke(7, &keys));
  EXPECT_EQ(keys, (std::set<std::string>{"a", "b"}));
  EXPECT_FALSE(t.Contains(7));
  EXPECT_TRUE(t.Contains(9));
  EXPECT_EQ(t.size(), 1u);

  keys = {"untouched"};
  EXPECT_FALSE(t.Revoke(7, &keys)) << "revoked already";
  EXPECT_EQ(keys, (std::set<std::string>{"untouched"}));

  // A new grant of the same id starts without the old keys.
  ASSERT_TRUE(t.Grant(7, 5, 3));
  ASSERT_TRUE(t.Revoke(7, &keys));
  EXPECT_TRUE(keys.empty());
}

TEST(LeaseTable, GenerationChangesWithTheSetOfLeasesOnly) {
  LeaseTable t;
  EXPECT_EQ(t.generation(), 0u);
  ASSERT_TRUE(t.Grant(7, 30, 1));
  EXPECT_EQ(t.generation(), 1u);
  t.Attach("a", 7);
  t.Detach("a", 7);
  EXPECT_EQ(t.generation(), 1u) << "keys do not change the set of leases";
  std::set<std::string> keys;
  EXPECT_FALSE(t.Revoke(8, &keys));
  EXPECT_EQ(t.generation(), 1u);
  ASSERT_TRUE(t.Revoke(7, &keys));
  EXPECT_EQ(t.generation(), 2u);
}

TEST(LeaseTable, ListAndInfosInIdOrder) {
  LeaseTable t;
  ASSERT_TRUE(t.Grant(9, 10, 4));
  ASSERT_TRUE(t.Grant(3, 30, 5));
  EXPECT_EQ(t.List(), (std::vector<std::pair<int64_t, int64_t>>{{3, 30}, {9, 10}}));
  const std::vector<LeaseInfo> infos = t.Infos();
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[0].id, 3);
  EXPECT_EQ(infos[0].ttl, 30);
  EXPECT_EQ(infos[0].granted_index, 5u);
  EXPECT_EQ(infos[1].id, 9);
  EXPECT_EQ(infos[1].granted_index, 4u);
}

TEST(LeaseTable, RestoreAddsInIdOrderAndSwapBumpsTheGeneration) {
  LeaseTable restored;
  EXPECT_TRUE(restored.AddRestored(3, 30, 0));
  EXPECT_TRUE(restored.AddRestored(5, 50, 8));
  EXPECT_FALSE(restored.AddRestored(5, 1, 1)) << "repeated id";
  EXPECT_FALSE(restored.AddRestored(4, 1, 1)) << "id out of order";
  EXPECT_TRUE(restored.Attach("k", 5));
  EXPECT_EQ(restored.size(), 2u);
  EXPECT_EQ(restored.generation(), 0u);

  LeaseTable live;
  ASSERT_TRUE(live.Grant(1, 10, 1));
  const uint64_t generation = live.generation();
  live.Swap(&restored);
  EXPECT_EQ(live.generation(), generation + 1);
  EXPECT_EQ(live.List(), (std::vector<std::pair<int64_t, int64_t>>{{3, 30}, {5, 50}}));
  int64_t ttl = 0;
  std::vector<std::string> keys;
  ASSERT_TRUE(live.Get(5, &ttl, &keys));
  EXPECT_EQ(keys, (std::vector<std::string>{"k"}));
  EXPECT_EQ(restored.List(), (std::vector<std::pair<int64_t, int64_t>>{{1, 10}}))
      << "the old leases, freed with it";
}

}  // namespace
}  // namespace raftkv
