// CheckpointStore (storage/checkpoint_store.h): taking, listing and pruning
// checkpoint snapshots, and sending one file by file to another store,
// over every engine built. The receiving side assumes a careless or hostile
// sender: every way a transfer can go wrong must leave nothing installed.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gtest/common/engines.h"
#include "gtest/common/temp_dir.h"
#include "proto/internal.h"
#include "storage/checkpoint_store.h"
#include "storage/file_util.h"
#include "storage/memory_backend.h"
#ifdef RAFTKV_HAVE_ROCKSDB
#include "storage/rocksdb_backend.h"
#include "storage/rocksdb_fs.h"
#endif

namespace raftkv {
namespace {

namespace fs = std::filesystem;
using testing_util::ReadFileBytes;
using testing_util::TempDir;
using testing_util::WriteFileBytes;

// One piece of a file, as CheckpointReceiver::Append takes it.
struct Chunk {
  std::string file;
  uint64_t offset = 0;
  std::string data;
  bool file_done = false;
};

// The test's stores keep their "position" in the row `pos` as
// "<index> <term>", as the state machine keeps `m state`.
class CheckpointStoreTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = OpenBackend(dir_.Join("db"), /*read_only=*/false);
    ASSERT_NE(backend_, nullptr);
    ASSERT_TRUE(CheckpointStore::Open(dir_.Join("snap"), &store_).ok());
  }

  std::unique_ptr<KvBackend> OpenBackend(const std::string& dir, bool read_only) {
    if (GetParam() == "memory") {
      auto memory = std::make_unique<MemoryBackend>();
      if (read_only) {
        const Status s = memory->LoadCheckpoint(dir);
        if (!s.ok()) return nullptr;
      }
      return memory;
    }
#ifdef RAFTKV_HAVE_ROCKSDB
    std::unique_ptr<RocksDbBackend> db;
    RocksDbBackend::Options options;
    options.read_only = read_only;
    options.create_if_missing = !read_only;
    if (!RocksDbBackend::Open(dir, options, &db).ok()) return nullptr;
    return db;
#else
    return nullptr;
#endif
  }

  // What a checkpoint holds: every row, as "k=v;".
  std::string Rows(const std::string& dir) {
    std::unique_ptr<KvBackend> b = OpenBackend(dir, /*read_only=*/true);
    if (b == nullptr) return "(does not open)";
    return RowsOf(*b);
  }
  static std::string RowsOf(const KvBackend& b) {
    std::string rows;
    std::unique_ptr<BackendIterator> it = b.View()->NewIterator("", "");
    for (it->Seek(""); it->Valid(); it->Next()) {
      rows += std::string(it->key()) + "=" + std::string(it->value()) + ";";
    }
    return rows;
  }

  CheckpointStore::Describe Describe() {
    return [this](const std::string& dir, SnapshotMeta* meta) {
      std::unique_ptr<KvBackend> b = OpenBackend(dir, /*read_only=*/true);
      if (b == nullptr) return Status::Corruption("the checkpoint does not open");
      std::string pos;
      bool found = false;
      Status s = b->View()->Get("pos", &pos, &found);
      if (s.ok() && found && std::sscanf(pos.c_str(), "%lu %lu", &meta->last_index, &meta->last_term) != 2) {
        s = Status::Corruption("bad pos");
      }
      meta->config = "config at " + pos;
      return s;
    };
  }

  std::function<Status(const std::string&)> Verifier() {
    return [this](const std::string& dir) {
#ifdef RAFTKV_HAVE_ROCKSDB
      if (GetParam() == "rocksdb") return RocksDbBackend::VerifyDirectory(dir);
#endif
      MemoryBackend scratch;
      return scratch.LoadCheckpoint(dir);
    };
  }

  // Writes `n` rows of `bytes` bytes after key `prefix`, and the position.
  void Load(const std::string& prefix, int n, size_t bytes, uint64_t index, uint64_t term) {
    BackendBatch b;
    for (int i = 0; i < n; ++i) {
      b.Put(prefix + std::to_string(100000 + i), std::string(bytes, static_cast<char>('a' + i % 26)));
    }
    b.Put("pos", std::to_string(index) + " " + std::to_string(term));
    ASSERT_TRUE(backend_->Write(b).ok());
  }

