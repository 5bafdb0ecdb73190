// SegmentedLog and MemoryLogStore; see log_store.h for the on-disk format.
//
// Durability rules this file keeps (they are what make recovery's "only the
// tail of the last segment may be torn" check sound):
//  * A segment is cut to its records (dropping preallocated zeros) and
//    synced before the next segment file is created, so every segment but
//    the last is complete on disk.
//  * Preallocated space reads as zeros, and an all-zero header is the end of
//    a segment's records, not a bad record: a crash before an appended record
//    reached the disk leaves the same log as a crash before it was written.
//  * Suffix truncation (rare: only after a leader change) is made durable
//    before Append() writes anything new: later segment files are removed
//    newest first, the directory is fsync'ed, then the segment holding the
//    truncation point is ftruncate'd and fdatasync'ed. A crash in between
//    leaves a prefix of the old log, never a log with a hole.
//  * New records are only ever written past the end of the last segment, so a
//    crash can damage nothing but the records after the last Sync().
//  * Compaction removes segments oldest first and syncs the directory after
//    each removal, so what a crash leaves is always a suffix of the old
//    segments: still contiguous, just starting later. (Unsynced unlinks may
//    reach the disk in any order; one sync per file is what guarantees the
//    removed files form a prefix.)
//  * Reset commits by making a RESET-<next index> marker durable before it
//    removes anything; Open() finishes a reset whose marker it finds. So a
//    crash leaves the old log (marker not yet durable) or, once the leftovers
//    are cleaned up, the empty log -- never a partly deleted old log.
#include "storage/log_store.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <thread>
#include <utility>

#include <glog/logging.h>

#include "common/mutex.h"
#include "common/thread_name.h"
#include "storage/coding.h"
#include "storage/crc32c.h"
#include "storage/file_util.h"

namespace raftkv {
namespace {

// crc32c:u32le length:u32le
constexpr size_t kRecordHeaderSize = 8;
constexpr size_t kIndexDigits = 20;
constexpr char kSegmentSuffix[] = ".seg";
constexpr size_t kSegmentSuffixLength = sizeof(kSegmentSuffix) - 1;
constexpr char kResetMarkerPrefix[] = "RESET-";
constexpr size_t kResetMarkerPrefixLength = sizeof(kResetMarkerPrefix) - 1;
// Largest payload a record may hold (protobuf cannot parse more).
constexpr uint32_t kMaxPayloadBytes = INT32_MAX;
// Write buffers larger than this are released after use instead of being
// kept for the next Append.
constexpr size_t kMaxRetainedBufferBytes = 16u << 20;

using coding::DecodeFixed32;
using coding::EncodeFixed32;

std::string SegmentFileName(uint64_t first_index) {
  char buf[kIndexDigits + kSegmentSuffixLength + 1];
  std::snprintf(buf, sizeof(buf), "%020" PRIu64 "%s", first_index, kSegmentSuffix);
  return buf;
}

std::string ResetMarkerName(uint64_t next_index) {
  char buf[kResetMarkerPrefixLength + kIndexDigits + 1];
  std::snprintf(buf, sizeof(buf), "%s%020" PRIu64, kResetMarkerPrefix, next_index);
  return buf;
}

// Parses the kIndexDigits decimal digits of `name` starting at `pos`.
bool ParseIndexDigits(const std::string& name, size_t pos, uint64_t* index) {
  uint64_t value = 0;
  for (size_t i = pos; i < pos + kIndexDigits; ++i) {
    const char c = name[i];
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return false;  // overflow
    value = value * 10 + digit;
  }
  *index = value;
  return true;
}

bool HasSuffix(const std::string& name, const char* suffix, size_t length) {
  return name.size() > length && name.compare(name.size() - length, length, suffix) == 0;
}

// Parses "<20 digits>.seg"; false for any other name.
bool ParseSegmentFileName(const std::string& name, uint64_t* first_index) {
  if (name.size() != kIndexDigits + kSegmentSuffixLength) return false;
  if (name.compare(kIndexDigits, kSegmentSuffixLength, kSegmentSuffix) != 0) return false;
  return ParseIndexDigits(name, 0, first_index);
}

// Parses "RESET-<20 digits>"; false for any other name.
bool ParseResetMarkerName(const std::string& name, uint64_t* next_index) {
  if (name.size() != kResetMarkerPrefixLength + kIndexDigits) return false;
  if (name.compare(0, kResetMarkerPrefixLength, kResetMarkerPrefix) != 0) return false;
  return ParseIndexDigits(name, kResetMarkerPrefixLength, next_index);
}

bool AllZero(const std::string& bytes, size_t from) {
  return std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(from), bytes.end(),
                     [](char c) { return c == 0; });
}

std::string At(const std::string& path, uint64_t offset) {
  return path + ": offset " + std::to_string(offset) + ": ";
}

// Checks the LogStore::Append() preconditions against a log holding
// [first_index, last_index] (last_index = first_index - 1 when empty).
// `entries` must be non-empty.
Status ValidateAppend(const std::vector<Entry>& entries, uint64_t first_index,
                      uint64_t last_index) {
  const uint64_t first = entries.front().index();
  if (first == 0) return Status::InvalidArgument("append: entry index 0");
  if (first < first_index) {
    // Replacing entries that compaction or Reset() removed: the caller's view
    // of the log is wrong, and there is nothing left to truncate them from.
    return Status::InvalidArgument("append: first index " + std::to_string(first) +
                                   " is below the log's first index " +
                                   std::to_string(first_index));
  }
  if (first > last_index + 1) {
    return Status::InvalidArgument("append: first index " + std::to_string(first) +
                                   " leaves a gap after last index " +
                                   std::to_string(last_index));
  }
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].index() != entries[i - 1].index() + 1) {
      return Status::InvalidArgument("append: index " + std::to_string(entries[i].index()) +
                                     " follows " + std::to_string(entries[i - 1].index()) +
                                     " (entries must be contiguous)");
    }
  }
  return Status::OK();
}

