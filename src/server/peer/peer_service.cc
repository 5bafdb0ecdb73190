#include "server/peer/peer_service.h"

#include "server/peer/append_stream.h"
#include "server/peer/fault_injector.h"

#include <glog/logging.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "server/rpc/grpc_status.h"

namespace raftkv {

namespace {

bool SameSnapshot(const InstallSnapshotRequest& a, const InstallSnapshotRequest& b) {
  return a.term() == b.term() && a.leader_id() == b.leader_id() &&
         a.last_index() == b.last_index() && a.last_term() == b.last_term() &&
         a.to() == b.to() && a.total_bytes() == b.total_bytes() &&
         a.cluster_id() == b.cluster_id() && a.format() == b.format();
}

}  // namespace

PeerService::PeerService(const ServerOptions& options, RaftNode* node)
    : options_(options),
      node_(node),
      install_snapshot_metrics_(options.metrics->Method(RpcName::Of<Peer>("InstallSnapshot"),
                                                              RpcMethodMetrics::Kind::kStream)),
      timeout_now_metrics_(options.metrics->Method(RpcName::Of<Peer>("TimeoutNow"),
                                                         RpcMethodMetrics::Kind::kUnary)),
      append_stream_metrics_(
          options.metrics->Method(RpcName::Of<Peer>("Append"), RpcMethodMetrics::Kind::kStream)) {}

void PeerService::Register(Testing::AsyncService* testing, int busy, AsyncMethods* methods) {
  using S = PeerHybridService;
  methods->Add<AppendEntriesRequest, AppendEntriesResponse>(
      this, &S::RequestAppendEntries, RpcName::Of<Peer>("AppendEntries"), Caller::kPeer, busy,
      [this](AppendCall* call) { HandleAppend(call); });
  methods->Add<RequestVoteRequest, RequestVoteResponse>(
      this, &S::RequestRequestVote, RpcName::Of<Peer>("RequestVote"), Caller::kPeer, 4,
      [this](VoteCall* call) { HandleVote(call); });
  if (options_.faults != nullptr) {
    methods->Add<SetFaultsRequest, SetFaultsResponse>(
        testing, &Testing::AsyncService::RequestSetFaults, RpcName::Of<Testing>("SetFaults"),
        Caller::kAdmin, 4,
        [this](UnaryCall<SetFaultsRequest, SetFaultsResponse>* call) {
          std::set<uint64_t> blocked(call->request().blocked_peers().begin(),
                                     call->request().blocked_peers().end());
          LOG(WARNING) << "test fault injection: " << blocked.size() << " peer link(s) cut";
          options_.faults->SetBlockedPeers(std::move(blocked));
          call->Finish(SetFaultsResponse());
        });
  }
}

// Peer requests must name this member (a misrouted message means the members'
// cluster files disagree about addresses) and come from another member. The
// sender is not required to be in this member's configuration: with
// membership changes a new member may lead (or send a snapshot) before a
// lagging member has learned the configuration that added it, and refusing
// it would keep that member from ever catching up. The core decides what a
// message from a non-member may do.
grpc::Status PeerService::CheckPeer(uint64_t from, uint64_t to) const {
  if (options_.faults != nullptr && options_.faults->IsBlocked(from)) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "link from member " + std::to_string(from) +
                            " is cut by test fault injection");
  }
  if (to != node_->id()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "message for member " + std::to_string(to) + " reached member " +
                            std::to_string(node_->id()) + "; check the cluster files");
  }
  if (from == 0 || from == node_->id()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "sender " + std::to_string(from) + " is not a peer of member " +
                            std::to_string(node_->id()));
  }
  return grpc::Status::OK;
}

grpc::Status PeerService::CheckAppend(const AppendEntriesRequest& req) const {
  grpc::Status bad = CheckPeer(req.leader_id(), req.to());
  if (!bad.ok()) return bad;
  if (Status why = node_->CheckClusterId(req.cluster_id(), req.leader_id(), /*adopt=*/true); !why.ok()) {
    return ToGrpcStatus(why);
  }
  return grpc::Status::OK;
}

grpc::ServerBidiReactor<AppendEntriesRequest, AppendEntriesResponse>* PeerService::Append(
    grpc::CallbackServerContext* context) {
  return new AppendStreamReactor(
      context, options_.auth, node_, [this](const AppendEntriesRequest& req) { return CheckAppend(req); },
      append_stream_metrics_);
}

void PeerService::HandleAppend(AppendCall* call) {
  if (grpc::Status bad = CheckAppend(call->request()); !bad.ok()) return call->FinishWithError(bad);
  raft::Message m = raft::AppendRequestMessage(&call->request());
  if (Status why = raft::CheckPeerMessage(m); !why.ok()) return call->FinishWithError(ToGrpcStatus(why));
  node_->StepRequest(std::move(m), [call](const raft::Message* reply) {
    if (reply == nullptr) {
      return call->FinishWithError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
    }
    call->Finish(reply->append_resp);
  });
}

