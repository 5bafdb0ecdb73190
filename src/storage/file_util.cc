// POSIX implementation of storage/file_util.h (Linux, macOS, the BSDs).
// Directory-level calls go through std::filesystem, which is portable; only
// descriptor-based I/O and durability calls are POSIX. A Windows port needs
// a second implementation of the File class and SyncDir() only.
#include "storage/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

namespace raftkv::file {
namespace {

namespace fs = std::filesystem;

Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  return Status::IOError(what + " " + path + ": " +
                         std::error_code(err, std::generic_category()).message());
}

Status ErrorCodeStatus(const std::string& what, const std::string& path,
                       const std::error_code& ec) {
  return Status::IOError(what + " " + path + ": " + ec.message());
}

}  // namespace

File::~File() { Close(); }

File::File(File&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

Status File::Open(const std::string& path, OpenMode mode, File* out, bool* not_found) {
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
  out->fd_ = fd;
  out->path_ = path;
  return Status::OK();
}

Status File::Size(uint64_t* size) const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return ErrnoStatus("fstat", path_, errno);
  *size = static_cast<uint64_t>(st.st_size);
  return Status::OK();
}

Status File::ReadAll(std::string* contents) const {
  uint64_t size = 0;
  Status s = Size(&size);
  if (!s.ok()) return s;
  contents->resize(size);
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd_, &(*contents)[done], size - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read", path_, errno);
    }
    if (n == 0) break;  // shrank under us
    done += static_cast<uint64_t>(n);
  }
  contents->resize(done);
  return Status::OK();
}

Status File::ReadAt(uint64_t offset, size_t n, std::string* out) const {
  out->resize(n);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, &(*out)[done], n - done, static_cast<off_t>(offset + done));
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

Status File::WriteAt(const void* data, size_t n, uint64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
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

Status File::Truncate(uint64_t size) {
  int r;
  do {
    r = ::ftruncate(fd_, static_cast<off_t>(size));
  } while (r != 0 && errno == EINTR);
  if (r != 0) return ErrnoStatus("ftruncate", path_, errno);
  return Status::OK();
}

Status File::DataSync() {
#if defined(__APPLE__)
  if (::fcntl(fd_, F_FULLFSYNC) == 0) return Status::OK();
  // Not supported by every file system (e.g. network mounts): fall back.
  if (::fsync(fd_) != 0) return ErrnoStatus("fsync", path_, errno);
#elif defined(__linux__)
  if (::fdatasync(fd_) != 0) return ErrnoStatus("fdatasync", path_, errno);
#else
  if (::fsync(fd_) != 0) return ErrnoStatus("fsync", path_, errno);
#endif
  return Status::OK();
}

Status File::Sync() {
#if defined(__APPLE__)
  if (::fcntl(fd_, F_FULLFSYNC) == 0) return Status::OK();
#endif
  if (::fsync(fd_) != 0) return ErrnoStatus("fsync", path_, errno);
  return Status::OK();
}

Status File::Close() {
  if (fd_ < 0) return Status::OK();
  int fd = std::exchange(fd_, -1);
  // Never retry close() on EINTR: the descriptor is released either way.
  if (::close(fd) != 0 && errno != EINTR) return ErrnoStatus("close", path_, errno);
  return Status::OK();
}

Status SyncDir(const std::string& dir) {
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
  if (::fsync(fd) != 0) s = ErrnoStatus("fsync directory", dir, errno);
  ::close(fd);
  return s;
}

Status CreateDirs(const std::string& dir, bool* created) {
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

Status Rename(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) return ErrorCodeStatus("rename " + from + " to", to, ec);
  return Status::OK();
}

Status Remove(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) return ErrorCodeStatus("remove", path, ec);
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
