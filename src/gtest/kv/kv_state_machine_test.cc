#include "kv/kv_state_machine.h"

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "storage/snapshot_format.h"

namespace raftkv {
namespace {

Entry CommandEntry(uint64_t index, Command::Op op, const std::string& key,
                   const std::string& value = "") {
  Command command;
  command.set_op(op);
  command.set_key(key);
  command.set_value(value);
  Entry entry;
  entry.set_term(1);
  entry.set_index(index);
  entry.set_type(ENTRY_COMMAND);
  entry.set_data(command.SerializeAsString());
  return entry;
}

// A CAS entry; expected == nullptr means "the key must be absent".
Entry CasEntry(uint64_t index, const std::string& key, const std::string* expected,
               const std::string& value) {
  Entry entry = CommandEntry(index, Command::CAS, key, value);
  Command command;
  command.ParseFromString(entry.data());
  command.set_has_expected(expected != nullptr);
  if (expected != nullptr) command.set_expected(*expected);
  entry.set_data(command.SerializeAsString());
  return entry;
}

Entry NoopEntry(uint64_t index) {
  Entry entry;
  entry.set_term(1);
  entry.set_index(index);
  entry.set_type(ENTRY_NOOP);
  return entry;
}

// Apply() runs concurrently with a snapshot capture (the node's apply
// thread goes on while the snapshot thread encodes the image): it never
// applies an entry twice or out of order, and the image is of one applied
// index (SnapshotTest.ImageTakenWhileApplyGoesOnIsExactlyTheStateAtItsIndex
// checks its contents).
TEST(KvStateMachineTest, ApplyDuringASnapshotCaptureGoesOnAndTheImageIsConsistent) {
  KvStateMachine sm;
  uint64_t index = 0;
  while (index < 200000) {
    ++index;
    sm.Apply(CommandEntry(index, Command::PUT, "k" + std::to_string(index), std::string(64, 'v')));
  }
  std::atomic<bool> captured{false};
  SnapshotWriter writer;
  std::thread capture([&] {
    sm.Snapshot(&writer);
    captured = true;
  });
  while (!captured) {
    ++index;
    ApplyResult a = sm.Apply(CommandEntry(index, Command::PUT, "y" + std::to_string(index), "2"));
    ASSERT_TRUE(a.ok);
  }
  capture.join();
  EXPECT_EQ(sm.AppliedIndex(), index);
  EXPECT_GE(writer.meta().last_index, 200000u);
  EXPECT_LE(writer.meta().last_index, index);
  // One key per applied entry: the image holds the keys up to its index
  // (and one store record: the revision and the leases; and one history
  // record for each of the newest revisions the snapshot carries, one
  // event per entry here).
  EXPECT_EQ(writer.record_count(),
            writer.meta().last_index + 1 + KvStateMachine::kDefaultSnapshotHistoryRevisions);
}

TEST(KvStateMachineTest, PutGetOverwrite) {
  KvStateMachine sm;
  EXPECT_EQ(sm.AppliedIndex(), 0u);
  ApplyResult r = sm.Apply(CommandEntry(1, Command::PUT, "a", "1"));
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(sm.Get("a"), std::optional<std::string>("1"));
  EXPECT_TRUE(sm.Apply(CommandEntry(2, Command::PUT, "a", "2")).ok);
  EXPECT_EQ(sm.Get("a"), std::optional<std::string>("2"));
  EXPECT_TRUE(sm.Apply(CommandEntry(3, Command::PUT, std::string("b\0c", 3), "")).ok);
  EXPECT_EQ(sm.Get(std::string("b\0c", 3)), std::optional<std::string>(""));
  EXPECT_EQ(sm.Get("b"), std::nullopt);
  EXPECT_EQ(sm.Size(), 2u);
  EXPECT_EQ(sm.AppliedIndex(), 3u);
}

TEST(KvStateMachineTest, Delete) {
  KvStateMachine sm;
  sm.Apply(CommandEntry(1, Command::PUT, "k", "v"));
  ApplyResult r = sm.Apply(CommandEntry(2, Command::DELETE, "k"));
  EXPECT_TRUE(r.ok);
  EXPECT_TRUE(r.existed);
  EXPECT_EQ(sm.Get("k"), std::nullopt);
  r = sm.Apply(CommandEntry(3, Command::DELETE, "k"));
  EXPECT_TRUE(r.ok);
  EXPECT_FALSE(r.existed);
  EXPECT_EQ(sm.Size(), 0u);
  EXPECT_EQ(sm.AppliedIndex(), 3u);
}

TEST(KvStateMachineTest, NoopAdvancesAppliedIndexOnly) {
  KvStateMachine sm;
  sm.Apply(CommandEntry(1, Command::PUT, "k", "v"));
  ApplyResult r = sm.Apply(NoopEntry(2));
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(sm.AppliedIndex(), 2u);
  EXPECT_EQ(sm.Size(), 1u);
}

// Configuration entries belong to the consensus layer: applying one only
// moves the applied index/term and cluster time, and succeeds.
TEST(KvStateMachineTest, ConfigEntryIsASuccessfulNoop) {
  KvStateMachine sm;
  sm.Apply(CommandEntry(1, Command::PUT, "k", "v"));
  MembershipConfig config;
  config.add_members()->set_id(1);
  config.add_members()->set_id(2);
  Entry entry;
  entry.set_term(3);
  entry.set_index(2);
  entry.set_type(ENTRY_CONFIG);
  entry.set_cluster_time_ms(5000);
  entry.set_data(config.SerializeAsString());
  ApplyResult r = sm.Apply(entry);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.index, 2u);
  EXPECT_EQ(r.term, 3u);
  EXPECT_EQ(sm.AppliedIndex(), 2u);
  EXPECT_EQ(sm.AppliedTerm(), 3u);
  EXPECT_EQ(sm.Size(), 1u);
  EXPECT_EQ(sm.Get("k"), std::optional<std::string>("v"));

