// ApplyThread: the thread that applies committed entries and completes
// client calls, so the thread that fsyncs (the node's I/O loop) does
// neither.
//
// The I/O loop hands it committed entries (in index order) and completions
// (closures answering calls) with Hand(); the thread takes everything queued
// in one batch, runs `apply` on the entries (which applies them and collects
// the completions of the calls they answer), then runs the completions.
// Nothing polls: the thread sleeps until work is handed to it.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "proto/internal.h"
#include "node/pending_calls.h"

namespace raftkv {

class ApplyThread {
 public:
  // Applies consecutive committed entries and appends the completions of
  // the calls they answer (runs on the apply thread).
  using ApplyFn = std::function<void(const std::deque<Entry>& entries, Completions* out)>;

  // `wakeups` (optional) counts the thread's wake-ups.
  explicit ApplyThread(ApplyFn apply, std::atomic<uint64_t>* wakeups = nullptr)
      : apply_(std::move(apply)), wakeups_(wakeups) {}
  ~ApplyThread() { Stop(); }

  void Start();
  // Where the completions of each batch run: by default on this thread;
  // `dispatch` hands each batch to another thread (the server's completion
  // queues, so that a call is finished on the thread that polls it). Null
  // restores the default. Safe to call at any time; returns once no batch
  // is being handed to the previous dispatcher.
  using DispatchFn = std::function<void(Completions batch)>;
  void SetDispatcher(DispatchFn dispatch) EXCLUDES(mu_);
  // Queues `entries` and the completions (moved out of *completions).
  void Hand(std::vector<Entry> entries, Completions* completions) EXCLUDES(mu_);
  // Returns once every entry handed so far has been applied.
  void WaitApplied() EXCLUDES(mu_);
  // Runs the completions already handed, drops the entries not applied yet
  // (their calls are the caller's to fail) and joins the thread.
  void Stop() EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);

  const ApplyFn apply_;
  std::atomic<uint64_t>* const wakeups_;
  // cv_ is notified when work is queued, when a batch is done (applying_
  // becomes false) and on stop. mu_ is taken alone: never while the caller
  // holds another lock that apply_ takes.
  Mutex mu_;
  CondVar cv_;
  std::deque<Entry> entries_ GUARDED_BY(mu_);  // committed, in index order
  Completions completions_ GUARDED_BY(mu_);
  DispatchFn dispatch_ GUARDED_BY(mu_);
  bool dispatching_ GUARDED_BY(mu_) = false;  // a batch is being handed to dispatch_
  bool applying_ GUARDED_BY(mu_) = false;  // the thread holds a batch taken from the queue
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace raftkv
