#include "storage/memory_backend.h"

#include <utility>

#include "storage/coding.h"
#include "storage/crc32c.h"
#include "storage/file_util.h"

namespace raftkv {
namespace {

using coding::DecodeFixed32;
using coding::DecodeFixed64;
using coding::PutFixed32;
using coding::PutFixed64;

constexpr char kImageMagic[] = "RKVMEM01";
constexpr size_t kImageMagicSize = sizeof(kImageMagic) - 1;
constexpr uint32_t kTrailerMark = 0xFFFFFFFFu;
constexpr size_t kWriteChunk = 1 << 20;

class MemoryIterator final : public BackendIterator {
 public:
  MemoryIterator(MemoryBackend::Tree tree, std::string_view lower, std::string_view upper)
      : tree_(std::move(tree)), lower_(lower), upper_(upper) {}
  void Seek(std::string_view target) override {
    it_ = tree_.lower_bound(target < lower_ ? lower_ : std::string(target));
  }
  bool Valid() const override {
    return it_.Valid() && (upper_.empty() || it_.key() < upper_);
  }
  void Next() override { it_.Next(); }
  std::string_view key() const override { return it_.key(); }
  std::string_view value() const override { return it_.value(); }
  Status status() const override { return Status::OK(); }

 private:
  const MemoryBackend::Tree tree_;  // holds the nodes it_ walks
  const std::string lower_;
  const std::string upper_;
  MemoryBackend::Tree::Iterator it_;
};

class MemoryView final : public BackendView {
 public:
  explicit MemoryView(MemoryBackend::Tree tree) : tree_(std::move(tree)) {}
  Status Get(std::string_view key, std::string* value, bool* found) const override {
    const std::string* v = tree_.find(std::string(key));
    *found = v != nullptr;
    if (*found) *value = *v;
    return Status::OK();
  }
  std::unique_ptr<BackendIterator> NewIterator(std::string_view lower,
                                               std::string_view upper) const override {
    return std::make_unique<MemoryIterator>(tree_, lower, upper);
  }
  const MemoryBackend::Tree& tree() const { return tree_; }

