#include "storage/rocksdb_store_dir.h"

#include <glog/logging.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <system_error>
#include <vector>

#include "storage/checkpoint_store.h"
#include "storage/file_util.h"
#include "storage/position_name.h"
#include "storage/rocksdb_backend.h"

namespace raftkv {

namespace {

namespace fs = std::filesystem;

constexpr char kCurrentFile[] = "KV_CURRENT";
constexpr size_t kMaxCurrentBytes = 64;

// Whether `name` is a store's name, kv-<index>-<term> (decimal).
bool IsStoreName(const std::string& name) {
  if (name.size() < 6 || name.compare(0, 3, "kv-") != 0) return false;
  const size_t dash = name.find('-', 3);
  if (dash == std::string::npos || dash == 3 || dash + 1 == name.size()) return false;
  for (size_t i = 3; i < name.size(); ++i) {
    if (i != dash && (name[i] < '0' || name[i] > '9')) return false;
  }
  return name.size() <= 3 + 20 + 1 + 20;
}

// The kv-* directories in `dir`.
std::vector<std::string> StoreDirs(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (IsStoreName(name) && it->is_directory(ec)) out.push_back(name);
  }
  return out;
}

}  // namespace

std::string RocksDbStoreDir::StoreName(uint64_t index, uint64_t term) {
  return "kv-" + std::to_string(index) + "-" + std::to_string(term);
}

std::string RocksDbStoreDir::current() const {
  MutexLock lock(&mu_);
  return current_;
}

Status RocksDbStoreDir::Open(const std::string& data_dir, std::unique_ptr<RocksDbStoreDir>* dir,
                             std::unique_ptr<KvBackend>* current,
                             const RocksDbBackend::Options& options) {
  std::unique_ptr<RocksDbStoreDir> d(new RocksDbStoreDir(data_dir, options));
  const std::string path = file::JoinPath(data_dir, kCurrentFile);
  file::File f;
  bool missing = false;
  Status s = file::File::Open(path, file::OpenMode::kReadOnly, &f, &missing);
  if (!s.ok()) return s;
  std::string name;
  if (!missing) {
    uint64_t size = 0;
    s = f.Size(&size);
    if (s.ok() && size > kMaxCurrentBytes) {
      return Status::Corruption(path + ": " + std::to_string(size) + " bytes, not a store's name");
    }
    if (s.ok()) s = f.ReadAll(&name);
    if (!s.ok()) return s;
    if (!name.empty() && name.back() == '\n') name.pop_back();
    std::error_code ec;
    if (!IsStoreName(name)) return Status::Corruption(path + ": \"" + name + "\" is not a store's name");
    if (!fs::is_directory(file::JoinPath(data_dir, name), ec)) {
      return Status::Corruption(path + " names " + name + ", which is not a directory in " + data_dir);
    }
  }
  {
    MutexLock lock(&d->mu_);
    d->current_ = name;
  }
  // Everything else is a store half-built when a crash came, or replaced.
  d->RemoveStale();
  if (name.empty()) {
    s = d->Create(0, 0, current);
    if (s.ok()) s = d->Commit(0, 0);
    if (!s.ok()) current->reset();
  } else {
    s = d->OpenStore(name, current);
  }
  if (!s.ok()) return s;
  *dir = std::move(d);
  return Status::OK();
}

Status RocksDbStoreDir::OpenStore(const std::string& name, std::unique_ptr<KvBackend>* out) {
  std::unique_ptr<RocksDbBackend> db;
  Status s = RocksDbBackend::Open(file::JoinPath(data_dir_, name), options_, &db);
  if (!s.ok()) return s;
  {
    MutexLock lock(&mu_);
    opened_[name] = db->Liveness();
  }
  *out = std::move(db);
  return Status::OK();
}

Status RocksDbStoreDir::BeginCreate(const std::string& name, uint64_t index, uint64_t term) {
  MutexLock lock(&mu_);
  if (name == current_) {
    return Status::FailedPrecondition("the store for index " + std::to_string(index) + ", term " +
                                      std::to_string(term) + " is the current one already");
  }
  if (auto it = opened_.find(name); it != opened_.end() && !it->second.expired()) {
    return Status::FailedPrecondition("the store " + name + " is still open");
  }
  if (!creating_.insert(name).second) return Status::FailedPrecondition("the store " + name + " is being created");
  return Status::OK();
}

