#include "service/grpc_server.h"

#include <glog/logging.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <condition_variable>
#include <algorithm>
#include <functional>
#include <limits>
#include <mutex>
#include <set>

#include "service/kv_requests.h"
#include "service/peer_client.h"
#include "service/tsan_handoff.h"

namespace raftkv {

namespace {

// Anything whose pointer travels through a completion queue as a tag.
class Tagged {
 public:
  virtual ~Tagged() = default;
  virtual void Proceed(bool ok) = 0;
};

// One unary call of any method. Lifetime: created waiting for a request;
// when one arrives, posts its replacement and runs the handler; deleted when
// its Finish completes (or when the server shuts down before a request came).
template <class Req, class Resp>
class UnaryCall final : public Tagged {
 public:
  using Writer = grpc::ServerAsyncResponseWriter<Resp>;
  // Asks the service for the next call of this method on `cq`.
  using RequestFn = std::function<void(grpc::ServerContext*, Req*, Writer*,
                                       grpc::ServerCompletionQueue*, void*)>;
  using Handler = std::function<void(UnaryCall*)>;

  // `request`, `handler`, `drain_mu` and `draining` are owned by the server
  // and outlive every call.
  static void Post(const RequestFn* request, const Handler* handler, grpc::ServerCompletionQueue* cq,
                   std::shared_mutex* drain_mu, const bool* draining) {
    new UnaryCall(request, handler, cq, drain_mu, draining);
  }

  void Proceed(bool ok) override {
    bool finished;
    {
      std::lock_guard<std::mutex> lock(handoff_mu_);  // see handoff_mu_
      finished = finishing_;
    }
    if (finished || !ok) {  // Finish done, or the server is shutting down
      delete this;
      return;
    }
    std::shared_lock<std::shared_mutex> lock(*drain_mu_);
    if (*draining_) {  // the queues are being shut down: start nothing new
      delete this;
      return;
    }
    Post(request_fn_, handler_, cq_, drain_mu_, draining_);
    (*handler_)(this);  // may Finish (and so delete this) from any thread
  }

  grpc::ServerContext& context() { return context_; }
  Req& request() { return request_; }

  void Finish(const Resp& resp) {
    std::lock_guard<std::mutex> lock(handoff_mu_);
    finishing_ = true;
    writer_.Finish(resp, grpc::Status::OK, this);
  }
  void FinishWithError(const grpc::Status& status) {
    std::lock_guard<std::mutex> lock(handoff_mu_);
    finishing_ = true;
    writer_.FinishWithError(status, this);
  }

 private:
  UnaryCall(const RequestFn* request, const Handler* handler, grpc::ServerCompletionQueue* cq,
            std::shared_mutex* drain_mu, const bool* draining)
      : request_fn_(request),
        handler_(handler),
        cq_(cq),
        drain_mu_(drain_mu),
        draining_(draining),
        writer_(&context_) {
    TsanReleaseTag(this);  // the construction, for the poll thread's Proceed call
    std::lock_guard<std::mutex> lock(handoff_mu_);
    (*request_fn_)(&context_, &request_, &writer_, cq_, this);
  }

  const RequestFn* request_fn_;
  const Handler* handler_;
  grpc::ServerCompletionQueue* cq_;
  std::shared_mutex* drain_mu_;
  const bool* draining_;
  grpc::ServerContext context_;
  Req request_;
  Writer writer_;
  // Held while the call is handed to gRPC (request, Finish) and taken by
  // Proceed before it looks at the call. The completion queue already orders
  // the two, but inside the distribution's libgrpc, which ThreadSanitizer
  // cannot see; without this every call (writer_'s op set filled on the
  // finishing thread, deleted on a poll thread) was reported as a race.
  std::mutex handoff_mu_;
  bool finishing_ = false;
};

// Peer requests must name this member (a misrouted message means the members'
// cluster files disagree about addresses) and come from another member. The
// sender is not required to be in this member's configuration: with
// membership changes a new member may lead (or send a snapshot) before a
// lagging member has learned the configuration that added it, and refusing
// it would keep that member from ever catching up. The core decides what a
// message from a non-member may do.
grpc::Status CheckPeerCall(const ServerOptions& options, const RaftNode& node, uint64_t from,
                           uint64_t to) {
  if (options.faults != nullptr && options.faults->IsBlocked(from)) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "link from member " + std::to_string(from) +
                            " is cut by test fault injection");
  }
  if (to != node.id()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "message for member " + std::to_string(to) + " reached member " +
                            std::to_string(node.id()) + "; check the cluster files");
  }
  if (from == 0 || from == node.id()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "sender " + std::to_string(from) + " is not a peer of member " +
                            std::to_string(node.id()));
  }
  return grpc::Status::OK;
}

