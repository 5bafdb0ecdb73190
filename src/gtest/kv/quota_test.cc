// The backend quota in the state machine: what each command costs
// (QuotaCost), what the state holds (StateBytes), and the NOSPACE alarm:
// raised and cleared by ALARM entries, refusing the writes that add data
// while it is raised, kept by snapshots.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gtest/kv/txn_ops.h"
#include "kv/kv_requests.h"
#include "kv/kv_state_machine.h"

namespace raftkv {
namespace {

using testing_txn::DelOp;
using testing_txn::GetOp;
using testing_txn::PutOp;
using testing_txn::Txn;

Command Put(const std::string& k, const std::string& v) {
  Command c;
  c.set_op(Command::PUT);
  c.set_key(k);
  c.set_value(v);
  return c;
}

Command Alarm(uint32_t action, uint64_t member, uint32_t type = KvStateMachine::kAlarmNoSpace) {
  Command c;
  c.set_op(Command::ALARM);
  c.set_alarm_action(action);
  c.set_alarm_member(member);
  c.set_alarm_type(type);
  return c;
}
constexpr uint32_t kActivate = 1, kDeactivate = 2;

Command TxnCommand(TxnRequest txn) {
  Command c;
  c.set_op(Command::TXN);
  *c.mutable_txn() = std::move(txn);
  return c;
}

TEST(QuotaCostTest, WritesThatAddDataCostTheirBytesOthersNothing) {
  EXPECT_EQ(QuotaCost(Put("key", "value")), kQuotaKvOverhead + 8);
  Command cas = Put("k", "vv");
  cas.set_op(Command::CAS);
  EXPECT_EQ(QuotaCost(cas), kQuotaKvOverhead + 3);
  Command batch;
  batch.set_op(Command::BATCH);
  *batch.add_ops() = Put("a", "1");
  Command* del = batch.add_ops();
  del->set_op(Command::DELETE);
  del->set_key("zzzz");
  *batch.add_ops() = Put("b", "22");
  EXPECT_EQ(QuotaCost(batch), 2 * kQuotaKvOverhead + 5);
  // A transaction: its costlier list, nested transactions included.
  TxnRequest nested = Txn({}, {PutOp("n", "123")}, {});
  RequestOp nested_op;
  *nested_op.mutable_request_txn() = nested;
  EXPECT_EQ(QuotaCost(TxnCommand(Txn({}, {PutOp("a", "1"), nested_op}, {PutOp("b", "2")}))),
            2 * kQuotaKvOverhead + 2 + 4);
  EXPECT_EQ(QuotaCost(TxnCommand(Txn({}, {GetOp("a"), DelOp("b")}, {GetOp("c")}))), 0u);
  Command grant;
  grant.set_op(Command::LEASE_GRANT);
  EXPECT_EQ(QuotaCost(grant), kQuotaLeaseOverhead);
  for (Command::Op op : {Command::DELETE, Command::DELETE_RANGE, Command::LEASE_REVOKE, Command::COMPACT,
                         Command::OPEN_SESSION, Command::CLOSE_SESSION, Command::ALARM}) {
    Command c;
    c.set_op(op);
    c.set_key("k");
    EXPECT_EQ(QuotaCost(c), 0u) << Command::Op_Name(op);
  }
}

class QuotaStateTest : public ::testing::Test {
 protected:
  ApplyResult Run(const Command& c) { return testing_txn::ApplyNext(&sm_, &index_, c); }
  static bool RefusedForSpace(const ApplyResult& r) {
    return r.rejected() && r.Rejection().code() == Status::Code::kResourceExhausted &&
           r.Rejection().reason() == Status::Reason::kNoSpace;
  }

