// Automatic compaction (node/auto_compactor.h): etcd's flag values, and the
// policy's decisions driven by a clock the test moves.
#include "node/auto_compactor.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace raftkv {
namespace {

constexpr int64_t kMinute = 60 * 1000;
constexpr int64_t kHour = 60 * kMinute;
using Mode = AutoCompactionOptions::Mode;

TEST(AutoCompactionFlags, ReadsEtcdsValues) {
  AutoCompactionOptions o;
  ASSERT_TRUE(ParseAutoCompaction("periodic", "0", &o).ok());
  EXPECT_EQ(o.mode, Mode::kOff);
  ASSERT_TRUE(ParseAutoCompaction("periodic", "72h", &o).ok());
  EXPECT_EQ(o.mode, Mode::kPeriodic);
  EXPECT_EQ(o.retention_ms, 72 * kHour);
  ASSERT_TRUE(ParseAutoCompaction("periodic", "1h30m", &o).ok());
  EXPECT_EQ(o.retention_ms, 90 * kMinute);
  ASSERT_TRUE(ParseAutoCompaction("periodic", "2", &o).ok());  // hours
  EXPECT_EQ(o.retention_ms, 2 * kHour);
  ASSERT_TRUE(ParseAutoCompaction("revision", "1000", &o).ok());
  EXPECT_EQ(o.mode, Mode::kRevision);
  EXPECT_EQ(o.retention_revisions, 1000);
}

TEST(AutoCompactionFlags, RefusesWhatItCannotRead) {
  AutoCompactionOptions o;
  for (const auto& [mode, retention] : std::vector<std::pair<std::string, std::string>>{
           {"hourly", "1"}, {"", "1"}, {"revision", "1h"}, {"revision", "-5"}, {"periodic", "5x"},
           {"periodic", "h"}, {"periodic", "500ms"}, {"periodic", "99999999999999999h"},
           {"revision", "99999999999999999999"}}) {
    const Status s = ParseAutoCompaction(mode, retention, &o);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << mode << " " << retention;
    EXPECT_NE(s.message().find("--auto_compaction_"), std::string::npos) << s.message();
  }
}

TEST(AutoCompactionPolicy, RevisionModeKeepsTheRetentionEveryCheck) {
  AutoCompactionOptions o;
  ASSERT_TRUE(ParseAutoCompaction("revision", "100", &o).ok());
  AutoCompactionPolicy p(o);
  EXPECT_EQ(p.interval_ms(), 5 * kMinute);
  EXPECT_EQ(p.Tick(0, 50, 0), 0) << "nothing below the retention";
  EXPECT_EQ(p.Tick(5 * kMinute, 1000, 0), 900);
  EXPECT_EQ(p.Tick(6 * kMinute, 2000, 900), 0) << "between checks";
  EXPECT_EQ(p.Tick(10 * kMinute, 2000, 900), 1900);
  EXPECT_EQ(p.Tick(15 * kMinute, 2000, 1900), 0) << "compacted there already";
}

TEST(AutoCompactionPolicy, PeriodicModeCompactsThroughTheRevisionOfOneRetentionAgo) {
  AutoCompactionOptions o;
  ASSERT_TRUE(ParseAutoCompaction("periodic", "30m", &o).ok());
  AutoCompactionPolicy p(o);
  EXPECT_EQ(p.interval_ms(), 3 * kMinute);
  // The revision grows by 10 a minute; ticks every 3 minutes.
  int64_t compacted = 0;
  std::vector<std::pair<int64_t, int64_t>> done;  // (minute, revision)
  for (int64_t minute = 0; minute <= 120; minute += 3) {
    const int64_t target = p.Tick(minute * kMinute, 10 * minute + 1, compacted);
    if (target == 0) continue;
    EXPECT_GT(target, compacted);
    compacted = target;
    done.emplace_back(minute, target);
  }
  // Every 30 minutes from minute 30, through the revision of 30 minutes before.
  const std::vector<std::pair<int64_t, int64_t>> want = {{30, 1}, {60, 301}, {90, 601}, {120, 901}};
  EXPECT_EQ(done, want);
}

TEST(AutoCompactionPolicy, PeriodicModeOverAnHourCompactsHourly) {
  AutoCompactionOptions o;
  ASSERT_TRUE(ParseAutoCompaction("periodic", "3h", &o).ok());
  AutoCompactionPolicy p(o);
  EXPECT_EQ(p.interval_ms(), 6 * kMinute);
  std::vector<int64_t> minutes;
  int64_t compacted = 0;
  for (int64_t minute = 0; minute <= 6 * 60; minute += 6) {
    const int64_t target = p.Tick(minute * kMinute, minute + 1, compacted);
    if (target == 0) continue;
    EXPECT_EQ(target, minute - 180 + 1) << "minute " << minute;
    compacted = target;
    minutes.push_back(minute);
  }
  EXPECT_EQ(minutes, (std::vector<int64_t>{180, 240, 300, 360}));
}

TEST(AutoCompactionPolicy, ANewLeaderSamplesAWholePeriodFirst) {
  AutoCompactionOptions o;
  ASSERT_TRUE(ParseAutoCompaction("periodic", "10m", &o).ok());
  AutoCompactionPolicy p(o);
  for (int64_t minute = 0; minute < 10; ++minute) EXPECT_EQ(p.Tick(minute * kMinute, 5, 0), 0);
  p.Reset();  // leadership lost and won again
  for (int64_t minute = 10; minute < 20; ++minute) EXPECT_EQ(p.Tick(minute * kMinute, 50, 0), 0);
  EXPECT_EQ(p.Tick(20 * kMinute, 90, 0), 50);
}

TEST(AutoCompactionPolicy, OffNeverCompacts) {
  AutoCompactionPolicy p{AutoCompactionOptions()};
  EXPECT_EQ(p.interval_ms(), 0);
  EXPECT_EQ(p.Tick(kHour, 1000, 0), 0);
}

}  // namespace
}  // namespace raftkv