// The result of scanning one segment file.
struct SegmentScan {
  // Offset of each valid record, in order; record i holds first_index + i.
  std::vector<uint64_t> offsets;
  // End of the last valid record (any bytes after it are zeros, or a torn
  // record and zeros).
  uint64_t valid_bytes = 0;
  // Set if the file ends in a bad record that may be a torn write: the bad
  // record reaches the end of the file, or only zero bytes follow it.
  bool torn = false;
  std::string torn_reason;
};

// Reads the records of a segment whose first record must hold `first_index`,
// appending the entries to *entries. A bad record that cannot be a torn tail
// (more data follows it) is Status::Corruption naming the file and offset.
// Looks for a complete, checksum-valid record holding an entry with index >=
// `min_index` that starts after `pos`. Returns its offset, or 0 if none.
// A torn write can only be followed by bytes of that same unfinished write,
// never by an intact later record; a damaged length field can.
size_t FindValidRecordAfter(const std::string& contents, size_t pos, uint64_t min_index,
                            uint64_t* found_index) {
  const size_t size = contents.size();
  for (size_t p = pos + 1; p + kRecordHeaderSize < size; ++p) {
    const uint32_t length = DecodeFixed32(&contents[p + 4]);
    if (length == 0 || length > size - p - kRecordHeaderSize) continue;
    // Every Entry starts with its term (field 1, varint; term >= 1): a cheap
    // filter before the checksum.
    if (static_cast<uint8_t>(contents[p + kRecordHeaderSize]) != 0x08) continue;
    if (crc32c::Value(&contents[p + 4], 4 + length) != DecodeFixed32(&contents[p])) continue;
    Entry entry;
    if (entry.ParseFromArray(&contents[p + kRecordHeaderSize], static_cast<int>(length)) &&
        entry.index() >= min_index) {
      *found_index = entry.index();
      return p;
    }
  }
  return 0;
}

