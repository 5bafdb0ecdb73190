#include "storage/rocksdb_backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include <glog/logging.h>
#include <rocksdb/db.h>
#include <rocksdb/file_checksum.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/listener.h>
#include <rocksdb/options.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include "common/mutex.h"
#include "storage/file_util.h"
#include "storage/rocksdb_fs.h"
#include "storage/rocksdb_info_log.h"

namespace raftkv {
namespace {

// RocksDB's status as ours, with its message and `what` failed.
Status FromRocksDb(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::OK();
  std::string msg = what + ": " + s.ToString();
  if (s.IsIOError()) return Status::IOError(std::move(msg));  // includes IsNoSpace()
  if (s.IsCorruption()) return Status::Corruption(std::move(msg));
  if (s.IsInvalidArgument()) return Status::InvalidArgument(std::move(msg));
  if (s.IsNotFound()) return Status::NotFound(std::move(msg));
  if (s.IsBusy() || s.IsTryAgain()) return Status::Unavailable(std::move(msg));
  return Status::Internal(std::move(msg));
}

// The database pinned by `db` at one sequence number.
class RocksDbView final : public BackendView,
                          public std::enable_shared_from_this<RocksDbView> {
 public:
  // `filtered`: the database has lookup filters (Options::lookup_prefix).
  RocksDbView(std::shared_ptr<rocksdb::DB> db, const rocksdb::Snapshot* snapshot, bool filtered)
      : db_(std::move(db)), snapshot_(snapshot), filtered_(filtered) {}
  ~RocksDbView() override { db_->ReleaseSnapshot(snapshot_); }

  Status Get(std::string_view key, std::string* value, bool* found) const override {
    rocksdb::ReadOptions options;
    options.snapshot = snapshot_;
    const rocksdb::Status s = db_->Get(options, rocksdb::Slice(key.data(), key.size()), value);
    *found = s.ok();
    return s.IsNotFound() ? Status::OK() : FromRocksDb(s, "Get");
  }
  std::unique_ptr<BackendIterator> NewIterator(std::string_view lower,
                                               std::string_view upper) const override;
  std::unique_ptr<BackendIterator> NewLookupIterator(std::string_view lower,
                                                     std::string_view upper) const override;
  rocksdb::DB* db() const { return db_.get(); }
  const rocksdb::Snapshot* snapshot() const { return snapshot_; }

 private:
  const std::shared_ptr<rocksdb::DB> db_;
  const rocksdb::Snapshot* const snapshot_;
  const bool filtered_;
};

// A RocksDB iterator holds on to the memtables that existed when it was
// made (the active one goes on filling) and to the files of that version,
// flushed or compacted away or not, for as long as it lives. So that a long
// walk (a snapshot of the whole state, a big range) while writes go on does
// not keep them (up to two memtables, 128 MiB, and every file compaction
// replaced meanwhile), every kIteratorRenewSteps steps the iterator is made
// again at the same snapshot and put back on the key it was on.
class RocksDbIterator final : public BackendIterator {
 public:
  // `lookup`: in RocksDB's prefix mode, which reads the keys of the prefix
  // of each Seek's target and skips the files whose filter lacks it.
  RocksDbIterator(std::shared_ptr<const RocksDbView> view, std::string_view lower,
                  std::string_view upper, bool lookup)
      : view_(std::move(view)), lower_(lower), upper_(upper), lookup_(lookup) {
    Renew();
  }
  void Seek(std::string_view target) override {
    it_->Seek(target < lower_ ? lower_slice_ : rocksdb::Slice(target.data(), target.size()));
  }
  bool Valid() const override { return it_->Valid(); }
  void Next() override {
    it_->Next();
    if (++steps_ < RocksDbBackend::kIteratorRenewSteps || !it_->Valid()) return;
    const std::string at = it_->key().ToString();
    Renew();
    it_->Seek(at);
  }
  std::string_view key() const override { return it_->key().ToStringView(); }
  std::string_view value() const override { return it_->value().ToStringView(); }
  Status status() const override { return FromRocksDb(it_->status(), "iterator"); }

