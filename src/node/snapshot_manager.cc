#include "node/snapshot_manager.h"

#include <glog/logging.h>

#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "common/elapsed.h"
#include "raft/core/membership.h"
#include "common/thread_name.h"
#include "storage/file_util.h"
#include "storage/snapshot_format.h"

namespace raftkv {

namespace {

using SteadyClock = std::chrono::steady_clock;

}  // namespace

SnapshotManager::SnapshotManager(const NodeOptions& options, std::unique_ptr<SnapshotStore> store,
                                 std::unique_ptr<CheckpointStore> checkpoints, const raft::SnapshotRef& base,
                                 KvStateMachine* state_machine, SegmentedLog* log, NodeMetrics* metrics,
                                 Hooks hooks)
    : options_(options),
      state_machine_(state_machine),
      log_(log),
      metrics_(metrics),
      hooks_(std::move(hooks)),
      dir_(store->dir()),
      keeps_checkpoints_(checkpoints != nullptr),
      store_(std::move(store)),
      checkpoints_(std::move(checkpoints)) {
  newest_.index = base.index;
  newest_.term = base.term;
  log_bytes_after_compaction_ = log_->SizeBytes();
}

SnapshotManager::~SnapshotManager() {
  Completions completions;
  Stop(&completions);
  RunAll(&completions);
}

void SnapshotManager::Request(Callback done) {
  {
    MutexLock lock(&mu_);
    if (!stopped_) {
      // A snapshot already running answers this call too: it was started
      // before the call, but it is at most as old as a snapshot started now
      // would be by the time it could run.
      waiters_.push_back(std::move(done));
      if (!running_) requested_ = true;
      done = nullptr;
    }
  }
  if (done) {
    done(Status::IOError("server is shutting down"), SnapshotInfo());
  } else {
    hooks_.wake();
  }
}

bool SnapshotManager::HasWork(uint64_t applied_index) const {
  MutexLock lock(&mu_);
  if (result_.has_value()) return true;
  if (running_ || stopped_) return false;
  return requested_ || DueByCountLocked(applied_index);
}

bool SnapshotManager::DueByCountLocked(uint64_t applied_index) const {
  return options_.snapshot_entries > 0 && applied_index > newest_.index &&
         applied_index - newest_.index >= options_.snapshot_entries && SteadyClock::now() >= retry_after_;
}

raft::SnapshotRef SnapshotManager::newest() const {
  MutexLock lock(&mu_);
  return newest_;
}

Status SnapshotManager::BeginReceive(uint64_t last_index, uint64_t last_term, SnapshotFormat format,
                                     std::unique_ptr<SnapshotSink>* out) {
  MutexLock lock(&store_mu_);
  if (format == SnapshotFormat::kFile) {
    std::unique_ptr<SnapshotReceiver> receiver;
    Status s = store_->BeginReceive(last_index, last_term, &receiver);
    if (s.ok()) *out = std::move(receiver);
    return s;
  }
  if (format != SnapshotFormat::kCheckpoint) {
    return Status::InvalidArgument("unknown snapshot format " + std::to_string(static_cast<uint32_t>(format)));
  }
  if (!checkpoints_) {
    return Status::FailedPrecondition(
        "this member keeps its state in memory (--storage_engine=memory) and cannot install a checkpoint "
        "of the leader's on-disk store: run every member with the same --storage_engine");
  }
  KvStateMachine* sm = state_machine_;
  *out = checkpoints_->BeginReceiveStream(last_index, last_term, [sm, last_index, last_term](const std::string& dir) {
    return sm->VerifyCheckpoint(dir, last_index, last_term);
  });
  return Status::OK();
}

bool SnapshotManager::IsCheckpoint(uint64_t last_index, uint64_t last_term) const {
  std::error_code ec;
  return keeps_checkpoints_ &&
         std::filesystem::is_directory(file::JoinPath(dir_, CheckpointStore::DirName(last_index, last_term)), ec);
}

Status SnapshotManager::OpenSource(uint64_t last_index, uint64_t last_term, std::unique_ptr<SnapshotSource>* out) {
  MutexLock lock(&store_mu_);
  if (IsCheckpoint(last_index, last_term)) {
    std::unique_ptr<CheckpointSource> source;
    Status s = checkpoints_->OpenSource(last_index, last_term, &source);
    if (s.ok()) *out = std::move(source);
    return s;
  }
  SnapshotFileInfo info;
  info.last_index = last_index;
  info.last_term = last_term;
  info.path = file::JoinPath(dir_, SnapshotStore::FileName(last_index, last_term));
  std::unique_ptr<SnapshotFileSource> source;
  Status s = store_->OpenSource(info, &source);
  if (s.ok()) *out = std::move(source);
  return s;
}

Status SnapshotManager::OpenFile(uint64_t last_index, uint64_t last_term, std::unique_ptr<SnapshotFileSource>* out) {
  MutexLock export_lock(&export_mu_);
  SnapshotFileInfo info;
  info.last_index = last_index;
  info.last_term = last_term;
  info.path = file::JoinPath(dir_, SnapshotStore::FileName(last_index, last_term));
  {
    MutexLock lock(&store_mu_);
    if (!IsCheckpoint(last_index, last_term)) return store_->OpenSource(info, out);
  }
  std::unique_ptr<SnapshotStore> exports;
  Status s = SnapshotStore::Open(file::JoinPath(dir_, "export"), &exports);
  std::vector<SnapshotFileInfo> exported;
  if (s.ok()) s = exports->List(&exported);
  if (!s.ok()) return s;
  if (!exported.empty() && exported.back().last_index == last_index &&
      exported.back().last_term == last_term) {
    return exports->OpenSource(exported.back(), out);  // written out already
  }
  // The checkpoint is linked aside under store_mu_ (it fails if the
  // checkpoint was pruned meanwhile) and written out as a file without it:
  // taking and installing snapshots go on meanwhile.
  const std::string pinned = file::JoinPath(dir_, "ckpt-export.tmp");
  {
    MutexLock lock(&store_mu_);
    s = checkpoints_->Pin(last_index, last_term, pinned);
    if (!s.ok()) return s;
  }
  CheckpointContents contents;
  s = checkpoint::ReadManifest(pinned, &contents);
  if (s.ok()) s = state_machine_->ExportCheckpoint(pinned, contents.meta, exports.get(), &info);
  const Status unpinned = CheckpointStore::Unpin(pinned);
  LOG_IF(WARNING, !unpinned.ok()) << unpinned.ToString();
  if (!s.ok()) return s;
  // The one written before goes (a backup still streaming it reads on from
  // its open file, on POSIX).
  const Status pruned = exports->Prune(1);
  LOG_IF(WARNING, !pruned.ok()) << "cannot remove an older snapshot export: " << pruned.ToString();
  return exports->OpenSource(info, out);
}

void SnapshotManager::MaybeStart(uint64_t applied_index) {
  // The log size is the I/O loop's to read.
  const uint64_t log_bytes = options_.snapshot_log_bytes > 0 ? log_->SizeBytes() : 0;
  {
    MutexLock lock(&mu_);
    if (stopped_ || running_ || result_) return;
    // Due: asked for, or enough entries applied since the newest snapshot,
    // or (only the I/O loop can tell) a log grown past --snapshot_log_bytes.
    const bool due_by_size = options_.snapshot_log_bytes > 0 && applied_index > newest_.index &&
                             SteadyClock::now() >= retry_after_ && log_bytes >= options_.snapshot_log_bytes &&
                             log_bytes >= log_bytes_after_compaction_ + options_.snapshot_log_bytes / 2;
    const bool due = requested_ || DueByCountLocked(applied_index) || due_by_size;
    if (!due) return;
    requested_ = false;
    running_ = true;
  }
  // The previous snapshot thread has posted its result, so it has finished
  // or is about to return.
  if (thread_.joinable()) thread_.join();
  thread_ = std::thread([this] {
    SetThreadName("raftkv-snapshot");
    TakeInBackground();
  });
}

void SnapshotManager::TakeInBackground() {
#ifdef __linux__
  // Background work: on Linux a nice value applies to one thread.
  if (options_.snapshot_nice > 0 &&
      setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), options_.snapshot_nice) != 0) {
    PLOG(WARNING) << "cannot lower the snapshot thread's priority";
  }
