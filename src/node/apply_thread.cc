#include "node/apply_thread.h"

#include <utility>

#include "common/thread_name.h"

namespace raftkv {

void ApplyThread::Start() {
  thread_ = std::thread([this] {
    SetThreadName("raftkv-apply");
    Loop();
  });
}

void ApplyThread::SetDispatcher(DispatchFn dispatch) {
  MutexLock lock(&mu_);
  dispatch_ = std::move(dispatch);
  // A batch being handed to the previous dispatcher: it returns first.
  while (dispatching_) cv_.Wait(&mu_);
}

void ApplyThread::Hand(std::vector<Entry> entries, Completions* completions) {
  if (entries.empty() && completions->empty()) return;
  {
    MutexLock lock(&mu_);
    for (Entry& e : entries) entries_.push_back(std::move(e));
    for (auto& fn : *completions) completions_.push_back(std::move(fn));
  }
  completions->clear();
  cv_.SignalAll();
}

void ApplyThread::WaitApplied() {
  MutexLock lock(&mu_);
  while (!entries_.empty() && !stop_) cv_.Wait(&mu_);
  while (applying_) cv_.Wait(&mu_);
}

void ApplyThread::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void ApplyThread::Loop() {
  for (;;) {
    std::deque<Entry> entries;
    Completions completions;
    DispatchFn dispatch;
    {
      MutexLock lock(&mu_);
      while (!stop_ && entries_.empty() && completions_.empty()) cv_.Wait(&mu_);
      if (wakeups_ != nullptr) wakeups_->fetch_add(1, std::memory_order_relaxed);
      completions.swap(completions_);
      if (!stop_) dispatch = dispatch_;
      dispatching_ = static_cast<bool>(dispatch);
      if (!stop_) {
        entries.swap(entries_);
        applying_ = !entries.empty();
      }
    }
    if (!entries.empty()) {
      apply_(entries, &completions);
      {
        MutexLock lock(&mu_);
        applying_ = false;
      }
      cv_.SignalAll();
    }
    if (dispatch) {
      if (!completions.empty()) dispatch(std::move(completions));
      {
        MutexLock lock(&mu_);
        dispatching_ = false;
      }
      cv_.SignalAll();
    } else {
      RunAll(&completions);
    }
    MutexLock lock(&mu_);
    if (stop_ && completions_.empty()) return;
  }
}

}  // namespace raftkv
