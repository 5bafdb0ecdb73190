// raftkv-bench: the benchmark of raftkv, a gtest binary whose tests are the
// scenarios (see src/bench/scenario.h):
//
//   build/raftkv-bench --gtest_filter=Benchmark.Write            # 80000 Puts, 64 B, 2 followers
//   build/raftkv-bench --gtest_filter=Benchmark.Write:Benchmark.Echo --requests=20000
//   build/raftkv-bench --gtest_filter=Benchmark.Batch --requests=1000000 --batch_ops=1000 --inflight=8
//   build/raftkv-bench --gtest_filter=Benchmark.Read --target=127.0.0.1:7001,127.0.0.1:7002
//   build/raftkv-bench --gtest_filter=Benchmark.Range --requests=20000 --range_limit=100
//   build/raftkv-bench --gtest_filter=Benchmark.Watch --requests=20000 --watchers=8
//   build/raftkv-bench --help   (gflags; --helpfull lists the gtest flags too)
//
// Every scenario prints its report (counts, throughput, latency percentiles,
// latency histogram, verification); at the end a summary table with one row
// per scenario run is printed and, with --json_out, written as a JSON array of
// one object per run. A run with any failed request or failed verification
// prints a FAILED line and fails its test: the binary exits non-zero.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include "client/grpc_runtime.h"
#include "client/security.h"
#include "bench/report.h"
#include "bench/scenario.h"
#include "testing/process_cluster.h"

DEFINE_uint64(requests, 80000, "Requests to send in each scenario (the timed part).");
DEFINE_int32(value_len, 64,
             "Value length in bytes (Write/Read); Echo payloads are key_len + value_len bytes.");
DEFINE_int32(key_len, 16, "Key length in bytes; keys are distinct within a run.");
DEFINE_int32(followers, 2,
             "Followers of the local cluster the benchmark starts: 1 + followers raftkv-server "
             "processes on 127.0.0.1, data in a temporary directory, torn down afterwards. "
             "Ignored with --target.");
DEFINE_string(target, "",
              "Use an existing cluster instead of starting one: comma-separated host:port list "
              "of (some of) its members; the leader is found through Status.");
DEFINE_bool(via_follower, false,
            "Send the load to a follower instead of the leader: the follower forwards writes, "
            "transactions and linearizable reads to the leader (the cost of forwarding).");
DEFINE_int32(conns, 4,
             "Client connections to the leader: distinct gRPC channels, each its own TCP "
             "connection.");
DEFINE_int32(client_cq_num, 1, "Client completion queues.");
DEFINE_int32(client_threads_per_cq, 2, "Client threads polling each completion queue.");
DEFINE_int32(inflight, 256,
             "Maximum outstanding requests (closed loop: each completion sends the next).");
DEFINE_int32(write_timeout_ms, 5000,
             "Deadline of each timed request in milliseconds (Puts, Gets and Echos alike); a "
             "request that misses it counts as failed (DEADLINE_EXCEEDED). The untimed calls "
             "(verification reads, Read's preload) get at least 10000 ms.");
DEFINE_string(json_out, "", "Write the reports of all scenario runs as a JSON array to this file.");
DEFINE_string(server_flags, "",
              "Extra raftkv-server flags for the local cluster, whitespace separated "
              "(e.g. \"--server_cq_num=1 --max_inflight_appends=16\").");
DEFINE_int32(metrics_port_base, 0,
             "Local cluster only: member i serves Prometheus metrics at "
             "http://127.0.0.1:<base + i>/metrics (doc/metrics.md); 0 = no metrics endpoint.");
DEFINE_uint64(verify_sample, 0,
              "After Write: 0 = read back every acknowledged write; N = a random sample of N of "
              "them. Read and Echo always check every answer.");
DEFINE_bool(sessions, true,
            "Write and Batch: tag every call with a client session (sequence numbers, exactly-once, as "
            "raftkvctl and KvClient do); false sends plain at-least-once Puts.");
DEFINE_int32(batch_ops, 1000,
             "Benchmark.Batch: Puts per KV.Batch call (each call is one log entry); --requests "
             "counts Puts, --inflight counts calls.");
DEFINE_uint64(range_keys, 10000,
              "Benchmark.Range: keys written before the timed Range calls (not timed); --requests "
              "counts Range calls.");
DEFINE_int32(range_limit, 100,
             "Benchmark.Range: most keys per Range call (each call starts at a random key).");
DEFINE_int32(watchers, 8,
             "Benchmark.Watch: watch streams on the run's keys, spread over all members, while "
             "--requests Puts go to the leader.");
DEFINE_bool(keep_cluster_dir, false,
            "Keep the local cluster's temporary directory (server logs and data) after the run; "
            "it is always kept when a run fails.");
DEFINE_string(floor_dir, "",
              "Benchmark.Write with --inflight=1 also measures the write's physical floor (the "
              "median Echo round trip and the median fdatasync of a small append) and prints "
              "'floor: write_p50_us=.. echo_rtt_p50_us=.. fsync_p50_us=.. ratio=..' with ratio = "
              "write_p50 / (2 x echo_rtt_p50 + fsync_p50). The directory of the fdatasync probe: "
              "on the filesystem of the members' data (default: the local cluster's own "
              "directory; with --target, no floor unless given).");
