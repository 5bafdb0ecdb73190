#include "storage/snapshot_store.h"

#include <algorithm>
#include <iterator>
#include <tuple>
#include <utility>

#include <glog/logging.h>

#include "storage/position_name.h"

namespace raftkv {
namespace {

constexpr char kPrefix[] = "snap-";
constexpr size_t kPrefixLength = sizeof(kPrefix) - 1;
constexpr char kSuffix[] = ".snap";
constexpr char kTmpSuffix[] = ".tmp";            // written locally
constexpr char kRecvTmpSuffix[] = ".recv.tmp";   // received from a peer

// A snapshot file being written front to back, durably. Frame headers are
// tiny: they are gathered with the following payload into one buffer of up
// to kCoalesceBytes instead of a write each. The file is synced every
// kSyncEveryBytes as it is written, not once at the end: a file system that
// orders its journal (ext4 data=ordered) makes the log's next fdatasync
// wait for every dirty byte written before it, and a single final fsync
// would leave hundreds of MB dirty: the writes being acknowledged meanwhile
// would stall for as long as the disk takes to write them all.
class ImageFile {
 public:
  Status Open(const std::string& path) { return file::File::Open(path, file::OpenMode::kCreateTruncate, &f_); }
  // Appends `piece`, keeping the CRC32C of every byte so far.
  Status Append(std::string_view piece) {
    crc_ = snapshot_format::Crc(crc_, piece);
    if (pending_.size() + piece.size() > kCoalesceBytes && !pending_.empty()) {
      Status st = Flush();
      if (!st.ok()) return st;
    }
    if (piece.size() > kCoalesceBytes) {
      pending_.assign(piece.data(), piece.size());
      return Flush();
    }
    pending_.append(piece.data(), piece.size());
    return Status::OK();
  }
  uint32_t crc() const { return crc_; }
  // Writes what is pending, syncs and closes.
  Status Finish() {
    Status s = pending_.empty() ? Status::OK() : Flush();
    if (s.ok()) s = f_.Sync();
    if (s.ok()) s = f_.Close();
    return s;
  }

 private:
  static constexpr size_t kCoalesceBytes = 1 << 20;
  static constexpr uint64_t kSyncEveryBytes = 1 << 20;
  Status Flush() {
    Status st = f_.WriteAt(pending_.data(), pending_.size(), offset_);
    offset_ += pending_.size();
    pending_.clear();
    if (st.ok() && offset_ - synced_ >= kSyncEveryBytes) {
      st = f_.Sync();
      synced_ = offset_;
    }
    return st;
  }