Status ScanSegment(const std::string& path, const std::string& contents, uint64_t first_index,
                   std::vector<Entry>* entries, SegmentScan* scan) {
  const size_t size = contents.size();
  size_t pos = 0;
  uint64_t expected_index = first_index;
  while (pos < size) {
    if (contents[pos] == 0 && AllZero(contents, pos)) {
      // Preallocated space, the end of the records: none was written here
      // (or none reached the disk, which is the same log). Checked before the
      // header is parsed, so that a zero length is never read as a record.
      break;
    }
    std::string reason;
    size_t record_end = size;
    if (size - pos < kRecordHeaderSize) {
      reason = "short record header (" + std::to_string(size - pos) + " of " +
               std::to_string(kRecordHeaderSize) + " bytes)";
    } else {
      const uint32_t stored_crc = DecodeFixed32(&contents[pos]);
      const uint32_t length = DecodeFixed32(&contents[pos + 4]);
      const size_t available = size - pos - kRecordHeaderSize;
      if (length > kMaxPayloadBytes) {
        reason = "record length " + std::to_string(length) + " exceeds the maximum";
      } else if (length > available) {
        reason = "short payload (" + std::to_string(available) + " of " +
                 std::to_string(length) + " bytes)";
      } else {
        record_end = pos + kRecordHeaderSize + length;
        const uint32_t actual_crc = crc32c::Value(&contents[pos + 4], 4 + length);
        Entry entry;
        if (actual_crc != stored_crc) {
          reason = "checksum mismatch";
        } else if (!entry.ParseFromArray(&contents[pos + kRecordHeaderSize],
                                         static_cast<int>(length))) {
          reason = "payload is not a valid Entry";
        } else if (entry.index() != expected_index) {
          reason = "record holds index " + std::to_string(entry.index()) + " where " +
                   std::to_string(expected_index) + " was expected";
        } else {
          scan->offsets.push_back(pos);
          entries->push_back(std::move(entry));
          ++expected_index;
          pos = record_end;
          continue;
        }
      }
    }
    // A bad record.
    if (record_end < size && !AllZero(contents, record_end)) {
      return Status::Corruption(At(path, pos) + reason + ", followed by " +
                                std::to_string(size - record_end) + " more bytes");
    }
    uint64_t later_index = 0;
    if (const size_t later = FindValidRecordAfter(contents, pos, expected_index, &later_index)) {
      return Status::Corruption(At(path, pos) + reason + ", but an intact record of index " +
                                std::to_string(later_index) + " follows at offset " +
                                std::to_string(later) + ": not a torn write");
    }
    scan->torn = true;
    scan->torn_reason = reason;
    break;
  }
  scan->valid_bytes = pos;
  return Status::OK();
}

// The files of compacted segments, removed on a thread of their own
// (SegmentedLogOptions::remove_in_background): oldest first, the directory
// synced after each, as CompactPrefix does inline.
class SegmentRemover {
 public:
  ~SegmentRemover() {
    {
      MutexLock lock(&mu_);
      stop_ = true;
    }
    cv_.SignalAll();
    if (thread_.joinable()) thread_.join();  // after the queued removals
  }

  // Queues the files of segments [first, last), oldest first.
  template <class It>
  void Remove(const std::string& dir, It first, It last) EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      if (failed_) return;  // their files stay, a suffix of the old log
      dir_ = dir;
      for (It it = first; it != last; ++it) queue_.push_back(it->path);
    }
    if (!thread_.joinable()) {
      thread_ = std::thread([this] {
        SetThreadName("raftkv-log-rm");
        Loop();
      });
    }
    cv_.SignalAll();
  }

  // Held while one file is removed and its directory synced; Reset() holds
  // it while it removes every segment file.
  Mutex* files_mu() RETURN_CAPABILITY(files_mu_) { return &files_mu_; }

  // Drops the queued removals (Reset() removes those files itself).
  void ForgetQueuedLocked() REQUIRES(files_mu_) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    queue_.clear();
    cv_.SignalAll();
  }

  void Wait() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    cv_.Wait(&mu_, [this]() REQUIRES(mu_) { return queue_.empty() || failed_; });
  }

 private:
  void Loop() EXCLUDES(files_mu_, mu_) {
    for (;;) {
      {
        MutexLock lock(&mu_);
        cv_.Wait(&mu_, [this]() REQUIRES(mu_) { return stop_ || (!queue_.empty() && !failed_); });
        if (queue_.empty() || failed_) return;  // stopping, nothing left to do
      }
      MutexLock files_lock(&files_mu_);
      std::string path;
      std::string dir;
      {
        MutexLock lock(&mu_);
        if (queue_.empty() || failed_) continue;  // a Reset() took them
        path = queue_.front();
        dir = dir_;
      }
      Status s = file::Remove(path);
      if (s.ok()) s = file::SyncDir(dir);
      MutexLock lock(&mu_);
      if (!s.ok()) {
        // Whether that removal reached the disk is unknown: removing a
        // later file could leave a gap after a crash. The rest stay.
        LOG(ERROR) << "log compaction: cannot remove " << path << ": " << s.ToString() << "; "
                   << queue_.size() << " compacted segment file(s) stay until the log is reopened";
        failed_ = true;
        queue_.clear();
      } else if (!queue_.empty() && queue_.front() == path) {
        queue_.pop_front();
      }
      cv_.SignalAll();
    }
  }

  Mutex files_mu_;
  Mutex mu_ ACQUIRED_AFTER(files_mu_);
  CondVar cv_;
  std::string dir_ GUARDED_BY(mu_);
  std::deque<std::string> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  bool failed_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // started by the first Remove(), which only the log's owner calls
};

}  // namespace

struct SegmentedLog::Impl {
  // One segment file.
  struct Segment {
    uint64_t first_index;  // index of its first record; also in its file name
    std::string path;
    uint64_t size;         // bytes of complete records; the next write goes here
    // The file's length as this log made it: more than `size` when space was
    // preallocated past the records (zeros). Never less than `size`.
    uint64_t allocated;
  };

