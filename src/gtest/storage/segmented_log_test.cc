#include "storage/log_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "gtest/common/full_disk.h"
#include "gtest/common/segment_records.h"
#include "gtest/common/temp_dir.h"
#include "storage/crc32c.h"
#include "storage/file_util.h"

namespace raftkv {
namespace {

namespace fs = std::filesystem;
using testing_util::ReadFileBytes;
using testing_util::TempDir;
using testing_util::WriteFileBytes;

Entry MakeEntry(uint64_t index, uint64_t term) {
  Entry entry;
  entry.set_term(term);
  entry.set_index(index);
  entry.set_type(index % 5 == 0 ? ENTRY_NOOP : ENTRY_COMMAND);
  if (entry.type() == ENTRY_COMMAND) {
    // Varying lengths, so record boundaries do not line up by accident.
    entry.set_data("value-" + std::to_string(index) + "-" + std::to_string(term) +
                   std::string(index % 13, 'x'));
  }
  return entry;
}

std::vector<Entry> MakeEntries(uint64_t first, uint64_t count, uint64_t term = 1) {
  std::vector<Entry> entries;
  for (uint64_t i = 0; i < count; ++i) entries.push_back(MakeEntry(first + i, term));
  return entries;
}

// The on-disk record of `entry`, built independently of the implementation.
std::string RecordBytes(const Entry& entry) {
  const std::string payload = entry.SerializeAsString();
  std::string length(4, '\0');
  for (int i = 0; i < 4; ++i) length[i] = static_cast<char>((payload.size() >> (8 * i)) & 0xFF);
  const std::string covered = length + payload;
  const uint32_t crc = crc32c::Value(covered.data(), covered.size());
  std::string record(4, '\0');
  for (int i = 0; i < 4; ++i) record[i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
  return record + covered;
}

std::string RecordsBytes(const std::vector<Entry>& entries) {
  std::string bytes;
  for (const Entry& e : entries) bytes += RecordBytes(e);
  return bytes;
}

// The bytes of the segment file `path` up to the end of its records: a
// segment the log wrote may go on with preallocated zeros, which hold none.
// A file whose records do not end in zeros is returned whole.
std::string ReadRecordBytes(const std::string& path) {
  std::string bytes = ReadFileBytes(path);
  size_t end = 0;
  testing_util::SplitSegmentRecords(bytes, &end);
  if (testing_util::OnlyZerosFrom(bytes, end)) bytes.resize(end);
  return bytes;
}

std::string SegmentName(uint64_t first_index) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%020llu.seg", static_cast<unsigned long long>(first_index));
  return buf;
}

// Paths of the segment files in `dir`, in name (= index) order.
std::vector<std::string> SegmentPaths(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".seg") paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

void ExpectSameEntries(const std::vector<Entry>& actual, const std::vector<Entry>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_EQ(actual[i].SerializeAsString(), expected[i].SerializeAsString()) << "entry " << i;
  }
}

class SegmentedLogTest : public ::testing::Test {
 protected:
  // Opens dir_ (asserting success) into log_ / recovery_.
  void Reopen() {
    log_.reset();
    recovery_ = LogRecovery{};
    Status s = SegmentedLog::Open(dir_.path(), options_, &log_, &recovery_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  // Opens dir_ expecting Status::Corruption that names `file` (a path).
  void ExpectOpenCorruption(const std::string& file) {
    log_.reset();
    std::unique_ptr<SegmentedLog> log;
    LogRecovery recovery;
    Status s = SegmentedLog::Open(dir_.path(), options_, &log, &recovery);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.message().find(file), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("offset"), std::string::npos) << s.message();
    EXPECT_EQ(log, nullptr);
  }
  void AppendAndSync(const std::vector<Entry>& entries) {
    Status s = log_->Append(entries);
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = log_->Sync();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  TempDir dir_;
  SegmentedLogOptions options_;
  std::unique_ptr<SegmentedLog> log_;
  LogRecovery recovery_;
};

TEST_F(SegmentedLogTest, OpenEmptyCreatesDirectory) {
  const std::string nested = dir_.Join("a/b/log");
  std::unique_ptr<SegmentedLog> log;
  LogRecovery recovery;
  ASSERT_TRUE(SegmentedLog::Open(nested, options_, &log, &recovery).ok());
  EXPECT_TRUE(fs::is_directory(nested));
  EXPECT_EQ(log->LastIndex(), 0u);
  EXPECT_EQ(log->SegmentCount(), 0u);
  EXPECT_TRUE(recovery.entries.empty());
  EXPECT_FALSE(recovery.truncated_tail);
  EXPECT_TRUE(log->Sync().ok());
}

TEST_F(SegmentedLogTest, RoundTrip) {
  Reopen();
  const std::vector<Entry> all = MakeEntries(1, 100);
  for (size_t i = 0; i < all.size(); i += 10) {
    ASSERT_TRUE(log_->Append({all.begin() + i, all.begin() + i + 10}).ok());
  }
  ASSERT_TRUE(log_->Sync().ok());
  EXPECT_EQ(log_->LastIndex(), 100u);
  Reopen();
  EXPECT_FALSE(recovery_.truncated_tail);
  ExpectSameEntries(recovery_.entries, all);
  EXPECT_EQ(log_->LastIndex(), 100u);
  EXPECT_EQ(log_->SegmentCount(), 1u);

  // The file is exactly the documented record format.
  const auto paths = SegmentPaths(dir_.path());
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(fs::path(paths[0]).filename(), "00000000000000000001.seg");
  EXPECT_EQ(ReadRecordBytes(paths[0]), RecordsBytes(all));
}

// A write the disk refuses (full) is undone and may be retried; a failed
// fdatasync is not: the log refuses every later call (failed()), since the
// pages it lost cannot be named.
TEST_F(SegmentedLogTest, ARefusedWriteMayBeRetriedAFailedSyncMayNot) {
  testing_util::FullDisk disk;
  testing_util::ScopedInterposer installed(&disk);
  Reopen();
  const std::vector<Entry> all = MakeEntries(1, 30);
  AppendAndSync({all.begin(), all.begin() + 10});
  disk.full = true;
  Status s = log_->Append({all.begin() + 10, all.begin() + 20});
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(log_->failed()) << s.ToString();
  EXPECT_EQ(log_->LastIndex(), 10u);
  disk.full = false;
  AppendAndSync({all.begin() + 10, all.begin() + 20});

  disk.failing_syncs = true;
  ASSERT_TRUE(log_->Append({all.begin() + 20, all.end()}).ok());
  EXPECT_FALSE(log_->Sync().ok());
  EXPECT_TRUE(log_->failed());
  disk.failing_syncs = false;
  EXPECT_FALSE(log_->Sync().ok());
  file::SetInterposer(nullptr);
  Reopen();  // what the disk holds: at least the 20 synced entries, in order
  ASSERT_GE(recovery_.entries.size(), 20u);
  ExpectSameEntries({recovery_.entries.begin(), recovery_.entries.begin() + 20},
                    {all.begin(), all.begin() + 20});
}

// A reset on a disk too full to create its marker changes nothing and may
// be retried; once there is room it restarts the log.
TEST_F(SegmentedLogTest, AResetTheDiskRefusesChangesNothing) {
  testing_util::FullDisk disk;
  testing_util::ScopedInterposer installed(&disk);
  Reopen();
  const std::vector<Entry> all = MakeEntries(1, 10);
  AppendAndSync(all);
  disk.full = true;
  disk.refuse_creates = true;
  Status s = log_->Reset(50);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(log_->failed()) << s.ToString();
  EXPECT_GT(disk.refused.load(), 0);
  EXPECT_EQ(log_->FirstIndex(), 1u);
  EXPECT_EQ(log_->LastIndex(), 10u);
  disk.full = false;
  ASSERT_TRUE(log_->Reset(50).ok());
  EXPECT_EQ(log_->FirstIndex(), 50u);
  AppendAndSync(MakeEntries(50, 3));
  file::SetInterposer(nullptr);
  Reopen();
  ExpectSameEntries(recovery_.entries, MakeEntries(50, 3));
}

TEST_F(SegmentedLogTest, AppendAfterReopenContinuesLastSegment) {
  Reopen();
  AppendAndSync(MakeEntries(1, 5));
  Reopen();
  AppendAndSync(MakeEntries(6, 5));
  Reopen();
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 10));
  EXPECT_EQ(log_->SegmentCount(), 1u);
}

TEST_F(SegmentedLogTest, LargeBatch) {
  Reopen();
  std::vector<Entry> all = MakeEntries(1, 5000);
  for (Entry& e : all) e.set_data(e.data() + std::string(200, 'p'));
  AppendAndSync(all);
  Reopen();
  ExpectSameEntries(recovery_.entries, all);
}

TEST_F(SegmentedLogTest, MultiSegmentRotationAndReopen) {
  options_.max_segment_bytes = 300;
  Reopen();
  const std::vector<Entry> all = MakeEntries(1, 200);
  for (size_t i = 0; i < all.size(); i += 4) {
    ASSERT_TRUE(log_->Append({all.begin() + i, all.begin() + i + 4}).ok());
    if (i % 20 == 0) {
      ASSERT_TRUE(log_->Sync().ok());
    }
  }
  ASSERT_TRUE(log_->Sync().ok());
  const size_t segments = log_->SegmentCount();
  EXPECT_GT(segments, 10u);
  Reopen();
  EXPECT_FALSE(recovery_.truncated_tail);
  ExpectSameEntries(recovery_.entries, all);
  EXPECT_EQ(log_->SegmentCount(), segments);

  // Each file is named after its first record, the files concatenate to the
  // whole log, and none exceeds the limit by more than one batch.
  std::vector<size_t> record_starts;  // byte offset of each record in the log
  size_t total = 0;
  for (const Entry& e : all) {
    record_starts.push_back(total);
    total += RecordBytes(e).size();
  }
  const auto paths = SegmentPaths(dir_.path());
  ASSERT_EQ(paths.size(), segments);
  std::string concatenated;
  for (const std::string& path : paths) {
    const auto first = std::find(record_starts.begin(), record_starts.end(), concatenated.size());
    ASSERT_NE(first, record_starts.end()) << path << " does not start at a record";
    EXPECT_EQ(fs::path(path).filename(), SegmentName(first - record_starts.begin() + 1));
    const std::string bytes = ReadRecordBytes(path);
    EXPECT_LT(bytes.size(), options_.max_segment_bytes + 4 * 100);
    concatenated += bytes;
  }
  EXPECT_EQ(concatenated, RecordsBytes(all));

  // Appending after the reopen continues the sequence.
  AppendAndSync(MakeEntries(201, 30));
  Reopen();
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 230));
}

