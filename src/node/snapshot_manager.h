// SnapshotManager: a member's snapshots -- when to take one, taking it on a
// background thread, installing the leader's, and the compaction of the
// snapshot files and log segments that follows.
//
// Taking one: the snapshot thread captures an image of the state machine
// (copy-on-write: the apply thread goes on), writes it to the snapshot
// store (checksummed, fsynced, renamed into place) and posts the result; the
// I/O loop takes it between two Readys (TakeFinished), compacts the core's
// log in memory, and then deletes snapshot files beyond snapshots_kept and
// the log segments wholly below the oldest kept snapshot (Finish).
// Triggers: snapshot_entries applied entries since the last snapshot, the
// log files above snapshot_log_bytes, or a request (raftkvctl snapshot).
//
// Threads: Request/HasWork/newest/BeginReceive/OpenSource from any thread;
// MaybeStart/TakeFinished/Finish/Install from the I/O loop only. The
// snapshot store is guarded by store_mu_ (taken before the node's lock, in
// config_at); the manager's state by mu_, never held while calling a hook.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "raft/raft.h"
#include "node/metrics.h"
#include "node/node_options.h"
#include "node/pending_calls.h"
#include "kv/kv_state_machine.h"
#include "storage/checkpoint_store.h"
#include "storage/log_store.h"
#include "storage/snapshot_store.h"
#include "common/mutex.h"
#include "common/status.h"

namespace raftkv {

struct SnapshotInfo {
  uint64_t last_index = 0;
  uint64_t last_term = 0;
  uint64_t bytes = 0;
  std::string path;
};

class SnapshotManager {
 public:
  using Callback = std::function<void(Status, SnapshotInfo)>;
  struct Hooks {
    // Under the node's lock: the serialized configuration at `index`, or
    // false if the core has already moved past it (a newer snapshot from
    // the leader was installed while the image was captured).
    std::function<bool(uint64_t index, std::string* config)> config_at;
    // Wakes the I/O loop (a snapshot finished or was requested).
    std::function<void()> wake;
  };
  // The result of taking a snapshot, handed from the snapshot thread to the
  // I/O loop.
  struct Result {
    Status status;
    SnapshotInfo info;
    bool written = false;  // false: nothing new was written (status says why, or it existed)
    double capture_ms = 0;
    double write_ms = 0;
    uint64_t crc_bytes_read = 0;  // a checkpoint's: files read to checksum them
  };

  // `checkpoints` (null: the memory engine) makes every snapshot this
  // member takes a checkpoint of its store; snapshot files are then only
  // read (one received from a member of another engine, or made before).
  SnapshotManager(const NodeOptions& options, std::unique_ptr<SnapshotStore> store,
                  std::unique_ptr<CheckpointStore> checkpoints, const raft::SnapshotRef& base,
                  KvStateMachine* state_machine, SegmentedLog* log, NodeMetrics* metrics, Hooks hooks);
  ~SnapshotManager();

  // The snapshot directory.
  const std::string& dir() const { return dir_; }

  // Takes a snapshot now unless one is being taken (then `done` gets that
  // one's result). `done` runs on the apply thread, or at once after Stop().
  void Request(Callback done) EXCLUDES(mu_);
  // The I/O loop has something to do: a finished snapshot, a request, or
  // (none running) enough entries applied since the newest snapshot. The
  // apply thread asks after each batch, so a snapshot falls due even when
  // no Ready follows the last apply.
  bool HasWork(uint64_t applied_index) const EXCLUDES(mu_);
  // The newest snapshot this member has (index 0: none).
  raft::SnapshotRef newest() const EXCLUDES(mu_);

  // InstallSnapshot, follower side: receives a snapshot of `format` into
  // the store. A checkpoint is refused by a member without checkpoints.
  Status BeginReceive(uint64_t last_index, uint64_t last_term, SnapshotFormat format,
                      std::unique_ptr<SnapshotSink>* out) EXCLUDES(store_mu_);
  // InstallSnapshot, leader side: opens the checkpoint or the snapshot file
  // (last_index, last_term).
  Status OpenSource(uint64_t last_index, uint64_t last_term,
                    std::unique_ptr<SnapshotSource>* out) EXCLUDES(store_mu_);
  // A backup: the snapshot (last_index, last_term) as a snapshot file. A
  // checkpoint is first written out as one, into snap/export/ (only the
  // newest export is kept there).
  Status OpenFile(uint64_t last_index, uint64_t last_term,
                  std::unique_ptr<SnapshotFileSource>* out) EXCLUDES(store_mu_);