  // Where the record of one entry lives.
  struct Location {
    size_t segment;   // position in `segments`
    uint64_t offset;  // offset of the record header within that segment
  };

  std::string dir;
  SegmentedLogOptions options;

  // The segment files in index order. Invariants: segments[0].first_index is
  // `first_index`; each later segment starts right after the last entry of
  // the one before it; only the last may be empty.
  std::vector<Segment> segments;

  // Index of the first entry kept; for an empty log, the index the next entry
  // will have (1 for a log without segments).
  uint64_t first_index = 1;

  // locations[i] is the record of the entry with index first_index + i.
  std::vector<Location> locations;

  // Read-write handle on segments.back(); closed while there are no segments.
  file::File current;

  // The current segment has been written since it was last fdatasync'ed.
  bool current_dirty = false;

  // Files were created or removed in `dir` since the last directory fsync.
  bool dir_dirty = false;

  // Last, so that it is destroyed first (finishing its removals).
  SegmentRemover remover;

  // Set once an I/O failure leaves the files in a state the in-memory view
  // may not match (e.g. a failed fdatasync, whose lost pages cannot be
  // re-synced). Every later call returns it: the node must restart and
  // recover from what is on disk.
  Status failure;

  // Reused serialization buffer for Append().
  std::string buffer;

  // Segments are preallocated (options.preallocate_bytes > 0, and not turned
  // off by a file system that cannot: see Preallocate()).
  bool preallocate = false;
  // The last preallocation failed (logged once until one succeeds).
  bool preallocate_failing = false;

  SyncObserver* sync_observer = nullptr;  // see set_sync_observer()

  uint64_t LastIndex() const { return first_index + locations.size() - 1; }

  Status Fail(Status s) {
    LOG(ERROR) << "segmented log in " << dir << " failed: " << s.ToString();
    failure = s;
    return s;
  }

  // Starts a new segment whose first record will hold `segment_first`.
  Status StartSegment(uint64_t segment_first) {
    if (current.is_open()) {
      // Complete the old segment on disk before the next one exists: its
      // records synced, and no preallocated zeros after them (the length too
      // must be durable, hence a full sync; once per segment).
      Segment& old = segments.back();
      bool full_sync = false;
      if (old.allocated > old.size) {
        Status s = current.Truncate(old.size);
        if (!s.ok()) return Fail(s);
        old.allocated = old.size;
        full_sync = true;
      }
      if (current_dirty || full_sync) {
        Status s = full_sync ? current.Sync() : current.DataSync();
        if (!s.ok()) return Fail(s);
        current_dirty = false;
      }
    }
    Segment segment{segment_first, file::JoinPath(dir, SegmentFileName(segment_first)), 0, 0};
    file::File f;
    Status s = file::File::Open(segment.path, file::OpenMode::kCreateTruncate, &f);
    if (!s.ok()) return s;
    current = std::move(f);
    segments.push_back(std::move(segment));
    dir_dirty = true;
    return Status::OK();
  }

  // Before `bytes` are written at the end of the last segment: extends the
  // space reserved for it (see SegmentedLogOptions::preallocate_bytes) if
  // they would pass its end, by whole steps, up to max_segment_bytes (or the
  // end of this batch, if further). Failing is no error: the write then
  // grows the file, as without preallocation. A file system that cannot
  // preallocate is not asked again; after an error (a full disk) the next
  // attempt comes a step later.
  void Preallocate(Segment* segment, uint64_t bytes) {
    const uint64_t end = segment->size + bytes;
    if (!preallocate || end <= segment->allocated) return;
    const uint64_t step = options.preallocate_bytes;
    const uint64_t limit = std::max<uint64_t>(options.max_segment_bytes, end);
    const uint64_t to_next_step = (step - end % step) % step;
    const uint64_t target = end + std::min(to_next_step, limit - end);
    bool done = false;
    Status s = current.Allocate(segment->allocated, target - segment->allocated, &done);
    if (s.ok() && done) {
      segment->allocated = target;
      preallocate_failing = false;
      return;
    }
    if (!s.ok()) {
      // Once per run of failures (a full disk retries every write).
      LOG_IF(WARNING, !preallocate_failing)
          << "cannot preallocate the log segment (its writes grow the file): " << s.ToString();
      preallocate_failing = true;
      // It may have extended the file part way: cut it with the segment.
      segment->allocated = target;
    } else {
      preallocate = false;
      LOG(INFO) << "the file system of " << dir << " cannot preallocate; segments grow per write";
    }
  }

