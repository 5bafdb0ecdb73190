// Network partitions through the servers' test-only link cutter
// (--enable_test_faults, Testing.SetFaults): a leader cut off from the
// majority loses leadership and cannot commit or serve linearizable reads; the
// majority elects a new leader and keeps going; after healing, the old leader
// rejoins as a follower and its uncommitted writes are gone. The chaos runner
// (scripts/chaos.sh) builds on the same mechanism.
#include "gtest/integration/integration_test_util.h"

namespace raftkv {
namespace integration {
namespace {

TEST_F(Integration, PartitionedLeaderIsReplacedAndRejoins) {
  std::vector<std::string> flags = FastTimeoutFlags();
  flags.push_back("--enable_test_faults");
  uint64_t old_leader = 0;
  StartCluster(3, flags, &old_leader);
  ProcessCluster& cluster = this->cluster();
  auto client = cluster.NewClient(8000, 1000);
  ASSERT_TRUE(client->Put("before", "1").ok());

  // Cut the leader off from both followers (both directions).
  std::vector<uint64_t> others;
  for (int i = 1; i <= 3; ++i) {
    if (static_cast<uint64_t>(i) != old_leader) others.push_back(i);
  }
  ASSERT_TRUE(SetFaults(cluster, static_cast<int>(old_leader), others).ok());
  for (uint64_t o : others) ASSERT_TRUE(SetFaults(cluster, static_cast<int>(o), {old_leader}).ok());

  // The isolated leader cannot commit: a write sent to it alone fails.
  auto isolated = cluster.NewClientFor(static_cast<int>(old_leader), 1500, 1000);
  EXPECT_FALSE(isolated->Put("minority", "x").ok());
  // The majority elects a new leader among themselves.
  uint64_t new_leader = 0;
  ASSERT_TRUE(WaitUntil([&] {
    for (uint64_t o : others) {
      StatusResponse st;
      if (cluster.StatusOf(static_cast<int>(o), &st, 300).ok() && st.role() == "leader") {
        new_leader = o;
        return true;
      }
    }
    return false;
  }, 10000)) << cluster.Describe();
  // ... and keeps serving: a client over all members gets through.
  ASSERT_TRUE(client->Put("during", "2").ok());
  // The old leader stepped down (CheckQuorum) and serves no linearizable read.
  StatusResponse st;
  ASSERT_TRUE(WaitUntil([&] {
    return cluster.StatusOf(static_cast<int>(old_leader), &st, 300).ok() && st.role() != "leader";
  }, 5000)) << "an isolated leader must step down";
  std::string value;
  bool found = false;
  EXPECT_FALSE(isolated->Get("during", &value, &found).ok());

  // Heal: the old leader follows the new one and catches up.
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(SetFaults(cluster, i, {}).ok());
  ASSERT_TRUE(WaitUntil([&] {
    return cluster.StatusOf(static_cast<int>(old_leader), &st, 300).ok() &&
           st.role() == "follower" && st.leader_id() != 0 && st.leader_id() != old_leader;
  }, 10000)) << cluster.Describe();
  ASSERT_TRUE(client->Put("after", "3").ok());
  StatusResponse leader_status;
  ASSERT_TRUE(cluster.StatusOf(static_cast<int>(st.leader_id()), &leader_status).ok());
  ASSERT_TRUE(WaitForApplied(cluster, static_cast<int>(old_leader), leader_status.commit_index(), 10000));
  auto stale = cluster.NewClientFor(static_cast<int>(old_leader));
  EXPECT_TRUE(CheckAll(*stale, {{"before", "1"}, {"during", "2"}, {"after", "3"}}, /*stale=*/true).empty());
  ASSERT_TRUE(stale->Get("minority", &value, &found, /*allow_stale=*/true).ok());
  EXPECT_FALSE(found) << "the isolated leader's uncommitted write must not survive";
}

}  // namespace
}  // namespace integration
}  // namespace raftkv
