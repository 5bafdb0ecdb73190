// Automatic history compaction, as etcd's --auto-compaction-mode and
// --auto-compaction-retention: the leader proposes COMPACT entries so the
// history it keeps (for watches and reads at past revisions) does not grow
// without bound.
//
//  - revision mode, retention N: every check (5 minutes, as etcd), compact
//    through (the current revision - N) when that is above the last
//    compaction;
//  - periodic mode, retention T: the revision is sampled every min(T, 1h)/10
//    and, every min(T, 1h), the history is compacted through the newest
//    sample at least T old: what was written in the last T stays.
//
// Only the leader proposes; samples start over when it loses leadership (a
// new leader waits a whole T before its first periodic compaction). The
// COMPACT entry is replicated, so every member compacts alike.
// A thread ("raftkv-compact") ticks every check interval.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <utility>

#include "common/lifeline.h"
#include "common/mutex.h"
#include "common/status.h"
#include "node/node.h"

namespace raftkv {

struct AutoCompactionOptions {
  enum class Mode { kOff, kPeriodic, kRevision };
  Mode mode = Mode::kOff;
  int64_t retention_revisions = 0;  // revision mode
  int64_t retention_ms = 0;         // periodic mode
  // How often the revision mode checks (etcd: 5 minutes); 0 = that default.
  int64_t revision_check_ms = 0;
};

// Reads etcd's flag values: mode "periodic" or "revision"; retention, for
// periodic, a duration ("72h", "30m", "90s", "1h30m") or a bare number of
// hours, for revision a number of revisions; "0" (or empty) turns it off.
// INVALID_ARGUMENT naming the flag otherwise.
Status ParseAutoCompaction(const std::string& mode, const std::string& retention,
                           AutoCompactionOptions* out);

// The decisions, with no clock or thread of its own (the tests drive it).
class AutoCompactionPolicy {
 public:
  static constexpr int64_t kRevisionCheckMs = 5 * 60 * 1000;
  explicit AutoCompactionPolicy(const AutoCompactionOptions& options);

  // How often Tick() wants to be called, in milliseconds (0: never).
  int64_t interval_ms() const;
  // At `now_ms`, the store at `revision` and compacted through `compacted`:
  // the revision to compact through, or 0 for none now.
  int64_t Tick(int64_t now_ms, int64_t revision, int64_t compacted);
  // Forgets the samples (leadership lost).
  void Reset();

 private:
  const AutoCompactionOptions options_;
  std::deque<std::pair<int64_t, int64_t>> samples_;  // (time, revision), oldest first
  int64_t last_check_ms_ = -1;     // revision mode; periodic: the last compaction tick
  int64_t last_sample_ms_ = -1;
};

class AutoCompactor {
 public:
  AutoCompactor(const AutoCompactionOptions& options, RaftNode* node);
  ~AutoCompactor();
  // Starts the thread (nothing when the mode is off).
  void Start();
  void Stop() EXCLUDES(mu_);

  // COMPACT entries proposed and applied (a metric and for tests).
  uint64_t compactions() const EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);

  RaftNode* const node_;
  AutoCompactionPolicy policy_;  // used by the thread alone
  std::thread thread_;
  Lifeline lifeline_;  // a proposal's callback may run after Stop()
  mutable Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool proposing_ GUARDED_BY(mu_) = false;  // a COMPACT is in flight
  uint64_t compactions_ GUARDED_BY(mu_) = 0;
};

}  // namespace raftkv
