// Names the calling thread (Linux: at most 15 characters, shown by top -H,
// perf and gdb; macOS: shown by Instruments, lldb and crash reports), so
// that profiles and stacks say which stage a thread is. Elsewhere a no-op.
#pragma once

#if defined(__linux__) || defined(__APPLE__)
#include <pthread.h>
#endif

namespace raftkv {

inline void SetThreadName(const char* name) {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), name);
#elif defined(__APPLE__)
  pthread_setname_np(name);  // macOS names only the calling thread
#else
  (void)name;
#endif
}

}  // namespace raftkv
