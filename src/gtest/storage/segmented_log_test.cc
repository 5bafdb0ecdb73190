#include "storage/log_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "gtest/common/temp_dir.h"
#include "storage/crc32c.h"

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
  EXPECT_EQ(ReadFileBytes(paths[0]), RecordsBytes(all));
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
    const std::string bytes = ReadFileBytes(path);
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
  EXPECT_EQ(ReadFileBytes(SegmentPaths(dir_.path()).at(0)), RecordsBytes(MakeEntries(1, 2, 4)));
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
  std::string bytes = ReadFileBytes(path);
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
    std::string bytes = ReadFileBytes(path);
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
  const std::string original = ReadFileBytes(first);

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

  // A log that does not start at index 1.
  fs::remove(dir_.Join(SegmentName(1)));
  ExpectOpenCorruption(dir_.Join(SegmentName(4)));

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
  const std::string bytes = ReadFileBytes(path);
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
  const std::string bytes = ReadFileBytes(path);
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

TEST_F(SegmentedLogTest, ZeroFilledTailIsTornTail) {
  const std::string path = WriteLog(dir_.path(), options_, 10);
  const std::string bytes = ReadFileBytes(path);
  WriteFileBytes(path, bytes + std::string(4096, '\0'));
  Reopen();
  EXPECT_TRUE(recovery_.truncated_tail);
  ExpectSameEntries(recovery_.entries, MakeEntries(1, 10));
  EXPECT_EQ(ReadFileBytes(path), bytes);

  // But garbage after the zeros is not.
  log_.reset();
  WriteFileBytes(path, bytes + std::string(100, '\0') + "x");
  ExpectOpenCorruption(path);
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