  CheckpointInfo Take() {
    CheckpointInfo info;
    const Status s = store_->Create(backend_.get(), GetParam(), Describe(), &info);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return info;
  }

  // The receiving member's store.
  std::unique_ptr<CheckpointStore> Receiving() {
    std::unique_ptr<CheckpointStore> store;
    EXPECT_TRUE(CheckpointStore::Open(dir_.Join("peer"), &store).ok());
    return store;
  }

  // Every file of the checkpoint (index, term) as file-by-file chunks of
  // `piece` bytes, and its manifest.
  std::vector<Chunk> Chunks(uint64_t index, uint64_t term, size_t piece,
                                              std::string* manifest) {
    const std::string dir = dir_.Join("snap/" + CheckpointStore::DirName(index, term));
    *manifest = ReadFileBytes(file::JoinPath(dir, checkpoint::kManifestName));
    CheckpointContents contents;
    EXPECT_TRUE(checkpoint::DecodeManifest(*manifest, &contents).ok());
    std::vector<Chunk> chunks;
    for (const CheckpointContents::File& f : contents.files) {
      const std::string bytes = ReadFileBytes(file::JoinPath(dir, f.name));
      for (size_t at = 0;;) {
        const size_t n = std::min(piece, bytes.size() - at);
        chunks.push_back(Chunk{f.name, at, bytes.substr(at, n), at + n == bytes.size()});
        at += n;
        if (at == bytes.size()) break;
      }
    }
    return chunks;
  }

  // The stream of the checkpoint (index, term) into `sink`, in pieces.
  static Status Stream(const SnapshotSource& src, size_t piece, SnapshotSink* sink) {
    for (uint64_t offset = 0;;) {
      std::string data;
      bool last = false;
      Status s = src.ReadChunk(offset, piece, &data, &last);
      if (s.ok()) s = sink->Append(offset, data);
      if (!s.ok()) return s;
      offset += data.size();
      if (last) return Status::OK();
    }
  }

  // Nothing but the store's own directories is left in `dir`.
  static std::vector<std::string> Entries(const std::string& dir) {
    std::vector<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  TempDir dir_{"checkpoint_store"};
  std::unique_ptr<KvBackend> backend_;
  std::unique_ptr<CheckpointStore> store_;
};

TEST_P(CheckpointStoreTest, TakesListsAndPrunes) {
  Load("k", 100, 100, 10, 1);
  const CheckpointInfo first = Take();
  EXPECT_EQ(first.last_index, 10u);
  EXPECT_EQ(first.path, dir_.Join("snap/" + CheckpointStore::DirName(10, 1)));
  const std::string first_rows = Rows(first.path);
  Load("k", 50, 7, 20, 2);
  const CheckpointInfo second = Take();
  EXPECT_EQ(second.last_index, 20u);
  EXPECT_EQ(Rows(first.path), first_rows) << "a checkpoint keeps the state of its time";
  EXPECT_NE(Rows(second.path), first_rows);
  EXPECT_EQ(Rows(second.path), RowsOf(*backend_)) << "the newest holds today's state";

  // Nothing applied since: the same checkpoint.
  const CheckpointInfo again = Take();
  EXPECT_EQ(again.path, second.path);

  CheckpointContents contents;
  ASSERT_TRUE(checkpoint::ReadManifest(second.path, &contents).ok());
  EXPECT_EQ(contents.meta.last_index, 20u);
  EXPECT_EQ(contents.meta.last_term, 2u);
  EXPECT_EQ(contents.meta.config, "config at 20 2");
  EXPECT_EQ(contents.engine, GetParam());
  EXPECT_EQ(contents.total_bytes(), second.bytes);
  Status s = checkpoint::VerifyFiles(second.path, contents);
  EXPECT_TRUE(s.ok()) << s.ToString();

  Load("k", 1, 1, 30, 2);
  Take();
  std::vector<CheckpointInfo> all;
  ASSERT_TRUE(store_->List(&all).ok());
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].last_index, 10u);
  EXPECT_EQ(all[2].last_index, 30u);
  ASSERT_TRUE(store_->Prune(1).ok());
  ASSERT_TRUE(store_->List(&all).ok());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].last_index, 30u);
  EXPECT_EQ(Entries(dir_.Join("snap")), std::vector<std::string>{CheckpointStore::DirName(30, 2)});
}

