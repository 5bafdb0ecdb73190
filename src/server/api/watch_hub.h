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
// there or re-read its range). A watcher whose response has waited
// `stall_timeout_ms` to be taken by its client (a client that stopped
// reading) is cut off with RESOURCE_EXHAUSTED, and its slot freed.
//
// A watcher may leave out PUT or DELETE events (filters), and may ask for
// progress notices: an answer without events, once it has had nothing to
// send for `progress_notify_interval_ms`, whose header revision is one it
// has sent every event up to.
//
// Bounds: at most `max_watchers` per member and `max_watchers_per_client`
// per client address (RESOURCE_EXHAUSTED beyond either), so one client
// cannot take every slot.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include <grpcpp/support/status.h>

#include "common/mutex.h"
#include "proto/internal.h"
#include "kv/kv_state_machine.h"
#include "server/rpc/server_options.h"

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
  // Ends the stream with `status` now, although a response is in flight
  // (its client stopped reading): the response is dropped.
  virtual void Cut(const grpc::Status& status) = 0;
};


class WatchHub {
 public:
  WatchHub(const WatchOptions& options, const KvStateMachine* state_machine, uint64_t member_id);
  ~WatchHub();
  void Start();
  // Ends every watcher with UNAVAILABLE and stops the thread.
  void Stop() EXCLUDES(mu_);

  // A new watcher id (for Add).
  uint64_t NewId();
  // Registers watcher `id` of `req` (already validated) for the client at
  // `client` (its address without the port). RESOURCE_EXHAUSTED when the
  // member has max_watchers, or that client max_watchers_per_client. The
  // first response (created) follows.
  grpc::Status Add(uint64_t id, const WatchRequest& req, WatchSink* sink, const std::string& client)
      EXCLUDES(mu_);
  // The stream is gone (client cancelled, write failed): after this returns
  // the hub never calls the sink again. No-op if the hub already ended it.
  void Remove(uint64_t id) EXCLUDES(mu_);
  // The response in flight of watcher `id` was sent.
  void SendDone(uint64_t id) EXCLUDES(mu_);
  // The store advanced (any thread; cheap; wakes the thread only when a
  // watcher exists).
  void Notify() EXCLUDES(mu_);
  // The revision up to which watcher `id` has handed every event of its
  // range to its sink (its answers to come start after it); nullopt when
  // the hub does not have it (any more).
  std::optional<int64_t> SentThrough(uint64_t id) const EXCLUDES(mu_);
  // The member has heard from no leader for `ms` (RaftNode's leaderless
  // observer): its store may never move again, so every watcher is ended
  // with UNAVAILABLE and new ones are refused until a leader is heard from.
  void SetLeaderless(bool leaderless, int64_t ms) EXCLUDES(mu_);

  size_t size() const EXCLUDES(mu_);
  uint64_t events_sent() const EXCLUDES(mu_);
  // Watchers cut off because their client stopped reading.
  uint64_t stalled() const EXCLUDES(mu_);
  // Times the thread went through the watchers to pump them.
  uint64_t pump_passes() const EXCLUDES(mu_);

 private:
  struct Watcher {
    std::string key;
    std::string end;
    int64_t next = 0;  // first revision not yet sent; 0: the created response is not sent yet
    int64_t start = 0;
    bool prev_kv = false;
    bool no_put = false;
    bool no_delete = false;
    bool progress_notify = false;
    std::chrono::steady_clock::time_point last_sent;  // when it was last handed a response
    bool busy = false;  // a response is in flight
    std::chrono::steady_clock::time_point busy_since;  // when it was handed to the sink
    std::string client;
    WatchSink* sink = nullptr;
  };
  using WatcherMap = std::map<uint64_t, Watcher>;
  void Loop() EXCLUDES(mu_);
  // Forgets watcher `it` (and its client's count).
  WatcherMap::iterator EraseLocked(WatcherMap::iterator it) REQUIRES(mu_);
  // Cuts off the watchers whose response waited past stall_timeout_ms.
  void CutStalledLocked(std::chrono::steady_clock::time_point now) REQUIRES(mu_);
  // Sends a progress notice to every idle watcher that asked for them.
  void NotifyProgressLocked(std::chrono::steady_clock::time_point now) REQUIRES(mu_);
  // Hands `resp` to watcher `w`'s sink.
  void SendLocked(Watcher* w, WatchResponse resp) REQUIRES(mu_);
  // Sends watcher `w` its next response if it has one.
  // Returns false when the watcher was ended (and must be erased).
  bool PumpLocked(uint64_t id, Watcher* w) REQUIRES(mu_);

  const WatchOptions options_;
  const KvStateMachine* const sm_;
  const uint64_t member_id_;
  mutable Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool work_ GUARDED_BY(mu_) = false;  // something to pump
  std::string leaderless_ GUARDED_BY(mu_);  // why watches are refused ("": not)
  std::atomic<uint64_t> next_id_{1};
  WatcherMap watchers_ GUARDED_BY(mu_);
  std::map<std::string, size_t> per_client_ GUARDED_BY(mu_);  // watchers by client address
  uint64_t events_sent_ GUARDED_BY(mu_) = 0;
  uint64_t stalled_ GUARDED_BY(mu_) = 0;
  uint64_t pump_passes_ GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace raftkv
