#include "storage/checkpoint_store.h"

#include <glog/logging.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <utility>

#include "proto/internal.h"
#include "storage/coding.h"
#include "storage/crc32c.h"
#include "storage/position_name.h"

namespace raftkv {

namespace fs = std::filesystem;

namespace {

constexpr char kDirPrefix[] = "ckpt-";
constexpr size_t kDirPrefixLength = sizeof(kDirPrefix) - 1;
constexpr char kTmpSuffix[] = ".tmp";
constexpr char kCreateTmp[] = "ckpt-new.tmp";
constexpr char kRecvPrefix[] = "recv-";
// The manifest's framing: magic, fixed32 length, fixed32 CRC-32C of the
// record, the record.
constexpr char kManifestMagic[] = "RKVCKPT1";
constexpr size_t kManifestMagicLength = sizeof(kManifestMagic) - 1;
constexpr size_t kHeaderLength = kManifestMagicLength + 8;
// Reads for CRCs and sends go in pieces of this size.
constexpr size_t kReadPiece = 1 << 20;

// A name a peer may give a file: plain, printable, not the manifest's.
bool ValidFileName(const std::string& name, std::string* why) {
  if (name.empty() || name.size() > checkpoint::kMaxNameBytes) {
    *why = "a file name of " + std::to_string(name.size()) + " bytes";
  } else if (name == "." || name == ".." || name == checkpoint::kManifestName) {
    *why = "the file name \"" + name + "\"";
  } else if (std::any_of(name.begin(), name.end(), [](char c) {
               return c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
             })) {
    *why = "a file name with a separator or a control character";
  } else {
    return true;
  }
  return false;
}

Status RemoveTree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) return Status::IOError("cannot remove " + path + ": " + ec.message());
  return Status::OK();
}

bool Exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

// The CRC-32C and size of the whole file at `path`.
Status CrcOfFile(const std::string& path, uint32_t* crc, uint64_t* size) {
  file::File f;
  Status s = file::File::Open(path, file::OpenMode::kReadOnly, &f);
  if (s.ok()) s = f.Size(size);
  if (!s.ok()) return s;
  uint32_t c = 0;
  std::string piece;
  for (uint64_t off = 0; off < *size;) {
    s = f.ReadAt(off, static_cast<size_t>(std::min<uint64_t>(kReadPiece, *size - off)), &piece);
    if (!s.ok()) return s;
    if (piece.empty()) return Status::Corruption(path + ": shorter than its size while read");
    c = crc32c::Extend(c, piece.data(), piece.size());
    off += piece.size();
  }
  *crc = c;
  return Status::OK();
}

bool HasManifest(const std::string& dir) {
  return Exists(file::JoinPath(dir, checkpoint::kManifestName));
}

// Makes the directory `from`, of finished files, the checkpoint `to`: the
// files are linked into `to` (created durably), the manifest is written
// last, then `from` is removed. The manifest's name is the commit point: a
// checkpoint directory without one is unfinished (Open removes it). No
// directory is renamed: the manifest is the finer commit, and the
// power-loss tests' file layer models renames of files only.
Status Publish(const std::string& from, const std::string& to, const std::string& manifest) {
  std::vector<std::string> names;
  Status s = Exists(to) ? RemoveTree(to) : Status::OK();
  if (s.ok()) s = file::CreateDirsDurably(to);
  if (s.ok()) s = file::ListFiles(from, &names);
  for (const std::string& name : names) {
    if (!s.ok()) break;
    if (name != checkpoint::kManifestName) s = file::Link(file::JoinPath(from, name), file::JoinPath(to, name));
  }
  if (s.ok()) s = file::SyncDir(to);
  const std::string path = file::JoinPath(to, checkpoint::kManifestName);
  if (s.ok()) s = file::ReplaceFileDurably(path, manifest.data(), manifest.size());
  if (!s.ok()) {
    const Status removed = RemoveTree(to);
    LOG_IF(WARNING, !removed.ok()) << removed.ToString();
    return s;
  }
  const Status removed = RemoveTree(from);
  LOG_IF(WARNING, !removed.ok()) << "cannot remove " << from << " after publishing " << to << ": "
                                 << removed.ToString();
  return Status::OK();
}

}  // namespace

