#include "server/etcd/etcd_watch.h"

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "server/api/watch_call.h"
#include "server/etcd/etcd_convert.h"
#include "server/etcd/etcd_kv.h"
#include "server/rpc/grpc_status.h"

namespace raftkv {

namespace {

namespace pb = etcdserverpb;

// etcd's InvalidWatchID: an answer that belongs to no watch of the stream.
constexpr int64_t kNoWatch = -1;

class WatchStream;

// One watch of a stream, as the hub sees it.
struct Slot final : WatchSink {
  WatchStream* stream = nullptr;
  int64_t watch_id = 0;
  uint64_t hub_id = 0;
  void Send(WatchResponse resp) override;
  void End(const grpc::Status& status, int64_t compact_revision) override;
  void Cut(const grpc::Status& status) override;
};

// One Watch stream. Lifetime: deleted by OnDone, after every watch of the
// stream is out of the hub (gRPC runs no other reaction after OnDone, and
// the hub calls no sink after Remove returns).
class WatchStream final : public grpc::ServerBidiReactor<pb::WatchRequest, pb::WatchResponse> {
 public:
  WatchStream(const EtcdWatch* service, grpc::CallbackServerContext* context)
      : service_(service),
        context_(context),
        client_(WatchCall::ClientAddress(context->peer())),
        start_(std::chrono::steady_clock::now()) {
    if (RpcMethodMetrics* m = service_->metrics()) m->StreamStarted();
    grpc::Status refused = AuthorizeCall(service_->auth(), *context_, Caller::kClient);
    MutexLock lock(&mu_);
    if (!refused.ok()) {
      end_ = refused;
      MaybeFinishLocked();
      return;
    }
    ReadNextLocked();
  }

  void OnReadDone(bool ok) override {
    pb::WatchRequest req;
    {
      MutexLock lock(&mu_);
      reading_ = false;
      retired_.clear();
      // A client that closed its side keeps its watches, as etcd does; the
      // stream ends when the client cancels it.
      if (!ok || end_) return;
      req.Swap(&request_);
    }
    switch (req.request_union_case()) {
      case pb::WatchRequest::kCreateRequest:
        Create(req.mutable_create_request());
        break;
      case pb::WatchRequest::kCancelRequest:
        Cancel(req.cancel_request().watch_id());
        break;
      case pb::WatchRequest::kProgressRequest:
        Progress();
        break;
      case pb::WatchRequest::REQUEST_UNION_NOT_SET:
        break;  // etcd ignores it too
    }
    MutexLock lock(&mu_);
    ReadNextLocked();
  }

  void OnWriteDone(bool ok) override {
    uint64_t sent = 0;
    {
      MutexLock lock(&mu_);
      writing_ = false;
      retired_.clear();
      if (!ok) {
        if (!end_) end_ = grpc::Status(grpc::StatusCode::CANCELLED, "watch stream broken");
      } else {
        sent = written_hub_id_;
        WriteNextLocked();
        ReadNextLocked();
      }
      MaybeFinishLocked();
    }
    // Outside mu_: the hub calls the sinks with its own lock held.
    if (sent != 0) service_->hub()->SendDone(sent);
  }

  void OnCancel() override {
    MutexLock lock(&mu_);
    if (!end_) end_ = grpc::Status(grpc::StatusCode::CANCELLED, "watch stream cancelled");
    MaybeFinishLocked();
  }

  void OnDone() override {
    std::vector<uint64_t> ids;
    {
      MutexLock lock(&mu_);
      for (const auto& [id, slot] : slots_) ids.push_back(slot->hub_id);
    }
    for (uint64_t id : ids) service_->hub()->Remove(id);
    delete this;
  }

  // The hub's answer for `slot` (its lock held: the hub is not called here).
  void FromHub(Slot* slot, WatchResponse in) {
    MutexLock lock(&mu_);
    if (!Live(slot) || end_) return;  // cancelled meanwhile: the hub forgets it
    pb::WatchResponse out;
    Header(in.header().revision(), out.mutable_header());
    out.set_watch_id(slot->watch_id);
    out.set_created(in.created());
    out.mutable_events()->Reserve(in.events_size());
    for (Event& e : *in.mutable_events()) {
      mvccpb::Event* o = out.add_events();
      o->set_type(e.type() == Event::DELETE ? mvccpb::Event::DELETE : mvccpb::Event::PUT);
      etcd::FromV1(e.mutable_kv(), o->mutable_kv());
      if (e.has_prev_kv()) etcd::FromV1(e.mutable_prev_kv(), o->mutable_prev_kv());
    }
    QueueLocked(std::move(out), slot->hub_id);
  }

