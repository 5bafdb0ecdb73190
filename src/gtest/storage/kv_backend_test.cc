// The KvBackend conformance suite (storage/kv_backend.h), run over every
// engine built: memory always, RocksDB with RAFTKV_HAVE_ROCKSDB.
#include <algorithm>
#include <cstdio>
#include <atomic>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gtest/common/engines.h"
#include "gtest/common/temp_dir.h"
#include "storage/file_util.h"
#include "storage/kv_backend.h"
#include "storage/memory_backend.h"
#include "storage/overlay_view.h"
#ifdef RAFTKV_HAVE_ROCKSDB
#include "storage/rocksdb_backend.h"
#endif

namespace raftkv {
namespace {

using testing_util::TempDir;
using Map = std::map<std::string, std::string>;

// Keys with NUL and 0xff bytes, and keys that are prefixes of each other.
const std::vector<std::string>& EdgeKeys() {
  static const std::vector<std::string> keys = {
      std::string(),        std::string(1, '\0'),     std::string(2, '\0'),
      "a",                  std::string("a\0", 2),    std::string("a\0b", 3),
      "a\x01",              "a\xff",                  "a\xff\xff",
      "ab",                 "b",                      "\x7f",
      "\x80",               "\xff",                   "\xff\xff",
      std::string("\xff\0", 2)};
  return keys;
}

class KvBackendTest : public testing::TestWithParam<std::string> {
 protected:
  // Opens the engine over `dir` (reopening what is there, for a persistent
  // engine); flush_on_close=false drops unflushed writes at close, as a
  // crash would.
  std::unique_ptr<KvBackend> Open(const std::string& dir, bool flush_on_close = true) {
    if (GetParam() == "memory") return std::make_unique<MemoryBackend>();
#ifdef RAFTKV_HAVE_ROCKSDB
    std::unique_ptr<RocksDbBackend> db;
    RocksDbBackend::Options options;
    options.flush_on_close = flush_on_close;
    const Status s = RocksDbBackend::Open(dir, options, &db);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return db;
#else
    return nullptr;
#endif
  }
  // Opens the checkpoint written to `dir`.
  std::unique_ptr<KvBackend> OpenCheckpoint(const std::string& dir) {
    if (GetParam() == "memory") {
      auto memory = std::make_unique<MemoryBackend>();
      const Status s = memory->LoadCheckpoint(dir);
      EXPECT_TRUE(s.ok()) << s.ToString();
      return memory;
    }
    return Open(dir);
  }

  void SetUp() override {
    backend_ = Open(dir_.Join("db"));
    ASSERT_NE(backend_, nullptr);
  }

  void Write(BackendBatch* batch) {
    const Status s = backend_->Write(*batch);
    ASSERT_TRUE(s.ok()) << s.ToString();
    batch->Clear();
  }
  void Put(const std::string& k, const std::string& v) {
    BackendBatch b;
    b.Put(k, v);
    Write(&b);
  }