  // Removes every entry with index >= `index` (first_index <= index <=
  // LastIndex()), durably. Cutting at first_index leaves segments[0] empty:
  // the empty log keeps its first index.
  Status TruncateSuffix(uint64_t index) {
    const Location cut = locations[index - first_index];
    if (segments.size() > cut.segment + 1) {
      current.Close();
      for (size_t i = segments.size(); i-- > cut.segment + 1;) {
        Status s = file::Remove(segments[i].path);
        if (!s.ok()) return Fail(s);
        segments.pop_back();
      }
      Status s = file::SyncDir(dir);
      if (!s.ok()) return Fail(s);
      dir_dirty = false;
      s = file::File::Open(segments.back().path, file::OpenMode::kReadWrite, &current);
      if (!s.ok()) return Fail(s);
    }
    Status s = current.Truncate(cut.offset);
    if (s.ok()) s = current.DataSync();
    if (!s.ok()) return Fail(s);
    current_dirty = false;
    segments.back().size = cut.offset;
    segments.back().allocated = cut.offset;
    locations.resize(index - first_index);
    return Status::OK();
  }

  Status Append(const std::vector<Entry>& entries) {
    if (!failure.ok()) return failure;
    if (entries.empty()) return Status::OK();
    Status s = ValidateAppend(entries, first_index, LastIndex());
    if (!s.ok()) return s;
    // Size every record before changing anything (this also caches each
    // entry's size for SerializeWithCachedSizesToArray below).
    size_t batch_bytes = 0;
    for (const Entry& entry : entries) {
      const size_t length = entry.ByteSizeLong();
      if (length > kMaxPayloadBytes) {
        return Status::InvalidArgument("append: entry " + std::to_string(entry.index()) +
                                       " is too large (" + std::to_string(length) + " bytes)");
      }
      batch_bytes += kRecordHeaderSize + length;
    }
    const uint64_t first = entries.front().index();
    if (first <= LastIndex()) {
      s = TruncateSuffix(first);
      if (!s.ok()) return s;
    }
    // A batch always goes to one segment (a segment may exceed
    // max_segment_bytes by one batch), so it takes a single write.
    if (segments.empty() ||
        (segments.back().size > 0 && segments.back().size >= options.max_segment_bytes)) {
      s = StartSegment(first);
      if (!s.ok()) return s;
    }

    Segment& segment = segments.back();
    Preallocate(&segment, batch_bytes);
    const size_t segment_pos = segments.size() - 1;
    const size_t old_locations = locations.size();
    buffer.resize(batch_bytes);
    size_t start = 0;
    for (const Entry& entry : entries) {
      const size_t length = static_cast<size_t>(entry.GetCachedSize());
      locations.push_back(Location{segment_pos, segment.size + start});
      char* record = &buffer[start];
      EncodeFixed32(record + 4, static_cast<uint32_t>(length));
      entry.SerializeWithCachedSizesToArray(
          reinterpret_cast<uint8_t*>(record + kRecordHeaderSize));
      EncodeFixed32(record, crc32c::Value(record + 4, 4 + length));
      start += kRecordHeaderSize + length;
    }
    CHECK_EQ(start, batch_bytes) << "an entry changed size while being appended";

    s = current.WriteAt(buffer.data(), buffer.size(), segment.size);
    if (!s.ok()) {
      locations.resize(old_locations);
      // Drop whatever part of the batch reached the file, so the next write
      // does not leave stale bytes behind it.
      Status undo = current.Truncate(segment.size);
      if (!undo.ok()) Fail(undo);
      segment.allocated = segment.size;
      return s;
    }
    segment.size += buffer.size();
    segment.allocated = std::max(segment.allocated, segment.size);
    current_dirty = true;
    if (buffer.capacity() > kMaxRetainedBufferBytes) std::string().swap(buffer);
    return Status::OK();
  }

  Status Sync() {
    if (!failure.ok()) return failure;
    if (!current_dirty && !dir_dirty) return Status::OK();
    const auto start = std::chrono::steady_clock::now();
    Status s = SyncFiles();
    if (s.ok() && sync_observer != nullptr) {
      sync_observer->OnSync(std::chrono::steady_clock::now() - start);
    }
    return s;
  }

  Status SyncFiles() {
    if (current_dirty) {
      Status s = current.DataSync();
      if (!s.ok()) return Fail(s);
      current_dirty = false;
    }
    if (dir_dirty) {
      Status s = file::SyncDir(dir);
      if (!s.ok()) return Fail(s);
      dir_dirty = false;
    }
    return Status::OK();
  }

