// The platform file layer of storage/file_util.h. Two implementations of the
// descriptor-based calls (File, FileLock, SyncDir, Rename): POSIX (Linux,
// macOS, the BSDs) and Win32. The directory-level calls (CreateDirs,
// ListFiles, Remove, paths) go through std::filesystem, which is portable.
//
// Durability per platform (doc/building.md, "Portable builds"):
//   Linux    fdatasync / fsync; directories fsync'ed after entries change.
//   macOS    fcntl(F_FULLFSYNC): fsync() only hands the data to the drive,
//            whose cache may lose it on power loss. File systems without
//            F_FULLFSYNC (some network and FUSE mounts) fail it with ENOTSUP
//            or EINVAL: fsync is the best they offer. Other errors (EIO) are
//            reported, never retried as fsync (which could then succeed on
//            pages the failed flush already dropped).
//   Windows  FlushFileBuffers; renames with MOVEFILE_WRITE_THROUGH; no
//            directory sync (see SyncDir).
#include "storage/file_util.h"

#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#else
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

namespace raftkv::file {
namespace {

namespace fs = std::filesystem;

Status ErrorCodeStatus(const std::string& what, const std::string& path,
                       const std::error_code& ec) {
  return Status::IOError(what + " " + path + ": " + ec.message());
}

// The interposer installed by SetInterposer (tests only; nullptr otherwise).
std::atomic<Interposer*> g_interposer{nullptr};

}  // namespace

// The system calls behind SyncDir, Rename, CreateDirs and Remove (below,
// per platform); the public functions hand them to the interposer, if any.
Status SyncDirImpl(const std::string& dir);
Status RenameImpl(const std::string& from, const std::string& to);
Status CreateDirsImpl(const std::string& dir, bool* created);
Status RemoveImpl(const std::string& path);
Status LinkImpl(const std::string& from, const std::string& to);

void SetInterposer(Interposer* interposer) { g_interposer.store(interposer); }

Interposer* CurrentInterposer() { return g_interposer.load(); }

File::~File() { Close(); }

File::File(File&& other) noexcept
    : handle_(std::exchange(other.handle_, kClosed)),
      path_(std::move(other.path_)),
      interposed_id_(std::exchange(other.interposed_id_, 0)) {}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    Close();
    handle_ = std::exchange(other.handle_, kClosed);
    path_ = std::move(other.path_);
    interposed_id_ = std::exchange(other.interposed_id_, 0);
  }
  return *this;
}

// ---- the interposed entry points (see Interposer in file_util.h) ----

Status File::Open(const std::string& path, OpenMode mode, File* out, bool* not_found) {
  Interposer* ip = g_interposer.load();
  if (ip == nullptr || mode == OpenMode::kReadOnly) return OpenImpl(path, mode, out, not_found);
  out->Close();  // outside the interposer (Close may report to it)
  uint64_t id = 0;
  Status s = ip->Open(path, mode, [&] { return OpenImpl(path, mode, out, not_found); }, &id);
  if (s.ok() && out->is_open()) out->interposed_id_ = id;
  return s;
}

Status File::WriteAt(const void* data, size_t n, uint64_t offset) {
  Interposer* ip = g_interposer.load();
  if (ip == nullptr || interposed_id_ == 0) return WriteAtImpl(data, n, offset);
  return ip->WriteAt(interposed_id_, *this, offset, n, [&] { return WriteAtImpl(data, n, offset); });
}

Status File::Truncate(uint64_t size) {
  Interposer* ip = g_interposer.load();
  if (ip == nullptr || interposed_id_ == 0) return TruncateImpl(size);
  return ip->Truncate(interposed_id_, *this, size, [&] { return TruncateImpl(size); });
}

// Seen by an interposer as what it does to the file's contents: a truncation
// that extends the file with zeros.
Status File::Allocate(uint64_t offset, uint64_t length, bool* done) {
  Interposer* ip = g_interposer.load();
  if (ip == nullptr || interposed_id_ == 0) return AllocateImpl(offset, length, done);
  return ip->Truncate(interposed_id_, *this, offset + length,
                      [&] { return AllocateImpl(offset, length, done); });
}

