// The watchers of a member and the thread that feeds them ("raftkv-watch").
//
// Each watcher is a key range and the next revision it needs. Whenever the
// store advances (the apply thread calls Notify) the hub reads, for every
// watcher that has no response in flight, the events of its range from the
// state machine's history (whole revisions, up to `batch_bytes`) and hands
// them to the watcher's sink as one response. A watcher has at most one
// response in flight: memory per watcher is bounded, and one that cannot
// keep up stays behind in the history instead of buffering; once the
// history window moves past the revision it needs, it is ended with
// OUT_OF_RANGE naming the oldest revision kept (the client may resume from
// there or re-read its range).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/support/status.h>

#include "proto/internal.h"
#include "storage/kv_state_machine.h"

namespace raftkv {

// The stream a watcher's responses go to (the gRPC call). The hub calls it
// with its own lock held: a sink must not call the hub from inside these.
class WatchSink {
 public:
  virtual ~WatchSink() = default;
  // Starts sending `resp`; the sink calls WatchHub::SendDone when it is sent.
  virtual void Send(WatchResponse resp) = 0;
  // Ends the stream with `status` (the hub has dropped the watcher).
  // `compact_revision` (when > 0) goes to the trailer raftkv-compact-revision.
  virtual void End(const grpc::Status& status, int64_t compact_revision) = 0;
};

struct WatchOptions {
  size_t max_watchers = 10000;      // per member; more get RESOURCE_EXHAUSTED
  size_t batch_bytes = 1 << 20;     // events per response (whole revisions)
};

class WatchHub {
 public:
  WatchHub(const WatchOptions& options, const KvStateMachine* state_machine, uint64_t member_id);
  ~WatchHub();
  void Start();
  // Ends every watcher with UNAVAILABLE and stops the thread.
  void Stop();

  // A new watcher id (for Add).
  uint64_t NewId();
  // Registers watcher `id` of `req` (already validated). RESOURCE_EXHAUSTED
  // when the member has max_watchers. The first response (created) follows.
  grpc::Status Add(uint64_t id, const WatchRequest& req, WatchSink* sink);
  // The stream is gone (client cancelled, write failed): after this returns
  // the hub never calls the sink again. No-op if the hub already ended it.
  void Remove(uint64_t id);
  // The response in flight of watcher `id` was sent.
  void SendDone(uint64_t id);
  // The store advanced (any thread; cheap).
  void Notify();
  // The member has heard from no leader for `ms` (RaftNode's leaderless
  // observer): its store may never move again, so every watcher is ended
  // with UNAVAILABLE and new ones are refused until a leader is heard from.
  void SetLeaderless(bool leaderless, int64_t ms);

  size_t size() const;
  uint64_t events_sent() const;

 private:
  struct Watcher {
    std::string key;
    std::string end;
    int64_t next = 0;  // first revision not yet sent; 0: the created response is not sent yet
    int64_t start = 0;
    bool prev_kv = false;
    bool busy = false;  // a response is in flight
    WatchSink* sink = nullptr;
  };
  void Loop();
  // Sends watcher `w` its next response if it has one. Requires mu_.
  // Returns false when the watcher was ended (and must be erased).
  bool PumpLocked(uint64_t id, Watcher* w);

  const WatchOptions options_;
  const KvStateMachine* const sm_;
  const uint64_t member_id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;              // guarded by mu_
  bool work_ = false;                  // guarded by mu_: something to pump
  std::string leaderless_;             // guarded by mu_: why watches are refused ("": not)
  std::atomic<uint64_t> next_id_{1};
  std::map<uint64_t, Watcher> watchers_;  // guarded by mu_
  uint64_t events_sent_ = 0;           // guarded by mu_
  std::thread thread_;
};

}  // namespace raftkv