// OK, or why `auth` refuses the call (logged, at most once per 100 refusals).
grpc::Status Authorize(const CallAuthorizer* auth, const grpc::ServerContext& context, bool peer) {
  if (auth == nullptr) return grpc::Status::OK;
  grpc::Status refused = peer ? auth->AuthorizePeer(context) : auth->AuthorizeClient(context);
  if (!refused.ok()) {
    LOG_EVERY_N(WARNING, 100) << "refused a " << (peer ? "peer" : "client") << " call from "
                              << context.peer() << ": " << refused.error_message() << " ("
                              << google::COUNTER << " refusals so far)";
  }
  return refused;
}

template <class Call>
void FinishWithOutcome(Call* call, const Outcome& out) {
  if (out.status.error_code() == grpc::StatusCode::FAILED_PRECONDITION && out.leader_id != 0) {
    call->context().AddTrailingMetadata("raftkv-leader-id", std::to_string(out.leader_id));
    call->context().AddTrailingMetadata("raftkv-leader-addr", out.leader_address);
  }
  if (out.not_applied) call->context().AddTrailingMetadata("raftkv-not-applied", "1");
  if (out.session_expired) call->context().AddTrailingMetadata("raftkv-session-expired", "1");
  call->FinishWithError(out.status);
}

}  // namespace

// The method table: how to request each method, and what to do with it.
class GrpcServer::Handlers {
 public:
  using PutCall = UnaryCall<PutRequest, PutResponse>;
  using GetCall = UnaryCall<GetRequest, GetResponse>;
  using DeleteCall = UnaryCall<DeleteRequest, DeleteResponse>;
  using CasCall = UnaryCall<CompareAndSwapRequest, CompareAndSwapResponse>;
  using BatchCall = UnaryCall<BatchRequest, BatchResponse>;
  using StatusCall = UnaryCall<StatusRequest, StatusResponse>;
  using EchoCall = UnaryCall<EchoRequest, EchoResponse>;
  using AppendCall = UnaryCall<AppendEntriesRequest, AppendEntriesResponse>;
  using VoteCall = UnaryCall<RequestVoteRequest, RequestVoteResponse>;
  using OpenSessionCall = UnaryCall<OpenSessionRequest, OpenSessionResponse>;
  using CloseSessionCall = UnaryCall<CloseSessionRequest, CloseSessionResponse>;
  using SetFaultsCall = UnaryCall<SetFaultsRequest, SetFaultsResponse>;