 private:
  // Destroyed in reverse: the iterator, then the bounds it points to, then
  // the view that pins its snapshot and database.
  const std::shared_ptr<const RocksDbView> view_;
  const std::string lower_;
  const std::string upper_;
  const rocksdb::Slice lower_slice_{lower_};
  const rocksdb::Slice upper_slice_{upper_};
  const bool lookup_;
  std::unique_ptr<rocksdb::Iterator> it_;
  int steps_ = 0;  // since it_ was made

  void Renew() {
    rocksdb::ReadOptions options;
    options.snapshot = view_->snapshot();
    options.iterate_lower_bound = &lower_slice_;
    if (!upper_.empty()) options.iterate_upper_bound = &upper_slice_;
    // With a prefix extractor, RocksDB's default is prefix mode: every other
    // read asks for the keys in order whatever their prefixes.
    options.total_order_seek = !lookup_;
    options.prefix_same_as_start = lookup_;
    it_.reset();  // first: the old one lets go of what it held
    it_.reset(view_->db()->NewIterator(options));
    steps_ = 0;
  }
};

std::unique_ptr<BackendIterator> RocksDbView::NewIterator(std::string_view lower,
                                                          std::string_view upper) const {
  return std::make_unique<RocksDbIterator>(shared_from_this(), lower, upper, /*lookup=*/false);
}

std::unique_ptr<BackendIterator> RocksDbView::NewLookupIterator(std::string_view lower,
                                                                std::string_view upper) const {
  return std::make_unique<RocksDbIterator>(shared_from_this(), lower, upper, filtered_);
}

}  // namespace

namespace {

// Drops RocksDB's informational log: a database opened read-only must not
// create a LOG file in a checkpoint (which lists its files exactly).
class DiscardingLogger final : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char*, va_list) override {}
};


}  // namespace

// Keeps the last background error RocksDB reported, until it recovers.
class RocksDbBackend::ErrorListener final : public rocksdb::EventListener {
 public:
  void OnBackgroundError(rocksdb::BackgroundErrorReason, rocksdb::Status* error) override {
    MutexLock lock(&mu_);
    error_ = FromRocksDb(*error, "background work");
  }
  void OnErrorRecoveryEnd(const rocksdb::BackgroundErrorRecoveryInfo& info) override {
    MutexLock lock(&mu_);
    error_ = FromRocksDb(info.new_bg_error, "background work");
  }
  Status error() const {
    MutexLock lock(&mu_);
    return error_;
  }
  void Clear() {
    MutexLock lock(&mu_);
    error_ = Status::OK();
  }

 private:
  mutable Mutex mu_;
  Status error_ GUARDED_BY(mu_);
};

namespace {

// A RocksDB prefix extractor from a function giving the length of a key's
// prefix, 0 for a key outside every prefix. `name` is stored in every SST
// file written with it (a filter built under another name is not used).
class FunctionPrefix : public rocksdb::SliceTransform {
 public:
  FunctionPrefix(const char* name, std::function<size_t(std::string_view)> prefix)
      : name_(name), prefix_(std::move(prefix)) {}
  const char* Name() const override { return name_; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data(), std::min(key.size(), prefix_(Of(key))));
  }
  bool InDomain(const rocksdb::Slice& key) const override { return prefix_(Of(key)) > 0; }

 protected:
  static std::string_view Of(const rocksdb::Slice& key) { return {key.data(), key.size()}; }

 private:
  const char* const name_;
  const std::function<size_t(std::string_view)> prefix_;
};

}  // namespace

