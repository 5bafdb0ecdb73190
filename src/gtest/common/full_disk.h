// FullDisk: a file::Interposer for tests that makes the disk refuse writes
// (as a full one does, ENOSPC) or syncs (as a failing one does, EIO) while
// told to; every other call goes through. With `only_under` set, only the
// files whose path contains it are refused (a full snapshot directory
// beside a log that still takes writes). Install it with
// file::SetInterposer before the files are opened.
#pragma once

#include <atomic>
#include <string>

#include "storage/file_util.h"

namespace raftkv::testing_util {

class FullDisk : public file::Interposer {
 public:
  std::atomic<bool> full{false};         // writes fail
  std::atomic<bool> failing_syncs{false};  // file syncs fail
  std::atomic<bool> refuse_creates{false};  // while full, files are not created either
  std::atomic<int> refused{0};           // calls failed so far
  std::string only_under;                // set before the files are opened

  Status Open(const std::string& path, file::OpenMode mode, const Op& op, uint64_t* file_id) override {
    if (full && refuse_creates && mode == file::OpenMode::kCreateTruncate &&
        path.find(only_under) != std::string::npos) {
      ++refused;
      return Status::IOError("open " + path + ": No space left on device");
    }
    Status s = op();
    if (s.ok()) *file_id = ++next_id_;  // the calls below reach only files with an id
    return s;
  }
  Status WriteAt(uint64_t, const file::File& f, uint64_t, size_t, const Op& op) override {
    if (!full || f.path().find(only_under) == std::string::npos) return op();
    ++refused;
    return Status::IOError("write " + f.path() + ": No space left on device");
  }
  Status Truncate(uint64_t, const file::File&, uint64_t, const Op& op) override { return op(); }
  Status Sync(uint64_t, const file::File& f, const Op& op) override {
    if (!failing_syncs || f.path().find(only_under) == std::string::npos) return op();
    ++refused;
    return Status::IOError("fdatasync " + f.path() + ": Input/output error");
  }
  void Closed(uint64_t) override {}
  Status SyncDir(const std::string&, const Op& op) override { return op(); }
  Status CreateDirs(const std::string&, const Op& op) override { return op(); }
  Status Rename(const std::string&, const std::string&, const Op& op) override { return op(); }
  Status Remove(const std::string&, const Op& op) override { return op(); }
  Status Link(const std::string&, const std::string&, const Op& op) override { return op(); }

 private:
  std::atomic<uint64_t> next_id_{0};
};

// Installs an interposer for the life of a test (file::SetInterposer), and
// removes it at the end whatever happened.
class ScopedInterposer {
 public:
  explicit ScopedInterposer(file::Interposer* interposer) { file::SetInterposer(interposer); }
  ~ScopedInterposer() { file::SetInterposer(nullptr); }
  ScopedInterposer(const ScopedInterposer&) = delete;
  ScopedInterposer& operator=(const ScopedInterposer&) = delete;
};

}  // namespace raftkv::testing_util
