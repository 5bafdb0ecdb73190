// SegmentedLog and MemoryLogStore; see log_store.h for the on-disk format.
//
// Durability rules this file keeps (they are what make recovery's "only the
// tail of the last segment may be torn" check sound):
//  * A segment is fdatasync'ed before the next segment file is created, so
//    every segment but the last is complete on disk.
//  * Suffix truncation (rare: only after a leader change) is made durable
//    before Append() writes anything new: later segment files are removed
//    newest first, the directory is fsync'ed, then the segment holding the
//    truncation point is ftruncate'd and fdatasync'ed. A crash in between
//    leaves a prefix of the old log, never a log with a hole.
//  * New records are only ever written past the end of the last segment, so a
//    crash can damage nothing but the records after the last Sync().
#include "storage/log_store.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <utility>

#include <glog/logging.h>

#include "storage/crc32c.h"
#include "storage/file_util.h"

namespace raftkv {
namespace {

// crc32c:u32le length:u32le
constexpr size_t kRecordHeaderSize = 8;
constexpr size_t kIndexDigits = 20;
constexpr char kSegmentSuffix[] = ".seg";
constexpr size_t kSegmentSuffixLength = sizeof(kSegmentSuffix) - 1;
// Largest payload a record may hold (protobuf cannot parse more).
constexpr uint32_t kMaxPayloadBytes = INT32_MAX;
// Write buffers larger than this are released after use instead of being
// kept for the next Append.
constexpr size_t kMaxRetainedBufferBytes = 16u << 20;

void EncodeFixed32(char* p, uint32_t v) {
  p[0] = static_cast<char>(v & 0xFF);
  p[1] = static_cast<char>((v >> 8) & 0xFF);
  p[2] = static_cast<char>((v >> 16) & 0xFF);
  p[3] = static_cast<char>((v >> 24) & 0xFF);
}

uint32_t DecodeFixed32(const char* p) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  return static_cast<uint32_t>(u[0]) | (static_cast<uint32_t>(u[1]) << 8) |
         (static_cast<uint32_t>(u[2]) << 16) | (static_cast<uint32_t>(u[3]) << 24);
}

std::string SegmentFileName(uint64_t first_index) {
  char buf[kIndexDigits + kSegmentSuffixLength + 1];
  std::snprintf(buf, sizeof(buf), "%020" PRIu64 "%s", first_index, kSegmentSuffix);
  return buf;
}

// Parses "<20 digits>.seg"; false for any other name.
bool ParseSegmentFileName(const std::string& name, uint64_t* first_index) {
  if (name.size() != kIndexDigits + kSegmentSuffixLength) return false;
  if (name.compare(kIndexDigits, kSegmentSuffixLength, kSegmentSuffix) != 0) return false;
  uint64_t value = 0;
  for (size_t i = 0; i < kIndexDigits; ++i) {
    const char c = name[i];
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return false;  // overflow
    value = value * 10 + digit;
  }
  *first_index = value;
  return true;
}

bool AllZero(const std::string& bytes, size_t from) {
  return std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(from), bytes.end(),
                     [](char c) { return c == 0; });
}

std::string At(const std::string& path, uint64_t offset) {
  return path + ": offset " + std::to_string(offset) + ": ";
}

// Checks the LogStore::Append() preconditions against a log whose last index
// is `last_index`. `entries` must be non-empty.
Status ValidateAppend(const std::vector<Entry>& entries, uint64_t last_index) {
  const uint64_t first = entries.front().index();
  if (first == 0) return Status::InvalidArgument("append: entry index 0");
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
  // End of the last valid record.
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

}  // namespace

struct SegmentedLog::Impl {
  // One segment file.
  struct Segment {
    uint64_t first_index;  // index of its first record; also in its file name
    std::string path;
    uint64_t size;         // bytes of complete records; the next write goes here
  };

  // Where the record of one entry lives.
  struct Location {
    size_t segment;   // position in `segments`
    uint64_t offset;  // offset of the record header within that segment
  };

  std::string dir;
  SegmentedLogOptions options;

  // The segment files in index order. Invariants: segments[0].first_index is
  // 1; each later segment starts right after the last entry of the one
  // before it; only the last may be empty.
  std::vector<Segment> segments;

  // locations[i] is the record of the entry with index i + 1, so LastIndex()
  // is locations.size().
  std::vector<Location> locations;

  // Read-write handle on segments.back(); closed while there are no segments.
  file::File current;

  // The current segment has been written since it was last fdatasync'ed.
  bool current_dirty = false;

  // Files were created or removed in `dir` since the last directory fsync.
  bool dir_dirty = false;

  // Set once an I/O failure leaves the files in a state the in-memory view
  // may not match (e.g. a failed fdatasync, whose lost pages cannot be
  // re-synced). Every later call returns it: the node must restart and
  // recover from what is on disk.
  Status failure;

