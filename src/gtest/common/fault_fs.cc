#include "gtest/common/fault_fs.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace raftkv::testing_util {
namespace {

namespace fs = std::filesystem;

std::string BaseName(const std::string& path) { return fs::path(path).filename().string(); }
std::string Parent(const std::string& path) { return fs::path(path).parent_path().string(); }

std::string ReadAllBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::string();
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

uint64_t SizeOf(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  return ec ? 0 : static_cast<uint64_t>(size);
}

// A directory that holds (or is about to hold) a member's storage.
bool IsDataDir(const std::string& dir) {
  std::error_code ec;
  return fs::exists(dir + "/hardstate", ec) || fs::exists(dir + "/hardstate.tmp", ec) ||
         fs::is_directory(dir + "/log", ec) || fs::is_directory(dir + "/snap", ec);
}

// A RocksDB database directory: it holds CURRENT or a MANIFEST (a new
// database makes its MANIFEST first, then CURRENT, then syncs the directory).
bool IsRocksDbDir(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir + "/CURRENT", ec)) return true;
  for (fs::directory_iterator di(dir, ec), end; !ec && di != end; di.increment(ec)) {
    if (di->path().filename().string().rfind("MANIFEST-", 0) == 0) return true;
  }
  return false;
}

bool HasSuffix(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

FaultFs::FaultFs(const std::string& root) : root_(Normal(root)) {
  std::error_code ec;
  fs::create_directories(root_, ec);
  CHECK(!ec) << "cannot create " << root_ << ": " << ec.message();
  if (const char* kind = std::getenv("RAFTKV_FAULTFS_DROP_SYNC")) DropSyncs(kind);
  file::SetInterposer(this);
}

FaultFs::~FaultFs() { file::SetInterposer(nullptr); }

std::vector<std::string> FaultFs::SyncKinds() {
  return {"log-data",      "log-dir",      "hardstate-file", "data-dir",
          "snapshot-file", "snapshot-dir", "parent-dir",     "rocksdb-sst",
          "rocksdb-manifest", "rocksdb-dir"};
}

void FaultFs::DropSyncs(const std::string& kind) {
  if (!kind.empty()) {
    const std::vector<std::string> kinds = SyncKinds();
    CHECK(std::find(kinds.begin(), kinds.end(), kind) != kinds.end())
        << "unknown sync kind '" << kind << "'";
    LOG(WARNING) << "FaultFs: syncs of kind " << kind << " make nothing durable";
  }
  std::lock_guard<std::mutex> lock(mu_);
  drop_kind_ = kind;
}

bool FaultFs::SyncDropped(bool dir_sync, const std::string& path) const {
  if (drop_kind_.empty()) return false;
  const std::string parent = BaseName(Parent(path));
  const std::string name = BaseName(path);
  if (drop_kind_ == "log-data") return !dir_sync && parent == "log";
  if (drop_kind_ == "log-dir") return dir_sync && name == "log";
  if (drop_kind_ == "hardstate-file") return !dir_sync && name.rfind("hardstate", 0) == 0;
  if (drop_kind_ == "snapshot-file") return !dir_sync && parent == "snap";
  if (drop_kind_ == "snapshot-dir") return dir_sync && name == "snap";
  if (drop_kind_ == "data-dir") return dir_sync && IsDataDir(path);
  if (drop_kind_ == "rocksdb-sst") return !dir_sync && HasSuffix(name, ".sst");
  // CURRENT.dbtmp: RocksDB writes CURRENT under that name, syncs it and
  // renames it; a torn CURRENT names no MANIFEST.
  if (drop_kind_ == "rocksdb-manifest") {
    return !dir_sync && (name.rfind("MANIFEST-", 0) == 0 || name == "CURRENT.dbtmp");
  }
  if (drop_kind_ == "rocksdb-dir") return dir_sync && IsRocksDbDir(path);
  // Any other directory: the one a data directory was created in.
  if (drop_kind_ == "parent-dir") {
    return dir_sync && name != "log" && name != "snap" && !IsDataDir(path) && !IsRocksDbDir(path);
  }
  return false;
}

Status FaultFs::RunSync(const Op& op) const { return real_syncs_ ? op() : Status::OK(); }

std::string FaultFs::Normal(const std::string& path) {
  std::string p = fs::absolute(fs::path(path)).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

bool FaultFs::Under(const std::string& path, const std::string& dir) const {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         path[dir.size()] == '/');
}

FaultFs::Dir& FaultFs::TrackDir(const std::string& dir) {
  auto it = dirs_.find(dir);
  if (it != dirs_.end()) return it->second;
  Dir d;
  std::error_code ec;
  for (fs::directory_iterator di(dir, ec), end; !ec && di != end; di.increment(ec)) {
    const std::string path = di->path().string();
    DirEntry e;
    if (di->is_directory(ec)) {
      e.is_dir = true;
    } else {
      e.inode = InodeFor(path);
    }
    d.current[BaseName(path)] = e;
  }
  d.durable = d.current;
  return dirs_.emplace(dir, std::move(d)).first->second;
}

uint64_t FaultFs::InodeFor(const std::string& path) {
  auto it = by_path_.find(path);
  if (it != by_path_.end()) return it->second;
  const uint64_t id = next_inode_++;
  inodes_[id].path = path;
  by_path_[path] = id;
  return id;
}

void FaultFs::MarkDirty(Inode& inode, uint64_t current_size) {
  if (inode.dirty) return;
  inode.dirty = true;
  inode.durable_size = current_size;
  inode.undo.clear();
}

void FaultFs::SaveRange(Inode& inode, const file::File& file, uint64_t offset, uint64_t end) {
  end = std::min(end, inode.durable_size);
  if (offset >= end) return;
  std::string bytes;
  Status s = file.ReadAt(offset, static_cast<size_t>(end - offset), &bytes);
  CHECK(s.ok()) << s.ToString();
  if (!bytes.empty()) inode.undo.emplace_back(offset, std::move(bytes));
}

std::string FaultFs::CurrentBytes(const Inode& inode) const {
  return inode.detached ? *inode.detached : ReadAllBytes(inode.path);
}

std::string FaultFs::DurableBytes(const Inode& inode) const {
  std::string bytes = CurrentBytes(inode);
  if (!inode.dirty) return bytes;
  for (auto it = inode.undo.rbegin(); it != inode.undo.rend(); ++it) {
    const size_t end = static_cast<size_t>(it->first) + it->second.size();
    if (bytes.size() < end) bytes.resize(end, '\0');
    std::memcpy(&bytes[static_cast<size_t>(it->first)], it->second.data(), it->second.size());
  }
  bytes.resize(static_cast<size_t>(inode.durable_size), '\0');
  return bytes;
}

uint64_t FaultFs::op_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ops_;
}