Status File::DataSync() {
  Interposer* ip = g_interposer.load();
  if (ip == nullptr || interposed_id_ == 0) return DataSyncImpl();
  return ip->Sync(interposed_id_, *this, [&] { return DataSyncImpl(); });
}

Status File::Sync() {
  Interposer* ip = g_interposer.load();
  if (ip == nullptr || interposed_id_ == 0) return SyncImpl();
  return ip->Sync(interposed_id_, *this, [&] { return SyncImpl(); });
}

Status File::Close() {
  const uint64_t id = std::exchange(interposed_id_, 0);
  Status s = CloseImpl();
  if (id != 0) {
    if (Interposer* ip = g_interposer.load()) ip->Closed(id);
  }
  return s;
}

Status SyncDir(const std::string& dir) {
  Interposer* ip = g_interposer.load();
  if (ip == nullptr) return SyncDirImpl(dir);
  return ip->SyncDir(dir, [&] { return SyncDirImpl(dir); });
}

Status Rename(const std::string& from, const std::string& to) {
  Interposer* ip = g_interposer.load();
  if (ip == nullptr) return RenameImpl(from, to);
  return ip->Rename(from, to, [&] { return RenameImpl(from, to); });
}

Status ReplaceFileDurably(const std::string& path, const void* data, size_t n) {
  const std::string tmp = path + ".tmp";
  File f;
  Status s = File::Open(tmp, OpenMode::kCreateTruncate, &f);
  if (s.ok()) s = f.WriteAt(data, n, 0);
  if (s.ok()) s = f.Sync();
  if (s.ok()) s = f.Close();
  if (s.ok()) s = Rename(tmp, path);
  if (s.ok()) s = SyncDir(DirName(path));
  return s;
}

Status CreateDirs(const std::string& dir, bool* created) {
  Interposer* ip = g_interposer.load();
  if (ip == nullptr) return CreateDirsImpl(dir, created);
  return ip->CreateDirs(dir, [&] { return CreateDirsImpl(dir, created); });
}