// The prefix a memtable insert hint is kept for (Options::insert_group_prefix).
//
// RocksDB before 9.2.1 keeps one map of hints for the two lists of a
// memtable, the point writes' and the range deletions': a DeleteRange whose
// start key is in a group is inserted at a position taken from the other
// list (an assertion in builds with them, a broken memtable without; fixed
// upstream by #12558). While a write with range deletions runs, their start
// keys are in no group (RangeDeletes), so they go in without a hint.
class RocksDbBackend::GroupPrefix final : public FunctionPrefix {
 public:
  explicit GroupPrefix(std::function<size_t(std::string_view)> prefix)
      : FunctionPrefix("raftkv.InsertGroupPrefix", std::move(prefix)) {}
  bool InDomain(const rocksdb::Slice& key) const override {
    if (range_writes_.load(std::memory_order_acquire) > 0) {
      MutexLock lock(&mu_);
      if (range_starts_.count(std::string(Of(key))) > 0) return false;
    }
    return FunctionPrefix::InDomain(key);
  }

  // Keeps `starts` out of every group while it lives.
  class RangeDeletes {
   public:
    RangeDeletes(GroupPrefix* groups, std::vector<std::string> starts)
        : groups_(groups), starts_(std::move(starts)) {
      if (groups_ == nullptr || starts_.empty()) return;
      MutexLock lock(&groups_->mu_);
      for (const std::string& k : starts_) groups_->range_starts_.insert(k);
      groups_->range_writes_.fetch_add(1, std::memory_order_release);
    }
    ~RangeDeletes() {
      if (groups_ == nullptr || starts_.empty()) return;
      MutexLock lock(&groups_->mu_);
      for (const std::string& k : starts_) groups_->range_starts_.erase(groups_->range_starts_.find(k));
      groups_->range_writes_.fetch_sub(1, std::memory_order_release);
    }
    RangeDeletes(const RangeDeletes&) = delete;
    RangeDeletes& operator=(const RangeDeletes&) = delete;

   private:
    GroupPrefix* const groups_;
    const std::vector<std::string> starts_;
  };

 private:
  std::atomic<int> range_writes_{0};
  mutable Mutex mu_;
  std::multiset<std::string> range_starts_ GUARDED_BY(mu_);
};

Status RocksDbBackend::Open(const std::string& dir, const Options& options,
                            std::unique_ptr<RocksDbBackend>* out) {
  if (options.create_if_missing && !options.read_only) {
    // RocksDB creates a missing directory without syncing its parent: after
    // a power cut the directory, and every flush synced inside it, could be
    // gone (PowerLossRocksDb.FlushAtEveryStep).
    Status s = file::CreateDirsDurably(dir);
    if (!s.ok()) return s;
  }
  auto errors = std::make_shared<ErrorListener>();
  rocksdb::Options db_options;
  db_options.create_if_missing = options.create_if_missing && !options.read_only;
  db_options.avoid_flush_during_shutdown = !options.flush_on_close || options.read_only;
  db_options.listeners.push_back(errors);
  std::shared_ptr<GroupPrefix> groups;
  if (options.insert_group_prefix && !options.read_only) {
    groups = std::make_shared<GroupPrefix>(options.insert_group_prefix);
    // The memtable ignores hints in concurrent inserts, which gain nothing
    // with one writer (the apply thread).
    db_options.allow_concurrent_memtable_write = false;
    db_options.memtable_insert_with_hint_prefix_extractor = groups;
  }
  const bool filtered = options.lookup_prefix != nullptr;
  rocksdb::BlockBasedTableOptions table;
  // XXH3, not the CRC-32C RocksDB computes in software when it is built
  // portable (Debian's): every block written by a flush or a compaction,
  // and read back by one, is checksummed. Files of either kind open alike.
  table.checksum = rocksdb::kXXH3;
  if (filtered) {
    db_options.prefix_extractor =
        std::make_shared<FunctionPrefix>("raftkv.LookupPrefix.1", options.lookup_prefix);
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    table.whole_key_filtering = false;  // point reads are of a few metadata rows
  }
  db_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  db_options.env = InterposedEnv();
  // Every SST file's CRC-32C, computed as it is written: a checkpoint's
  // manifest takes them from here instead of reading the files.
  db_options.file_checksum_gen_factory = Crc32cFileChecksums();
  if (options.read_only) {
    db_options.info_log = std::make_shared<DiscardingLogger>();
  } else {
    // Not RocksDB's own info log: on a full disk its next line after a
    // failed write aborts the process (storage/rocksdb_info_log.h).
    std::shared_ptr<RocksDbInfoLog> log;
    Status opened = RocksDbInfoLog::Open(dir, RocksDbInfoLog::kDefaultMaxBytes, &log);
    if (opened.ok()) {
      db_options.info_log = std::move(log);
    } else {
      LOG(WARNING) << "RocksDB's informational log in " << dir << " is off: " << opened;
      db_options.info_log = std::make_shared<DiscardingLogger>();
    }
  }
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s = options.read_only ? rocksdb::DB::OpenForReadOnly(db_options, dir, &raw)
                                             : rocksdb::DB::Open(db_options, dir, &raw);
  if (!s.ok()) return FromRocksDb(s, "opening " + dir);
  std::shared_ptr<rocksdb::DB> db(raw, [](rocksdb::DB* d) {
    d->Close();  // flushes unless avoid_flush_during_shutdown; its error is the next open's
    delete d;
  });
  out->reset(new RocksDbBackend(std::move(db), std::move(errors), std::move(groups), filtered));
  return Status::OK();
}

