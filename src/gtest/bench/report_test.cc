// Tests of the benchmark's report formatting and key/value generation.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include <unistd.h>

#include "bench/floor.h"
#include "bench/process_probe.h"
#include "bench/keyspace.h"
#include "bench/report.h"
#include "bench/scenario.h"
#include "gtest/common/temp_dir.h"

namespace raftkv {
namespace bench {
namespace {

ScenarioReport SampleReport() {
  ScenarioReport r;
  r.scenario = "Write";
  r.operation = "Put";
  r.cluster = "local";
  r.target = "127.0.0.1:20001";
  r.followers = 2;
  r.value_len = 64;
  r.key_len = 16;
  r.conns = 4;
  r.inflight = 256;
  r.client_cq_num = 1;
  r.client_threads_per_cq = 2;
  r.requests = 1000;
  r.acknowledged = 1000;
  r.seconds = 0.5;
  // 1..1000 us
  for (int i = 1; i <= 1000; ++i) r.latency_ns.Record(static_cast<uint64_t>(i) * 1000);
  r.verified.mode = "all";
  r.verified.population = r.verified.checked = r.verified.ok = 1000;
  ComputeRates(&r);
  return r;
}

TEST(Report, Rates) {
  const ScenarioReport r = SampleReport();
  EXPECT_DOUBLE_EQ(r.ops_per_sec, 2000);
  EXPECT_DOUBLE_EQ(r.mb_per_sec, 2000 * 80 / 1e6);
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(FailureLine(r), "");
}

TEST(Report, SummarizeInMicroseconds) {
  const LatencySummary s = Summarize(SampleReport().latency_ns);
  EXPECT_DOUBLE_EQ(s.avg, 500.5);
  EXPECT_NEAR(s.p50, 500, 500 / 128.0);
  EXPECT_NEAR(s.p99, 990, 990 / 128.0);
  EXPECT_DOUBLE_EQ(s.max, 1000);
  EXPECT_DOUBLE_EQ(s.min, 1);
}

TEST(Report, JsonHasTheAgreedKeys) {
  const std::string json = ToJson(SampleReport());
  for (const char* key : {"\"scenario\": \"Write\"", "\"requests\": 1000", "\"acknowledged\": 1000",
                          "\"failed\": 0", "\"seconds\": ", "\"ops_per_sec\": 2000.0",
                          "\"mb_per_sec\": ", "\"latency_us\": {\"avg\": 500.5", "\"p50\": ",
                          "\"p90\": ", "\"p99\": ", "\"p999\": ", "\"max\": 1000.0",
                          "\"failed_by_status\": {}", "\"value_len\": 64", "\"key_len\": 16",
                          "\"followers\": 2", "\"conns\": 4", "\"inflight\": 256",
                          "\"client_cq_num\": 1", "\"client_threads_per_cq\": 2",
                          "\"target\": \"127.0.0.1:20001\"", "\"verified\": {\"mode\": \"all\"",
                          "\"passed\": true"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " not in " << json;
  }
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  const std::string array = ToJsonArray({SampleReport(), SampleReport()});
  EXPECT_EQ(array.substr(0, 2), "[\n");
  EXPECT_NE(array.find("},\n  {"), std::string::npos);
}

TEST(Report, JsonStringEscapes) {
  EXPECT_EQ(JsonString("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
}

TEST(Report, FailureIsLoudAndCounted) {
  ScenarioReport r = SampleReport();
  r.acknowledged = 990;
  r.failed = 10;
  r.failed_by_status["DEADLINE_EXCEEDED"] = 7;
  r.failed_by_status["UNAVAILABLE"] = 3;
  r.verified.population = r.verified.checked = 990;
  r.verified.ok = 989;
  r.verified.missing = 1;
  EXPECT_FALSE(r.passed());
  const std::string line = FailureLine(r);
  EXPECT_EQ(line.rfind("FAILED: Benchmark.Write: 10 of 1000 requests failed", 0), 0u) << line;
  EXPECT_NE(line.find("DEADLINE_EXCEEDED: 7"), std::string::npos) << line;
  EXPECT_NE(line.find("UNAVAILABLE: 3"), std::string::npos) << line;
  EXPECT_NE(line.find("missing 1"), std::string::npos) << line;
  EXPECT_NE(FormatReport(r).find(line), std::string::npos);
  EXPECT_NE(ToJson(r).find("\"passed\": false"), std::string::npos);
  EXPECT_NE(FormatSummaryTable({r}).find("FAILED"), std::string::npos);
}

TEST(Report, HistogramTextCoversEveryRequest) {
  const ScenarioReport r = SampleReport();
  const std::string text = FormatHistogram(r.latency_ns);
  // 1..1000 us: buckets from [1, 1.2) to [800, 1000) and [1000, 1200).
  EXPECT_NE(text.find("[     1.0,      1.2)"), std::string::npos) << text;
  EXPECT_NE(text.find("[     800,     1000)"), std::string::npos) << text;
  EXPECT_NE(text.find("[    1000,     1200)"), std::string::npos) << text;
  EXPECT_NE(text.find("100.00%"), std::string::npos) << text;
  EXPECT_NE(text.find("####"), std::string::npos) << text;
  EXPECT_EQ(FormatHistogram(Histogram()), "latency histogram: no successful requests\n");
}

TEST(Report, SummaryTableHasOneRowPerRun) {
  ScenarioReport echo = SampleReport();
  echo.scenario = "Echo";
  const std::string table = FormatSummaryTable({SampleReport(), echo});
  EXPECT_NE(table.find("Benchmark.Write"), std::string::npos);
  EXPECT_NE(table.find("Benchmark.Echo"), std::string::npos);
  EXPECT_NE(table.find("p99_us"), std::string::npos);
}

// The floor of one write in flight: its line after the report, its column
// in the summary table, its JSON object; nothing where it was not measured.
TEST(Report, TheFloorIsReportedWhereItWasMeasured) {
  ScenarioReport plain = SampleReport();
  ScenarioReport one = SampleReport();
  one.inflight = 1;
  one.floor.write_p50_us = 900;
  one.floor.echo_rtt_p50_us = 100;
  one.floor.fsync_p50_us = 400;
  ComputeFloorRatio(&one.floor);
  EXPECT_DOUBLE_EQ(one.floor.ratio, 1.5);
  EXPECT_NE(FormatReport(one).find("floor: write_p50_us=900 echo_rtt_p50_us=100 fsync_p50_us=400 "
                                   "ratio=1.50\n"),
            std::string::npos)
      << FormatReport(one);
  EXPECT_EQ(FormatReport(plain).find("floor:"), std::string::npos);
  EXPECT_NE(ToJson(one).find("\"floor\": {\"write_p50_us\": 900.0"), std::string::npos) << ToJson(one);
  EXPECT_EQ(ToJson(plain).find("floor"), std::string::npos);
  const std::string table = FormatSummaryTable({plain, one});
  EXPECT_NE(table.find(" floor "), std::string::npos) << table;
  EXPECT_NE(table.find(" 1.50  ok"), std::string::npos) << table;
  EXPECT_NE(table.find("     -  ok"), std::string::npos) << table;
  // Not measured: one of the medians is missing.
  one.floor.fsync_p50_us = -1;
  ComputeFloorRatio(&one.floor);
  EXPECT_FALSE(one.floor.measured());
}

// The servers' wake-ups: a line per request in the text (leader, and each
// follower's share), totals in the JSON; nothing where they were not counted.
TEST(Report, WakeUpsAreReportedPerRequestWhereCounted) {
  ScenarioReport plain = SampleReport();
  ScenarioReport counted = SampleReport();
  counted.cpu.leader_switches = 21500;  // 1000 requests
  counted.cpu.followers_switches = 21000;  // 2 followers
  EXPECT_NE(FormatReport(counted).find("wake-ups   per request: leader 21.5, each follower 10.5 "),
            std::string::npos)
      << FormatReport(counted);
  EXPECT_EQ(FormatReport(plain).find("wake-ups"), std::string::npos);
  EXPECT_NE(ToJson(counted).find("\"context_switches\": {\"leader\": 21500, \"followers\": 21000}"),
            std::string::npos)
      << ToJson(counted);
  EXPECT_NE(ToJson(plain).find("\"context_switches\": {\"leader\": null, \"followers\": null}"),
            std::string::npos)
      << ToJson(plain);
}

// The probe reads a process's CPU time and its threads' voluntary switches:
// a thread of this process that sleeps is counted; a missing or malformed
// /proc entry gives -1, not a number.
TEST(ProcessProbe, CountsThisProcesssWakeUpsAndRefusesWhatItCannotRead) {
  const std::string self = "/proc/" + std::to_string(::getpid());
  const double before = VoluntarySwitchesIn(self);
  if (before < 0) GTEST_SKIP() << "no /proc task status here";
  std::thread sleeper([] {
    for (int i = 0; i < 20; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  // Counted while the thread still lives: it ends after this read.
  double during = before;
  for (int i = 0; i < 200 && during < before + 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    during = VoluntarySwitchesIn(self);
  }
  sleeper.join();
  EXPECT_GE(during, before + 20);
  EXPECT_GE(CpuSecondsIn(self), 0);
  testing_util::TempDir dir;
  EXPECT_LT(VoluntarySwitchesIn(dir.Join("gone")), 0);
  EXPECT_LT(CpuSecondsIn(dir.Join("gone")), 0);
  std::ofstream(dir.Join("stat")) << "123 (raftkv-server) S 1 2";  // cut short
  EXPECT_LT(CpuSecondsIn(dir.path()), 0);
}

TEST(Report, TheFsyncProbeMeasuresAndCleansUp) {
  testing_util::TempDir dir;
  std::string error;
  const double us = MedianFsyncMicros(dir.path(), 5, 128, &error);
  EXPECT_GT(us, 0) << error;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  EXPECT_LT(MedianFsyncMicros(dir.Join("missing"), 5, 128, &error), 0);
  EXPECT_NE(error.find("missing"), std::string::npos) << error;
}

TEST(KeySpace, KeysAreDistinctAndExactlyKeyLen) {
  KeySpace ks(100000, 16, 64, 1);
  ASSERT_EQ(ks.error(), "");
  std::set<std::string> keys;
  for (uint64_t i = 0; i < 100000; i += 7) {
    const std::string k = ks.Key(i);
    ASSERT_EQ(k.size(), 16u);
    keys.insert(k);
  }
  EXPECT_EQ(keys.size(), (100000 + 6) / 7);
  EXPECT_NE(KeySpace(10, 16, 64, 1).Key(3), KeySpace(10, 16, 64, 2).Key(3));  // tag from the seed
}

TEST(KeySpace, ValuesAreDeterministicDistinctAndExactlyValueLen) {
  for (int len : {0, 1, 16, 17, 64, 4096}) {
    KeySpace a(1000, 16, len, 9), b(1000, 16, len, 9);
    for (uint64_t i = 0; i < 1000; i += 37) {
      EXPECT_EQ(a.Value(i).size(), static_cast<size_t>(len));
      EXPECT_EQ(a.Value(i), b.Value(i));
      if (len >= 16) {
        EXPECT_NE(a.Value(i), a.Value(i + 1));
      }
    }
  }
}

TEST(KeySpace, KeyLenTooShort) {
  EXPECT_EQ(KeySpace(100, 2, 8, 0).error(), "");
  EXPECT_NE(KeySpace(101, 2, 8, 0).error().find("too short"), std::string::npos);
  EXPECT_NE(KeySpace(10, 0, 8, 0).error(), "");
}

// Regression: Echo once built a KeySpace whose key length failed validation
// and then copied payloads out of its never-allocated pool (ASan:
// stack-buffer-overflow). A KeySpace in an error state must refuse to work.
TEST(KeySpaceDeathTest, RefusesValuesAfterAnError) {
  KeySpace ks(1000, 1, 64, 0);
  ASSERT_NE(ks.error(), "");
  std::string value;
  EXPECT_DEATH(ks.FillValue(0, &value), "KeySpace used despite");
}

TEST(Config, Validation) {
  BenchConfig c;
  EXPECT_EQ(ValidateConfig(c), "");
  c.requests = 0;
  EXPECT_NE(ValidateConfig(c), "");
  c = BenchConfig();
  c.target = "nohost";
  EXPECT_NE(ValidateConfig(c).find("--target"), std::string::npos);
  c = BenchConfig();
  c.inflight = 0;
  EXPECT_NE(ValidateConfig(c), "");
  EXPECT_EQ(SplitFlags("  --a=1\t--b=2\n"), (std::vector<std::string>{"--a=1", "--b=2"}));
}

}  // namespace
}  // namespace bench
}  // namespace raftkv
