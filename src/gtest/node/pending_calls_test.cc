#include "node/pending_calls.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "node/apply_thread.h"

namespace raftkv {
namespace {

Entry MakeEntry(uint64_t index, uint64_t term, EntryType type = ENTRY_COMMAND) {
  Entry e;
  e.set_index(index);
  e.set_term(term);
  e.set_type(type);
  return e;
}

ApplyResult Applied(uint64_t index, uint64_t term) {
  ApplyResult r;
  r.index = index;
  r.term = term;
  return r;
}

// Registers a call whose outcome lands in *out.
OutcomeCallback Into(std::optional<Outcome>* out) {
  return [out](Outcome o) { *out = std::move(o); };
}

const Clock::time_point kFar = Clock::now() + std::chrono::hours(1);

TEST(PendingCallsTest, AWriteIsAnsweredWhenItsEntryIsAppliedAndNotBefore) {
  PendingCalls calls;
  std::optional<Outcome> a, b;
  calls.AddWrite(5, 2, kFar, Into(&a));
  calls.AddWrite(7, 2, kFar, Into(&b));
  Completions done;
  calls.WritesApplied({MakeEntry(4, 2), MakeEntry(5, 2), MakeEntry(6, 2)},
                      {Applied(4, 2), Applied(5, 2), Applied(6, 2)}, &done);
  EXPECT_FALSE(a.has_value()) << "decided, not run: the caller runs completions";
  ASSERT_EQ(done.size(), 1u);
  RunAll(&done);
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->status.ok());
  EXPECT_EQ(a->index, 5u);
  EXPECT_FALSE(b.has_value());
}

TEST(PendingCallsTest, AnotherLeadersEntryAtTheIndexMeansNotApplied) {
  PendingCalls calls;
  std::optional<Outcome> a;
  calls.AddWrite(5, 2, kFar, Into(&a));
  Completions done;
  calls.WritesApplied({MakeEntry(5, 3)}, {Applied(5, 3)}, &done);
  RunAll(&done);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->status.code(), Status::Code::kUnavailable);
  EXPECT_TRUE(a->not_applied);
}

TEST(PendingCallsTest, SessionErrorsMapToTheirStatuses) {
  PendingCalls calls;
  std::optional<Outcome> expired, stale, bad;
  calls.AddWrite(1, 1, kFar, Into(&expired));
  calls.AddWrite(2, 1, kFar, Into(&stale));
  calls.AddWrite(3, 1, kFar, Into(&bad));
  std::vector<ApplyResult> results = {Applied(1, 1), Applied(2, 1), Applied(3, 1)};
  results[0].session_error = ApplyResult::SessionError::kSessionExpired;
  results[1].session_error = ApplyResult::SessionError::kStaleSequence;
  results[2].ok = false;
  Completions done;
  calls.WritesApplied({MakeEntry(1, 1), MakeEntry(2, 1), MakeEntry(3, 1)}, results, &done);
  RunAll(&done);
  EXPECT_EQ(expired->status.code(), Status::Code::kAborted);
  EXPECT_TRUE(expired->session_expired);
  EXPECT_EQ(stale->status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(bad->status.code(), Status::Code::kInternal);
}

TEST(PendingCallsTest, ASnapshotFailsTheWritesItCovers) {
  PendingCalls calls;
  std::optional<Outcome> a, b;
  calls.AddWrite(5, 2, kFar, Into(&a));
  calls.AddWrite(9, 2, kFar, Into(&b));
  Completions done;
  calls.FailWritesUpTo(8, &done);
  RunAll(&done);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->status.code(), Status::Code::kUnavailable);
  EXPECT_FALSE(a->not_applied) << "the outcome is unknown";
  EXPECT_FALSE(b.has_value());
}

TEST(PendingCallsTest, AReadWaitsForItsQuorumThenForTheApplyIndex) {
  PendingCalls calls;
  std::optional<Outcome> r;
  const uint64_t id = calls.NextReadId();
  calls.AddRead(id, kFar, Into(&r));
  Completions done;
  calls.ReleaseReads(100, &done);
  EXPECT_TRUE(done.empty()) << "not confirmed by a quorum yet";
  calls.ReadConfirmed(id, 10);
  calls.ReleaseReads(9, &done);
  EXPECT_TRUE(done.empty()) << "confirmed at 10, applied 9";
  calls.ReleaseReads(10, &done);
  RunAll(&done);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->status.ok());
  EXPECT_EQ(r->index, 10u);
}