  TempDir dir_{"kv_backend"};
  std::unique_ptr<KvBackend> backend_;
};

std::string GetOr(const BackendView& view, const std::string& key, const std::string& absent) {
  std::string value;
  bool found = false;
  const Status s = view.Get(key, &value, &found);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return found ? value : absent;
}

// Everything in [lower, upper) of `view`, seeking to `from`.
Map Scan(const BackendView& view, const std::string& lower, const std::string& upper,
         const std::string& from = "") {
  Map out;
  std::unique_ptr<BackendIterator> it = view.NewIterator(lower, upper);
  std::string last;
  for (it->Seek(from); it->Valid(); it->Next()) {
    const std::string key(it->key());
    EXPECT_TRUE(out.empty() || last < key) << "out of order after " << testing::PrintToString(last);
    out[key] = std::string(it->value());
    last = key;
  }
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return out;
}

Map Slice(const Map& m, const std::string& lower, const std::string& upper) {
  Map out;
  for (auto it = m.lower_bound(lower); it != m.end() && (upper.empty() || it->first < upper); ++it) {
    out.insert(*it);
  }
  return out;
}

TEST_P(KvBackendTest, PutGetDeleteDeleteRange) {
  BackendBatch b;
  b.Put("a", "1");
  b.Put("b", "2");
  b.Put(std::string("b\0", 2), "3");
  b.Put("c", "4");
  EXPECT_EQ(b.bytes(), 9u);
  Write(&b);
  auto view = backend_->View();
  EXPECT_EQ(GetOr(*view, "a", "-"), "1");
  EXPECT_EQ(GetOr(*view, "bb", "-"), "-");
  b.Put("a", "one");
  b.Delete("c");
  b.Delete("never");
  Write(&b);
  EXPECT_EQ(GetOr(*backend_->View(), "a", "-"), "one");
  EXPECT_EQ(GetOr(*backend_->View(), "c", "-"), "-");
  b.DeleteRange("b", "c");
  Write(&b);
  EXPECT_EQ(Scan(*backend_->View(), "", ""), (Map{{"a", "one"}}));
}

TEST_P(KvBackendTest, IteratorOrderAndBoundsWithEdgeKeys) {
  Map all;
  BackendBatch b;
  for (const std::string& k : EdgeKeys()) {
    b.Put(k, "v" + k);
    all[k] = "v" + k;
  }
  Write(&b);
  auto view = backend_->View();
  ASSERT_EQ(Scan(*view, "", ""), all);
  for (const std::string& lower : EdgeKeys()) {
    for (const std::string& upper : EdgeKeys()) {
      if (!upper.empty() && upper <= lower) continue;
      EXPECT_EQ(Scan(*view, lower, upper), Slice(all, lower, upper))
          << testing::PrintToString(lower) << " " << testing::PrintToString(upper);
      // A seek inside the bounds starts there; below them, at the lower bound.
      EXPECT_EQ(Scan(*view, lower, upper, "a\xff"),
                Slice(all, std::max(lower, std::string("a\xff")), upper));
    }
  }
}

TEST_P(KvBackendTest, ViewDoesNotSeeLaterWrites) {
  Put("k1", "old");
  Put("k2", "old");
  Put("k3", "old");
  auto before = backend_->View();
  BackendBatch b;
  b.Put("k1", "new");
  b.Delete("k2");
  b.DeleteRange("k3", "k4");
  b.Put("k5", "new");
  Write(&b);
  EXPECT_EQ(Scan(*before, "", ""), (Map{{"k1", "old"}, {"k2", "old"}, {"k3", "old"}}));
  EXPECT_EQ(GetOr(*before, "k5", "-"), "-");
  EXPECT_EQ(Scan(*backend_->View(), "", ""), (Map{{"k1", "new"}, {"k5", "new"}}));
}

TEST_P(KvBackendTest, LaterChangeInABatchWins) {
  BackendBatch b;
  b.Put("x", "1");
  b.Delete("x");
  b.Put("y", "1");
  b.DeleteRange("y", "z");
  b.Put("y", "2");
  Write(&b);
  EXPECT_EQ(Scan(*backend_->View(), "", ""), (Map{{"y", "2"}}));
}

// A reader never sees part of a batch: every view has all keys equal.
TEST_P(KvBackendTest, ViewsSeeWholeBatches) {
  constexpr int kKeys = 20;
  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::thread reader([&] {
    while (!done.load()) {
      const Map m = Scan(*backend_->View(), "", "");
      if (m.empty()) continue;
      if (m.size() != kKeys || m.begin()->second != m.rbegin()->second) ++torn;
    }
  });
  for (int i = 0; i < 300; ++i) {
    BackendBatch b;
    if (i % 3 == 2) b.DeleteRange("k", "l");
    for (int k = 0; k < kKeys; ++k) b.Put("k" + std::to_string(k), std::to_string(i));
    Write(&b);
  }
  done = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0);
}

TEST_P(KvBackendTest, ViewAndIteratorOutliveTheBackend) {
  Put("a", "1");
  auto view = backend_->View();
  auto it = view->NewIterator("", "");
  backend_.reset();
  EXPECT_EQ(GetOr(*view, "a", "-"), "1");
  it->Seek("");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->value(), "1");
}

