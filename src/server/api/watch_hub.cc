#include "server/api/watch_hub.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "server/rpc/grpc_status.h"
#include "common/thread_name.h"

namespace raftkv {

WatchHub::WatchHub(const WatchOptions& options, const KvStateMachine* state_machine, uint64_t member_id)
    : options_(options), sm_(state_machine), member_id_(member_id) {}

WatchHub::~WatchHub() { Stop(); }

void WatchHub::Start() {
  thread_ = std::thread([this] {
    SetThreadName("raftkv-watch");
    Loop();
  });
}

void WatchHub::Stop() {
  {
    MutexLock lock(&mu_);
    if (!stopping_) {
      stopping_ = true;
      for (auto& [id, w] : watchers_) {
        w.sink->End(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 "member shutting down: watch again on another member from the "
                                 "last revision seen + 1"),
                    0);
      }
      watchers_.clear();
      per_client_.clear();
    }
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

uint64_t WatchHub::NewId() { return next_id_.fetch_add(1); }

grpc::Status WatchHub::Add(uint64_t id, const WatchRequest& req, WatchSink* sink, const std::string& client) {
  MutexLock lock(&mu_);
  if (stopping_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "member shutting down");
  if (!leaderless_.empty()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, leaderless_);
  if (watchers_.size() >= options_.max_watchers) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "this member serves " + std::to_string(watchers_.size()) +
                            " watchers, its limit (--max_watchers); watch on another member");
  }
  size_t& mine = per_client_[client];
  if (mine >= options_.max_watchers_per_client) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "client " + client + " has " + std::to_string(mine) +
                            " watchers on this member, the limit per client "
                            "(--max_watchers_per_client); watch several keys with one range");
  }
  ++mine;
  Watcher& w = watchers_[id];
  w.client = client;
  w.key = req.key();
  w.end = req.range_end();
  w.start = req.start_revision();
  w.prev_kv = req.prev_kv();
  for (int f : req.filters()) {
    if (f == WatchRequest::NOPUT) w.no_put = true;
    if (f == WatchRequest::NODELETE) w.no_delete = true;
  }
  w.progress_notify = req.progress_notify();
  w.last_sent = std::chrono::steady_clock::now();
  w.sink = sink;
  work_ = true;
  cv_.Signal();
  return grpc::Status::OK;
}

void WatchHub::Remove(uint64_t id) {
  MutexLock lock(&mu_);
  auto it = watchers_.find(id);
  if (it != watchers_.end()) EraseLocked(it);
}

WatchHub::WatcherMap::iterator WatchHub::EraseLocked(WatcherMap::iterator it) {
  auto c = per_client_.find(it->second.client);
  if (c != per_client_.end() && --c->second == 0) per_client_.erase(c);
  return watchers_.erase(it);
}

void WatchHub::CutStalledLocked(std::chrono::steady_clock::time_point now) {
  const auto bound = std::chrono::milliseconds(options_.stall_timeout_ms);
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    const Watcher& w = it->second;
    if (!w.busy || now - w.busy_since < bound) {
      ++it;
      continue;
    }
    w.sink->Cut(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        "the watcher did not take its events for " + std::to_string(options_.stall_timeout_ms) +
            " ms (--watch_stall_timeout_ms): cut off; read the stream, then watch again from the last "
            "revision seen + 1"));
    ++stalled_;
    LOG_EVERY_N(WARNING, 100) << "cut off a watcher of " << w.client << " that took no response for "
                              << options_.stall_timeout_ms << " ms (" << google::COUNTER << " so far)";
    it = EraseLocked(it);
  }
}

