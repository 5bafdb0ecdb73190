// The core's view of the log (raft/core/log.h): appending with truncation of a
// conflicting suffix, the configurations the entries carry, the entries
// handed to storage and to apply, durability after a truncation,
// compaction and a leader's snapshot.
#include "raft/core/log.h"

#include <gtest/gtest.h>

#include <vector>

namespace raftkv::raft {
namespace {

Entry MakeEntry(uint64_t index, uint64_t term, EntryType type = ENTRY_COMMAND, std::string data = "") {
  Entry e;
  e.set_index(index);
  e.set_term(term);
  e.set_type(type);
  e.set_data(std::move(data));
  return e;
}

Entry ConfigEntry(uint64_t index, uint64_t term, const std::vector<uint64_t>& voters) {
  return MakeEntry(index, term, ENTRY_CONFIG, VotersConfig(voters).SerializeAsString());
}

SnapshotRef Bootstrap(const std::vector<uint64_t>& voters) {
  SnapshotRef base;
  base.config = VotersConfig(voters);
  return base;
}

std::vector<uint64_t> Indexes(const std::vector<Entry>& entries) {
  std::vector<uint64_t> out;
  for (const Entry& e : entries) out.push_back(e.index());
  return out;
}

TEST(RaftLogTest, RecoveredEntriesAreDurableAndNotHandedOutAgain) {
  RaftLog log(1, Bootstrap({1, 2, 3}), {MakeEntry(1, 1), MakeEntry(2, 1), MakeEntry(3, 2)});
  EXPECT_EQ(log.first_index(), 1u);
  EXPECT_EQ(log.last_index(), 3u);
  EXPECT_EQ(log.last_term(), 2u);
  EXPECT_EQ(log.TermAt(0), 0u);
  EXPECT_EQ(log.TermAt(2), 1u);
  EXPECT_EQ(log.TermAt(4), 0u) << "beyond the log";
  EXPECT_EQ(log.durable_index(), 3u);
  EXPECT_FALSE(log.HasUnstable());
  EXPECT_EQ(log.commit(), 0u);
  EXPECT_TRUE(log.IsUpToDate(3, 2));
  EXPECT_TRUE(log.IsUpToDate(1, 3)) << "a later last term wins";
  EXPECT_FALSE(log.IsUpToDate(9, 1)) << "an earlier last term loses, however long";
  EXPECT_FALSE(log.IsUpToDate(2, 2));
}

// A state machine that keeps its state across restarts applied up to 2:
// those entries are committed and only the ones after go to apply.
TEST(RaftLogTest, EntriesTheStateMachineAppliedAreNotHandedOutAgain) {
  RaftLog log(1, Bootstrap({1}), {MakeEntry(1, 1), MakeEntry(2, 1), MakeEntry(3, 2), MakeEntry(4, 2)},
              /*applied=*/2);
  EXPECT_EQ(log.commit(), 2u);
  EXPECT_FALSE(log.HasCommittedToApply());
  log.CommitTo(4);
  EXPECT_EQ(Indexes(log.TakeCommitted()), (std::vector<uint64_t>{3, 4}));
  // The log compacts up to what was applied, as always.
  EXPECT_TRUE(log.Compact(2));
}

TEST(RaftLogTest, AnAppliedIndexBeyondTheLogDies) {
  EXPECT_DEATH(RaftLog(1, Bootstrap({1}), {MakeEntry(1, 1)}, /*applied=*/2), "does not hold");
}

TEST(RaftLogTest, AppendHandsOutNewEntriesOnceAndCommitsInOrder) {
  RaftLog log(1, Bootstrap({1}), {});
  EXPECT_FALSE(log.Append(MakeEntry(1, 1)));
  EXPECT_FALSE(log.Append(std::vector<Entry>{MakeEntry(2, 1), MakeEntry(3, 1)}));
  ASSERT_TRUE(log.HasUnstable());
  const std::vector<Entry> unstable = log.TakeUnstable();
  EXPECT_EQ(Indexes(unstable), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_FALSE(log.HasUnstable());
  EXPECT_EQ(log.durable_index(), 0u);
  log.OnPersisted(unstable);
  EXPECT_EQ(log.durable_index(), 3u);

  log.CommitTo(2);
  EXPECT_EQ(Indexes(log.TakeCommitted()), (std::vector<uint64_t>{1, 2}));
  log.CommitTo(1);  // never lowers
  EXPECT_EQ(log.commit(), 2u);
  EXPECT_FALSE(log.HasCommittedToApply());
  log.CommitTo(3);
  EXPECT_EQ(Indexes(log.TakeCommitted()), (std::vector<uint64_t>{3}));
  EXPECT_EQ(log.applied_sent(), 3u);
}

TEST(RaftLogTest, ConflictingSuffixIsTruncatedAndItsDurabilityForgotten) {
  RaftLog log(1, Bootstrap({1, 2, 3}), {});
  log.Append(std::vector<Entry>{MakeEntry(1, 1), MakeEntry(2, 1), MakeEntry(3, 1)});
  const std::vector<Entry> first = log.TakeUnstable();
  // A new leader's entries replace 2..3 before the first write is durable.
  log.Append(std::vector<Entry>{MakeEntry(2, 2)});
  EXPECT_EQ(log.last_index(), 2u);
  EXPECT_EQ(log.TermAt(2), 2u);
  log.OnPersisted(first);  // 1..3 of term 1 are durable, but 2..3 are gone
  EXPECT_EQ(log.durable_index(), 0u) << "a write whose last entry was replaced counts for nothing";
  const std::vector<Entry> second = log.TakeUnstable();
  EXPECT_EQ(Indexes(second), (std::vector<uint64_t>{2}));
  log.OnPersisted(second);
  EXPECT_EQ(log.durable_index(), 2u);
}

TEST(RaftLogTest, TruncatingACommittedEntryDies) {
  RaftLog log(1, Bootstrap({1}), {MakeEntry(1, 1), MakeEntry(2, 1)});
  log.CommitTo(2);
  EXPECT_DEATH(log.Append(std::vector<Entry>{MakeEntry(2, 2)}), "truncate committed");
}

TEST(RaftLogTest, ConfigurationsFollowTheEntriesThatCarryThem) {
  RaftLog log(1, Bootstrap({1}), {MakeEntry(1, 1)});
  EXPECT_EQ(VoterIds(log.membership()), (std::vector<uint64_t>{1}));
  EXPECT_EQ(log.membership_index(), 0u);
  EXPECT_TRUE(log.Append(ConfigEntry(2, 1, {1, 2})));
  EXPECT_FALSE(log.Append(MakeEntry(3, 1)));
  EXPECT_EQ(VoterIds(log.membership()), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(log.membership_index(), 2u);
  EXPECT_EQ(VoterIds(log.MembershipAt(1)), (std::vector<uint64_t>{1}));
  EXPECT_EQ(VoterIds(log.MembershipAt(3)), (std::vector<uint64_t>{1, 2}));
  // A malformed configuration entry is ignored alike by every member.
  EXPECT_FALSE(log.Append(MakeEntry(4, 1, ENTRY_CONFIG, "not a configuration")));
  EXPECT_EQ(log.membership_index(), 2u);
  // Truncating the configuration entry away restores the one before it.
  EXPECT_TRUE(log.Append(std::vector<Entry>{MakeEntry(2, 2)}));
  EXPECT_EQ(VoterIds(log.membership()), (std::vector<uint64_t>{1}));
}

TEST(RaftLogTest, CompactionKeepsTermsAndConfigurationAtTheSnapshot) {
  RaftLog log(1, Bootstrap({1}), {});
  log.Append(std::vector<Entry>{MakeEntry(1, 1), ConfigEntry(2, 1, {1, 2}), MakeEntry(3, 2), MakeEntry(4, 2)});
  log.OnPersisted(log.TakeUnstable());
  log.CommitTo(3);
  EXPECT_FALSE(log.Compact(2)) << "not handed out to apply yet";
  log.TakeCommitted();
  EXPECT_FALSE(log.Compact(4)) << "beyond what was handed out to apply";
  ASSERT_TRUE(log.Compact(3));
  EXPECT_FALSE(log.Compact(3)) << "not above the snapshot";
  EXPECT_EQ(log.first_index(), 4u);
  EXPECT_EQ(log.snapshot().index, 3u);
  EXPECT_EQ(log.snapshot().term, 2u);
  EXPECT_EQ(VoterIds(log.snapshot().config), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(log.TermAt(3), 2u);
  EXPECT_EQ(log.TermAt(2), 0u) << "compacted";
  EXPECT_EQ(log.EntryAt(4).index(), 4u);
  EXPECT_EQ(VoterIds(log.membership()), (std::vector<uint64_t>{1, 2}));
}

TEST(RaftLogTest, LeadersSnapshotReplacesTheLog) {
  RaftLog log(1, Bootstrap({1, 2, 3}), {MakeEntry(1, 1), MakeEntry(2, 1)});
  SnapshotRef base;
  base.index = 10;
  base.term = 3;
  base.config = VotersConfig({1, 2, 3});
  log.ResetToSnapshot(base);
  EXPECT_EQ(log.first_index(), 11u);
  EXPECT_EQ(log.last_index(), 10u);
  EXPECT_EQ(log.last_term(), 3u);
  EXPECT_EQ(log.commit(), 10u);
  EXPECT_EQ(log.applied_sent(), 10u);
  EXPECT_EQ(log.durable_index(), 10u);
  EXPECT_FALSE(log.HasUnstable());
  EXPECT_FALSE(log.HasCommittedToApply());
  log.Append(MakeEntry(11, 3));
  EXPECT_EQ(Indexes(log.TakeUnstable()), (std::vector<uint64_t>{11}));
}

}  // namespace
}  // namespace raftkv::raft
