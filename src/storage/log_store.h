// The durable half of the Raft log. The consensus core keeps the entries it
// needs in memory; a LogStore makes them survive a crash.
//
// On-disk format (SegmentedLog), documented in doc/storage.md "Log segments":
//   <dir>/<20-digit first index>.seg   segment files, in index order
//   record  := crc32c:u32le  length:u32le  payload[length]
//   crc32c  covers the 4 length bytes followed by the payload
//   payload := serialized raftkv.Entry
// Segments are contiguous: the first record of a segment holds the index in its
// name, and each record's index is one more than the previous record's. The
// log starts at the oldest segment's index (compaction removes a prefix); a
// last segment that is empty records where the next entry goes, so an empty
// log that starts past 1 is one empty file <next index>.seg. Zero bytes from a
// record boundary to the end of a file (preallocated space no record reached
// yet) end its records: an all-zero header is no record.
//
// Compaction (CompactPrefix) removes whole segments, oldest first, syncing the
// directory after each: a crash leaves the log starting at a later segment.
//
// Reset protocol (Reset(n)), crash-safe at every step:
//   1. create the empty marker file <dir>/RESET-<20-digit n>; fsync the dir.
//      This is the commit point: without the marker on disk the old log is
//      intact; with it, Open() finishes the reset before reading anything.
//   2. remove every segment file, oldest first (including an old <n>.seg);
//      fsync the dir.
//   3. create the empty <n>.seg; fsync the dir.
//   4. remove the marker; fsync the dir. Reset() returns.
// Open() finding one marker RESET-<n> redoes steps 2-4 (they are idempotent)
// and then opens the empty log at n; more than one marker is Corruption.
//
// This class does no internal locking: one thread (the node's I/O loop) calls it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "proto/internal.h"
#include "common/status.h"

namespace raftkv {

// What Open() found on disk.
struct LogRecovery {
  std::vector<Entry> entries;  // every valid entry, in index order
  // Index the log starts at: entries.front().index() when there are entries;
  // for an empty log the index its next entry will have (1 for a new log, or
  // what Reset() set), so a compacted-then-emptied log is not mistaken for a
  // new one.
  uint64_t first_index = 1;
  // True if a torn or corrupt record at the tail of the last segment was cut
  // off. `detail` then says which file, at which offset, and why.
  bool truncated_tail = false;
  std::string detail;
};

class LogStore {
 public:
  virtual ~LogStore() = default;

  // Writes `entries` (contiguous, ascending indexes) after the existing log.
  // If entries.front().index <= LastIndex(), every stored entry with an index
  // >= entries.front().index is removed first (Raft's conflicting-suffix
  // truncation). entries.front().index must be <= LastIndex() + 1 and
  // > 0. The data is not durable until Sync() returns OK.
  virtual Status Append(const std::vector<Entry>& entries) = 0;

  // Makes everything appended so far durable (fdatasync; directory fsync when
  // files were created or removed). One Sync covers every Append since the
  // last one: group commit.
  virtual Status Sync() = 0;

  // Index of the last entry stored (FirstIndex() - 1 when empty).
  virtual uint64_t LastIndex() const = 0;

