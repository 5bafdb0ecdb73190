// Names the calling thread (Linux: at most 15 characters, shown by top -H,
// perf and gdb), so that profiles and stacks say which stage a thread is.
// Elsewhere a no-op.
#pragma once

#if defined(__linux__)
#include <pthread.h>
#endif

namespace raftkv {

inline void SetThreadName(const char* name) {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), name);
#else
  (void)name;
#endif
}

}  // namespace raftkv