  Handlers(const ServerOptions& options, RaftNode* node, KV::AsyncService* kv, RaftHybridService* raft,
           Testing::AsyncService* testing)
      : options_(options),
        limits_{options.max_key_bytes, options.max_value_bytes, options.max_batch_ops,
                options.max_batch_bytes},
        node_(node) {
    request_open_ = [kv](auto* c, auto* r, auto* w, auto* cq, void* tag) { kv->RequestOpenSession(c, r, w, cq, cq, tag); };
    request_close_ = [kv](auto* c, auto* r, auto* w, auto* cq, void* tag) { kv->RequestCloseSession(c, r, w, cq, cq, tag); };
    request_set_faults_ = [testing](auto* c, auto* r, auto* w, auto* cq, void* tag) { testing->RequestSetFaults(c, r, w, cq, cq, tag); };
    handle_open_ = [this](OpenSessionCall* call) { if (!Refused(call, kClient)) HandleOpenSession(call); };
    handle_close_ = [this](CloseSessionCall* call) { if (!Refused(call, kClient)) HandleCloseSession(call); };
    handle_set_faults_ = [this](SetFaultsCall* call) {
      std::set<uint64_t> blocked(call->request().blocked_peers().begin(),
                                 call->request().blocked_peers().end());
      LOG(WARNING) << "test fault injection: " << blocked.size() << " peer link(s) cut";
      options_.faults->SetBlockedPeers(std::move(blocked));
      call->Finish(SetFaultsResponse());
    };
    request_put_ = [kv](auto* c, auto* r, auto* w, auto* cq, void* tag) { kv->RequestPut(c, r, w, cq, cq, tag); };
    request_get_ = [kv](auto* c, auto* r, auto* w, auto* cq, void* tag) { kv->RequestGet(c, r, w, cq, cq, tag); };
    request_delete_ = [kv](auto* c, auto* r, auto* w, auto* cq, void* tag) { kv->RequestDelete(c, r, w, cq, cq, tag); };
    request_cas_ = [kv](auto* c, auto* r, auto* w, auto* cq, void* tag) { kv->RequestCompareAndSwap(c, r, w, cq, cq, tag); };
    request_batch_ = [kv](auto* c, auto* r, auto* w, auto* cq, void* tag) { kv->RequestBatch(c, r, w, cq, cq, tag); };
    request_status_ = [kv](auto* c, auto* r, auto* w, auto* cq, void* tag) { kv->RequestStatus(c, r, w, cq, cq, tag); };
    request_echo_ = [kv](auto* c, auto* r, auto* w, auto* cq, void* tag) { kv->RequestEcho(c, r, w, cq, cq, tag); };
    request_append_ = [raft](auto* c, auto* r, auto* w, auto* cq, void* tag) { raft->RequestAppendEntries(c, r, w, cq, cq, tag); };
    request_vote_ = [raft](auto* c, auto* r, auto* w, auto* cq, void* tag) { raft->RequestRequestVote(c, r, w, cq, cq, tag); };

    handle_put_ = [this](PutCall* call) { if (!Refused(call, kClient)) HandlePut(call); };
    handle_get_ = [this](GetCall* call) { if (!Refused(call, kClient)) HandleGet(call); };
    handle_delete_ = [this](DeleteCall* call) { if (!Refused(call, kClient)) HandleDelete(call); };
    handle_cas_ = [this](CasCall* call) { if (!Refused(call, kClient)) HandleCompareAndSwap(call); };
    handle_batch_ = [this](BatchCall* call) { if (!Refused(call, kClient)) HandleBatch(call); };
    handle_status_ = [this](StatusCall* call) { if (!Refused(call, kClient)) HandleStatus(call); };
    handle_echo_ = [this](EchoCall* call) {
      if (Refused(call, kClient)) return;
      EchoResponse resp;
      resp.set_payload(std::move(*call->request().mutable_payload()));
      call->Finish(resp);
    };
    handle_append_ = [this](AppendCall* call) { if (!Refused(call, kPeer)) HandleAppend(call); };
    handle_vote_ = [this](VoteCall* call) { if (!Refused(call, kPeer)) HandleVote(call); };
  }

  // Pre-posts calls on `cq`: many for the busy methods, a few for the rest.
  void PostAll(grpc::ServerCompletionQueue* cq, int busy, std::shared_mutex* mu, const bool* draining) {
    for (int i = 0; i < busy; ++i) {
      PutCall::Post(&request_put_, &handle_put_, cq, mu, draining);
      GetCall::Post(&request_get_, &handle_get_, cq, mu, draining);
      AppendCall::Post(&request_append_, &handle_append_, cq, mu, draining);
      EchoCall::Post(&request_echo_, &handle_echo_, cq, mu, draining);
    }
    for (int i = 0; i < std::max(4, busy / 4); ++i) {
      BatchCall::Post(&request_batch_, &handle_batch_, cq, mu, draining);
    }
    for (int i = 0; i < 4; ++i) {
      DeleteCall::Post(&request_delete_, &handle_delete_, cq, mu, draining);
      CasCall::Post(&request_cas_, &handle_cas_, cq, mu, draining);
      StatusCall::Post(&request_status_, &handle_status_, cq, mu, draining);
      VoteCall::Post(&request_vote_, &handle_vote_, cq, mu, draining);
      OpenSessionCall::Post(&request_open_, &handle_open_, cq, mu, draining);
      CloseSessionCall::Post(&request_close_, &handle_close_, cq, mu, draining);
      if (options_.faults != nullptr) {
        SetFaultsCall::Post(&request_set_faults_, &handle_set_faults_, cq, mu, draining);
      }
    }
  }