uint64_t CheckpointContents::total_bytes() const {
  uint64_t total = 0;
  for (const File& f : files) total += f.size;
  return total;
}

// ---- the manifest ----

namespace checkpoint {

std::string EncodeManifest(const CheckpointContents& contents) {
  CheckpointManifestRecord record;
  SnapshotHeader* h = record.mutable_header();
  h->set_last_index(contents.meta.last_index);
  h->set_last_term(contents.meta.last_term);
  h->set_cluster_time_ms(contents.meta.cluster_time_ms);
  h->set_config(contents.meta.config);
  record.set_engine(contents.engine);
  for (const CheckpointContents::File& f : contents.files) {
    CheckpointManifestRecord::File* out = record.add_files();
    out->set_name(f.name);
    out->set_size(f.size);
    out->set_crc32c(f.crc32c);
  }
  const std::string body = record.SerializeAsString();
  std::string bytes(kManifestMagic, kManifestMagicLength);
  coding::PutFixed32(&bytes, static_cast<uint32_t>(body.size()));
  coding::PutFixed32(&bytes, crc32c::Value(body.data(), body.size()));
  bytes += body;
  return bytes;
}

Status DecodeManifest(std::string_view bytes, CheckpointContents* out) {
  if (bytes.size() > kMaxManifestBytes) {
    return Status::InvalidArgument("checkpoint manifest of " + std::to_string(bytes.size()) +
                                   " bytes, over the limit of " + std::to_string(kMaxManifestBytes));
  }
  if (bytes.size() < kHeaderLength ||
      bytes.substr(0, kManifestMagicLength) != std::string_view(kManifestMagic, kManifestMagicLength)) {
    return Status::InvalidArgument("not a checkpoint manifest (no " + std::string(kManifestMagic) + " header)");
  }
  const uint32_t length = coding::DecodeFixed32(bytes.data() + kManifestMagicLength);
  const uint32_t crc = coding::DecodeFixed32(bytes.data() + kManifestMagicLength + 4);
  const std::string_view body = bytes.substr(kHeaderLength);
  if (body.size() != length) {
    return Status::InvalidArgument("checkpoint manifest: " + std::to_string(body.size()) +
                                   " bytes of record, the header says " + std::to_string(length));
  }
  if (crc32c::Value(body.data(), body.size()) != crc) {
    return Status::InvalidArgument("checkpoint manifest: checksum mismatch");
  }
  CheckpointManifestRecord record;
  if (!record.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return Status::InvalidArgument("checkpoint manifest: the record does not parse");
  }
  if (static_cast<size_t>(record.files_size()) > kMaxFiles) {
    return Status::InvalidArgument("checkpoint manifest lists " + std::to_string(record.files_size()) +
                                   " files, over the limit of " + std::to_string(kMaxFiles));
  }
  CheckpointContents c;
  c.meta.last_index = record.header().last_index();
  c.meta.last_term = record.header().last_term();
  c.meta.cluster_time_ms = record.header().cluster_time_ms();
  c.meta.config = record.header().config();
  c.engine = record.engine();
  std::string why;
  for (const CheckpointManifestRecord::File& f : record.files()) {
    if (!ValidFileName(f.name(), &why)) return Status::InvalidArgument("checkpoint manifest: " + why);
    if (!c.files.empty() && f.name() <= c.files.back().name) {
      return Status::InvalidArgument("checkpoint manifest: \"" + f.name() +
                                     "\" is out of name order or listed twice");
    }
    c.files.push_back(CheckpointContents::File{f.name(), f.size(), f.crc32c()});
  }
  *out = std::move(c);
  return Status::OK();
}

Status ReadManifest(const std::string& dir, CheckpointContents* out) {
  const std::string path = file::JoinPath(dir, kManifestName);
  file::File f;
  uint64_t size = 0;
  Status s = file::File::Open(path, file::OpenMode::kReadOnly, &f);
  if (s.ok()) s = f.Size(&size);
  if (!s.ok()) return s;
  if (size > kMaxManifestBytes) return Status::Corruption(path + ": " + std::to_string(size) + " bytes");
  std::string bytes;
  s = f.ReadAll(&bytes);
  if (s.ok()) s = DecodeManifest(bytes, out);
  if (!s.ok()) return Status::Corruption(path + ": " + s.message());
  return Status::OK();
}

Status VerifyFiles(const std::string& dir, const CheckpointContents& contents) {
  std::vector<std::string> names;
  Status s = file::ListFiles(dir, &names);
  if (!s.ok()) return s;
  std::set<std::string> listed;
  for (const CheckpointContents::File& f : contents.files) listed.insert(f.name);
  for (const std::string& name : names) {
    if (name != kManifestName && listed.count(name) == 0) {
      return Status::Corruption(file::JoinPath(dir, name) + ": a file the manifest does not list");
    }
  }
  for (const CheckpointContents::File& f : contents.files) {
    const std::string path = file::JoinPath(dir, f.name);
    uint32_t crc = 0;
    uint64_t size = 0;
    s = CrcOfFile(path, &crc, &size);
    if (!s.ok()) return Status::Corruption(path + ": " + s.message());
    if (size != f.size) {
      return Status::Corruption(path + ": " + std::to_string(size) + " bytes, the manifest says " +
                                std::to_string(f.size));
    }
    if (crc != f.crc32c) return Status::Corruption(path + ": CRC-32C differs from the manifest's");
  }
  return Status::OK();
}

}  // namespace checkpoint

