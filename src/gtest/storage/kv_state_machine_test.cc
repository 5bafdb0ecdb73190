#include "storage/kv_state_machine.h"

#include <gtest/gtest.h>

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

Entry NoopEntry(uint64_t index) {
  Entry entry;
  entry.set_term(1);
  entry.set_index(index);
  entry.set_type(ENTRY_NOOP);
  return entry;
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
  unknown.set_op(static_cast<Command::Op>(7));
  unknown.set_key("k");
  Entry future = CommandEntry(3, Command::PUT, "x");
  future.set_data(unknown.SerializeAsString());
  r = sm.Apply(future);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(sm.AppliedIndex(), 3u);
  EXPECT_EQ(sm.Get("k"), std::optional<std::string>("v"));
}

TEST(KvStateMachineDeathTest, OutOfOrderApplyIsFatal) {
  KvStateMachine sm;
  sm.Apply(NoopEntry(1));
  EXPECT_DEATH(sm.Apply(NoopEntry(3)), "index order");
  EXPECT_DEATH(sm.Apply(NoopEntry(1)), "index order");
}

}  // namespace
}  // namespace raftkv
