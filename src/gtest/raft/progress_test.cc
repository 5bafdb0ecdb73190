// A leader's view of one follower (leader/progress.h): probe, replicate and
// snapshot states, the in-flight window, stale rejections, stalls.
#include "leader/progress.h"

#include <gtest/gtest.h>

namespace raftkv::raft {
namespace {

TEST(ProgressTest, ProbeSendsOneMessageAtATime) {
  Progress pr(11, 4);  // a new leader whose last index is 10
  EXPECT_EQ(pr.state(), Progress::State::kProbe);
  EXPECT_EQ(pr.match(), 0u);
  EXPECT_EQ(pr.next(), 11u);
  EXPECT_FALSE(pr.IsPaused());
  pr.OnSent(10);
  EXPECT_TRUE(pr.IsPaused()) << "a probe waits for its answer";
  EXPECT_EQ(pr.next(), 11u) << "probing does not advance next optimistically";
  pr.ResumeProbe();  // a heartbeat interval passed, or the call failed
  EXPECT_FALSE(pr.IsPaused());
}

TEST(ProgressTest, RejectedProbeBacksOffToTheHint) {
  Progress pr(11, 4);
  pr.OnSent(10);
  // Only the answer to the latest probe (prev = next - 1 = 10) counts.
  EXPECT_FALSE(pr.OnReject(7, 5)) << "a stale rejection";
  EXPECT_TRUE(pr.IsPaused());
  EXPECT_TRUE(pr.OnReject(10, 6));
  EXPECT_EQ(pr.next(), 6u);
  EXPECT_FALSE(pr.IsPaused());
  // A hint above the rejected index is clamped to it.
  pr.OnSent(10);
  EXPECT_TRUE(pr.OnReject(5, 9));
  EXPECT_EQ(pr.next(), 5u);
  // Never below match + 1.
  EXPECT_TRUE(pr.OnSuccess(3));
  pr.OnSent(10);
  EXPECT_TRUE(pr.OnReject(pr.next() - 1, 1));
  EXPECT_EQ(pr.next(), 4u);
}

TEST(ProgressTest, ReplicatePipelinesUpToTheWindow) {
  Progress pr(11, 3);
  EXPECT_TRUE(pr.OnSuccess(10));
  pr.BecomeReplicate();
  EXPECT_EQ(pr.next(), 11u);
  pr.OnSent(12);
  pr.OnSent(15);
  EXPECT_EQ(pr.next(), 16u) << "next moves on without waiting";
  EXPECT_FALSE(pr.IsPaused());
  pr.OnSent(20);
  EXPECT_EQ(pr.inflight(), 3u);
  EXPECT_TRUE(pr.IsPaused()) << "the window is full";
  EXPECT_TRUE(pr.OnSuccess(15));  // acknowledges the first two messages
  EXPECT_EQ(pr.inflight(), 1u);
  EXPECT_EQ(pr.match(), 15u);
  EXPECT_FALSE(pr.IsPaused());
  EXPECT_FALSE(pr.OnSuccess(12)) << "an older acknowledgement is not news";
  EXPECT_EQ(pr.match(), 15u);
  // An empty AppendEntries (heartbeat at next - 1) adds nothing in flight.
  pr.OnSent(20);
  EXPECT_EQ(pr.inflight(), 1u);
}

TEST(ProgressTest, ReplicatePausesAtTheBytesInFlight) {
  Progress pr(11, 64, 1000);  // 64 messages, 1,000 entry bytes
  EXPECT_TRUE(pr.OnSuccess(10));
  pr.BecomeReplicate();
  pr.OnSent(12, 600);
  EXPECT_FALSE(pr.IsPaused()) << "600 of 1,000 bytes in flight";
  pr.OnSent(13, 400);
  EXPECT_EQ(pr.inflight_bytes(), 1000u);
  EXPECT_TRUE(pr.IsPaused()) << "the byte window is full, the message window is not";
  EXPECT_TRUE(pr.OnSuccess(12));
  EXPECT_EQ(pr.inflight_bytes(), 400u);
  EXPECT_FALSE(pr.IsPaused());
  pr.OnSent(20, 5000);  // a message may carry more than what was left of the window
  EXPECT_TRUE(pr.IsPaused());
  EXPECT_TRUE(pr.OnSuccess(20));
  EXPECT_EQ(pr.inflight_bytes(), 0u);
  EXPECT_FALSE(pr.IsPaused());
  // Falling back to probing forgets what was in flight, bytes included.
  pr.OnSent(25, 2000);
  pr.BecomeProbe();
  EXPECT_EQ(pr.inflight_bytes(), 0u);
  pr.BecomeReplicate();
  EXPECT_FALSE(pr.IsPaused());
}

TEST(ProgressTest, ReplicateRejectionFallsBackToProbing) {
  Progress pr(11, 8);
  EXPECT_TRUE(pr.OnSuccess(10));
  pr.BecomeReplicate();
  pr.OnSent(14);
  pr.OnSent(18);
  EXPECT_FALSE(pr.OnReject(9, 9)) << "at or below match: answers an old message";
  EXPECT_EQ(pr.state(), Progress::State::kReplicate);
  EXPECT_TRUE(pr.OnReject(14, 12));
  EXPECT_EQ(pr.state(), Progress::State::kProbe);
  EXPECT_EQ(pr.next(), 12u);
  EXPECT_EQ(pr.inflight(), 0u);
  EXPECT_EQ(pr.match(), 10u) << "a rejection never lowers match";
}

TEST(ProgressTest, StallIsDetectedAfterTheLimit) {
  Progress pr(1, 8);
  EXPECT_FALSE(pr.CheckStalled(2)) << "nothing in flight";
  pr.BecomeReplicate();
  pr.OnSent(5);
  EXPECT_FALSE(pr.CheckStalled(3));
  EXPECT_FALSE(pr.CheckStalled(3));
  EXPECT_TRUE(pr.CheckStalled(3)) << "three intervals with the same messages out";
  EXPECT_TRUE(pr.OnSuccess(5));  // progress resets the count
  pr.OnSent(9);
  EXPECT_FALSE(pr.CheckStalled(3));
}

TEST(ProgressTest, SnapshotPausesUntilInstalled) {
  Progress pr(1, 8);
  pr.BecomeSnapshot(100);
  EXPECT_EQ(pr.state(), Progress::State::kSnapshot);
  EXPECT_EQ(pr.pending_snapshot(), 100u);
  EXPECT_TRUE(pr.IsPaused());
  pr.OnSnapshotInstalled(100);
  EXPECT_EQ(pr.state(), Progress::State::kProbe);
  EXPECT_EQ(pr.match(), 100u);
  EXPECT_EQ(pr.next(), 101u);
  EXPECT_EQ(pr.pending_snapshot(), 0u);
  EXPECT_FALSE(pr.IsPaused());
}

TEST(ProgressTest, RegressedFollowerIsProbedFromWhatItHolds) {
  Progress pr(1, 8);
  EXPECT_TRUE(pr.OnSuccess(50));
  pr.BecomeReplicate();
  pr.OnSent(60);
  pr.OnRegressed(47);  // it lost acknowledged entries 48..50
  EXPECT_EQ(pr.state(), Progress::State::kProbe);
  EXPECT_EQ(pr.match(), 47u);
  EXPECT_EQ(pr.next(), 48u);
  EXPECT_EQ(pr.inflight(), 0u);
  // 0 <= match < next holds in every state.
  EXPECT_LT(pr.match(), pr.next());
}

TEST(ProgressTest, StateNames) {
  EXPECT_STREQ(ProgressStateName(Progress::State::kProbe), "probe");
  EXPECT_STREQ(ProgressStateName(Progress::State::kReplicate), "replicate");
  EXPECT_STREQ(ProgressStateName(Progress::State::kSnapshot), "snapshot");
}

}  // namespace
}  // namespace raftkv::raft