TEST_F(SegmentedLogTest, AppendRejectsGapsAndBadIndexes) {
  Reopen();
  EXPECT_FALSE(log_->Append(MakeEntries(2, 3)).ok());  // empty log must start at 1
  std::vector<Entry> zero = {MakeEntry(0, 1)};
  EXPECT_FALSE(log_->Append(zero).ok());
  AppendAndSync(MakeEntries(1, 3));
  Status s = log_->Append(MakeEntries(5, 2));
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(s.IsCorruption());
  EXPECT_NE(s.ToString().find("Invalid argument"), std::string::npos) << s.ToString();
  std::vector<Entry> holey = {MakeEntry(4, 1), MakeEntry(6, 1)};
  EXPECT_FALSE(log_->Append(holey).ok());
  std::vector<Entry> backwards = {MakeEntry(4, 1), MakeEntry(3, 1)};
  EXPECT_FALSE(log_->Append(backwards).ok());
  EXPECT_TRUE(log_->Append({}).ok());
  EXPECT_EQ(log_->LastIndex(), 3u);
  ASSERT_TRUE(log_->Sync().ok());
  Reopen();
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 3));
}

TEST_F(SegmentedLogTest, SuffixTruncationWithinSegment) {
  Reopen();
  AppendAndSync(MakeEntries(1, 20));
  AppendAndSync(MakeEntries(15, 3, /*term=*/2));
  EXPECT_EQ(log_->LastIndex(), 17u);
  Reopen();
  std::vector<Entry> expected = MakeEntries(1, 14);
  for (const Entry& e : MakeEntries(15, 3, 2)) expected.push_back(e);
  ExpectSameEntries(recovery_.entries, expected);
  EXPECT_FALSE(recovery_.truncated_tail);

  // Overwrite just the last entry, then everything.
  AppendAndSync({MakeEntry(17, 3)});
  AppendAndSync(MakeEntries(1, 2, 4));
  Reopen();
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 2, 4));
  EXPECT_EQ(ReadRecordBytes(SegmentPaths(dir_.path()).at(0)), RecordsBytes(MakeEntries(1, 2, 4)));
}

TEST_F(SegmentedLogTest, SuffixTruncationAcrossSegments) {
  options_.max_segment_bytes = 200;
  Reopen();
  for (uint64_t i = 1; i <= 100; i += 5) AppendAndSync(MakeEntries(i, 5));
  const size_t segments = log_->SegmentCount();
  ASSERT_GT(segments, 6u);

  // Cut in the middle of an early segment: later files disappear.
  AppendAndSync(MakeEntries(23, 4, 2));
  EXPECT_EQ(log_->LastIndex(), 26u);
  EXPECT_LT(log_->SegmentCount(), segments);
  EXPECT_EQ(SegmentPaths(dir_.path()).size(), log_->SegmentCount());
  Reopen();
  std::vector<Entry> expected = MakeEntries(1, 22);
  for (const Entry& e : MakeEntries(23, 4, 2)) expected.push_back(e);
  ExpectSameEntries(recovery_.entries, expected);

  // Cut exactly at the first index of a segment; keep appending afterwards.
  const auto paths = SegmentPaths(dir_.path());
  ASSERT_GE(paths.size(), 2u);
  const uint64_t boundary = std::stoull(fs::path(paths[1]).filename().string().substr(0, 20));
  ASSERT_GT(boundary, 1u);
  AppendAndSync(MakeEntries(boundary, 1, 3));
  AppendAndSync(MakeEntries(boundary + 1, 40, 3));
  Reopen();
  expected.resize(boundary - 1);
  for (const Entry& e : MakeEntries(boundary, 41, 3)) expected.push_back(e);
  ExpectSameEntries(recovery_.entries, expected);
  EXPECT_FALSE(recovery_.truncated_tail);

  // Cut everything.
  AppendAndSync(MakeEntries(1, 3, 5));
  EXPECT_EQ(log_->SegmentCount(), 1u);
  Reopen();
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 3, 5));
}

TEST_F(SegmentedLogTest, CrcMismatchInTheMiddleIsRefused) {
  Reopen();
  AppendAndSync(MakeEntries(1, 10));
  log_.reset();
  const std::string path = SegmentPaths(dir_.path()).at(0);
  std::string bytes = ReadRecordBytes(path);
  const size_t offset = RecordsBytes(MakeEntries(1, 4)).size();  // record of index 5
  bytes[offset + 8 + 2] ^= 0x01;  // a payload byte
  WriteFileBytes(path, bytes);
  ExpectOpenCorruption(path);
  // Refusing must not have modified the file.
  EXPECT_EQ(ReadFileBytes(path), bytes);
}

// A damaged length field makes a record in the middle of the last segment
// look like it runs past the end of the file, like a torn write. The intact
// records after it prove it is not one: refuse instead of cutting them off.
TEST_F(SegmentedLogTest, CorruptLengthInTheMiddleIsRefused) {
  for (uint32_t flip : {0x01000000u, 0x00100000u, 0x00000400u}) {
    Reopen();
    AppendAndSync(MakeEntries(1, 10));
    log_.reset();
    const std::string path = SegmentPaths(dir_.path()).at(0);
    std::string bytes = ReadRecordBytes(path);
    const std::string original = bytes;
    const size_t offset = RecordsBytes(MakeEntries(1, 4)).size();  // record of index 5
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) length |= uint32_t{static_cast<uint8_t>(bytes[offset + 4 + i])} << (8 * i);
    length ^= flip;
    for (int i = 0; i < 4; ++i) bytes[offset + 4 + i] = static_cast<char>(length >> (8 * i));
    WriteFileBytes(path, bytes);
    ExpectOpenCorruption(path);
    EXPECT_EQ(ReadFileBytes(path), bytes) << "refusing must not modify the file";
    WriteFileBytes(path, original);
    log_.reset();
    std::filesystem::remove_all(dir_.path());
  }
}