  // Reused serialization buffer for Append().
  std::string buffer;

  uint64_t LastIndex() const { return locations.size(); }

  Status Fail(Status s) {
    LOG(ERROR) << "segmented log in " << dir << " failed: " << s.ToString();
    failure = s;
    return s;
  }

  // Starts a new segment whose first record will hold `first_index`.
  Status StartSegment(uint64_t first_index) {
    if (current.is_open() && current_dirty) {
      // Complete the old segment on disk before the next one exists.
      Status s = current.DataSync();
      if (!s.ok()) return Fail(s);
      current_dirty = false;
    }
    Segment segment{first_index, file::JoinPath(dir, SegmentFileName(first_index)), 0};
    file::File f;
    Status s = file::File::Open(segment.path, file::OpenMode::kCreateTruncate, &f);
    if (!s.ok()) return s;
    current = std::move(f);
    segments.push_back(std::move(segment));
    dir_dirty = true;
    return Status::OK();
  }

  // Removes every entry with index >= `index` (1 <= index <= LastIndex()),
  // durably.
  Status TruncateSuffix(uint64_t index) {
    const Location cut = locations[index - 1];
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
    locations.resize(index - 1);
    return Status::OK();
  }

  Status Append(const std::vector<Entry>& entries) {
    if (!failure.ok()) return failure;
    if (entries.empty()) return Status::OK();
    Status s = ValidateAppend(entries, LastIndex());
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
      return s;
    }
    segment.size += buffer.size();
    current_dirty = true;
    if (buffer.capacity() > kMaxRetainedBufferBytes) std::string().swap(buffer);
    return Status::OK();
  }

  Status Sync() {
    if (!failure.ok()) return failure;
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

  // Reads every segment, fills `recovery` and the in-memory index, and cuts
  // a torn tail off the last segment.
  Status Recover(LogRecovery* recovery) {
    std::vector<std::string> names;
    Status s = file::ListFiles(dir, &names);
    if (!s.ok()) return s;
    for (const std::string& name : names) {
      uint64_t first_index = 0;
      if (ParseSegmentFileName(name, &first_index)) {
        segments.push_back(Segment{first_index, file::JoinPath(dir, name), 0});
      } else if (name.size() > kSegmentSuffixLength &&
                 name.compare(name.size() - kSegmentSuffixLength, kSegmentSuffixLength,
                              kSegmentSuffix) == 0) {
        LOG(WARNING) << "ignoring " << file::JoinPath(dir, name)
                     << ": not a segment file name (<20-digit first index>.seg)";
      }
    }
    std::sort(segments.begin(), segments.end(),
              [](const Segment& a, const Segment& b) { return a.first_index < b.first_index; });

    for (size_t i = 0; i < segments.size(); ++i) {
      Segment& segment = segments[i];
      const bool is_last = i + 1 == segments.size();
      const uint64_t expected = LastIndex() + 1;
      if (segment.first_index != expected) {
        return Status::Corruption(
            At(segment.path, 0) + "segment starts at index " +
            std::to_string(segment.first_index) +
            (i == 0 ? std::string(" but the log must start at index 1")
                    : " but the previous segment ends at index " + std::to_string(expected - 1)));
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
      if (scan.torn) {
        const uint64_t cut_bytes = contents.size() - scan.valid_bytes;
        s = f.Truncate(scan.valid_bytes);
        if (s.ok()) s = f.Sync();
        if (!s.ok()) return s;
        recovery->truncated_tail = true;
        recovery->detail = At(segment.path, scan.valid_bytes) + scan.torn_reason +
                           "; truncated " + std::to_string(cut_bytes) + " bytes of torn tail";
        LOG(WARNING) << "log recovery: " << recovery->detail;
      }
      if (is_last) current = std::move(f);
    }
    LOG(INFO) << "opened log in " << dir << ": " << segments.size() << " segment(s), last index "
              << LastIndex();
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

  bool created = false;
  Status s = file::CreateDirs(impl->dir, &created);
  if (!s.ok()) return s;
  if (created) {
    s = file::SyncDir(file::DirName(impl->dir));
    if (!s.ok()) return s;
  }
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
uint64_t SegmentedLog::LastIndex() const { return impl_->LastIndex(); }
size_t SegmentedLog::SegmentCount() const { return impl_->segments.size(); }

Status MemoryLogStore::Append(const std::vector<Entry>& entries) {
  if (entries.empty()) return Status::OK();
  Status s = ValidateAppend(entries, LastIndex());
  if (!s.ok()) return s;
  entries_.resize(entries.front().index() - 1);  // drop a conflicting suffix
  entries_.insert(entries_.end(), entries.begin(), entries.end());
  return Status::OK();
}

uint64_t MemoryLogStore::LastIndex() const { return entries_.size(); }

}  // namespace raftkv
