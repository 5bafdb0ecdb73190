// The benchmark scenarios (run by the Benchmark.* tests of raftkv-bench):
//
//   Write  asynchronous Puts of distinct keys to the leader; afterwards every
//          acknowledged write (or a random sample of verify_sample of them) is
//          read back with a linearizable Get and compared with the value sent.
//   Read   the keys are written first (not timed; failed writes are retried),
//          then read with linearizable Gets; every answer must be the value
//          written.
//   Batch  asynchronous KV.Batch calls of batch_ops Puts of distinct keys each
//          (one log entry per call); verified like Write.
//   Txn    asynchronous transactions, one per key: if the key was never
//          created, put it, else read it (etcd's create-if-absent). Every
//          answer must say the put ran; afterwards verified like Write.
//   Range  range_keys keys are written first (not timed), then linearizable
//          Range calls of up to range_limit keys from a random start key;
//          every answer must hold exactly the keys and values written there.
//          Reports keys per second.
//   Watch  `watchers` streams on the run's keys, spread over all members,
//          while the Write load runs; every watcher must see every
//          acknowledged write once, in revision order, with its value.
//          Reports events per second delivered and the delay from a Put
//          being sent to its event reaching a watcher.
//   Echo   the Echo RPC on the leader with a key_len + value_len byte payload:
//          the same client and the same server completion queues, no Raft,
//          no disk: the gRPC ceiling of the machine. Every answer must carry
//          the payload sent.
//
// Each run starts a local cluster of 1 + followers raftkv-server processes
// (ProcessCluster: loopback, free ports, data in a temporary directory; torn
// down at the end), unless `target` names an existing cluster, whose leader is
// then found through Status.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/report.h"

namespace raftkv {
namespace bench {

enum class Scenario { kWrite, kRead, kEcho, kBatch, kTxn, kRange, kWatch };
const char* ScenarioName(Scenario s);

struct BenchConfig {
  uint64_t requests = 80000;
  int value_len = 64;
  int key_len = 16;
  int followers = 2;
  std::string target;  // "H:P[,H:P...]": an existing cluster; empty = start one
  int conns = 4;
  int client_cq_num = 1;
  int client_threads_per_cq = 2;
  int inflight = 256;
  int timeout_ms = 5000;  // deadline of every request
  std::vector<std::string> server_flags;  // extra flags for the local servers
  // Local servers serve Prometheus metrics: member i at port base + i (0: off).
  int metrics_port_base = 0;
  uint64_t verify_sample = 0;  // 0: verify every acknowledged write
  uint64_t seed = 0;           // keys, values, verification sample
  bool quiet = false;          // no progress lines on stderr
  bool keep_cluster_dir = false;  // keep the local cluster's directory (logs, data)
  bool sessions = true;  // Write/Batch: calls carry a client session (exactly-once)
  int batch_ops = 1000;  // Batch: Puts per call
  uint64_t range_keys = 10000;  // Range: keys written before the timed Range calls
  int range_limit = 100;        // Range: limit of each call
  int watchers = 8;             // Watch: watch streams, spread over the members
  // The load goes to a follower, which forwards what only the leader can
  // serve (the cost of a forwarded call next to a direct one).
  bool via_follower = false;
  // Write with inflight 1: where the floor's fdatasync probe writes (the
  // data's filesystem; a local cluster uses its own directory when empty;
  // empty for an external one: no floor).
  std::string floor_dir;
};

// Splits --server_flags on whitespace.
std::vector<std::string> SplitFlags(const std::string& text);

// Empty if the configuration is usable, else what is wrong with it.
std::string ValidateConfig(const BenchConfig& config);

// Runs one scenario end to end (cluster up, load, verification, cluster down).
// Must be called from the thread that will also tear the cluster down (the
// test's thread: the servers die with the thread that forked them).
ScenarioReport RunScenario(Scenario scenario, const BenchConfig& config);

}  // namespace bench
}  // namespace raftkv