  file::File f_;
  std::string pending_;
  uint64_t offset_ = 0;
  uint64_t synced_ = 0;
  uint32_t crc_ = 0;
};

// Writes the whole file encoding of `image` to `path`, then fsyncs it.
Status WriteImage(const std::string& path, const SnapshotWriter& image) {
  ImageFile f;
  Status s = f.Open(path);
  if (s.ok()) s = ForEachSnapshotFilePiece(image, [&](std::string_view piece) { return f.Append(piece); });
  if (s.ok()) s = f.Finish();
  return s;
}

// Writes to `path` the snapshot `encode` produces into a writer that spills
// each full chunk into the file, then fsyncs it.
Status WriteStreamedImage(const std::string& path, const SnapshotMeta& meta,
                          const std::function<void(SnapshotWriter*)>& encode) {
  namespace f = snapshot_format;
  ImageFile file;
  Status s = file.Open(path);
  const std::string header = f::HeaderPayload(meta);
  if (s.ok()) s = file.Append(f::Preamble());
  if (s.ok()) s = file.Append(f::FrameHeader(f::kHeaderFrame, header));
  if (s.ok()) s = file.Append(header);
  if (!s.ok()) return s;
  uint64_t data_frames = 0;
  SnapshotWriter writer;
  writer.meta() = meta;
  writer.SpillTo([&](const std::string& chunk) {
    ++data_frames;
    Status st = file.Append(f::FrameHeader(f::kDataFrame, chunk));
    return st.ok() ? file.Append(chunk) : st;
  });
  encode(&writer);
  s = writer.FinishSpill();
  if (s.ok()) s = file.Append(f::TrailerFrame(writer.record_count(), data_frames, file.crc()));
  if (s.ok()) s = file.Finish();
  return s;
}

}  // namespace

// ---- names ----

std::string SnapshotStore::FileName(uint64_t last_index, uint64_t last_term) {
  return position_name::Format(kPrefix, last_index, last_term, kSuffix);
}

bool SnapshotStore::ParseFileName(const std::string& name, uint64_t* last_index,
                                  uint64_t* last_term) {
  return position_name::Parse(name, kPrefix, kSuffix, last_index, last_term);
}

// ---- SnapshotStore ----

Status SnapshotStore::Open(const std::string& dir, std::unique_ptr<SnapshotStore>* out) {
  Status s = file::CreateDirsDurably(dir);
  if (!s.ok()) return s;
  std::vector<std::string> names;
  s = file::ListFiles(dir, &names);
  if (!s.ok()) return s;
  bool removed = false;
  for (const std::string& name : names) {
    if (name.compare(0, kPrefixLength, kPrefix) == 0 && position_name::EndsWith(name, kTmpSuffix)) {
      LOG(INFO) << "removing unfinished snapshot file " << file::JoinPath(dir, name);
      s = file::Remove(file::JoinPath(dir, name));
      if (!s.ok()) return s;
      removed = true;
    }
  }
  if (removed) {
    s = file::SyncDir(dir);
    if (!s.ok()) return s;
  }
  out->reset(new SnapshotStore(dir));
  return Status::OK();
}

Status SnapshotStore::List(std::vector<SnapshotFileInfo>* files) const {
  files->clear();
  std::vector<std::string> names;
  Status s = file::ListFiles(dir_, &names);
  if (!s.ok()) return s;
  for (const std::string& name : names) {
    SnapshotFileInfo info;
    if (!ParseFileName(name, &info.last_index, &info.last_term)) continue;
    info.path = file::JoinPath(dir_, name);
    files->push_back(std::move(info));
  }
  std::sort(files->begin(), files->end(), [](const SnapshotFileInfo& a, const SnapshotFileInfo& b) {
    return std::tie(a.last_index, a.last_term) < std::tie(b.last_index, b.last_term);
  });
  return Status::OK();
}

Status SnapshotStore::Write(const SnapshotWriter& image, SnapshotFileInfo* written) {
  return WriteDurably(image.meta(), [&image](const std::string& tmp) { return WriteImage(tmp, image); },
                      written);
}

Status SnapshotStore::WriteStreamed(const SnapshotMeta& meta,
                                    const std::function<void(SnapshotWriter*)>& encode,
                                    SnapshotFileInfo* written) {
  return WriteDurably(meta, [&](const std::string& tmp) { return WriteStreamedImage(tmp, meta, encode); }, written);
}

Status SnapshotStore::WriteDurably(const SnapshotMeta& meta,
                                   const std::function<Status(const std::string& tmp)>& write,
                                   SnapshotFileInfo* written) {
  const std::string name = FileName(meta.last_index, meta.last_term);
  const std::string path = file::JoinPath(dir_, name);
  const std::string tmp = path + kTmpSuffix;
  Status s = write(tmp);
  if (s.ok()) s = file::Rename(tmp, path);
  if (s.ok()) s = file::SyncDir(dir_);
  if (!s.ok()) {
    file::Remove(tmp);
    return s;
  }
  written->last_index = meta.last_index;
  written->last_term = meta.last_term;
  written->path = path;
  return Status::OK();
}

Status SnapshotStore::LoadNewestValid(SnapshotTarget* target, SnapshotLoadResult* result) const {
  *result = SnapshotLoadResult();
  std::vector<SnapshotFileInfo> files;
  Status s = List(&files);
  if (!s.ok()) return s;
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    std::unique_ptr<SnapshotReader> reader;
    s = SnapshotReader::Open(it->path, &reader);
    if (s.ok() && (reader->meta().last_index != it->last_index ||
                   reader->meta().last_term != it->last_term)) {
      s = Status::Corruption(it->path + ": header says index " +
                             std::to_string(reader->meta().last_index) + " term " +
                             std::to_string(reader->meta().last_term) +
                             ", which does not match the file name");
    }
    if (s.ok()) s = target->Restore(reader.get());
    if (s.ok()) {
      result->found = true;
      result->meta = reader->meta();
      result->path = it->path;
      if (!result->rejected.empty()) {
        LOG(WARNING) << "loaded the older snapshot " << it->path << " (index " << it->last_index
                     << ", term " << it->last_term << ") after skipping "
                     << result->rejected.size() << " unusable newer snapshot(s)";
      }
      return Status::OK();
    }
    LOG(ERROR) << "snapshot file " << it->path << " is unusable, skipping it: " << s.ToString()
               << (std::next(it) != files.rend() ? "; trying the previous snapshot"
                                                 : "; no older snapshot left");
    result->rejected.push_back(s.ToString());
  }
  return Status::OK();
}