void PeerService::HandleVote(VoteCall* call) {
  const RequestVoteRequest& req = call->request();
  grpc::Status bad = CheckPeer(req.candidate_id(), req.to());
  if (!bad.ok()) return call->FinishWithError(bad);
  if (Status why = node_->CheckClusterId(req.cluster_id(), req.candidate_id(), /*adopt=*/false); !why.ok()) {
    return call->FinishWithError(ToGrpcStatus(why));
  }
  raft::Message m = raft::VoteRequestMessage(&call->request());
  if (Status why = raft::CheckPeerMessage(m); !why.ok()) return call->FinishWithError(ToGrpcStatus(why));
  node_->StepRequest(std::move(m), [call](const raft::Message* reply) {
    if (reply == nullptr) {
      return call->FinishWithError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
    }
    call->Finish(reply->vote_resp);
  });
}

// The follower side of a snapshot transfer: receive the chunks into the
// snapshot store (verified end to end before it is renamed into place),
// then hand the metadata to the core and answer with its response, which
// comes once the snapshot is installed and durable.
grpc::Status PeerService::InstallSnapshot(grpc::ServerContext* context,
                                          grpc::ServerReader<InstallSnapshotRequest>* reader,
                                          InstallSnapshotResponse* response) {
  SyncCallRecorder call(install_snapshot_metrics_);
  return call.Done(ServeInstallSnapshot(context, reader, response));
}

grpc::Status PeerService::ServeInstallSnapshot(grpc::ServerContext* context,
                                               grpc::ServerReader<InstallSnapshotRequest>* reader,
                                               InstallSnapshotResponse* response) {
  if (grpc::Status refused = AuthorizeCall(options_.auth, *context, Caller::kPeer); !refused.ok()) {
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
    PeerService* self;
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
grpc::Status PeerService::TimeoutNow(grpc::ServerContext* context, const TimeoutNowRequest* request,
                                     TimeoutNowResponse* response) {
  SyncCallRecorder call(timeout_now_metrics_);
  return call.Done(ServeTimeoutNow(context, request, response));
}

grpc::Status PeerService::ServeTimeoutNow(grpc::ServerContext* context,
                                          const TimeoutNowRequest* request,
                                          TimeoutNowResponse* /*response*/) {
  if (grpc::Status refused = AuthorizeCall(options_.auth, *context, Caller::kPeer); !refused.ok()) {
    return refused;
  }
  grpc::Status bad = CheckPeer(request->leader_id(), request->to());
  if (!bad.ok()) return bad;
  if (Status why = node_->CheckClusterId(request->cluster_id(), request->leader_id(), /*adopt=*/false);
      !why.ok()) {
    return ToGrpcStatus(why);
  }
  raft::Message m = raft::TimeoutNowMessage(*request);
  if (Status why = raft::CheckPeerMessage(m); !why.ok()) return ToGrpcStatus(why);
  node_->StepOneWay(m);
  return grpc::Status::OK;
}

// Reads the whole stream into a SnapshotSink and installs the snapshot.
// Any error drops the sink, which removes what it wrote.
grpc::Status PeerService::Receive(grpc::ServerContext* context,
                                  grpc::ServerReader<InstallSnapshotRequest>* reader,
                                  InstallSnapshotRequest* first) {
  auto invalid = [](const std::string& what) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, what);
  };
  std::unique_ptr<SnapshotSink> receiver;
  InstallSnapshotRequest req;
  std::string name;  // "snapshot <index>/<term> from member <id>", for messages
  const Clock::time_point start = Clock::now();
  while (reader->Read(&req)) {
    if (!receiver) {
      grpc::Status bad = CheckPeer(req.leader_id(), req.to());
      if (!bad.ok()) return bad;
      if (Status why = node_->CheckClusterId(req.cluster_id(), req.leader_id(), /*adopt=*/true); !why.ok()) {
        return ToGrpcStatus(why);
      }
      const raft::Message m = raft::SnapshotRequestMessage(req);
      if (Status why = raft::CheckPeerMessage(m); !why.ok()) return ToGrpcStatus(why);
      name = "snapshot " + std::to_string(req.last_index()) + "/" +
             std::to_string(req.last_term()) + " from member " + std::to_string(req.leader_id());
      if (req.total_bytes() == 0) return invalid(name + ": total_bytes is 0");
      Status s = node_->BeginReceiveSnapshot(req.last_index(), req.last_term(),
                                             static_cast<SnapshotFormat>(req.format()), &receiver);
      if (s.code() == Status::Code::kInvalidArgument) return invalid(name + ": " + s.message());
      if (s.code() == Status::Code::kFailedPrecondition) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, name + ": " + s.message());
      }
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

}  // namespace raftkv