  Status CompactPrefix(uint64_t index) {
    if (!failure.ok()) return failure;
    // Segment i holds only entries <= index iff the next segment starts at or
    // before index + 1. The last segment is never a candidate: it is the one
    // being written, and keeping it keeps LastIndex() on disk.
    size_t removable = 0;
    while (removable + 1 < segments.size() &&
           segments[removable + 1].first_index - 1 <= index) {
      ++removable;
    }
    if (removable == 0) return Status::OK();
    if (options.remove_in_background) {
      remover.Remove(dir, segments.begin(), segments.begin() + static_cast<std::ptrdiff_t>(removable));
    } else {
      for (size_t i = 0; i < removable; ++i) {
        // Oldest first, each removal durable before the next: a crash leaves a
        // contiguous log that merely starts later (see the top of this file).
        Status s = file::Remove(segments[i].path);
        if (s.ok()) s = file::SyncDir(dir);
        if (!s.ok()) return Fail(s);
      }
      // The syncs also made any segment created since the last Sync() durable.
      dir_dirty = false;
    }
    const uint64_t new_first = segments[removable].first_index;
    locations.erase(locations.begin(),
                    locations.begin() + static_cast<std::ptrdiff_t>(new_first - first_index));
    for (Location& location : locations) location.segment -= removable;
    segments.erase(segments.begin(), segments.begin() + static_cast<std::ptrdiff_t>(removable));
    first_index = new_first;
    return Status::OK();
  }

  Status Reset(uint64_t next_index) {
    if (!failure.ok()) return failure;
    if (next_index == 0) return Status::InvalidArgument("reset: next index 0");
    // The commit point: once the marker is durable, Open() completes the
    // reset whatever else did or did not reach the disk. Its name carries
    // everything; the file stays empty, so there is no content to tear.
    const std::string marker = file::JoinPath(dir, ResetMarkerName(next_index));
    file::File f;
    Status s = file::File::Open(marker, file::OpenMode::kCreateTruncate, &f);
    // Not created (a full disk): nothing changed, the reset may be retried.
    if (!s.ok()) return s;
    s = f.Close();
    if (s.ok()) s = file::SyncDir(dir);
    // From here on the files may not match the in-memory view (a marker that
    // may or may not be on disk, segments half removed): any failure is
    // final, and the restart's Open() decides.
    if (!s.ok()) return Fail(s);
    current.Close();
    current_dirty = false;
    segments.clear();
    locations.clear();
    s = FinishReset(marker, next_index);
    if (!s.ok()) return Fail(s);
    Segment segment{next_index, file::JoinPath(dir, SegmentFileName(next_index)), 0, 0};
    s = file::File::Open(segment.path, file::OpenMode::kReadWrite, &current);
    if (!s.ok()) return Fail(s);
    segments.push_back(std::move(segment));
    first_index = next_index;
    dir_dirty = false;
    return Status::OK();
  }

  // The part of a reset after its marker `marker_path` is durable; Reset()
  // and Open() (finding the marker of an interrupted one) both run it, and it
  // may run again after a crash part way. Removes every segment file, creates
  // the empty <next_index>.seg -- which is what records "empty, next entry
  // at next_index" once the marker is gone -- and removes the marker last.
  Status FinishReset(const std::string& marker_path, uint64_t next_index) {
    // Every segment file goes, those waiting for the remover too; it must
    // not remove one meanwhile (or a new one after).
    MutexLock files_lock(remover.files_mu());
    remover.ForgetQueuedLocked();
    std::vector<std::string> names;
    Status s = file::ListFiles(dir, &names);
    if (!s.ok()) return s;
    std::vector<std::pair<uint64_t, std::string>> old;
    for (const std::string& name : names) {
      uint64_t index = 0;
      if (ParseSegmentFileName(name, &index)) old.emplace_back(index, name);
    }
    // Oldest first, like compaction, though with the marker in place any
    // order would do. <next_index>.seg is removed too if present: it may be
    // an old segment of that name, holding entries that must go.
    std::sort(old.begin(), old.end());
    for (const auto& [index, name] : old) {
      s = file::Remove(file::JoinPath(dir, name));
      if (!s.ok()) return s;
    }
    if (!old.empty()) {
      s = file::SyncDir(dir);
      if (!s.ok()) return s;
    }
    file::File f;
    s = file::File::Open(file::JoinPath(dir, SegmentFileName(next_index)),
                         file::OpenMode::kCreateTruncate, &f);
    if (s.ok()) s = f.Close();
    // The empty segment must be on disk before the marker disappears, or a
    // crash could leave no file at all: a new log starting at 1.
    if (s.ok()) s = file::SyncDir(dir);
    if (s.ok()) s = file::Remove(marker_path);
    if (s.ok()) s = file::SyncDir(dir);
    return s;
  }

