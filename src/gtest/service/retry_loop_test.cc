// RetryLoop: the endpoint rotation, redirects, back-off and deadline shared by
// the KV and admin clients.
#include "client/retry_loop.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace raftkv {
namespace {

using std::chrono::milliseconds;

TEST(RetryLoopTest, StartsAtTheLeaderThenGoesRoundTheEndpoints) {
  const std::vector<std::string> eps = {"a:1", "b:2", "c:3"};
  RetryLoop loop(eps, "b:2", milliseconds(1000));
  ASSERT_TRUE(loop.Start());
  EXPECT_EQ(loop.target(), "b:2");
  loop.Advance();
  EXPECT_EQ(loop.target(), "c:3");
  loop.Advance();
  EXPECT_EQ(loop.target(), "a:1");

  // No leader: the first endpoint. A leader outside the list: next is the first.
  RetryLoop fresh(eps, "", milliseconds(1000));
  EXPECT_EQ(fresh.target(), "a:1");
  RetryLoop outside(eps, "z:9", milliseconds(1000));
  EXPECT_EQ(outside.target(), "z:9");
  outside.Advance();
  EXPECT_EQ(outside.target(), "a:1");
}

TEST(RetryLoopTest, RedirectsInCirclesAskForABackoffAfterARound) {
  const std::vector<std::string> eps = {"a:1", "b:2"};
  RetryLoop loop(eps, "", milliseconds(1000));
  EXPECT_FALSE(loop.Redirect("b:2"));
  EXPECT_EQ(loop.target(), "b:2");
  EXPECT_FALSE(loop.Redirect("a:1"));
  EXPECT_TRUE(loop.Redirect("b:2"));  // a third redirect with two endpoints
  EXPECT_TRUE(loop.Backoff());        // resets the count
  EXPECT_FALSE(loop.Redirect("a:1"));
}

TEST(RetryLoopTest, StopsAtTheDeadlineAndSaysWhatWasTried) {
  const std::vector<std::string> eps = {"a:1", "b:2"};
  RetryLoop loop(eps, "", milliseconds(120));
  int attempts = 0;
  const auto start = RetryLoop::Clock::now();
  while (loop.Start()) {
    ++attempts;
    loop.Advance();
    if (!loop.Backoff()) break;
  }
  const auto elapsed = RetryLoop::Clock::now() - start;
  EXPECT_GE(attempts, 2);  // 50 ms, then 100 ms capped at the deadline
  EXPECT_LE(attempts, 4);
  EXPECT_GE(elapsed, milliseconds(110));
  EXPECT_LT(elapsed, milliseconds(1000));
  EXPECT_EQ(loop.tried(), eps);
  const grpc::Status s =
      loop.GaveUp(grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"), "Put");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("connection refused (Put gave up after "), std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("endpoints tried: a:1, b:2)"), std::string::npos)
      << s.error_message();

  // The first attempt starts even with no time at all.
  RetryLoop none(eps, "", milliseconds(0));
  EXPECT_TRUE(none.Start());
  EXPECT_FALSE(none.Start());
}

}  // namespace
}  // namespace raftkv