void FaultFs::CountOp(const std::string& path) {
  if (Watched(path)) ++ops_;
  if (!capture_countdown_ || !Under(path, capture_dir_)) return;
  if (*capture_countdown_ > 0) {
    --*capture_countdown_;
    return;
  }
  capture_countdown_.reset();
  captured_ = CaptureLocked(capture_dir_);
}

bool FaultFs::DurablyLinked(const std::string& dir) {
  for (std::string level = dir; level != root_ && Under(level, root_); level = Parent(level)) {
    auto parent = dirs_.find(Parent(level));
    if (parent == dirs_.end()) continue;  // untracked: as on disk
    auto e = parent->second.durable.find(BaseName(level));
    if (e == parent->second.durable.end() || !e->second.is_dir) return false;
  }
  return true;
}

FaultFs::Image FaultFs::CaptureLocked(const std::string& dir) {
  Image image;
  image.root = dir;
  if (!DurablyLinked(dir)) {
    image.exists = false;
    return image;
  }
  CollectDurable(dir, &image);
  return image;
}

void FaultFs::CollectDurable(const std::string& dir, Image* image) {
  image->dirs.insert(dir);
  auto tracked = dirs_.find(dir);
  if (tracked == dirs_.end()) {
    // Unchanged since it was last restored: durable as it is.
    std::error_code ec;
    for (fs::directory_iterator di(dir, ec), end; !ec && di != end; di.increment(ec)) {
      const std::string path = di->path().string();
      if (di->is_directory(ec)) {
        CollectDurable(path, image);
      } else {
        image->files[path] = ReadAllBytes(path);
      }
    }
    return;
  }
  const std::map<std::string, DirEntry> entries = tracked->second.durable;
  for (const auto& [name, e] : entries) {
    const std::string path = dir + "/" + name;
    if (e.is_dir) {
      CollectDurable(path, image);
    } else {
      image->files[path] = DurableBytes(inodes_.at(e.inode));
    }
  }
}