// ---- CheckpointSource ----

Status CheckpointSource::ReadChunk(uint64_t offset, size_t max_bytes, std::string* out, bool* last) const {
  if (offset > size_) {
    return Status::InvalidArgument(dir_ + ": chunk offset " + std::to_string(offset) +
                                   " is past the end (" + std::to_string(size_) + " bytes)");
  }
  out->clear();
  const uint64_t end = std::min<uint64_t>(size_, offset + std::max<size_t>(max_bytes, 1));
  std::string piece;
  for (uint64_t at = offset; at < end;) {
    if (at < manifest_.size()) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(end, manifest_.size()) - at);
      out->append(manifest_, static_cast<size_t>(at), n);
      at += n;
      continue;
    }
    // The file holding byte `at`: the last one starting at or before it.
    const size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), at) - starts_.begin()) - 1;
    const uint64_t in_file = at - starts_[i];
    const size_t n = static_cast<size_t>(std::min<uint64_t>(end - at, contents_.files[i].size - in_file));
    Status s = files_[i].ReadAt(in_file, n, &piece);
    if (!s.ok()) return s;
    if (piece.size() != n) return Status::Corruption(files_[i].path() + ": shorter than the manifest says");
    out->append(piece);
    at += n;
  }
  *last = end == size_;
  return Status::OK();
}

namespace {

// The stream of a CheckpointSource into a CheckpointReceiver: the manifest
// is gathered first, then each byte goes to the file it belongs to.
class CheckpointStreamReceiver final : public SnapshotSink {
 public:
  CheckpointStreamReceiver(CheckpointStore* store, uint64_t index, uint64_t term,
                           std::function<Status(const std::string&)> verify)
      : store_(store), index_(index), term_(term), verify_(std::move(verify)) {}

  uint64_t bytes_received() const override { return received_; }

  Status Append(uint64_t offset, std::string_view data) override {
    if (offset != received_) {
      return Status::InvalidArgument("checkpoint stream chunk at " + std::to_string(offset) + ", expected " +
                                     std::to_string(received_));
    }
    while (!data.empty()) {
      size_t used = 0;
      Status s = receiver_ ? ToFiles(data, &used) : ToManifest(data, &used);
      if (!s.ok()) return s;
      received_ += used;
      data.remove_prefix(used);
    }
    return Status::OK();
  }

  Status Finish(SnapshotFileInfo* installed) override {
    if (!receiver_) return Status::InvalidArgument("the checkpoint stream ended inside its manifest");
    CheckpointInfo info;
    Status s = receiver_->Finish(verify_, &info);
    if (!s.ok()) return s;
    installed->last_index = info.last_index;
    installed->last_term = info.last_term;
    installed->path = info.path;
    return Status::OK();
  }

