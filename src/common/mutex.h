// A mutex the compiler can check: Clang's thread-safety analysis
// (-Wthread-safety) proves that every member marked GUARDED_BY(mu_) is read
// and written with mu_ held, and that a function marked REQUIRES(mu_) is
// called with it held. Other compilers see plain std::mutex code: the macros
// expand to nothing and Mutex is a std::mutex with the same cost.
//
//   Mutex mu_;
//   int count_ GUARDED_BY(mu_);
//   void Bump() { MutexLock lock(&mu_); ++count_; }
//   void BumpLocked() REQUIRES(mu_) { ++count_; }
//
// A condition variable waits on the std::mutex inside (CondVar below).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <utility>

// Abseil (under gRPC) may define some of the same unprefixed names
// (GUARDED_BY, NO_THREAD_SAFETY_ANALYSIS, ...) with the same meaning: its
// header is included first, so that the definitions below replace its own
// whichever of the two a file includes first.
#if __has_include(<absl/base/thread_annotations.h>)
#include <absl/base/thread_annotations.h>
#endif
#undef GUARDED_BY
#undef PT_GUARDED_BY
#undef ACQUIRED_BEFORE
#undef ACQUIRED_AFTER
#undef NO_THREAD_SAFETY_ANALYSIS

#if defined(__clang__)
#define RAFTKV_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define RAFTKV_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) RAFTKV_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY RAFTKV_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) RAFTKV_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) RAFTKV_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) RAFTKV_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) RAFTKV_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) RAFTKV_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) RAFTKV_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) RAFTKV_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) RAFTKV_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) RAFTKV_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) RAFTKV_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) RAFTKV_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define EXCLUDES(...) RAFTKV_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) RAFTKV_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) RAFTKV_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS RAFTKV_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace raftkv {

class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() RAFTKV_THREAD_ANNOTATION(try_acquire_capability(true)) { return mu_.try_lock(); }
  // Tells the analysis that the caller holds this mutex (a callback that
  // runs under it, which the analysis cannot follow).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope; Unlock()/Lock() release and take it again
// inside the scope (to run callbacks without it).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->unlock();
  }
  void Unlock() RELEASE() {
    mu_->unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->lock();
    held_ = true;
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// A reader-writer mutex the analysis checks (std::shared_mutex inside).
class CAPABILITY("shared_mutex") SharedMutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  void lock_shared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~WriterLock() RELEASE() { mu_->unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex* const mu_;
};

class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex* mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_->lock_shared(); }
  ~ReaderLock() RELEASE() { mu_->unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// A condition variable for Mutex. Wait() must be called with the mutex held
// (the analysis checks it); it releases the mutex while blocked and holds it
// again when it returns, as std::condition_variable does.
class CondVar {
 public:
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->native(), std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  template <class Predicate>
  void Wait(Mutex* mu, Predicate done) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->native(), std::adopt_lock);
    cv_.wait(lock, done);
    lock.release();
  }
  // False when `deadline` passed first.
  template <class Clock, class Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->native(), std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  template <class Clock, class Duration, class Predicate>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline,
                 Predicate done) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->native(), std::adopt_lock);
    const bool result = cv_.wait_until(lock, deadline, done);
    lock.release();
    return result;
  }
  // False when `timeout` passed first.
  template <class Rep, class Period>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout) REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }
  template <class Rep, class Period, class Predicate>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout, Predicate done)
      REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout, std::move(done));
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace raftkv