  // Even data that is no MembershipConfig: the state machine does not read it.
  entry.set_index(3);
  entry.set_data("\xFF\xFF\xFF");
  r = sm.Apply(entry);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(sm.AppliedIndex(), 3u);

  // The cluster time it carries moves the state machine's clock: a session
  // opened before it expires by it.
  Command open;
  open.set_op(Command::OPEN_SESSION);
  open.set_session_timeout_ms(1000);
  Entry open_entry = CommandEntry(4, Command::PUT, "x");
  open_entry.set_data(open.SerializeAsString());
  open_entry.set_cluster_time_ms(5000);
  sm.Apply(open_entry);
  EXPECT_EQ(sm.SessionCount(), 1u);
  entry.set_index(5);
  entry.set_cluster_time_ms(7000);
  EXPECT_TRUE(sm.Apply(entry).ok);
  EXPECT_EQ(sm.SessionCount(), 0u);
}

TEST(KvStateMachineTest, UndecodableCommandIsANoopWithError) {
  KvStateMachine sm;
  sm.Apply(CommandEntry(1, Command::PUT, "k", "v"));
  Entry bad;
  bad.set_term(1);
  bad.set_index(2);
  bad.set_type(ENTRY_COMMAND);
  bad.set_data("\xFF\xFF\xFF");  // truncated varint tag
  ApplyResult r = sm.Apply(bad);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.error.empty());
  EXPECT_EQ(sm.AppliedIndex(), 2u);
  EXPECT_EQ(sm.Size(), 1u);
  EXPECT_EQ(sm.Get("k"), std::optional<std::string>("v"));

  // An op this version does not know is treated alike.
  Command unknown;
  unknown.set_op(static_cast<Command::Op>(99));
  unknown.set_key("k");
  Entry future = CommandEntry(3, Command::PUT, "x");
  future.set_data(unknown.SerializeAsString());
  r = sm.Apply(future);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(sm.AppliedIndex(), 3u);
  EXPECT_EQ(sm.Get("k"), std::optional<std::string>("v"));
}

Entry BatchEntry(uint64_t index, const std::vector<std::pair<Command::Op, std::string>>& ops,
                 const std::string& value = "v") {
  Command command;
  command.set_op(Command::BATCH);
  for (const auto& [op, key] : ops) {
    Command* c = command.add_ops();
    c->set_op(op);
    c->set_key(key);
    if (op == Command::PUT) c->set_value(value + key);
  }
  Entry entry;
  entry.set_term(2);
  entry.set_index(index);
  entry.set_type(ENTRY_COMMAND);
  entry.set_data(command.SerializeAsString());
  return entry;
}

// A batch applies its ops in order at one index; each op reports whether its
// key was there just before it (so a key put then deleted in one batch is
// seen by the delete).
TEST(KvStateMachineTest, BatchAppliesEveryOpInOrderAtOneIndex) {
  KvStateMachine sm;
  sm.Apply(CommandEntry(1, Command::PUT, "old", "x"));
  const ApplyResult r = sm.Apply(BatchEntry(2, {{Command::PUT, "a"},
                                                {Command::PUT, "old"},
                                                {Command::DELETE, "missing"},
                                                {Command::PUT, "t"},
                                                {Command::DELETE, "t"},
                                                {Command::PUT, "a"}}));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.index, 2u);
  EXPECT_EQ(r.term, 2u);
  EXPECT_EQ(r.batch_existed, (std::vector<bool>{false, true, false, false, true, true}));
  EXPECT_EQ(sm.Get("a").value_or("?"), "va");
  EXPECT_EQ(sm.Get("old").value_or("?"), "vold");
  EXPECT_FALSE(sm.Get("t").has_value());
  EXPECT_EQ(sm.Size(), 2u);
  EXPECT_EQ(sm.AppliedIndex(), 2u);
}

