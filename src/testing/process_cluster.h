// ProcessCluster: a test harness that runs N real raftkv-server processes on
// 127.0.0.1, for the integration tests in this directory.
//
// Each cluster gets a fresh temporary directory (mkdtemp under /tmp):
//
//   <dir>/cluster.conf               '<id> 127.0.0.1:<port>' per member
//   <dir>/node<i>/data               --data_dir of member i
//   <dir>/node<i>/logs               --log_dir of member i (glog files)
//   <dir>/node<i>/server.out         stdout + stderr of every run of member i
//
// The directory is removed by the destructor unless the current test failed
// (then its path is printed so the logs can be inspected). Every process
// still running is SIGKILLed and reaped by the destructor; the children also
// get PR_SET_PDEATHSIG(SIGKILL), so not even a crash of the test binary
// leaves stray servers behind.
//
// Members are numbered 1..N (their Raft ids); every method taking a member
// takes that id. AddNode() prepares a server N+1 that is not in cluster.conf
// and always starts with --join (membership change tests); MarkRemoved()
// tells the harness that a member left the configuration. Methods are meant to be called from the test's main thread
// (the thread that forks matters for PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/kv_client.h"
#include "proto/internal.h"

namespace raftkv {
namespace integration {

// Paths of the binaries under test.
std::string ServerBinary();
std::string CtlBinary();

// Flags with a finer tick than the defaults (tick 50 ms, election timeout
// 10..20 ticks) and a somewhat shorter election timeout, for tests that do
// not measure failover time with the defaults.
std::vector<std::string> FastTimeoutFlags();

// Free TCP ports on 127.0.0.1, chosen outside the kernel's ephemeral range
// (so that outgoing connections cannot take them between the probe and the
// server's bind) and probed by binding them.
std::vector<int> PickFreePorts(int count);

// Time bounds in tests are multiplied by this: sanitizer builds
// (RAFTKV_SANITIZED, set for everything linking raftkv_testing) run the
// servers several times slower (TSan about 10x).
#ifdef RAFTKV_SANITIZED
inline constexpr int kTimeScale = 5;
#else
inline constexpr int kTimeScale = 1;
#endif

// The sanitizer reports in `text` (output of a sanitized binary), or "".
std::string FindSanitizerReports(const std::string& text);

// Reads a whole file; empty string if it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

// The result of running a process to completion.
struct RunResult {
  bool exited = false;  // false: killed by a signal or by the timeout
  int exit_code = -1;   // valid when exited
  bool timed_out = false;
  std::string output;  // stdout + stderr
};

// Runs `binary` with `args` (argv[1..]) to completion, killing it after
// timeout_ms. stdout/stderr are captured via a file in `scratch_dir`.
RunResult RunToCompletion(const std::string& binary, const std::vector<std::string>& args,
                          const std::string& scratch_dir, int timeout_ms);

// Polls `predicate` every `poll_ms` until it is true or `timeout_ms` passed.
bool WaitUntil(const std::function<bool()>& predicate, int timeout_ms, int poll_ms = 20);

class ProcessCluster {
 public:
  // Prepares (but does not start) an n-member cluster; `extra_flags` are
  // passed to every server on every start.
  explicit ProcessCluster(int n, std::vector<std::string> extra_flags = {});
  ~ProcessCluster();

  ProcessCluster(const ProcessCluster&) = delete;
  ProcessCluster& operator=(const ProcessCluster&) = delete;

  int size() const { return static_cast<int>(nodes_.size()); }

  // Prepares one more server, id size()+1, with a fresh port and empty
  // directories, that is not listed in cluster.conf: every Start() of it
  // passes --join (plus `node_flags`). Not started. Returns its id.
  int AddNode(std::vector<std::string> node_flags = {});
  // Whether member i was added by AddNode().
  bool IsJoiner(int i) const;
  // Flags passed to member i on every start from now on (after the
  // cluster-wide ones), replacing earlier ones set for it.
  void SetNodeFlags(int i, std::vector<std::string> flags);
  // Marks member i as removed from the configuration (or not): WaitForLeader
  // and Endpoints() leave it out, and the majority WaitForLeader requires is
  // of the members not removed.
  void MarkRemoved(int i, bool removed = true);
  bool IsRemoved(int i) const;