  void Abort() override {
    if (receiver_) receiver_->Abort();
  }

 private:
  // Gathers the manifest: its header says how long it is.
  Status ToManifest(std::string_view data, size_t* used) {
    size_t want = 16;  // the magic, the length, the CRC
    if (manifest_.size() >= want) {
      want += coding::DecodeFixed32(manifest_.data() + 8);
      if (want > checkpoint::kMaxManifestBytes) {
        return Status::InvalidArgument("checkpoint manifest of " + std::to_string(want) +
                                       " bytes, over the limit of " + std::to_string(checkpoint::kMaxManifestBytes));
      }
    }
    *used = std::min(data.size(), want - manifest_.size());
    manifest_.append(data.data(), *used);
    if (manifest_.size() < want || want == 16) return Status::OK();
    Status s = store_->BeginReceive(index_, term_, manifest_, &receiver_);
    if (s.ok()) s = SkipEmptyFiles();
    return s;
  }

  Status ToFiles(std::string_view data, size_t* used) {
    const std::vector<CheckpointContents::File>& files = receiver_->contents().files;
    if (file_ >= files.size()) {
      return Status::InvalidArgument("checkpoint stream runs past its last file");
    }
    const CheckpointContents::File& f = files[file_];
    *used = static_cast<size_t>(std::min<uint64_t>(data.size(), f.size - offset_));
    const bool done = offset_ + *used == f.size;
    Status s = receiver_->Append(f.name, offset_, data.substr(0, *used), done);
    if (!s.ok()) return s;
    offset_ += *used;
    if (done) {
      ++file_;
      offset_ = 0;
      s = SkipEmptyFiles();
    }
    return s;
  }

  // A file of no bytes has nothing in the stream: it is done on arrival.
  Status SkipEmptyFiles() {
    const std::vector<CheckpointContents::File>& files = receiver_->contents().files;
    for (; file_ < files.size() && files[file_].size == 0; ++file_) {
      Status s = receiver_->Append(files[file_].name, 0, std::string_view(), true);
      if (!s.ok()) return s;
    }
    return Status::OK();
  }

  CheckpointStore* const store_;
  const uint64_t index_;
  const uint64_t term_;
  const std::function<Status(const std::string&)> verify_;
  std::string manifest_;
  std::unique_ptr<CheckpointReceiver> receiver_;
  size_t file_ = 0;
  uint64_t offset_ = 0;
  uint64_t received_ = 0;
};

}  // namespace

// ---- CheckpointReceiver ----

CheckpointReceiver::~CheckpointReceiver() {
  if (!closed_) Abort();
}

void CheckpointReceiver::Abort() {
  open_.Close();
  const Status s = RemoveTree(tmp_dir_);
  LOG_IF(WARNING, !s.ok()) << s.ToString();
  closed_ = true;
}

Status CheckpointReceiver::Append(std::string_view file, uint64_t offset, std::string_view data,
                                  bool file_done) {
  if (closed_) return Status::FailedPrecondition("the checkpoint transfer is over");
  if (file_ >= contents_.files.size()) {
    return Status::InvalidArgument("checkpoint chunk for \"" + std::string(file) +
                                   "\" after every file of the manifest arrived");
  }
  const CheckpointContents::File& f = contents_.files[file_];
  if (file != f.name || offset != offset_) {
    return Status::InvalidArgument("checkpoint chunk for \"" + std::string(file) + "\" at offset " +
                                   std::to_string(offset) + ", expected \"" + f.name + "\" at " +
                                   std::to_string(offset_));
  }
  if (data.size() > f.size - offset_) {
    return Status::InvalidArgument("checkpoint chunk runs past the end of \"" + f.name + "\" (" +
                                   std::to_string(f.size) + " bytes in the manifest)");
  }
  Status s;
  if (!open_.is_open()) {
    s = file::File::Open(file::JoinPath(tmp_dir_, f.name), file::OpenMode::kCreateTruncate, &open_);
    if (!s.ok()) return s;
  }
  if (!data.empty()) {
    s = open_.WriteAt(data.data(), data.size(), offset_);
    if (!s.ok()) return s;
    crc_ = crc32c::Extend(crc_, data.data(), data.size());
    offset_ += data.size();
    received_total_ += data.size();
  }
  return file_done ? FinishFile() : Status::OK();
}

