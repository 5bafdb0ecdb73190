#include "storage/rocksdb_fs.h"

#include <utility>

#include "storage/crc32c.h"
#include "storage/file_util.h"

namespace raftkv {
namespace {

using file::Interposer;
using rocksdb::FileOptions;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

// A failure the interposer made up that names ENOSPC is NoSpace, as RocksDB's
// own file system reports a full disk (RocksDB can resume after that one).
IOStatus ToIOStatus(const Status& s) {
  if (s.ok()) return IOStatus::OK();
  if (s.ToString().find("No space left on device") != std::string::npos) return IOStatus::NoSpace(s.ToString());
  return IOStatus::IOError(s.ToString());
}

// Runs `real` (RocksDB's own call) as the op of the interposed `call`.
// RocksDB gets its own status back when the interposer ran the op and passed
// its result on; otherwise the interposer's (OK for a sync it modelled
// instead of running, an IOError for a failure it made up).
template <typename Call, typename Real>
IOStatus Interpose(const Call& call, const Real& real) {
  IOStatus real_status;
  bool ran = false;
  const Status s = call([&]() -> Status {
    ran = true;
    real_status = real();
    return real_status.ok() ? Status::OK() : Status::IOError(real_status.ToString());
  });
  if (ran && s.ok() == real_status.ok()) return real_status;
  return ToIOStatus(s);
}

// The interposer's view of one open RocksDB file: the id its Open gave and
// the read-only File it reads the file through. Calls go straight to RocksDB
// when the file was not given an id (not watched) or the interposer is gone,
// as for a file::File.
class InterposedHandle {
 public:
  InterposedHandle() = default;
  InterposedHandle(const InterposedHandle&) = delete;
  InterposedHandle& operator=(const InterposedHandle&) = delete;
  ~InterposedHandle() { Closed(); }

  // Opens `path` through `ip` with `real`, RocksDB's open, as the op; `mode`
  // says what the open does to the file.
  template <typename Real>
  IOStatus Open(Interposer* ip, const std::string& path, file::OpenMode mode, const Real& real) {
    uint64_t id = 0;
    IOStatus s =
        Interpose([&](const Interposer::Op& op) { return ip->Open(path, mode, op, &id); }, real);
    if (!s.ok() || id == 0) return s;
    const Status opened = file::File::Open(path, file::OpenMode::kReadOnly, &file_);
    if (!opened.ok()) {
      ip->Closed(id);
      return ToIOStatus(opened);
    }
    id_ = id;
    return s;
  }

  // The file's size now (0 when not interposed: no offset is needed then).
  IOStatus Size(uint64_t* size) const {
    *size = 0;
    return id_ == 0 ? IOStatus::OK() : ToIOStatus(file_.Size(size));
  }

  template <typename Real>
  IOStatus WriteAt(uint64_t offset, size_t n, const Real& real) {
    Interposer* ip = Current();
    if (ip == nullptr) return real();
    return Interpose(
        [&](const Interposer::Op& op) { return ip->WriteAt(id_, file_, offset, n, op); }, real);
  }

  template <typename Real>
  IOStatus Truncate(uint64_t size, const Real& real) {
    Interposer* ip = Current();
    if (ip == nullptr) return real();
    return Interpose([&](const Interposer::Op& op) { return ip->Truncate(id_, file_, size, op); },
                     real);
  }

  template <typename Real>
  IOStatus Sync(const Real& real) {
    Interposer* ip = Current();
    if (ip == nullptr) return real();
    return Interpose([&](const Interposer::Op& op) { return ip->Sync(id_, file_, op); }, real);
  }

  void Closed() {
    const uint64_t id = std::exchange(id_, 0);
    if (id == 0) return;
    file_.Close();
    if (Interposer* ip = file::CurrentInterposer()) ip->Closed(id);
  }

 private:
  Interposer* Current() const { return id_ == 0 ? nullptr : file::CurrentInterposer(); }

  uint64_t id_ = 0;
  file::File file_;
};

class InterposedWritableFile final : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  // `end`: where the first Append goes (the file's size when RocksDB opened
  // it to append, 0 when it writes it from the start).
  InterposedWritableFile(std::unique_ptr<rocksdb::FSWritableFile> target,
                         std::unique_ptr<InterposedHandle> handle, uint64_t end)
      : FSWritableFileOwnerWrapper(std::move(target)), handle_(std::move(handle)), end_(end) {}

