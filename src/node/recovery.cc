#include "node/recovery.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <iterator>
#include <string>
#include <tuple>

#include "common/elapsed.h"
#include "kv/mvcc_keys.h"
#include "raft/core/membership.h"
#include "storage/bootstrap_file.h"
#ifdef RAFTKV_HAVE_ROCKSDB
#include "storage/rocksdb_store_dir.h"
#endif

namespace raftkv {

namespace {

std::string JoinList(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += "; ";
    out += item;
  }
  return out;
}

}  // namespace

MembershipConfig BootstrapConfig(const ClusterConfig& cluster) {
  MembershipConfig config;
  std::vector<Member> members = cluster.members;
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.id < b.id; });
  for (const Member& m : members) {
    MemberConfig* mc = config.add_members();
    mc->set_id(m.id);
    mc->set_address(m.address);
    mc->set_voter(true);
  }
  return config;
}

std::string DescribeClusterFileDifference(const ClusterConfig& cluster, const MembershipConfig& config) {
  std::vector<std::string> differences;
  for (const Member& m : cluster.members) {
    const MemberConfig* in = raft::FindMember(config, m.id);
    if (in == nullptr) {
      differences.push_back("member " + std::to_string(m.id) + " is not in the data directory's configuration");
    } else if (!in->address().empty() && in->address() != m.address) {
      differences.push_back("member " + std::to_string(m.id) + " is at " + in->address() + ", not " + m.address);
    }
  }
  for (const MemberConfig& m : config.members()) {
    if (cluster.Find(m.id()) == nullptr) {
      differences.push_back("member " + std::to_string(m.id()) + " (" + (m.voter() ? "voter" : "learner") +
                            ") is not in the cluster file");
    }
  }
  return JoinList(differences);
}

namespace {

// The log as recovered from disk, with the span of indexes it covers.
struct RecoveredLog {
  LogRecovery recovery;
  uint64_t first = 0;
  uint64_t last = 0;  // first - 1 when empty
};

// The options RecoverNode cannot start from.
Status CheckOptions(const NodeOptions& options) {
  if (options.id == 0) return Status::InvalidArgument("member id must be positive");
  if (options.cluster.Find(options.id) == nullptr) {
    if (!options.join) {
      return Status::InvalidArgument("member id " + std::to_string(options.id) +
                                     " is not listed in the cluster configuration (a new member "
                                     "being added must be started with join)");
    }
    if (options.self_address.empty()) {
      return Status::InvalidArgument("member " + std::to_string(options.id) +
                                     " joins the cluster but has no address of its own "
                                     "(self_address)");
    }
  }
  if (options.snapshots_kept < 2) {
    return Status::InvalidArgument(
        "snapshots_kept must be at least 2 (the previous snapshot is the fallback when the "
        "newest is damaged), got " + std::to_string(options.snapshots_kept));
  }
  return Status::OK();
}

// Creates the data directory (durably) and takes its LOCK into `r.lock`.
Status LockDataDir(const NodeOptions& options, RecoveredState* r) {
  // Durably: a data directory whose entry in its parent is lost on power
  // loss takes the member's vote and log with it.
  Status ds = file::CreateDirsDurably(options.data_dir);
  if (!ds.ok()) {
    return Status::IOError("cannot create data directory " + options.data_dir + ": " +
                           ds.message());
  }
  const std::string lock_path = options.data_dir + "/LOCK";
  bool held_elsewhere = false;
  Status ls = file::FileLock::Acquire(lock_path, &r->lock, &held_elsewhere);
  if (!ls.ok()) return Status::IOError("cannot lock " + lock_path + ": " + ls.message());
  if (held_elsewhere) {
    return Status::IOError("data directory " + options.data_dir +
                           " is in use by another raftkv-server (" + lock_path + " is locked)");
  }
  return Status::OK();
}

// The configuration of the snapshot `loaded` into `r->base.config`;
// `index_zero` when the header records none (or an empty one).
Status TakeSnapshotConfig(const SnapshotLoadResult& loaded, const MembershipConfig& index_zero,
                          RecoveredState* r) {
  if (loaded.meta.config.empty()) {
    // Written without a configuration (only tests do that): the bootstrap one.
    LOG(WARNING) << loaded.path << " records no configuration; using the bootstrap configuration";
    r->base.config = index_zero;
  } else if (!r->base.config.ParseFromString(loaded.meta.config)) {
    return Status::Corruption(loaded.path + ": the configuration in the header does not parse");
  } else if (Status why = raft::CheckMembership(r->base.config); !why.ok()) {
    return Status::Corruption(loaded.path + ": invalid configuration in the header: " +
                              why.message());
  } else if (r->base.config.members_size() == 0) {
    r->base.config = index_zero;
  }
  return Status::OK();
}

// What recovery restores a persistent store from: a snapshot file at or
// below the index the store applied is only verified (VerifyAll: nothing
// kept; it is what the core may send to a follower); a newer one (installed
// from a leader before a crash cut the install short, or the file of an
// older directory or a restore) is restored into a new store.
class PersistentStoreTarget final : public SnapshotTarget {
 public:
  explicit PersistentStoreTarget(KvStateMachine* state_machine) : state_machine_(state_machine) {}
  Status Restore(SnapshotReader* reader) override {
    if (reader->meta().last_index > state_machine_->AppliedIndex()) {
      LOG(INFO) << "the key-value store is at index " << state_machine_->AppliedIndex()
                << "; restoring the newer snapshot " << reader->path() << " into a new store";
      return state_machine_->Restore(reader);
    }
    return reader->VerifyAll();
  }