Status CheckpointReceiver::FinishFile() {
  const CheckpointContents::File& f = contents_.files[file_];
  if (offset_ != f.size) {
    return Status::InvalidArgument("\"" + f.name + "\" ended at " + std::to_string(offset_) +
                                   " bytes, the manifest says " + std::to_string(f.size));
  }
  if (crc_ != f.crc32c) {
    return Status::InvalidArgument("\"" + f.name + "\" arrived with a CRC-32C other than the manifest's");
  }
  Status s = open_.Sync();
  if (s.ok()) s = open_.Close();
  if (!s.ok()) return s;
  ++file_;
  offset_ = 0;
  crc_ = 0;
  return Status::OK();
}

Status CheckpointReceiver::Finish(const std::function<Status(const std::string& dir)>& verify,
                                  CheckpointInfo* installed) {
  if (closed_) return Status::FailedPrecondition("the checkpoint transfer is over");
  Status s;
  if (file_ < contents_.files.size()) {
    s = Status::InvalidArgument("the checkpoint transfer ended before \"" + contents_.files[file_].name +
                                "\" was complete (" + std::to_string(contents_.files.size() - file_) +
                                " of " + std::to_string(contents_.files.size()) + " files missing)");
  }
  if (s.ok()) s = file::SyncDir(tmp_dir_);
  if (s.ok() && verify) s = verify(tmp_dir_);
  if (s.ok()) s = Publish(tmp_dir_, final_dir_, manifest_);
  if (!s.ok()) {
    Abort();
    return s;
  }
  closed_ = true;
  installed->last_index = contents_.meta.last_index;
  installed->last_term = contents_.meta.last_term;
  installed->path = final_dir_;
  installed->bytes = contents_.total_bytes();
  installed->files = contents_.files.size();
  return Status::OK();
}

// ---- CheckpointStore ----

std::string CheckpointStore::DirName(uint64_t last_index, uint64_t last_term) {
  return position_name::Format(kDirPrefix, last_index, last_term);
}

bool CheckpointStore::ParseDirName(const std::string& name, uint64_t* last_index, uint64_t* last_term) {
  return position_name::Parse(name, kDirPrefix, {}, last_index, last_term);
}

Status CheckpointStore::Open(const std::string& dir, std::unique_ptr<CheckpointStore>* out) {
  Status s = file::CreateDirsDurably(dir);
  if (!s.ok()) return s;
  std::error_code ec;
  std::vector<std::string> stale;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool ours = name.compare(0, kDirPrefixLength, kDirPrefix) == 0 ||
                      name.compare(0, sizeof(kRecvPrefix) - 1, kRecvPrefix) == 0;
    uint64_t index = 0, term = 0;
    const bool unfinished = (ours && position_name::EndsWith(name, kTmpSuffix)) ||
                            (ParseDirName(name, &index, &term) && !HasManifest(file::JoinPath(dir, name)));
    if (unfinished && e.is_directory(ec)) stale.push_back(name);
  }
  if (ec) return Status::IOError("cannot list " + dir + ": " + ec.message());
  for (const std::string& name : stale) {
    LOG(INFO) << "removing unfinished checkpoint " << file::JoinPath(dir, name);
    s = RemoveTree(file::JoinPath(dir, name));
    if (!s.ok()) return s;
  }
  if (!stale.empty()) {
    s = file::SyncDir(dir);
    if (!s.ok()) return s;
  }
  out->reset(new CheckpointStore(dir));
  return Status::OK();
}

Status CheckpointStore::List(std::vector<CheckpointInfo>* out) const {
  out->clear();
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
    CheckpointInfo info;
    if (!ParseDirName(e.path().filename().string(), &info.last_index, &info.last_term)) continue;
    if (!e.is_directory(ec)) continue;
    info.path = file::JoinPath(dir_, e.path().filename().string());
    if (!HasManifest(info.path)) continue;  // being written
    out->push_back(std::move(info));
  }
  if (ec) return Status::IOError("cannot list " + dir_ + ": " + ec.message());
  std::sort(out->begin(), out->end(), [](const CheckpointInfo& a, const CheckpointInfo& b) {
    return a.last_index != b.last_index ? a.last_index < b.last_index : a.last_term < b.last_term;
  });
  return Status::OK();
}