TEST_F(SegmentedLogTest, CorruptionInNonLastSegmentIsRefused) {
  options_.max_segment_bytes = 100;
  Reopen();
  for (uint64_t i = 1; i <= 30; i += 3) AppendAndSync(MakeEntries(i, 3));
  ASSERT_GT(log_->SegmentCount(), 2u);
  log_.reset();
  const std::string first = SegmentPaths(dir_.path()).at(0);
  const std::string original = ReadRecordBytes(first);

  // Damage to the last record of the first segment is not a torn tail.
  std::string bytes = original;
  bytes[bytes.size() - 1] ^= 0x40;
  WriteFileBytes(first, bytes);
  ExpectOpenCorruption(first);

  // Nor is a short first segment.
  WriteFileBytes(first, original.substr(0, original.size() - 3));
  ExpectOpenCorruption(first);

  // Nor an empty one.
  WriteFileBytes(first, "");
  ExpectOpenCorruption(first);

  WriteFileBytes(first, original);
  Reopen();
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 30));
}

TEST_F(SegmentedLogTest, MissingMiddleSegmentIsRefused) {
  options_.max_segment_bytes = 100;
  Reopen();
  for (uint64_t i = 1; i <= 30; i += 3) AppendAndSync(MakeEntries(i, 3));
  log_.reset();
  const auto paths = SegmentPaths(dir_.path());
  ASSERT_GT(paths.size(), 2u);
  fs::remove(paths[1]);
  ExpectOpenCorruption(paths[2]);
}

TEST_F(SegmentedLogTest, HandWrittenSegmentsAreChecked) {
  // A file written byte by byte in the documented format is readable.
  WriteFileBytes(dir_.Join(SegmentName(1)), RecordsBytes(MakeEntries(1, 3)));
  WriteFileBytes(dir_.Join(SegmentName(4)), RecordsBytes(MakeEntries(4, 2)));
  WriteFileBytes(dir_.Join("notes.txt"), "not a segment");
  Reopen();
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 5));
  EXPECT_EQ(log_->SegmentCount(), 2u);
  log_.reset();

  // A repeated index inside a segment.
  std::vector<Entry> repeat = MakeEntries(1, 2);
  repeat.push_back(MakeEntry(2, 1));
  repeat.push_back(MakeEntry(3, 1));
  WriteFileBytes(dir_.Join(SegmentName(1)), RecordsBytes(repeat));
  ExpectOpenCorruption(dir_.Join(SegmentName(1)));

  // Overlapping segments.
  WriteFileBytes(dir_.Join(SegmentName(1)), RecordsBytes(MakeEntries(1, 4)));
  ExpectOpenCorruption(dir_.Join(SegmentName(4)));

  // A log that starts past 1 (its prefix compacted away) is valid...
  fs::remove(dir_.Join(SegmentName(1)));
  Reopen();
  ExpectSameEntries(recovery_.entries, MakeEntries(4, 2));
  EXPECT_EQ(recovery_.first_index, 4u);
  log_.reset();
  // ...but not with a gap after its first segment...
  WriteFileBytes(dir_.Join(SegmentName(7)), RecordsBytes(MakeEntries(7, 1)));
  ExpectOpenCorruption(dir_.Join(SegmentName(7)));
  fs::remove(dir_.Join(SegmentName(7)));
  // ...nor starting at index 0.
  WriteFileBytes(dir_.Join(SegmentName(0)), "");
  ExpectOpenCorruption(dir_.Join(SegmentName(0)));
  fs::remove(dir_.Join(SegmentName(0)));

  // A segment whose first record does not match its name.
  fs::remove(dir_.Join(SegmentName(4)));
  WriteFileBytes(dir_.Join(SegmentName(1)), RecordsBytes(MakeEntries(2, 3)));
  ExpectOpenCorruption(dir_.Join(SegmentName(1)));
}

TEST_F(SegmentedLogTest, WrongIndexOrUnparsableLastRecordIsTornTail) {
  std::vector<Entry> entries = MakeEntries(1, 3);
  entries.push_back(MakeEntry(3, 1));  // repeat as the last record
  const std::string path = dir_.Join(SegmentName(1));
  WriteFileBytes(path, RecordsBytes(entries));
  Reopen();
  EXPECT_TRUE(recovery_.truncated_tail);
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 3));
  EXPECT_EQ(ReadFileBytes(path), RecordsBytes(MakeEntries(1, 3)));
  log_.reset();

  // A last record with a valid CRC over bytes that are not an Entry.
  std::string garbage = "\xFF\xFF\xFF";
  std::string record(4, '\0');
  std::string covered = std::string("\x03\x00\x00\x00", 4) + garbage;
  const uint32_t crc = crc32c::Value(covered.data(), covered.size());
  for (int i = 0; i < 4; ++i) record[i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
  WriteFileBytes(path, RecordsBytes(MakeEntries(1, 3)) + record + covered);
  Reopen();
  EXPECT_TRUE(recovery_.truncated_tail);
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 3));
}

// A bad last record holding an entry a store applied (so it was synced) is
// damage, not a torn write: refused, the file left as it is. One past it is
// still a torn tail.
TEST_F(SegmentedLogTest, ADamagedLastRecordKnownDurableIsRefusedNotCut) {
  const std::string path = dir_.Join(SegmentName(1));
  std::string damaged = RecordsBytes(MakeEntries(1, 4));
  damaged[damaged.size() - 2] = static_cast<char>(damaged[damaged.size() - 2] ^ 0x10);  // entry 4's payload
  WriteFileBytes(path, damaged);
  options_.durable_through = 4;
  ExpectOpenCorruption(path);
  EXPECT_EQ(ReadFileBytes(path), damaged);
  options_.durable_through = 3;
  Reopen();
  EXPECT_TRUE(recovery_.truncated_tail);
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 3));
  EXPECT_EQ(ReadFileBytes(path), RecordsBytes(MakeEntries(1, 3)));
}

// Writes a log of `count` entries (1 per Append), closes it and returns the
// last segment's path.
std::string WriteLog(const std::string& dir, const SegmentedLogOptions& options, uint64_t count) {
  std::unique_ptr<SegmentedLog> log;
  LogRecovery recovery;
  EXPECT_TRUE(SegmentedLog::Open(dir, options, &log, &recovery).ok());
  for (uint64_t i = 1; i <= count; ++i) EXPECT_TRUE(log->Append({MakeEntry(i, 1)}).ok());
  EXPECT_TRUE(log->Sync().ok());
  return SegmentPaths(dir).back();
}

