// KvBackend: the ordered byte store under the key-value state, with no KV
// semantics of its own (doc/on-disk-store.md, section 2.1). The MVCC layer
// above it encodes versions, history, leases and sessions into keys
// (kv/mvcc_keys.h) and turns each applied entry into one BackendBatch and one
// Write(); readers take a BackendView, the state after one Write(), and read
// it while later writes go on. Two engines implement it:
//  * MemoryBackend (storage/memory_backend.h): a copy-on-write B-tree; a view
//    is an O(1) image. Durable only through Checkpoint() and log replay.
//  * RocksDbBackend (storage/rocksdb_backend.h, with RAFTKV_HAVE_ROCKSDB):
//    one column family, writes without RocksDB's WAL (the Raft log is the
//    WAL); a view is a RocksDB snapshot.
//
// Keys compare as unsigned bytes (memcmp, then length), for both engines.
//
// Durability: Write() is atomic but not durable. After Flush() returns OK,
// every earlier Write() survives a crash of a persistent() engine; a crash
// loses the writes after the last Flush(), whole batches only.
//
// Thread safety: a KvBackend may be called from any number of threads;
// Write() calls are ordered by the caller (the apply thread). Views and
// iterators are immutable and may be used from any thread; an iterator is
// used by one thread at a time. A view (and an iterator, which holds its
// view) may outlive the backend that made it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace raftkv {

// A cursor over the keys of a view in [lower, upper), ascending.
class BackendIterator {
 public:
  virtual ~BackendIterator() = default;
  // Moves to the first key >= max(target, lower).
  virtual void Seek(std::string_view target) = 0;
  virtual bool Valid() const = 0;
  // Requires Valid().
  virtual void Next() = 0;
  // Requires Valid(); valid until the next move.
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  // Not OK when reading failed; Valid() is then false.
  virtual Status status() const = 0;
};

// The state after one Write(), unchanged by later writes.
class BackendView {
 public:
  virtual ~BackendView() = default;
  // Sets *found and, if found, *value.
  virtual Status Get(std::string_view key, std::string* value, bool* found) const = 0;
  // An iterator over [lower, upper); an empty `upper` has no upper bound. It
  // is not positioned: call Seek() first.
  virtual std::unique_ptr<BackendIterator> NewIterator(std::string_view lower,
                                                       std::string_view upper) const = 0;
  // An iterator for lookups of one key at a time: as NewIterator, but each
  // Seek() targets a key with a lookup prefix (RocksDbBackend::Options::
  // lookup_prefix, mvcc::LookupPrefix) and the caller reads only the keys
  // that share it; the iterator may end as soon as the keys leave it. An
  // engine with filters of these prefixes skips the files that hold none.
  virtual std::unique_ptr<BackendIterator> NewLookupIterator(std::string_view lower,
                                                             std::string_view upper) const {
    return NewIterator(lower, upper);
  }
};

// Changes applied together by one Write(), in order (a later change to a key
// wins).
class BackendBatch {
 public:
  enum class OpType : uint8_t { kPut, kDelete, kDeleteRange };
  struct Op {
    OpType type;
    std::string key;    // kDeleteRange: the first key removed
    std::string value;  // kPut: the value; kDeleteRange: the end (excluded)
  };

  void Put(std::string key, std::string value) {
    Add(OpType::kPut, std::move(key), std::move(value));
  }
  void Delete(std::string key) { Add(OpType::kDelete, std::move(key), std::string()); }
  // Removes the keys in [begin, end).
  void DeleteRange(std::string begin, std::string end) {
    Add(OpType::kDeleteRange, std::move(begin), std::move(end));
  }
  const std::vector<Op>& ops() const { return ops_; }
  bool empty() const { return ops_.empty(); }
  // The bytes of keys and values the batch carries.
  size_t bytes() const { return bytes_; }
  void Clear() {
    ops_.clear();
    bytes_ = 0;
  }
  // Adds `other`'s changes after this batch's, leaving `other` empty.
  void Append(BackendBatch&& other) {
    bytes_ += other.bytes_;
    for (Op& op : other.TakeOps()) ops_.push_back(std::move(op));
  }
  // Moves the changes out, leaving the batch empty.
  std::vector<Op> TakeOps() {
    std::vector<Op> ops = std::move(ops_);
    Clear();
    return ops;
  }

 private:
  void Add(OpType type, std::string key, std::string value) {
    bytes_ += key.size() + value.size();
    ops_.push_back(Op{type, std::move(key), std::move(value)});
  }
  std::vector<Op> ops_;
  size_t bytes_ = 0;
};