#endif
  Result result;
  {
    // store_mu_ is held from the check of the newest snapshot to the end of
    // the write, so nothing else uses the store in between.
    MutexLock store_lock(&store_mu_);
    const raft::SnapshotRef have = newest();
    if (checkpoints_) {
      TakeCheckpoint(have, &result);
    } else {
      TakeFile(have, &result);
    }
  }
  {
    MutexLock lock(&mu_);
    result_ = std::move(result);
  }
  hooks_.wake();
}

// A checkpoint of the store: a flush and hard links, whatever the data's size.
void SnapshotManager::TakeCheckpoint(const raft::SnapshotRef& have, Result* result) {
  const SteadyClock::time_point start = SteadyClock::now();
  CheckpointInfo taken;
  const Status s = state_machine_->TakeCheckpoint(checkpoints_.get(), "rocksdb", hooks_.config_at, &taken);
  result->write_ms = MillisSince(start);
  if (s.code() == Status::Code::kAborted) {
    // A follower installed a newer snapshot from its leader meanwhile: this
    // one would only add a useless fallback.
    result->info.last_index = have.index;
    result->info.last_term = have.term;
    result->info.path = file::JoinPath(dir_, CheckpointStore::DirName(have.index, have.term));
    return;
  }
  result->status = s;
  result->info.last_index = taken.last_index;
  result->info.last_term = taken.last_term;
  result->info.path = taken.path;
  result->info.bytes = taken.bytes;
  result->crc_bytes_read = taken.crc_bytes_read;
  // The same position as the newest: nothing applied since.
  result->written = s.ok() && taken.last_index >= have.index &&
                    !(taken.last_index == have.index && taken.last_term == have.term);
  if (result->written) {
    // The checkpoints beyond --snapshots_kept go now, on this thread (the
    // I/O loop then finds nothing to remove): removing one frees the SST
    // files only it still links, hundreds of megabytes, which on the I/O
    // loop held heartbeats past an election timeout.
    std::vector<CheckpointInfo> kept;
    const Status pruned = PruneCheckpointsLocked(&kept);
    LOG_IF(WARNING, !pruned.ok()) << "member " << options_.id << ": cannot prune the checkpoints in " << dir_
                                  << ": " << pruned.ToString();
  }
}