  // The hub dropped `slot`'s watcher (its lock held).
  void EndedByHub(Slot* slot, const grpc::Status& status, int64_t compact_revision) {
    MutexLock lock(&mu_);
    if (!Live(slot)) return;
    auto it = slots_.find(slot->watch_id);
    retired_.push_back(std::move(it->second));
    slots_.erase(it);
    if (end_) return;
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      // Shutting down or leaderless: the client resumes every watch elsewhere.
      end_ = status;
      return MaybeFinishLocked();
    }
    pb::WatchResponse out;
    Header(service_->node()->state_machine().Revision(), out.mutable_header());
    out.set_watch_id(slot->watch_id);
    out.set_canceled(true);
    if (compact_revision > 0) {
      out.set_compact_revision(compact_revision);
    } else {
      out.set_cancel_reason(status.error_message());
    }
    QueueLocked(std::move(out), 0);
  }

  // The client took no answer for too long (the hub's lock held).
  void CutByHub(const grpc::Status& status) {
    MutexLock lock(&mu_);
    if (!end_) end_ = status;
    context_->TryCancel();  // the write in flight fails; then the stream finishes
  }

 private:
  struct Answer {
    pb::WatchResponse resp;
    uint64_t hub_id = 0;  // the hub's answer: tell it once written
  };

  bool Live(const Slot* slot) const REQUIRES(mu_) {
    auto it = slots_.find(slot->watch_id);
    return it != slots_.end() && it->second.get() == slot;
  }

  void Header(int64_t revision, pb::ResponseHeader* header) const {
    EtcdKv::FillHeader(*service_->node(), revision, service_->node()->KnownTerm(), header);
  }

  // Created and cancelled at once, with the reason (etcd: watch id -1).
  void RefuseLocked(const std::string& reason) REQUIRES(mu_) {
    pb::WatchResponse out;
    Header(service_->node()->state_machine().Revision(), out.mutable_header());
    out.set_watch_id(kNoWatch);
    out.set_created(true);
    out.set_canceled(true);
    out.set_cancel_reason(reason);
    QueueLocked(std::move(out), 0);
  }

  void Create(pb::WatchCreateRequest* in) {
    WatchRequest req;
    // etcd: an empty key is the smallest key, "\0".
    req.set_key(in->key().empty() ? std::string(1, '\0') : std::move(*in->mutable_key()));
    req.set_range_end(std::move(*in->mutable_range_end()));
    req.set_start_revision(in->start_revision());
    req.set_prev_kv(in->prev_kv());
    req.set_progress_notify(in->progress_notify());
    for (int f : in->filters()) {
      req.add_filters(f == pb::WatchCreateRequest::NODELETE ? WatchRequest::NODELETE : WatchRequest::NOPUT);
    }
    grpc::Status bad = ToGrpcStatus(CheckKeyRange(req.key(), req.range_end(), service_->limits()));
    if (bad.ok() && req.start_revision() < 0) {
      bad = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "start_revision must be >= 0");
    }
    Slot* slot = nullptr;
    {
      MutexLock lock(&mu_);
      if (!bad.ok()) return RefuseLocked(bad.error_message());
      int64_t id = in->watch_id();
      if (id == 0) {  // chosen here: the lowest id not in use from the last one on, as etcd
        while (slots_.count(next_id_) != 0) ++next_id_;
        id = next_id_++;
      } else if (id < 0 || slots_.count(id) != 0) {
        return RefuseLocked(id < 0 ? "watch_id must be >= 0"
                                   : "mvcc: duplicate watch ID provided on the WatchStream");
      }
      auto owned = std::make_unique<Slot>();
      slot = owned.get();
      slot->stream = this;
      slot->watch_id = id;
      slot->hub_id = service_->hub()->NewId();
      slots_[id] = std::move(owned);  // first: the hub may answer before Add returns
    }
    grpc::Status added = service_->hub()->Add(slot->hub_id, req, slot, client_);
    if (added.ok()) return;
    MutexLock lock(&mu_);
    slots_.erase(slot->watch_id);  // never registered: the hub has not seen it
    if (added.error_code() == grpc::StatusCode::UNAVAILABLE) {
      if (!end_) end_ = added;
      return MaybeFinishLocked();
    }
    RefuseLocked(added.error_message());
  }

