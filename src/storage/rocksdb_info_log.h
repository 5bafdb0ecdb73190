// RocksDbInfoLog: the informational log (the LOG file) of a RocksDB database
// raftkv writes to, in place of RocksDB's own.
//
// RocksDB's own info log writes through a WritableFileWriter that, once one
// write has failed (ENOSPC), fails every later one; in builds with assertions
// (Debian's librocksdb 7.8) the next line logged aborts the process
// (WritableFileWriter::AssertFalseAndGetStatusForPrevError). On a full disk
// that turned a stall the member recovers from into a crash. This log instead
// drops a line it cannot write, counts it, and tries the next one at the same
// place: once the disk has room the log goes on, with a line saying how many
// were lost.
//
// Writes go through file::File, so the file layer's interposer (the tests'
// full disk and power loss) sees them. Bounded: past max_bytes the file is
// renamed to LOG.old (replacing the one before) and a new LOG is begun; the
// LOG of the previous run becomes LOG.old at open. Nothing reads the LOG back:
// it is for people.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <memory>
#include <string>

#include <rocksdb/env.h>

#include "common/status.h"
#include "common/mutex.h"
#include "storage/file_util.h"

namespace raftkv {

class RocksDbInfoLog final : public rocksdb::Logger {
 public:
  static constexpr uint64_t kDefaultMaxBytes = uint64_t{16} << 20;

  // Opens dir/LOG, moving a LOG left by an earlier run to dir/LOG.old. The
  // directory must exist.
  static Status Open(const std::string& dir, uint64_t max_bytes,
                     std::shared_ptr<RocksDbInfoLog>* out);

  ~RocksDbInfoLog() override;

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override;

  // Lines dropped because the file refused them, since the log was opened.
  uint64_t dropped_lines() const;

 private:
  RocksDbInfoLog(std::string dir, uint64_t max_bytes);

  // Writes `line` at the end of the file, rolling the file first when it is
  // full; false when the file refused it.
  bool WriteLocked(const std::string& line) REQUIRES(mu_);
  Status RollLocked() REQUIRES(mu_);

  const std::string dir_;
  const uint64_t max_bytes_;
  mutable Mutex mu_;
  file::File file_ GUARDED_BY(mu_);
  uint64_t size_ GUARDED_BY(mu_) = 0;
  uint64_t dropped_ GUARDED_BY(mu_) = 0;         // since the log was opened
  uint64_t unreported_ GUARDED_BY(mu_) = 0;      // dropped since the last line written
};

}  // namespace raftkv