// A snapshot file: an image of the state (copy-on-write: the apply thread
// goes on) encoded straight into the file.
void SnapshotManager::TakeFile(const raft::SnapshotRef& have, Result* result) {
  const SteadyClock::time_point start = SteadyClock::now();
  SnapshotMeta meta;
  const std::shared_ptr<const KvStateMachine::SnapshotImage> image = state_machine_->CaptureSnapshot(&meta);
  result->capture_ms = MillisSince(start);
  const uint64_t index = meta.last_index;
  const uint64_t term = meta.last_term;
  result->info.last_index = index;
  result->info.last_term = term;
  if (index == 0) {
    result->status = Status::InvalidArgument("nothing has been applied yet: no snapshot to take");
    return;
  }
  bool write = false;
  if (index < have.index) {
    // A follower installed a newer snapshot from its leader while the
    // image was captured: this one is older than the state already saved.
  } else if (index == have.index && term == have.term) {
    // Nothing applied since the newest snapshot: that one is the answer.
  } else {
    write = hooks_.config_at(index, &meta.config);
  }
  if (write) {
    const SteadyClock::time_point write_start = SteadyClock::now();
    SnapshotFileInfo written;
    // A persistent store holds the state durably first (the log is compacted
    // only up to what it holds).
    result->status = state_machine_->FlushStore();
    if (result->status.ok()) result->status = store_->WriteStreamed(
        meta, [&image](SnapshotWriter* w) { KvStateMachine::EncodeSnapshot(*image, w); }, &written);
    result->write_ms = MillisSince(write_start);
    result->written = result->status.ok();
    result->info.path = written.path;
  } else {
    result->info.last_index = have.index;
    result->info.last_term = have.term;
    result->info.path = file::JoinPath(dir_, SnapshotStore::FileName(have.index, have.term));
  }
  if (result->status.ok()) {
    std::error_code ec;
    result->info.bytes = std::filesystem::file_size(result->info.path, ec);
  }
}

