// MvccStore (kv/mvcc_store.h) against a model that keeps the whole state at
// every revision, over every engine built: random writes, then every read
// at every revision, the events from every revision, and compaction.
#include "kv/mvcc_store.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "gtest/common/temp_dir.h"
#include "gtest/kv/store_options.h"
#include "kv/mvcc_keys.h"
#include "storage/memory_backend.h"
#ifdef RAFTKV_HAVE_ROCKSDB
#include "storage/rocksdb_backend.h"
#endif

namespace raftkv {
namespace {

using State = std::map<std::string, KvRecord>;

bool Same(const KvRecord& a, const KvRecord& b) {
  return a.value == b.value && a.create_revision == b.create_revision &&
         a.mod_revision == b.mod_revision && a.version == b.version && a.lease == b.lease;
}

std::string Describe(const std::string& key, const KvRecord& r) {
  return "[" + testing::PrintToString(key) + " v=" + testing::PrintToString(r.value) +
         " c=" + std::to_string(r.create_revision) + " m=" + std::to_string(r.mod_revision) +
         " ver=" + std::to_string(r.version) + " l=" + std::to_string(r.lease) + "]";
}

std::string Describe(const State& s) {
  std::string out;
  for (const auto& [k, r] : s) out += Describe(k, r);
  return out;
}

std::string Describe(const KvEvent& e) {
  return "@" + std::to_string(e.revision) + (e.is_delete ? " DEL " : " PUT ") + Describe(e.key, e.kv) +
         (e.has_prev ? " prev " + Describe(e.key, e.prev) : "");
}

std::string Describe(const std::vector<KvEvent>& events) {
  std::string out;
  for (const KvEvent& e : events) out += Describe(e) + "\n";
  return out;
}

// Keys with NUL and 0xff bytes and keys that are prefixes of one another.
const std::vector<std::string>& Keys() {
  static const std::vector<std::string> keys = {
      std::string(1, '\0'), "a", std::string("a\0", 2), std::string("a\0b", 3), "a\xff", "ab", "b", "\xff"};
  return keys;
}

// Ranges (etcd's conventions: end "" one key, "\0" every key from key on).
const std::vector<std::pair<std::string, std::string>>& Ranges() {
  static const std::vector<std::pair<std::string, std::string>> ranges = {
      {"", std::string(1, '\0')}, {"a", "b"},  {std::string("a\0", 2), "\xff"}, {"a", std::string("a\0", 2)},
      {"b", "a"},                 {"a", ""},   {"zz", ""},                      {"ab", std::string(1, '\0')}};
  return ranges;
}

State InRange(const State& s, const std::string& key, const std::string& end) {
  State out;
  for (const auto& [k, r] : s) {
    if (InKeyRange(k, key, end)) out.emplace(k, r);
  }
  return out;
}

class MvccStoreTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_.reset();
    if (GetParam() == "memory") {
      backend_ = std::make_unique<MemoryBackend>();
      return;
    }
#ifdef RAFTKV_HAVE_ROCKSDB
    std::unique_ptr<RocksDbBackend> db;
    const Status s = RocksDbBackend::Open(dir_.path() + "/db" + std::to_string(opens_++), testing_kv::StoreOptions(), &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
    backend_ = std::move(db);
#endif
  }

  MvccReader Reader() const { return MvccReader(backend_->View()); }