DEFINE_uint64(seed, 0, "Seed of keys, values and the verification sample; 0 = from the clock "
              "(or $RAFTKV_TEST_SEED).");

namespace raftkv {
namespace bench {
namespace {

std::vector<ScenarioReport>& AllReports() {
  static std::vector<ScenarioReport> reports;
  return reports;
}

void WriteJson() {
  if (FLAGS_json_out.empty()) return;
  std::ofstream out(FLAGS_json_out, std::ios::trunc);
  out << ToJsonArray(AllReports());
  if (!out) std::cerr << "raftkv-bench: cannot write " << FLAGS_json_out << std::endl;
}

BenchConfig ConfigFromFlags() {
  BenchConfig c;
  c.requests = FLAGS_requests;
  c.value_len = FLAGS_value_len;
  c.key_len = FLAGS_key_len;
  c.followers = FLAGS_followers;
  c.target = FLAGS_target;
  c.via_follower = FLAGS_via_follower;
  c.conns = FLAGS_conns;
  c.client_cq_num = FLAGS_client_cq_num;
  c.client_threads_per_cq = FLAGS_client_threads_per_cq;
  c.inflight = FLAGS_inflight;
  c.timeout_ms = FLAGS_write_timeout_ms;
  c.server_flags = SplitFlags(FLAGS_server_flags);
  c.metrics_port_base = FLAGS_metrics_port_base;
  c.verify_sample = FLAGS_verify_sample;
  c.keep_cluster_dir = FLAGS_keep_cluster_dir;
  c.sessions = FLAGS_sessions;
  c.batch_ops = FLAGS_batch_ops;
  c.range_keys = FLAGS_range_keys;
  c.range_limit = FLAGS_range_limit;
  c.watchers = FLAGS_watchers;
  c.floor_dir = FLAGS_floor_dir;
  static const uint64_t seed = FLAGS_seed != 0 ? FLAGS_seed : integration::TestSeed();
  c.seed = seed;
  return c;
}

void RunAndReport(Scenario scenario) {
  const BenchConfig config = ConfigFromFlags();
  const ScenarioReport report = RunScenario(scenario, config);
  std::cout << FormatReport(report) << std::flush;
  AllReports().push_back(report);
  WriteJson();  // after every run: a later crash keeps the earlier results
  EXPECT_TRUE(report.passed()) << FailureLine(report) << " (seed " << config.seed << ")";
}

TEST(Benchmark, Write) { RunAndReport(Scenario::kWrite); }
TEST(Benchmark, Read) { RunAndReport(Scenario::kRead); }
TEST(Benchmark, Echo) { RunAndReport(Scenario::kEcho); }
TEST(Benchmark, Batch) { RunAndReport(Scenario::kBatch); }
TEST(Benchmark, Txn) { RunAndReport(Scenario::kTxn); }
TEST(Benchmark, Range) { RunAndReport(Scenario::kRange); }
TEST(Benchmark, Watch) { RunAndReport(Scenario::kWatch); }

}  // namespace
}  // namespace bench
}  // namespace raftkv

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  gflags::SetUsageMessage(
      "the raftkv benchmark. Scenarios are gtest tests: --gtest_filter=Benchmark.Write, "
      "Benchmark.Read, Benchmark.Echo, Benchmark.Batch, Benchmark.Txn, Benchmark.Range, "
      "Benchmark.Watch (default: all).");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  raftkv::InitGrpcRuntime();
  // --tls_ca_file, --tls_cert_file, --tls_key_file, --token_file: for
  // --target clusters that use TLS (client/security.h).
  if (raftkv::Status bad = raftkv::InitChannelSecurityFromFlags(); !bad.ok()) {
    std::fprintf(stderr, "raftkv-bench: %s\n", bad.message().c_str());
    return 2;
  }
  const int rc = RUN_ALL_TESTS();
  const auto& reports = raftkv::bench::AllReports();
  if (!reports.empty()) {
    std::cout << "\nraftkv benchmark summary (latencies in microseconds, per request from send "
                 "to completion):\n"
              << raftkv::bench::FormatSummaryTable(reports);
    const raftkv::bench::ScenarioReport* write = nullptr;
    const raftkv::bench::ScenarioReport* echo = nullptr;
    for (const auto& r : reports) {
      if (r.scenario == "Write" && !write) write = &r;
      if (r.scenario == "Echo" && !echo) echo = &r;
    }
    if (write && echo && echo->ops_per_sec > 0) {
      std::printf("Write / Echo throughput: %.0f / %.0f ops/s = %.2f of the gRPC ceiling\n",
                  write->ops_per_sec, echo->ops_per_sec, write->ops_per_sec / echo->ops_per_sec);
    }
    for (const auto& r : reports) {
      const std::string line = raftkv::bench::FailureLine(r);
      if (!line.empty()) std::printf("%s\n", line.c_str());
    }
    if (!FLAGS_json_out.empty()) std::printf("JSON report: %s\n", FLAGS_json_out.c_str());
    std::fflush(stdout);
  }
  return rc;
}
