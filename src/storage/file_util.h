// The few file-system calls storage needs, behind one small interface so that
// the platform-specific parts (POSIX today; Windows later) live in one file,
// file_util.cc. Internal to the storage module.
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
// class never relies on the descriptor's file offset.
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

  bool is_open() const { return fd_ >= 0; }
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
  // Linux, F_FULLFSYNC on macOS (plain fsync there does not flush the drive).
  Status DataSync();
  // Like DataSync() but also flushes all metadata (fsync).
  Status Sync();
  // Closes the descriptor; a no-op on a closed File.
  Status Close();

 private:
  int fd_ = -1;       // -1 when closed
  std::string path_;  // the path it was opened with, for messages
};

// Makes the creation, removal and renaming of entries in `dir` durable.
Status SyncDir(const std::string& dir);
// Creates `dir` and any missing parents; OK if it already exists. Sets
// *created (if non-null) to whether anything was created.
Status CreateDirs(const std::string& dir, bool* created = nullptr);
// Names (not paths) of the regular files in `dir`, unsorted.
Status ListFiles(const std::string& dir, std::vector<std::string>* names);
// Atomically replaces `to` with `from`.
Status Rename(const std::string& from, const std::string& to);
Status Remove(const std::string& path);

std::string JoinPath(const std::string& dir, const std::string& name);
// The directory holding `path` ("." for a bare file name).
std::string DirName(const std::string& path);

}  // namespace raftkv::file