// What Checkpoint() wrote: a directory that holds the whole state.
struct CheckpointManifest {
  struct FileInfo {
    std::string name;  // in `dir`
    uint64_t size = 0;
    // The file's CRC-32C when the engine keeps it (RocksDB, for the SST
    // files it wrote with checksums on), so nobody reads the file for it.
    bool has_crc32c = false;
    uint32_t crc32c = 0;
  };
  std::string dir;
  std::vector<FileInfo> files;  // sorted by name
};

struct BackendStats {
  uint64_t live_bytes = 0;      // RocksDB: live SST files; memory: keys and values
  uint64_t memtable_bytes = 0;  // RocksDB: all memtables not yet flushed; memory: 0
  // RocksDB: every memtable in memory, flushed ones an iterator still holds
  // included; memory: 0.
  uint64_t memtable_memory_bytes = 0;
  // What the store holds, written or not: etcd's DB SIZE.
  uint64_t StoredBytes() const { return live_bytes + memtable_bytes; }
};

class KvBackend {
 public:
  virtual ~KvBackend() = default;
  // Applies `batch` atomically: a view sees all of it or none.
  virtual Status Write(const BackendBatch& batch) = 0;
  // The state after the last Write() that returned.
  virtual std::shared_ptr<const BackendView> View() const = 0;
  // Makes every earlier Write() durable (RocksDB: memtables to SST files;
  // memory: nothing to do).
  virtual Status Flush() = 0;
  // True if the state survives a restart without a checkpoint load.
  virtual bool persistent() const = 0;
  // Writes the whole current state into `dir`, which must not exist, and
  // makes it durable; *out lists what it holds.
  virtual Status Checkpoint(const std::string& dir, CheckpointManifest* out) = 0;
  virtual BackendStats Stats() const = 0;
  // The error that stopped background work (RocksDB: a failed flush or
  // compaction; writes then fail too), or OK.
  virtual Status BackgroundError() const = 0;
  // Clears the background error once what caused it is gone (RocksDB:
  // DB::Resume, which retries the failed flush), so that writes are taken
  // again; OK when there was none, IOError while the cause remains,
  // Unavailable while the engine resumes on its own, FailedPrecondition when
  // it never will (RocksDB after an I/O error it cannot retry). An engine
  // without background work has nothing to resume.
  virtual Status Resume() { return Status::OK(); }
  // Reads every stored block, checking its checksum (RocksDB); an engine
  // with nothing on disk has nothing to check.
  virtual Status VerifyChecksums() const { return Status::OK(); }
  // Rewrites the whole store so that deleted rows free their space
  // (RocksDB: the memtables flushed, then every level compacted down); an
  // engine that frees space at once has nothing to do.
  virtual Status CompactAll() { return Status::OK(); }
};

// Where a persistent engine keeps its stores (storage/rocksdb_store_dir.h):
// the one a restart opens, and the new one a snapshot's install fills aside
// and then makes current.
class KvBackendFactory {
 public:
  virtual ~KvBackendFactory() = default;
  // A new, empty store for the state at (index, term), beside the current
  // one (which a restart still opens).
  virtual Status Create(uint64_t index, uint64_t term, std::unique_ptr<KvBackend>* out) = 0;
  // Makes the store of Create(index, term) the one a restart opens,
  // durably: the commit point of an install. Flush it first.
  virtual Status Commit(uint64_t index, uint64_t term) = 0;
  // Removes the stores a restart would not open that nothing reads any
  // more (a view may keep a replaced store open). Failures are logged.
  virtual void RemoveStale() = 0;

  // Checkpoint snapshots (storage/checkpoint_store.h); an engine without
  // them answers FailedPrecondition.
  // The checkpoint in `dir` opened for reading only.
  virtual Status OpenCheckpoint(const std::string& dir, std::unique_ptr<KvBackend>* out);
  // Like Create(index, term), but the new store is the checkpoint in `dir`
  // (its immutable files linked, not copied), durable and opened.
  virtual Status CreateFromCheckpoint(const std::string& dir, uint64_t index, uint64_t term,
                                      std::unique_ptr<KvBackend>* out);
};

// Fills *out with `dir` and the names and sizes of the regular files in it:
// the manifest of a checkpoint just written there.
Status ListCheckpointFiles(const std::string& dir, CheckpointManifest* out);

}  // namespace raftkv