// Truncates the last segment to every length inside its last record and
// checks recovery, including appending after the cut.
void CheckTornTailAtEveryOffset(const SegmentedLogOptions& options, uint64_t count) {
  TempDir dir;
  const std::string path = WriteLog(dir.path(), options, count);
  const std::string bytes = ReadRecordBytes(path);
  const std::string last_record = RecordBytes(MakeEntry(count, 1));
  ASSERT_GE(bytes.size(), last_record.size());
  const size_t start = bytes.size() - last_record.size();
  ASSERT_EQ(bytes.substr(start), last_record);
  const std::vector<Entry> survivors = MakeEntries(1, count - 1);

  for (size_t length = start; length < bytes.size(); ++length) {
    SCOPED_TRACE("last segment truncated to " + std::to_string(length) + " bytes");
    WriteFileBytes(path, bytes.substr(0, length));
    std::unique_ptr<SegmentedLog> log;
    LogRecovery recovery;
    Status s = SegmentedLog::Open(dir.path(), options, &log, &recovery);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ExpectSameEntries(recovery.entries, survivors);
    EXPECT_EQ(log->LastIndex(), count - 1);
    // Cutting at a record boundary leaves nothing torn.
    EXPECT_EQ(recovery.truncated_tail, length != start);
    if (length != start) {
      EXPECT_NE(recovery.detail.find(path), std::string::npos) << recovery.detail;
      EXPECT_NE(recovery.detail.find("offset " + std::to_string(start)), std::string::npos)
          << recovery.detail;
    }
    EXPECT_EQ(ReadFileBytes(path).size(), start);

    // Restart after the cut: append a different entry, reopen, consistent.
    ASSERT_TRUE(log->Append({MakeEntry(count, 2), MakeEntry(count + 1, 2)}).ok());
    ASSERT_TRUE(log->Sync().ok());
    log.reset();
    LogRecovery again;
    s = SegmentedLog::Open(dir.path(), options, &log, &again);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_FALSE(again.truncated_tail);
    std::vector<Entry> expected = survivors;
    expected.push_back(MakeEntry(count, 2));
    expected.push_back(MakeEntry(count + 1, 2));
    ExpectSameEntries(again.entries, expected);
    log.reset();
  }
}

TEST(SegmentedLogTornTailTest, EveryOffsetOfLastRecordSingleSegment) {
  CheckTornTailAtEveryOffset(SegmentedLogOptions{}, 12);
}

TEST(SegmentedLogTornTailTest, EveryOffsetOfLastRecordMultiSegment) {
  SegmentedLogOptions options;
  options.max_segment_bytes = 120;
  CheckTornTailAtEveryOffset(options, 40);
}

TEST(SegmentedLogTornTailTest, EveryOffsetWhenLastSegmentHoldsOneRecord) {
  SegmentedLogOptions options;
  options.max_segment_bytes = 1;  // every Append starts a segment
  CheckTornTailAtEveryOffset(options, 6);
}

TEST_F(SegmentedLogTest, FlippedByteInLastRecordIsTornTail) {
  options_.max_segment_bytes = 150;
  const std::string path = WriteLog(dir_.path(), options_, 30);
  const std::string bytes = ReadRecordBytes(path);
  const size_t start = bytes.size() - RecordBytes(MakeEntry(30, 1)).size();
  // Every payload byte and every CRC byte.
  std::vector<size_t> offsets;
  for (size_t i = start; i < start + 4; ++i) offsets.push_back(i);
  for (size_t i = start + 8; i < bytes.size(); ++i) offsets.push_back(i);
  for (size_t offset : offsets) {
    SCOPED_TRACE("flipped byte at " + std::to_string(offset));
    std::string damaged = bytes;
    damaged[offset] ^= 0x01;
    WriteFileBytes(path, damaged);
    Reopen();
    EXPECT_TRUE(recovery_.truncated_tail);
    EXPECT_NE(recovery_.detail.find("offset " + std::to_string(start)), std::string::npos)
        << recovery_.detail;
    ExpectSameEntries(recovery_.entries, MakeEntries(1, 29));
    EXPECT_EQ(ReadFileBytes(path), bytes.substr(0, start));
  }
  AppendAndSync(MakeEntries(30, 5, 2));
  Reopen();
  EXPECT_FALSE(recovery_.truncated_tail);
  std::vector<Entry> expected = MakeEntries(1, 29);
  for (const Entry& e : MakeEntries(30, 5, 2)) expected.push_back(e);
  ExpectSameEntries(recovery_.entries, expected);
}

// Zeros after the last record (preallocated space no record reached, or
// whose record never reached the disk) are the end of the log, not damage:
// nothing is reported or cut, and the next record is written over them.
TEST_F(SegmentedLogTest, ZerosAfterTheLastRecordAreItsCleanEnd) {
  options_.preallocate_bytes = 0;  // the zeros are written by hand here
  const std::string path = WriteLog(dir_.path(), options_, 10);
  const std::string bytes = ReadFileBytes(path);
  WriteFileBytes(path, bytes + std::string(4096, '\0'));
  Reopen();
  EXPECT_FALSE(recovery_.truncated_tail) << recovery_.detail;
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 10));
  AppendAndSync(MakeEntries(11, 2));
  const size_t zeros_left = 4096 - RecordsBytes(MakeEntries(11, 2)).size();
  EXPECT_EQ(ReadFileBytes(path), RecordsBytes(MakeEntries(1, 12)) + std::string(zeros_left, '\0'));
  Reopen();
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 12));

  // A bad record followed by zeros is a torn tail: cut, zeros and all.
  log_.reset();
  std::string torn = bytes + RecordBytes(MakeEntry(11, 1)) + std::string(100, '\0');
  torn[bytes.size() + 9] ^= 0x01;
  WriteFileBytes(path, torn);
  Reopen();
  EXPECT_TRUE(recovery_.truncated_tail);
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 10));
  EXPECT_EQ(ReadFileBytes(path), bytes);

  // But garbage after the zeros is not.
  log_.reset();
  WriteFileBytes(path, bytes + std::string(100, '\0') + "x");
  ExpectOpenCorruption(path);
}

// Segment files are preallocated a step at a time ahead of the writes (so an
// append changes no inode), read back as the records they hold, reopened
// without a report, and cut to their records when the next segment starts.
TEST_F(SegmentedLogTest, SegmentsArePreallocatedAndCutToTheirRecordsWhenComplete) {
  {
    file::File probe;
    const std::string path = dir_.path() + "/probe";
    ASSERT_TRUE(file::File::Open(path, file::OpenMode::kCreateTruncate, &probe).ok());
    bool done = false;
    ASSERT_TRUE(probe.Allocate(0, 4096, &done).ok());
    if (!done) GTEST_SKIP() << "this file system cannot preallocate";
    ASSERT_TRUE(file::Remove(path).ok());
  }
  options_.max_segment_bytes = 10000;
  options_.preallocate_bytes = 4096;
  Reopen();
  AppendAndSync(MakeEntries(1, 20));
  const std::string first = SegmentPaths(dir_.path()).at(0);
  EXPECT_EQ(fs::file_size(first), 4096u) << "not preallocated";
  EXPECT_EQ(ReadRecordBytes(first), RecordsBytes(MakeEntries(1, 20)));
  Reopen();
  EXPECT_FALSE(recovery_.truncated_tail) << recovery_.detail;
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 20));
  EXPECT_EQ(log_->SizeBytes(), RecordsBytes(MakeEntries(1, 20)).size());
  // Past the first step: the next one, never past max_segment_bytes.
  std::vector<Entry> all = MakeEntries(1, 20);
  uint64_t next = 21;
  while (log_->SegmentCount() == 1) {
    const std::vector<Entry> batch = MakeEntries(next, 10);
    AppendAndSync(batch);
    all.insert(all.end(), batch.begin(), batch.end());
    next += 10;
    if (log_->SegmentCount() == 1) {
      // A step at a time up to max_segment_bytes; past it, just the batch.
      const uint64_t size = fs::file_size(first);
      const uint64_t records = ReadRecordBytes(first).size();
      EXPECT_TRUE(size % 4096 == 0 || size == options_.max_segment_bytes || size == records)
          << size << " bytes for " << records << " of records";
      EXPECT_LE(size, std::max<uint64_t>(options_.max_segment_bytes, records));
    }
  }
  // The completed segment holds exactly its records; a reopen reads them all.
  const std::vector<std::string> paths = SegmentPaths(dir_.path());
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(ReadFileBytes(paths[0]), ReadRecordBytes(paths[0]))
      << "zeros left in a complete segment";
  EXPECT_GT(fs::file_size(paths[1]), ReadRecordBytes(paths[1]).size());
  Reopen();
  EXPECT_FALSE(recovery_.truncated_tail) << recovery_.detail;
  ExpectSameEntries(recovery_.entries, all);
  // Truncating the suffix inside the preallocated segment leaves no stale
  // record behind it.
  AppendAndSync(MakeEntries(next - 5, 1, 2));
  all.resize(all.size() - 5);
  all.push_back(MakeEntry(next - 5, 2));
  Reopen();
  EXPECT_FALSE(recovery_.truncated_tail) << recovery_.detail;
  ExpectSameEntries(recovery_.entries, all);
  // Preallocated further than a smaller max_segment_bytes (set at a restart)
  // allows, the last segment is cut as well when the next one starts.
  const std::string last = SegmentPaths(dir_.path()).back();
  ASSERT_GT(fs::file_size(last), ReadRecordBytes(last).size());
  options_.max_segment_bytes = 1;
  Reopen();
  AppendAndSync({MakeEntry(all.back().index() + 1, 2)});
  all.push_back(MakeEntry(all.back().index() + 1, 2));
  EXPECT_EQ(SegmentPaths(dir_.path()).size(), 3u);
  EXPECT_EQ(ReadFileBytes(last), ReadRecordBytes(last)) << "zeros left in a complete segment";
  Reopen();
  ExpectSameEntries(recovery_.entries, all);
}