std::optional<SnapshotManager::Result> SnapshotManager::TakeFinished(Completions* out) {
  MutexLock lock(&mu_);
  if (!result_) return std::nullopt;
  std::optional<Result> finished = std::move(result_);
  result_.reset();
  running_ = false;
  if (finished->status.ok() && finished->written && finished->info.last_index > newest_.index) {
    newest_.index = finished->info.last_index;
    newest_.term = finished->info.last_term;
  }
  if (!finished->status.ok()) retry_after_ = SteadyClock::now() + std::chrono::seconds(10);
  for (auto& done : waiters_) {
    out->push_back([done = std::move(done), s = finished->status, info = finished->info] {
      done(s, info);
    });
  }
  waiters_.clear();
  return finished;
}

void SnapshotManager::Finish(const Result& result) {
  if (!result.status.ok()) {
    LOG(ERROR) << "member " << options_.id << ": snapshot at index " << result.info.last_index
               << " failed: " << result.status.ToString()
               << " (automatic snapshots retry in 10 s; the log is kept)";
    // Nothing applied yet is a refusal (raftkvctl snapshot on a new
    // member), not a failure to alert on.
    if (result.status.code() != Status::Code::kInvalidArgument) {
      metrics_->snapshot_failures.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  if (!result.written) return;
  metrics_->snapshots_taken.fetch_add(1, std::memory_order_relaxed);
  LOG(INFO) << "member " << options_.id << " took snapshot " << result.info.path << ": index "
            << result.info.last_index << ", term " << result.info.last_term << ", "
            << result.info.bytes << " bytes, capture " << static_cast<int64_t>(result.capture_ms)
            << " ms, write " << static_cast<int64_t>(result.write_ms) << " ms"
            << (keeps_checkpoints_ ? ", " + std::to_string(result.crc_bytes_read) + " bytes read for CRCs" : "");
  PruneAndCompactLog(/*wait=*/true);
}

// Crash safety. The receiver renamed the verified file into the snapshot
// directory (and synced it) before the core saw the message, so from here
// on a restart finds it: if we crash before the log reset below, recovery
// restores this snapshot and discards the log because it does not continue
// it -- the same outcome. The leader learns of the installation only from
// the response, which goes out after this Ready is durable.
void SnapshotManager::Install(const raft::SnapshotRef& snap) {
  const SteadyClock::time_point start = SteadyClock::now();
  std::string path = file::JoinPath(dir_, CheckpointStore::DirName(snap.index, snap.term));
  Status s;
  if (IsCheckpoint(snap.index, snap.term)) {
    // A checkpoint: its files become the new store (linked, not copied).
    s = state_machine_->InstallCheckpoint(path, snap.index, snap.term);
  } else {
    path = file::JoinPath(dir_, SnapshotStore::FileName(snap.index, snap.term));
    std::unique_ptr<SnapshotReader> reader;
    s = SnapshotReader::Open(path, &reader);
    if (s.ok()) s = state_machine_->Restore(reader.get());
  }
  // The file verified end to end when it was received; failing now means the
  // disk lost it since. Nothing was acknowledged for it yet, so stopping is
  // safe: the restart recovers from the newest intact snapshot and the log.
  LOG_IF(FATAL, !s.ok()) << "cannot install snapshot " << path << " from the leader: " << s.ToString();
  LOG_IF(FATAL, state_machine_->AppliedIndex() != snap.index)
      << path << " restored the state at index " << state_machine_->AppliedIndex() << ", expected "
      << snap.index;
  LOG(INFO) << "member " << options_.id << " restored the leader's snapshot " << path << " (index "
            << snap.index << ", term " << snap.term << ", " << state_machine_->Size()
            << " keys, configuration " << raft::DescribeMembership(snap.config) << ") in "
            << static_cast<int64_t>(MillisSince(start)) << " ms";
}

Status SnapshotManager::FinishInstall(const raft::SnapshotRef& snap) {
  Status s = log_->Reset(snap.index + 1);
  if (!s.ok()) return s;
  {
    MutexLock lock(&mu_);
    if (snap.index > newest_.index) {
      newest_.index = snap.index;
      newest_.term = snap.term;
    }
  }
  log_bytes_after_compaction_ = log_->SizeBytes();
  metrics_->snapshots_installed.fetch_add(1, std::memory_order_relaxed);
  LOG(INFO) << "member " << options_.id << " installed the leader's snapshot at index " << snap.index
            << "; the log restarts at index " << snap.index + 1;
  // Not if a snapshot is being written right now: the next snapshot prunes.
  PruneAndCompactLog(/*wait=*/false);
  return Status::OK();
}

// Crash safety of compaction. Each step only starts once the previous one is
// durable: (1) the new snapshot file is complete (fsync, rename, directory
// fsync: SnapshotStore::Write); (2) older snapshot files beyond
// snapshots_kept are deleted; (3) log segments wholly at or below the OLDEST
// kept snapshot are deleted. A crash anywhere leaves snapshots whose log
// suffix is complete: every kept snapshot, the fallback included, has the
// log entries after it on disk.
void SnapshotManager::PruneAndCompactLog(bool wait) {
  if (wait) {
    store_mu_.lock();
  } else if (!store_mu_.try_lock()) {
    return;
  }
  const SteadyClock::time_point start = SteadyClock::now();
  std::vector<SnapshotFileInfo> files;
  std::vector<CheckpointInfo> checkpoints;
  Status s = store_->Prune(options_.snapshots_kept);
  if (s.ok() && checkpoints_) s = PruneCheckpointsLocked(&checkpoints);
  if (s.ok()) s = store_->List(&files);
  store_mu_.unlock();
  if (!s.ok()) {
    LOG(ERROR) << "cannot prune the snapshots in " << dir_ << ": " << s.ToString()
               << " (the log is not compacted)";
    return;
  }
  if (files.empty() && checkpoints.empty()) return;
  // The oldest kept snapshot, of either kind.
  uint64_t keep_after = UINT64_MAX;
  if (!files.empty()) keep_after = files.front().last_index;
  if (!checkpoints.empty()) keep_after = std::min(keep_after, checkpoints.front().last_index);
  const size_t segments_before = log_->SegmentCount();
  const SteadyClock::time_point pruned = SteadyClock::now();
  s = log_->CompactPrefix(keep_after);
  if (!s.ok()) {
    LOG(ERROR) << "cannot compact the log up to index " << keep_after << ": " << s.ToString();
    return;
  }
  log_bytes_after_compaction_ = log_->SizeBytes();
  const size_t removed = segments_before - std::min(segments_before, log_->SegmentCount());
  LOG(INFO) << "member " << options_.id << ": " << files.size() + checkpoints.size()
            << " snapshot(s) kept (oldest " << keep_after << "); log compacted up to index "
            << keep_after << ": " << removed << " segment(s) removed, log now starts at "
            << log_->FirstIndex() << " (" << log_bytes_after_compaction_ << " bytes); pruning "
            << std::chrono::duration_cast<std::chrono::milliseconds>(pruned - start).count()
            << " ms, compacting "
            << std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - pruned).count()
            << " ms";
}

Status SnapshotManager::PruneCheckpointsLocked(std::vector<CheckpointInfo>* kept) {
  Status s = checkpoints_->Prune(options_.snapshots_kept);
  if (s.ok()) s = checkpoints_->List(kept);
  if (!s.ok() || kept->empty()) return s;
  // Snapshot files at or below the newest checkpoint (received from a
  // member of the other engine, or older than the checkpoints) are done
  // with: none may hold the log back.
  std::vector<SnapshotFileInfo> files;
  s = store_->List(&files);
  bool removed = false;
  for (const SnapshotFileInfo& f : files) {
    if (!s.ok() || f.last_index > kept->back().last_index) continue;
    s = file::Remove(f.path);
    removed = true;
  }
  if (s.ok() && removed) s = file::SyncDir(dir_);
  return s;
}

void SnapshotManager::Stop(Completions* out) {
  // A snapshot being taken finishes its file (it is complete and valid
  // either way); the log is not compacted for it, which is safe.
  if (thread_.joinable()) thread_.join();
  MutexLock lock(&mu_);
  stopped_ = true;
  for (auto& done : waiters_) {
    out->push_back([done = std::move(done)] {
      done(Status::IOError("server is shutting down; no snapshot was taken"), SnapshotInfo());
    });
  }
  waiters_.clear();
}

}  // namespace raftkv
