// Restoring etcd's own snapshot (a bbolt database): the bbolt reader
// (storage/bbolt_reader.h), the import of etcd's MVCC buckets
// (kv/etcd_import.h) and RestoreDataDir over such a file (ops/backup.h).
// testdata/etcd-3.4.snapshot.db was saved by `etcdctl snapshot save` from a
// real etcd 3.4 (testdata/make_etcd_snapshot.sh writes it; the expectations
// below follow that script). Damaged copies of it, and small databases built
// here, must give a clear error and never crash.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/common/temp_dir.h"
#include "kv/etcd_import.h"
#include "kv/kv_state_machine.h"
#include "node/cluster_config.h"
#include "node/node_options.h"
#include "node/recovery.h"
#include "proto/etcd.h"
#include "ops/backup.h"
#include "storage/bbolt_reader.h"
#include "storage/coding.h"
#include "storage/snapshot_format.h"

namespace raftkv {
namespace {

using testing_util::ReadFileBytes;
using testing_util::TempDir;
using testing_util::WriteFileBytes;

const std::string kFixture = std::string(RAFTKV_SOURCE_DIR) + "/src/gtest/ops/testdata/etcd-3.4.snapshot.db";
constexpr size_t kHash = 32;
constexpr uint32_t kPage = 4096;  // the fixture's page size

// ---- small bbolt databases of 512-byte pages, built here ----

constexpr uint32_t kTinyPage = 512;

struct Elem {
  std::string key;
  std::string value;
  bool bucket = false;
};

uint64_t Fnv64a(std::string_view bytes) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  return h;
}

std::string PageHeader(uint64_t id, uint16_t flags, uint16_t count, uint32_t overflow) {
  std::string p(16, '\0');
  coding::EncodeFixed64(&p[0], id);
  p[8] = static_cast<char>(flags & 0xFF);
  p[10] = static_cast<char>(count & 0xFF);
  p[11] = static_cast<char>(count >> 8);
  coding::EncodeFixed32(&p[12], overflow);
  return p;
}

// Pads `page` to whole pages and sets its overflow.
std::string Finish(std::string page) {
  const size_t pages = (page.size() + kTinyPage - 1) / kTinyPage;
  page.resize(pages * kTinyPage, '\0');
  coding::EncodeFixed32(&page[12], static_cast<uint32_t>(pages - 1));
  return page;
}

// A leaf page without padding (an inline bucket's page).
std::string LeafBytes(uint64_t id, const std::vector<Elem>& elems) {
  std::string p = PageHeader(id, 0x02, static_cast<uint16_t>(elems.size()), 0);
  std::string data;
  for (size_t i = 0; i < elems.size(); ++i) {
    std::string e(16, '\0');
    const size_t at = 16 + 16 * i;
    const size_t data_at = 16 + 16 * elems.size() + data.size();
    coding::EncodeFixed32(&e[0], elems[i].bucket ? 1 : 0);
    coding::EncodeFixed32(&e[4], static_cast<uint32_t>(data_at - at));
    coding::EncodeFixed32(&e[8], static_cast<uint32_t>(elems[i].key.size()));
    coding::EncodeFixed32(&e[12], static_cast<uint32_t>(elems[i].value.size()));
    p += e;
    data += elems[i].key + elems[i].value;
  }
  return p + data;
}

std::string LeafPage(uint64_t id, const std::vector<Elem>& elems) {
  return Finish(LeafBytes(id, elems));
}

std::string BranchPage(uint64_t id, const std::vector<std::pair<std::string, uint64_t>>& children) {
  std::string p = PageHeader(id, 0x01, static_cast<uint16_t>(children.size()), 0);
  std::string data;
  for (size_t i = 0; i < children.size(); ++i) {
    std::string e(16, '\0');
    const size_t at = 16 + 16 * i;
    coding::EncodeFixed32(&e[0], static_cast<uint32_t>(16 + 16 * children.size() + data.size() - at));
    coding::EncodeFixed32(&e[4], static_cast<uint32_t>(children[i].first.size()));
    coding::EncodeFixed64(&e[8], children[i].second);
    p += e;
    data += children[i].first;
  }
  return Finish(p + data);
}

std::string MetaPage(uint64_t id, uint64_t root, uint64_t pages, uint64_t txid) {
  std::string m(64, '\0');
  coding::EncodeFixed32(&m[0], BboltReader::kMagic);
  coding::EncodeFixed32(&m[4], BboltReader::kVersion);
  coding::EncodeFixed32(&m[8], kTinyPage);
  coding::EncodeFixed64(&m[16], root);
  coding::EncodeFixed64(&m[32], 2);  // the freelist
  coding::EncodeFixed64(&m[40], pages);
  coding::EncodeFixed64(&m[48], txid);
  coding::EncodeFixed64(&m[56], Fnv64a(std::string_view(m).substr(0, 56)));
  return Finish(PageHeader(id, 0x04, 0, 0) + m);
}

// A bucket value pointing at page `root`.
std::string BucketAt(uint64_t root) {
  std::string b(16, '\0');
  coding::EncodeFixed64(&b[0], root);
  return b;
}

// Meta pages, an empty freelist at page 2, then `pages` from page 3 on
// (the first the root).
std::string TinyDb(const std::vector<std::string>& pages) {
  std::string body = Finish(PageHeader(2, 0x10, 0, 0));
  for (const std::string& p : pages) body += p;
  const uint64_t count = 2 + body.size() / kTinyPage;
  return MetaPage(0, 3, count, 2) + MetaPage(1, 3, count, 1) + body;
}

// A revision key of etcd's key bucket.
std::string Rev(uint64_t main, uint64_t sub, bool tombstone = false) {
  std::string k(17, '\0');
  for (int i = 0; i < 8; ++i) k[i] = static_cast<char>(main >> (56 - 8 * i));
  k[8] = '_';
  for (int i = 0; i < 8; ++i) k[9 + i] = static_cast<char>(sub >> (56 - 8 * i));
  if (tombstone) k.push_back('t');
  return k;
}

std::string Kv(const std::string& key, const std::string& value, int64_t create, int64_t mod,
               int64_t version) {
  mvccpb::KeyValue kv;
  kv.set_key(key);
  kv.set_value(value);
  kv.set_create_revision(create);
  kv.set_mod_revision(mod);
  kv.set_version(version);
  return kv.SerializeAsString();
}

// A database whose root holds bucket "key" at page 4 with `revisions`.
std::string KeyBucketDb(const std::vector<Elem>& revisions) {
  return TinyDb({LeafPage(3, {{"key", BucketAt(4), true}}), LeafPage(4, revisions)});
}

class EtcdImportTest : public ::testing::Test {
 protected:
  // Imports `bytes` (a database in memory) into a state machine.
  Status Import(const std::string& bytes, KvStateMachine* sm, EtcdImportSummary* summary) {
    std::unique_ptr<BboltReader> db;
    Status s = BboltReader::OpenMemory("test.db", bytes, &db);
    SnapshotWriter writer;
    if (s.ok()) s = ImportEtcdDatabase(db.get(), &writer, summary);
    if (!s.ok()) return s;
    const std::string path = work_.Join("image.snap");
    WriteFileBytes(path, EncodeSnapshotFile(writer));
    std::unique_ptr<SnapshotReader> reader;
    s = SnapshotReader::Open(path, &reader);
    if (s.ok()) s = sm->Restore(reader.get());
    return s;
  }