// ---- Logs starting past 1, compaction, reset ----

std::string ResetMarkerName(uint64_t next_index) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "RESET-%020llu", static_cast<unsigned long long>(next_index));
  return buf;
}

// First indexes of the segment files in `dir`, ascending.
std::vector<uint64_t> SegmentFirstIndexes(const std::string& dir) {
  std::vector<uint64_t> firsts;
  for (const std::string& path : SegmentPaths(dir)) {
    firsts.push_back(std::stoull(fs::path(path).filename().string().substr(0, 20)));
  }
  return firsts;
}

// Names of every file in `dir`, sorted.
std::vector<std::string> FileNames(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

uint64_t RecordBytesOnDisk(const std::string& dir) {
  uint64_t bytes = 0;
  for (const std::string& path : SegmentPaths(dir)) bytes += ReadRecordBytes(path).size();
  return bytes;
}

TEST_F(SegmentedLogTest, NewLogStartsAtOne) {
  Reopen();
  EXPECT_EQ(recovery_.first_index, 1u);
  EXPECT_EQ(log_->FirstIndex(), 1u);
  EXPECT_EQ(log_->LastIndex(), 0u);
  EXPECT_EQ(log_->SizeBytes(), 0u);
  AppendAndSync(MakeEntries(1, 7));
  EXPECT_EQ(log_->SizeBytes(), RecordsBytes(MakeEntries(1, 7)).size());
  Reopen();
  EXPECT_EQ(recovery_.first_index, 1u);
  EXPECT_EQ(log_->FirstIndex(), 1u);
  EXPECT_EQ(log_->SizeBytes(), RecordBytesOnDisk(dir_.path()));
}

TEST_F(SegmentedLogTest, OpenLogStartingPastOne) {
  // As compaction leaves it: segments starting at 1000.
  WriteFileBytes(dir_.Join(SegmentName(1000)), RecordsBytes(MakeEntries(1000, 5)));
  WriteFileBytes(dir_.Join(SegmentName(1005)), RecordsBytes(MakeEntries(1005, 5)));
  Reopen();
  EXPECT_EQ(recovery_.first_index, 1000u);
  EXPECT_FALSE(recovery_.truncated_tail);
  ExpectSameEntries(recovery_.entries, MakeEntries(1000, 10));
  EXPECT_EQ(log_->FirstIndex(), 1000u);
  EXPECT_EQ(log_->LastIndex(), 1009u);
  EXPECT_EQ(log_->SizeBytes(), RecordBytesOnDisk(dir_.path()));

  // Appends continue it; nothing below the first index can be replaced.
  AppendAndSync(MakeEntries(1010, 3));
  Status s = log_->Append(MakeEntries(999, 2, 2));
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(s.IsCorruption());
  EXPECT_NE(s.message().find("below the log's first index 1000"), std::string::npos)
      << s.ToString();
  EXPECT_FALSE(log_->Append(MakeEntries(1014, 1)).ok());  // a gap
  // Replacing a suffix that starts in the second segment.
  AppendAndSync(MakeEntries(1007, 2, 2));
  Reopen();
  std::vector<Entry> expected = MakeEntries(1000, 7);
  for (const Entry& e : MakeEntries(1007, 2, 2)) expected.push_back(e);
  ExpectSameEntries(recovery_.entries, expected);
  EXPECT_EQ(recovery_.first_index, 1000u);

  // Replacing everything, from the first index on, keeps the first index.
  AppendAndSync(MakeEntries(1000, 1, 3));
  EXPECT_EQ(log_->SegmentCount(), 1u);
  Reopen();
  ExpectSameEntries(recovery_.entries, MakeEntries(1000, 1, 3));
  EXPECT_EQ(SegmentFirstIndexes(dir_.path()), std::vector<uint64_t>{1000});
}

TEST_F(SegmentedLogTest, EmptySegmentAloneIsAnEmptyLogStartingAtItsName) {
  WriteFileBytes(dir_.Join(SegmentName(42)), "");
  Reopen();
  EXPECT_EQ(recovery_.first_index, 42u);
  EXPECT_TRUE(recovery_.entries.empty());
  EXPECT_EQ(log_->FirstIndex(), 42u);
  EXPECT_EQ(log_->LastIndex(), 41u);
  EXPECT_FALSE(log_->Append(MakeEntries(1, 1)).ok());
  EXPECT_FALSE(log_->Append(MakeEntries(43, 1)).ok());
  AppendAndSync(MakeEntries(42, 3));
  Reopen();
  ExpectSameEntries(recovery_.entries, MakeEntries(42, 3));
  EXPECT_EQ(log_->SegmentCount(), 1u);

  // A torn first record leaves it empty, still at 42.
  log_.reset();
  WriteFileBytes(dir_.Join(SegmentName(42)), RecordBytes(MakeEntry(42, 1)).substr(0, 5));
  Reopen();
  EXPECT_TRUE(recovery_.truncated_tail);
  EXPECT_EQ(recovery_.first_index, 42u);
  EXPECT_EQ(log_->LastIndex(), 41u);
}

// Checks that `dir` holds exactly the empty log whose next entry is `next`:
// opens it, then appends and reopens.
void ExpectEmptyLogAt(const std::string& dir, const SegmentedLogOptions& options,
                      uint64_t next) {
  std::unique_ptr<SegmentedLog> log;
  LogRecovery recovery;
  Status s = SegmentedLog::Open(dir, options, &log, &recovery);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(recovery.first_index, next);
  EXPECT_TRUE(recovery.entries.empty());
  EXPECT_FALSE(recovery.truncated_tail);
  EXPECT_EQ(log->FirstIndex(), next);
  EXPECT_EQ(log->LastIndex(), next - 1);
  EXPECT_EQ(log->SizeBytes(), 0u);
  // Only the empty segment is left: no marker, no old segment.
  EXPECT_EQ(FileNames(dir), std::vector<std::string>{SegmentName(next)});
  EXPECT_EQ(fs::file_size(fs::path(dir) / SegmentName(next)), 0u);

  ASSERT_TRUE(log->Append(MakeEntries(next, 3, 7)).ok());
  ASSERT_TRUE(log->Sync().ok());
  log.reset();
  recovery = LogRecovery{};
  s = SegmentedLog::Open(dir, options, &log, &recovery);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(recovery.first_index, next);
  ExpectSameEntries(recovery.entries, MakeEntries(next, 3, 7));
}

// Fills the log with entries 1..count in batches of 5 (count a multiple of 5).
void FillLog(SegmentedLog* log, uint64_t count) {
  for (uint64_t i = 1; i <= count; i += 5) {
    ASSERT_TRUE(log->Append(MakeEntries(i, 5)).ok());
    ASSERT_TRUE(log->Sync().ok());
  }
}

TEST_F(SegmentedLogTest, CompactPrefixRemovesOnlyWholeSegments) {
  options_.max_segment_bytes = 200;
  Reopen();
  FillLog(log_.get(), 100);
  const std::vector<uint64_t> firsts = SegmentFirstIndexes(dir_.path());
  ASSERT_GT(firsts.size(), 8u);
  ASSERT_EQ(firsts.front(), 1u);

  // Below the first index, or inside the first segment: nothing to remove.
  ASSERT_TRUE(log_->CompactPrefix(0).ok());
  ASSERT_TRUE(log_->CompactPrefix(firsts[1] - 2).ok());
  EXPECT_EQ(SegmentFirstIndexes(dir_.path()), firsts);
  EXPECT_EQ(log_->FirstIndex(), 1u);

  // An index inside segment 3: segments 0..2 go, segment 3 stays whole
  // (entries firsts[3] .. index are kept too).
  const uint64_t inside = firsts[3] + 1;
  ASSERT_LT(inside, firsts[4] - 1);
  ASSERT_TRUE(log_->CompactPrefix(inside).ok());
  EXPECT_EQ(log_->FirstIndex(), firsts[3]);
  EXPECT_EQ(log_->LastIndex(), 100u);
  EXPECT_EQ(SegmentFirstIndexes(dir_.path()),
            std::vector<uint64_t>(firsts.begin() + 3, firsts.end()));
  EXPECT_EQ(log_->SegmentCount(), firsts.size() - 3);
  EXPECT_EQ(log_->SizeBytes(), RecordBytesOnDisk(dir_.path()));
  Reopen();
  EXPECT_EQ(recovery_.first_index, firsts[3]);
  EXPECT_FALSE(recovery_.truncated_tail);
  ExpectSameEntries(recovery_.entries, MakeEntries(firsts[3], 100 - firsts[3] + 1));

  // Exactly the last index of segment 5: it goes too.
  ASSERT_TRUE(log_->CompactPrefix(firsts[6] - 1).ok());
  EXPECT_EQ(log_->FirstIndex(), firsts[6]);
  EXPECT_EQ(SegmentFirstIndexes(dir_.path()),
            std::vector<uint64_t>(firsts.begin() + 6, firsts.end()));

  // Appending (and replacing a suffix) afterwards; reopen sees it all.
  AppendAndSync(MakeEntries(101, 10));
  AppendAndSync(MakeEntries(99, 3, 2));
  EXPECT_EQ(log_->SizeBytes(), RecordBytesOnDisk(dir_.path()));
  Reopen();
  std::vector<Entry> expected = MakeEntries(firsts[6], 98 - firsts[6] + 1);
  for (const Entry& e : MakeEntries(99, 3, 2)) expected.push_back(e);
  ExpectSameEntries(recovery_.entries, expected);
  EXPECT_EQ(recovery_.first_index, firsts[6]);
  EXPECT_EQ(log_->SizeBytes(), RecordBytesOnDisk(dir_.path()));
}

// remove_in_background: the log drops the segments at once, a thread of its
// own removes their files, and a Reset() racing with those removals (a
// snapshot installed right after a compaction) still leaves exactly the new
// empty log.
TEST_F(SegmentedLogTest, CompactPrefixInTheBackground) {
  options_.max_segment_bytes = 200;
  options_.remove_in_background = true;
  Reopen();
  FillLog(log_.get(), 100);
  const std::vector<uint64_t> firsts = SegmentFirstIndexes(dir_.path());
  ASSERT_GT(firsts.size(), 8u);
  ASSERT_TRUE(log_->CompactPrefix(firsts[3] + 1).ok());
  EXPECT_EQ(log_->FirstIndex(), firsts[3]);
  EXPECT_EQ(log_->SegmentCount(), firsts.size() - 3);
  AppendAndSync(MakeEntries(101, 5));  // the log goes on meanwhile
  ASSERT_TRUE(log_->CompactPrefix(firsts[6] - 1).ok());
  log_->WaitForRemovals();
  const std::vector<uint64_t> left = SegmentFirstIndexes(dir_.path());
  ASSERT_FALSE(left.empty());
  EXPECT_EQ(left.front(), firsts[6]);
  EXPECT_EQ(left.size(), log_->SegmentCount());
  EXPECT_EQ(log_->SizeBytes(), RecordBytesOnDisk(dir_.path()));
  Reopen();
  EXPECT_EQ(recovery_.first_index, firsts[6]);
  ExpectSameEntries(recovery_.entries, MakeEntries(firsts[6], 105 - firsts[6] + 1));

  uint64_t next = 1000;
  for (int round = 0; round < 20; ++round, next += 1000) {
    SCOPED_TRACE("round " + std::to_string(round));
    AppendAndSync(MakeEntries(log_->LastIndex() + 1, 40));
    ASSERT_TRUE(log_->CompactPrefix(log_->LastIndex() - 5).ok());
    ASSERT_TRUE(log_->Reset(next).ok());
    EXPECT_FALSE(log_->failed());
    EXPECT_EQ(FileNames(dir_.path()), std::vector<std::string>{SegmentName(next)});
    AppendAndSync(MakeEntries(next, 3));
  }
  Reopen();
  EXPECT_EQ(recovery_.first_index, next - 1000);
  ExpectSameEntries(recovery_.entries, MakeEntries(next - 1000, 3));
}

// What a crash part way through CompactPrefix leaves: the oldest k segments
// gone. Each such state opens as a contiguous log starting at segment k.
TEST_F(SegmentedLogTest, CompactPrefixInterruptedLeavesAValidLog) {
  options_.max_segment_bytes = 150;
  Reopen();
  FillLog(log_.get(), 60);
  log_.reset();
  const std::vector<std::string> paths = SegmentPaths(dir_.path());
  const std::vector<uint64_t> firsts = SegmentFirstIndexes(dir_.path());
  ASSERT_GT(paths.size(), 4u);
  for (size_t k = 1; k < paths.size(); ++k) {
    SCOPED_TRACE("oldest " + std::to_string(k) + " segment(s) removed");
    fs::remove(paths[k - 1]);
    Reopen();
    EXPECT_EQ(recovery_.first_index, firsts[k]);
    ExpectSameEntries(recovery_.entries, MakeEntries(firsts[k], 60 - firsts[k] + 1));
    EXPECT_EQ(log_->FirstIndex(), firsts[k]);
    EXPECT_EQ(log_->LastIndex(), 60u);
    log_.reset();
  }
}

TEST_F(SegmentedLogTest, CompactPrefixBeyondLastIndexKeepsActiveSegment) {
  options_.max_segment_bytes = 200;
  Reopen();
  FillLog(log_.get(), 50);
  const uint64_t last_first = SegmentFirstIndexes(dir_.path()).back();
  ASSERT_GT(last_first, 1u);
  ASSERT_TRUE(log_->CompactPrefix(50).ok());
  EXPECT_EQ(SegmentFirstIndexes(dir_.path()), std::vector<uint64_t>{last_first});
  ASSERT_TRUE(log_->CompactPrefix(UINT64_MAX).ok());
  EXPECT_EQ(log_->SegmentCount(), 1u);
  EXPECT_EQ(log_->FirstIndex(), last_first);
  EXPECT_EQ(log_->LastIndex(), 50u);
  Reopen();
  EXPECT_EQ(recovery_.first_index, last_first);
  ExpectSameEntries(recovery_.entries, MakeEntries(last_first, 50 - last_first + 1));
  AppendAndSync(MakeEntries(51, 5));
  Reopen();
  ExpectSameEntries(recovery_.entries, MakeEntries(last_first, 55 - last_first + 1));

  // A log whose active segment is empty (after a reset): compacting
  // everything keeps that empty segment, so the log stays empty at the right
  // index.
  ASSERT_TRUE(log_->Reset(70).ok());
  ASSERT_TRUE(log_->CompactPrefix(UINT64_MAX).ok());
  EXPECT_EQ(log_->SegmentCount(), 1u);
  EXPECT_EQ(log_->FirstIndex(), 70u);
  EXPECT_EQ(log_->LastIndex(), 69u);
  log_.reset();
  ExpectEmptyLogAt(dir_.path(), options_, 70);

  // A new, segment-less log: nothing to do.
  TempDir empty;
  std::unique_ptr<SegmentedLog> log;
  ASSERT_TRUE(SegmentedLog::Open(empty.path(), options_, &log, nullptr).ok());
  EXPECT_TRUE(log->CompactPrefix(10).ok());
  EXPECT_EQ(log->FirstIndex(), 1u);
  EXPECT_EQ(log->LastIndex(), 0u);
}

TEST_F(SegmentedLogTest, ResetThenReopen) {
  options_.max_segment_bytes = 200;
  Reopen();
  FillLog(log_.get(), 100);
  ASSERT_GT(log_->SegmentCount(), 3u);

  ASSERT_TRUE(log_->Reset(500).ok());
  EXPECT_EQ(log_->FirstIndex(), 500u);
  EXPECT_EQ(log_->LastIndex(), 499u);
  EXPECT_EQ(log_->SegmentCount(), 1u);
  EXPECT_EQ(log_->SizeBytes(), 0u);
  EXPECT_EQ(FileNames(dir_.path()), std::vector<std::string>{SegmentName(500)});
  Reopen();
  EXPECT_EQ(recovery_.first_index, 500u);
  EXPECT_TRUE(recovery_.entries.empty());
  EXPECT_EQ(log_->LastIndex(), 499u);

  // Index 0 is refused and changes nothing.
  Status s = log_->Reset(0);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(s.IsCorruption());
  EXPECT_EQ(log_->FirstIndex(), 500u);
}

TEST_F(SegmentedLogTest, ResetThenAppendThenReopen) {
  options_.max_segment_bytes = 200;
  Reopen();
  FillLog(log_.get(), 60);
  ASSERT_TRUE(log_->Reset(500).ok());
  EXPECT_FALSE(log_->Append(MakeEntries(60, 1)).ok());   // below the first index
  EXPECT_FALSE(log_->Append(MakeEntries(501, 1)).ok());  // a gap
  // Without a reopen in between: the first append goes to index 500.
  for (uint64_t i = 500; i < 540; i += 5) AppendAndSync(MakeEntries(i, 5, 2));
  EXPECT_GT(log_->SegmentCount(), 1u);
  EXPECT_EQ(log_->SizeBytes(), RecordBytesOnDisk(dir_.path()));
  Reopen();
  EXPECT_EQ(recovery_.first_index, 500u);
  ExpectSameEntries(recovery_.entries, MakeEntries(500, 40, 2));

  // Compaction after a reset.
  const std::vector<uint64_t> firsts = SegmentFirstIndexes(dir_.path());
  ASSERT_TRUE(log_->CompactPrefix(firsts[1] - 1).ok());
  Reopen();
  EXPECT_EQ(recovery_.first_index, firsts[1]);
  ExpectSameEntries(recovery_.entries, MakeEntries(firsts[1], 540 - firsts[1], 2));

  // A second reset, backwards this time, onto an index below the old log.
  ASSERT_TRUE(log_->Reset(20).ok());
  log_.reset();
  ExpectEmptyLogAt(dir_.path(), options_, 20);  // appends 20..22

  // A reset onto the first index of an existing segment: that segment's old
  // contents must not survive under the reused name.
  Reopen();
  for (uint64_t i = 23; i < 73; i += 5) AppendAndSync(MakeEntries(i, 5, 8));
  const std::vector<uint64_t> now = SegmentFirstIndexes(dir_.path());
  ASSERT_GT(now.size(), 2u);
  ASSERT_TRUE(log_->Reset(now[1]).ok());
  log_.reset();
  ExpectEmptyLogAt(dir_.path(), options_, now[1]);

  // A reset of an empty log, to the index it already has; and of a new log.
  Reopen();
  ASSERT_TRUE(log_->Reset(now[1] + 3).ok());  // not empty: 3 entries were appended
  ASSERT_TRUE(log_->Reset(now[1] + 3).ok());
  log_.reset();
  ExpectEmptyLogAt(dir_.path(), options_, now[1] + 3);

  TempDir fresh;
  std::unique_ptr<SegmentedLog> log;
  ASSERT_TRUE(SegmentedLog::Open(fresh.path(), options_, &log, nullptr).ok());
  ASSERT_TRUE(log->Reset(1).ok());
  log.reset();
  ExpectEmptyLogAt(fresh.path(), options_, 1);
}

// Unsynced appends before a reset are dropped with everything else.
TEST_F(SegmentedLogTest, ResetDropsUnsyncedAppends) {
  options_.max_segment_bytes = 100;
  Reopen();
  FillLog(log_.get(), 20);
  ASSERT_TRUE(log_->Append(MakeEntries(21, 30)).ok());  // starts a new segment, unsynced
  ASSERT_TRUE(log_->Reset(7).ok());
  log_.reset();
  ExpectEmptyLogAt(dir_.path(), options_, 7);
}

// The on-disk states a crash during Reset(next) can leave, built by hand
// following the protocol in log_store.h step by step. Each must open as the
// old log untouched or as the empty log at `next` -- never as corruption or a
// mixture.
TEST(SegmentedLogResetCrashTest, EveryStepOpensAsOldOrNew) {
  SegmentedLogOptions options;
  options.max_segment_bytes = 150;
  const uint64_t kCount = 60;

  // The old log, written once; each state starts from a copy of it.
  TempDir original;
  {
    std::unique_ptr<SegmentedLog> log;
    ASSERT_TRUE(SegmentedLog::Open(original.path(), options, &log, nullptr).ok());
    FillLog(log.get(), kCount);
  }
  const std::vector<uint64_t> firsts = SegmentFirstIndexes(original.path());
  ASSERT_GT(firsts.size(), 4u);

  // `next` below the log, equal to a segment's first index (name reused),
  // inside a segment, right after the last entry, and far beyond it.
  const std::vector<uint64_t> nexts = {1, firsts[2], firsts[2] + 1, kCount + 1, 100000};
  for (uint64_t next : nexts) {
    const std::string marker = ResetMarkerName(next);
    const std::string new_segment = SegmentName(next);
    auto copy_old = [&](const std::string& to) {
      for (const auto& e : fs::directory_iterator(original.path())) {
        fs::copy_file(e.path(), fs::path(to) / e.path().filename());
      }
    };
    auto expect_old = [&](const std::string& dir) {
      std::unique_ptr<SegmentedLog> log;
      LogRecovery recovery;
      Status s = SegmentedLog::Open(dir, options, &log, &recovery);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(recovery.first_index, 1u);
      ExpectSameEntries(recovery.entries, MakeEntries(1, kCount));
      EXPECT_EQ(SegmentFirstIndexes(dir), firsts);
    };

    // Step 0: the marker is not (durably) there: the old log, unchanged.
    {
      SCOPED_TRACE("next " + std::to_string(next) + ": before the marker");
      TempDir dir;
      copy_old(dir.path());
      expect_old(dir.path());
    }
    // Step 1 done, then step 2 removing the oldest k segments (k = 0 ..
    // all): Open finishes the reset.
    for (size_t k = 0; k <= firsts.size(); ++k) {
      SCOPED_TRACE("next " + std::to_string(next) + ": marker, " + std::to_string(k) +
                   " old segment(s) removed");
      TempDir dir;
      copy_old(dir.path());
      WriteFileBytes(dir.Join(marker), "");
      for (size_t i = 0; i < k; ++i) fs::remove(dir.Join(SegmentName(firsts[i])));
      ExpectEmptyLogAt(dir.path(), options, next);
    }
    // Step 3: the new empty segment exists, the marker too.
    {
      SCOPED_TRACE("next " + std::to_string(next) + ": marker and new segment");
      TempDir dir;
      WriteFileBytes(dir.Join(marker), "");
      WriteFileBytes(dir.Join(new_segment), "");
      ExpectEmptyLogAt(dir.path(), options, next);
    }
    // Not a state this protocol writes, but one a different order of steps
    // (new segment first) would: marker + new segment + some old segments.
    // Still finished, not read as a log with a gap.
    {
      SCOPED_TRACE("next " + std::to_string(next) + ": marker, new segment, later old ones");
      TempDir dir;
      copy_old(dir.path());
      for (size_t i = 0; i < 2; ++i) fs::remove(dir.Join(SegmentName(firsts[i])));
      WriteFileBytes(dir.Join(marker), "");
      WriteFileBytes(dir.Join(new_segment), "");
      ExpectEmptyLogAt(dir.path(), options, next);
    }
    // Step 4 done: only the new segment.
    {
      SCOPED_TRACE("next " + std::to_string(next) + ": finished");
      TempDir dir;
      WriteFileBytes(dir.Join(new_segment), "");
      ExpectEmptyLogAt(dir.path(), options, next);
    }
    // The real Reset() ends in that same state.
    {
      SCOPED_TRACE("next " + std::to_string(next) + ": Reset()");
      TempDir dir;
      copy_old(dir.path());
      std::unique_ptr<SegmentedLog> log;
      ASSERT_TRUE(SegmentedLog::Open(dir.path(), options, &log, nullptr).ok());
      ASSERT_TRUE(log->Reset(next).ok());
      EXPECT_EQ(FileNames(dir.path()), std::vector<std::string>{new_segment});
      log.reset();
      ExpectEmptyLogAt(dir.path(), options, next);
    }
  }
}

TEST_F(SegmentedLogTest, TwoResetMarkersAreRefused) {
  Reopen();
  AppendAndSync(MakeEntries(1, 10));
  log_.reset();
  WriteFileBytes(dir_.Join(ResetMarkerName(5)), "");
  WriteFileBytes(dir_.Join(ResetMarkerName(50)), "");
  const std::vector<std::string> before = FileNames(dir_.path());
  std::unique_ptr<SegmentedLog> log;
  LogRecovery recovery;
  Status s = SegmentedLog::Open(dir_.path(), options_, &log, &recovery);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find(dir_.Join(ResetMarkerName(5))), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(dir_.Join(ResetMarkerName(50))), std::string::npos) << s.message();
  EXPECT_EQ(log, nullptr);
  EXPECT_TRUE(recovery.entries.empty());
  EXPECT_EQ(FileNames(dir_.path()), before) << "refusing must not change the directory";

  // A file that only looks like a marker is ignored.
  fs::remove(dir_.Join(ResetMarkerName(5)));
  fs::remove(dir_.Join(ResetMarkerName(50)));
  WriteFileBytes(dir_.Join("RESET-12"), "");
  Reopen();
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 10));
}