TEST_P(CheckpointStoreTest, VerifyFilesFindsEveryKindOfDamage) {
  Load("k", 200, 50, 5, 1);
  const CheckpointInfo info = Take();
  CheckpointContents contents;
  ASSERT_TRUE(checkpoint::ReadManifest(info.path, &contents).ok());
  ASSERT_FALSE(contents.files.empty());
  const std::string victim = file::JoinPath(info.path, contents.files.back().name);
  const std::string original = ReadFileBytes(victim);
  ASSERT_FALSE(original.empty());

  std::string flipped = original;
  flipped[flipped.size() / 2] ^= 0x01;
  WriteFileBytes(victim, flipped);
  EXPECT_FALSE(checkpoint::VerifyFiles(info.path, contents).ok()) << "a flipped byte";
  WriteFileBytes(victim, original.substr(0, original.size() - 1));
  EXPECT_FALSE(checkpoint::VerifyFiles(info.path, contents).ok()) << "a truncated file";
  fs::remove(victim);
  EXPECT_FALSE(checkpoint::VerifyFiles(info.path, contents).ok()) << "a missing file";
  WriteFileBytes(victim, original);
  ASSERT_TRUE(checkpoint::VerifyFiles(info.path, contents).ok());
  WriteFileBytes(file::JoinPath(info.path, "extra"), "x");
  EXPECT_FALSE(checkpoint::VerifyFiles(info.path, contents).ok()) << "a file the manifest does not list";
}

TEST_P(CheckpointStoreTest, ATransferArrivesWholeAndOpens) {
  Load("k", 300, 200, 40, 3);
  Load("j", 10, 0, 41, 3);
  const CheckpointInfo sent = Take();
  std::string manifest;
  const std::vector<Chunk> chunks = Chunks(41, 3, 1000, &manifest);
  ASSERT_GT(chunks.size(), 10u);

  std::unique_ptr<CheckpointStore> peer = Receiving();
  std::unique_ptr<CheckpointReceiver> r;
  ASSERT_TRUE(peer->BeginReceive(41, 3, manifest, &r).ok());
  for (const Chunk& c : chunks) {
    const Status s = r->Append(c.file, c.offset, c.data, c.file_done);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_EQ(r->bytes_received(), sent.bytes);
  CheckpointInfo installed;
  const Status s = r->Finish(Verifier(), &installed);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(installed.path, dir_.Join("peer/" + CheckpointStore::DirName(41, 3)));
  EXPECT_EQ(Rows(installed.path), Rows(sent.path));
  CheckpointContents contents;
  ASSERT_TRUE(checkpoint::ReadManifest(installed.path, &contents).ok());
  EXPECT_TRUE(checkpoint::VerifyFiles(installed.path, contents).ok());
  EXPECT_EQ(Entries(dir_.Join("peer")), std::vector<std::string>{CheckpointStore::DirName(41, 3)});
}

// The stream a leader sends (manifest, then the files), cut in pieces that
// straddle the manifest's end and the files' ends.
TEST_P(CheckpointStoreTest, AStreamArrivesWholeWhateverItsPieces) {
  Load("k", 300, 200, 40, 3);
  const CheckpointInfo sent = Take();
  std::unique_ptr<CheckpointSource> src;
  ASSERT_TRUE(store_->OpenSource(40, 3, &src).ok());
  EXPECT_EQ(src->format(), SnapshotFormat::kCheckpoint);
  EXPECT_GT(src->size(), sent.bytes);
  int round = 0;
  for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, size_t{1} << 30}) {
    if (piece == 1 && GetParam() == "rocksdb") continue;  // too slow for megabytes
    std::unique_ptr<CheckpointStore> peer;
    ASSERT_TRUE(CheckpointStore::Open(dir_.Join("peer" + std::to_string(++round)), &peer).ok());
    std::unique_ptr<SnapshotSink> sink = peer->BeginReceiveStream(40, 3, Verifier());
    Status s = Stream(*src, piece, sink.get());
    ASSERT_TRUE(s.ok()) << piece << ": " << s.ToString();
    EXPECT_EQ(sink->bytes_received(), src->size());
    SnapshotFileInfo installed;
    s = sink->Finish(&installed);
    ASSERT_TRUE(s.ok()) << piece << ": " << s.ToString();
    EXPECT_EQ(installed.last_index, 40u);
    EXPECT_EQ(Rows(installed.path), Rows(sent.path)) << piece;
  }
  // Cut short, or from another position: nothing installed.
  std::unique_ptr<CheckpointStore> peer = Receiving();
  std::unique_ptr<SnapshotSink> sink = peer->BeginReceiveStream(40, 3, Verifier());
  std::string head;
  bool last = false;
  ASSERT_TRUE(src->ReadChunk(0, 10, &head, &last).ok());
  ASSERT_TRUE(sink->Append(0, head).ok());
  EXPECT_FALSE(sink->Append(0, head).ok()) << "a repeat";
  SnapshotFileInfo installed;
  EXPECT_FALSE(sink->Finish(&installed).ok()) << "inside the manifest";
  sink = peer->BeginReceiveStream(41, 3, Verifier());
  EXPECT_FALSE(Stream(*src, 4096, sink.get()).ok()) << "another index";
  sink = peer->BeginReceiveStream(40, 3, Verifier());
  std::string all;
  ASSERT_TRUE(src->ReadChunk(0, src->size(), &all, &last).ok());
  ASSERT_TRUE(sink->Append(0, all.substr(0, all.size() - 1)).ok());
  EXPECT_FALSE(sink->Finish(&installed).ok()) << "the last byte missing";
  sink.reset();
  EXPECT_TRUE(Entries(dir_.Join("peer")).empty());
}

