// Metrics of a raftkv-server, and their rendering in the Prometheus text
// exposition format (version 0.0.4), served by MetricsEndpoint
// (ops/metrics_endpoint.h) at http://<--metrics_address>:<--metrics_port>/metrics.
// The list of metrics and their meaning: doc/metrics.md.
//
// The hot paths (every fsync, every AppendEntries, every proposal) only do
// relaxed atomic increments: no locks, no allocation. A scrape reads the
// atomics; it may see one histogram observation counted in its bucket but
// not yet in the sum, which Prometheus tolerates (the bucket counts, and so
// _count, are always consistent with each other).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "storage/log_store.h"

namespace raftkv {

// A fixed-bucket histogram over integer observations (nanoseconds, entry
// counts), exposed in base units: a bound or sum of b units is shown as
// b / divisor (divisor 1e9 turns nanoseconds into seconds; a division by
// the exact 1e9 keeps 50000 ns exactly "5e-05").
class Histogram {
 public:
  // `bounds`: the buckets' inclusive upper bounds, strictly ascending (the
  // +Inf bucket is implicit).
  Histogram(std::vector<uint64_t> bounds, double divisor);

  void Observe(uint64_t value);

  struct Snapshot {
    std::vector<double> bounds;        // in base units
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (== count)
    double sum = 0;                    // in base units
    uint64_t count = 0;
  };
  Snapshot Collect() const;

 private:
  const std::vector<uint64_t> bounds_;
  const double divisor_;
  // Per bucket (not cumulative), the last one is +Inf.
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<uint64_t> sum_{0};
};

// Bounds 50 us .. 1 s (nanoseconds) for fsync latencies.
std::vector<uint64_t> FsyncBucketsNanos();
// Bounds 1 .. 4096 entries (powers of 2; the largest batch is
// --max_append_entries, 4096 by default).
std::vector<uint64_t> BatchSizeBuckets();

// The counters and histograms a RaftNode updates as it works (the gauges --
// role, term, indexes -- come from RaftNode::GetStatus() at scrape time).
// All members are safe to update and read from any thread.
class NodeMetrics : public SyncObserver {
 public:
  NodeMetrics();

  // The log's fsyncs (SegmentedLog::set_sync_observer).
  void OnSync(std::chrono::nanoseconds elapsed) override;

  // Client commands accepted by the core (this member was leader): one per
  // Put / Delete / Batch / CompareAndSwap / session registration entry.
  std::atomic<uint64_t> proposals{0};
  // Proposals refused (not leader, leadership transfer, shutting down).
  std::atomic<uint64_t> proposals_refused{0};
  // Committed entries applied to the state machine on this member.
  std::atomic<uint64_t> applied_entries{0};
  // Thread hand-offs: passes of the I/O loop (each follows a wake-up: a
  // proposal, a peer message, a tick, a snapshot event) and wake-ups of the
  // apply thread (each applies what was handed since and runs the
  // completions). Divided by proposals, the hand-offs per write.
  std::atomic<uint64_t> io_loop_cycles{0};
  // Passes of the I/O loop that took half the shortest election timeout or
  // more (heartbeats waited that long; RaftNode logs what the time went to).
  std::atomic<uint64_t> slow_io_cycles{0};
  std::atomic<uint64_t> apply_wakeups{0};
  // Snapshots written by this member (automatic or raftkvctl snapshot).
  std::atomic<uint64_t> snapshots_taken{0};
  // InstallSnapshot sends this member's core asked for as leader (a repeat
  // while the transfer to that peer runs is dropped by PeerClient but
  // counted here).
  std::atomic<uint64_t> snapshots_sent{0};
  // Leader snapshots this member (follower) installed.
  std::atomic<uint64_t> snapshots_installed{0};
  // Snapshots this member failed to take (the error is logged; the log is
  // kept, so it grows until a snapshot succeeds).
  std::atomic<uint64_t> snapshot_failures{0};
  // Writes of the hard state or the log the disk refused (full, or an I/O
  // error), each retried; and whether the I/O loop is waiting to retry one
  // now (1), acknowledging nothing meanwhile.
  std::atomic<uint64_t> storage_errors{0};
  std::atomic<uint64_t> storage_stalled{0};
  // Times the leader known to this member changed to another member.
  std::atomic<uint64_t> leader_changes{0};
  // Bytes of the log's segment files, as of the I/O loop's last pass (the
  // log is the I/O loop's alone; it stores the size here for the scrapes).
  std::atomic<uint64_t> log_bytes{0};

  // Seconds per log Sync() that reached the disk.
  Histogram fsync_seconds;
  // Entries per AppendEntries with entries, sent by this member (leader)
  // and received by it (follower); heartbeats (no entries) are not counted.
  Histogram append_entries_sent;
  Histogram append_entries_received;
};

// The rate of a counter over a sliding window of samples (the
// raftkv_proposals_per_second gauge). Not thread-safe: one owner samples
// and reads it.
class RateWindow {
 public:
  explicit RateWindow(std::chrono::milliseconds window) : window_(window) {}
  void Sample(std::chrono::steady_clock::time_point now, uint64_t value);
  // Increase per second between the oldest and the newest sample within the
  // window; 0 with fewer than two samples.
  double PerSecond() const;

 private:
  const std::chrono::milliseconds window_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, uint64_t>> samples_;
};

// Writes the Prometheus text exposition format, version 0.0.4:
//   # HELP <name> <help>
//   # TYPE <name> <counter|gauge|histogram>
//   <name>{<label>="<value>",...} <value>
// Family() must precede the samples of a family; every family once.
class ExpositionWriter {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  void Family(const std::string& name, const std::string& type, const std::string& help);
  void Sample(const std::string& name, const Labels& labels, double value);
  void Sample(const std::string& name, double value) { Sample(name, {}, value); }
  // A family with one unlabelled sample.
  void Single(const std::string& name, const std::string& type, const std::string& help,
              double value) {
    Family(name, type, help);
    Sample(name, value);
  }
  // <name>_bucket{...,le="..."} (cumulative, ending with +Inf), <name>_sum
  // and <name>_count.
  void HistogramSamples(const std::string& name, const Labels& labels,
                        const Histogram::Snapshot& h);

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

  // "\" -> "\\", "\"" -> "\\\"", newline -> "\\n" (label values).
  static std::string EscapeLabelValue(const std::string& value);
  // "\" -> "\\", newline -> "\\n" (HELP text).
  static std::string EscapeHelp(const std::string& help);
  // Go's strconv.FormatFloat('g') spelling as Prometheus parses it:
  // integers without exponent up to 2^53, "+Inf", "-Inf", "NaN".
  static std::string FormatValue(double value);

 private:
  std::string out_;
};

}  // namespace raftkv