TEST_P(KvBackendTest, CheckpointHoldsTheStateAtItsTime) {
  BackendBatch b;
  for (const std::string& k : EdgeKeys()) b.Put(k, "v" + k);
  Write(&b);
  const Map expected = Scan(*backend_->View(), "", "");
  CheckpointManifest manifest;
  const std::string ckpt = dir_.Join("ckpt");
  Status s = backend_->Checkpoint(ckpt, &manifest);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(manifest.dir, ckpt);
  ASSERT_FALSE(manifest.files.empty());
  for (const auto& f : manifest.files) {
    EXPECT_EQ(testing_util::ReadFileBytes(file::JoinPath(ckpt, f.name)).size(), f.size) << f.name;
  }
  Put("after", "x");
  EXPECT_FALSE(backend_->Checkpoint(ckpt, &manifest).ok()) << "the directory exists";
  std::unique_ptr<KvBackend> copy = OpenCheckpoint(ckpt);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(Scan(*copy->View(), "", ""), expected);
}

TEST_P(KvBackendTest, StatsCountTheData) {
  const BackendStats empty = backend_->Stats();
  Put("key", std::string(10000, 'v'));
  ASSERT_TRUE(backend_->Flush().ok());
  const BackendStats stats = backend_->Stats();
  EXPECT_GT(stats.live_bytes + stats.memtable_bytes, empty.live_bytes + empty.memtable_bytes);
  EXPECT_TRUE(backend_->BackgroundError().ok());
}

// The WAL is off: a reopen keeps what was flushed (or flushed at close) and
// loses exactly the whole batches written after the last flush.
TEST_P(KvBackendTest, ReopenKeepsFlushedBatchesOnly) {
  if (!backend_->persistent()) GTEST_SKIP() << "not persistent";
  backend_.reset();
  backend_ = Open(dir_.Join("db"), /*flush_on_close=*/false);
  BackendBatch b;
  b.Put("flushed1", "1");
  b.Put("flushed2", "2");
  Write(&b);
  ASSERT_TRUE(backend_->Flush().ok());
  b.Put("lost1", "1");
  b.Delete("flushed1");
  Write(&b);
  EXPECT_EQ(Scan(*backend_->View(), "", ""), (Map{{"flushed2", "2"}, {"lost1", "1"}}));
  backend_.reset();  // no flush: a crash
  backend_ = Open(dir_.Join("db"));
  EXPECT_EQ(Scan(*backend_->View(), "", ""), (Map{{"flushed1", "1"}, {"flushed2", "2"}}));
  Put("closed", "1");
  backend_.reset();  // a clean close flushes
  backend_ = Open(dir_.Join("db"));
  EXPECT_EQ(Scan(*backend_->View(), "", ""),
            (Map{{"closed", "1"}, {"flushed1", "1"}, {"flushed2", "2"}}));
}

