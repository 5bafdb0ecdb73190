// Completion-queue hand-offs made visible to ThreadSanitizer.
//
// An object whose pointer travels through a gRPC completion queue as a tag is
// written by the thread that starts the operation and then used (often
// deleted) by the thread whose CompletionQueue::Next returned the tag. The
// queue orders the two, but its synchronization lives in the distribution's
// libgrpc/abseil, which are not built with TSan, so TSan would report every
// such hand-off as a data race. ReleaseTag right before handing the tag to
// gRPC and AcquireTag right after Next returned it give TSan that
// happens-before edge; races that do not go through a tag stay visible.
// No-ops in other builds.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define RAFTKV_TSAN_HANDOFF 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RAFTKV_TSAN_HANDOFF 1
#endif
#endif

#ifdef RAFTKV_TSAN_HANDOFF
#include <sanitizer/tsan_interface.h>
// In TSan's runtime (GCC's and LLVM's), not in GCC's header.
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace raftkv {

inline void TsanReleaseTag(void* tag) {
#ifdef RAFTKV_TSAN_HANDOFF
  __tsan_release(tag);
#else
  (void)tag;
#endif
}

inline void TsanAcquireTag(void* tag) {
#ifdef RAFTKV_TSAN_HANDOFF
  __tsan_acquire(tag);
#else
  (void)tag;
#endif
}

// CompletionQueue::Next with this thread's memory accesses unchecked while
// it waits. Inside Next, grpcpp's header code compiled into our binary
// (CallOpSet::FinalizeResult, the interceptor hook points, a client call's
// response parsing) reads and writes the operation's state that the thread
// which started it wrote, ordered by gRPC's uninstrumented core: each access
// was a race report to restore, symbolize and suppress (up to 36,000 per
// member in 30 s of chaos; the reports serialize on TSan's locks, enough to
// stall a member's gRPC threads). Synchronization inside Next is still seen,
// and so is every access of our code after it returns.
template <typename Queue>
bool TsanUncheckedNext(Queue* cq, void** tag, bool* ok) {
#ifdef RAFTKV_TSAN_HANDOFF
  __tsan_ignore_thread_begin();
  const bool more = cq->Next(tag, ok);
  __tsan_ignore_thread_end();
  return more;
#else
  return cq->Next(tag, ok);
#endif
}

}  // namespace raftkv
