// NodeOptions: everything a member is configured with (raftkv-server fills
// it from its flags and the cluster file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "raft/raft.h"
#include "node/cluster_config.h"
#include "storage/log_store.h"

namespace raftkv {

struct NodeOptions {
  uint64_t id = 0;
  ClusterConfig cluster;
  std::string data_dir;
  // The engine of the key-value state (raftkv-server --storage_engine).
  // kMemory: in memory, restored from the newest snapshot at start.
  // kRocksDb: on disk in <data_dir>/kv-*/ (storage/rocksdb_store_dir.h); a
  // restart opens it and replays only the log after the index it applied.
  enum class StorageEngine { kMemory, kRocksDb };
  StorageEngine storage_engine = StorageEngine::kMemory;
  // The consensus core's settings: timing (tick_ms is also the ticker's
  // period), flow control, promote_max_lag. Its id, bootstrap, voters and
  // seed are filled in by the node from the fields here.
  raft::Config core;
  SegmentedLogOptions log;
  // A member not listed in `cluster` (a new server being added): it starts
  // without a vote, at `self_address`, and waits for the leader to replicate
  // a configuration. Without `join`, an id missing from `cluster` is an error.
  bool join = false;
  std::string self_address;
  // What an empty data directory starts as (etcd's --initial-cluster-state):
  // kNew bootstraps a cluster from `cluster` (every listed member a voter);
  // kExisting joins one that runs already: the member takes no vote of its
  // own and waits for the leader's log or snapshot (as with join). A data
  // directory that holds state ignores it: its own bootstrap record, then
  // its snapshot and log, say who the members are (recovery.h).
  enum class ClusterState { kNew, kExisting };
  ClusterState initial_cluster_state = ClusterState::kNew;
  // Mixed into the id of a cluster this member founds (etcd's
  // --initial-cluster-token), so that two clusters bootstrapped from the
  // same cluster file have different ids and refuse each other's messages.
  std::string initial_cluster_token = "raftkv-cluster";
  // Automatic snapshots: taken when this many entries were applied since the
  // last snapshot (0: never by count), or when the log files hold more than
  // snapshot_log_bytes (0: never by size). raftkvctl snapshot takes one on
  // demand either way.
  uint64_t snapshot_entries = 100000;
  uint64_t snapshot_log_bytes = 512ull << 20;
  // Snapshot files kept (>= 2: the previous one is the fallback when the
  // newest is damaged; the log is kept back to the oldest kept snapshot).
  size_t snapshots_kept = 2;
  // Nice value added to the snapshot thread (Linux; 0: none): it yields the
  // cores to the threads serving writes when they compete.
  int snapshot_nice = 10;
  // The history of changes kept for watches and reads at a past revision:
  // at most this many revisions and bytes (KvStateMachine::SetHistoryLimits).
  size_t history_revisions = 100000;
  size_t history_bytes = 64 << 20;
  // The backend quota (RaftNode::CheckQuota): writes that would take the
  // state (KvStateMachine::StateBytes) past this many bytes are refused and
  // raise a NOSPACE alarm. <= 0: no quota.
  int64_t quota_backend_bytes = int64_t{2} << 30;
  // Revisions of that history written into each snapshot
  // (KvStateMachine::SetSnapshotHistory).
  size_t snapshot_history_revisions = 10000;
};

}  // namespace raftkv
