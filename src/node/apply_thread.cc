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
  std::unique_lock<std::mutex> lock(mu_);
  dispatch_ = std::move(dispatch);
  // A batch being handed to the previous dispatcher: it returns first.
  cv_.wait(lock, [this] { return !dispatching_; });
}

void ApplyThread::Hand(std::vector<Entry> entries, Completions* completions) {
  if (entries.empty() && completions->empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Entry& e : entries) entries_.push_back(std::move(e));
    for (auto& fn : *completions) completions_.push_back(std::move(fn));
  }
  completions->clear();
  cv_.notify_all();
}

void ApplyThread::WaitApplied() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return entries_.empty() || stop_; });
  cv_.wait(lock, [this] { return !applying_; });
}

void ApplyThread::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ApplyThread::Loop() {
  for (;;) {
    std::deque<Entry> entries;
    Completions completions;
    DispatchFn dispatch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !entries_.empty() || !completions_.empty(); });
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
        std::lock_guard<std::mutex> lock(mu_);
        applying_ = false;
      }
      cv_.notify_all();
    }
    if (dispatch) {
      if (!completions.empty()) dispatch(std::move(completions));
      {
        std::lock_guard<std::mutex> lock(mu_);
        dispatching_ = false;
      }
      cv_.notify_all();
    } else {
      RunAll(&completions);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && completions_.empty()) return;
  }
}

}  // namespace raftkv