  // I/O loop: starts the snapshot thread if a snapshot is due or requested
  // and none is running.
  void MaybeStart(uint64_t applied_index) EXCLUDES(mu_);
  // I/O loop, under the node's lock: the finished snapshot, if any, with the
  // completions of the calls that asked for it. If result.written, the
  // caller compacts the core to result.info.last_index, then calls Finish.
  std::optional<Result> TakeFinished(Completions* out) EXCLUDES(mu_);
  // I/O loop, without the node's lock: logs the result, prunes and compacts.
  void Finish(const Result& result);
  // I/O loop: the core installed the leader's snapshot `snap` (the file is
  // in the store): Install restores the state machine from it (the apply
  // thread must be idle), then FinishInstall restarts the log after it and
  // prunes. A FinishInstall the disk refused changed nothing (the log's
  // failed() says when it did): it may be called again.
  void Install(const raft::SnapshotRef& snap);
  Status FinishInstall(const raft::SnapshotRef& snap);
  // Joins the snapshot thread (a file being written is finished) and fails
  // the waiting requests.
  void Stop(Completions* out) EXCLUDES(mu_);

 private:
  void TakeInBackground() EXCLUDES(mu_, store_mu_);
  // TakeInBackground's two kinds; `have` is the newest snapshot before.
  void TakeCheckpoint(const raft::SnapshotRef& have, Result* result) REQUIRES(store_mu_);
  void TakeFile(const raft::SnapshotRef& have, Result* result) REQUIRES(store_mu_);
  // Deletes snapshot files beyond snapshots_kept and the log segments wholly
  // below the oldest kept snapshot. With `wait` false it gives up if the
  // store is busy (a snapshot being written): the next snapshot prunes.
  void PruneAndCompactLog(bool wait) EXCLUDES(store_mu_);
  // Removes the checkpoints beyond snapshots_kept and the snapshot files
  // the newest kept one supersedes; *kept lists the checkpoints left.
  Status PruneCheckpointsLocked(std::vector<CheckpointInfo>* kept) REQUIRES(store_mu_);
  // Whether the snapshot (last_index, last_term) is a checkpoint (else a
  // file, or none).
  bool IsCheckpoint(uint64_t last_index, uint64_t last_term) const;

  const NodeOptions& options_;
  KvStateMachine* const state_machine_;
  SegmentedLog* const log_;  // the I/O loop's
  NodeMetrics* const metrics_;
  const Hooks hooks_;
  const std::string dir_;
  const bool keeps_checkpoints_;  // checkpoints_ is set

  Mutex export_mu_ ACQUIRED_BEFORE(store_mu_);  // one OpenFile export at a time
  Mutex store_mu_;
  std::unique_ptr<SnapshotStore> store_ GUARDED_BY(store_mu_);
  std::unique_ptr<CheckpointStore> checkpoints_ GUARDED_BY(store_mu_);

  // Enough entries applied since the newest snapshot (--snapshot_entries).
  bool DueByCountLocked(uint64_t applied_index) const REQUIRES(mu_);

  mutable Mutex mu_;
  raft::SnapshotRef newest_ GUARDED_BY(mu_);  // index and term only
  bool running_ GUARDED_BY(mu_) = false;      // the snapshot thread is busy
  bool requested_ GUARDED_BY(mu_) = false;
  bool stopped_ GUARDED_BY(mu_) = false;
  std::vector<Callback> waiters_ GUARDED_BY(mu_);
  std::optional<Result> result_ GUARDED_BY(mu_);  // from the snapshot thread
  // After a failed snapshot, automatic ones wait until then (no retry storm).
  std::chrono::steady_clock::time_point retry_after_ GUARDED_BY(mu_){};
  std::thread thread_;  // started and joined by the I/O loop (and Stop)
  // Log bytes right after the last compaction (I/O loop only): the size
  // trigger waits for snapshot_log_bytes / 2 of growth beyond it, so a log
  // that cannot shrink (segments are removed whole) does not cause a
  // snapshot per entry.
  uint64_t log_bytes_after_compaction_ = 0;
};

}  // namespace raftkv
