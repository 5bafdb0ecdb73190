// InterposedFileSystem: the rocksdb::FileSystem RocksDbBackend opens its
// databases with. RocksDB does its own file I/O, past storage/file_util.h, so
// this wrapper of the default file system hands each of its file-changing
// calls to the installed file::Interposer, as file_util.cc does for
// raftkv's own files: power-loss tests (FaultFs, src/gtest/common/fault_fs.h)
// then see RocksDB's writes, syncs, directory syncs, creations, renames,
// removals and hard links. Built only with RAFTKV_HAVE_ROCKSDB.
//
// The mapping onto file::Interposer:
//  - NewWritableFile: Open(kCreateTruncate); ReopenWritableFile and
//    NewRandomRWFile: Open(kReadWrite), or kCreateTruncate when they create
//    the file; ReuseWritableFile (WAL recycling): Rename, then Open.
//  - FSWritableFile Append/PositionedAppend and FSRandomRWFile Write:
//    WriteAt at the offset the bytes go to; Truncate; Sync and Fsync: Sync;
//    Close (or destruction): Closed. The `const File&` these receive is a
//    read-only file::File on the same path, opened with the file.
//  - FSDirectory Fsync/FsyncWithDirOptions: SyncDir.
//  - CreateDir/CreateDirIfMissing: CreateDirs; DeleteFile and DeleteDir:
//    Remove; RenameFile: Rename; LinkFile: Link; Truncate (by path): Open,
//    Truncate, Closed.
// Not interposed: RangeSync (sync_file_range only starts writeback: it makes
// nothing durable), Flush (hands RocksDB's buffer to the system, like a
// write that already happened), Allocate (fallocate keeping the size), the
// LOCK file (LockFile) and the info log (NewLogger): both are recreated at
// every open and recovery reads neither.
//
// Files and directory handles opened while no interposer is installed are
// RocksDB's own, unwrapped: without an interposer each open costs one atomic
// load and nothing else does.
#pragma once

#include <memory>
#include <string>

#include <rocksdb/env.h>
#include <rocksdb/file_checksum.h>
#include <rocksdb/file_system.h>

namespace raftkv {

class InterposedFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  explicit InterposedFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base);

  static const char* kClassName() { return "RaftkvInterposedFileSystem"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& fname,
                                       const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& fname, const std::string& old_fname,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomRWFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& options,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& fname, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus Truncate(const std::string& fname, size_t size,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDir(const std::string& dirname, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDirIfMissing(const std::string& dirname,
                                       const rocksdb::IOOptions& options,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteDir(const std::string& dirname, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& src, const std::string& target,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus LinkFile(const std::string& src, const std::string& target,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
};

// The process-wide Env over an InterposedFileSystem of the default file
// system (RocksDB's default Env's threads and clock), for
// rocksdb::Options::env. Never destroyed, like rocksdb::Env::Default().
rocksdb::Env* InterposedEnv();

// The whole-file checksums of the SST files RocksDB writes
// (rocksdb::Options::file_checksum_gen_factory): the same CRC-32C, under
// the same name (kStandardDbFileChecksumFuncName), in the same bytes as
// rocksdb::GetFileChecksumGenCrc32cFactory(), computed with
// storage/crc32c.h, which uses the CPU's crc32 instruction where a
// portable build of RocksDB (Debian's) does not.
std::shared_ptr<rocksdb::FileChecksumGenFactory> Crc32cFileChecksums();

}  // namespace raftkv