TEST(PendingCallsTest, AReadFailsWhenLeadershipIsLost) {
  PendingCalls calls;
  std::optional<Outcome> r;
  const uint64_t id = calls.NextReadId();
  calls.AddRead(id, kFar, Into(&r));
  Completions done;
  calls.ReadFailed(id, &done);
  calls.ReadFailed(id, &done);  // twice: answered once
  RunAll(&done);
  EXPECT_EQ(r->status.code(), Status::Code::kUnavailable);
}

TEST(PendingCallsTest, DeadlinesExpireWritesAndReads) {
  PendingCalls calls;
  const Clock::time_point now = Clock::now();
  std::optional<Outcome> w, r, later;
  calls.AddWrite(1, 1, now, Into(&w));
  calls.AddWrite(2, 1, kFar, Into(&later));
  calls.AddRead(calls.NextReadId(), now, Into(&r));
  Completions done;
  calls.ExpireDeadlines(now, &done);
  RunAll(&done);
  EXPECT_EQ(w->status.code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(r->status.code(), Status::Code::kDeadlineExceeded);
  EXPECT_FALSE(later.has_value());
}

TEST(PendingCallsTest, RepliesAreTakenOnceByRpcId) {
  PendingCalls calls;
  int called = 0;
  const uint64_t a = calls.AddReply([&](const raft::Message*) { ++called; });
  const uint64_t b = calls.AddReply([&](const raft::Message*) { ++called; });
  EXPECT_NE(a, b);
  PendingCalls::ReplyCallback reply = calls.TakeReply(a);
  ASSERT_TRUE(reply);
  reply(nullptr);
  EXPECT_FALSE(calls.TakeReply(a));
  std::vector<PendingCalls::ReplyCallback> left;
  Completions done;
  calls.FailAll(&done, &left);
  ASSERT_EQ(left.size(), 1u);
  left[0](nullptr);
  EXPECT_EQ(called, 2);
}

TEST(PendingCallsTest, ShutdownFailsEveryWaitingCall) {
  PendingCalls calls;
  std::optional<Outcome> w, r, t;
  calls.AddWrite(1, 1, kFar, Into(&w));
  calls.AddRead(calls.NextReadId(), kFar, Into(&r));
  calls.AddTransfer(2, 1, kFar, Into(&t));
  Completions done;
  std::vector<PendingCalls::ReplyCallback> replies;
  calls.FailAll(&done, &replies);
  RunAll(&done);
  EXPECT_EQ(w->status.code(), Status::Code::kUnavailable);
  EXPECT_EQ(r->status.code(), Status::Code::kUnavailable);
  EXPECT_EQ(t->status.code(), Status::Code::kUnavailable);
}

// The apply thread applies in order on its own thread, runs the completions
// handed to it there, and WaitApplied returns only once everything handed
// was applied.
TEST(ApplyThreadTest, AppliesInOrderAndCompletesOnItsOwnThread) {
  std::vector<uint64_t> applied;
  std::thread::id apply_thread;
  std::atomic<int> completed{0};
  std::atomic<bool> completed_elsewhere{false};
  ApplyThread apply([&](const std::deque<Entry>& entries, Completions* out) {
    apply_thread = std::this_thread::get_id();
    for (const Entry& e : entries) applied.push_back(e.index());
    out->push_back([&] { completed.fetch_add(1); });
  });
  apply.Start();
  const std::thread::id caller = std::this_thread::get_id();
  for (uint64_t i = 1; i <= 100; ++i) {
    Completions handed;
    handed.push_back([&, caller] {
      if (std::this_thread::get_id() == caller) completed_elsewhere = true;
    });
    apply.Hand({MakeEntry(i, 1)}, &handed);
    EXPECT_TRUE(handed.empty());
  }
  apply.WaitApplied();
  ASSERT_EQ(applied.size(), 100u);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(applied[i], i + 1);
  EXPECT_NE(apply_thread, caller);
  apply.Stop();
  EXPECT_FALSE(completed_elsewhere);
  EXPECT_GE(completed.load(), 1);
}

}  // namespace
}  // namespace raftkv