Status CreateDirsDurably(const std::string& dir) {
  // The missing levels, outermost first.
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path level = fs::path(dir).lexically_normal(); !level.empty() && !fs::exists(level, ec);
       level = level.parent_path()) {
    if (level.filename().empty()) {  // "a/b/" -> "a/b"
      level = level.parent_path();
      if (level.empty() || fs::exists(level, ec)) break;
    }
    missing.push_back(level);
    if (level == level.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    bool created = false;
    Status s = CreateDirs(it->string(), &created);
    if (!s.ok()) return s;
    if (!created) continue;  // made by someone else meanwhile
    s = SyncDir(DirName(it->string()));
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status Remove(const std::string& path) {
  Interposer* ip = g_interposer.load();
  if (ip == nullptr) return RemoveImpl(path);
  return ip->Remove(path, [&] { return RemoveImpl(path); });
}

Status Link(const std::string& from, const std::string& to) {
  Interposer* ip = g_interposer.load();
  if (ip == nullptr) return LinkImpl(from, to);
  return ip->Link(from, to, [&] { return LinkImpl(from, to); });
}

Status File::ReadAll(std::string* contents) const {
  uint64_t size = 0;
  Status s = Size(&size);
  if (!s.ok()) return s;
  // ReadAt stops early only at the end of the file (it shrank under us).
  return ReadAt(0, static_cast<size_t>(size), contents);
}

#ifdef _WIN32
// ---- Win32 ----
// Paths are converted to UTF-16 by std::filesystem::path, exactly as the
// std::filesystem calls above and below convert them, so both kinds of call
// see the same file for the same std::string. Handles are synchronous (no
// FILE_FLAG_OVERLAPPED): an OVERLAPPED passed to ReadFile/WriteFile only
// carries the offset, like pread/pwrite, and the call completes before
// returning.
namespace {

Status WinStatus(const std::string& what, const std::string& path, DWORD err) {
  // system_category() formats Win32 error codes (FormatMessage).
  return ErrorCodeStatus(what, path, std::error_code(static_cast<int>(err), std::system_category()));
}

OVERLAPPED At(uint64_t offset) {
  OVERLAPPED ov{};
  ov.Offset = static_cast<DWORD>(offset);
  ov.OffsetHigh = static_cast<DWORD>(offset >> 32);
  return ov;
}

// ReadFile/WriteFile take a DWORD count: larger requests go in chunks.
constexpr size_t kMaxChunk = size_t{1} << 30;

}  // namespace

Status File::OpenImpl(const std::string& path, OpenMode mode, File* out, bool* not_found) {
  out->Close();
  if (not_found != nullptr) *not_found = false;
  DWORD access = GENERIC_READ | GENERIC_WRITE;
  DWORD disposition = OPEN_EXISTING;
  switch (mode) {
    case OpenMode::kReadOnly: access = GENERIC_READ; break;
    case OpenMode::kReadWrite: break;
    case OpenMode::kCreateTruncate: disposition = CREATE_ALWAYS; break;
  }
  // FILE_SHARE_DELETE: like POSIX, a file may be renamed or removed while
  // open (e.g. an old snapshot being streamed to a follower). No security
  // attributes: the handle is not inherited by child processes (O_CLOEXEC).
  HANDLE h = ::CreateFileW(fs::path(path).c_str(), access,
                           FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                           disposition, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) {
    const DWORD err = ::GetLastError();
    if ((err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND) && not_found != nullptr) {
      *not_found = true;
      return Status::OK();
    }
    return WinStatus("open", path, err);
  }
  out->handle_ = h;
  out->path_ = path;
  return Status::OK();
}

Status File::Size(uint64_t* size) const {
  LARGE_INTEGER li;
  if (!::GetFileSizeEx(handle_, &li)) return WinStatus("size of", path_, ::GetLastError());
  *size = static_cast<uint64_t>(li.QuadPart);
  return Status::OK();
}

Status File::ReadAt(uint64_t offset, size_t n, std::string* out) const {
  out->resize(n);
  size_t done = 0;
  while (done < n) {
    OVERLAPPED ov = At(offset + done);
    DWORD got = 0;
    if (!::ReadFile(handle_, &(*out)[done], static_cast<DWORD>(std::min(n - done, kMaxChunk)),
                    &got, &ov)) {
      const DWORD err = ::GetLastError();
      // A synchronous handle read with an OVERLAPPED offset at or past the
      // end of the file fails with ERROR_HANDLE_EOF (not TRUE with 0 bytes,
      // as without an OVERLAPPED): the end of the file, like pread's 0.
      if (err == ERROR_HANDLE_EOF) break;
      return WinStatus("read", path_, err);
    }
    if (got == 0) break;  // end of file
    done += got;
  }
  out->resize(done);
  return Status::OK();
}

Status File::WriteAtImpl(const void* data, size_t n, uint64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    OVERLAPPED ov = At(offset);
    DWORD wrote = 0;
    if (!::WriteFile(handle_, p, static_cast<DWORD>(std::min(n, kMaxChunk)), &wrote, &ov)) {
      return WinStatus("write", path_, ::GetLastError());
    }
    p += wrote;
    n -= wrote;
    offset += wrote;
  }
  return Status::OK();
}

Status File::TruncateImpl(uint64_t size) {
  FILE_END_OF_FILE_INFO info{};
  info.EndOfFile.QuadPart = static_cast<LONGLONG>(size);
  if (!::SetFileInformationByHandle(handle_, FileEndOfFileInfo, &info, sizeof(info))) {
    return WinStatus("truncate", path_, ::GetLastError());
  }
  return Status::OK();
}

Status File::AllocateImpl(uint64_t /*offset*/, uint64_t /*length*/, bool* done) {
  *done = false;
  return Status::OK();
}

// FlushFileBuffers writes the file's data and metadata and flushes the
// drive's cache; Win32 has no data-only variant.
Status File::DataSyncImpl() { return SyncImpl(); }

Status File::SyncImpl() {
  if (!::FlushFileBuffers(handle_)) return WinStatus("FlushFileBuffers", path_, ::GetLastError());
  return Status::OK();
}

Status File::CloseImpl() {
  if (handle_ == kClosed) return Status::OK();
  HANDLE h = std::exchange(handle_, kClosed);
  if (!::CloseHandle(h)) return WinStatus("close", path_, ::GetLastError());
  return Status::OK();
}

Status FileLock::Acquire(const std::string& path, FileLock* out, bool* held_elsewhere) {
  out->Unlock();
  *held_elsewhere = false;
  File f;
  HANDLE h = ::CreateFileW(fs::path(path).c_str(), GENERIC_READ | GENERIC_WRITE,
                           FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                           OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) return WinStatus("open", path, ::GetLastError());
  f.handle_ = h;
  f.path_ = path;
  // Locks the first byte (a lock may extend past the end of the file).
  OVERLAPPED ov = At(0);
  if (!::LockFileEx(h, LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ov)) {
    const DWORD err = ::GetLastError();
    if (err == ERROR_LOCK_VIOLATION) {
      *held_elsewhere = true;
      return Status::OK();
    }
    return WinStatus("lock", path, err);
  }
  out->file_ = std::move(f);
  return Status::OK();
}

// Windows cannot flush a directory: FlushFileBuffers needs a handle opened
// for writing, which a directory handle cannot be. None is needed: NTFS
// journals directory entries as metadata, which FlushFileBuffers on the file
// itself commits, and renames use MOVEFILE_WRITE_THROUGH (Rename below).
// LevelDB's and RocksDB's Windows ports make the same choice.
Status SyncDirImpl(const std::string& /*dir*/) { return Status::OK(); }

Status RenameImpl(const std::string& from, const std::string& to) {
  // MOVEFILE_WRITE_THROUGH: returns only once the rename is on disk, which
  // takes the place of the directory sync POSIX needs after rename().
  if (!::MoveFileExW(fs::path(from).c_str(), fs::path(to).c_str(),
                     MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
    return WinStatus("rename " + from + " to", to, ::GetLastError());
  }
  return Status::OK();
}

#else
// ---- POSIX ----
namespace {

Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  return ErrorCodeStatus(what, path, std::error_code(err, std::generic_category()));
}

// The strongest flush of `fd` the platform offers (fdatasync only if
// `data_only` and Linux); returns 0 or -1 with errno set.
int FlushCall(int fd, bool data_only) {
#if defined(__APPLE__)
  (void)data_only;
  if (::fcntl(fd, F_FULLFSYNC) == 0) return 0;
  // See the file comment: only "not supported here" falls back to fsync.
  if (errno != ENOTSUP && errno != EINVAL) return -1;
  return ::fsync(fd);
#elif defined(__linux__)
  return data_only ? ::fdatasync(fd) : ::fsync(fd);
#else
  (void)data_only;
  return ::fsync(fd);
#endif
}

// The name of FlushCall in errors.
constexpr const char* kFlushName =
#if defined(__APPLE__)
    "F_FULLFSYNC";
#else
    "fsync";
#endif

}  // namespace

Status File::OpenImpl(const std::string& path, OpenMode mode, File* out, bool* not_found) {
  out->Close();
  if (not_found != nullptr) *not_found = false;
  int flags = O_CLOEXEC;
  switch (mode) {
    case OpenMode::kReadOnly: flags |= O_RDONLY; break;
    case OpenMode::kReadWrite: flags |= O_RDWR; break;
    case OpenMode::kCreateTruncate: flags |= O_RDWR | O_CREAT | O_TRUNC; break;
  }
  int fd;
  do {
    fd = ::open(path.c_str(), flags, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    if (errno == ENOENT && not_found != nullptr) {
      *not_found = true;
      return Status::OK();
    }
    return ErrnoStatus("open", path, errno);
  }
  out->handle_ = fd;
  out->path_ = path;
  return Status::OK();
}

Status File::Size(uint64_t* size) const {
  struct stat st;
  if (::fstat(handle_, &st) != 0) return ErrnoStatus("fstat", path_, errno);
  *size = static_cast<uint64_t>(st.st_size);
  return Status::OK();
}

Status File::ReadAt(uint64_t offset, size_t n, std::string* out) const {
  out->resize(n);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(handle_, &(*out)[done], n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read", path_, errno);
    }
    if (r == 0) break;  // end of file
    done += static_cast<size_t>(r);
  }
  out->resize(done);
  return Status::OK();
}

Status File::WriteAtImpl(const void* data, size_t n, uint64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(handle_, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write", path_, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return Status::OK();
}

Status File::TruncateImpl(uint64_t size) {
  int r;
  do {
    r = ::ftruncate(handle_, static_cast<off_t>(size));
  } while (r != 0 && errno == EINTR);
  if (r != 0) return ErrnoStatus("ftruncate", path_, errno);
  return Status::OK();
}

Status File::AllocateImpl(uint64_t offset, uint64_t length, bool* done) {
  *done = false;
#if defined(__linux__)
  int r;
  do {
    r = ::fallocate(handle_, 0, static_cast<off_t>(offset), static_cast<off_t>(length));
  } while (r != 0 && errno == EINTR);
  if (r != 0) {
    if (errno == EOPNOTSUPP || errno == ENOSYS) return Status::OK();
    return ErrnoStatus("fallocate", path_, errno);
  }
  *done = true;
#else
  (void)offset;
  (void)length;
#endif
  return Status::OK();
}

Status File::DataSyncImpl() {
#if defined(__linux__)
  if (FlushCall(handle_, /*data_only=*/true) != 0) return ErrnoStatus("fdatasync", path_, errno);
#else
  if (FlushCall(handle_, /*data_only=*/true) != 0) return ErrnoStatus(kFlushName, path_, errno);
#endif
  return Status::OK();
}

Status File::SyncImpl() {
  if (FlushCall(handle_, /*data_only=*/false) != 0) return ErrnoStatus(kFlushName, path_, errno);
  return Status::OK();
}

Status File::CloseImpl() {
  if (handle_ == kClosed) return Status::OK();
  int fd = std::exchange(handle_, kClosed);
  // Never retry close() on EINTR: the descriptor is released either way.
  if (::close(fd) != 0 && errno != EINTR) return ErrnoStatus("close", path_, errno);
  return Status::OK();
}

Status FileLock::Acquire(const std::string& path, FileLock* out, bool* held_elsewhere) {
  out->Unlock();
  *held_elsewhere = false;
  File f;
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoStatus("open", path, errno);
  f.handle_ = fd;
  f.path_ = path;
  int r;
  do {
    r = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (r != 0 && errno == EINTR);
  if (r != 0) {
    if (errno == EWOULDBLOCK) {
      *held_elsewhere = true;
      return Status::OK();
    }
    return ErrnoStatus("flock", path, errno);
  }
  out->file_ = std::move(f);
  return Status::OK();
}

Status SyncDirImpl(const std::string& dir) {
  int fd;
  do {
    fd = ::open(dir.c_str(), O_RDONLY | O_CLOEXEC
#ifdef O_DIRECTORY
                                 | O_DIRECTORY
#endif
    );
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoStatus("open directory", dir, errno);
  Status s;
  if (FlushCall(fd, /*data_only=*/false) != 0) {
    s = ErrnoStatus(std::string(kFlushName) + " directory", dir, errno);
  }
  ::close(fd);
  return s;
}

Status RenameImpl(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoStatus("rename " + from + " to", to, errno);
  }
  return Status::OK();
}

#endif  // _WIN32

// ---- portable (std::filesystem) ----

Status CreateDirsImpl(const std::string& dir, bool* created) {
  std::error_code ec;
  bool made = fs::create_directories(dir, ec);
  if (ec) return ErrorCodeStatus("create directory", dir, ec);
  if (created != nullptr) *created = made;
  return Status::OK();
}

Status ListFiles(const std::string& dir, std::vector<std::string>* names) {
  names->clear();
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return ErrorCodeStatus("list directory", dir, ec);
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    std::error_code type_ec;
    if (it->is_regular_file(type_ec)) names->push_back(it->path().filename().string());
  }
  if (ec) return ErrorCodeStatus("list directory", dir, ec);
  return Status::OK();
}

Status RemoveImpl(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) return ErrorCodeStatus("remove", path, ec);
  return Status::OK();
}

Status LinkImpl(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::create_hard_link(from, to, ec);
  if (ec) return ErrorCodeStatus("link " + from + " as", to, ec);
  return Status::OK();
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

std::string DirName(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace raftkv::file