  // Reads every segment, fills `recovery` and the in-memory index, and cuts
  // a torn tail off the last segment. First completes a Reset() that a
  // crash interrupted.
  Status Recover(LogRecovery* recovery) {
    std::vector<std::string> names;
    Status s = file::ListFiles(dir, &names);
    if (!s.ok()) return s;
    std::vector<std::pair<uint64_t, std::string>> markers;
    for (const std::string& name : names) {
      uint64_t next_index = 0;
      if (ParseResetMarkerName(name, &next_index)) {
        markers.emplace_back(next_index, file::JoinPath(dir, name));
      } else if (name.compare(0, kResetMarkerPrefixLength, kResetMarkerPrefix) == 0) {
        LOG(WARNING) << "ignoring " << file::JoinPath(dir, name)
                     << ": not a reset marker name (RESET-<20-digit next index>)";
      }
    }
    if (markers.size() > 1) {
      // Reset() finishes (or fails the log) before another can start, and
      // Open() finishes one before returning: two markers were not written
      // by this code, and which reset came last is unknown.
      std::sort(markers.begin(), markers.end());
      return Status::Corruption(markers[0].second + ", " + markers[1].second +
                                ": more than one reset marker; the log's intended state is "
                                "ambiguous");
    }
    if (markers.size() == 1) {
      const auto& [next_index, marker_path] = markers.front();
      if (next_index == 0) {
        return Status::Corruption(marker_path + ": reset marker with next index 0");
      }
      LOG(WARNING) << "log recovery: " << marker_path
                   << ": finishing a reset interrupted by a crash (log empty, next index "
                   << next_index << ")";
      s = FinishReset(marker_path, next_index);
      if (!s.ok()) return s;
      names.clear();
      s = file::ListFiles(dir, &names);
      if (!s.ok()) return s;
    }

    for (const std::string& name : names) {
      uint64_t segment_first = 0;
      if (ParseSegmentFileName(name, &segment_first)) {
        segments.push_back(Segment{segment_first, file::JoinPath(dir, name), 0, 0});
      } else if (HasSuffix(name, kSegmentSuffix, kSegmentSuffixLength)) {
        LOG(WARNING) << "ignoring " << file::JoinPath(dir, name)
                     << ": not a segment file name (<20-digit first index>.seg)";
      }
    }
    std::sort(segments.begin(), segments.end(),
              [](const Segment& a, const Segment& b) { return a.first_index < b.first_index; });
    // The log starts wherever its oldest segment does: compaction and Reset()
    // remove a prefix.
    if (!segments.empty()) {
      if (segments.front().first_index == 0) {
        return Status::Corruption(At(segments.front().path, 0) +
                                  "segment starts at index 0; log indexes start at 1");
      }
      first_index = segments.front().first_index;
    }

    for (size_t i = 0; i < segments.size(); ++i) {
      Segment& segment = segments[i];
      const bool is_last = i + 1 == segments.size();
      const uint64_t expected = LastIndex() + 1;
      if (segment.first_index != expected) {
        return Status::Corruption(At(segment.path, 0) + "segment starts at index " +
                                  std::to_string(segment.first_index) +
                                  " but the previous segment ends at index " +
                                  std::to_string(expected - 1));
      }
      file::File f;
      s = file::File::Open(segment.path,
                           is_last ? file::OpenMode::kReadWrite : file::OpenMode::kReadOnly, &f);
      if (!s.ok()) return s;
      std::string contents;
      s = f.ReadAll(&contents);
      if (!s.ok()) return s;
      SegmentScan scan;
      s = ScanSegment(segment.path, contents, segment.first_index, &recovery->entries, &scan);
      if (!s.ok()) return s;
      if (scan.torn && !is_last) {
        return Status::Corruption(At(segment.path, scan.valid_bytes) + scan.torn_reason +
                                  " in a segment that is not the last");
      }
      if (scan.offsets.empty() && !is_last) {
        return Status::Corruption(At(segment.path, 0) + "empty segment that is not the last");
      }
      for (uint64_t offset : scan.offsets) locations.push_back(Location{i, offset});
      segment.size = scan.valid_bytes;
      segment.allocated = contents.size();
      const uint64_t torn_index = segment.first_index + scan.offsets.size();
      if (scan.torn && torn_index <= options.durable_through) {
        return Status::Corruption(At(segment.path, scan.valid_bytes) + scan.torn_reason + "; it holds entry " +
                                  std::to_string(torn_index) + ", which the key-value store applied (through " +
                                  std::to_string(options.durable_through) +
                                  "), so it was durable: damage, not a torn write");
      }
      if (scan.torn) {
        const uint64_t cut_bytes = contents.size() - scan.valid_bytes;
        s = f.Truncate(scan.valid_bytes);
        if (s.ok()) s = f.Sync();
        if (!s.ok()) return s;
        segment.allocated = scan.valid_bytes;
        recovery->truncated_tail = true;
        recovery->detail = At(segment.path, scan.valid_bytes) + scan.torn_reason +
                           "; truncated " + std::to_string(cut_bytes) + " bytes of torn tail";
        LOG(WARNING) << "log recovery: " << recovery->detail;
      }
      if (is_last) current = std::move(f);
    }
    recovery->first_index = first_index;
    LOG(INFO) << "opened log in " << dir << ": " << segments.size() << " segment(s), first index "
              << first_index << ", last index " << LastIndex();
    return Status::OK();
  }
};