  // The error importing `bytes`, which must fail with a corruption.
  std::string ImportError(const std::string& bytes) {
    KvStateMachine sm;
    EtcdImportSummary summary;
    Status s = Import(bytes, &sm, &summary);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    return s.message();
  }

  // The fixture's database without the SHA-256 etcdctl appended.
  std::string RawDb() const {
    std::string bytes = ReadFileBytes(kFixture);
    EXPECT_EQ(bytes.size() % 512, kHash);
    bytes.resize(bytes.size() - kHash);
    return bytes;
  }

  RestoreOptions Options(const std::string& file, const std::string& dir) const {
    RestoreOptions o;
    o.snapshot_path = file;
    o.data_dir = dir;
    o.id = 1;
    o.cluster.members.push_back(Member{1, "127.0.0.1:7101"});
    return o;
  }

  TempDir work_{"etcd_import"};
};

// The state make_etcd_snapshot.sh leaves in etcd.
void ExpectFixtureState(const KvStateMachine& sm) {
  EXPECT_EQ(sm.Revision(), 12);
  EXPECT_EQ(sm.Size(), 5u);
  struct Want {
    std::string key, value;
    int64_t create, mod, version;
  };
  for (const Want& w : std::vector<Want>{{"/a", "four", 2, 12, 4},
                                         {"/b", "bee", 4, 4, 1},
                                         {"/c", "sea", 7, 7, 1},
                                         {"/leased", "held", 8, 8, 1},
                                         {"/big", std::string(6000, 'x'), 9, 9, 1}}) {
    std::optional<KvRecord> r = sm.GetRecord(w.key);
    ASSERT_TRUE(r.has_value()) << w.key;
    EXPECT_EQ(r->value, w.value) << w.key;
    EXPECT_EQ(r->create_revision, w.create) << w.key;
    EXPECT_EQ(r->mod_revision, w.mod) << w.key;
    EXPECT_EQ(r->version, w.version) << w.key;
    EXPECT_EQ(r->lease != 0, w.key == "/leased") << w.key;
  }
  EXPECT_FALSE(sm.GetRecord("/gone").has_value());
  EXPECT_FALSE(sm.GetRecord("/short").has_value());  // its lease was revoked
  ASSERT_EQ(sm.Leases().size(), 1u);
  int64_t ttl = 0;
  std::vector<std::string> keys;
  ASSERT_TRUE(sm.GetLease(sm.GetRecord("/leased")->lease, &ttl, &keys));
  EXPECT_EQ(ttl, 600);
  EXPECT_EQ(keys, std::vector<std::string>{"/leased"});
}

TEST_F(EtcdImportTest, ImportsEtcdsKeysRevisionsLeasesAndHistory) {
  KvStateMachine sm;
  EtcdImportSummary summary;
  Status s = Import(RawDb(), &sm, &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectFixtureState(sm);
  EXPECT_EQ(summary.compact_revision, 4);
  EXPECT_EQ(summary.history_from, 4);
  EXPECT_GT(summary.consistent_index, 0u);
  EXPECT_EQ(summary.leaseless, 0u);
  // Past reads above the compaction: the history came along. The
  // compaction itself is etcd's (HashKV and watches report it).
  EXPECT_EQ(sm.CompactedRevision(), 4);
  EXPECT_EQ(sm.CompactRevision(), 4);
  RangeRequest at5;
  at5.set_key("/gone");
  at5.set_revision(5);
  RangeResponse resp;
  s = sm.Range(at5, &resp);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(resp.kvs_size(), 1);
  EXPECT_EQ(resp.kvs(0).value(), "soon");
  RangeRequest at6 = at5;
  at6.set_revision(6);
  ASSERT_TRUE(sm.Range(at6, &resp).ok());
  EXPECT_EQ(resp.kvs_size(), 0);
  RangeRequest at3 = at5;
  at3.set_revision(3);
  EXPECT_EQ(sm.Range(at3, &resp).code(), Status::Code::kOutOfRange);  // compacted, as in etcd
}

TEST_F(EtcdImportTest, RestoresEtcdctlsSnapshotAndARawDatabase) {
  const std::string raw = work_.Join("db");  // a member's member/snap/db: no hash
  WriteFileBytes(raw, RawDb());
  int n = 0;
  for (const std::string& file : {kFixture, raw}) {
    SCOPED_TRACE(file);
    const std::string dir = work_.Join("member" + std::to_string(++n));
    RestoreResult result;
    Status s = RestoreDataDir(Options(file, dir), &result);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(result.from_etcd);
    EXPECT_EQ(result.etcd.revision, 12);
    EXPECT_EQ(result.source.revision, 12);
    EXPECT_EQ(result.source.keys, 5u);
    EXPECT_EQ(result.source.leases, 1u);
    NodeOptions node;
    node.id = 1;
    node.cluster = Options(file, dir).cluster;
    node.data_dir = dir;
    RecoveredState r;
    s = RecoverNode(node, &r);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(r.base.index, result.etcd.consistent_index);
    ExpectFixtureState(*r.state_machine);
  }
}

TEST_F(EtcdImportTest, RefusesADamagedOrTruncatedSnapshotByItsHash) {
  std::string bytes = ReadFileBytes(kFixture);
  bytes[3 * kPage + 100] ^= 0x01;
  const std::string damaged = work_.Join("damaged.db");
  WriteFileBytes(damaged, bytes);
  RestoreResult result;
  Status s = RestoreDataDir(Options(damaged, work_.Join("d1")), &result);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find(damaged), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("SHA-256"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(work_.Join("d1")));

  // Whole pages lost, hash kept: the hash no longer matches.
  const std::string good = ReadFileBytes(kFixture);
  const std::string cut = work_.Join("cut.db");
  WriteFileBytes(cut, good.substr(0, 4 * kPage) + good.substr(good.size() - kHash));
  s = RestoreDataDir(Options(cut, work_.Join("d2")), &result);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("SHA-256"), std::string::npos) << s.message();
}

TEST_F(EtcdImportTest, RefusesATruncatedRawDatabase) {
  const std::string raw = RawDb();
  for (size_t pages : {2, 4, 7}) {
    SCOPED_TRACE(pages);
    const std::string message = ImportError(raw.substr(0, pages * kPage));
    EXPECT_NE(message.find("test.db: bbolt database: truncated"), std::string::npos) << message;
  }
  const std::string file = work_.Join("short.db");
  WriteFileBytes(file, raw.substr(0, 5 * kPage));
  RestoreResult result;
  Status s = RestoreDataDir(Options(file, work_.Join("d")), &result);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find(file + ": bbolt database: truncated"), std::string::npos) << s.message();
}