  // Prometheus metrics (doc/metrics.md): from now on every start of member
  // i (members added later too) passes --metrics_address=127.0.0.1
  // --metrics_port=MetricsPort(i). With base 0 the ports are free ones
  // picked like the gRPC ports; else member i gets base + i (fixed ports a
  // person can curl, e.g. raftkv-bench --metrics_port_base).
  void EnableMetrics(int base = 0);
  // Member i's metrics port; 0 when metrics are not enabled.
  int MetricsPort(int i) const;

  // Starts every member. Returns false (and fills *error) if one exits at
  // once.
  bool StartAll(std::string* error = nullptr);
  // Starts member i on its (possibly existing) data; `more_flags` only for
  // this run. Returns false if it is already running or fork/exec fails.
  bool Start(int i, const std::vector<std::string>& more_flags = {});
  // Restart(i) = Start(i) on the existing data dir (member must not be running).
  bool Restart(int i, const std::vector<std::string>& more_flags = {}) {
    return Start(i, more_flags);
  }
  // SIGKILL + waitpid. No-op if not running.
  void Kill(int i);
  // SIGTERM, wait up to timeout_ms, then SIGKILL. Returns true if the
  // process exited by itself after SIGTERM with exit code 0.
  bool Stop(int i, int timeout_ms = 5000);
  // Whether member i's process is alive (reaps it if it exited).
  bool IsRunning(int i);
  // Waits up to timeout_ms for member i to exit by itself; returns true and
  // fills *exit_code (the exit status, or 128+signal) if it did.
  bool WaitForExit(int i, int timeout_ms, int* exit_code);
  // The pid of member i, or -1 if it is not running.
  pid_t Pid(int i) const;

  // Waits until every running member that answers Status agrees on the same
  // leader and term, the leader answers as "leader", and at least a majority
  // of the cluster answered. Returns the leader id, or 0 on timeout (with
  // *error describing the last observation).
  uint64_t WaitForLeader(int timeout_ms, std::string* error = nullptr);
  // The term of the last leader found by WaitForLeader.
  uint64_t last_leader_term() const { return last_leader_term_; }

  // Status of member i through KvClient::StatusOf (a single attempt). The
  // harness's client is replaced on every Start and after any failure, so
  // what is observed is the server, not a client channel that keeps failing
  // fast for seconds after the server is up (see the test
  // ClientStartedBeforeClusterConnects).
  grpc::Status StatusOf(int i, StatusResponse* out, int timeout_ms = 1000);

  // Addresses of the members not marked removed.
  std::vector<std::string> Endpoints() const;
  std::string Endpoint(int i) const;
  int Port(int i) const;
  // A client over every member, following the leader.
  std::unique_ptr<KvClient> NewClient(int timeout_ms = 5000, int rpc_timeout_ms = 1000) const;
  // A client talking to member i only (e.g. for stale reads from it).
  std::unique_ptr<KvClient> NewClientFor(int i, int timeout_ms = 2000,
                                         int rpc_timeout_ms = 1000) const;

  const std::string& dir() const { return dir_; }
  std::string cluster_file() const { return dir_ + "/cluster.conf"; }
  std::string NodeDir(int i) const;
  std::string DataDir(int i) const { return NodeDir(i) + "/data"; }
  std::string LogDir(int i) const { return NodeDir(i) + "/logs"; }
  std::string OutputPath(int i) const { return NodeDir(i) + "/server.out"; }
  // The hard state file (term and vote) of member i.
  std::string HardStatePath(int i) const { return DataDir(i) + "/hardstate"; }
  // The log segment files of member i (<data>/log/<20-digit first index>.seg)
  // as full paths, in index order (the zero-padded names sort by index).
  std::vector<std::string> SegmentFiles(int i) const;
  // The first log index of each segment file (from its name), in order.
  std::vector<uint64_t> SegmentFirstIndexes(int i) const;
  // Total bytes of member i's segment files.
  uint64_t LogBytes(int i) const;
  // Bytes on disk under member i's data directory: each file once, however
  // many names it has (a checkpoint links the store's files).
  uint64_t DataDirBytes(int i) const;
  // The snapshot files (snap-<index>-<term>.snap, anywhere under the data
  // directory) of member i, full paths sorted by index.
  std::vector<std::string> SnapshotFiles(int i) const;
  // Member i's snapshots of either kind, full paths sorted by index: the
  // files above (memory engine) and the checkpoint directories
  // (ckpt-<index>-<term>, the on-disk engine).
  std::vector<std::string> Snapshots(int i) const;