Status SnapshotStore::Prune(size_t keep) {
  if (keep == 0) return Status::InvalidArgument("Prune: keep must be at least 1");
  std::vector<SnapshotFileInfo> files;
  Status s = List(&files);
  if (!s.ok() || files.size() <= keep) return s;
  for (size_t i = 0; i + keep < files.size(); ++i) {
    s = file::Remove(files[i].path);
    if (!s.ok()) return s;
  }
  return file::SyncDir(dir_);
}

Status SnapshotStore::OpenSource(const SnapshotFileInfo& info,
                                 std::unique_ptr<SnapshotFileSource>* out) const {
  std::unique_ptr<SnapshotFileSource> src(new SnapshotFileSource());
  Status s = file::File::Open(info.path, file::OpenMode::kReadOnly, &src->file_);
  if (s.ok()) s = src->file_.Size(&src->size_);
  if (!s.ok()) return s;
  *out = std::move(src);
  return Status::OK();
}

Status SnapshotStore::BeginReceive(uint64_t last_index, uint64_t last_term,
                                   std::unique_ptr<SnapshotReceiver>* out) {
  std::unique_ptr<SnapshotReceiver> r(new SnapshotReceiver());
  r->dir_ = dir_;
  r->final_path_ = file::JoinPath(dir_, FileName(last_index, last_term));
  r->tmp_path_ = r->final_path_ + kRecvTmpSuffix;
  r->last_index_ = last_index;
  r->last_term_ = last_term;
  Status s = file::File::Open(r->tmp_path_, file::OpenMode::kCreateTruncate, &r->file_);
  if (!s.ok()) return s;
  *out = std::move(r);
  return Status::OK();
}

// ---- SnapshotFileSource ----

Status SnapshotFileSource::ReadChunk(uint64_t offset, size_t max_bytes, std::string* out,
                                     bool* last) const {
  if (offset > size_) {
    return Status::InvalidArgument(path() + ": chunk offset " + std::to_string(offset) +
                                   " is past the end (" + std::to_string(size_) + " bytes)");
  }
  const size_t n = static_cast<size_t>(std::min<uint64_t>(max_bytes, size_ - offset));
  Status s = file_.ReadAt(offset, n, out);
  if (!s.ok()) return s;
  if (out->size() != n) {
    return Status::IOError(path() + ": short read at offset " + std::to_string(offset));
  }
  *last = offset + n == size_;
  return Status::OK();
}

// ---- SnapshotReceiver ----

SnapshotReceiver::~SnapshotReceiver() { Abort(); }

void SnapshotReceiver::Abort() {
  if (closed_) return;
  closed_ = true;
  file_.Close();
  file::Remove(tmp_path_);
}

Status SnapshotReceiver::Append(uint64_t offset, std::string_view data) {
  if (closed_) return Status::InvalidArgument(tmp_path_ + ": transfer already finished");
  if (offset != received_) {
    return Status::InvalidArgument(tmp_path_ + ": chunk at offset " + std::to_string(offset) +
                                   " but " + std::to_string(received_) +
                                   " bytes received so far (" +
                                   (offset > received_ ? "gap" : "overlap") + ")");
  }
  Status s = file_.WriteAt(data.data(), data.size(), offset);
  if (!s.ok()) return s;
  received_ += data.size();
  return Status::OK();
}

Status SnapshotReceiver::Finish(SnapshotFileInfo* installed) {
  if (closed_) return Status::InvalidArgument(tmp_path_ + ": transfer already finished");
  Status s = file_.Sync();
  if (s.ok()) s = file_.Close();
  std::unique_ptr<SnapshotReader> reader;
  if (s.ok()) s = SnapshotReader::Open(tmp_path_, &reader);
  if (s.ok() && (reader->meta().last_index != last_index_ ||
                 reader->meta().last_term != last_term_)) {
    s = Status::Corruption(tmp_path_ + ": received snapshot of index " +
                           std::to_string(reader->meta().last_index) + " term " +
                           std::to_string(reader->meta().last_term) + ", expected index " +
                           std::to_string(last_index_) + " term " + std::to_string(last_term_));
  }
  if (s.ok()) s = reader->VerifyAll();
  reader.reset();
  if (s.ok()) s = file::Rename(tmp_path_, final_path_);
  if (s.ok()) s = file::SyncDir(dir_);
  if (!s.ok()) {
    LOG(WARNING) << "refusing received snapshot: " << s.ToString();
    Abort();
    return s;
  }
  closed_ = true;
  installed->last_index = last_index_;
  installed->last_term = last_term_;
  installed->path = final_path_;
  return Status::OK();
}

}  // namespace raftkv