Status RocksDbStoreDir::Create(uint64_t index, uint64_t term, std::unique_ptr<KvBackend>* out) {
  return CreateWith(index, term, [](const std::string&) { return Status::OK(); }, out);
}

Status RocksDbStoreDir::CreateWith(uint64_t index, uint64_t term,
                                   const std::function<Status(const std::string& path)>& fill,
                                   std::unique_ptr<KvBackend>* out) {
  const std::string name = StoreName(index, term);
  Status s = BeginCreate(name, index, term);
  if (!s.ok()) return s;
  const std::string path = file::JoinPath(data_dir_, name);
  std::error_code ec;
  fs::remove_all(path, ec);  // a previous attempt's
  s = ec ? Status::IOError("cannot remove " + path + ": " + ec.message()) : fill(path);
  if (s.ok()) s = OpenStore(name, out);
  MutexLock lock(&mu_);
  creating_.erase(name);
  return s;
}

Status RocksDbStoreDir::OpenCheckpoint(const std::string& dir, std::unique_ptr<KvBackend>* out) {
  RocksDbBackend::Options options;
  options.create_if_missing = false;
  options.read_only = true;
  std::unique_ptr<RocksDbBackend> db;
  Status s = RocksDbBackend::Open(dir, options, &db);
  if (s.ok()) *out = std::move(db);
  return s;
}

namespace {

// `from` copied to `to`, synced.
Status CopyFileSynced(const std::string& from, const std::string& to) {
  file::File in;
  file::File out;
  uint64_t size = 0;
  Status s = file::File::Open(from, file::OpenMode::kReadOnly, &in);
  if (s.ok()) s = in.Size(&size);
  if (s.ok()) s = file::File::Open(to, file::OpenMode::kCreateTruncate, &out);
  std::string piece;
  for (uint64_t at = 0; s.ok() && at < size; at += piece.size()) {
    s = in.ReadAt(at, static_cast<size_t>(std::min<uint64_t>(size - at, 1 << 20)), &piece);
    if (s.ok() && piece.empty()) s = Status::IOError(from + ": shorter than its size while copied");
    if (s.ok()) s = out.WriteAt(piece.data(), piece.size(), at);
  }
  if (s.ok()) s = out.Sync();
  if (s.ok()) s = out.Close();
  return s;
}

// The files of the checkpoint in `dir` (but its manifest) into the new
// directory `path`, durably.
Status FillFromCheckpoint(const std::string& dir, const std::string& path) {
  std::vector<std::string> names;
  Status s = file::CreateDirsDurably(path);
  if (s.ok()) s = file::ListFiles(dir, &names);
  for (const std::string& name : names) {
    if (!s.ok()) break;
    if (name == checkpoint::kManifestName) continue;
    const bool immutable = position_name::IsTableFile(name);
    s = immutable ? file::Link(file::JoinPath(dir, name), file::JoinPath(path, name))
                  : CopyFileSynced(file::JoinPath(dir, name), file::JoinPath(path, name));
  }
  if (s.ok()) s = file::SyncDir(path);
  return s;
}

}  // namespace

Status RocksDbStoreDir::CreateFromCheckpoint(const std::string& dir, uint64_t index, uint64_t term,
                                             std::unique_ptr<KvBackend>* out) {
  return CreateWith(index, term, [&dir](const std::string& path) { return FillFromCheckpoint(dir, path); }, out);
}

Status RocksDbStoreDir::Commit(uint64_t index, uint64_t term) {
  const std::string name = StoreName(index, term);
  const std::string line = name + "\n";
  Status s = file::ReplaceFileDurably(file::JoinPath(data_dir_, kCurrentFile), line.data(), line.size());
  if (!s.ok()) return s;
  MutexLock lock(&mu_);
  current_ = name;
  return Status::OK();
}

void RocksDbStoreDir::RemoveStale() {
  MutexLock lock(&mu_);
  for (const std::string& name : StoreDirs(data_dir_)) {
    if (name == current_ || creating_.count(name) != 0) continue;
    auto it = opened_.find(name);
    if (it != opened_.end() && !it->second.expired()) continue;  // still read
    const std::string path = file::JoinPath(data_dir_, name);
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec) {
      LOG(WARNING) << "cannot remove the replaced key-value store " << path << ": " << ec.message();
      continue;
    }
    if (it != opened_.end()) opened_.erase(it);
    LOG(INFO) << "removed the replaced key-value store " << path;
  }
}

}  // namespace raftkv