 private:
  enum Kind { kClient, kPeer };
  // Finishes the call with the authorizer's refusal, if it refuses.
  template <class Call>
  bool Refused(Call* call, Kind kind) {
    grpc::Status refused = Authorize(options_.auth, call->context(), kind == kPeer);
    if (refused.ok()) return false;
    call->FinishWithError(refused);
    return true;
  }

  Clock::time_point Deadline(grpc::ServerContext& context) const {
    const auto cap = Clock::now() + std::chrono::milliseconds(options_.max_request_timeout_ms);
    const auto client = context.deadline();
    if (client == std::chrono::system_clock::time_point::max()) return cap;
    const auto remaining = client - std::chrono::system_clock::now();
    return std::min(cap, Clock::now() + std::chrono::duration_cast<Clock::duration>(remaining));
  }

  void HandleOpenSession(OpenSessionCall* call) {
    Command cmd;
    cmd.set_op(Command::OPEN_SESSION);
    cmd.set_session_timeout_ms(options_.session_timeout_ms);
    const uint64_t timeout = options_.session_timeout_ms;
    node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [call, timeout](Outcome out) {
      if (!out.status.ok()) return FinishWithOutcome(call, out);
      OpenSessionResponse resp;
      resp.set_client_id(out.apply.client_id);
      resp.set_timeout_ms(timeout);
      call->Finish(resp);
    });
  }

  void HandleCloseSession(CloseSessionCall* call) {
    if (call->request().client_id() == 0) {
      return call->FinishWithError(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "client_id must be > 0"));
    }
    Command cmd;
    cmd.set_op(Command::CLOSE_SESSION);
    cmd.set_client_id(call->request().client_id());
    node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [call](Outcome out) {
      if (!out.status.ok()) return FinishWithOutcome(call, out);
      call->Finish(CloseSessionResponse());
    });
  }

  void HandlePut(PutCall* call) {
    Command cmd;
    grpc::Status bad = PutCommand(&call->request(), limits_, &cmd);
    if (!bad.ok()) return call->FinishWithError(bad);
    node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [call](Outcome out) {
      if (!out.status.ok()) return FinishWithOutcome(call, out);
      PutResponse resp;
      resp.set_index(out.index);
      resp.set_term(out.term);
      call->Finish(resp);
    });
  }

  void HandleDelete(DeleteCall* call) {
    Command cmd;
    grpc::Status bad = DeleteCommand(&call->request(), limits_, &cmd);
    if (!bad.ok()) return call->FinishWithError(bad);
    node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [call](Outcome out) {
      if (!out.status.ok()) return FinishWithOutcome(call, out);
      DeleteResponse resp;
      resp.set_existed(out.apply.existed);
      resp.set_index(out.index);
      resp.set_term(out.term);
      call->Finish(resp);
    });
  }

  // Like Put, but the state machine writes only if the key's current state
  // matches; the response reports whether it did and what was there before.
  void HandleCompareAndSwap(CasCall* call) {
    Command cmd;
    grpc::Status bad = CompareAndSwapCommand(&call->request(), limits_, &cmd);
    if (!bad.ok()) return call->FinishWithError(bad);
    node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [call](Outcome out) {
      if (!out.status.ok()) return FinishWithOutcome(call, out);
      CompareAndSwapResponse resp;
      resp.set_swapped(out.apply.swapped);
      resp.set_found(out.apply.found);
      resp.set_current(std::move(out.apply.current));
      resp.set_index(out.index);
      resp.set_term(out.term);
      call->Finish(resp);
    });
  }

  // Many PUTs and DELETEs as one log entry, answered once it is applied.
  void HandleBatch(BatchCall* call) {
    Command cmd;
    grpc::Status bad = BatchCommand(&call->request(), limits_, &cmd);
    if (!bad.ok()) return call->FinishWithError(bad);
    node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [call](Outcome out) {
      if (!out.status.ok()) return FinishWithOutcome(call, out);
      BatchResponse resp;
      resp.set_index(out.index);
      resp.set_term(out.term);
      resp.mutable_existed()->Reserve(static_cast<int>(out.apply.batch_existed.size()));
      for (bool e : out.apply.batch_existed) resp.add_existed(e);
      call->Finish(resp);
    });
  }

  void HandleGet(GetCall* call) {
    grpc::Status bad = CheckGetRequest(call->request(), limits_);
    if (!bad.ok()) return call->FinishWithError(bad);
    const KvStateMachine& sm = node_->state_machine();
    auto answer = [call, &sm](uint64_t index) {
      GetResponse resp;
      if (auto value = sm.Get(call->request().key())) {
        resp.set_found(true);
        resp.set_value(std::move(*value));
      }
      resp.set_applied_index(std::max(index, sm.AppliedIndex()));
      call->Finish(resp);
    };
    if (call->request().allow_stale()) return answer(0);
    node_->ReadBarrier(Deadline(call->context()), [call, answer](Outcome out) {
      if (!out.status.ok()) return FinishWithOutcome(call, out);
      answer(out.index);
    });
  }

  void HandleStatus(StatusCall* call) {
    const NodeStatus st = node_->GetStatus();
    StatusResponse resp;
    resp.set_id(st.id);
    resp.set_address(st.address);
    resp.set_role(raft::RoleName(st.role));
    resp.set_term(st.term);
    resp.set_commit_index(st.commit_index);
    resp.set_applied_index(st.applied_index);
    resp.set_leader_id(st.leader_id);
    resp.set_leader_address(st.leader_address);
    resp.set_last_log_index(st.last_log_index);
    resp.set_durable_index(st.durable_index);
    for (uint64_t v : st.voters) resp.add_voters(v);
    resp.set_sessions(st.sessions);
    call->Finish(resp);
  }

  grpc::Status CheckPeer(uint64_t from, uint64_t to) const {
    return CheckPeerCall(options_, *node_, from, to);
  }

  void HandleAppend(AppendCall* call) {
    const AppendEntriesRequest& req = call->request();
    grpc::Status bad = CheckPeer(req.leader_id(), req.to());
    if (!bad.ok()) return call->FinishWithError(bad);
    raft::Message m = raft::AppendRequestMessage(&call->request());
    if (std::string why = raft::CheckPeerMessage(m); !why.empty()) {
      return call->FinishWithError(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why));
    }
    node_->StepRequest(std::move(m), [call](const raft::Message* reply) {
      if (reply == nullptr) {
        return call->FinishWithError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
      }
      call->Finish(reply->append_resp);
    });
  }

  void HandleVote(VoteCall* call) {
    const RequestVoteRequest& req = call->request();
    grpc::Status bad = CheckPeer(req.candidate_id(), req.to());
    if (!bad.ok()) return call->FinishWithError(bad);
    raft::Message m = raft::VoteRequestMessage(&call->request());
    if (std::string why = raft::CheckPeerMessage(m); !why.empty()) {
      return call->FinishWithError(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why));
    }
    node_->StepRequest(std::move(m), [call](const raft::Message* reply) {
      if (reply == nullptr) {
        return call->FinishWithError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
      }
      call->Finish(reply->vote_resp);
    });
  }

  const ServerOptions options_;
  const RequestLimits limits_;
  RaftNode* node_;
  PutCall::RequestFn request_put_;
  GetCall::RequestFn request_get_;
  DeleteCall::RequestFn request_delete_;
  CasCall::RequestFn request_cas_;
  BatchCall::RequestFn request_batch_;
  StatusCall::RequestFn request_status_;
  EchoCall::RequestFn request_echo_;
  AppendCall::RequestFn request_append_;
  VoteCall::RequestFn request_vote_;
  PutCall::Handler handle_put_;
  GetCall::Handler handle_get_;
  DeleteCall::Handler handle_delete_;
  CasCall::Handler handle_cas_;
  BatchCall::Handler handle_batch_;
  OpenSessionCall::RequestFn request_open_;
  CloseSessionCall::RequestFn request_close_;
  SetFaultsCall::RequestFn request_set_faults_;
  OpenSessionCall::Handler handle_open_;
  CloseSessionCall::Handler handle_close_;
  SetFaultsCall::Handler handle_set_faults_;
  StatusCall::Handler handle_status_;
  EchoCall::Handler handle_echo_;
  AppendCall::Handler handle_append_;
  VoteCall::Handler handle_vote_;
};

