// A store that refuses writes (a full disk under RocksDB): the state machine
// holds the apply pass until the store takes it again, never crashes and
// never skips it; a stop ends the wait with nothing half-applied.
#include <atomic>
#include <chrono>
#include <deque>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "gtest/common/full_disk.h"
#include "gtest/common/temp_dir.h"
#include "gtest/kv/kept_store.h"
#include "gtest/kv/store_options.h"
#include "gtest/kv/txn_ops.h"
#include "kv/kv_state_machine.h"
#include "storage/memory_backend.h"
#ifdef RAFTKV_HAVE_ROCKSDB
#include "storage/rocksdb_backend.h"
#endif

namespace raftkv {
namespace {

Entry PutEntry(uint64_t index, const std::string& key, const std::string& value) {
  Command command;
  command.set_op(Command::PUT);
  command.set_key(key);
  command.set_value(value);
  return testing_txn::CommandAt(index, command);
}

// A kept memory store whose writes fail (IOError, or Corruption) while told
// to; Resume() is counted.
class RefusingStore final : public testing_kv::KeptMemoryStore {
 public:
  using KeptMemoryStore::KeptMemoryStore;
  Status Write(const BackendBatch& batch) override {
    if (!refuse) return KeptMemoryStore::Write(batch);
    return corrupt ? Status::Corruption("bad block") : Status::IOError("write: No space left on device");
  }
  Status Resume() override {
    ++resumes;
    return Status::OK();
  }

  std::atomic<bool> refuse{false};
  std::atomic<bool> corrupt{false};
  std::atomic<int> resumes{0};
};

bool WaitFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

class StoreStallTest : public testing::Test {
 protected:
  void SetUp() override {
    mem_ = std::make_shared<MemoryBackend>();
    auto store = std::make_unique<RefusingStore>(mem_);
    store_ = store.get();
    ASSERT_TRUE(KvStateMachine::Open(std::move(store), &sm_).ok());
  }

  // Whether the store itself (not the state machine) holds `key`.
  bool StoreHas(const std::string& key) {
    std::unique_ptr<KvStateMachine> reader;
    auto kept = std::make_unique<RefusingStore>(mem_);
    if (!KvStateMachine::Open(std::move(kept), &reader).ok()) return false;
    return reader->Get(key).has_value();
  }

  std::shared_ptr<MemoryBackend> mem_;
  RefusingStore* store_ = nullptr;
  std::unique_ptr<KvStateMachine> sm_;
};

TEST_F(StoreStallTest, ARefusedWriteHoldsTheApplyUntilTheStoreTakesIt) {
  std::vector<ApplyResult> results;
  ASSERT_TRUE(sm_->ApplyAll({PutEntry(1, "a", "1")}, &results));
  store_->refuse = true;
  std::atomic<bool> done{false};
  bool applied = false;
  std::thread apply([&] {
    applied = sm_->ApplyAll({PutEntry(2, "b", "2"), PutEntry(3, "c", "3")}, &results);
    done = true;
  });
  ASSERT_TRUE(WaitFor([&] { return sm_->StoreWriteErrors() >= 3; }));
  EXPECT_TRUE(sm_->StoreStalled());
  EXPECT_FALSE(done) << "the apply went on past a write the store refused";
  EXPECT_GE(store_->resumes.load(), 2) << "the store is resumed before each retry";
  store_->refuse = false;
  apply.join();
  EXPECT_TRUE(applied);
  EXPECT_FALSE(sm_->StoreStalled());
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].ok && results[1].ok);
  EXPECT_EQ(sm_->AppliedIndex(), 3u);
  EXPECT_EQ(sm_->Get("b").value_or(""), "2");
  EXPECT_TRUE(StoreHas("b") && StoreHas("c")) << "the held pass was written whole";
}

