// FindSanitizerReports: how ProcessCluster (and so every integration test,
// the benchmark smoke runs and raftkv-chaos) notices a sanitizer report of a
// raftkv-server process that did not otherwise make a request fail.
#include <gtest/gtest.h>

#include <string>

#include "testing/process_cluster.h"

namespace raftkv {
namespace integration {
namespace {

const char kCleanOutput[] =
    "=== process_cluster: start #1 of member 1 at 12:00:00.000: --id=1\n"
    "W1121 12:00:01.000 node.cc:100] no leader yet; runtime 3 s\n"
    "=== process_cluster: member 1 (pid 42) ended with status 0 at 12:00:02.000\n";

TEST(SanitizerScan, CleanOutputHasNoReports) {
  EXPECT_EQ(FindSanitizerReports(kCleanOutput), "");
  EXPECT_EQ(FindSanitizerReports(""), "");
}

TEST(SanitizerScan, FindsEachSanitizersReport) {
  const char* const reports[] = {
      "==123==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010\n"
      "    #0 0x55 in raftkv::Foo() src/node/node.cc:10\n",
      "==123==ERROR: LeakSanitizer: detected memory leaks\n"
      "Direct leak of 24 byte(s) in 1 object(s) allocated from:\n",
      "WARNING: ThreadSanitizer: data race (pid=123)\n"
      "  Write of size 8 at 0x7b04 by thread T3:\n",
      "src/storage/crc32c.cc:40:12: runtime error: left shift of 1 by 31 places cannot be "
      "represented in type 'int'\n"
      "SUMMARY: UndefinedBehaviorSanitizer: undefined-behavior src/storage/crc32c.cc:40:12\n",
  };
  for (const char* report : reports) {
    const std::string text =
        "an earlier line\n" + std::string(kCleanOutput) + report + kCleanOutput;
    const std::string found = FindSanitizerReports(text);
    EXPECT_NE(found.find(report), std::string::npos) << "text:\n" << text << "found:\n" << found;
    // From the report on, with some context after it.
    EXPECT_EQ(found.find("an earlier line"), std::string::npos) << found;
  }
}

TEST(SanitizerScan, ManyReportsAreCapped) {
  std::string text;
  for (int i = 0; i < 10000; ++i) text += "WARNING: ThreadSanitizer: data race (pid=1)\n";
  const std::string found = FindSanitizerReports(text);
  EXPECT_FALSE(found.empty());
  EXPECT_LT(found.size(), 20000u);
}

}  // namespace
}  // namespace integration
}  // namespace raftkv
