// Tests of RocksDbStoreDir (storage/rocksdb_store_dir.h): which store a
// data directory opens, the install's commit point, and what is removed.
#ifdef RAFTKV_HAVE_ROCKSDB

#include "storage/rocksdb_store_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "gtest/common/temp_dir.h"

namespace raftkv {
namespace {

namespace fs = std::filesystem;

std::string ReadCurrent(const std::string& dir) {
  std::ifstream in(dir + "/KV_CURRENT");
  std::string line;
  std::getline(in, line);
  return line;
}

void Put(KvBackend* backend, const std::string& key, const std::string& value) {
  BackendBatch batch;
  batch.Put(key, value);
  ASSERT_TRUE(backend->Write(batch).ok());
}

std::string Get(const KvBackend& backend, const std::string& key) {
  std::string value;
  bool found = false;
  EXPECT_TRUE(backend.View()->Get(key, &value, &found).ok());
  return found ? value : "<absent>";
}

TEST(RocksDbStoreDirTest, ANewDirectoryGetsAnEmptyCurrentStore) {
  testing_util::TempDir tmp("storedir");
  std::unique_ptr<RocksDbStoreDir> dir;
  std::unique_ptr<KvBackend> current;
  ASSERT_TRUE(RocksDbStoreDir::Open(tmp.path(), &dir, &current).ok());
  EXPECT_EQ(dir->current(), "kv-0-0");
  EXPECT_EQ(ReadCurrent(tmp.path()), "kv-0-0");
  ASSERT_NO_FATAL_FAILURE(Put(current.get(), "a", "1"));
  current.reset();
  dir.reset();
  // Reopened: the same store, with what it flushed (closing flushes).
  ASSERT_TRUE(RocksDbStoreDir::Open(tmp.path(), &dir, &current).ok());
  EXPECT_EQ(Get(*current, "a"), "1");
}

TEST(RocksDbStoreDirTest, CommitSwitchesTheStoreARestartOpensAndTheOldOneGoes) {
  testing_util::TempDir tmp("storedir");
  std::unique_ptr<RocksDbStoreDir> dir;
  std::unique_ptr<KvBackend> old_store;
  ASSERT_TRUE(RocksDbStoreDir::Open(tmp.path(), &dir, &old_store).ok());
  ASSERT_NO_FATAL_FAILURE(Put(old_store.get(), "k", "old"));
  std::unique_ptr<KvBackend> fresh;
  ASSERT_TRUE(dir->Create(20, 3, &fresh).ok());
  EXPECT_TRUE(fs::is_directory(tmp.path() + "/kv-20-3"));
  ASSERT_NO_FATAL_FAILURE(Put(fresh.get(), "k", "new"));
  // Before the commit a restart would still open the old store.
  EXPECT_EQ(ReadCurrent(tmp.path()), "kv-0-0");
  ASSERT_TRUE(fresh->Flush().ok());
  ASSERT_TRUE(dir->Commit(20, 3).ok());
  EXPECT_EQ(ReadCurrent(tmp.path()), "kv-20-3");
  // The old store is still open (a reader may hold it): kept until closed.
  const auto view = old_store->View();
  old_store.reset();
  dir->RemoveStale();
  EXPECT_TRUE(fs::exists(tmp.path() + "/kv-0-0"));
  std::string value;
  bool found = false;
  ASSERT_TRUE(view->Get("k", &value, &found).ok());
  EXPECT_EQ(value, "old");
}

TEST(RocksDbStoreDirTest, ClosedReplacedStoresAreRemoved) {
  testing_util::TempDir tmp("storedir");
  std::unique_ptr<RocksDbStoreDir> dir;
  std::unique_ptr<KvBackend> old_store;
  ASSERT_TRUE(RocksDbStoreDir::Open(tmp.path(), &dir, &old_store).ok());
  std::unique_ptr<KvBackend> fresh;
  ASSERT_TRUE(dir->Create(7, 2, &fresh).ok());
  ASSERT_TRUE(dir->Commit(7, 2).ok());
  old_store.reset();
  dir->RemoveStale();
  EXPECT_FALSE(fs::exists(tmp.path() + "/kv-0-0"));
  EXPECT_TRUE(fs::exists(tmp.path() + "/kv-7-2"));
  // The current store is never removed, nor recreated over.
  std::unique_ptr<KvBackend> again;
  Status s = dir->Create(7, 2, &again);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
}

TEST(RocksDbStoreDirTest, AStoreACrashLeftHalfBuiltIsRemovedAtOpen) {
  testing_util::TempDir tmp("storedir");
  {
    std::unique_ptr<RocksDbStoreDir> dir;
    std::unique_ptr<KvBackend> current, half;
    ASSERT_TRUE(RocksDbStoreDir::Open(tmp.path(), &dir, &current).ok());
    ASSERT_NO_FATAL_FAILURE(Put(current.get(), "k", "kept"));
    ASSERT_TRUE(dir->Create(50, 4, &half).ok());  // never committed
    ASSERT_NO_FATAL_FAILURE(Put(half.get(), "k", "half"));
  }
  std::unique_ptr<RocksDbStoreDir> dir;
  std::unique_ptr<KvBackend> current;
  ASSERT_TRUE(RocksDbStoreDir::Open(tmp.path(), &dir, &current).ok());
  EXPECT_EQ(dir->current(), "kv-0-0");
  EXPECT_EQ(Get(*current, "k"), "kept");
  EXPECT_FALSE(fs::exists(tmp.path() + "/kv-50-4"));
}

TEST(RocksDbStoreDirTest, ABadCurrentFileIsRefusedNamingIt) {
  testing_util::TempDir tmp("storedir");
  const std::string path = tmp.path() + "/KV_CURRENT";
  for (const std::string& contents : {std::string("kv-9-9\n"), std::string("../etc\n"),
                                      std::string("kv-1-x\n"), std::string(100, 'k')}) {
    std::ofstream(path, std::ios::trunc) << contents;
    std::unique_ptr<RocksDbStoreDir> dir;
    std::unique_ptr<KvBackend> current;
    Status s = RocksDbStoreDir::Open(tmp.path(), &dir, &current);
    EXPECT_TRUE(s.IsCorruption()) << contents << ": " << s.ToString();
    EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
    EXPECT_EQ(current, nullptr);
  }
}

}  // namespace
}  // namespace raftkv

#endif  // RAFTKV_HAVE_ROCKSDB