Status CheckpointStore::Prune(size_t keep) {
  keep = std::max<size_t>(keep, 1);
  std::vector<CheckpointInfo> all;
  Status s = List(&all);
  if (!s.ok() || all.size() <= keep) return s;
  for (size_t i = 0; i + keep < all.size(); ++i) {
    s = RemoveTree(all[i].path);
    if (!s.ok()) return s;
  }
  return file::SyncDir(dir_);
}

Status CheckpointStore::ComputeCrcs(const std::string& dir, const CheckpointContents& previous,
                                    const std::set<std::string>& known_crcs, CheckpointContents* contents,
                                    uint64_t* bytes_read) const {
  std::map<std::string, const CheckpointContents::File*> known;
  for (const CheckpointContents::File& f : previous.files) {
    if (position_name::IsTableFile(f.name)) known[f.name] = &f;
  }
  for (CheckpointContents::File& f : contents->files) {
    if (known_crcs.count(f.name) != 0) continue;
    const auto it = known.find(f.name);
    if (it != known.end() && it->second->size == f.size) {
      f.crc32c = it->second->crc32c;
      continue;
    }
    uint64_t size = 0;
    Status s = CrcOfFile(file::JoinPath(dir, f.name), &f.crc32c, &size);
    if (!s.ok()) return s;
    if (size != f.size) return Status::Corruption(file::JoinPath(dir, f.name) + ": changed size while read");
    *bytes_read += size;
  }
  return Status::OK();
}

Status CheckpointStore::Create(KvBackend* backend, const std::string& engine, const Describe& describe,
                               CheckpointInfo* out) {
  const std::string tmp = file::JoinPath(dir_, kCreateTmp);
  Status s = Exists(tmp) ? RemoveTree(tmp) : Status::OK();
  CheckpointManifest listed;
  if (s.ok()) s = backend->Checkpoint(tmp, &listed);
  CheckpointContents contents;
  contents.engine = engine;
  if (s.ok()) s = describe(tmp, &contents.meta);
  if (s.ok() && contents.meta.last_index == 0) {
    s = Status::InvalidArgument("the store holds no applied entry: no checkpoint to take");
  }
  const std::string final_dir = file::JoinPath(dir_, DirName(contents.meta.last_index, contents.meta.last_term));
  if (s.ok() && HasManifest(final_dir)) {
    // The same position was checkpointed already (nothing applied since).
    s = RemoveTree(tmp);
    if (!s.ok()) return s;
    CheckpointContents existing;
    s = checkpoint::ReadManifest(final_dir, &existing);
    if (!s.ok()) return s;
    *out = CheckpointInfo{contents.meta.last_index, contents.meta.last_term, final_dir,
                          existing.total_bytes(), existing.files.size(), 0};
    return Status::OK();
  }
  std::set<std::string> engine_crcs;  // files whose CRC the engine gave
  for (const CheckpointManifest::FileInfo& f : listed.files) {
    if (f.name == checkpoint::kManifestName) continue;
    contents.files.push_back(CheckpointContents::File{f.name, f.size, f.crc32c});
    if (f.has_crc32c) engine_crcs.insert(f.name);
  }
  // The newest checkpoint's CRCs for the SST files both hold.
  CheckpointContents previous;
  std::vector<CheckpointInfo> existing;
  if (s.ok()) s = List(&existing);
  if (s.ok() && !existing.empty() && !checkpoint::ReadManifest(existing.back().path, &previous).ok()) {
    previous = CheckpointContents();  // unreadable: every CRC is computed
  }
  uint64_t read = 0;
  if (s.ok()) s = ComputeCrcs(tmp, previous, engine_crcs, &contents, &read);
  if (s.ok()) s = Publish(tmp, final_dir, checkpoint::EncodeManifest(contents));
  if (!s.ok()) {
    const Status removed = RemoveTree(tmp);
    LOG_IF(WARNING, !removed.ok()) << removed.ToString();
    return s;
  }
  *out = CheckpointInfo{contents.meta.last_index, contents.meta.last_term, final_dir,
                        contents.total_bytes(), contents.files.size(), read};
  return Status::OK();
}

