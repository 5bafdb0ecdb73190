#include "bench/process_probe.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

namespace raftkv {
namespace bench {

double CpuSecondsIn(const std::string& proc_dir) {
  std::ifstream in(proc_dir + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the ")" closing the command name: state is field 3,
  // utime field 14, stime field 15.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 > stat.size()) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  int i = 3;
  for (; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  if (i <= 15) return -1;  // truncated
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double VoluntarySwitchesIn(const std::string& proc_dir) {
  std::error_code ec;
  std::filesystem::directory_iterator tasks(proc_dir + "/task", ec);
  if (ec) return -1;
  double total = 0;
  bool any = false;
  for (const auto& task : tasks) {
    // A thread that ended since the listing has no status any more: its
    // switches are not counted (the servers' threads live as long as they do).
    std::ifstream status(task.path() / "status");
    std::string line;
    while (std::getline(status, line)) {
      static constexpr char kKey[] = "voluntary_ctxt_switches:";
      if (line.compare(0, sizeof(kKey) - 1, kKey) == 0) {
        total += std::stod(line.substr(sizeof(kKey) - 1));
        any = true;
        break;
      }
    }
  }
  return any ? total : -1;
}

double ProcessCpuSeconds(int pid) {
  return pid > 0 ? CpuSecondsIn("/proc/" + std::to_string(pid)) : -1;
}

double ProcessVoluntarySwitches(int pid) {
  return pid > 0 ? VoluntarySwitchesIn("/proc/" + std::to_string(pid)) : -1;
}

}  // namespace bench
}  // namespace raftkv