// Pending batches laid over a view read as if they had been written, with
// iterators made while others are still in use; drained and written, they
// leave the same state.
TEST_P(KvBackendTest, AnOverlayReadsLikeItsBatchesWritten) {
  std::vector<std::string> keys = EdgeKeys();
  for (int i = 0; i < 8; ++i) keys.push_back("k" + std::to_string(i));
  std::mt19937 rng(7);
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  Map model;
  BackendBatch seed;
  for (size_t i = 0; i < keys.size(); i += 2) {
    seed.Put(keys[i], "base" + std::to_string(i));
    model[keys[i]] = "base" + std::to_string(i);
  }
  Write(&seed);
  auto overlay = std::make_shared<OverlayView>(backend_->View());
  for (int round = 0; round < 300; ++round) {
    BackendBatch batch;
    for (size_t n = 1 + pick(4); n > 0; --n) {
      const std::string& key = keys[pick(keys.size())];
      if (pick(3) == 0) {
        batch.Delete(key);
        model.erase(key);
      } else {
        const std::string value = "r" + std::to_string(round) + "n" + std::to_string(n);
        batch.Put(key, value);
        model[key] = value;
      }
    }
    ASSERT_FALSE(OverlayView::HasDeleteRange(batch));
    overlay->Add(std::move(batch));
    const std::string& probe = keys[pick(keys.size())];
    EXPECT_EQ(GetOr(*overlay, probe, "<none>"), model.count(probe) ? model[probe] : "<none>");
    std::string lower = keys[pick(keys.size())];
    std::string upper = pick(4) == 0 ? std::string() : keys[pick(keys.size())];
    if (!upper.empty() && upper < lower) std::swap(lower, upper);
    // An iterator in use while another one reads the whole overlay.
    std::unique_ptr<BackendIterator> outer = overlay->NewIterator(lower, upper);
    outer->Seek("");
    ASSERT_EQ(Scan(*overlay, "", ""), model) << "round " << round;
    const std::string from = keys[pick(keys.size())];
    Map seen;
    for (outer->Seek(from); outer->Valid(); outer->Next()) {
      seen[std::string(outer->key())] = std::string(outer->value());
    }
    Map want = Slice(model, std::max(lower, from), upper);
    EXPECT_EQ(seen, want) << "round " << round;
  }
  BackendBatch drained;
  overlay->Drain(&drained);
  EXPECT_TRUE(overlay->empty());
  overlay.reset();
  Write(&drained);
  EXPECT_EQ(Scan(*backend_->View(), "", ""), model);
}

TEST(OverlayViewTest, ARangeDeletionIsToBeWrittenNotLaidOver) {
  BackendBatch batch;
  batch.Put("a", "1");
  EXPECT_FALSE(OverlayView::HasDeleteRange(batch));
  batch.DeleteRange("a", "b");
  EXPECT_TRUE(OverlayView::HasDeleteRange(batch));
}

INSTANTIATE_TEST_SUITE_P(Engines, KvBackendTest, testing::ValuesIn(testing_util::BackendEngines()),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(MemoryBackendTest, DamagedDumpIsRefused) {
  TempDir dir("memory_dump");
  MemoryBackend backend;
  BackendBatch b;
  b.Put("a", "1");
  b.Put("b", "2");
  ASSERT_TRUE(backend.Write(b).ok());
  CheckpointManifest manifest;
  ASSERT_TRUE(backend.Checkpoint(dir.Join("c"), &manifest).ok());
  const std::string path = file::JoinPath(dir.Join("c"), MemoryBackend::kDumpFile);
  const std::string good = testing_util::ReadFileBytes(path);
  for (size_t i = 0; i < good.size(); i += 3) {
    std::string bad = good;
    bad[i] ^= 0x20;
    testing_util::WriteFileBytes(path, bad);
    MemoryBackend loaded;
    EXPECT_FALSE(loaded.LoadCheckpoint(dir.Join("c")).ok()) << "flip at " << i;
    testing_util::WriteFileBytes(path, good.substr(0, i));
    EXPECT_FALSE(loaded.LoadCheckpoint(dir.Join("c")).ok()) << "cut at " << i;
  }
  testing_util::WriteFileBytes(path, good);
  MemoryBackend loaded;
  ASSERT_TRUE(loaded.LoadCheckpoint(dir.Join("c")).ok());
  EXPECT_EQ(Scan(*loaded.View(), "", ""), (Map{{"a", "1"}, {"b", "2"}}));
  EXPECT_EQ(loaded.Stats().live_bytes, 4u);
}

#ifdef RAFTKV_HAVE_ROCKSDB
// Groups of keys with their own memtable insert position (insert hints):
// writes and range deletions in order, over again, backwards and at random
// within and across groups, with flushes between, read back as an ordered
// map has them.
TEST(RocksDbBackendTest, GroupedInsertsKeepTheOrderAndTheNewestValue) {
  TempDir dir("rocksdb_groups");
  RocksDbBackend::Options options;
  options.insert_group_prefix = [](std::string_view key) -> size_t {
    if (key.empty() || key[0] == 'z') return 0;  // 'z...' keys in no group
    return key[0] == 'b' ? std::min<size_t>(key.size(), 2) : 1;
  };
  std::unique_ptr<RocksDbBackend> db;
  ASSERT_TRUE(RocksDbBackend::Open(dir.Join("db"), options, &db).ok());
  Map expected;
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    BackendBatch batch;
    for (int i = 0; i < 50; ++i) {
      // At random, ascending, descending.
      const int n = round % 3 == 0 ? int(rng() % 500) : round % 3 == 1 ? round * 50 + i : 2000 - round * 50 - i;
      const char group = "abcz"[rng() % 4];
      std::string key(1, group);
      key += std::string(1, char('0' + n % 3)) + std::to_string(n);
      const std::string value = "v" + std::to_string(round) + "-" + std::to_string(i);
      if (rng() % 7 == 0) {
        batch.Delete(key);
        expected.erase(key);
      } else if (rng() % 11 == 0) {
        // A range from a grouped key: RocksDB before 9.2.1 took its insert
        // position from the point writes' list (RocksDbBackend::GroupPrefix).
        const std::string end = key + "5";
        batch.DeleteRange(key, end);
        expected.erase(expected.lower_bound(key), expected.lower_bound(end));
      } else {
        batch.Put(key, value);
        expected[key] = value;
      }
    }
    ASSERT_TRUE(db->Write(batch).ok());
    if (round % 10 == 9) {
      ASSERT_TRUE(db->Flush().ok());
    }
  }
  EXPECT_EQ(Scan(*db->View(), "", ""), expected);
  db.reset();
  ASSERT_TRUE(RocksDbBackend::Open(dir.Join("db"), options, &db).ok());
  EXPECT_EQ(Scan(*db->View(), "", ""), expected);
}

