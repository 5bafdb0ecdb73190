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

}  // namespace raftkv
