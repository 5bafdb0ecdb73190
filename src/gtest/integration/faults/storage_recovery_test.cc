// Integration tests of on-disk damage to a member's log: corruption in the
// middle is refused at start-up, a torn tail is cut off, and either way the
// member rejoins and catches up once its data is usable.
#include "gtest/common/segment_records.h"
#include "gtest/common/temp_dir.h"
#include "gtest/integration/integration_test_util.h"

namespace raftkv {
namespace integration {
namespace {

// The segment files of member i's log, in index order.
std::vector<std::string> SegmentFiles(ProcessCluster& cluster, int i) {
  return cluster.SegmentFiles(i);
}

uint32_t Fixed32(const std::string& b, size_t pos) {
  return static_cast<uint32_t>(static_cast<uint8_t>(b[pos])) |
         static_cast<uint32_t>(static_cast<uint8_t>(b[pos + 1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[pos + 2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[pos + 3])) << 24;
}

// A record of a segment file: crc32c:u32le length:u32le payload (an Entry).
struct Record {
  size_t offset;
  size_t length;  // payload bytes
  Entry entry;
};

// The records of a segment file, up to the preallocated zeros that may follow
// them.
std::vector<Record> ParseSegment(const std::string& bytes, std::string* error) {
  std::vector<Record> records;
  size_t end = 0;
  for (const testing_util::RecordSpan& span : testing_util::SplitSegmentRecords(bytes, &end)) {
    Record r{span.offset, span.length, Entry()};
    if (!r.entry.ParseFromArray(bytes.data() + span.offset + 8, static_cast<int>(span.length))) {
      *error = "record at offset " + std::to_string(span.offset) + " is not an Entry";
      return records;
    }
    records.push_back(std::move(r));
  }
  if (!testing_util::OnlyZerosFrom(bytes, end)) {
    *error = std::to_string(bytes.size() - end) + " bytes after the last record are not zeros";
  }
  return records;
}

// Writes `count` keys, checks member `m` catches up to the leader's commit
// index and serves every key of `expected` from its local state.
void ExpectCatchesUp(ProcessCluster& cluster, int m, KvMap expected) {
  std::string error;
  const uint64_t leader = cluster.WaitForLeader(10000, &error);
  ASSERT_NE(leader, 0u) << error;
  auto client = cluster.NewClient(10000, 1000);
  std::vector<std::string> errors;
  std::vector<std::pair<std::string, std::string>> more;
  for (int i = 0; i < 50; ++i)
    more.emplace_back("after-" + std::to_string(i), "a" + std::to_string(i));
  KvMap acked = PutAll(*client, more, 4, &errors);
  ASSERT_EQ(acked.size(), more.size()) << JoinLines(errors);
  expected.insert(acked.begin(), acked.end());
  const uint64_t commit = MustStatus(cluster, static_cast<int>(leader)).commit_index();
  StatusResponse st;
  EXPECT_TRUE(WaitForApplied(cluster, m, commit, 5000, &st))
      << "member " << m << " applied " << st.applied_index() << " of " << commit;
  auto local = cluster.NewClientFor(m);
  std::vector<std::string> problems = CheckAll(*local, expected, /*stale=*/true);
  EXPECT_TRUE(problems.empty()) << "stale reads on member " << m << ":\n" << JoinLines(problems);
}

// Puts the undamaged bytes back into `path`, restarts member `m` and checks it
// stays up and catches up with every write in `acked`.
void RestoreAndExpectRejoin(ProcessCluster& cluster, int m, const std::string& path,
                            const std::string& original, const KvMap& acked) {
  ASSERT_NO_FATAL_FAILURE(testing_util::WriteFileBytes(path, original));
  ASSERT_TRUE(cluster.Restart(m));
  std::this_thread::sleep_for(Millis(300));
  ASSERT_TRUE(cluster.IsRunning(m)) << cluster.ServerOutput(m);
  ASSERT_NO_FATAL_FAILURE(ExpectCatchesUp(cluster, m, acked));
}

std::vector<std::pair<std::string, std::string>> Pairs(const std::string& prefix, int count) {
  std::vector<std::pair<std::string, std::string>> kvs;
  for (int i = 0; i < count; ++i) {
    kvs.emplace_back(prefix + std::to_string(i), "value-of-" + prefix + std::to_string(i));
  }
  return kvs;
}

// Writes `count` keys named prefix<i> through the leader (all must be
// acknowledged), picks a follower and waits until it has applied them all.
void FillAndPickFollower(ProcessCluster& cluster, uint64_t leader, const std::string& prefix,
                         int count, int* follower, KvMap* acked) {
  *follower = OtherThan(cluster, static_cast<int>(leader));
  auto client = cluster.NewClient(10000, 1000);
  std::vector<std::string> errors;
  *acked = PutAll(*client, Pairs(prefix, count), 4, &errors);
  ASSERT_EQ(acked->size(), static_cast<size_t>(count)) << JoinLines(errors);
  ASSERT_TRUE(WaitForApplied(cluster, *follower,
                             MustStatus(cluster, static_cast<int>(leader)).commit_index(), 3000));
}

TEST_F(Integration, CorruptLogIsRefused) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, FastTimeoutFlags(), &leader));
  int f = 0;
  KvMap acked;
  ASSERT_NO_FATAL_FAILURE(FillAndPickFollower(cluster(), leader, "corrupt-", 200, &f, &acked));
  EXPECT_TRUE(cluster().Stop(f)) << "SIGTERM did not stop member " << f << " cleanly";