// Lookup filters (Options::lookup_prefix): keys "p<name>/<n>" have the
// prefix "p<name>/", others none. Across memtables and flushed files, with
// and without filters on the same files: a lookup reads exactly its
// prefix's keys (a missing prefix none), an unbounded lookup iterator reused
// for many prefixes (as OverlayView reuses one) stops at each prefix's end,
// and every other read still sees every key in order whatever the filters
// say (a scan from a prefixed key across others, as a range read does).
TEST(RocksDbBackendTest, LookupsReadTheirPrefixAndScansReadEverything) {
  TempDir dir("rocksdb_lookups");
  RocksDbBackend::Options filtered;
  filtered.lookup_prefix = [](std::string_view key) -> size_t {
    if (key.empty() || key[0] != 'p') return 0;
    const size_t slash = key.find('/');
    return slash == std::string_view::npos ? 0 : slash + 1;
  };
  std::unique_ptr<RocksDbBackend> db;
  ASSERT_TRUE(RocksDbBackend::Open(dir.Join("db"), filtered, &db).ok());
  Map expected;
  const std::vector<std::string> names = {"a", "ab", "b", "c", "d", "da", "e", "f"};
  std::mt19937 rng(11);
  for (int round = 0; round < 8; ++round) {
    BackendBatch batch;
    // Each round writes a few of the prefixes only, so that most files lack
    // most prefixes and their filters say so.
    for (int i = 0; i < 40; ++i) {
      const std::string& name = names[(round * 3 + rng() % 2) % names.size()];
      const std::string key = "p" + name + "/" + std::to_string(rng() % 30);
      batch.Put(key, "v" + std::to_string(round));
      expected[key] = "v" + std::to_string(round);
    }
    batch.Put("m" + std::to_string(round), "meta");  // outside every prefix
    expected["m" + std::to_string(round)] = "meta";
    ASSERT_TRUE(db->Write(batch).ok());
    if (round < 6) {
      ASSERT_TRUE(db->Flush().ok());  // the last rounds stay in the memtable
    }
  }
  auto check = [&](const KvBackend& backend, const std::string& what) {
    SCOPED_TRACE(what);
    const auto view = backend.View();
    EXPECT_EQ(Scan(*view, "", ""), expected);
    EXPECT_EQ(Scan(*view, "pab/", ""), Slice(expected, "pab/", ""));
    EXPECT_EQ(Scan(*view, "", "", "pc/"), Slice(expected, "pc/", ""));
    auto reused = view->NewLookupIterator("", "");
    for (const char* name : {"a", "ab", "b", "c", "d", "da", "e", "f", "g", "aa"}) {
      const std::string prefix = std::string("p") + name + "/";
      const std::string end = std::string("p") + name + "0";  // '0' follows '/'
      const Map want = Slice(expected, prefix, end);
      Map got;
      auto it = view->NewLookupIterator(prefix, end);
      for (it->Seek(prefix); it->Valid(); it->Next()) got[std::string(it->key())] = std::string(it->value());
      EXPECT_TRUE(it->status().ok()) << it->status().ToString();
      EXPECT_EQ(got, want) << prefix;
      Map unbounded;
      for (reused->Seek(prefix); reused->Valid() && reused->key() < end; reused->Next()) {
        unbounded[std::string(reused->key())] = std::string(reused->value());
      }
      EXPECT_EQ(unbounded, want) << prefix << " through the reused iterator";
      auto overlay = std::make_shared<OverlayView>(view);
      BackendBatch pending;
      pending.Put(prefix + "zz", "pending");
      overlay->Add(std::move(pending));
      Map with_pending = want;
      with_pending[prefix + "zz"] = "pending";
      Map over;
      auto oit = overlay->NewLookupIterator(prefix, end);
      for (oit->Seek(prefix); oit->Valid(); oit->Next()) over[std::string(oit->key())] = std::string(oit->value());
      EXPECT_EQ(over, with_pending) << prefix << " through an overlay";
    }
  };
  check(*db, "filtered, written");
  db.reset();
  ASSERT_TRUE(RocksDbBackend::Open(dir.Join("db"), RocksDbBackend::Options(), &db).ok());
  check(*db, "reopened without filters");
  db.reset();
  ASSERT_TRUE(RocksDbBackend::Open(dir.Join("db"), filtered, &db).ok());
  check(*db, "reopened with filters");
}