FaultFs::Image FaultFs::Capture(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  return CaptureLocked(Normal(dir));
}

void FaultFs::CaptureBeforeOp(const std::string& dir, uint64_t k) {
  std::lock_guard<std::mutex> lock(mu_);
  capture_dir_ = Normal(dir);
  capture_countdown_ = k;
  captured_.reset();
}

std::optional<FaultFs::Image> FaultFs::TakeCaptured() {
  std::lock_guard<std::mutex> lock(mu_);
  capture_countdown_.reset();
  std::optional<Image> out = std::move(captured_);
  captured_.reset();
  return out;
}

void FaultFs::Restore(const Image& image) {
  std::lock_guard<std::mutex> lock(mu_);
  std::error_code ec;
  if (!image.exists) {
    // The directory itself did not survive.
    fs::remove_all(image.root, ec);
    CHECK(!ec) << "cannot remove " << image.root << ": " << ec.message();
    if (image.root != root_) {
      auto parent = dirs_.find(Parent(image.root));
      if (parent != dirs_.end()) parent->second.current.erase(BaseName(image.root));
    }
  }
  for (fs::directory_iterator di(image.root, ec); image.exists && !ec && di != fs::directory_iterator();
       di.increment(ec)) {
    std::error_code rm;
    fs::remove_all(di->path(), rm);
    CHECK(!rm) << "cannot remove " << di->path() << ": " << rm.message();
  }
  for (const std::string& d : image.dirs) {
    fs::create_directories(d, ec);
    CHECK(!ec) << "cannot create " << d << ": " << ec.message();
  }
  for (const auto& [path, bytes] : image.files) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    CHECK(out.good()) << "cannot write " << path;
  }
  // Forget the model below the root: it is all durable now.
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    it = Under(it->first, image.root) ? dirs_.erase(it) : std::next(it);
  }
  for (auto it = by_path_.begin(); it != by_path_.end();) {
    it = Under(it->first, image.root) ? by_path_.erase(it) : std::next(it);
  }
  std::set<uint64_t> referenced;
  for (const auto& [path, id] : by_path_) referenced.insert(id);
  for (const auto& [path, d] : dirs_) {
    for (const auto& [name, e] : d.durable) referenced.insert(e.inode);
    for (const auto& [name, e] : d.current) referenced.insert(e.inode);
  }
  for (auto it = inodes_.begin(); it != inodes_.end();) {
    it = referenced.count(it->first) ? std::next(it) : inodes_.erase(it);
  }
}

FaultFs::Counts FaultFs::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

void FaultFs::ResetCounts() {
  std::lock_guard<std::mutex> lock(mu_);
  counts_ = Counts();
}

// ---- file::Interposer ----

