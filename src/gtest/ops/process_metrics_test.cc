// Tests of the process metrics (ops/process_metrics.h): the parsing of
// /proc/<pid>/stat and /proc/stat on fixed texts, then this process's own.
#include "ops/process_metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace raftkv {
namespace {

// A line of /proc/<pid>/stat (proc(5)) whose command name holds a space and
// a ')': fields 14, 15 = 250, 50 ticks of CPU, 22 = 1000 ticks after boot,
// 23 = 123456789 bytes of virtual memory, 24 = 2000 resident pages.
constexpr char kStat[] =
    "4242 (raftkv (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 12 0 1000 "
    "123456789 2000 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";

TEST(ProcessMetricsTest, ParsesProcSelfStat) {
  ProcStat st;
  ASSERT_TRUE(ParseProcStat(kStat, &st));
  EXPECT_EQ(st.utime_ticks, 250u);
  EXPECT_EQ(st.stime_ticks, 50u);
  EXPECT_EQ(st.start_ticks, 1000u);
  EXPECT_EQ(st.vsize_bytes, 123456789u);
  EXPECT_EQ(st.rss_pages, 2000u);
}

TEST(ProcessMetricsTest, RefusesBrokenStat) {
  ProcStat st;
  EXPECT_FALSE(ParseProcStat("", &st));
  EXPECT_FALSE(ParseProcStat("4242 raftkv S 1 2 3", &st));       // no ')'
  EXPECT_FALSE(ParseProcStat("4242 (raftkv) S 1 4242 4242", &st));  // cut short
  std::string negative = kStat;
  negative.replace(negative.find(" 250 "), 5, " -25 ");
  EXPECT_FALSE(ParseProcStat(negative, &st));
  std::string word = kStat;
  word.replace(word.find(" 2000 "), 6, " many ");
  EXPECT_FALSE(ParseProcStat(word, &st));
}

TEST(ProcessMetricsTest, ParsesBootTime) {
  uint64_t btime = 0;
  ASSERT_TRUE(
      ParseBootTime("cpu  1 2 3\ncpu0 1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n", &btime));
  EXPECT_EQ(btime, 1700000000u);
  EXPECT_FALSE(ParseBootTime("cpu  1 2 3\nprocesses 9\n", &btime));
  EXPECT_FALSE(ParseBootTime("btime soon\n", &btime));
}

TEST(ProcessMetricsTest, FillsTheStandardMetrics) {
  ProcStat st;
  ASSERT_TRUE(ParseProcStat(kStat, &st));
  ProcessStats p;
  FillProcessStats(st, /*btime=*/1700000000, /*ticks_per_second=*/100, /*page_size=*/4096, &p);
  EXPECT_DOUBLE_EQ(p.cpu_seconds, 3.0);  // (250 + 50) / 100
  EXPECT_EQ(p.resident_bytes, 2000u * 4096);
  EXPECT_EQ(p.virtual_bytes, 123456789u);
  EXPECT_DOUBLE_EQ(p.start_time_seconds, 1700000010.0);  // boot + 1000 / 100
}

TEST(ProcessMetricsTest, ThisProcess) {
#if defined(__linux__)
  ProcessStats p;
  ASSERT_TRUE(ReadProcessStats(&p));
  EXPECT_GT(p.open_fds, 2u);  // stdin, stdout, stderr at least
  EXPECT_GE(p.max_fds, p.open_fds);
  EXPECT_GT(p.resident_bytes, 0u);
  EXPECT_GE(p.virtual_bytes, p.resident_bytes);
  EXPECT_GE(p.cpu_seconds, 0);
  // Started before now, and not before a day ago (a test process).
  const double now = std::chrono::duration<double>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LE(p.start_time_seconds, now + 1);
  EXPECT_GT(p.start_time_seconds, now - 86400);
#else
  ProcessStats p;
  EXPECT_FALSE(ReadProcessStats(&p));  // not available: the endpoint omits them
#endif
}

}  // namespace
}  // namespace raftkv
