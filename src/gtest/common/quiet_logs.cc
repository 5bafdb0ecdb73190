// Process-wide setup of node_tests, server_tests and ops_tests: keep glog's INFO chatter (elections,
// log recovery) out of the test output unless RAFTKV_TEST_VERBOSE is set.
#include <gtest/gtest.h>

#include <glog/logging.h>

#include <cstdlib>

namespace {

class QuietLogs : public ::testing::Environment {
 public:
  void SetUp() override {
    if (std::getenv("RAFTKV_TEST_VERBOSE") == nullptr) FLAGS_minloglevel = google::GLOG_WARNING;
  }
};

// Registered before main() runs; SetUp runs inside RUN_ALL_TESTS, after every
// static initializer (glog's flags included).
[[maybe_unused]] ::testing::Environment* const kQuietLogs =
    ::testing::AddGlobalTestEnvironment(new QuietLogs);

}  // namespace