 private:
  KvStateMachine* const state_machine_;
};

// The state machine on the engine `options` names: empty in memory, or the
// persistent store of the data directory as it was left.
Status OpenStateMachine(const NodeOptions& options, RecoveredState* r) {
  if (options.storage_engine == NodeOptions::StorageEngine::kMemory) {
    r->state_machine = std::make_unique<KvStateMachine>();
  } else {
#ifdef RAFTKV_HAVE_ROCKSDB
    std::unique_ptr<RocksDbStoreDir> dir;
    std::unique_ptr<KvBackend> current;
    RocksDbBackend::Options store_options;
    store_options.insert_group_prefix = mvcc::InsertGroupPrefix;
    store_options.lookup_prefix = mvcc::LookupPrefix;
    Status s = RocksDbStoreDir::Open(options.data_dir, &dir, &current, store_options);
    if (s.ok()) s = KvStateMachine::Open(std::move(current), &r->state_machine);
    if (!s.ok()) return Status(s.code(), "key-value store in " + options.data_dir + ": " + s.message());
    r->state_machine->SetBackendFactory(dir.get());
    LOG(INFO) << "member " << options.id << " opened the key-value store " << dir->current()
              << " at index " << r->state_machine->AppliedIndex() << " (revision "
              << r->state_machine->Revision() << ", " << r->state_machine->Size() << " keys)";
    r->kv_stores = std::move(dir);
#else
    return Status::InvalidArgument("this build has no RocksDB engine (built without RAFTKV_WITH_ROCKSDB)");
#endif
  }
  r->state_machine->SetHistoryLimits(options.history_revisions, options.history_bytes);
  r->state_machine->SetSnapshotHistory(options.snapshot_history_revisions);
  return Status::OK();
}

// Step 1, on an engine with checkpoint snapshots: the newest checkpoint
// whose manifest reads, unless a snapshot file is newer (a restore, or a
// directory from before checkpoints), which the caller then loads. Only the
// manifest is read: the store, not the checkpoint, holds the state, and a
// follower verifies every block of one it receives. A checkpoint newer than
// the store (received before a crash cut its install short) is installed.
// Newer checkpoints whose manifest does not read are moved aside.
Status LoadCheckpoint(const NodeOptions& options, RecoveredState* r, SnapshotLoadResult* loaded,
                      bool* found) {
  std::vector<CheckpointInfo> checkpoints;
  std::vector<SnapshotFileInfo> files;
  Status s = r->checkpoints->List(&checkpoints);
  if (s.ok()) s = r->snapshots->List(&files);
  if (!s.ok()) return s;
  bool moved = false;
  for (auto it = checkpoints.rbegin(); it != checkpoints.rend() && !*found; ++it) {
    if (!files.empty() && files.back().last_index > it->last_index) break;
    CheckpointContents contents;
    s = checkpoint::ReadManifest(it->path, &contents);
    if (s.ok() && (contents.meta.last_index != it->last_index || contents.meta.last_term != it->last_term)) {
      s = Status::Corruption(it->path + ": the manifest names index " + std::to_string(contents.meta.last_index) +
                             ", term " + std::to_string(contents.meta.last_term));
    }
    if (!s.ok()) {
      LOG(ERROR) << "member " << options.id << ": moved the unusable checkpoint " << it->path << " aside to "
                 << it->path << ".damaged: " << s.ToString();
      s = file::Rename(it->path, it->path + ".damaged");
      if (!s.ok()) return s;
      moved = true;
      continue;
    }
    *found = true;
    loaded->found = true;
    loaded->meta = contents.meta;
    loaded->path = it->path;
  }
  if (moved) s = file::SyncDir(r->checkpoints->dir());
  if (!s.ok() || !*found || loaded->meta.last_index <= r->state_machine->AppliedIndex()) return s;
  LOG(INFO) << "the key-value store is at index " << r->state_machine->AppliedIndex()
            << "; installing the newer checkpoint " << loaded->path;
  return r->state_machine->InstallCheckpoint(loaded->path, loaded->meta.last_index, loaded->meta.last_term);
}

// Step 1: the newest intact snapshot into `r->base` (and, in memory, into
// the state machine). LoadNewestValid logs every newer file it had to skip
// (ERROR) and lists them in `loaded->rejected`.
Status LoadSnapshot(const NodeOptions& options, const MembershipConfig& index_zero,
                    RecoveredState* r, SnapshotLoadResult* loaded) {
  Status s = SnapshotStore::Open(options.data_dir + "/snap", &r->snapshots);
  if (!s.ok()) return s;
  s = OpenStateMachine(options, r);
  if (!s.ok()) return s;
  const auto load_start = std::chrono::steady_clock::now();
  bool from_checkpoint = false;
  if (r->kv_stores) {
    s = CheckpointStore::Open(options.data_dir + "/snap", &r->checkpoints);
    if (s.ok()) s = LoadCheckpoint(options, r, loaded, &from_checkpoint);
    if (!s.ok()) return s;
  }
  PersistentStoreTarget persistent(r->state_machine.get());
  SnapshotTarget* target = r->kv_stores ? static_cast<SnapshotTarget*>(&persistent)
                                        : static_cast<SnapshotTarget*>(r->state_machine.get());
  if (!from_checkpoint) s = r->snapshots->LoadNewestValid(target, loaded);
  if (!s.ok()) return s;
  if (loaded->found) {
    r->base.index = loaded->meta.last_index;
    r->base.term = loaded->meta.last_term;
    r->base.cluster_time_ms = loaded->meta.cluster_time_ms;
    s = TakeSnapshotConfig(*loaded, index_zero, r);
    if (!s.ok()) return s;
    LOG(INFO) << "member " << options.id
              << (from_checkpoint ? " uses checkpoint " : r->kv_stores ? " verified snapshot " : " restored snapshot ")
              << loaded->path << " (index "
              << r->base.index << ", term " << r->base.term << ", "
              << r->state_machine->Size() << " keys, " << r->state_machine->SessionCount()
              << " sessions, configuration " << raft::DescribeMembership(r->base.config) << ") in "
              << static_cast<int64_t>(MillisSince(load_start)) << " ms"
              << (loaded->rejected.empty() ? std::string()
                                           : "; skipped newer damaged file(s): " +
                                                 JoinList(loaded->rejected));
  } else if (!loaded->rejected.empty()) {
    LOG(ERROR) << "member " << options.id << ": no intact snapshot in " << r->snapshots->dir()
               << "; rejected: " << JoinList(loaded->rejected);
  }
  return Status::OK();
}

// Step 2: opens the log into `r->log` and checks that it continues the
// snapshot and stays within the saved term.
Status OpenLog(const NodeOptions& options, const SnapshotLoadResult& loaded, RecoveredState* r,
               RecoveredLog* log) {
  LogRecovery& recovery = log->recovery;
  // What an on-disk store applied was durable in this log: damage to it is
  // no torn write to cut off (a memory store applied nothing yet).
  SegmentedLogOptions log_options = options.log;
  // The I/O loop, which also sends the heartbeats, does not wait for the
  // removal of compacted segments (a directory sync each).
  log_options.remove_in_background = true;
  if (r->state_machine->persistent()) log_options.durable_through = r->state_machine->AppliedIndex();
  Status s = SegmentedLog::Open(options.data_dir + "/log", log_options, &r->log, &recovery);
  if (!s.ok()) return s;
  if (recovery.truncated_tail) {
    LOG(WARNING) << "log recovery cut a torn or corrupt tail: " << recovery.detail;
  }
  log->first = recovery.entries.empty() ? recovery.first_index : recovery.entries.front().index();
  log->last = log->first + recovery.entries.size() - 1;
  const uint64_t log_first = log->first;
  // The log must continue the snapshot: entries base.index + 1 .. log_first -
  // 1 exist nowhere else on this member. Starting anyway would silently serve
  // an older state than the one this member acknowledged (e.g. the newest
  // snapshot is damaged and the log was compacted up to it), so refuse.
  if (log_first > r->base.index + 1) {
    std::string used = loaded.found ? loaded.path + " (index " + std::to_string(r->base.index) + ")"
                                    : std::string("none");
    return Status::Corruption(
        "data directory " + options.data_dir + ": the log starts at index " +
        std::to_string(log_first) + " but the snapshot in use covers entries up to index " +
        std::to_string(r->base.index) + " only, so entries " + std::to_string(r->base.index + 1) +
        ".." + std::to_string(log_first - 1) + " are missing. Snapshot used: " + used +
        ". Rejected snapshot files: " +
        (loaded.rejected.empty() ? std::string("none") : JoinList(loaded.rejected)) +
        ". Refusing to start from an older state than this member acknowledged: restore the "
        "snapshot files, or remove this member's data directory and add it back to the cluster");
  }
  if (!recovery.entries.empty() && recovery.entries.back().term() > r->hard_state.term) {
    return Status::Corruption("log term " + std::to_string(recovery.entries.back().term()) +
                              " is ahead of the saved term " + std::to_string(r->hard_state.term));
  }
  return Status::OK();
}

// The id of the cluster `bootstrap` founded, when this member is one of its
// founders (0: it joined, and adopts the leader's).
uint64_t FoundedClusterId(const NodeOptions& options, const MembershipConfig& bootstrap) {
  for (const MemberConfig& m : bootstrap.members()) {
    if (m.id() == options.id) return ClusterIdOf(bootstrap, options.initial_cluster_token);
  }
  return 0;
}

// The bootstrap configuration of a directory that has none recorded: the
// cluster file's (without this member when it joins an existing cluster),
// saved in `bootstrap_file`.
Status RecordBootstrap(const NodeOptions& options, const MembershipConfig& cluster_file,
                       const SnapshotLoadResult& loaded, const RecoveredLog& log,
                       BootstrapFile* bootstrap_file, RecoveredState* r) {
  const bool fresh = r->hard_state == HardState{} && !loaded.found && loaded.rejected.empty() &&
                     log.recovery.entries.empty() && log.first <= 1;
  r->bootstrap = cluster_file;
  if (!fresh) {
    LOG(WARNING) << "member " << options.id << ": data directory " << options.data_dir
                 << " holds state but no bootstrap record (written by an older version): "
                    "recording the cluster file's membership "
                 << raft::DescribeMembership(r->bootstrap) << " as its bootstrap configuration";
  } else if (options.join ||
             options.initial_cluster_state == NodeOptions::ClusterState::kExisting) {
    // Joining a running cluster: no vote of its own until the leader's
    // log or snapshot says it has one.
    for (int i = 0; i < r->bootstrap.members_size(); ++i) {
      if (r->bootstrap.members(i).id() == options.id) {
        r->bootstrap.mutable_members()->DeleteSubrange(i, 1);
        break;
      }
    }
    LOG(INFO) << "member " << options.id << ": new data directory, joining an existing cluster "
              << raft::DescribeMembership(r->bootstrap) << "; it waits for the leader";
  } else {
    LOG(INFO) << "member " << options.id << ": new data directory, bootstrapping a new cluster "
              << raft::DescribeMembership(r->bootstrap);
  }
  // Only a cluster founded now gets an id here: the members of one whose
  // directories were recorded by an older version (no bootstrap record, or
  // one without an id) might compute different ones from cluster files that
  // changed since, and refuse each other. They keep none (0) and accept
  // any, as before ids existed.
  r->cluster_id = fresh ? FoundedClusterId(options, r->bootstrap) : 0;
  Status s = bootstrap_file->Save(r->bootstrap, r->cluster_id);
  if (!s.ok()) return Status::IOError("cannot record the bootstrap configuration: " + s.ToString());
  return Status::OK();
}

// Step 3: what the core gets, the entries after the snapshot, into
// `r->entries`. If the log holds the snapshot's index with the snapshot's
// term, the entries after it continue the snapshot (log matching). If it
// holds a different term there, or ends before the snapshot, the log is not
// a continuation of it: Raft discards the whole log (thesis 5.4.3; this is
// also where a crash between installing a leader's snapshot and resetting
// the log ends up). Entries at or below the snapshot stay on disk until
// compaction.
Status KeepEntriesAfterSnapshot(const NodeOptions& options, RecoveredLog* log, RecoveredState* r) {
  std::vector<Entry>& entries = log->recovery.entries;
  const uint64_t log_first = log->first;
  const uint64_t log_last = log->last;
  if (r->base.index == 0 || log_first == r->base.index + 1) {
    r->entries = std::move(entries);
    return Status::OK();
  }
  std::string discard;
  if (log_last >= r->base.index) {
    const Entry& at = entries[r->base.index - log_first];
    if (at.term() == r->base.term) {
      const auto after = static_cast<ptrdiff_t>(r->base.index - log_first + 1);
      r->entries.assign(std::make_move_iterator(entries.begin() + after),
                        std::make_move_iterator(entries.end()));
    } else {
      discard = "it holds term " + std::to_string(at.term()) + " at the snapshot's index " +
                std::to_string(r->base.index) + " (the snapshot has term " +
                std::to_string(r->base.term) + ")";
    }
  } else {
    discard = "it ends at index " + std::to_string(log_last) + ", before the snapshot's index " +
              std::to_string(r->base.index);
  }
  if (discard.empty()) return Status::OK();
  LOG(WARNING) << "member " << options.id << ": the log (indexes " << log_first << ".."
               << log_last << ") does not continue snapshot " << r->base.index << "/"
               << r->base.term << ": " << discard << "; discarding it";
  return r->log->Reset(r->base.index + 1);
}

// A snapshot is installed (renamed into place) before the term of the
// leader that sent it is saved; a crash in between leaves a snapshot whose
// last term is above the saved term. Raise the term (no vote: none was
// cast in it) so the core never runs behind its own log.
Status RaiseTermToSnapshot(const NodeOptions& options, RecoveredState* r) {
  if (r->base.term <= r->hard_state.term) return Status::OK();
  LOG(WARNING) << "member " << options.id << ": saved term " << r->hard_state.term
               << " is below snapshot term " << r->base.term << "; raising it";
  r->hard_state = HardState{r->base.term, 0};
  return r->hard_state_file->Save(r->hard_state);
}

// The snapshot files newer than the one loaded were all rejected (a newer
// intact one would have been loaded). Move them aside (kept for
// inspection, out of the rotation): otherwise pruning would count a
// damaged file among the snapshots_kept and delete an intact fallback.
Status MoveRejectedSnapshotsAside(const NodeOptions& options, const SnapshotLoadResult& loaded,
                                  RecoveredState* r) {
  if (loaded.rejected.empty()) return Status::OK();
  std::vector<SnapshotFileInfo> files;
  Status s = r->snapshots->List(&files);
  if (!s.ok()) return s;
  bool moved = false;
  for (const SnapshotFileInfo& f : files) {
    if (loaded.found &&
        std::tie(f.last_index, f.last_term) <= std::tie(r->base.index, r->base.term)) {
      continue;
    }
    s = file::Rename(f.path, f.path + ".damaged");
    if (!s.ok()) return s;
    LOG(ERROR) << "member " << options.id << ": moved the unusable snapshot " << f.path
               << " aside to " << f.path << ".damaged";
    moved = true;
  }
  if (moved) return file::SyncDir(r->snapshots->dir());
  return Status::OK();
}

// Step 4: where the core resumes, `r->applied`. A persistent store applied
// the entries up to its index: they must be in the log that continues the
// snapshot, with the store's term at that index (entries are applied only
// once durable in the log, and the log keeps every entry after the
// snapshot). Anything else would resume the store on a history it does not
// come from.
Status ResumeAtApplied(const NodeOptions& options, RecoveredState* r) {
  const uint64_t applied = r->state_machine->AppliedIndex();
  r->applied = r->base.index;
  if (applied == r->base.index) return Status::OK();
  const uint64_t last = r->base.index + r->entries.size();
  const std::string store = "data directory " + options.data_dir + ": the key-value store applied entries up to index " +
                            std::to_string(applied) + " (term " + std::to_string(r->state_machine->AppliedTerm()) + ")";
  const std::string refuse =
      ". Refusing to start: remove this member's data directory and add it back to the cluster";
  if (applied < r->base.index) {
    return Status::Corruption(store + ", behind the snapshot in use (index " + std::to_string(r->base.index) + ")" +
                              refuse);
  }
  if (applied > last) {
    return Status::Corruption(store + " but the log ends at index " + std::to_string(last) + refuse);
  }
  const uint64_t term = r->entries[applied - r->base.index - 1].term();
  if (term != r->state_machine->AppliedTerm()) {
    return Status::Corruption(store + " but the log holds term " + std::to_string(term) + " there" + refuse);
  }
  r->applied = applied;
  return Status::OK();
}

}  // namespace