TEST_P(CheckpointStoreTest, ADamagedTransferIsRefusedAndLeavesNothing) {
  Load("k", 300, 200, 40, 3);
  Take();
  std::string manifest;
  const std::vector<Chunk> good = Chunks(40, 3, 4096, &manifest);
  ASSERT_GT(good.size(), 3u);
  std::unique_ptr<CheckpointStore> peer = Receiving();

  // Each case changes the chunks (or the verification); the transfer must
  // fail, at Append or at Finish, and leave the peer's directory empty.
  struct Case {
    std::string what;
    std::function<void(std::vector<Chunk>*)> change;
    bool verify_fails = false;
  };
  const std::vector<Case> cases = {
      {"a flipped byte", [](auto* c) { c->at(c->size() / 2).data[0] ^= 0x20; }},
      {"the last chunk missing", [](auto* c) { c->pop_back(); }},
      {"a chunk missing in the middle", [](auto* c) { c->erase(c->begin() + 1); }},
      {"a chunk twice", [](auto* c) { c->insert(c->begin() + 1, c->at(1)); }},
      {"a chunk past a file's end",
       [](auto* c) {
         for (auto& chunk : *c) {
           if (chunk.file_done) {
             chunk.data += "x";
             break;
           }
         }
       }},
      {"a file that ends early",
       [](auto* c) {
         for (auto& chunk : *c) {
           if (chunk.file_done && !chunk.data.empty()) {
             chunk.data.pop_back();
             break;
           }
         }
       }},
      {"an extra file", [](auto* c) { c->push_back(Chunk{"extra", 0, "x", true}); }},
      {"another file's name", [](auto* c) { c->at(0).file = "../escape"; }},
      {"a store that does not verify", [](auto*) {}, true},
  };
  for (const Case& k : cases) {
    std::vector<Chunk> chunks = good;
    k.change(&chunks);
    std::unique_ptr<CheckpointReceiver> r;
    ASSERT_TRUE(peer->BeginReceive(40, 3, manifest, &r).ok()) << k.what;
    Status s;
    for (const Chunk& c : chunks) {
      s = r->Append(c.file, c.offset, c.data, c.file_done);
      if (!s.ok()) break;
    }
    if (s.ok()) {
      CheckpointInfo installed;
      s = r->Finish(k.verify_fails ? [](const std::string&) { return Status::Corruption("refused"); }
                                   : Verifier(),
                    &installed);
    }
    EXPECT_FALSE(s.ok()) << k.what;
    r.reset();
    EXPECT_TRUE(Entries(dir_.Join("peer")).empty()) << k.what;
  }
}