TEST(MemoryLogStoreTest, CompactResetAndFirstIndex) {
  MemoryLogStore store;
  EXPECT_EQ(store.FirstIndex(), 1u);
  EXPECT_EQ(store.LastIndex(), 0u);
  EXPECT_EQ(store.SizeBytes(), 0u);
  ASSERT_TRUE(store.Append(MakeEntries(1, 10)).ok());
  uint64_t bytes = 0;
  for (const Entry& e : MakeEntries(1, 10)) bytes += e.ByteSizeLong();
  EXPECT_EQ(store.SizeBytes(), bytes);

  ASSERT_TRUE(store.CompactPrefix(4).ok());
  EXPECT_EQ(store.FirstIndex(), 5u);
  EXPECT_EQ(store.LastIndex(), 10u);
  ExpectSameEntries(store.entries(), MakeEntries(5, 6));
  ASSERT_TRUE(store.CompactPrefix(2).ok());  // already gone
  EXPECT_EQ(store.FirstIndex(), 5u);
  EXPECT_FALSE(store.Append(MakeEntries(4, 2, 2)).ok());  // below the first index
  ASSERT_TRUE(store.Append(MakeEntries(8, 2, 2)).ok());   // suffix replacement
  std::vector<Entry> expected = MakeEntries(5, 3);
  for (const Entry& e : MakeEntries(8, 2, 2)) expected.push_back(e);
  ExpectSameEntries(store.entries(), expected);
  EXPECT_EQ(store.LastIndex(), 9u);

  // Compacting past the end empties it without moving LastIndex().
  ASSERT_TRUE(store.CompactPrefix(100).ok());
  EXPECT_TRUE(store.entries().empty());
  EXPECT_EQ(store.FirstIndex(), 10u);
  EXPECT_EQ(store.LastIndex(), 9u);
  EXPECT_EQ(store.SizeBytes(), 0u);
  ASSERT_TRUE(store.Append(MakeEntries(10, 2)).ok());

  ASSERT_TRUE(store.Reset(500).ok());
  EXPECT_EQ(store.FirstIndex(), 500u);
  EXPECT_EQ(store.LastIndex(), 499u);
  EXPECT_TRUE(store.entries().empty());
  EXPECT_FALSE(store.Append(MakeEntries(499, 1)).ok());
  EXPECT_FALSE(store.Append(MakeEntries(501, 1)).ok());
  ASSERT_TRUE(store.Append(MakeEntries(500, 3)).ok());
  ExpectSameEntries(store.entries(), MakeEntries(500, 3));
  ASSERT_TRUE(store.Reset(3).ok());
  EXPECT_EQ(store.FirstIndex(), 3u);
  EXPECT_EQ(store.LastIndex(), 2u);
  EXPECT_FALSE(store.Reset(0).ok());
  EXPECT_EQ(store.FirstIndex(), 3u);
}

