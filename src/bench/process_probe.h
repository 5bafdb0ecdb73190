// What the benchmark reads of a local server process during its timed part:
// CPU time, and thread wake-ups (voluntary context switches: a thread went
// to sleep waiting for work, a lock or the disk, and was woken). At one
// request in flight a write's latency is mostly those wake-ups, each one
// costing the kernel's (or a hypervisor's) scheduling work, so the benchmark
// reports them per request beside the CPU. Read from Linux's /proc; -1
// elsewhere, or when the process is gone.
#pragma once

#include <string>

namespace raftkv {
namespace bench {

// User + system CPU seconds of process `pid`.
double ProcessCpuSeconds(int pid);

// Voluntary context switches of every thread of process `pid`, together.
double ProcessVoluntarySwitches(int pid);

// Both from one process's /proc/<pid> directory (`proc_dir`, e.g.
// "/proc/123"): for tests.
double CpuSecondsIn(const std::string& proc_dir);
double VoluntarySwitchesIn(const std::string& proc_dir);

}  // namespace bench
}  // namespace raftkv
