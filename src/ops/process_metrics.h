// The standard process metrics of the Prometheus client libraries
// (process_cpu_seconds_total, process_resident_memory_bytes, ...), read at
// scrape time. Only Linux has them (from /proc and getrlimit); elsewhere
// ReadProcessStats() says "not available" and the endpoint omits them,
// as the Go and Java clients do on platforms without /proc.
#pragma once

#include <cstdint>
#include <string>

namespace raftkv {

struct ProcessStats {
  double cpu_seconds = 0;           // user + system CPU time
  uint64_t resident_bytes = 0;
  uint64_t virtual_bytes = 0;
  uint64_t open_fds = 0;
  uint64_t max_fds = 0;             // the soft RLIMIT_NOFILE
  double start_time_seconds = 0;    // since the Unix epoch
};

// False where the platform does not provide them (or /proc cannot be read).
bool ReadProcessStats(ProcessStats* out);

// The fields of /proc/<pid>/stat the metrics use (proc(5)).
struct ProcStat {
  uint64_t utime_ticks = 0;   // field 14
  uint64_t stime_ticks = 0;   // field 15
  uint64_t start_ticks = 0;   // field 22: clock ticks after boot
  uint64_t vsize_bytes = 0;   // field 23
  uint64_t rss_pages = 0;     // field 24
};

// Parses the text of /proc/<pid>/stat. The second field (the command name,
// in parentheses) may itself contain spaces and parentheses: the fields
// that follow are counted from the last ')'.
bool ParseProcStat(const std::string& text, ProcStat* out);

// The boot time ("btime <seconds since the epoch>") from the text of /proc/stat.
bool ParseBootTime(const std::string& text, uint64_t* btime);

// The metrics from the parsed files: ticks_per_second is sysconf(_SC_CLK_TCK),
// page_size sysconf(_SC_PAGESIZE); open_fds and max_fds are left as they are.
void FillProcessStats(const ProcStat& stat, uint64_t btime, uint64_t ticks_per_second,
                      uint64_t page_size, ProcessStats* out);

}  // namespace raftkv
