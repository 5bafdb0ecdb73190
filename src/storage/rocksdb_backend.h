// RocksDbBackend: the KvBackend (storage/kv_backend.h) of the on-disk
// engine, over one RocksDB database with one column family (one family keeps
// every flush and checkpoint consistent; doc/on-disk-store.md, section 2).
// Built only with RAFTKV_HAVE_ROCKSDB (CMake option RAFTKV_WITH_ROCKSDB).
//
// Durability: writes go without RocksDB's write-ahead log (disableWAL, no
// sync): the Raft log is the WAL. A crash loses the memtables, so the
// database reopens at its last Flush(), at a batch boundary, and the caller
// replays its log from there. Closing (destroying the backend) flushes,
// unless Options::flush_on_close is false. A directory Open() creates is
// made durable in its parent (RocksDB does not sync the parent).
//
// Files: always through InterposedFileSystem (storage/rocksdb_fs.h), so that
// the power-loss tests see RocksDB's file calls; without a test's
// interposer installed it adds one atomic load per file opened.
//
// View() is a RocksDB snapshot, released when the last view and iterator
// that read it drop it; they also keep the database open, so a view may
// outlive the backend.
//
// Errors are mapped to Status (IOError, Corruption, InvalidArgument, ...)
// with RocksDB's message. BackgroundError() is what RocksDB reported through
// its event listener (a failed flush or compaction) until it recovers.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "storage/kv_backend.h"

namespace rocksdb {
class DB;
}  // namespace rocksdb

namespace raftkv {

class RocksDbBackend final : public KvBackend {
 public:
  struct Options {
    // Create the database if `dir` holds none (false: opening a checkpoint).
    bool create_if_missing = true;
    // Flush the memtables when the backend is destroyed. false leaves them
    // unwritten, as a crash would (tests of what a crash keeps).
    bool flush_on_close = true;
    // Open for reading only (a checkpoint being read or verified): nothing
    // in `dir` is changed, Write() and Flush() fail.
    bool read_only = false;
    // Groups of keys the memtable keeps an insert position for: the length
    // of the prefix of a key that names its group, 0 for none. A key written
    // next to the last one of its group (in order, or over again) is then
    // inserted in a few comparisons instead of a search of the whole
    // memtable; the keys of no group share one position. Unset: no groups.
    std::function<size_t(std::string_view key)> insert_group_prefix;
    // The lookup prefix of a key (BackendView::NewLookupIterator), 0 for a
    // key outside any. Set: every SST file keeps a bloom filter of the
    // lookup prefixes it holds, and a lookup skips the files without the
    // one it seeks (the memtables are searched). Unset: no filters; lookups
    // read every file.
    std::function<size_t(std::string_view key)> lookup_prefix;
  };

  // Opens (or creates) the database in `dir`.
  static Status Open(const std::string& dir, const Options& options,
                     std::unique_ptr<RocksDbBackend>* out);
  ~RocksDbBackend() override;
  // Opens the database in `dir` read-only and reads every block of every
  // file, checking its checksum: Corruption naming what failed.
  static Status VerifyDirectory(const std::string& dir);

  Status Write(const BackendBatch& batch) override;
  std::shared_ptr<const BackendView> View() const override;
  Status Flush() override;
  bool persistent() const override { return true; }
  // A RocksDB checkpoint (hard links of the SST files, copies of the rest),
  // taken after a flush: required, since the WAL is off.
  Status Checkpoint(const std::string& dir, CheckpointManifest* out) override;
  // live_bytes: rocksdb.live-sst-files-size; memtable_bytes:
  // rocksdb.cur-size-all-mem-tables; memtable_memory_bytes:
  // rocksdb.size-all-mem-tables.
  BackendStats Stats() const override;
  // An iterator is made again at its snapshot every this many steps, so that
  // it lets go of the memtables flushed since (rocksdb_backend.cc).
  static constexpr int kIteratorRenewSteps = 4096;
  Status BackgroundError() const override;
  Status Resume() override;
  Status VerifyChecksums() const override;
  Status CompactAll() override;
  // Expires once the database is closed: the backend and every view of it
  // are gone (RocksDbStoreDir removes a replaced store only then).
  std::weak_ptr<const void> Liveness() const { return db_; }

 private:
  class ErrorListener;
  class GroupPrefix;
  RocksDbBackend(std::shared_ptr<rocksdb::DB> db, std::shared_ptr<ErrorListener> errors,
                 std::shared_ptr<GroupPrefix> groups, bool filtered);

  const std::shared_ptr<rocksdb::DB> db_;  // closed when its last holder drops it
  const std::shared_ptr<ErrorListener> errors_;
  const std::shared_ptr<GroupPrefix> groups_;  // null without insert groups
  const bool filtered_;                         // Options::lookup_prefix was set
};

}  // namespace raftkv