  IOStatus Append(const Slice& data, const IOOptions& options, IODebugContext* dbg) override {
    return Written(end_, data.size(), [&] { return target()->Append(data, options, dbg); });
  }
  IOStatus Append(const Slice& data, const IOOptions& options,
                  const rocksdb::DataVerificationInfo& info, IODebugContext* dbg) override {
    return Written(end_, data.size(), [&] { return target()->Append(data, options, info, dbg); });
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& options,
                            IODebugContext* dbg) override {
    return Written(offset, data.size(),
                   [&] { return target()->PositionedAppend(data, offset, options, dbg); });
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& options,
                            const rocksdb::DataVerificationInfo& info,
                            IODebugContext* dbg) override {
    return Written(offset, data.size(),
                   [&] { return target()->PositionedAppend(data, offset, options, info, dbg); });
  }
  IOStatus Truncate(uint64_t size, const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = handle_->Truncate(size, [&] { return target()->Truncate(size, options, dbg); });
    if (s.ok()) end_ = size;
    return s;
  }
  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    return handle_->Sync([&] { return target()->Sync(options, dbg); });
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    return handle_->Sync([&] { return target()->Fsync(options, dbg); });
  }
  IOStatus Close(const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = target()->Close(options, dbg);
    handle_->Closed();
    return s;
  }

 private:
  template <typename Real>
  IOStatus Written(uint64_t offset, size_t n, const Real& real) {
    IOStatus s = handle_->WriteAt(offset, n, real);
    if (s.ok()) end_ = offset + n;
    return s;
  }

  const std::unique_ptr<InterposedHandle> handle_;
  uint64_t end_;  // the end of the last write: where the next Append goes
};

class InterposedRandomRWFile final : public rocksdb::FSRandomRWFileOwnerWrapper {
 public:
  InterposedRandomRWFile(std::unique_ptr<rocksdb::FSRandomRWFile> target,
                         std::unique_ptr<InterposedHandle> handle)
      : FSRandomRWFileOwnerWrapper(std::move(target)), handle_(std::move(handle)) {}

  IOStatus Write(uint64_t offset, const Slice& data, const IOOptions& options,
                 IODebugContext* dbg) override {
    return handle_->WriteAt(offset, data.size(),
                            [&] { return target()->Write(offset, data, options, dbg); });
  }
  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    return handle_->Sync([&] { return target()->Sync(options, dbg); });
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    return handle_->Sync([&] { return target()->Fsync(options, dbg); });
  }
  IOStatus Close(const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = target()->Close(options, dbg);
    handle_->Closed();
    return s;
  }

 private:
  const std::unique_ptr<InterposedHandle> handle_;
};

class InterposedDirectory final : public rocksdb::FSDirectoryWrapper {
 public:
  InterposedDirectory(std::string name, std::unique_ptr<rocksdb::FSDirectory> target)
      : FSDirectoryWrapper(std::move(target)), name_(std::move(name)) {}

  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    return Synced([&] { return FSDirectoryWrapper::Fsync(options, dbg); });
  }
  // RocksDB passes why it syncs (on btrfs, the default file system skips
  // some directory syncs, which btrfs does not need): still a SyncDir.
  IOStatus FsyncWithDirOptions(const IOOptions& options, IODebugContext* dbg,
                               const rocksdb::DirFsyncOptions& dir_options) override {
    return Synced(
        [&] { return FSDirectoryWrapper::FsyncWithDirOptions(options, dbg, dir_options); });
  }

 private:
  template <typename Real>
  IOStatus Synced(const Real& real) {
    Interposer* ip = file::CurrentInterposer();
    if (ip == nullptr) return real();
    return Interpose([&](const Interposer::Op& op) { return ip->SyncDir(name_, op); }, real);
  }

  const std::string name_;
};

// A path-level call (no open file): interposed with `call` if an
// interposer is installed.
template <typename Call, typename Real>
IOStatus PathCall(const Call& call, const Real& real) {
  Interposer* ip = file::CurrentInterposer();
  if (ip == nullptr) return real();
  return Interpose([&](const Interposer::Op& op) { return call(ip, op); }, real);
}

// Opens `fname` through `ip` with `open` (RocksDB's open, which fills
// *result), then wraps the file it gave: wrap(file, handle, end), `end`
// being the file's size when `at_end` (appends go after it), else 0. On
// failure *result is empty.
template <typename File, typename Open, typename Wrap>
IOStatus OpenInterposed(Interposer* ip, const std::string& fname, file::OpenMode mode, const Open& open,
                        bool at_end, std::unique_ptr<File>* result, const Wrap& wrap) {
  auto handle = std::make_unique<InterposedHandle>();
  IOStatus s = handle->Open(ip, fname, mode, open);
  uint64_t end = 0;
  if (s.ok() && at_end) s = handle->Size(&end);
  if (!s.ok()) {
    result->reset();
    return s;
  }
  *result = wrap(std::move(*result), std::move(handle), end);
  return s;
}