TEST_F(StoreStallTest, StoppingEndsTheWaitAndNothingMoreIsApplied) {
  std::vector<ApplyResult> results;
  ASSERT_TRUE(sm_->ApplyAll({PutEntry(1, "a", "1")}, &results));
  store_->refuse = true;
  bool applied = true;
  std::thread apply([&] { applied = sm_->ApplyAll({PutEntry(2, "b", "2")}, &results); });
  ASSERT_TRUE(WaitFor([&] { return sm_->StoreStalled(); }));
  sm_->StopRetrying();
  apply.join();
  EXPECT_FALSE(applied);
  EXPECT_FALSE(sm_->StoreStalled());
  store_->refuse = false;
  // The state in memory is ahead of the store: nothing is written after it.
  EXPECT_FALSE(sm_->ApplyAll({PutEntry(3, "c", "3")}, &results));
  EXPECT_TRUE(StoreHas("a"));
  EXPECT_FALSE(StoreHas("b")) << "a pass the store refused appeared in it";
  EXPECT_FALSE(StoreHas("c"));
  // A stop before any wait ends the next one at once.
  EXPECT_FALSE(sm_->Apply(PutEntry(4, "d", "4")).ok);
}

TEST_F(StoreStallTest, AnErrorOtherThanIoIsFatal) {
  store_->refuse = true;
  store_->corrupt = true;
  std::vector<ApplyResult> results;
  EXPECT_DEATH(sm_->ApplyAll({PutEntry(1, "a", "1")}, &results), "writing the key-value store failed");
}

#ifdef RAFTKV_HAVE_ROCKSDB
// RocksDB on a full disk: a flush fails (ENOSPC), RocksDB stops taking
// writes, the apply waits; once the disk has room it resumes, and what was
// applied is in the store and survives a reopen.
TEST(StoreStallRocksDbTest, AFlushOnAFullDiskHoldsTheApplyUntilThereIsRoom) {
  testing_util::TempDir dir("stall");
  const std::string path = dir.path() + "/kv";
  testing_util::FullDisk disk;
  disk.only_under = path;
  {
    testing_util::ScopedInterposer interposer(&disk);
    std::unique_ptr<RocksDbBackend> db;
    ASSERT_TRUE(RocksDbBackend::Open(path, testing_kv::StoreOptions(), &db).ok());
    std::unique_ptr<KvStateMachine> sm;
    ASSERT_TRUE(KvStateMachine::Open(std::move(db), &sm).ok());
    std::vector<ApplyResult> results;
    ASSERT_TRUE(sm->ApplyAll({PutEntry(1, "a", std::string(4096, 'a'))}, &results));
    disk.full = true;
    disk.refuse_creates = true;
    EXPECT_FALSE(sm->FlushStore().ok()) << "a flush onto a full disk succeeded";
    std::atomic<bool> done{false};
    bool applied = false;
    std::thread apply([&] {
      applied = sm->ApplyAll({PutEntry(2, "b", "2")}, &results);
      done = true;
    });
    ASSERT_TRUE(WaitFor([&] { return sm->StoreWriteErrors() >= 2; }));
    EXPECT_TRUE(sm->StoreStalled());
    EXPECT_FALSE(done);
    disk.full = false;
    apply.join();
    EXPECT_TRUE(applied);
    EXPECT_FALSE(sm->StoreStalled());
    EXPECT_EQ(sm->Get("b").value_or(""), "2");
    ASSERT_TRUE(sm->FlushStore().ok());
  }
  // RocksDB's informational log lost the lines the full disk refused, and
  // said so once it had room (storage/rocksdb_info_log.h).
  std::ifstream log(path + "/LOG");
  const std::string log_text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(log_text.find("lines of this log were dropped: the disk refused them"), std::string::npos);
  std::unique_ptr<RocksDbBackend> db;
  ASSERT_TRUE(RocksDbBackend::Open(path, testing_kv::StoreOptions(), &db).ok());
  std::unique_ptr<KvStateMachine> reopened;
  ASSERT_TRUE(KvStateMachine::Open(std::move(db), &reopened).ok());
  EXPECT_EQ(reopened->AppliedIndex(), 2u);
  EXPECT_EQ(reopened->Get("a").value_or(""), std::string(4096, 'a'));
  EXPECT_EQ(reopened->Get("b").value_or(""), "2");
}
#endif

}  // namespace
}  // namespace raftkv