TEST_F(EtcdImportTest, MetaPagesFallBackAndAreChecked) {
  std::string raw = RawDb();
  // Either meta page alone is enough (the other damaged).
  for (size_t meta : {0u, 1u}) {
    std::string one = raw;
    one[meta * kPage + 16 + 20] ^= 0x40;  // the root's page id: fails the checksum
    KvStateMachine sm;
    EtcdImportSummary summary;
    Status s = Import(one, &sm, &summary);
    ASSERT_TRUE(s.ok()) << "meta " << meta << " damaged: " << s.ToString();
    EXPECT_EQ(sm.Revision(), 12);
  }
  std::string both = raw;
  both[16 + 20] ^= 0x40;
  both[kPage + 16 + 4] ^= 0x01;  // the version
  const std::string message = ImportError(both);
  EXPECT_NE(message.find("no valid meta page (page 0: checksum mismatch; page 1: version"),
            std::string::npos)
      << message;
}

TEST_F(EtcdImportTest, RefusesDamagedPages) {
  // The root of the tiny database is page 3; its bucket "key" page 4.
  const std::string good = KeyBucketDb({{Rev(2, 0), Kv("k", "v", 2, 2, 1)}});
  {
    KvStateMachine sm;
    EtcdImportSummary summary;
    ASSERT_TRUE(Import(good, &sm, &summary).ok());
    EXPECT_EQ(sm.GetRecord("k")->value, "v");
  }
  auto patched = [&](size_t offset, const std::string& bytes) {
    std::string db = good;
    db.replace(offset, bytes.size(), bytes);
    return db;
  };
  const size_t page4 = 4 * kTinyPage;
  EXPECT_NE(ImportError(patched(page4 + 10, "\xff\xff")).find("page 4: 65535 elements do not fit"),
            std::string::npos);
  EXPECT_NE(ImportError(patched(page4 + 12, "\x10\0\0\0")).find("page 4: its 16 overflow pages run past"),
            std::string::npos);
  EXPECT_NE(ImportError(patched(page4, "\x09")).find("page 4: its header says page 9"),
            std::string::npos);
  EXPECT_NE(ImportError(patched(page4 + 16 + 4, "\xf0\xff\xff\xff")).find("page 4: element 0"),
            std::string::npos);
  EXPECT_NE(ImportError(patched(page4 + 8, "\x10")).find("page 4: a freelist page where"),
            std::string::npos);
  // Two elements whose values overlap: the first one's value made to cover
  // the rest of the page (alone it fits).
  const std::string two = KeyBucketDb({{Rev(2, 0), Kv("k", "v", 2, 2, 1)}, {Rev(3, 0), Kv("k", "w", 3, 3, 1)}});
  const uint32_t pos0 = coding::DecodeFixed32(&two[page4 + 16 + 4]);
  std::string value_size(4, '\0');
  coding::EncodeFixed32(&value_size[0], static_cast<uint32_t>(kTinyPage - 16 - pos0 - 17));
  std::string overlapping = two;
  overlapping.replace(page4 + 16 + 12, 4, value_size);
  EXPECT_NE(ImportError(overlapping).find("page 4: the keys and values of its first 2 elements take"),
            std::string::npos);
  // The bucket's page id out of the file, and a bucket value cut short.
  std::string db = TinyDb({LeafPage(3, {{"key", BucketAt(77), true}}), LeafPage(4, {})});
  EXPECT_NE(ImportError(db).find("page 77: referenced, but outside the data pages 2..4"),
            std::string::npos);
  db = TinyDb({LeafPage(3, {{"key", "short", true}})});
  EXPECT_NE(ImportError(db).find("shorter than a bucket header"), std::string::npos);
}

