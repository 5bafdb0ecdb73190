// The leader side of Peer.Append (append_stream.h): one stream to one
// follower. Push() queues a request and writes it when the one before has
// been handed to gRPC; answers are read as they come and handed to
// `on_answer`. The stream ends when the follower ends it, the connection
// breaks, Cancel() is called, or the oldest request has waited longer than
// `answer_timeout` for its answer (checked at each Push: the leader's
// heartbeats push at least every tick). Then, once: `on_forget` runs, in
// which the owner drops its pointer under the lock it calls Push and Cancel
// with (so none of them runs on the stream after it returns); the object
// deletes itself; `on_end` runs with the stream's status (the owner may then
// let go of the stub: the call is gone).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "proto/internal.h"

namespace raftkv {

class AppendStreamClient final
    : public grpc::ClientBidiReactor<AppendEntriesRequest, AppendEntriesResponse> {
 public:
  using Clock = std::chrono::steady_clock;
  using OnAnswer = std::function<void(AppendEntriesResponse* answer)>;
  using OnForget = std::function<void(AppendStreamClient* stream)>;
  using OnEnd = std::function<void(const grpc::Status& status)>;

  // Starts the stream on `stub` (which must outlive it).
  AppendStreamClient(internal::Peer::Stub* stub, Clock::duration answer_timeout, size_t max_queued,
                     OnAnswer on_answer, OnForget on_forget, OnEnd on_end);

  // Queues `req` for writing. False (the request dropped, as a network
  // would) when the queue is full or the stream is ending.
  bool Push(AppendEntriesRequest req);
  // Ends the stream (its status CANCELLED).
  void Cancel();

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  void WriteNextLocked();

  grpc::ClientContext context_;
  const Clock::duration answer_timeout_;
  const size_t max_queued_;
  const OnAnswer on_answer_;
  const OnForget on_forget_;
  const OnEnd on_end_;
  std::mutex mu_;
  AppendEntriesRequest writing_;   // read by gRPC between StartWrite and OnWriteDone
  AppendEntriesResponse reading_;  // written by gRPC between StartRead and OnReadDone
  // Guarded by mu_:
  std::deque<AppendEntriesRequest> queue_;
  // When each request not yet answered was queued, oldest first (the
  // follower answers every request once, in order).
  std::deque<Clock::time_point> unanswered_;
  bool write_active_ = false;
  bool ending_ = false;  // no more writes: the hold is released
};

}  // namespace raftkv