Status SegmentedLog::Open(const std::string& dir, const SegmentedLogOptions& options,
                          std::unique_ptr<SegmentedLog>* log, LogRecovery* recovery) {
  LogRecovery local_recovery;
  if (recovery == nullptr) recovery = &local_recovery;
  *recovery = LogRecovery{};

  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  while (impl->dir.size() > 1 && impl->dir.back() == '/') impl->dir.pop_back();
  impl->options = options;
  impl->preallocate = options.preallocate_bytes > 0;

  Status s = file::CreateDirsDurably(impl->dir);
  if (!s.ok()) return s;
  s = impl->Recover(recovery);
  if (!s.ok()) {
    recovery->entries.clear();
    return s;
  }
  log->reset(new SegmentedLog(std::move(impl)));
  return Status::OK();
}

SegmentedLog::SegmentedLog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SegmentedLog::~SegmentedLog() = default;

Status SegmentedLog::Append(const std::vector<Entry>& entries) { return impl_->Append(entries); }
Status SegmentedLog::Sync() { return impl_->Sync(); }
bool SegmentedLog::failed() const { return !impl_->failure.ok(); }
void SegmentedLog::set_sync_observer(SyncObserver* observer) { impl_->sync_observer = observer; }
uint64_t SegmentedLog::LastIndex() const { return impl_->LastIndex(); }
Status SegmentedLog::CompactPrefix(uint64_t index) { return impl_->CompactPrefix(index); }
Status SegmentedLog::Reset(uint64_t next_index) { return impl_->Reset(next_index); }
uint64_t SegmentedLog::FirstIndex() const { return impl_->first_index; }
size_t SegmentedLog::SegmentCount() const { return impl_->segments.size(); }
void SegmentedLog::WaitForRemovals() { impl_->remover.Wait(); }

uint64_t SegmentedLog::SizeBytes() const {
  uint64_t bytes = 0;
  for (const Impl::Segment& segment : impl_->segments) bytes += segment.size;
  return bytes;
}

// MemoryLogStore: entries_[i] holds index first_index_ + i. Its unit of
// compaction is one entry, so CompactPrefix() removes exactly the entries
// <= index (never past LastIndex(), which it keeps).

Status MemoryLogStore::Append(const std::vector<Entry>& entries) {
  if (entries.empty()) return Status::OK();
  Status s = ValidateAppend(entries, first_index_, LastIndex());
  if (!s.ok()) return s;
  entries_.resize(entries.front().index() - first_index_);  // drop a conflicting suffix
  entries_.insert(entries_.end(), entries.begin(), entries.end());
  return Status::OK();
}

uint64_t MemoryLogStore::LastIndex() const { return first_index_ + entries_.size() - 1; }

Status MemoryLogStore::CompactPrefix(uint64_t index) {
  if (index < first_index_) return Status::OK();
  const uint64_t last_removed = std::min(index, LastIndex());
  const uint64_t count = last_removed + 1 - first_index_;
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(count));
  first_index_ = last_removed + 1;
  return Status::OK();
}

Status MemoryLogStore::Reset(uint64_t next_index) {
  if (next_index == 0) return Status::InvalidArgument("reset: next index 0");
  entries_.clear();
  first_index_ = next_index;
  return Status::OK();
}

// The serialized size of the entries kept (what their records' payloads
// would take on disk), recomputed on each call: this store is for tests.
uint64_t MemoryLogStore::SizeBytes() const {
  uint64_t bytes = 0;
  for (const Entry& entry : entries_) bytes += entry.ByteSizeLong();
  return bytes;
}

}  // namespace raftkv
