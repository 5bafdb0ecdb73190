// The physical floor of one write in flight: a Put travels client ->
// leader -> followers -> leader -> client (two round trips) and waits for
// a majority's fdatasync, so write_p50 cannot beat 2 x echo_rtt_p50 +
// fsync_p50 by much. Benchmark.Write with one request in flight measures
// both on the same machine right after its run, and reports the ratio
// write_p50 / floor (1.0: the write costs what the network and the disk
// cost; the rest is raftkv's own work).
#pragma once

#include <string>

#include "bench/load.h"
#include "bench/report.h"

namespace raftkv {
namespace bench {

// Median microseconds of `samples` appends of `bytes` bytes, each followed
// by fdatasync, to a temporary file in `dir` (removed after), preallocated
// as the log's segments are. -1 with *error when the file cannot be written.
double MedianFsyncMicros(const std::string& dir, int samples, size_t bytes, std::string* error);

// Median microseconds of `samples` Echo calls of `payload_bytes` bytes made
// one at a time on `conns` (after a few unmeasured ones). -1 with *error
// when a call fails.
double MedianEchoMicros(const Connections& conns, int samples, size_t payload_bytes,
                        int timeout_ms, std::string* error);

// Fills floor->ratio from the three medians (left -1 unless all are > 0).
void ComputeFloorRatio(Floor* floor);

}  // namespace bench
}  // namespace raftkv
