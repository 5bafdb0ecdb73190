// Client sessions in the state machine: exactly-once application of
// (client_id, sequence), saved results for duplicates, first_outstanding
// pruning, stale sequences, and expiry by leader-stamped cluster time.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kv/kv_state_machine.h"

namespace raftkv {
namespace {

class Sessions : public ::testing::Test {
 protected:
  // Applies the next entry at cluster time `time_ms`.
  ApplyResult Apply(Command command, uint64_t time_ms = 0) {
    Entry e;
    e.set_term(1);
    e.set_index(++index_);
    e.set_type(ENTRY_COMMAND);
    e.set_cluster_time_ms(time_ms);
    e.set_data(command.SerializeAsString());
    return sm_.Apply(e);
  }
  ApplyResult Noop(uint64_t time_ms) {
    Entry e;
    e.set_term(1);
    e.set_index(++index_);
    e.set_type(ENTRY_NOOP);
    e.set_cluster_time_ms(time_ms);
    return sm_.Apply(e);
  }
  uint64_t Open(uint64_t timeout_ms, uint64_t time_ms = 0) {
    Command c;
    c.set_op(Command::OPEN_SESSION);
    c.set_session_timeout_ms(timeout_ms);
    ApplyResult r = Apply(c, time_ms);
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.client_id, index_) << "a session's id is its entry's index";
    return r.client_id;
  }
  static Command Op(Command::Op op, const std::string& key, const std::string& value,
                    uint64_t client, uint64_t seq, uint64_t first_outstanding) {
    Command c;
    c.set_op(op);
    c.set_key(key);
    c.set_value(value);
    c.set_client_id(client);
    c.set_sequence(seq);
    c.set_first_outstanding(first_outstanding);
    return c;
  }

  KvStateMachine sm_;
  uint64_t index_ = 0;
};

TEST_F(Sessions, DuplicateIsAnsweredWithTheFirstResultAndNotReapplied) {
  const uint64_t id = Open(60000);
  ApplyResult first = Apply(Op(Command::PUT, "k", "v1", id, 1, 1));
  ASSERT_TRUE(first.ok);
  EXPECT_FALSE(first.duplicate);
  const uint64_t first_index = first.index;
  // Another client overwrites the key; then the first client's retry arrives.
  ASSERT_TRUE(Apply(Op(Command::PUT, "k", "other", 0, 0, 0)).ok);
  ApplyResult retry = Apply(Op(Command::PUT, "k", "v1", id, 1, 1));
  EXPECT_TRUE(retry.duplicate);
  EXPECT_EQ(retry.index, first_index);
  EXPECT_EQ(sm_.Get("k").value_or(""), "other") << "a duplicate must not be applied again";
}

TEST_F(Sessions, DuplicateBatchIsAnsweredWithTheFirstResultAndNotReapplied) {
  const uint64_t id = Open(60000);
  Command batch = Op(Command::BATCH, "", "", id, 1, 1);
  for (const char* key : {"x", "y"}) {
    Command* op = batch.add_ops();
    op->set_op(Command::PUT);
    op->set_key(key);
    op->set_value("1");
  }
  Command* del = batch.add_ops();
  del->set_op(Command::DELETE);
  del->set_key("x");
  ApplyResult first = Apply(batch);
  ASSERT_TRUE(first.ok) << first.error;
  EXPECT_EQ(first.batch_existed, (std::vector<bool>{false, false, true}));
  ASSERT_TRUE(Apply(Op(Command::PUT, "y", "other", 0, 0, 0)).ok);
  ApplyResult retry = Apply(batch);
  EXPECT_TRUE(retry.duplicate);
  EXPECT_EQ(retry.index, first.index);
  EXPECT_EQ(retry.batch_existed, first.batch_existed);
  EXPECT_EQ(sm_.Get("y").value_or(""), "other") << "a duplicate batch must not be applied again";
  EXPECT_FALSE(sm_.Get("x").has_value());
}

TEST_F(Sessions, DuplicateCasAndDeleteReturnSavedOutcome) {
  const uint64_t id = Open(60000);
  Command cas = Op(Command::CAS, "c", "1", id, 1, 1);
  cas.set_has_expected(false);  // create-only
  ApplyResult r1 = Apply(cas);
  ASSERT_TRUE(r1.swapped);
  ApplyResult r2 = Apply(cas);  // without a session this retry would fail (key now present)
  EXPECT_TRUE(r2.duplicate);
  EXPECT_TRUE(r2.swapped);
  EXPECT_FALSE(r2.found);

  ApplyResult d1 = Apply(Op(Command::DELETE, "c", "", id, 2, 1));
  EXPECT_TRUE(d1.existed);
  ApplyResult d2 = Apply(Op(Command::DELETE, "c", "", id, 2, 1));
  EXPECT_TRUE(d2.duplicate);
  EXPECT_TRUE(d2.existed) << "the retry must report what the first application saw";
}

TEST_F(Sessions, FirstOutstandingDropsResultsAndRefusesStaleSequences) {
  const uint64_t id = Open(60000);
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    ASSERT_TRUE(Apply(Op(Command::PUT, "k" + std::to_string(seq), "v", id, seq, 1)).ok);
  }
  // The client has the answers of 1..3.
  ASSERT_TRUE(Apply(Op(Command::PUT, "k6", "v", id, 6, 4)).ok);
  ApplyResult stale = Apply(Op(Command::PUT, "k2", "again", id, 2, 2));
  EXPECT_EQ(stale.session_error, ApplyResult::SessionError::kStaleSequence);
  EXPECT_EQ(sm_.Get("k2").value_or(""), "v") << "a stale sequence must not be applied";
  ApplyResult dup = Apply(Op(Command::PUT, "k4", "v", id, 4, 4));
  EXPECT_TRUE(dup.duplicate) << "results at or above first_outstanding are kept";
}