Status FaultFs::Open(const std::string& raw_path, file::OpenMode mode, const Op& op,
                     uint64_t* file_id) {
  const std::string path = Normal(raw_path);
  if (!Watched(path)) return op();
  std::lock_guard<std::mutex> lock(mu_);
  CountOp(path);
  Dir& dir = TrackDir(Parent(path));
  auto existing = dir.current.find(BaseName(path));
  if (existing == dir.current.end()) {
    Status s = op();
    if (!s.ok() || mode != file::OpenMode::kCreateTruncate) return s;
    ++counts_.creates;
    const uint64_t id = next_inode_++;
    Inode& inode = inodes_[id];
    inode.path = path;
    inode.dirty = true;  // durable contents: none yet
    inode.durable_size = 0;
    by_path_[path] = id;
    dir.current[BaseName(path)] = DirEntry{false, id};
    *file_id = id;
    return s;
  }
  const uint64_t id = existing->second.inode;
  Inode& inode = inodes_.at(id);
  if (mode == file::OpenMode::kCreateTruncate) {
    ++counts_.truncates;
    const uint64_t size = SizeOf(path);
    MarkDirty(inode, size);
    const std::string bytes = ReadAllBytes(path);
    const size_t keep = static_cast<size_t>(std::min<uint64_t>(bytes.size(), inode.durable_size));
    if (keep > 0) inode.undo.emplace_back(0, bytes.substr(0, keep));
  }
  Status s = op();
  if (s.ok()) *file_id = id;
  return s;
}

Status FaultFs::Change(uint64_t file_id, const file::File& file, uint64_t* counter,
                       const std::function<std::pair<uint64_t, uint64_t>(uint64_t)>& range,
                       const Op& op) {
  std::lock_guard<std::mutex> lock(mu_);
  Inode& inode = inodes_.at(file_id);
  CountOp(inode.path);
  ++*counter;
  uint64_t size = 0;
  Status s = file.Size(&size);
  if (!s.ok()) return s;
  MarkDirty(inode, size);
  const auto [from, to] = range(size);
  SaveRange(inode, file, from, to);
  return op();
}

Status FaultFs::WriteAt(uint64_t file_id, const file::File& file, uint64_t offset, size_t n,
                        const Op& op) {
  return Change(file_id, file, &counts_.writes,
                [&](uint64_t) { return std::make_pair(offset, offset + n); }, op);
}

Status FaultFs::Truncate(uint64_t file_id, const file::File& file, uint64_t new_size,
                         const Op& op) {
  return Change(file_id, file, &counts_.truncates,
                [&](uint64_t size) { return std::make_pair(std::min(new_size, size), size); }, op);
}

Status FaultFs::Sync(uint64_t file_id, const file::File& file, const Op& op) {
  std::lock_guard<std::mutex> lock(mu_);
  Inode& inode = inodes_.at(file_id);
  CountOp(inode.path.empty() ? Normal(file.path()) : inode.path);
  ++counts_.file_syncs;
  if (SyncDropped(false, inode.path.empty() ? file.path() : inode.path)) return Status::OK();
  Status s = RunSync(op);
  if (s.ok()) {
    inode.dirty = false;
    inode.undo.clear();
  }
  return s;
}

void FaultFs::Closed(uint64_t /*file_id*/) {}

Status FaultFs::SyncDir(const std::string& raw_dir, const Op& op) {
  const std::string dir = Normal(raw_dir);
  if (!Watched(dir)) return op();
  std::lock_guard<std::mutex> lock(mu_);
  CountOp(dir);
  ++counts_.dir_syncs;
  if (SyncDropped(true, dir)) return Status::OK();
  Status s = RunSync(op);
  if (s.ok()) {
    Dir& d = TrackDir(dir);
    d.durable = d.current;
  }
  return s;
}

Status FaultFs::CreateDirs(const std::string& raw_dir, const Op& op) {
  const std::string dir = Normal(raw_dir);
  if (!Watched(dir)) return op();
  std::lock_guard<std::mutex> lock(mu_);
  CountOp(dir);
  std::vector<std::string> missing;  // deepest first
  std::error_code ec;
  for (std::string level = dir; Under(level, root_) && level != root_ && !fs::exists(level, ec);
       level = Parent(level)) {
    missing.push_back(level);
  }
  std::reverse(missing.begin(), missing.end());
  for (const std::string& level : missing) TrackDir(Parent(level));
  Status s = op();
  if (!s.ok()) return s;
  for (const std::string& level : missing) {
    ++counts_.mkdirs;
    dirs_[Parent(level)].current[BaseName(level)] = DirEntry{true, 0};
    dirs_.emplace(level, Dir());
  }
  return s;
}

