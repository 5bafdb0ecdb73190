// The benchmark report: one ScenarioReport per scenario run, printed as text
// (summary, latency percentiles, a log-scale latency histogram) and as a JSON
// object (--json_out).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench/histogram.h"
#include "client/json.h"

namespace raftkv {
namespace bench {

// Latency summary in microseconds.
struct LatencySummary {
  double avg = 0, p50 = 0, p90 = 0, p99 = 0, p999 = 0, min = 0, max = 0;
};
// From a histogram of nanoseconds.
LatencySummary Summarize(const Histogram& latency_ns);

// What the post-run check found.
struct Verification {
  // "all", "sample" (Write, Batch, Txn), "every read" (Read), "every echo"
  // (Echo), "every range" (Range), "every watcher" (Watch: each acknowledged
  // write once per watcher, in revision order).
  std::string mode = "none";
  uint64_t population = 0;     // values that could have been checked
  uint64_t checked = 0;        // values checked
  uint64_t ok = 0;             // ... and found as expected
  uint64_t missing = 0;        // key absent
  uint64_t wrong = 0;          // present with another value / wrong payload
  uint64_t errors = 0;         // the check itself failed (RPC error)
  std::map<std::string, uint64_t> errors_by_status;
  bool passed() const { return checked == ok; }
};

// CPU time (user + system, seconds) used during the timed part of a run,
// and the servers' thread wake-ups (voluntary context switches,
// bench/process_probe.h); -1 where not measured (the servers of an external
// cluster; wake-ups: not Linux).
struct CpuSeconds {
  double client = -1;     // the benchmark process
  double leader = -1;     // the leader's raftkv-server process
  double followers = -1;  // all followers together
  double leader_switches = -1;
  double followers_switches = -1;  // all followers together
};

// The floor of one write in flight (bench/floor.h): measured by
// Benchmark.Write with --inflight=1; -1 where not measured.
struct Floor {
  double write_p50_us = -1;
  double echo_rtt_p50_us = -1;  // one Echo at a time, the Put's payload size
  double fsync_p50_us = -1;     // a small append + fdatasync in the data's filesystem
  double ratio = -1;            // write_p50 / (2 x echo_rtt_p50 + fsync_p50)
  std::string error;            // why it could not be measured
  bool measured() const { return ratio > 0; }
};

struct ScenarioReport {
  std::string scenario;  // "Write", "Read", "Echo", "Batch", "Txn", "Range", "Watch"
  std::string operation;  // "Put", "Get", "Echo", "Put (batched)", "Txn", "Range", "Put"
  // Setup
  std::string cluster;   // "local" (started by the benchmark) or "external"
  std::string target;    // the leader the load went to
  std::string via;       // the follower the load went to (forwarded), or ""
  int followers = 0;
  int value_len = 0;
  int key_len = 0;
  int conns = 0;
  int inflight = 0;
  int client_cq_num = 0;
  int client_threads_per_cq = 0;
  int timeout_ms = 0;
  // Batch: writes per call (the last call may carry fewer). requests,
  // acknowledged, failed and ops_per_sec then count writes; `calls` counts
  // the RPCs and the latency histogram is per call.
  int ops_per_call = 1;
  uint64_t calls = 0;
  std::string server_flags;
  uint64_t seed = 0;
  // Range: keys returned per call at most (--range_limit) out of range_keys
  // keys written first; Watch: watchers of the run's keys.
  int range_limit = 0;
  uint64_t range_keys = 0;
  int watchers = 0;
  // Results
  uint64_t requests = 0;
  uint64_t acknowledged = 0;
  uint64_t failed = 0;
  uint64_t wrong_answer = 0;  // part of failed: OK status but not the expected answer
  std::map<std::string, uint64_t> failed_by_status;  // gRPC code name -> count
  double seconds = 0;
  double ops_per_sec = 0;
  double mb_per_sec = 0;  // (key_len + value_len) * acknowledged / seconds / 1e6
  Histogram latency_ns;
  CpuSeconds cpu;
  // Range: keys returned; Watch: events delivered to all watchers together.
  // items_per_sec: Range over the timed load, Watch from the first write
  // sent to the last event received.
  std::string items_name;  // "keys", "events"; empty: not counted
  uint64_t items = 0;
  double items_per_sec = 0;
  // Watch: from a Put being sent to its event reaching a watcher, one
  // sample per event delivered.
  Histogram delivery_ns;
  Verification verified;
  Floor floor;  // Write with one request in flight
  std::string setup_error;  // non-empty: the scenario could not run

  bool passed() const {
    return setup_error.empty() && failed == 0 && acknowledged == requests && verified.passed();
  }
};

// Fills acknowledged/failed/.../ops_per_sec/mb_per_sec from the raw counts.
void ComputeRates(ScenarioReport* report);

// The log-scale latency histogram, in microseconds, one line per bucket from
// the bucket holding the minimum to the one holding the maximum. Bucket
// bounds follow 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x 10^k us (ten per decade,
// each 1.2-1.33x the previous):
//   [     500,      600)       1234    1.5%    1.54%  ######
std::string FormatHistogram(const Histogram& latency_ns, int bar_width = 40);

// The full text report of one run (ends with a FAILED line if it failed).
std::string FormatReport(const ScenarioReport& report);

// The FAILED line of a failed run (empty if it passed).
std::string FailureLine(const ScenarioReport& report);

// One row per run: scenario, sizes, counts, ops/s, MB/s, latency percentiles.
std::string FormatSummaryTable(const std::vector<ScenarioReport>& reports);

// One JSON object for a run, and a JSON array of runs (with a newline).
std::string ToJson(const ScenarioReport& report);
std::string ToJsonArray(const std::vector<ScenarioReport>& reports);

using raftkv::JsonString;  // client/json.h

}  // namespace bench
}  // namespace raftkv
