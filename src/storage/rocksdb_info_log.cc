#include "storage/rocksdb_info_log.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <utility>

namespace raftkv {
namespace {

constexpr const char* kLogName = "LOG";
constexpr const char* kOldLogName = "LOG.old";

// "2026/11/28-04:50:01.123456 140221 " as RocksDB begins its lines.
std::string LinePrefix() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                          now.time_since_epoch()).count() % 1000000;
  std::tm t{};
#ifdef _WIN32
  localtime_s(&t, &seconds);
#else
  localtime_r(&seconds, &t);
#endif
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%04d/%02d/%02d-%02d:%02d:%02d.%06d %" PRIu64 " ",
                t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
                static_cast<int>(micros), rocksdb::Env::Default()->GetThreadID());
  return buf;
}

// The message, cut at 64 KiB as RocksDB's own log cuts it.
std::string Format(const char* format, va_list ap) {
  constexpr size_t kMaxMessage = 64 << 10;
  va_list copy;
  va_copy(copy, ap);
  char small[512];
  const int n = std::vsnprintf(small, sizeof(small), format, copy);
  va_end(copy);
  if (n < 0) return "(a RocksDB message that could not be formatted)";
  if (static_cast<size_t>(n) < sizeof(small)) return std::string(small, n);
  std::string out(std::min<size_t>(n, kMaxMessage) + 1, '\0');
  va_copy(copy, ap);
  std::vsnprintf(out.data(), out.size(), format, copy);
  va_end(copy);
  out.pop_back();  // the terminating NUL
  return out;
}

}  // namespace

Status RocksDbInfoLog::Open(const std::string& dir, uint64_t max_bytes,
                            std::shared_ptr<RocksDbInfoLog>* out) {
  std::shared_ptr<RocksDbInfoLog> log(new RocksDbInfoLog(dir, max_bytes));
  {
    MutexLock lock(&log->mu_);
    Status s = log->RollLocked();
    if (!s.ok()) return s;
  }
  *out = std::move(log);
  return Status::OK();
}

RocksDbInfoLog::RocksDbInfoLog(std::string dir, uint64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {}

RocksDbInfoLog::~RocksDbInfoLog() {
  MutexLock lock(&mu_);
  (void)file_.Close();
}

void RocksDbInfoLog::Logv(const char* format, va_list ap) {
  std::string line = LinePrefix() + Format(format, ap);
  if (line.empty() || line.back() != '\n') line.push_back('\n');
  MutexLock lock(&mu_);
  if (unreported_ > 0) {
    line = LinePrefix() + std::to_string(unreported_) +
           " lines of this log were dropped: the disk refused them\n" + line;
  }
  if (WriteLocked(line)) {
    unreported_ = 0;
  } else {
    ++dropped_;
    ++unreported_;
  }
}

uint64_t RocksDbInfoLog::dropped_lines() const {
  MutexLock lock(&mu_);
  return dropped_;
}

bool RocksDbInfoLog::WriteLocked(const std::string& line) {
  if (!file_.is_open() || (size_ > 0 && size_ + line.size() > max_bytes_)) {
    if (!RollLocked().ok()) return false;
  }
  // A write that fails may leave part of the line behind: the next one is
  // written over it, at the same place.
  if (!file_.WriteAt(line.data(), line.size(), size_).ok()) return false;
  size_ += line.size();
  return true;
}

Status RocksDbInfoLog::RollLocked() {
  (void)file_.Close();
  size_ = 0;
  const std::string path = file::JoinPath(dir_, kLogName);
  file::File existing;
  bool missing = false;
  Status s = file::File::Open(path, file::OpenMode::kReadOnly, &existing, &missing);
  if (s.ok() && !missing) {
    (void)existing.Close();
    s = file::Rename(path, file::JoinPath(dir_, kOldLogName));
  }
  // On an error the file stays closed and the next line tries again.
  if (!s.ok()) return s;
  return file::File::Open(path, file::OpenMode::kCreateTruncate, &file_);
}

}  // namespace raftkv