Status FaultFs::Rename(const std::string& raw_from, const std::string& raw_to, const Op& op) {
  const std::string from = Normal(raw_from);
  const std::string to = Normal(raw_to);
  if (!Watched(from) && !Watched(to)) return op();
  CHECK(Watched(from) && Watched(to)) << "rename across the root: " << from << " -> " << to;
  std::lock_guard<std::mutex> lock(mu_);
  CountOp(from);
  Dir& src_dir = TrackDir(Parent(from));
  Dir& dst_dir = TrackDir(Parent(to));
  auto src = src_dir.current.find(BaseName(from));
  if (src == src_dir.current.end() || src->second.is_dir) return op();  // fails, or a directory
  const uint64_t id = src->second.inode;
  std::optional<uint64_t> replaced;
  std::string replaced_bytes;
  if (auto d = dst_dir.current.find(BaseName(to)); d != dst_dir.current.end() && !d->second.is_dir) {
    replaced = d->second.inode;
    replaced_bytes = ReadAllBytes(to);
  }
  Status s = op();
  if (!s.ok()) return s;
  ++counts_.renames;
  if (replaced && *replaced != id) {
    Inode& r = inodes_.at(*replaced);
    r.detached = std::move(replaced_bytes);
    r.path.clear();
  }
  src_dir.current.erase(BaseName(from));
  dst_dir.current[BaseName(to)] = DirEntry{false, id};
  by_path_.erase(from);
  by_path_[to] = id;
  inodes_.at(id).path = to;
  return s;
}

Status FaultFs::Remove(const std::string& raw_path, const Op& op) {
  const std::string path = Normal(raw_path);
  if (!Watched(path)) return op();
  std::lock_guard<std::mutex> lock(mu_);
  CountOp(path);
  Dir& dir = TrackDir(Parent(path));
  auto it = dir.current.find(BaseName(path));
  if (it == dir.current.end()) return op();
  std::string bytes;
  if (!it->second.is_dir) bytes = ReadAllBytes(path);
  Status s = op();
  if (!s.ok()) return s;
  ++counts_.removes;
  if (!it->second.is_dir) {
    Inode& inode = inodes_.at(it->second.inode);
    inode.detached = std::move(bytes);
    inode.path.clear();
    by_path_.erase(path);
  }
  dir.current.erase(it);
  return s;
}

Status FaultFs::Link(const std::string& raw_from, const std::string& raw_to, const Op& op) {
  const std::string from = Normal(raw_from);
  const std::string to = Normal(raw_to);
  if (!Watched(from) && !Watched(to)) return op();
  CHECK(Watched(from) && Watched(to)) << "link across the root: " << from << " -> " << to;
  std::lock_guard<std::mutex> lock(mu_);
  CountOp(to);
  Dir& src_dir = TrackDir(Parent(from));
  Dir& dst_dir = TrackDir(Parent(to));
  auto src = src_dir.current.find(BaseName(from));
  if (src == src_dir.current.end() || src->second.is_dir) return op();  // fails
  Status s = op();
  if (!s.ok()) return s;
  ++counts_.links;
  // The model keeps one path per inode: the link gets an inode of its own
  // with its source's state (see the file comment).
  const uint64_t id = next_inode_++;
  Inode link = inodes_.at(src->second.inode);
  link.path = to;
  inodes_[id] = std::move(link);
  by_path_[to] = id;
  dst_dir.current[BaseName(to)] = DirEntry{false, id};
  return s;
}

}  // namespace raftkv::testing_util