  State ScanAt(const MvccReader& reader, const std::string& key, const std::string& end, int64_t rev) {
    State out;
    const Status s = reader.Scan(key, end, rev, [&](const std::string& k, const KvRecord& r) {
      EXPECT_TRUE(out.emplace(k, r).second) << "key visited twice: " << testing::PrintToString(k);
      return true;
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    // Without values: the same keys and records, every value empty.
    State bare;
    const Status b = reader.Scan(
        key, end, rev,
        [&](const std::string& k, const KvRecord& r) {
          EXPECT_TRUE(r.value.empty()) << testing::PrintToString(k);
          bare.emplace(k, r);
          return true;
        },
        ScanValues::kNoValues);
    EXPECT_TRUE(b.ok()) << b.ToString();
    State expected = out;
    for (auto& [k, r] : expected) r.value.clear();
    EXPECT_EQ(Describe(bare), Describe(expected));
    return out;
  }

  // One entry of random puts and deletes, checked against the model as it
  // goes (the writer reads its own writes); writes it and records the
  // state and the events in the model.
  void RandomEntry(std::mt19937* rng) {
    const MvccReader base = Reader();
    const int64_t rev = static_cast<int64_t>(states_.size());
    MvccWriter writer(&base, rev);
    State now = states_.back();
    std::vector<KvEvent> events;
    const int ops = 1 + static_cast<int>((*rng)() % 3);
    for (int i = 0; i < ops; ++i) {
      const std::string& key = Keys()[(*rng)() % Keys().size()];
      std::optional<KvRecord> current;
      ASSERT_TRUE(writer.Find(key, &current).ok());
      const auto modelled = now.find(key);
      ASSERT_EQ(current.has_value(), modelled != now.end()) << testing::PrintToString(key);
      if (current) {
        ASSERT_TRUE(Same(*current, modelled->second)) << Describe(key, *current);
      }
      KvEvent e;
      e.revision = rev;
      e.key = key;
      e.has_prev = current.has_value();
      if (current) e.prev = *current;
      if (current && (*rng)() % 3 == 0) {
        writer.Delete(key, *current);
        now.erase(key);
        e.is_delete = true;
        e.kv.mod_revision = rev;
      } else {
        KvRecord r;
        r.value = "v" + std::to_string(rev) + "." + std::to_string(i) + std::string((*rng)() % 3, '\0');
        r.create_revision = current ? current->create_revision : rev;
        r.version = current ? current->version + 1 : 1;
        r.lease = static_cast<int64_t>((*rng)() % 2);
        writer.Put(key, r, current ? &*current : nullptr);
        r.mod_revision = rev;
        now[key] = r;
        e.kv = r;
      }
      events.push_back(e);
      for (const auto& [k, end] : Ranges()) {
        State seen;
        ASSERT_TRUE(writer
                        .Scan(
                            k, end,
                            [&](const std::string& key, const KvRecord& r) {
                              seen.emplace(key, r);
                              return true;
                            },
                            ScanValues::kWith)
                        .ok());
        ASSERT_EQ(Describe(seen), Describe(InRange(now, k, end)));
      }
    }
    EXPECT_EQ(writer.changes(), events.size());
    BackendBatch batch;
    writer.Finish(&batch);
    if (layout1_) {
      ASSERT_NO_FATAL_FAILURE(AsLayout1(&batch));
    }
    ASSERT_TRUE(backend_->Write(batch).ok());
    states_.push_back(now);
    events_.insert(events_.end(), events.begin(), events.end());
  }

  // The history rows of `batch` as a layout 1 store has them: without the
  // version each change replaced.
  static void AsLayout1(BackendBatch* batch) {
    BackendBatch out;
    for (const BackendBatch::Op& op : batch->ops()) {
      ASSERT_EQ(op.type, BackendBatch::OpType::kPut);
      std::string value = op.value;
      if (!op.key.empty() && op.key[0] == mvcc::kHistoryPrefix) {
        std::string key;
        bool deleted = false;
        mvcc::PrevVersion prev;
        ASSERT_TRUE(mvcc::DecodeEvent(op.value, &key, &deleted, &prev));
        ASSERT_TRUE(prev.known);
        value = mvcc::EncodeEvent(key, deleted, mvcc::PrevVersion());
      }
      out.Put(op.key, value);
    }
    *batch = std::move(out);
  }

  // Every read at every revision from `floor` on, and the events from
  // every revision from there, against the model.
  void CheckReadsFrom(int64_t floor) {
    const MvccReader reader = Reader();
    for (int64_t rev = floor; rev < static_cast<int64_t>(states_.size()); ++rev) {
      for (const auto& [key, end] : Ranges()) {
        ASSERT_EQ(Describe(ScanAt(reader, key, end, rev)), Describe(InRange(states_[rev], key, end)))
            << "range " << testing::PrintToString(key) << ".." << testing::PrintToString(end) << " at "
            << rev;
      }
      for (const std::string& key : Keys()) {
        std::optional<KvRecord> r;
        ASSERT_TRUE(reader.Find(key, rev, &r).ok());
        const auto modelled = states_[rev].find(key);
        ASSERT_EQ(r.has_value(), modelled != states_[rev].end()) << testing::PrintToString(key) << " at " << rev;
        if (r) {
          EXPECT_TRUE(Same(*r, modelled->second)) << Describe(key, *r) << " at " << rev;
        }
      }
      CheckEventsFrom(reader, rev);
    }
  }

  void CheckEventsFrom(const MvccReader& reader, int64_t from) {
    for (const auto& [key, end] : Ranges()) {
      std::vector<KvEvent> expected;
      for (const KvEvent& e : events_) {
        if (e.revision >= from && InKeyRange(e.key, key, end)) expected.push_back(e);
      }
      // Read at once, and page by page (one revision's events at a time).
      std::vector<KvEvent> all;
      int64_t next = 0;
      ASSERT_TRUE(reader.ReadEvents(key, end, from, SIZE_MAX, &all, &next).ok());
      EXPECT_EQ(Describe(all), Describe(expected)) << "from " << from;
      EXPECT_EQ(next, static_cast<int64_t>(states_.size()));
      std::vector<KvEvent> paged, page;
      for (int64_t at = from; at < static_cast<int64_t>(states_.size()); at = next) {
        ASSERT_TRUE(reader.ReadEvents(key, end, at, 0, &page, &next).ok());
        ASSERT_GT(next, at);
        if (!page.empty()) {
          for (const KvEvent& e : page) EXPECT_EQ(e.revision, page.front().revision);
        }
        paged.insert(paged.end(), page.begin(), page.end());
      }
      EXPECT_EQ(Describe(paged), Describe(expected)) << "from " << from << ", paged";
    }
  }

  // Compacts at `revision` in steps of `max_keys` keys.
  void Compact(int64_t from, int64_t revision, size_t max_keys) {
    int64_t done = from;
    int steps = 0;
    while (done < revision) {
      BackendBatch batch;
      const std::shared_ptr<const BackendView> view = backend_->View();
      ASSERT_TRUE(PlanCompaction(*view, done, revision, max_keys, &batch, &done).ok());
      ASSERT_TRUE(backend_->Write(batch).ok());
      ASSERT_LT(++steps, 1000);
    }
    EXPECT_EQ(done, revision);
  }

  // The version rows of every key below `revision`: at most one, its newest
  // one there, and not a deletion.
  void CheckCompactedAt(int64_t revision) {
    auto it = backend_->View()->NewIterator(std::string(1, mvcc::kVersionPrefix), mvcc::VersionsLimit());
    std::map<std::string, int> below;
    for (it->Seek(""); it->Valid(); it->Next()) {
      std::string key;
      int64_t rev = 0;
      uint32_t sub = 0;
      ASSERT_TRUE(mvcc::ParseVersionKey(it->key(), &key, &rev, &sub));
      if (rev >= revision) continue;
      KvRecord r;
      bool deleted = false;
      ASSERT_TRUE(mvcc::DecodeVersion(it->value(), &r, &deleted));
      EXPECT_FALSE(deleted) << "a deletion below the compaction: " << testing::PrintToString(key);
      EXPECT_EQ(++below[key], 1) << "two versions below the compaction: " << testing::PrintToString(key);
    }
    auto history = backend_->View()->NewIterator(std::string(1, mvcc::kHistoryPrefix),
                                                 mvcc::HistoryKey(revision, 0));
    history->Seek("");
    EXPECT_FALSE(history->Valid()) << "history kept below the compaction";
  }

  testing_util::TempDir dir_{"mvcc"};
  int opens_ = 0;
  std::unique_ptr<KvBackend> backend_;
  std::vector<State> states_{State()};  // [revision]
  std::vector<KvEvent> events_;
  bool layout1_ = false;  // RandomEntry writes history rows as layout 1 did
};

TEST_P(MvccStoreTest, ReadsAtEveryRevisionAndEventsMatchTheModel) {
  std::mt19937 rng(7);
  for (int i = 0; i < 60; ++i) ASSERT_NO_FATAL_FAILURE(RandomEntry(&rng));
  CheckReadsFrom(0);
}

TEST_P(MvccStoreTest, CompactionKeepsEveryReadAndEventFromItsRevision) {
  for (const size_t max_keys : {size_t{0}, size_t{1}, size_t{3}}) {
    SCOPED_TRACE("max_keys " + std::to_string(max_keys));
    SetUp();
    states_.assign(1, State());
    events_.clear();
    std::mt19937 rng(11 + static_cast<unsigned>(max_keys));
    for (int i = 0; i < 40; ++i) ASSERT_NO_FATAL_FAILURE(RandomEntry(&rng));
    Compact(0, 15, max_keys);
    CheckCompactedAt(15);
    CheckReadsFrom(15);
    // Again over the same revisions (harmless), then further on.
    Compact(0, 15, max_keys);
    for (int i = 0; i < 20; ++i) ASSERT_NO_FATAL_FAILURE(RandomEntry(&rng));
    Compact(15, 50, max_keys);
    CheckCompactedAt(50);
    CheckReadsFrom(50);
  }
}

// A store written as layout 1 (history rows that do not name the version
// each change replaced), then on: its rows are compacted by looking the
// versions up, the newer ones without, in one plan and apart.
TEST_P(MvccStoreTest, CompactionOfLayout1RowsAndNewerOnes) {
  for (const size_t max_keys : {size_t{0}, size_t{2}}) {
    SCOPED_TRACE("max_keys " + std::to_string(max_keys));
    SetUp();
    states_.assign(1, State());
    events_.clear();
    std::mt19937 rng(23 + static_cast<unsigned>(max_keys));
    layout1_ = true;
    for (int i = 0; i < 25; ++i) ASSERT_NO_FATAL_FAILURE(RandomEntry(&rng));
    layout1_ = false;
    for (int i = 0; i < 25; ++i) ASSERT_NO_FATAL_FAILURE(RandomEntry(&rng));
    Compact(0, 10, max_keys);
    CheckCompactedAt(10);
    CheckReadsFrom(10);
    Compact(10, 40, max_keys);  // across both layouts
    CheckCompactedAt(40);
    CheckReadsFrom(40);
    for (int i = 0; i < 15; ++i) ASSERT_NO_FATAL_FAILURE(RandomEntry(&rng));
    Compact(40, 60, max_keys);
    CheckCompactedAt(60);
    CheckReadsFrom(60);
  }
}

// A compaction deletes history rows one by one while there are up to 2,048
// of them (a range deletion costs RocksDB every iterator opened after it),
// more with one range; versions named by the rows always one by one.
TEST_P(MvccStoreTest, ASmallCompactionDeletesRowByRow) {
  std::mt19937 rng(5);
  for (int i = 0; i < 40; ++i) ASSERT_NO_FATAL_FAILURE(RandomEntry(&rng));
  auto ranges = [](const BackendBatch& batch) {
    return std::count_if(batch.ops().begin(), batch.ops().end(), [](const BackendBatch::Op& op) {
      return op.type == BackendBatch::OpType::kDeleteRange;
    });
  };
  BackendBatch small;
  int64_t done = 0;
  ASSERT_TRUE(PlanCompaction(*backend_->View(), 0, 30, 0, &small, &done).ok());
  EXPECT_FALSE(small.empty());
  EXPECT_EQ(ranges(small), 0);
  ASSERT_TRUE(backend_->Write(small).ok());
  CheckCompactedAt(30);
  CheckReadsFrom(30);
  // 2,100 more revisions of two changes each.
  for (int64_t rev = 40; rev < 2140; ++rev) {
    const MvccReader base = Reader();
    MvccWriter writer(&base, rev);
    for (const char* key : {"a", "b"}) {
      std::optional<KvRecord> current;
      ASSERT_TRUE(writer.Find(key, &current).ok());
      KvRecord r;
      r.value = std::to_string(rev);
      r.create_revision = current ? current->create_revision : rev;
      r.version = current ? current->version + 1 : 1;
      writer.Put(key, r, current ? &*current : nullptr);
    }
    BackendBatch batch;
    writer.Finish(&batch);
    ASSERT_TRUE(backend_->Write(batch).ok());
  }
  BackendBatch large;
  ASSERT_TRUE(PlanCompaction(*backend_->View(), 30, 2139, 0, &large, &done).ok());
  EXPECT_EQ(ranges(large), 1);
  ASSERT_TRUE(backend_->Write(large).ok());
  CheckCompactedAt(2139);
  std::optional<KvRecord> a;
  ASSERT_TRUE(Reader().Find("a", mvcc::kLatest, &a).ok());
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->value, "2139");
}

TEST_P(MvccStoreTest, AMalformedRowIsCorruptionNotACrash) {
  std::mt19937 rng(3);
  for (int i = 0; i < 5; ++i) ASSERT_NO_FATAL_FAILURE(RandomEntry(&rng));
  BackendBatch batch;
  batch.Put(mvcc::VersionKey("a", 6, 0), "short");
  batch.Put(mvcc::HistoryKey(6, 0), std::string(1, '\x07') + "a");
  ASSERT_TRUE(backend_->Write(batch).ok());
  const MvccReader reader = Reader();
  std::optional<KvRecord> r;
  EXPECT_TRUE(reader.Find("a", 6, &r).IsCorruption());
  EXPECT_TRUE(reader.Scan("", std::string(1, '\0'), mvcc::kLatest, [](const std::string&, const KvRecord&) {
                      return true;
                    }).IsCorruption());
  std::vector<KvEvent> events;
  int64_t next = 0;
  EXPECT_TRUE(reader.ReadEvents("", std::string(1, '\0'), 6, SIZE_MAX, &events, &next).IsCorruption());
  // A history row whose version is missing.
  BackendBatch orphan;
  orphan.Put(mvcc::HistoryKey(6, 0), mvcc::EncodeEvent("nowhere", false, mvcc::PrevVersion::Of(nullptr)));
  ASSERT_TRUE(backend_->Write(orphan).ok());
  EXPECT_TRUE(Reader().ReadEvents("", std::string(1, '\0'), 6, SIZE_MAX, &events, &next).IsCorruption());
}

TEST(MvccVersionTest, EncodingRoundTripsAndRefusesWhatItDoesNotWrite) {
  KvRecord r;
  r.value = std::string("x\0y", 3);
  r.create_revision = 3;
  r.version = 9;
  r.lease = -1;
  KvRecord back;
  bool deleted = true;
  ASSERT_TRUE(mvcc::DecodeVersion(mvcc::EncodeVersion(r, false), &back, &deleted));
  EXPECT_FALSE(deleted);
  back.mod_revision = r.mod_revision;
  EXPECT_TRUE(Same(back, r));
  ASSERT_TRUE(mvcc::DecodeVersion(mvcc::EncodeVersion(r, true), &back, &deleted));
  EXPECT_TRUE(deleted);
  EXPECT_TRUE(back.value.empty());
  EXPECT_FALSE(mvcc::DecodeVersion(std::string(24, '\0'), &back, &deleted));       // short
  EXPECT_FALSE(mvcc::DecodeVersion(std::string(25, '\x02'), &back, &deleted));     // unknown flag
  EXPECT_FALSE(mvcc::DecodeVersion(mvcc::EncodeVersion(r, true) + "x", &back, &deleted));  // deletion with a value
  std::string key;
  EXPECT_FALSE(mvcc::DecodeEvent("", &key, &deleted));
  KvRecord replaced;
  replaced.mod_revision = 41;
  replaced.mod_sub = 7;
  mvcc::PrevVersion prev;
  ASSERT_TRUE(mvcc::DecodeEvent(mvcc::EncodeEvent(std::string("\0k", 2), true, mvcc::PrevVersion::Of(&replaced)),
                                &key, &deleted, &prev));
  EXPECT_TRUE(deleted);
  EXPECT_EQ(key, std::string("\0k", 2));
  EXPECT_TRUE(prev.known && prev.exists);
  EXPECT_EQ(prev.revision, 41);
  EXPECT_EQ(prev.sub, 7u);
  ASSERT_TRUE(mvcc::DecodeEvent(mvcc::EncodeEvent("k", false, mvcc::PrevVersion::Of(nullptr)), &key, &deleted, &prev));
  EXPECT_TRUE(prev.known);
  EXPECT_FALSE(prev.exists);
  EXPECT_EQ(key, "k");
  ASSERT_TRUE(mvcc::DecodeEvent(mvcc::EncodeEvent("k", false, mvcc::PrevVersion()), &key, &deleted, &prev));
  EXPECT_FALSE(prev.known);  // a layout 1 row
  EXPECT_EQ(key, "k");
  EXPECT_FALSE(mvcc::DecodeEvent(std::string(1, '\x02') + "short", &key, &deleted));  // no room for the place
  EXPECT_FALSE(mvcc::DecodeEvent(std::string(1, '\x06') + std::string(12, '\0') + "k", &key, &deleted));
  EXPECT_FALSE(mvcc::DecodeEvent(std::string(1, '\x08') + "k", &key, &deleted));  // unknown flag
}

#ifdef RAFTKV_HAVE_ROCKSDB
INSTANTIATE_TEST_SUITE_P(Engines, MvccStoreTest, testing::Values("memory", "rocksdb"));
#else
INSTANTIATE_TEST_SUITE_P(Engines, MvccStoreTest, testing::Values("memory"));
#endif

}  // namespace
}  // namespace raftkv