void WatchHub::SendDone(uint64_t id) {
  MutexLock lock(&mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  it->second.busy = false;
  work_ = true;
  cv_.Signal();
}

void WatchHub::Notify() {
  {
    MutexLock lock(&mu_);
    // With no watcher there is nothing to pump: the thread stays asleep (a
    // watcher added later is pumped by Add and reads from its own start).
    if (watchers_.empty()) return;
    work_ = true;
  }
  cv_.Signal();
}

std::optional<int64_t> WatchHub::SentThrough(uint64_t id) const {
  MutexLock lock(&mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return std::nullopt;
  const Watcher& w = it->second;
  if (w.next > 0) return w.next - 1;
  // Not created yet: its events start after the revision it is created at
  // (now or later), or at its start revision.
  return w.start > 0 ? w.start - 1 : sm_->Revision();
}

void WatchHub::NotifyProgressLocked(std::chrono::steady_clock::time_point now) {
  const auto interval = std::chrono::milliseconds(options_.progress_notify_interval_ms);
  const int64_t revision = sm_->Revision();
  for (auto& [id, w] : watchers_) {
    // Only a watcher with nothing to send: its next answer would have events.
    if (!w.progress_notify || w.busy || w.next == 0 || w.next <= revision ||
        now - w.last_sent < interval) {
      continue;
    }
    WatchResponse resp;
    resp.mutable_header()->set_member_id(member_id_);
    resp.mutable_header()->set_revision(w.next - 1);
    SendLocked(&w, std::move(resp));
  }
}

void WatchHub::SendLocked(Watcher* w, WatchResponse resp) {
  w->busy = true;
  w->busy_since = std::chrono::steady_clock::now();
  w->last_sent = w->busy_since;
  w->sink->Send(std::move(resp));
}

void WatchHub::SetLeaderless(bool leaderless, int64_t ms) {
  MutexLock lock(&mu_);
  if (!leaderless) {
    leaderless_.clear();
    return;
  }
  leaderless_ = "member " + std::to_string(member_id_) + " has heard from no leader for " +
                std::to_string(ms) +
                " ms (cut off from the cluster or removed from it): watch again on another "
                "member from the last revision seen + 1";
  if (stopping_) return;
  for (auto& [id, w] : watchers_) {
    w.sink->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, leaderless_), 0);
  }
  watchers_.clear();
  per_client_.clear();
}

size_t WatchHub::size() const {
  MutexLock lock(&mu_);
  return watchers_.size();
}

uint64_t WatchHub::events_sent() const {
  MutexLock lock(&mu_);
  return events_sent_;
}

uint64_t WatchHub::stalled() const {
  MutexLock lock(&mu_);
  return stalled_;
}

uint64_t WatchHub::pump_passes() const {
  MutexLock lock(&mu_);
  return pump_passes_;
}

void WatchHub::Loop() {
  MutexLock lock(&mu_);
  // Stalled watchers and idle ones owed a progress notice are looked for
  // at least this often.
  const auto check = std::chrono::milliseconds(std::clamp(
      std::min(options_.stall_timeout_ms, options_.progress_notify_interval_ms) / 4, 10, 1000));
  auto next_check = std::chrono::steady_clock::now() + check;
  while (!stopping_) {
    while (!work_ && !stopping_) {
      if (!cv_.WaitUntil(&mu_, next_check)) break;
    }
    if (stopping_) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_check) {
      CutStalledLocked(now);
      NotifyProgressLocked(now);
      next_check = now + check;
    }
    if (!work_) continue;
    work_ = false;
    ++pump_passes_;
    for (auto it = watchers_.begin(); it != watchers_.end();) {
      if (PumpLocked(it->first, &it->second)) {
        ++it;
      } else {
        it = EraseLocked(it);
      }
    }
  }
}

bool WatchHub::PumpLocked(uint64_t id, Watcher* w) {
  if (w->busy) return true;
  WatchResponse resp;
  resp.mutable_header()->set_member_id(member_id_);
  if (w->next == 0) {  // the first answer: created, at the current revision
    const int64_t revision = sm_->Revision();
    w->next = w->start > 0 ? w->start : revision + 1;
    resp.mutable_header()->set_revision(revision);
    resp.set_created(true);
    SendLocked(w, std::move(resp));
    return true;
  }
  KvStateMachine::EventBatch batch;
  Status s = sm_->ReadEvents(w->key, w->end, w->next, options_.batch_bytes, &batch);
  if (!s.ok()) {
    const int64_t oldest = sm_->CompactedRevision() + 1;
    const bool first = w->next == w->start;
    w->sink->End(grpc::Status(ToGrpcCode(s.code()),
                              (first ? "start " : "the watcher fell behind: ") + s.message()),
                 oldest);
    return false;
  }
  w->next = batch.next_revision;
  if (batch.events.empty()) return true;
  resp.mutable_header()->set_revision(batch.revision);
  for (KvEvent& e : batch.events) {
    if (e.is_delete ? w->no_delete : w->no_put) continue;
    Event* ev = resp.add_events();
    ev->set_type(e.is_delete ? Event::DELETE : Event::PUT);
    if (e.is_delete) {
      ev->mutable_kv()->set_key(e.key);
      ev->mutable_kv()->set_mod_revision(e.revision);
    } else {
      ToKeyValue(e.key, e.kv, false, ev->mutable_kv());
    }
    if (w->prev_kv && e.has_prev) ToKeyValue(e.key, e.prev, false, ev->mutable_prev_kv());
  }
  if (resp.events_size() == 0) return true;  // every event filtered out
  events_sent_ += static_cast<uint64_t>(resp.events_size());
  SendLocked(w, std::move(resp));
  return true;
}

}  // namespace raftkv
