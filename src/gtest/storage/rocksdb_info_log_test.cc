// Tests of RocksDbInfoLog (storage/rocksdb_info_log.h): RocksDB's LOG file,
// written so that a disk that refuses a line costs that line and nothing more.
#ifdef RAFTKV_HAVE_ROCKSDB

#include "storage/rocksdb_info_log.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "gtest/common/full_disk.h"
#include "gtest/common/temp_dir.h"
#include "storage/rocksdb_backend.h"

namespace raftkv {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

void LogLine(const std::shared_ptr<RocksDbInfoLog>& log, const std::string& text) {
  rocksdb::Log(rocksdb::InfoLogLevel::INFO_LEVEL, log, "%s", text.c_str());
}

TEST(RocksDbInfoLogTest, WritesLinesAndKeepsThePreviousRunsLogAsLogOld) {
  testing_util::TempDir dir("infolog");
  {
    std::shared_ptr<RocksDbInfoLog> log;
    ASSERT_TRUE(RocksDbInfoLog::Open(dir.path(), RocksDbInfoLog::kDefaultMaxBytes, &log).ok());
    LogLine(log, "first run");
    rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, log, "a warning %d", 7);
  }
  std::shared_ptr<RocksDbInfoLog> log;
  ASSERT_TRUE(RocksDbInfoLog::Open(dir.path(), RocksDbInfoLog::kDefaultMaxBytes, &log).ok());
  LogLine(log, "second run");
  const std::string old_log = ReadFile(dir.path() + "/LOG.old");
  EXPECT_NE(old_log.find("first run\n"), std::string::npos) << old_log;
  EXPECT_NE(old_log.find("[WARN] a warning 7\n"), std::string::npos) << old_log;
  const std::string current = ReadFile(dir.path() + "/LOG");
  EXPECT_NE(current.find("second run\n"), std::string::npos) << current;
  EXPECT_EQ(current.find("first run"), std::string::npos) << current;
}

TEST(RocksDbInfoLogTest, ALineTheDiskRefusesIsDroppedCountedAndReportedOnceThereIsRoom) {
  testing_util::TempDir dir("infolog");
  testing_util::FullDisk disk;
  disk.only_under = dir.path();
  testing_util::ScopedInterposer interposer(&disk);
  std::shared_ptr<RocksDbInfoLog> log;
  ASSERT_TRUE(RocksDbInfoLog::Open(dir.path(), RocksDbInfoLog::kDefaultMaxBytes, &log).ok());
  LogLine(log, "before");
  disk.full = true;
  LogLine(log, "refused 1");
  LogLine(log, "refused 2");
  EXPECT_EQ(log->dropped_lines(), 2u);
  EXPECT_GE(disk.refused.load(), 2);
  disk.full = false;
  LogLine(log, "after");
  LogLine(log, "later");
  EXPECT_EQ(log->dropped_lines(), 2u);
  const std::string text = ReadFile(dir.path() + "/LOG");
  EXPECT_EQ(text.find("refused 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("refused 2"), std::string::npos) << text;
  const size_t before = text.find("before\n");
  const size_t note = text.find("2 lines of this log were dropped: the disk refused them\n");
  const size_t after = text.find("after\n");
  const size_t later = text.find("later\n");
  ASSERT_NE(before, std::string::npos) << text;
  ASSERT_NE(note, std::string::npos) << text;
  ASSERT_NE(after, std::string::npos) << text;
  ASSERT_NE(later, std::string::npos) << text;
  EXPECT_LT(before, note);
  EXPECT_LT(note, after);
  EXPECT_LT(after, later);
  EXPECT_EQ(text.find("dropped", after), std::string::npos) << "the loss is reported once";
}

TEST(RocksDbInfoLogTest, PastItsBoundTheLogMovesToLogOld) {
  testing_util::TempDir dir("infolog");
  constexpr uint64_t kMax = 1000;
  std::shared_ptr<RocksDbInfoLog> log;
  ASSERT_TRUE(RocksDbInfoLog::Open(dir.path(), kMax, &log).ok());
  for (int i = 0; i < 100; ++i) LogLine(log, "line " + std::to_string(i) + std::string(20, '.'));
  EXPECT_LE(fs::file_size(dir.path() + "/LOG"), kMax);
  EXPECT_LE(fs::file_size(dir.path() + "/LOG.old"), kMax);
  EXPECT_GT(fs::file_size(dir.path() + "/LOG.old"), kMax / 2);
  EXPECT_NE(ReadFile(dir.path() + "/LOG").find("line 99."), std::string::npos);
}

TEST(RocksDbInfoLogTest, ALongMessageIsWrittenWhole) {
  testing_util::TempDir dir("infolog");
  std::shared_ptr<RocksDbInfoLog> log;
  ASSERT_TRUE(RocksDbInfoLog::Open(dir.path(), RocksDbInfoLog::kDefaultMaxBytes, &log).ok());
  const std::string long_text(5000, 'x');
  LogLine(log, long_text + "|end");
  EXPECT_NE(ReadFile(dir.path() + "/LOG").find(long_text + "|end\n"), std::string::npos);
}

TEST(RocksDbInfoLogTest, TheStoreWritesItsLogThroughIt) {
  testing_util::TempDir dir("infolog");
  const std::string path = dir.path() + "/kv";
  for (int run = 0; run < 2; ++run) {
    std::unique_ptr<RocksDbBackend> db;
    ASSERT_TRUE(RocksDbBackend::Open(path, RocksDbBackend::Options(), &db).ok());
  }
  EXPECT_NE(ReadFile(path + "/LOG").find("RocksDB version"), std::string::npos);
  EXPECT_NE(ReadFile(path + "/LOG.old").find("RocksDB version"), std::string::npos);
  // RocksDB's own log would have renamed the first run's LOG to LOG.old.<time>.
  for (const auto& entry : fs::directory_iterator(path)) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name.rfind("LOG.old.", 0) != 0) << name;
  }
}

}  // namespace
}  // namespace raftkv

#endif  // RAFTKV_HAVE_ROCKSDB
