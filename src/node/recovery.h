// Recovery: what a member finds in its data directory when it starts.
//
// RecoverNode() locks <data_dir>/LOCK (one server per directory), loads the
// hard state, the newest intact snapshot (into a new state machine) and the
// log after it, checks that they fit together, and returns them. It refuses
// with a clear error whatever would make the member serve an older state
// than it acknowledged (a log that does not reach its snapshot, a log term
// ahead of the saved term, an unparsable configuration). Repairs that are
// always safe are made durably and logged: the bootstrap configuration of a
// new data directory is recorded (from the cluster file, or without this
// member's vote when it joins a running cluster), a torn log tail is cut, a log
// that does not continue the snapshot is discarded (Raft thesis 5.4.3), a
// term behind the snapshot's is raised, damaged newer snapshot files are
// moved aside. A persistent engine's store (NodeOptions::storage_engine)
// opens at the entry it applied last: the core starts there (Config::applied)
// and only the log after it is applied again; a store ahead of the log, or
// holding another term at its index, is refused. Layout on disk: doc/storage.md.
#pragma once

#include <memory>
#include <vector>

#include "raft/raft.h"
#include "node/node_options.h"
#include "storage/file_util.h"
#include "storage/checkpoint_store.h"
#include "storage/hard_state_file.h"
#include "kv/kv_state_machine.h"
#include "storage/log_store.h"
#include "storage/snapshot_store.h"
#include "common/status.h"

namespace raftkv {

struct RecoveredState {
  file::FileLock lock;  // held on <data_dir>/LOCK
  std::unique_ptr<SegmentedLog> log;
  std::unique_ptr<HardStateFile> hard_state_file;
  std::unique_ptr<SnapshotStore> snapshots;
  // A persistent engine's checkpoint snapshots (null in memory).
  std::unique_ptr<CheckpointStore> checkpoints;
  // The stores of a persistent engine (null in memory); outlives the state
  // machine.
  std::unique_ptr<KvBackendFactory> kv_stores;
  // In memory: restored from `base` (if any). Persistent: opened at the
  // index it applied, `applied` (>= base.index; a snapshot newer than the
  // store is restored into a new store).
  std::unique_ptr<KvStateMachine> state_machine;
  uint64_t applied = 0;
  HardState hard_state;
  // The membership at log index 0 (storage/bootstrap_file.h): recorded in
  // the data directory when it was new, never taken from the cluster file
  // again.
  MembershipConfig bootstrap;
  // The cluster's id (storage/bootstrap_file.h); 0 while a joining member
  // has not heard from a leader yet.
  uint64_t cluster_id = 0;
  raft::SnapshotRef base;       // the snapshot loaded (index 0: none)
  std::vector<Entry> entries;   // the log after base.index
};

Status RecoverNode(const NodeOptions& options, RecoveredState* out);

// The cluster file as a configuration: every member a voter, in id order.
MembershipConfig BootstrapConfig(const ClusterConfig& cluster);

// How the cluster file differs from `config` (the data directory's
// membership), or "" when they list the same members at the same addresses.
std::string DescribeClusterFileDifference(const ClusterConfig& cluster, const MembershipConfig& config);

}  // namespace raftkv