TEST_P(CheckpointStoreTest, AHostileManifestIsRefusedBeforeAnythingIsWritten) {
  Load("k", 10, 10, 7, 2);
  Take();
  std::string manifest;
  Chunks(7, 2, 4096, &manifest);
  std::unique_ptr<CheckpointStore> peer = Receiving();
  std::unique_ptr<CheckpointReceiver> r;
  EXPECT_FALSE(peer->BeginReceive(8, 2, manifest, &r).ok()) << "another index";
  EXPECT_FALSE(peer->BeginReceive(7, 3, manifest, &r).ok()) << "another term";
  for (size_t i = 0; i < manifest.size(); i += 7) {
    std::string flipped = manifest;
    flipped[i] ^= 0x04;
    EXPECT_FALSE(peer->BeginReceive(7, 2, flipped, &r).ok()) << "flip at " << i;
    EXPECT_FALSE(peer->BeginReceive(7, 2, manifest.substr(0, i), &r).ok()) << "cut at " << i;
  }
  EXPECT_FALSE(peer->BeginReceive(7, 2, std::string(checkpoint::kMaxManifestBytes + 1, 'x'), &r).ok());

  CheckpointContents contents;
  ASSERT_TRUE(checkpoint::DecodeManifest(manifest, &contents).ok());
  const std::vector<std::string> bad_names = {"", ".", "..", "a/b", "..\\b", "MANIFEST.raftkv",
                                              std::string("a\nb"), std::string(300, 'n')};
  for (const std::string& name : bad_names) {
    CheckpointContents bad = contents;
    bad.files.push_back(CheckpointContents::File{name, 1, 0});
    EXPECT_FALSE(peer->BeginReceive(7, 2, checkpoint::EncodeManifest(bad), &r).ok()) << name;
  }
  CheckpointContents twice = contents;
  twice.files.push_back(twice.files.back());
  EXPECT_FALSE(peer->BeginReceive(7, 2, checkpoint::EncodeManifest(twice), &r).ok()) << "a name twice";
  CheckpointContents many = contents;
  many.files.clear();
  for (size_t i = 0; i <= checkpoint::kMaxFiles; ++i) {
    many.files.push_back(CheckpointContents::File{"f" + std::to_string(1000000 + i), 0, 0});
  }
  EXPECT_FALSE(peer->BeginReceive(7, 2, checkpoint::EncodeManifest(many), &r).ok()) << "too many files";
  EXPECT_TRUE(Entries(dir_.Join("peer")).empty());
}

TEST_P(CheckpointStoreTest, OpenRemovesWhatACrashLeftHalfDone) {
  Load("k", 10, 10, 7, 2);
  const CheckpointInfo kept = Take();
  for (const std::string& name : {std::string("ckpt-new.tmp"), std::string("ckpt-new.tmp.tmp"),
                                  "recv-" + CheckpointStore::DirName(9, 2).substr(5) + ".tmp"}) {
    fs::create_directories(dir_.Join("snap/" + name));
    WriteFileBytes(dir_.Join("snap/" + name + "/000001.sst"), "half");
  }
  WriteFileBytes(dir_.Join("snap/unrelated.tmp"), "a file, not ours");
  store_.reset();
  ASSERT_TRUE(CheckpointStore::Open(dir_.Join("snap"), &store_).ok());
  EXPECT_EQ(Entries(dir_.Join("snap")),
            (std::vector<std::string>{CheckpointStore::DirName(7, 2), "unrelated.tmp"}));
  EXPECT_EQ(Rows(kept.path), RowsOf(*backend_));
}

INSTANTIATE_TEST_SUITE_P(Engines, CheckpointStoreTest, testing::ValuesIn(testing_util::BackendEngines()),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });

#ifdef RAFTKV_HAVE_ROCKSDB
class RocksDbCheckpointTest : public CheckpointStoreTest {};