// An iterator keeps the memtables that existed when it was made (the
// active one goes on filling) after they are flushed. A long walk while
// writes and flushes go on must not keep them to its end: it is made again
// at its snapshot as it goes, and reads the same keys.
TEST(RocksDbBackendTest, ALongWalkLetsGoOfTheMemtablesFlushedMeanwhile) {
  TempDir dir("rocksdb_walk");
  std::unique_ptr<RocksDbBackend> db;
  ASSERT_TRUE(RocksDbBackend::Open(dir.Join("db"), RocksDbBackend::Options(), &db).ok());
  const int rows = 3 * RocksDbBackend::kIteratorRenewSteps;
  auto key = [](const char* prefix, int i) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%s%08d", prefix, i);
    return std::string(buf);
  };
  BackendBatch batch;
  for (int i = 0; i < rows; ++i) batch.Put(key("a", i), "v" + std::to_string(i));
  ASSERT_TRUE(db->Write(batch).ok());
  const std::shared_ptr<const BackendView> view = db->View();
  std::unique_ptr<BackendIterator> it = view->NewIterator("", "");
  it->Seek("");
  // Writes the walk's view does not see, into the memtable it holds, flushed.
  const std::string big(4096, 'x');
  batch.Clear();
  for (int i = 0; i < 4000; ++i) batch.Put(key("z", i), big);
  ASSERT_TRUE(db->Write(batch).ok());
  ASSERT_TRUE(db->Flush().ok());
  const uint64_t held = db->Stats().memtable_memory_bytes;
  EXPECT_GT(held, uint64_t{4000} * 4096) << "the flushed memtable is held by the walk";
  int seen = 0;
  for (; it->Valid(); it->Next(), ++seen) {
    ASSERT_EQ(std::string(it->key()), key("a", seen));
    ASSERT_EQ(std::string(it->value()), "v" + std::to_string(seen));
    if (seen == RocksDbBackend::kIteratorRenewSteps + 1) {
      EXPECT_LT(db->Stats().memtable_memory_bytes, held / 4);
    }
  }
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  EXPECT_EQ(seen, rows);
}
#endif

}  // namespace
}  // namespace raftkv