// The synchronous methods of the Raft service, run on gRPC's sync threads.
class GrpcServer::RaftService final : public RaftHybridService {
 public:
  RaftService(const ServerOptions& options, RaftNode* node) : options_(options), node_(node) {}

  // The follower side of a snapshot transfer: receive the chunks into the
  // snapshot store (verified end to end before it is renamed into place),
  // then hand the metadata to the core and answer with its response, which
  // comes once the snapshot is installed and durable.
  grpc::Status InstallSnapshot(grpc::ServerContext* context,
                               grpc::ServerReader<InstallSnapshotRequest>* reader,
                               InstallSnapshotResponse* response) override {
    if (grpc::Status refused = Authorize(options_.auth, *context, true); !refused.ok()) {
      return refused;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (receiving_) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "member " + std::to_string(node_->id()) +
                                " is already receiving a snapshot; one transfer at a time");
      }
      receiving_ = true;
    }
    struct Release {
      RaftService* self;
      ~Release() {
        std::lock_guard<std::mutex> lock(self->mu_);
        self->receiving_ = false;
      }
    } release{this};

    InstallSnapshotRequest first;  // the metadata of the first chunk
    grpc::Status status = Receive(context, reader, &first);
    if (!status.ok()) return status;

    // The file is installed in the store: the core may use it now.
    struct Reply {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      bool stopped = false;
      InstallSnapshotResponse response;
    };
    auto reply = std::make_shared<Reply>();
    node_->StepRequest(raft::SnapshotRequestMessage(first), [reply](const raft::Message* m) {
      std::lock_guard<std::mutex> lock(reply->mu);
      reply->done = true;
      if (m == nullptr) {
        reply->stopped = true;
      } else {
        reply->response = m->snapshot_resp;
      }
      reply->cv.notify_all();
    });
    // Restoring a large state takes a while; wait as long as the sender
    // does (its deadline cancels the call), or until the server shuts down.
    std::unique_lock<std::mutex> lock(reply->mu);
    while (!reply->done) {
      if (context->IsCancelled()) {
        return grpc::Status(grpc::StatusCode::CANCELLED,
                            "the call ended before the snapshot was installed");
      }
      reply->cv.wait_for(lock, std::chrono::milliseconds(100));
    }
    if (reply->stopped) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down");
    }
    *response = reply->response;
    return grpc::Status::OK;
  }

  // One-way: the core answers nothing, so the call is answered at once.
  grpc::Status TimeoutNow(grpc::ServerContext* context, const TimeoutNowRequest* request,
                          TimeoutNowResponse* response) override {
    if (grpc::Status refused = Authorize(options_.auth, *context, true); !refused.ok()) {
      return refused;
    }
    grpc::Status bad = CheckPeerCall(options_, *node_, request->leader_id(), request->to());
    if (!bad.ok()) return bad;
    raft::Message m = raft::TimeoutNowMessage(*request);
    if (std::string why = raft::CheckPeerMessage(m); !why.empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
    }
    node_->StepOneWay(m);
    return grpc::Status::OK;
  }

 private:
  static bool SameSnapshot(const InstallSnapshotRequest& a, const InstallSnapshotRequest& b) {
    return a.term() == b.term() && a.leader_id() == b.leader_id() &&
           a.last_index() == b.last_index() && a.last_term() == b.last_term() &&
           a.to() == b.to() && a.total_bytes() == b.total_bytes();
  }

  // Reads the whole stream into a SnapshotReceiver and installs the file.
  // Any error drops the receiver, which removes its temporary file.
  grpc::Status Receive(grpc::ServerContext* context,
                       grpc::ServerReader<InstallSnapshotRequest>* reader,
                       InstallSnapshotRequest* first) {
    auto invalid = [](const std::string& what) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, what);
    };
    std::unique_ptr<SnapshotReceiver> receiver;
    InstallSnapshotRequest req;
    std::string name;  // "snapshot <index>/<term> from member <id>", for messages
    const Clock::time_point start = Clock::now();
    while (reader->Read(&req)) {
      if (!receiver) {
        grpc::Status bad = CheckPeerCall(options_, *node_, req.leader_id(), req.to());
        if (!bad.ok()) return bad;
        const raft::Message m = raft::SnapshotRequestMessage(req);
        if (std::string why = raft::CheckPeerMessage(m); !why.empty()) return invalid(why);
        name = "snapshot " + std::to_string(req.last_index()) + "/" +
               std::to_string(req.last_term()) + " from member " + std::to_string(req.leader_id());
        if (req.total_bytes() == 0) return invalid(name + ": total_bytes is 0");
        Status s = node_->BeginReceiveSnapshot(req.last_index(), req.last_term(), &receiver);
        if (!s.ok()) {
          return grpc::Status(grpc::StatusCode::INTERNAL,
                              name + ": cannot start receiving: " + s.ToString());
        }
        *first = req;
        first->clear_data();
        first->clear_offset();
        first->clear_done();
        LOG(INFO) << "member " << node_->id() << " receiving " << name << " ("
                  << req.total_bytes() << " bytes)";
      } else if (!SameSnapshot(req, *first)) {
        return invalid(name + ": a chunk's metadata differs from the first chunk's");
      } else if (options_.faults != nullptr && options_.faults->IsBlocked(req.leader_id())) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "link from member " + std::to_string(req.leader_id()) +
                                " is cut by test fault injection");
      }
      if (req.offset() != receiver->bytes_received()) {
        return invalid(name + ": chunk at offset " + std::to_string(req.offset()) +
                       ", expected offset " + std::to_string(receiver->bytes_received()) +
                       " (chunks must be consecutive; restart the transfer)");
      }
      if (req.data().size() > first->total_bytes() - req.offset()) {
        return invalid(name + ": chunk at offset " + std::to_string(req.offset()) + " of " +
                       std::to_string(req.data().size()) + " bytes ends past total_bytes " +
                       std::to_string(first->total_bytes()));
      }
      Status s = receiver->Append(req.offset(), req.data());
      if (!s.ok()) {
        return grpc::Status(grpc::StatusCode::INTERNAL, name + ": " + s.ToString());
      }
      if (!req.done()) continue;
      if (receiver->bytes_received() != first->total_bytes()) {
        return invalid(name + ": the last chunk ends at byte " +
                       std::to_string(receiver->bytes_received()) + " but total_bytes is " +
                       std::to_string(first->total_bytes()));
      }
      SnapshotFileInfo installed;
      s = receiver->Finish(&installed);
      if (!s.ok()) {
        LOG(WARNING) << "member " << node_->id() << " refused " << name << ": " << s.ToString();
        return invalid(name + " failed verification: " + s.ToString());
      }
      LOG(INFO) << "member " << node_->id() << " received " << name << " into "
                << installed.path << " in "
                << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()
                << " ms";
      return grpc::Status::OK;
    }
    if (!receiver) return invalid("empty InstallSnapshot stream");
    receiver->Abort();
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED,
                          name + ": the transfer was cancelled after " +
                              std::to_string(receiver->bytes_received()) + " bytes");
    }
    return invalid(name + ": the stream ended after " + std::to_string(receiver->bytes_received()) +
                   " of " + std::to_string(first->total_bytes()) +
                   " bytes without a chunk marked done");
  }

  const ServerOptions options_;
  RaftNode* const node_;
  std::mutex mu_;
  bool receiving_ = false;  // guarded by mu_: one transfer at a time
};

