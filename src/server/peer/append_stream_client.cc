#include "server/peer/append_stream_client.h"

#include <utility>

namespace raftkv {

AppendStreamClient::AppendStreamClient(internal::Peer::Stub* stub, Clock::duration answer_timeout,
                                       size_t max_queued, OnAnswer on_answer, OnForget on_forget,
                                       OnEnd on_end)
    : answer_timeout_(answer_timeout),
      max_queued_(max_queued),
      on_answer_(std::move(on_answer)),
      on_forget_(std::move(on_forget)),
      on_end_(std::move(on_end)) {
  stub->async()->Append(&context_, this);
  // Writes start outside the reactions (from Push): the hold keeps the
  // stream open for them until it ends.
  AddHold();
  StartRead(&reading_);
  StartCall();
}

bool AppendStreamClient::Push(AppendEntriesRequest req) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ending_) return false;
  const Clock::time_point now = Clock::now();
  if (!unanswered_.empty() && now - unanswered_.front() > answer_timeout_) {
    context_.TryCancel();  // the follower stopped answering: OnReadDone ends the stream
    return false;
  }
  if (queue_.size() >= max_queued_) return false;
  unanswered_.push_back(now);
  queue_.push_back(std::move(req));
  if (!write_active_) WriteNextLocked();
  return true;
}

// Only while the hold is kept: once released, gRPC may finish the call and
// release it before OnDone, and a cancel then touches a call that is gone.
void AppendStreamClient::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ending_) context_.TryCancel();
}

void AppendStreamClient::WriteNextLocked() {
  if (queue_.empty() || ending_) return;
  writing_ = std::move(queue_.front());
  queue_.pop_front();
  write_active_ = true;
  StartWrite(&writing_);
}

void AppendStreamClient::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  write_active_ = false;
  if (!ok) return;  // broken: the read fails too and ends the stream
  WriteNextLocked();
}

void AppendStreamClient::OnReadDone(bool ok) {
  if (!ok) {
    bool release = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      release = !ending_;
      ending_ = true;
      queue_.clear();
    }
    if (release) RemoveHold();  // OnDone follows once the write in flight returns
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!unanswered_.empty()) unanswered_.pop_front();
  }
  on_answer_(&reading_);
  reading_.Clear();
  StartRead(&reading_);
}

// The owner forgets the stream before it is deleted (a Push it is making
// under its lock finishes first: the stream's mutex must outlive it) and
// hears of the end after (its context included: an owner that waits for its
// streams to end may then release the stub and channel).
void AppendStreamClient::OnDone(const grpc::Status& status) {
  on_forget_(this);
  const OnEnd on_end = on_end_;
  delete this;
  on_end(status);
}

}  // namespace raftkv