  // stdout + stderr of every run of member i so far.
  std::string ServerOutput(int i) const;
  // The glog INFO logs (all severities) of every run of member i, oldest first.
  std::string LogText(int i) const;
  // Only the most recent run of member i (running or ended): its glog INFO
  // file (glog names it after the pid) and the part of server.out after the
  // last start banner. For checking what one particular restart did, e.g.
  // how it recovered its log.
  std::string LastRunLogText(int i) const;
  std::string LastRunOutput(int i) const;
  // Sanitizer reports (ASan, LSan, UBSan, TSan) in the output of every run
  // of member i so far: the report lines with some context, or "" if none.
  // In sanitizer builds (RAFTKV_SANITIZE) the destructor stops every member
  // with SIGTERM (so leak checks run at exit) and fails the current test if
  // any member ever reported; a server whose race or leak did not make a
  // request fail would otherwise go unnoticed.
  std::string SanitizerReports(int i) const;
  // Stops every running member (SIGCONT, SIGTERM; SIGKILL after timeout_ms)
  // and returns the sanitizer reports of all members, "" if there are none.
  std::string StopAllAndCollectSanitizerReports(int timeout_ms = 20000);
  // A summary for failure messages: state and tail of output and logs of
  // every member.
  std::string Describe(size_t tail_bytes = 3000) const;

  // Keep the temporary directory even if the test passes.
  void KeepDir() { keep_dir_ = true; }

 private:
  struct Node {
    int id = 0;
    int port = 0;
    pid_t pid = -1;
    int last_exit = 0;  // exit status or 128+signal of the last run that ended
    int starts = 0;
    pid_t last_pid = -1;  // pid of the most recent run, kept after it ends
    std::unique_ptr<KvClient> status_client;
    bool joiner = false;   // added by AddNode: starts with --join
    bool removed = false;  // MarkRemoved
    std::vector<std::string> flags;  // SetNodeFlags / AddNode
    int metrics_port = 0;            // EnableMetrics
  };
  Node& node(int i);
  const Node& node(int i) const;
  // Reaps member i without blocking; true if it has exited (pid reset).
  bool Reap(int i, bool block);
  // The metrics port for member `id` (EnableMetrics), 0 if not enabled.
  int NextMetricsPort(int id);

  std::string dir_;
  std::vector<std::string> extra_flags_;
  std::vector<Node> nodes_;
  uint64_t last_leader_term_ = 0;
  bool keep_dir_ = false;
  bool metrics_enabled_ = false;
  int metrics_port_base_ = 0;
};

// A uint64 seed for random test choices: $RAFTKV_TEST_SEED if set, else
// from the clock. Printed by the caller so a failure can be replayed.
uint64_t TestSeed();

// Parses snap-<index>-<term>.snap (the base name); false if `name` is not one.
bool ParseSnapshotName(const std::string& name, uint64_t* index, uint64_t* term);
// Parses ckpt-<index>-<term> (a checkpoint directory's base name).
bool ParseCheckpointName(const std::string& name, uint64_t* index, uint64_t* term);
// Either of the two names above: the index and term of a snapshot of any kind.
bool ParseAnySnapshotName(const std::string& name, uint64_t* index, uint64_t* term);

}  // namespace integration
}  // namespace raftkv