// Only PUT and DELETE may be batched. A batch holding anything else (the
// server never proposes one) is skipped whole, not in part, by every replica.
TEST(KvStateMachineTest, BatchWithAnOpThatCannotBeBatchedIsSkippedWhole) {
  for (Command::Op bad : {Command::CAS, Command::OPEN_SESSION, Command::BATCH}) {
    KvStateMachine sm;
    const ApplyResult r =
        sm.Apply(BatchEntry(1, {{Command::PUT, "a"}, {bad, "b"}, {Command::PUT, "c"}}));
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("batch op 1"), std::string::npos) << r.error;
    EXPECT_EQ(sm.Size(), 0u) << "nothing of a refused batch may be applied";
    EXPECT_EQ(sm.AppliedIndex(), 1u);
  }
}

TEST(KvStateMachineDeathTest, OutOfOrderApplyIsFatal) {
  KvStateMachine sm;
  sm.Apply(NoopEntry(1));
  EXPECT_DEATH(sm.Apply(NoopEntry(3)), "index order");
  EXPECT_DEATH(sm.Apply(NoopEntry(1)), "index order");
}

TEST(KvStateMachineTest, CasSwapsOnMatchAndReportsThePreviousValue) {
  KvStateMachine sm;
  sm.Apply(CommandEntry(1, Command::PUT, "k", "old"));
  const std::string expected = "old";
  ApplyResult r = sm.Apply(CasEntry(2, "k", &expected, "new"));
  EXPECT_TRUE(r.ok);
  EXPECT_TRUE(r.swapped);
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.current, "old");
  EXPECT_EQ(sm.Get("k"), std::optional<std::string>("new"));
  EXPECT_EQ(sm.AppliedIndex(), 2u);
}

TEST(KvStateMachineTest, CasDoesNotSwapOnMismatch) {
  KvStateMachine sm;
  sm.Apply(CommandEntry(1, Command::PUT, "k", "actual"));
  const std::string expected = "other";
  ApplyResult r = sm.Apply(CasEntry(2, "k", &expected, "new"));
  EXPECT_TRUE(r.ok);
  EXPECT_FALSE(r.swapped);
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.current, "actual");
  EXPECT_EQ(sm.Get("k"), std::optional<std::string>("actual"));
  // An expected value never matches an absent key, not even the empty value.
  const std::string empty;
  r = sm.Apply(CasEntry(3, "missing", &empty, "new"));
  EXPECT_FALSE(r.swapped);
  EXPECT_FALSE(r.found);
  EXPECT_EQ(r.current, "");
  EXPECT_EQ(sm.Get("missing"), std::nullopt);
  EXPECT_EQ(sm.AppliedIndex(), 3u);
}

TEST(KvStateMachineTest, CasCreateOnly) {
  KvStateMachine sm;
  ApplyResult r = sm.Apply(CasEntry(1, "k", nullptr, "first"));
  EXPECT_TRUE(r.ok);
  EXPECT_TRUE(r.swapped);
  EXPECT_FALSE(r.found);
  EXPECT_EQ(sm.Get("k"), std::optional<std::string>("first"));
  // Present (even with an empty value): create-only does not swap.
  r = sm.Apply(CasEntry(2, "k", nullptr, "second"));
  EXPECT_FALSE(r.swapped);
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.current, "first");
  EXPECT_EQ(sm.Get("k"), std::optional<std::string>("first"));
  sm.Apply(CommandEntry(3, Command::PUT, "e", ""));
  r = sm.Apply(CasEntry(4, "e", nullptr, "x"));
  EXPECT_FALSE(r.swapped);
  EXPECT_TRUE(r.found);
  EXPECT_EQ(sm.Get("e"), std::optional<std::string>(""));
}

// The same log applied on two replicas gives the same results and state.
TEST(KvStateMachineTest, CasIsDeterministicAcrossReplicas) {
  std::vector<Entry> log;
  uint64_t index = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string key = "k" + std::to_string(i % 3);
    const std::string guess = std::to_string((i * 7) % 5);
    const std::string value = std::to_string((i * 3) % 5);
    switch (i % 4) {
      case 0: log.push_back(CasEntry(++index, key, nullptr, value)); break;
      case 1: log.push_back(CasEntry(++index, key, &guess, value)); break;
      case 2: log.push_back(CasEntry(++index, key, &guess, value)); break;
      default:
        log.push_back(CommandEntry(++index, i % 8 == 3 ? Command::DELETE : Command::PUT, key, value));
    }
  }
  KvStateMachine a, b;
  int swaps = 0;
  for (const Entry& e : log) {
    ApplyResult ra = a.Apply(e), rb = b.Apply(e);
    EXPECT_EQ(ra.swapped, rb.swapped) << "index " << e.index();
    EXPECT_EQ(ra.found, rb.found) << "index " << e.index();
    EXPECT_EQ(ra.current, rb.current) << "index " << e.index();
    swaps += ra.swapped ? 1 : 0;
  }
  EXPECT_GT(swaps, 0);
  EXPECT_LT(swaps, 150);  // the sequence exercises both outcomes
  for (int k = 0; k < 3; ++k) {
    const std::string key = "k" + std::to_string(k);
    EXPECT_EQ(a.Get(key), b.Get(key)) << key;
  }
  EXPECT_EQ(a.Size(), b.Size());
}

}  // namespace
}  // namespace raftkv