size_t MaxReceiveMessageBytes(const ServerOptions& o) {
  constexpr size_t kOpFraming = 16;  // tags and lengths of one BatchOp / Command
  const size_t entry = std::max(o.max_key_bytes + 2 * o.max_value_bytes,
                                o.max_batch_bytes + kOpFraming * o.max_batch_ops);
  return 2 * std::max({entry, o.max_append_bytes, o.snapshot_chunk_bytes}) + (1 << 20);
}

GrpcServer::GrpcServer(const ServerOptions& options, RaftNode* node)
    : options_(options),
      node_(node),
      raft_service_(std::make_unique<RaftService>(options, node)),
      handlers_(std::make_unique<Handlers>(options, node, &kv_service_, raft_service_.get(),
                                           &testing_service_)) {}

GrpcServer::~GrpcServer() {
  Shutdown(0);
  Join();
}

Status GrpcServer::Start() {
  // host:port, where port 0 asks for any free port.
  const std::string& address = options_.listen_address;
  const size_t colon = address.rfind(':');
  const std::string port_text = colon == std::string::npos ? "" : address.substr(colon + 1);
  const bool digits = !port_text.empty() && port_text.size() <= 5 &&
                      port_text.find_first_not_of("0123456789") == std::string::npos;
  const int requested_port = digits ? std::stoi(port_text) : -1;
  if (colon == 0 || requested_port < 0 || requested_port > 65535) {
    return Status::InvalidArgument("listen address '" + address +
                                   "' is not host:port with a port in 0..65535");
  }
  // The standard gRPC health service (grpc.health.v1.Health: SERVING while
  // the server runs, NOT_SERVING once it shuts down) and server reflection,
  // so grpc_health_probe and grpcurl work. Both are process-wide switches
  // read when a builder is made.
  static std::once_flag plugins_once;
  std::call_once(plugins_once, [] {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  });
  grpc::ServerBuilder builder;
  // Without this gRPC sets SO_REUSEPORT, and a second server on the same
  // port would silently share its connections instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options_.listen_address,
                           options_.auth != nullptr ? options_.auth->Credentials()
                                                    : grpc::InsecureServerCredentials(),
                           &bound_port_);
  builder.RegisterService(&kv_service_);
  builder.RegisterService(raft_service_.get());
  if (options_.faults != nullptr) builder.RegisterService(&testing_service_);
  if (options_.admin_service != nullptr) builder.RegisterService(options_.admin_service);
  const size_t max_receive = MaxReceiveMessageBytes(options_);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<size_t>(max_receive, std::numeric_limits<int>::max())));
  builder.SetMaxSendMessageSize(-1);
  for (int i = 0; i < std::max(1, options_.cq_num); ++i) cqs_.push_back(builder.AddCompletionQueue());
  server_ = builder.BuildAndStart();
  if (!server_ || bound_port_ == 0 || (requested_port != 0 && bound_port_ != requested_port)) {
    return Status::IOError(
        "cannot listen on " + options_.listen_address + " (address in use or not local?" +
        (options_.auth != nullptr && options_.auth->tls()
             ? " or --tls_cert_file and --tls_key_file do not belong together?)"
             : ")"));
  }
  for (auto& cq : cqs_) handlers_->PostAll(cq.get(), options_.calls_per_cq, &drain_mu_, &draining_);
  for (auto& cq : cqs_) {
    for (int t = 0; t < std::max(1, options_.threads_per_cq); ++t) {
      threads_.emplace_back([this, q = cq.get()] { Poll(q); });
    }
  }
  LOG(INFO) << "member " << node_->id() << " serving on " << options_.listen_address << " with "
            << cqs_.size() << " completion queues x " << options_.threads_per_cq << " threads";
  return Status::OK();
}

void GrpcServer::Poll(grpc::ServerCompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) {
    TsanAcquireTag(tag);
    static_cast<Tagged*>(tag)->Proceed(ok);
  }
}

void GrpcServer::Shutdown(int grace_ms) {
  if (shut_down_ || !server_) return;
  shut_down_ = true;
  if (auto* health = server_->GetHealthCheckService()) health->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
}

void GrpcServer::Join() {
  {
    std::unique_lock<std::shared_mutex> lock(drain_mu_);
    draining_ = true;
  }
  for (auto& cq : cqs_) cq->Shutdown();
  for (auto& t : threads_) t.join();
  threads_.clear();
  cqs_.clear();
}

}  // namespace raftkv