Status RocksDbBackend::VerifyDirectory(const std::string& dir) {
  Options options;
  options.create_if_missing = false;
  options.read_only = true;
  std::unique_ptr<RocksDbBackend> db;
  Status s = Open(dir, options, &db);
  return s.ok() ? db->VerifyChecksums() : s;
}

Status RocksDbBackend::VerifyChecksums() const {
  return FromRocksDb(db_->VerifyChecksum(), "verifying the checksums of " + db_->GetName());
}

RocksDbBackend::RocksDbBackend(std::shared_ptr<rocksdb::DB> db,
                               std::shared_ptr<ErrorListener> errors,
                               std::shared_ptr<GroupPrefix> groups, bool filtered)
    : db_(std::move(db)), errors_(std::move(errors)), groups_(std::move(groups)),
      filtered_(filtered) {}

RocksDbBackend::~RocksDbBackend() = default;

Status RocksDbBackend::Write(const BackendBatch& batch) {
  // Its whole size up front (a 12-byte header; per row a type byte and two
  // varint lengths): growing it by doubling copied every row written before.
  rocksdb::WriteBatch wb(12 + batch.bytes() + 11 * batch.ops().size());
  rocksdb::Status s;
  std::vector<std::string> range_starts;
  for (const BackendBatch::Op& op : batch.ops()) {
    switch (op.type) {
      case BackendBatch::OpType::kPut: s = wb.Put(op.key, op.value); break;
      case BackendBatch::OpType::kDelete: s = wb.Delete(op.key); break;
      case BackendBatch::OpType::kDeleteRange:
        s = wb.DeleteRange(op.key, op.value);
        if (groups_ != nullptr) range_starts.push_back(op.key);
        break;
    }
    if (!s.ok()) return FromRocksDb(s, "building a write batch");
  }
  rocksdb::WriteOptions options;
  options.disableWAL = true;  // the Raft log is the WAL
  options.sync = false;
  const GroupPrefix::RangeDeletes ungrouped(groups_.get(), std::move(range_starts));
  return FromRocksDb(db_->Write(options, &wb), "Write");
}

std::shared_ptr<const BackendView> RocksDbBackend::View() const {
  return std::make_shared<RocksDbView>(db_, db_->GetSnapshot(), filtered_);
}

