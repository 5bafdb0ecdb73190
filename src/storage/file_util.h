// The file-system calls storage (and the service's data-directory lock) need,
// behind one small interface so that the platform-specific parts live in one
// file, file_util.cc: POSIX (Linux, macOS, the BSDs) and Win32. Nothing else
// in storage or service calls the operating system's file API directly.
//
// Every call returns a Status whose message names the path and the failing
// operation with the system's error text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "storage/status.h"

namespace raftkv::file {

enum class OpenMode {
  kReadOnly,
  kReadWrite,        // the file must exist
  kCreateTruncate,   // read-write; created if missing, emptied if present
};

// An open file, closed when destroyed. Move-only. Positional I/O only: the
// class never relies on the descriptor's file offset (pread/pwrite; ReadFile/
// WriteFile with an OVERLAPPED offset on Windows).
class File {
 public:
  File() = default;
  ~File();
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // Opens `path`. If `not_found` is non-null, a missing file (or missing
  // parent directory) sets it to true and returns OK with *out left closed.
  static Status Open(const std::string& path, OpenMode mode, File* out,
                     bool* not_found = nullptr);

  bool is_open() const { return handle_ != kClosed; }
  const std::string& path() const { return path_; }

  Status Size(uint64_t* size) const;
  // Reads the whole file into *contents.
  Status ReadAll(std::string* contents) const;
  // Reads up to `n` bytes at `offset` into *out (resized to what was read:
  // fewer than `n` only at the end of the file).
  Status ReadAt(uint64_t offset, size_t n, std::string* out) const;
  // Writes all of data[0, n) at `offset`, retrying short writes.
  Status WriteAt(const void* data, size_t n, uint64_t offset);
  Status Truncate(uint64_t size);
  // Makes the file's data (and the size, if it changed) durable: fdatasync on
  // Linux, fcntl(F_FULLFSYNC) on macOS (plain fsync there does not flush the
  // drive's cache; fsync where the file system does not support it),
  // FlushFileBuffers on Windows, fsync elsewhere.
  Status DataSync();
  // Like DataSync() but also flushes all metadata (fsync; the same calls as
  // DataSync on macOS and Windows, which have no data-only flush).
  Status Sync();
  // Closes the descriptor; a no-op on a closed File.
  Status Close();

 private:
#ifdef _WIN32
  using Handle = void*;  // a Win32 HANDLE; windows.h stays out of this header
  static constexpr Handle kClosed = nullptr;
#else
  using Handle = int;  // a file descriptor
  static constexpr Handle kClosed = -1;
#endif
  Handle handle_ = kClosed;
  std::string path_;  // the path it was opened with, for messages

  friend class FileLock;
};

// An exclusive lock on a file (created if missing), held until the FileLock
// is destroyed or Unlock()ed: the one-server-per-data-directory LOCK file.
// flock(LOCK_EX | LOCK_NB) on POSIX, LockFileEx on Windows; either way the
// lock is per open file, so a second Acquire of the same path fails even in
// the same process, and the system releases it when the process dies.
class FileLock {
 public:
  // Locks `path`. If another holder has it, sets *held_elsewhere to true and
  // returns OK with *out left unlocked.
  static Status Acquire(const std::string& path, FileLock* out, bool* held_elsewhere);
  bool locked() const { return file_.is_open(); }
  void Unlock() { file_.Close(); }

 private:
  File file_;
};

// Makes the creation, removal and renaming of entries in `dir` durable:
// fsync of the directory on POSIX (F_FULLFSYNC on macOS), a no-op on Windows
// (see file_util.cc).
Status SyncDir(const std::string& dir);
// Creates `dir` and any missing parents; OK if it already exists. Sets
// *created (if non-null) to whether anything was created.
Status CreateDirs(const std::string& dir, bool* created = nullptr);
// Names (not paths) of the regular files in `dir`, unsorted.
Status ListFiles(const std::string& dir, std::vector<std::string>* names);
// Atomically replaces `to` with `from` (rename; MoveFileExW with
// MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH on Windows). Callers
// close `from` first and follow with SyncDir(DirName(to)).
Status Rename(const std::string& from, const std::string& to);
Status Remove(const std::string& path);

std::string JoinPath(const std::string& dir, const std::string& name);
// The directory holding `path` ("." for a bare file name).
std::string DirName(const std::string& path);

}  // namespace raftkv::file
