// Lifeline (common/lifeline.h): a callback that outlives its owner does
// nothing, and closing waits for one that is running.
#include "common/lifeline.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

namespace raftkv {
namespace {

using namespace std::chrono_literals;

TEST(Lifeline, RunsUntilClosedAndNothingAfter) {
  Lifeline lifeline;
  const Lifeline::Line line = lifeline.line();
  int runs = 0;
  line.Run([&] { ++runs; });
  EXPECT_EQ(runs, 1);
  lifeline.Close();
  line.Run([&] { ++runs; });
  EXPECT_EQ(runs, 1);
}

// The owner (and its lifeline) gone: a callback still holding a line runs
// nothing (and its line's state is still there: ASan checks).
TEST(Lifeline, ALineOutlivesItsOwner) {
  struct Owner {
    int answers = 0;
    Lifeline lifeline;
  };
  auto owner = std::make_unique<Owner>();
  Owner* const raw = owner.get();
  const Lifeline::Line line = owner->lifeline.line();
  line.Run([raw] { ++raw->answers; });
  EXPECT_EQ(owner->answers, 1);
  owner.reset();
  bool ran = false;
  line.Run([&] { ran = true; });
  EXPECT_FALSE(ran);
}

TEST(Lifeline, CloseWaitsForACallbackThatIsRunning) {
  Lifeline lifeline;
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> finished{false};
  std::thread callback([&, line = lifeline.line()] {
    line.Run([&] {
      entered.set_value();
      released.wait();
      finished = true;
    });
  });
  entered.get_future().wait();
  auto closed = std::async(std::launch::async, [&] {
    lifeline.Close();
    return finished.load();
  });
  EXPECT_EQ(closed.wait_for(100ms), std::future_status::timeout) << "Close() returned while a callback ran";
  release.set_value();
  EXPECT_TRUE(closed.get()) << "Close() returned before the running callback finished";
  callback.join();
}

}  // namespace
}  // namespace raftkv