class Crc32cChecksum final : public rocksdb::FileChecksumGenerator {
 public:
  void Update(const char* data, size_t n) override { crc_ = crc32c::Extend(crc_, data, n); }
  void Finalize() override {
    const char big_endian[4] = {static_cast<char>(crc_ >> 24), static_cast<char>(crc_ >> 16),
                                static_cast<char>(crc_ >> 8), static_cast<char>(crc_)};
    sum_.assign(big_endian, sizeof(big_endian));
  }
  std::string GetChecksum() const override { return sum_; }
  const char* Name() const override { return rocksdb::kStandardDbFileChecksumFuncName; }

 private:
  uint32_t crc_ = 0;
  std::string sum_;
};

class Crc32cChecksumFactory final : public rocksdb::FileChecksumGenFactory {
 public:
  std::unique_ptr<rocksdb::FileChecksumGenerator> CreateFileChecksumGenerator(
      const rocksdb::FileChecksumGenContext& context) override {
    // Another function's name (a file checksummed otherwise): none.
    if (!context.requested_checksum_func_name.empty() &&
        context.requested_checksum_func_name != rocksdb::kStandardDbFileChecksumFuncName) {
      return nullptr;
    }
    return std::make_unique<Crc32cChecksum>();
  }
  const char* Name() const override { return "raftkv.Crc32cFileChecksums"; }
};

}  // namespace

InterposedFileSystem::InterposedFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base)
    : FileSystemWrapper(base) {}

IOStatus InterposedFileSystem::NewWritableFile(const std::string& fname,
                                               const FileOptions& options,
                                               std::unique_ptr<rocksdb::FSWritableFile>* result,
                                               IODebugContext* dbg) {
  Interposer* ip = file::CurrentInterposer();
  if (ip == nullptr) return target()->NewWritableFile(fname, options, result, dbg);
  return OpenInterposed(
      ip, fname, file::OpenMode::kCreateTruncate,
      [&] { return target()->NewWritableFile(fname, options, result, dbg); }, false, result,
      [](auto file, auto handle, uint64_t end) {
        return std::make_unique<InterposedWritableFile>(std::move(file), std::move(handle), end);
      });
}

IOStatus InterposedFileSystem::ReopenWritableFile(const std::string& fname,
                                                  const FileOptions& options,
                                                  std::unique_ptr<rocksdb::FSWritableFile>* result,
                                                  IODebugContext* dbg) {
  Interposer* ip = file::CurrentInterposer();
  if (ip == nullptr) return target()->ReopenWritableFile(fname, options, result, dbg);
  // It creates the file if missing: to the interposer, that is a creation.
  const bool exists = target()->FileExists(fname, options.io_options, dbg).ok();
  return OpenInterposed(
      ip, fname, exists ? file::OpenMode::kReadWrite : file::OpenMode::kCreateTruncate,
      [&] { return target()->ReopenWritableFile(fname, options, result, dbg); }, true, result,
      [](auto file, auto handle, uint64_t end) {
        return std::make_unique<InterposedWritableFile>(std::move(file), std::move(handle), end);
      });
}

IOStatus InterposedFileSystem::ReuseWritableFile(const std::string& fname,
                                                 const std::string& old_fname,
                                                 const FileOptions& options,
                                                 std::unique_ptr<rocksdb::FSWritableFile>* result,
                                                 IODebugContext* dbg) {
  Interposer* ip = file::CurrentInterposer();
  if (ip == nullptr) return target()->ReuseWritableFile(fname, old_fname, options, result, dbg);
  // RocksDB's call renames an old WAL into place and opens it to overwrite
  // it from the start: to the interposer, a rename (whose op is the whole
  // call) and then an open of the file already opened.
  IOStatus s = Interpose(
      [&](const Interposer::Op& op) { return ip->Rename(old_fname, fname, op); },
      [&] { return target()->ReuseWritableFile(fname, old_fname, options, result, dbg); });
  if (!s.ok()) {
    result->reset();
    return s;
  }
  auto handle = std::make_unique<InterposedHandle>();
  s = handle->Open(ip, fname, file::OpenMode::kReadWrite, [] { return IOStatus::OK(); });
  if (!s.ok()) {
    result->reset();
    return s;
  }
  *result = std::make_unique<InterposedWritableFile>(std::move(*result), std::move(handle), 0);
  return s;
}