TEST_F(EtcdImportTest, RefusesCyclesAndTooDeepTrees) {
  // Bucket "key" at page 4, a branch whose child is itself.
  std::string db = TinyDb({LeafPage(3, {{"key", BucketAt(4), true}}), BranchPage(4, {{"a", 4}})});
  EXPECT_NE(ImportError(db).find("page 4: reached twice"), std::string::npos);
  // A branch reaching the root's page.
  db = TinyDb({LeafPage(3, {{"key", BucketAt(4), true}}), BranchPage(4, {{"a", 3}})});
  EXPECT_NE(ImportError(db).find("page 3: reached twice"), std::string::npos);
  // A chain of branches deeper than a tree can be.
  std::vector<std::string> pages = {LeafPage(3, {{"key", BucketAt(4), true}})};
  for (uint64_t id = 4; id < 4 + BboltReader::kMaxDepth + 2; ++id) {
    pages.push_back(BranchPage(id, {{"a", id + 1}}));
  }
  pages.push_back(LeafPage(4 + BboltReader::kMaxDepth + 2, {}));
  EXPECT_NE(ImportError(TinyDb(pages)).find("deeper than 32 levels"), std::string::npos);
}

TEST_F(EtcdImportTest, ReadsInlineBucketsAndOverflowPages) {
  // Bucket "key" inline (root 0, its leaf page in the value), one value
  // spanning overflow pages, and a "lease" bucket with one lease.
  const std::string big(3000, 'z');
  std::string lease_value = "\x08\x07\x10\x1e";  // leasepb.Lease{ID: 7, TTL: 30}
  std::string lease_id(8, '\0');
  lease_id[7] = 7;
  mvccpb::KeyValue leased;
  leased.set_key("held");
  leased.set_value("x");
  leased.set_create_revision(4);
  leased.set_mod_revision(4);
  leased.set_version(1);
  leased.set_lease(7);
  // Page 5 and the overflow pages after it hold the keys.
  std::string db = TinyDb({LeafPage(3, {{"key", BucketAt(5), true}, {"lease", BucketAt(4), true}}),
                           LeafPage(4, {{lease_id, lease_value}}),
                           LeafPage(5, {{Rev(2, 0), Kv("big", big, 2, 2, 1)},
                                        {Rev(3, 0), Kv("k", "v", 3, 3, 1)},
                                        {Rev(4, 0), leased.SerializeAsString()}})});
  KvStateMachine sm;
  EtcdImportSummary summary;
  Status s = Import(db, &sm, &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(sm.GetRecord("big")->value, big);
  EXPECT_EQ(sm.GetRecord("held")->lease, 7);
  EXPECT_EQ(sm.Leases(), (std::vector<std::pair<int64_t, int64_t>>{{7, 30}}));
  // The same keys with the bucket inline.
  db = TinyDb({LeafPage(3, {{"key", BucketAt(0) + LeafBytes(0, {{Rev(2, 0), Kv("k", "v", 2, 2, 1)}}), true}})});
  KvStateMachine inline_sm;
  s = Import(db, &inline_sm, &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(inline_sm.GetRecord("k")->value, "v");
  EXPECT_EQ(inline_sm.Revision(), 2);
}

TEST_F(EtcdImportTest, RefusesBadEtcdRecords) {
  struct Case {
    std::vector<Elem> revisions;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{{Rev(3, 0), Kv("k", "v", 3, 3, 1)}, {Rev(2, 0), Kv("k", "v", 2, 2, 1)}},
       "revision 2_0 comes after revision 3_0"},
      {{{"short", Kv("k", "v", 2, 2, 1)}}, "revision key of 5 bytes: not a revision key"},
      {{{Rev(2, 0), "\xff\xff"}}, "revision 2_0: the value is not an mvccpb.KeyValue"},
      {{{Rev(2, 0), Kv("k", "v", 2, 5, 1)}}, "revision 2_0: key-value with create revision 2, mod revision 5"},
      {{{Rev(2, 0), Kv("", "v", 2, 2, 1)}}, "revision 2_0: the value is not an mvccpb.KeyValue with a key"},
      {{{Rev(0, 0), Kv("k", "v", 0, 0, 1)}}, "revision 0_0: out of range"},
      {{{Rev(2, 0), BucketAt(0), true}}, "holds a nested bucket"},
  };
  for (const Case& c : cases) {
    const std::string message = ImportError(KeyBucketDb(c.revisions));
    EXPECT_NE(message.find("test.db: etcd bucket 'key': " + c.error), std::string::npos) << message;
  }
  EXPECT_NE(ImportError(TinyDb({LeafPage(3, {})})).find("without etcd's 'key' bucket"),
            std::string::npos);
}

TEST_F(EtcdImportTest, DeletionsAndMissingLeasesAsEtcdReadsThem) {
  mvccpb::KeyValue leased;
  leased.set_key("orphan");
  leased.set_create_revision(4);
  leased.set_mod_revision(4);
  leased.set_version(1);
  leased.set_lease(99);  // no such lease in the database
  KvStateMachine sm;
  EtcdImportSummary summary;
  Status s = Import(KeyBucketDb({{Rev(2, 0), Kv("a", "1", 2, 2, 1)},
                                 {Rev(2, 1), Kv("b", "1", 2, 2, 1)},
                                 {Rev(3, 0, true), Kv("a", "", 0, 0, 0)},
                                 {Rev(4, 0), leased.SerializeAsString()},
                                 {Rev(5, 0), Kv("a", "2", 5, 5, 1)},
                                 {Rev(6, 0, true), Kv("b", "", 0, 0, 0)}}),
                    &sm, &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(sm.Revision(), 6);
  EXPECT_EQ(sm.GetRecord("a")->create_revision, 5);
  EXPECT_FALSE(sm.GetRecord("b").has_value());
  EXPECT_EQ(sm.GetRecord("orphan")->lease, 0);
  EXPECT_EQ(summary.leaseless, 1u);
  EXPECT_EQ(summary.revisions, 6u);
}

}  // namespace
}  // namespace raftkv