  void Cancel(int64_t watch_id) {
    std::unique_ptr<Slot> slot;
    {
      MutexLock lock(&mu_);
      auto it = slots_.find(watch_id);
      if (it == slots_.end()) return;  // etcd answers nothing for an unknown id
      slot = std::move(it->second);
      slots_.erase(it);
    }
    service_->hub()->Remove(slot->hub_id);  // after this the hub never calls it
    MutexLock lock(&mu_);
    pb::WatchResponse out;
    Header(service_->node()->state_machine().Revision(), out.mutable_header());
    out.set_watch_id(watch_id);
    out.set_canceled(true);
    QueueLocked(std::move(out), 0);
  }

  // A revision every watch of the stream has sent all events up to: its
  // answers already queued come first.
  void Progress() {
    std::vector<uint64_t> ids;
    {
      MutexLock lock(&mu_);
      for (const auto& [id, slot] : slots_) ids.push_back(slot->hub_id);
    }
    std::optional<int64_t> through;
    for (uint64_t id : ids) {
      std::optional<int64_t> r = service_->hub()->SentThrough(id);
      if (r && (!through || *r < *through)) through = r;
    }
    const int64_t revision = through ? *through : service_->node()->state_machine().Revision();
    MutexLock lock(&mu_);
    pb::WatchResponse out;
    Header(revision, out.mutable_header());
    out.set_watch_id(kNoWatch);
    QueueLocked(std::move(out), 0);
  }

  void QueueLocked(pb::WatchResponse resp, uint64_t hub_id) REQUIRES(mu_) {
    if (end_) return;
    queue_.push_back(Answer{std::move(resp), hub_id});
    WriteNextLocked();
  }

  void WriteNextLocked() REQUIRES(mu_) {
    if (writing_ || queue_.empty() || end_) return;
    writing_ = true;
    written_ = std::move(queue_.front().resp);
    written_hub_id_ = queue_.front().hub_id;
    queue_.pop_front();
    StartWrite(&written_);
  }

  // Requests are read while few answers wait: control answers (one per
  // request) stay bounded, and the hub's are one per watch at most.
  void ReadNextLocked() REQUIRES(mu_) {
    if (reading_ || end_ || queue_.size() >= EtcdWatch::kMaxQueuedAnswers) return;
    reading_ = true;
    StartRead(&request_);
  }

  void MaybeFinishLocked() REQUIRES(mu_) {
    if (!end_ || finished_ || writing_) return;
    finished_ = true;
    if (RpcMethodMetrics* m = service_->metrics()) {
      m->Finished(end_->error_code(), std::chrono::steady_clock::now() - start_);
    }
    Finish(*end_);
  }

  const EtcdWatch* const service_;
  grpc::CallbackServerContext* const context_;
  const std::string client_;
  const std::chrono::steady_clock::time_point start_;
  Mutex mu_;
  pb::WatchRequest request_ GUARDED_BY(mu_);  // written by gRPC between StartRead and OnReadDone
  bool reading_ GUARDED_BY(mu_) = false;
  std::map<int64_t, std::unique_ptr<Slot>> slots_ GUARDED_BY(mu_);  // by watch id
  // Slots the hub ended, deleted by the next reaction (not inside a call of the hub).
  std::vector<std::unique_ptr<Slot>> retired_ GUARDED_BY(mu_);
  int64_t next_id_ GUARDED_BY(mu_) = 0;
  std::deque<Answer> queue_ GUARDED_BY(mu_);
  pb::WatchResponse written_ GUARDED_BY(mu_);  // read by gRPC between StartWrite and OnWriteDone
  uint64_t written_hub_id_ GUARDED_BY(mu_) = 0;
  bool writing_ GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> end_ GUARDED_BY(mu_);  // the stream is to end with this
  bool finished_ GUARDED_BY(mu_) = false;
};

void Slot::Send(WatchResponse resp) { stream->FromHub(this, std::move(resp)); }
void Slot::End(const grpc::Status& status, int64_t compact_revision) {
  stream->EndedByHub(this, status, compact_revision);
}
void Slot::Cut(const grpc::Status& status) { stream->CutByHub(status); }

}  // namespace

grpc::ServerBidiReactor<pb::WatchRequest, pb::WatchResponse>* EtcdWatch::Watch(
    grpc::CallbackServerContext* context) {
  return new WatchStream(this, context);
}

}  // namespace raftkv