  KvStateMachine sm_;
  uint64_t index_ = 0;
};

TEST_F(QuotaStateTest, StateBytesCountKeysValuesHistoryAndLeases) {
  EXPECT_EQ(sm_.StateBytes(), 0u);
  // Besides the history (which always keeps the newest revision).
  auto data = [&] { return sm_.StateBytes() - sm_.HistoryBytes(); };
  Run(Put("abc", "12345"));
  EXPECT_GT(sm_.HistoryBytes(), 0u);
  EXPECT_EQ(data(), 3 + 5 + KvStateMachine::kKeyOverhead);
  Run(Put("abc", "1"));  // overwritten: the new value counts
  EXPECT_EQ(data(), 3 + 1 + KvStateMachine::kKeyOverhead);
  Run(Put("x", ""));
  EXPECT_EQ(data(), 3 + 1 + 1 + 2 * KvStateMachine::kKeyOverhead);
  Command del;
  del.set_op(Command::DELETE_RANGE);
  del.set_key("abc");
  Run(del);
  EXPECT_EQ(data(), 1 + KvStateMachine::kKeyOverhead);
  Command grant;
  grant.set_op(Command::LEASE_GRANT);
  grant.set_lease(7);
  grant.set_lease_ttl(10);
  Run(grant);
  EXPECT_EQ(data(), 1 + KvStateMachine::kKeyOverhead + kQuotaLeaseOverhead);
}

TEST_F(QuotaStateTest, ANoSpaceAlarmRefusesWritesThatAddDataUntilItIsCleared) {
  ASSERT_FALSE(Run(Put("a", "1")).rejected());
  ASSERT_FALSE(Run(Put("b", "2")).rejected());
  ApplyResult raised = Run(Alarm(kActivate, 3));
  ASSERT_FALSE(raised.rejected());
  EXPECT_FALSE(raised.existed);
  EXPECT_TRUE(Run(Alarm(kActivate, 3)).existed);  // raised already: no change
  ASSERT_TRUE(sm_.NoSpaceAlarm());
  ASSERT_EQ(sm_.Alarms().size(), 1u);
  EXPECT_EQ(sm_.Alarms()[0].member, 3u);
  const int64_t revision = sm_.Revision();

  // Refused: everything that adds data, whole.
  ApplyResult put = Run(Put("c", "3"));
  EXPECT_TRUE(RefusedForSpace(put)) << put.Rejection();
  EXPECT_EQ(put.answer.revision(), revision);
  Command cas = Put("a", "9");
  cas.set_op(Command::CAS);
  EXPECT_TRUE(RefusedForSpace(Run(cas)));
  Command grant;
  grant.set_op(Command::LEASE_GRANT);
  grant.set_lease_ttl(10);
  EXPECT_TRUE(RefusedForSpace(Run(grant)));
  // A transaction with a put in the list that does not run is refused too (as etcd).
  EXPECT_TRUE(RefusedForSpace(Run(TxnCommand(Txn({}, {DelOp("b")}, {PutOp("z", "1")})))));
  EXPECT_EQ(sm_.Revision(), revision);
  EXPECT_EQ(sm_.GetRecord("a")->value, "1");
  EXPECT_FALSE(sm_.GetRecord("c").has_value());

  // Go on: deletes, transactions without puts, compaction.
  EXPECT_FALSE(Run(TxnCommand(Txn({}, {DelOp("b")}, {}))).rejected());
  EXPECT_FALSE(sm_.GetRecord("b").has_value());
  Command compact;
  compact.set_op(Command::COMPACT);
  compact.set_compact_revision(sm_.Revision());
  EXPECT_FALSE(Run(compact).rejected());

  // Cleared: writes again. Clearing what is not raised changes nothing.
  ApplyResult cleared = Run(Alarm(kDeactivate, 3));
  EXPECT_FALSE(cleared.rejected());
  EXPECT_TRUE(cleared.existed);
  EXPECT_FALSE(Run(Alarm(kDeactivate, 3)).existed);
  EXPECT_FALSE(sm_.NoSpaceAlarm());
  EXPECT_FALSE(Run(Put("c", "3")).rejected());
  EXPECT_EQ(sm_.GetRecord("c")->value, "3");
}

TEST_F(QuotaStateTest, AlarmsOfUnknownTypesOrActionsOrTooManyAreRefused) {
  EXPECT_EQ(Run(Alarm(kActivate, 1, 2)).Rejection().code(), Status::Code::kInvalidArgument);  // CORRUPT
  EXPECT_EQ(Run(Alarm(7, 1)).Rejection().code(), Status::Code::kInvalidArgument);
  for (uint64_t m = 1; m <= KvStateMachine::kMaxAlarms; ++m) ASSERT_FALSE(Run(Alarm(kActivate, m)).rejected());
  EXPECT_EQ(Run(Alarm(kActivate, KvStateMachine::kMaxAlarms + 1)).Rejection().code(),
            Status::Code::kResourceExhausted);
  EXPECT_TRUE(Run(Alarm(kActivate, 1)).existed);  // raising one that is raised is not a new one
  EXPECT_EQ(sm_.Alarms().size(), KvStateMachine::kMaxAlarms);
}

TEST_F(QuotaStateTest, SnapshotsKeepTheAlarmsAndTheStateBytes) {
  Run(Put("a", std::string(100, 'x')));
  Run(Put("b", "2"));
  Run(Alarm(kActivate, 2));
  Run(Alarm(kActivate, 5));
  KvStateMachine copy;
  ASSERT_NO_FATAL_FAILURE(testing_txn::RestoreCopy(sm_, &copy));
  ASSERT_EQ(copy.Alarms().size(), 2u);
  EXPECT_EQ(copy.Alarms()[0].member, 2u);
  EXPECT_EQ(copy.Alarms()[1].member, 5u);
  EXPECT_TRUE(copy.NoSpaceAlarm());
  // The same keys and values; the history carried may differ from the original's.
  EXPECT_EQ(copy.StateBytes() - copy.HistoryBytes(), sm_.StateBytes() - sm_.HistoryBytes());
  uint64_t index = index_;
  EXPECT_TRUE(RefusedForSpace(testing_txn::ApplyNext(&copy, &index, Put("c", "3"))));
}

}  // namespace
}  // namespace raftkv