Status CheckpointStore::Pin(uint64_t last_index, uint64_t last_term, const std::string& to) const {
  const std::string from = file::JoinPath(dir_, DirName(last_index, last_term));
  std::vector<std::string> names;
  Status s = Exists(to) ? RemoveTree(to) : Status::OK();
  if (s.ok()) s = file::CreateDirs(to);
  if (s.ok()) s = file::ListFiles(from, &names);
  for (size_t i = 0; s.ok() && i < names.size(); ++i) {
    s = file::Link(file::JoinPath(from, names[i]), file::JoinPath(to, names[i]));
  }
  if (!s.ok()) {
    const Status removed = RemoveTree(to);
    LOG_IF(WARNING, !removed.ok()) << removed.ToString();
  }
  return s;
}

Status CheckpointStore::Unpin(const std::string& pinned) { return RemoveTree(pinned); }

Status CheckpointStore::OpenSource(uint64_t last_index, uint64_t last_term,
                                   std::unique_ptr<CheckpointSource>* out) const {
  const std::string dir = file::JoinPath(dir_, DirName(last_index, last_term));
  std::unique_ptr<CheckpointSource> src(new CheckpointSource());
  src->dir_ = dir;
  Status s = checkpoint::ReadManifest(dir, &src->contents_);
  if (!s.ok()) return s;
  src->manifest_ = checkpoint::EncodeManifest(src->contents_);
  src->size_ = src->manifest_.size();
  for (const CheckpointContents::File& f : src->contents_.files) {
    file::File opened;
    uint64_t size = 0;
    s = file::File::Open(file::JoinPath(dir, f.name), file::OpenMode::kReadOnly, &opened);
    if (s.ok()) s = opened.Size(&size);
    if (!s.ok()) return s;
    if (size != f.size) {
      return Status::Corruption(opened.path() + ": " + std::to_string(size) + " bytes, the manifest says " +
                                std::to_string(f.size));
    }
    src->files_.push_back(std::move(opened));
    src->starts_.push_back(src->size_);
    src->size_ += size;
  }
  *out = std::move(src);
  return Status::OK();
}

std::unique_ptr<SnapshotSink> CheckpointStore::BeginReceiveStream(
    uint64_t last_index, uint64_t last_term, std::function<Status(const std::string& dir)> verify) {
  return std::make_unique<CheckpointStreamReceiver>(this, last_index, last_term, std::move(verify));
}

Status CheckpointStore::BeginReceive(uint64_t last_index, uint64_t last_term, std::string_view manifest,
                                     std::unique_ptr<CheckpointReceiver>* out) {
  std::unique_ptr<CheckpointReceiver> r(new CheckpointReceiver());
  Status s = checkpoint::DecodeManifest(manifest, &r->contents_);
  if (!s.ok()) return s;
  if (r->contents_.meta.last_index != last_index || r->contents_.meta.last_term != last_term) {
    return Status::InvalidArgument("the checkpoint manifest is of index " +
                                   std::to_string(r->contents_.meta.last_index) + ", term " +
                                   std::to_string(r->contents_.meta.last_term) + "; the transfer announced " +
                                   std::to_string(last_index) + ", term " + std::to_string(last_term));
  }
  r->manifest_ = std::string(manifest);
  r->dir_ = dir_;
  r->final_dir_ = file::JoinPath(dir_, DirName(last_index, last_term));
  const std::string name = DirName(last_index, last_term);
  r->tmp_dir_ = file::JoinPath(dir_, kRecvPrefix + name.substr(kDirPrefixLength) + kTmpSuffix);
  s = Exists(r->tmp_dir_) ? RemoveTree(r->tmp_dir_) : Status::OK();
  if (s.ok()) s = file::CreateDirsDurably(r->tmp_dir_);
  if (!s.ok()) {
    r->closed_ = true;
    return s;
  }
  *out = std::move(r);
  return Status::OK();
}

}  // namespace raftkv