IOStatus InterposedFileSystem::NewRandomRWFile(const std::string& fname,
                                               const FileOptions& options,
                                               std::unique_ptr<rocksdb::FSRandomRWFile>* result,
                                               IODebugContext* dbg) {
  Interposer* ip = file::CurrentInterposer();
  if (ip == nullptr) return target()->NewRandomRWFile(fname, options, result, dbg);
  const bool exists = target()->FileExists(fname, options.io_options, dbg).ok();
  return OpenInterposed(
      ip, fname, exists ? file::OpenMode::kReadWrite : file::OpenMode::kCreateTruncate,
      [&] { return target()->NewRandomRWFile(fname, options, result, dbg); }, false, result,
      [](auto file, auto handle, uint64_t) {
        return std::make_unique<InterposedRandomRWFile>(std::move(file), std::move(handle));
      });
}

IOStatus InterposedFileSystem::NewDirectory(const std::string& name, const IOOptions& options,
                                            std::unique_ptr<rocksdb::FSDirectory>* result,
                                            IODebugContext* dbg) {
  IOStatus s = target()->NewDirectory(name, options, result, dbg);
  if (s.ok() && file::CurrentInterposer() != nullptr) {
    *result = std::make_unique<InterposedDirectory>(name, std::move(*result));
  }
  return s;
}

IOStatus InterposedFileSystem::DeleteFile(const std::string& fname, const IOOptions& options,
                                          IODebugContext* dbg) {
  return PathCall([&](Interposer* ip, const Interposer::Op& op) { return ip->Remove(fname, op); },
                  [&] { return target()->DeleteFile(fname, options, dbg); });
}

IOStatus InterposedFileSystem::Truncate(const std::string& fname, size_t size,
                                        const IOOptions& options, IODebugContext* dbg) {
  Interposer* ip = file::CurrentInterposer();
  if (ip == nullptr) return target()->Truncate(fname, size, options, dbg);
  // To the interposer: the file opened, truncated and closed.
  InterposedHandle handle;
  IOStatus s = handle.Open(ip, fname, file::OpenMode::kReadWrite, [] { return IOStatus::OK(); });
  if (!s.ok()) return s;
  return handle.Truncate(size, [&] { return target()->Truncate(fname, size, options, dbg); });
}

IOStatus InterposedFileSystem::CreateDir(const std::string& dirname, const IOOptions& options,
                                         IODebugContext* dbg) {
  return PathCall(
      [&](Interposer* ip, const Interposer::Op& op) { return ip->CreateDirs(dirname, op); },
      [&] { return target()->CreateDir(dirname, options, dbg); });
}

IOStatus InterposedFileSystem::CreateDirIfMissing(const std::string& dirname,
                                                  const IOOptions& options, IODebugContext* dbg) {
  return PathCall(
      [&](Interposer* ip, const Interposer::Op& op) { return ip->CreateDirs(dirname, op); },
      [&] { return target()->CreateDirIfMissing(dirname, options, dbg); });
}

IOStatus InterposedFileSystem::DeleteDir(const std::string& dirname, const IOOptions& options,
                                         IODebugContext* dbg) {
  return PathCall([&](Interposer* ip, const Interposer::Op& op) { return ip->Remove(dirname, op); },
                  [&] { return target()->DeleteDir(dirname, options, dbg); });
}

IOStatus InterposedFileSystem::RenameFile(const std::string& src, const std::string& target_name,
                                          const IOOptions& options, IODebugContext* dbg) {
  return PathCall(
      [&](Interposer* ip, const Interposer::Op& op) { return ip->Rename(src, target_name, op); },
      [&] { return target()->RenameFile(src, target_name, options, dbg); });
}

IOStatus InterposedFileSystem::LinkFile(const std::string& src, const std::string& target_name,
                                        const IOOptions& options, IODebugContext* dbg) {
  return PathCall(
      [&](Interposer* ip, const Interposer::Op& op) { return ip->Link(src, target_name, op); },
      [&] { return target()->LinkFile(src, target_name, options, dbg); });
}

rocksdb::Env* InterposedEnv() {
  static rocksdb::Env* const env =
      rocksdb::NewCompositeEnv(
          std::make_shared<InterposedFileSystem>(rocksdb::FileSystem::Default()))
          .release();
  return env;
}

std::shared_ptr<rocksdb::FileChecksumGenFactory> Crc32cFileChecksums() {
  static const auto factory = std::make_shared<Crc32cChecksumFactory>();
  return factory;
}

}  // namespace raftkv