TEST(MemoryLogStoreTest, AppendTruncateAndReject) {
  MemoryLogStore store;
  EXPECT_FALSE(store.Append(MakeEntries(2, 1)).ok());
  ASSERT_TRUE(store.Append(MakeEntries(1, 10)).ok());
  EXPECT_EQ(store.LastIndex(), 10u);
  EXPECT_FALSE(store.Append(MakeEntries(12, 1)).ok());
  std::vector<Entry> zero = {MakeEntry(0, 1)};
  EXPECT_FALSE(store.Append(zero).ok());
  ASSERT_TRUE(store.Append(MakeEntries(4, 2, 2)).ok());
  EXPECT_EQ(store.LastIndex(), 5u);
  std::vector<Entry> expected = MakeEntries(1, 3);
  for (const Entry& e : MakeEntries(4, 2, 2)) expected.push_back(e);
  ExpectSameEntries(store.entries(), expected);
  EXPECT_TRUE(store.Sync().ok());
}

}  // namespace
}  // namespace raftkv

namespace raftkv {
namespace {

// The metrics' fsync histogram: one report per Sync() that synced
// something, none for a Sync() with nothing to do.
TEST_F(SegmentedLogTest, SyncObserverSeesEverySyncThatReachedTheDisk) {
  struct Recorder : SyncObserver {
    void OnSync(std::chrono::nanoseconds elapsed) override {
      ++calls;
      if (elapsed.count() <= 0) ++non_positive;
    }
    int calls = 0;
    int non_positive = 0;
  } recorder;
  options_.max_segment_bytes = 200;  // a few entries per segment: new files, directory syncs
  Reopen();
  log_->set_sync_observer(&recorder);
  ASSERT_TRUE(log_->Sync().ok());
  EXPECT_EQ(recorder.calls, 0) << "nothing to sync";
  for (uint64_t i = 1; i <= 20; ++i) AppendAndSync({MakeEntry(i, 1)});
  EXPECT_EQ(recorder.calls, 20);
  EXPECT_EQ(recorder.non_positive, 0);
  ASSERT_TRUE(log_->Sync().ok());
  EXPECT_EQ(recorder.calls, 20);
  // Group commit: many appends, one sync, one report.
  ASSERT_TRUE(log_->Append(MakeEntries(21, 10)).ok());
  ASSERT_TRUE(log_->Sync().ok());
  EXPECT_EQ(recorder.calls, 21);
  log_->set_sync_observer(nullptr);
  AppendAndSync({MakeEntry(31, 1)});
  EXPECT_EQ(recorder.calls, 21);
}

}  // namespace
}  // namespace raftkv