TEST_F(Sessions, UnknownSessionIsRefused) {
  ApplyResult r = Apply(Op(Command::PUT, "k", "v", 12345, 1, 1));
  EXPECT_EQ(r.session_error, ApplyResult::SessionError::kSessionExpired);
  EXPECT_FALSE(sm_.Get("k").has_value());
}

TEST_F(Sessions, ExpiryFollowsClusterTimeNotWallClock) {
  const uint64_t id = Open(/*timeout_ms=*/1000, /*time_ms=*/100);
  // Activity at 900 refreshes the session until 1900.
  ASSERT_TRUE(Apply(Op(Command::PUT, "a", "1", id, 1, 1), 900).ok);
  Noop(1900);  // not yet expired: expiry is strictly after timeout
  EXPECT_EQ(sm_.SessionCount(), 1u);
  ApplyResult dup = Apply(Op(Command::PUT, "a", "1", id, 1, 1), 1900);
  EXPECT_TRUE(dup.duplicate);
  Noop(2901);  // idle for more than the timeout since 1900
  EXPECT_EQ(sm_.SessionCount(), 0u);
  ApplyResult late = Apply(Op(Command::PUT, "a", "1", id, 2, 2), 2901);
  EXPECT_EQ(late.session_error, ApplyResult::SessionError::kSessionExpired);
}

TEST_F(Sessions, ReplicasReplayingTheSameLogAgree) {
  // Two state machines fed the same entries (as two replicas, or one
  // restarting) make the same decisions, expiry included.
  std::vector<Entry> log;
  auto add = [&](Command c, uint64_t t) {
    Entry e;
    e.set_term(1);
    e.set_index(log.size() + 1);
    e.set_type(ENTRY_COMMAND);
    e.set_cluster_time_ms(t);
    e.set_data(c.SerializeAsString());
    log.push_back(e);
  };
  Command open;
  open.set_op(Command::OPEN_SESSION);
  open.set_session_timeout_ms(500);
  add(open, 0);
  add(Op(Command::PUT, "x", "1", 1, 1, 1), 100);
  add(Op(Command::PUT, "x", "1", 1, 1, 1), 200);  // duplicate
  add(Op(Command::PUT, "y", "2", 1, 2, 2), 1000);  // session expired at 600
  KvStateMachine a, b;
  for (const Entry& e : log) {
    ApplyResult ra = a.Apply(e), rb = b.Apply(e);
    EXPECT_EQ(ra.duplicate, rb.duplicate);
    EXPECT_EQ(ra.session_error, rb.session_error);
  }
  EXPECT_EQ(a.Get("y").has_value(), b.Get("y").has_value());
  EXPECT_FALSE(a.Get("y").has_value());
}

TEST_F(Sessions, CloseSessionForgetsIt) {
  const uint64_t id = Open(60000);
  Command close;
  close.set_op(Command::CLOSE_SESSION);
  close.set_client_id(id);
  ASSERT_TRUE(Apply(close).ok);
  EXPECT_EQ(sm_.SessionCount(), 0u);
  EXPECT_EQ(Apply(Op(Command::PUT, "k", "v", id, 1, 1)).session_error,
            ApplyResult::SessionError::kSessionExpired);
}

}  // namespace
}  // namespace raftkv