// RocksDB gives each SST file's CRC-32C, computed as it wrote the file:
// a checkpoint reads only the small files (MANIFEST, OPTIONS, CURRENT), and
// the CRCs it took over are the files' (VerifyFiles reads them).
TEST_P(RocksDbCheckpointTest, SstCrcsComeFromTheEngineNotFromReadingTheFiles) {
  Load("k", 2000, 1000, 10, 1);
  const CheckpointInfo first = Take();
  EXPECT_LT(first.crc_bytes_read, first.bytes / 4) << first.crc_bytes_read << " of " << first.bytes;
  CheckpointContents first_contents;
  ASSERT_TRUE(checkpoint::ReadManifest(first.path, &first_contents).ok());
  Status verified = checkpoint::VerifyFiles(first.path, first_contents);
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  Load("m", 10, 100, 11, 1);
  const CheckpointInfo second = Take();
  EXPECT_LT(second.crc_bytes_read, second.bytes / 4) << second.crc_bytes_read << " of " << second.bytes;
  CheckpointContents contents;
  ASSERT_TRUE(checkpoint::ReadManifest(second.path, &contents).ok());
  const Status s = checkpoint::VerifyFiles(second.path, contents);
  EXPECT_TRUE(s.ok()) << "the CRCs taken over are right: " << s.ToString();
}

// A store whose files are what the manifest says but whose blocks are not
// sound (a sender that checksummed a damaged file) fails the verification.
TEST_P(RocksDbCheckpointTest, VerifyDirectoryReadsEveryBlock) {
  Load("k", 2000, 1000, 10, 1);
  const CheckpointInfo info = Take();
  Status s = RocksDbBackend::VerifyDirectory(info.path);
  ASSERT_TRUE(s.ok()) << s.ToString();
  CheckpointContents before;
  ASSERT_TRUE(checkpoint::ReadManifest(info.path, &before).ok());
  std::string sst;
  for (const CheckpointContents::File& f : before.files) {
    if (f.name.size() > 4 && f.name.compare(f.name.size() - 4, 4, ".sst") == 0) sst = f.name;
  }
  ASSERT_FALSE(sst.empty());
  // A copy, not the hard link the database still shares.
  const std::string path = file::JoinPath(info.path, sst);
  std::string bytes = ReadFileBytes(path);
  fs::remove(path);
  bytes[bytes.size() / 3] ^= 0x10;
  WriteFileBytes(path, bytes);
  s = RocksDbBackend::VerifyDirectory(info.path);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_EQ(Entries(info.path), [&] {
    std::vector<std::string> names = {checkpoint::kManifestName};
    for (const CheckpointContents::File& f : before.files) names.push_back(f.name);
    std::sort(names.begin(), names.end());
    return names;
  }()) << "a read-only open adds no file";
}

// The whole-file checksums the store has RocksDB record are RocksDB's own
// CRC-32C, byte for byte, whatever the pieces a file is written in; a file
// checksummed by another function gets no generator.
TEST(RocksDbFileChecksumTest, Crc32cFileChecksumsAreRocksDbsOwn) {
  const std::shared_ptr<rocksdb::FileChecksumGenFactory> ours = Crc32cFileChecksums();
  const std::shared_ptr<rocksdb::FileChecksumGenFactory> theirs = rocksdb::GetFileChecksumGenCrc32cFactory();
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::string data(rng() % 20000, '\0');
    for (char& c : data) c = static_cast<char>(rng());
    rocksdb::FileChecksumGenContext context;
    context.file_name = "000007.sst";
    std::unique_ptr<rocksdb::FileChecksumGenerator> a = ours->CreateFileChecksumGenerator(context);
    std::unique_ptr<rocksdb::FileChecksumGenerator> b = theirs->CreateFileChecksumGenerator(context);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    for (size_t at = 0; at < data.size();) {
      const size_t n = std::min<size_t>(data.size() - at, rng() % 5000);
      a->Update(data.data() + at, n);
      b->Update(data.data() + at, n);
      at += n;
    }
    a->Finalize();
    b->Finalize();
    EXPECT_EQ(a->GetChecksum(), b->GetChecksum()) << data.size() << " bytes";
    EXPECT_STREQ(a->Name(), b->Name());
  }
  rocksdb::FileChecksumGenContext other;
  other.requested_checksum_func_name = "FileChecksumXxh64";
  EXPECT_EQ(ours->CreateFileChecksumGenerator(other), nullptr);
  other.requested_checksum_func_name = rocksdb::kStandardDbFileChecksumFuncName;
  EXPECT_NE(ours->CreateFileChecksumGenerator(other), nullptr);
}

INSTANTIATE_TEST_SUITE_P(RocksDb, RocksDbCheckpointTest, testing::Values(std::string("rocksdb")),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });
#endif

}  // namespace
}  // namespace raftkv