 private:
  const MemoryBackend::Tree tree_;
};

// One record of the dump file: lengths, bytes, the crc of all of them.
void AppendRecord(const std::string& key, const std::string& value, std::string* out) {
  const size_t start = out->size();
  PutFixed32(out, static_cast<uint32_t>(key.size()));
  PutFixed32(out, static_cast<uint32_t>(value.size()));
  out->append(key);
  out->append(value);
  PutFixed32(out, crc32c::Value(out->data() + start, out->size() - start));
}

void AppendTrailer(uint64_t count, std::string* out) {
  const size_t start = out->size();
  PutFixed32(out, kTrailerMark);
  PutFixed64(out, count);
  PutFixed32(out, crc32c::Value(out->data() + start, out->size() - start));
}

// Writes the dump of `tree` to `path` chunk by chunk and fsyncs it.
Status WriteDump(const MemoryBackend::Tree& tree, const std::string& path) {
  file::File f;
  Status s = file::File::Open(path, file::OpenMode::kCreateTruncate, &f);
  std::string buf(kImageMagic, kImageMagicSize);
  uint64_t offset = 0;
  for (auto it = tree.begin(); s.ok() && it.Valid(); it.Next()) {
    AppendRecord(it.key(), it.value(), &buf);
    if (buf.size() < kWriteChunk) continue;
    s = f.WriteAt(buf.data(), buf.size(), offset);
    offset += buf.size();
    buf.clear();
  }
  AppendTrailer(tree.size(), &buf);
  if (s.ok()) s = f.WriteAt(buf.data(), buf.size(), offset);
  if (s.ok()) s = f.Sync();
  if (s.ok()) s = f.Close();
  return s;
}

// Reads the record at *pos of `data` into `tree`; sets *done at the trailer.
Status ReadRecord(const std::string& data, size_t* pos, MemoryBackend::Tree* tree, bool* done) {
  const auto corrupt = [&](const char* what) {
    return Status::Corruption(std::string(MemoryBackend::kDumpFile) + ": " + what + " at offset " +
                              std::to_string(*pos));
  };
  const size_t start = *pos;
  if (data.size() - start < 8) return corrupt("truncated record");
  const uint32_t key_len = DecodeFixed32(data.data() + start);
  const bool trailer = key_len == kTrailerMark;
  const uint64_t header = trailer ? 4 : 8;  // the mark, or the two lengths
  const uint64_t body = trailer ? 8 : uint64_t{key_len} + DecodeFixed32(data.data() + start + 4);
  if (data.size() - start < header + body + 4) return corrupt("truncated record");
  const size_t end = start + static_cast<size_t>(header + body);
  if (DecodeFixed32(data.data() + end) != crc32c::Value(data.data() + start, end - start)) {
    return corrupt("checksum mismatch");
  }
  *pos = end + 4;
  if (trailer) {
    *done = true;
    if (DecodeFixed64(data.data() + start + 4) != tree->size()) return corrupt("wrong key count");
    return *pos == data.size() ? Status::OK() : corrupt("bytes after the trailer");
  }
  tree->insert_or_assign(data.substr(start + 8, key_len), data.substr(start + 8 + key_len,
                                                                      end - start - 8 - key_len));
  return Status::OK();
}

}  // namespace

Status MemoryBackend::Write(const BackendBatch& batch) {
  MutexLock lock(&mu_);
  for (const BackendBatch::Op& op : batch.ops()) {
    switch (op.type) {
      case BackendBatch::OpType::kPut: {
        EraseLocked(op.key);
        bytes_ += op.key.size() + op.value.size();
        tree_.insert_or_assign(op.key, op.value);
        break;
      }
      case BackendBatch::OpType::kDelete: EraseLocked(op.key); break;
      case BackendBatch::OpType::kDeleteRange: DeleteRangeLocked(op.key, op.value); break;
    }
  }
  return Status::OK();
}

void MemoryBackend::EraseLocked(const std::string& key) {
  const std::string* old = tree_.find(key);
  if (old == nullptr) return;
  bytes_ -= key.size() + old->size();
  tree_.erase(key);
}

void MemoryBackend::DeleteRangeLocked(const std::string& begin, const std::string& end) {
  std::vector<std::string> doomed;
  for (auto it = tree_.lower_bound(begin); it.Valid() && it.key() < end; it.Next()) {
    doomed.push_back(it.key());
  }
  for (const std::string& key : doomed) EraseLocked(key);
}

std::shared_ptr<const BackendView> MemoryBackend::View() const {
  MutexLock lock(&mu_);
  return std::make_shared<MemoryView>(tree_);
}

BackendStats MemoryBackend::Stats() const {
  MutexLock lock(&mu_);
  BackendStats stats;
  stats.live_bytes = bytes_;
  return stats;
}

Status MemoryBackend::Checkpoint(const std::string& dir, CheckpointManifest* out) {
  Tree image;
  {
    MutexLock lock(&mu_);
    image = tree_;
  }
  bool created = false;
  Status s = file::CreateDirs(dir, &created);
  if (s.ok() && !created) return Status::FailedPrecondition(dir + ": already exists");
  if (s.ok()) s = WriteDump(image, file::JoinPath(dir, kDumpFile));
  if (s.ok()) s = file::SyncDir(dir);
  if (s.ok()) s = file::SyncDir(file::DirName(dir));
  if (s.ok()) s = ListCheckpointFiles(dir, out);
  return s;
}

Status MemoryBackend::LoadCheckpoint(const std::string& dir) {
  file::File f;
  std::string data;
  Status s = file::File::Open(file::JoinPath(dir, kDumpFile), file::OpenMode::kReadOnly, &f);
  if (s.ok()) s = f.ReadAll(&data);
  if (!s.ok()) return s;
  if (data.compare(0, kImageMagicSize, kImageMagic) != 0) {
    return Status::Corruption(file::JoinPath(dir, kDumpFile) + ": not a memory engine dump");
  }
  Tree tree;
  uint64_t bytes = 0;
  size_t pos = kImageMagicSize;
  for (bool done = false; s.ok() && !done;) s = ReadRecord(data, &pos, &tree, &done);
  if (!s.ok()) return s;
  for (auto it = tree.begin(); it.Valid(); it.Next()) bytes += it.key().size() + it.value().size();
  MutexLock lock(&mu_);
  tree_ = std::move(tree);
  bytes_ = bytes;
  return Status::OK();
}

}  // namespace raftkv