Status RocksDbBackend::Flush() {
  rocksdb::FlushOptions options;
  options.wait = true;
  Status s = FromRocksDb(db_->Flush(options), "Flush");
  // Once RocksDB before 8.9 has resumed after a background error, a waiting
  // flush returns as soon as it is scheduled (ErrorHandler::ClearBGError
  // leaves the database marked stopped, and WaitForFlushMemTables then does
  // not wait): the memtables are waited for here, until none is left to
  // write (StoreStallRocksDbTest).
  uint64_t unflushed = 0;
  while (s.ok()) {
    if (!db_->GetIntProperty(rocksdb::DB::Properties::kNumImmutableMemTable, &unflushed)) {
      return Status::Internal("Flush: RocksDB does not report its unflushed memtables");
    }
    if (unflushed == 0) break;
    s = errors_->error();
    if (s.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return s;
}

Status RocksDbBackend::CompactAll() {
  rocksdb::CompactRangeOptions options;
  // The last level too, where deletions are finally dropped with what they
  // delete (kForceOptimized: not the files the compaction just wrote).
  options.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForceOptimized;
  options.exclusive_manual_compaction = false;  // background compactions go on
  return FromRocksDb(db_->CompactRange(options, nullptr, nullptr), "compacting the whole store");
}

Status RocksDbBackend::Checkpoint(const std::string& dir, CheckpointManifest* out) {
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status s = rocksdb::Checkpoint::Create(db_.get(), &raw);
  if (!s.ok()) return FromRocksDb(s, "Checkpoint");
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush 0: always flush, the memtables have no WAL to copy.
  s = checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0);
  if (!s.ok()) return FromRocksDb(s, "checkpoint into " + dir);
  Status listed = ListCheckpointFiles(dir, out);
  if (!listed.ok()) return listed;
  // The CRCs RocksDB keeps for the live SST files; a file compacted away
  // since the checkpoint (or written without checksums) has none here.
  std::unique_ptr<rocksdb::FileChecksumList> sums(rocksdb::NewFileChecksumList());
  std::vector<uint64_t> numbers;
  std::vector<std::string> checksums;
  std::vector<std::string> functions;
  if (!db_->GetLiveFilesChecksumInfo(sums.get()).ok() ||
      !sums->GetAllFileChecksums(&numbers, &checksums, &functions).ok()) {
    return Status::OK();
  }
  std::map<std::string, uint32_t> by_name;
  for (size_t i = 0; i < numbers.size(); ++i) {
    if (functions[i] != rocksdb::kStandardDbFileChecksumFuncName || checksums[i].size() != 4) continue;
    char name[32];
    std::snprintf(name, sizeof(name), "%06" PRIu64 ".sst", numbers[i]);
    const auto* b = reinterpret_cast<const unsigned char*>(checksums[i].data());  // big-endian
    by_name[name] = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
  }
  for (CheckpointManifest::FileInfo& f : out->files) {
    const auto it = by_name.find(f.name);
    if (it == by_name.end()) continue;
    f.has_crc32c = true;
    f.crc32c = it->second;
  }
  return Status::OK();
}

BackendStats RocksDbBackend::Stats() const {
  BackendStats stats;
  uint64_t v = 0;
  if (db_->GetIntProperty(rocksdb::DB::Properties::kLiveSstFilesSize, &v)) stats.live_bytes = v;
  if (db_->GetIntProperty(rocksdb::DB::Properties::kCurSizeAllMemTables, &v)) {
    stats.memtable_bytes = v;
  }
  if (db_->GetIntProperty(rocksdb::DB::Properties::kSizeAllMemTables, &v)) {
    stats.memtable_memory_bytes = v;
  }
  return stats;
}

Status RocksDbBackend::BackgroundError() const { return errors_->error(); }

Status RocksDbBackend::Resume() {
  const rocksdb::Status s = db_->Resume();
  if (!s.ok() && s.severity() > rocksdb::Status::Severity::kHardError) {
    // RocksDB resumes after a full disk (NoSpace: a hard error), never after
    // a failed write it cannot retry (EIO): what is on disk is all there is.
    return Status::FailedPrecondition("the key-value store cannot resume after " + s.ToString() +
                                      "; restart the member to recover from its disk");
  }
  if (!s.ok()) return FromRocksDb(s, "resuming after a background error");
  // RocksDB 7.8 reports the recovery to the listener (OnErrorRecoveryEnd)
  // before Resume returns; cleared here too, so that a Flush right after
  // this does not depend on a listener call for the error it waits on.
  errors_->Clear();
  return Status::OK();
}

}  // namespace raftkv