  // Compaction. Removes whole stored units (segment files) whose entries all
  // have index <= `index`; entries above it are kept, and so may some at or
  // below it (those sharing a segment with later entries). Durable when it
  // returns OK (directory synced). Never removes the segment being written.
  virtual Status CompactPrefix(uint64_t index) = 0;
  // Removes every entry and restarts the log empty, with its next entry at
  // `next_index` (>= 1) -- installing a snapshot that the log does not
  // match. Durable when it returns OK: after a crash Open() reports
  // first_index == next_index (or the entries appended since).
  virtual Status Reset(uint64_t next_index) = 0;
  // Index of the first entry kept (LastIndex() + 1 when empty).
  virtual uint64_t FirstIndex() const = 0;
  // Bytes in the stored entries' files.
  virtual uint64_t SizeBytes() const = 0;
};

// Told how long each Sync() that reached the disk took (metrics: the fsync
// latency histogram). Called on the thread calling Sync(); must be cheap and
// must not call back into the log.
class SyncObserver {
 public:
  virtual ~SyncObserver() = default;
  virtual void OnSync(std::chrono::nanoseconds elapsed) = 0;
};

struct SegmentedLogOptions {
  // A new segment file is started once the current one reaches this size.
  uint64_t max_segment_bytes = 64ull << 20;
  // The last segment's file is extended this many bytes at a time ahead of
  // the writes, its blocks reserved (file::File::Allocate; Linux), so that
  // an append changes no metadata and Sync() waits for the data and the
  // drive's cache flush only, not also for an inode update. The reserved
  // bytes read as zeros, which Open() takes as the end of the records. Never
  // more than max_segment_bytes (or the last batch) per file; a segment is
  // cut to its records before the next one starts. 0: a file grows with
  // each write.
  uint64_t preallocate_bytes = 4ull << 20;
  // Every entry up to this index is known to have been durable in the log
  // (an on-disk key-value store applied it, and entries are applied only
  // once synced). A bad last record holding such an entry is not a torn
  // write: Open() refuses it as Corruption and leaves the file as it is.
  uint64_t durable_through = 0;
  // CompactPrefix() only drops the segments from the log and returns; a
  // thread of the log removes their files, oldest first with the directory
  // synced after each (so a crash still leaves a suffix of the old log).
  // Compaction is then not durable when it returns (a crash may leave the
  // log starting earlier, which is harmless), and the caller -- a server's
  // I/O loop, which also sends the heartbeats -- does not wait for the
  // disk. A failed removal is logged and stops the removals until the log
  // is reopened (the files left form a suffix; the next Open() keeps them).
  bool remove_in_background = false;
};

// The file implementation. Open() scans every segment: a torn or corrupt tail
// of the *last* segment (a record that is short, or whose CRC fails and which
// is the last record in the file or followed only by zeros) is reported in
// `recovery` and in the log (glog WARNING) and truncated away. Zeros after
// the last record are not a tail to cut. Anything else invalid -- a bad record
// followed by more data, a corrupt record in an earlier segment, a gap or
// repeat in the indexes -- is refused with Status::Corruption naming the file
// and offset: the node must not serve data it cannot trust.
class SegmentedLog : public LogStore {
 public:
  static Status Open(const std::string& dir, const SegmentedLogOptions& options,
                     std::unique_ptr<SegmentedLog>* log, LogRecovery* recovery);
  ~SegmentedLog() override;

  Status Append(const std::vector<Entry>& entries) override;
  Status Sync() override;
  uint64_t LastIndex() const override;
  Status CompactPrefix(uint64_t index) override;
  Status Reset(uint64_t next_index) override;
  uint64_t FirstIndex() const override;
  uint64_t SizeBytes() const override;

  // Number of segment files of the log (for tests and status); files still
  // to be removed in the background are not counted.
  size_t SegmentCount() const;
  // Returns once the files compacted so far in the background are removed
  // (or their removal failed). Tests.
  void WaitForRemovals();
  // An I/O failure left the files in a state the log cannot vouch for (a
  // failed fdatasync, whose lost pages cannot be named, or a failed undo of
  // a failed write): every later call fails, and only reopening the
  // directory (recovery from what is on disk) is safe. A write that failed
  // and was undone (a full disk), or a Reset() whose marker could not be
  // created, does not set it: that call may be retried.
  bool failed() const;
  // Reports the duration of every Sync() that synced something (the segment's
  // fdatasync and, when files were created or removed, the directory's
  // fsync; a Sync() with nothing to sync is not reported). nullptr: none.
  // `observer` must outlive the log.
  void set_sync_observer(SyncObserver* observer);

 private:
  struct Impl;
  explicit SegmentedLog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// An in-memory LogStore for tests of the layers above storage. Its stored unit
// is one entry: CompactPrefix(i) removes exactly the entries <= min(i,
// LastIndex()) (it may empty the store; LastIndex() stays), and SizeBytes() is
// the entries' serialized size.
class MemoryLogStore : public LogStore {
 public:
  Status Append(const std::vector<Entry>& entries) override;
  Status Sync() override { return Status::OK(); }
  uint64_t LastIndex() const override;
  Status CompactPrefix(uint64_t index) override;
  Status Reset(uint64_t next_index) override;
  uint64_t FirstIndex() const override { return first_index_; }
  uint64_t SizeBytes() const override;
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
  uint64_t first_index_ = 1;
};

}  // namespace raftkv