  // Flip one payload byte of a record in the middle of the (first) segment.
  const std::vector<std::string> segments = SegmentFiles(cluster(), f);
  ASSERT_FALSE(segments.empty()) << "no *.seg in " << cluster().DataDir(f) << "/log";
  const std::string path = segments.front();
  const std::string original = ReadFileOrEmpty(path);
  std::string parse_error;
  const std::vector<Record> records = ParseSegment(original, &parse_error);
  ASSERT_TRUE(parse_error.empty()) << path << ": " << parse_error;
  ASSERT_GE(records.size(), 100u) << path;
  const Record& victim = records[records.size() / 2];
  const size_t offset = victim.offset + 8 + victim.length / 2;
  std::cerr << "[ info     ] flipping byte " << offset << " of " << path << " (entry "
            << victim.entry.index() << " of " << records.size() << ")\n";
  std::string damaged = original;
  damaged[offset] = static_cast<char>(damaged[offset] ^ 0x5a);
  testing_util::WriteFileBytes(path, damaged);

  ASSERT_TRUE(cluster().Restart(f));
  int exit_code = 0;
  ASSERT_TRUE(cluster().WaitForExit(f, 10000, &exit_code))
      << "member " << f << " started on a corrupt log";
  EXPECT_NE(exit_code, 0);
  EXPECT_LT(exit_code, 128) << "it crashed instead of refusing the log";
  const std::string output = cluster().ServerOutput(f);
  EXPECT_NE(output.find("Corruption"), std::string::npos) << output;
  EXPECT_NE(output.find(path), std::string::npos) << "the message should name the file:\n"
                                                  << output;
  EXPECT_EQ(ReadFileOrEmpty(path), damaged) << "the refused log was modified";

  // Undo the damage: the member starts and catches up.
  ASSERT_NO_FATAL_FAILURE(RestoreAndExpectRejoin(cluster(), f, path, original, acked));
}

// A damaged length field in the middle of the log: the record it heads can
// no longer be delimited, but a hundred valid records follow it, so this is
// not a torn write (which can only hit what was written after the last
// fsync) and recovery must not cut those acknowledged entries off as a "torn
// tail".
TEST_F(Integration, CorruptLengthFieldIsRefused) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, FastTimeoutFlags(), &leader));
  int f = 0;
  KvMap acked;
  ASSERT_NO_FATAL_FAILURE(FillAndPickFollower(cluster(), leader, "length-", 200, &f, &acked));
  const uint64_t durable = MustStatus(cluster(), f).durable_index();
  EXPECT_TRUE(cluster().Stop(f));

  const std::vector<std::string> segments = SegmentFiles(cluster(), f);
  ASSERT_FALSE(segments.empty());
  const std::string path = segments.back();
  const std::string original = ReadFileOrEmpty(path);
  std::string parse_error;
  const std::vector<Record> records = ParseSegment(original, &parse_error);
  ASSERT_TRUE(parse_error.empty()) << path << ": " << parse_error;
  ASSERT_GE(records.size(), 100u);
  const Record& victim = records[records.size() / 2];
  std::string damaged = original;
  damaged[victim.offset + 7] =
      static_cast<char>(damaged[victim.offset + 7] ^ 0x10);  // length's high byte
  std::cerr << "[ info     ] length of entry " << victim.entry.index() << " (of " << records.size()
            << ") in " << path << " now " << Fixed32(damaged, victim.offset + 4) << "\n";
  testing_util::WriteFileBytes(path, damaged);

  ASSERT_TRUE(cluster().Restart(f));
  int exit_code = 0;
  const bool exited = cluster().WaitForExit(f, 3000, &exit_code);
  // What it recovered, from its log ("opened log in ...: N segment(s), last index I").
  const std::string log = cluster().LogText(f);
  const size_t opened = log.rfind("opened log in ");
  const std::string opened_line =
      opened == std::string::npos ? "<none>" : log.substr(opened, log.find('\n', opened) - opened);
  EXPECT_TRUE(exited) << "member " << f << " started on a log with a damaged length field "
                      << "in the middle; it recovered: " << opened_line << " (it had acknowledged "
                      << "entries up to " << durable << ")";
  if (exited) {
    EXPECT_NE(exit_code, 0);
    EXPECT_NE(cluster().ServerOutput(f).find("Corruption"), std::string::npos)
        << cluster().ServerOutput(f);
    EXPECT_EQ(ReadFileOrEmpty(path), damaged) << "the refused log was modified";
  } else {
    EXPECT_EQ(ReadFileOrEmpty(path).size(), original.size())
        << "recovery cut " << original.size() - victim.offset << " bytes ("
        << records.size() - records.size() / 2 << " records) off " << path;
    cluster().Kill(f);
  }

  // Repaired, it rejoins.
  ASSERT_NO_FATAL_FAILURE(RestoreAndExpectRejoin(cluster(), f, path, original, acked));
}

