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
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

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
  // Reserves the blocks of [offset, offset + length) and extends the file to
  // cover them (reading as zeros), so that writes below that end change
  // neither its size nor its block map: a DataSync() after such a write
  // waits for the data and the drive's cache flush, not also for an inode
  // update. Never shrinks the file. Linux only (fallocate); elsewhere, or
  // where the file system cannot, it does nothing and sets *done to false.
  Status Allocate(uint64_t offset, uint64_t length, bool* done);
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
  static Status OpenImpl(const std::string& path, OpenMode mode, File* out, bool* not_found);
  Status WriteAtImpl(const void* data, size_t n, uint64_t offset);
  Status TruncateImpl(uint64_t size);
  Status AllocateImpl(uint64_t offset, uint64_t length, bool* done);
  Status DataSyncImpl();
  Status SyncImpl();
  Status CloseImpl();

  Handle handle_ = kClosed;
  std::string path_;  // the path it was opened with, for messages
  // The id an Interposer gave this file when it was opened (0: none).
  uint64_t interposed_id_ = 0;

  friend class FileLock;
};

// Test-only: an Interposer sees every call of this file layer that changes
// files: writes, truncations and syncs of files opened for writing, their
// creation, directory syncs, directory creation, renames and removals; and
// the same calls of RocksDB, whose file I/O bypasses this layer
// (InterposedFileSystem, storage/rocksdb_fs.h), plus its hard links. For a
// RocksDB file, the `const File&` is a read-only File on the same path: the
// interposer may read it and ask its size, as for its own files.
// Power-loss tests install one (src/gtest/common/fault_fs.h) that records
// what each call changed and what it made durable, and on a simulated power
// cut keeps only the durable part. Each method receives the real operation
// as `op` and must run it exactly once (or, for a sync it chooses to skip,
// not at all) and return its result. Reads and read-only opens are not
// interposed. No interposer is installed outside tests: each call then costs
// one atomic load.
class Interposer {
 public:
  using Op = std::function<Status()>;
  virtual ~Interposer() = default;
  // File::Open in kReadWrite or kCreateTruncate mode. On success the File
  // keeps *file_id and passes it to the calls below.
  virtual Status Open(const std::string& path, OpenMode mode, const Op& op, uint64_t* file_id) = 0;
  virtual Status WriteAt(uint64_t file_id, const File& file, uint64_t offset, size_t n,
                         const Op& op) = 0;
  virtual Status Truncate(uint64_t file_id, const File& file, uint64_t size, const Op& op) = 0;
  // File::DataSync and File::Sync.
  virtual Status Sync(uint64_t file_id, const File& file, const Op& op) = 0;
  virtual void Closed(uint64_t file_id) = 0;
  virtual Status SyncDir(const std::string& dir, const Op& op) = 0;
  virtual Status CreateDirs(const std::string& dir, const Op& op) = 0;
  virtual Status Rename(const std::string& from, const std::string& to, const Op& op) = 0;
  virtual Status Remove(const std::string& path, const Op& op) = 0;
  // A hard link `to` of the file `from` (RocksDB's checkpoints link SSTs).
  virtual Status Link(const std::string& from, const std::string& to, const Op& op) = 0;
};
// Installs `interposer` for the whole process (nullptr removes it). Files
// opened before it was installed are not interposed.
void SetInterposer(Interposer* interposer);
// The installed interposer (nullptr: none), for the file systems of other
// libraries that route their calls to it (storage/rocksdb_fs.h).
Interposer* CurrentInterposer();

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
// CreateDirs, and then makes each directory it created durable in its
// parent (SyncDir of the parent after each level): a directory created
// without that may vanish on power loss with everything synced inside it.
Status CreateDirsDurably(const std::string& dir);
// Names (not paths) of the regular files in `dir`, unsorted.
Status ListFiles(const std::string& dir, std::vector<std::string>* names);
// Atomically replaces `to` with `from` (rename; MoveFileExW with
// MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH on Windows). Callers
// close `from` first and follow with SyncDir(DirName(to)).
Status Rename(const std::string& from, const std::string& to);
// Replaces the file at `path` with `data` so that a crash leaves either the
// old or the new contents: writes `path`.tmp, fsyncs it, renames it over
// `path` and fsyncs the directory.
Status ReplaceFileDurably(const std::string& path, const void* data, size_t n);
Status Remove(const std::string& path);
// A hard link `to` of the file `from` (a checkpoint's SST files become a
// store's without a copy). Callers follow with SyncDir(DirName(to)).
Status Link(const std::string& from, const std::string& to);

std::string JoinPath(const std::string& dir, const std::string& name);
// The directory holding `path` ("." for a bare file name).
std::string DirName(const std::string& path);

}  // namespace raftkv::file
