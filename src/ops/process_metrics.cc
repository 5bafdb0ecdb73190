#include "ops/process_metrics.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#if defined(__linux__)
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>
#endif

namespace raftkv {

namespace {

bool ParseUint(const std::string& text, uint64_t* value) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return false;
  *value = v;
  return true;
}

}  // namespace

bool ParseProcStat(const std::string& text, ProcStat* out) {
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream rest(text.substr(paren + 1));
  std::vector<std::string> fields;  // fields[0] is field 3 (the state)
  for (std::string f; rest >> f;) fields.push_back(f);
  auto field = [&](size_t number, uint64_t* value) {
    return number >= 3 && number - 3 < fields.size() && ParseUint(fields[number - 3], value);
  };
  return field(14, &out->utime_ticks) && field(15, &out->stime_ticks) &&
         field(22, &out->start_ticks) && field(23, &out->vsize_bytes) && field(24, &out->rss_pages);
}

bool ParseBootTime(const std::string& text, uint64_t* btime) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, 6, "btime ") == 0) return ParseUint(line.substr(6), btime);
  }
  return false;
}

void FillProcessStats(const ProcStat& stat, uint64_t btime, uint64_t ticks_per_second,
                      uint64_t page_size, ProcessStats* out) {
  const double ticks = static_cast<double>(ticks_per_second > 0 ? ticks_per_second : 100);
  out->cpu_seconds = static_cast<double>(stat.utime_ticks + stat.stime_ticks) / ticks;
  out->resident_bytes = stat.rss_pages * page_size;
  out->virtual_bytes = stat.vsize_bytes;
  out->start_time_seconds =
      static_cast<double>(btime) + static_cast<double>(stat.start_ticks) / ticks;
}

#if defined(__linux__)

namespace {

bool ReadFile(const char* path, std::string* text) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *text = s.str();
  return true;
}

}  // namespace

bool ReadProcessStats(ProcessStats* out) {
  std::string text;
  ProcStat stat;
  if (!ReadFile("/proc/self/stat", &text) || !ParseProcStat(text, &stat)) return false;
  // The boot time never changes: read once.
  static const uint64_t btime = [] {
    std::string t;
    uint64_t b = 0;
    return ReadFile("/proc/stat", &t) && ParseBootTime(t, &b) ? b : 0;
  }();
  if (btime == 0) return false;
  const long ticks = sysconf(_SC_CLK_TCK);
  const long page = sysconf(_SC_PAGESIZE);
  FillProcessStats(stat, btime, ticks > 0 ? static_cast<uint64_t>(ticks) : 100,
                   page > 0 ? static_cast<uint64_t>(page) : 4096, out);
  // Open descriptors: the entries of /proc/self/fd (the one this scan
  // holds open included, as the Go client counts it).
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  uint64_t fds = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++fds;
  }
  closedir(dir);
  out->open_fds = fds;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  out->max_fds =
      limit.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(limit.rlim_cur);
  return true;
}

#else

bool ReadProcessStats(ProcessStats* /*out*/) { return false; }

#endif

}  // namespace raftkv