TEST_F(Integration, TornTailIsTruncated) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, FastTimeoutFlags(), &leader));
  int f = 0;
  KvMap acked;
  ASSERT_NO_FATAL_FAILURE(FillAndPickFollower(cluster(), leader, "torn-", 100, &f, &acked));
  const uint64_t durable_before = MustStatus(cluster(), f).durable_index();
  cluster().Kill(f);

  // A partial record right after the last one of the last segment, as a
  // crash in the middle of a write leaves it (over the segment's
  // preallocated zeros, if any): a header announcing 200 payload bytes, 37
  // of them.
  const std::vector<std::string> segments = SegmentFiles(cluster(), f);
  ASSERT_FALSE(segments.empty());
  const std::string path = segments.back();
  const std::string file = ReadFileOrEmpty(path);
  std::string parse_error;
  const std::vector<Record> records = ParseSegment(file, &parse_error);
  ASSERT_TRUE(parse_error.empty()) << path << ": " << parse_error;
  ASSERT_FALSE(records.empty());
  const std::string original = file.substr(0, records.back().offset + 8 + records.back().length);
  std::string torn("\x12\x34\x56\x78\xc8\x00\x00\x00", 8);  // crc, length 200
  for (int i = 0; i < 37; ++i) torn.push_back(static_cast<char>(0x80 + i));
  std::string damaged = original + torn;
  if (file.size() > damaged.size()) damaged += file.substr(damaged.size());  // the zeros after
  testing_util::WriteFileBytes(path, damaged);

  ASSERT_TRUE(cluster().Restart(f));
  StatusResponse st;
  ASSERT_TRUE(WaitUntil([&] { return cluster().StatusOf(f, &st, 500).ok(); }, 5000))
      << "member " << f << " did not start with a torn tail:\n"
      << cluster().ServerOutput(f);
  EXPECT_GE(st.last_log_index(), durable_before) << "recovery dropped valid records";
  // The warning is in its glog log (WARNING lines start with 'W').
  const std::string log = cluster().LogText(f);
  const size_t at = log.find("torn tail");
  ASSERT_NE(at, std::string::npos) << "no warning about the torn tail in the log of member " << f;
  const size_t line_start = log.rfind('\n', at);
  const char severity = log[line_start == std::string::npos ? 0 : line_start + 1];
  EXPECT_TRUE(severity == 'W' || severity == 'E')
      << "not logged as a warning: " << log.substr(line_start + 1, at - line_start + 20);
  const size_t cut = damaged.size() - original.size();  // the torn record and any zeros after it
  EXPECT_NE(log.find("truncated " + std::to_string(cut) + " bytes"), std::string::npos)
      << "expected it to report cutting " << cut << " bytes";
  // The garbage is gone from the file: it starts with the original records.
  const std::string now = ReadFileOrEmpty(path);
  EXPECT_EQ(now.substr(0, original.size()), original);
  EXPECT_EQ(now.find(torn), std::string::npos) << "the torn record is still in " << path;

  ASSERT_NO_FATAL_FAILURE(ExpectCatchesUp(cluster(), f, acked));
  // A second restart finds a clean log.
  cluster().Kill(f);
  ASSERT_TRUE(cluster().Restart(f));
  ASSERT_TRUE(WaitUntil([&] { return cluster().StatusOf(f, &st, 500).ok(); }, 5000));
  EXPECT_TRUE(cluster().IsRunning(f));
}

}  // namespace
}  // namespace integration
}  // namespace raftkv