Status RecoverNode(const NodeOptions& options, RecoveredState* out) {
  Status s = CheckOptions(options);
  if (!s.ok()) return s;
  RecoveredState& r = *out;
  s = LockDataDir(options, &r);
  if (!s.ok()) return s;

  r.hard_state_file = std::make_unique<HardStateFile>(options.data_dir + "/hardstate");
  s = r.hard_state_file->Load(&r.hard_state);
  if (!s.ok()) return s;
  // 0. The bootstrap configuration, when the directory recorded one.
  BootstrapFile bootstrap_file(options.data_dir + "/bootstrap");
  bool have_bootstrap = false;
  s = bootstrap_file.Load(&r.bootstrap, &r.cluster_id, &have_bootstrap);
  if (!s.ok()) return s;
  const MembershipConfig cluster_file = BootstrapConfig(options.cluster);
  const MembershipConfig& index_zero = have_bootstrap ? r.bootstrap : cluster_file;

  // 1. The newest intact snapshot.
  SnapshotLoadResult loaded;
  s = LoadSnapshot(options, index_zero, &r, &loaded);
  if (!s.ok()) return s;
  // 2. The log.
  RecoveredLog log;
  s = OpenLog(options, loaded, &r, &log);
  if (!s.ok()) return s;
  if (!have_bootstrap) {
    s = RecordBootstrap(options, cluster_file, loaded, log, &bootstrap_file, &r);
    if (!s.ok()) return s;
  }
  // 3. The entries after the snapshot; then repairs of what a crash left.
  s = KeepEntriesAfterSnapshot(options, &log, &r);
  if (!s.ok()) return s;
  s = RaiseTermToSnapshot(options, &r);
  if (!s.ok()) return s;
  s = MoveRejectedSnapshotsAside(options, loaded, &r);
  if (!s.ok()) return s;
  // 4. Where the state machine resumes.
  s = ResumeAtApplied(options, &r);
  if (!s.ok()) return s;
  LOG(INFO) << "member " << options.id << " recovered term " << r.hard_state.term << ", vote "
            << r.hard_state.vote << ", snapshot index " << r.base.index << ", "
            << r.entries.size() << " log entries after it, state applied up to index " << r.applied
            << " (" << r.base.index + r.entries.size() - r.applied << " log entries after it)";
  return Status::OK();
}

}  // namespace raftkv
