#include "server/rpc/grpc_status.h"
#include "ops/admin_service.h"

#include <glog/logging.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/endpoint.h"
#include "ops/backup.h"
#include "node/cluster_config.h"
#include "server/rpc/server_options.h"

namespace raftkv {

namespace {

// Extra time the handler waits past the deadline it gave the node: the node
// expires deadlines on its ticker, and its own DEADLINE_EXCEEDED (or a late
// success) is a better answer than ours.
constexpr std::chrono::milliseconds kGrace{1000};
// How often a waiting handler checks whether its client went away.
constexpr std::chrono::milliseconds kPoll{100};

// One result handed from a node callback (any thread) to the waiting handler.
// Shared: the callback may run after the handler gave up and returned.
template <class T>
class Rendezvous {
 public:
  void Set(T value) {
    std::lock_guard<std::mutex> lock(mu_);
    if (value_) return;  // callbacks run once; be safe anyway
    value_ = std::move(value);
    cv_.notify_all();
  }
  // Waits until set, `until` passes or the call is cancelled.
  std::optional<T> Wait(Clock::time_point until, grpc::ServerContext* context) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!value_) {
      const auto now = Clock::now();
      if (now >= until || (context != nullptr && context->IsCancelled())) break;
      cv_.wait_until(lock, std::min(until, now + kPoll));
    }
    return value_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<T> value_;
};

// The gRPC answer for a failed node outcome. A FAILED_PRECONDITION naming
// another member as leader carries the KV service's leader metadata, so that
// clients can follow it; a refusal by the leader itself does not.
grpc::Status FailedOutcome(grpc::ServerContext* context, const Outcome& out, uint64_t self) {
  if (out.status.code() == Status::Code::kFailedPrecondition && out.leader_id != 0 &&
      out.leader_id != self) {
    context->AddTrailingMetadata("raftkv-leader-id", std::to_string(out.leader_id));
    if (!out.leader_address.empty()) {
      context->AddTrailingMetadata("raftkv-leader-addr", out.leader_address);
    }
  }
  if (out.status.ok()) {  // not expected here; never report success for a failure
    return grpc::Status(grpc::StatusCode::INTERNAL, "internal error: no outcome");
  }
  return ToGrpcStatus(out.status);
}

grpc::Status TimedOut(const char* what) {
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                      std::string(what) + " did not complete before the deadline");
}

// INVALID_ARGUMENT for member id 0 (no member has it), else OK.
grpc::Status CheckMemberId(uint64_t id) {
  if (id == 0) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "member id must be > 0");
  return grpc::Status::OK;
}

// The membership change of `type` for member `id` (`address`: a new one's).
raft::MembershipChange Change(raft::ChangeType type, uint64_t id, std::string address = "") {
  raft::MembershipChange change;
  change.type = type;
  change.id = id;
  change.address = std::move(address);
  return change;
}

MembershipConfig ToConfig(const std::vector<MemberInfo>& members) {
  MembershipConfig config;
  for (const MemberInfo& m : members) {
    MemberConfig* c = config.add_members();
    c->set_id(m.id);
    c->set_address(m.address);
    c->set_voter(m.voter);
  }
  return config;
}

}  // namespace

AdminServiceImpl::AdminServiceImpl(RaftNode* node, int max_request_timeout_ms,
                                   const CallAuthorizer* auth, ServerMetrics* metrics)
    : node_(node),
      max_request_timeout_ms_(std::max(1, max_request_timeout_ms)),
      auth_(auth),
      methods_(MethodsOf(metrics)) {}

AdminServiceImpl::Methods AdminServiceImpl::MethodsOf(ServerMetrics* metrics) {
  Methods m;
  if (metrics == nullptr) return m;
  auto method = [metrics](const char* name, RpcMethodMetrics::Kind kind) {
    return metrics->Method(RpcName::Of<Admin>(name), kind);
  };
  using Kind = RpcMethodMetrics::Kind;
  m.take_snapshot = method("TakeSnapshot", Kind::kUnary);
  m.snapshot_save = method("SnapshotSave", Kind::kStream);
  m.list_members = method("ListMembers", Kind::kUnary);
  m.add_member = method("AddMember", Kind::kUnary);
  m.promote_member = method("PromoteMember", Kind::kUnary);
  m.remove_member = method("RemoveMember", Kind::kUnary);
  m.transfer_leader = method("TransferLeader", Kind::kUnary);
  return m;
}

template <class Body>
grpc::Status AdminServiceImpl::Serve(const grpc::ServerContext& context, Caller caller,
                                     RpcMethodMetrics* metrics, Body&& body) {
  SyncCallRecorder call(metrics);
  if (grpc::Status refused = AuthorizeCall(auth_, context, caller); !refused.ok()) {
    return call.Done(refused);
  }
  return call.Done(body());
}

Clock::time_point AdminServiceImpl::Deadline(const grpc::ServerContext& context) const {
  return CallDeadline(context, max_request_timeout_ms_);
}

void AdminServiceImpl::FillMembers(const NodeStatus& st, ListMembersResponse* response) {
  response->set_leader_id(st.leader_id);
  response->set_term(st.term);
  response->set_last_index(st.last_log_index);
  response->set_commit_index(st.commit_index);
  response->set_config_index(st.config_index);
  response->set_config_committed(st.config_committed);
  for (const MemberInfo& m : st.members) {
    MemberStatus* out = response->add_members();
    out->set_id(m.id);
    out->set_address(m.address);
    out->set_voter(m.voter);
    out->set_match_index(m.match_index);
    out->set_state(m.state);
  }
}

grpc::Status AdminServiceImpl::WaitForSnapshot(grpc::ServerContext* context, const char* method,
                                               SnapshotInfo* info) {
  struct Result {
    Status status;
    SnapshotInfo info;
  };
  auto rv = std::make_shared<Rendezvous<Result>>();
  node_->TakeSnapshot([rv](Status s, SnapshotInfo info) { rv->Set(Result{s, info}); });
  std::optional<Result> r = rv->Wait(Deadline(*context), context);
  if (!r) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the snapshot was not finished before the deadline (it continues in "
                        "the background)");
  }
  if (!r->status.ok()) {
    const std::string text = r->status.ToString();
    LOG(WARNING) << "Admin." << method << ": " << text;
    const bool invalid = text.rfind("Invalid argument", 0) == 0;
    return grpc::Status(invalid ? grpc::StatusCode::FAILED_PRECONDITION
                                : grpc::StatusCode::INTERNAL,
                        "snapshot failed: " + text);
  }
  *info = r->info;
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::TakeSnapshot(grpc::ServerContext* context,
                                            const TakeSnapshotRequest* /*request*/,
                                            TakeSnapshotResponse* response) {
  return Serve(*context, Caller::kAdmin, methods_.take_snapshot, [&] {
    SnapshotInfo info;
    if (grpc::Status s = WaitForSnapshot(context, "TakeSnapshot", &info); !s.ok()) return s;
    response->set_last_index(info.last_index);
    response->set_last_term(info.last_term);
    response->set_bytes(info.bytes);
    response->set_path(info.path);
    LOG(INFO) << "Admin.TakeSnapshot: " << info.path << " (index " << info.last_index
              << ", term " << info.last_term << ", " << info.bytes << " bytes)";
    return grpc::Status::OK;
  });
}

grpc::Status AdminServiceImpl::SnapshotSave(grpc::ServerContext* context,
                                            const SnapshotSaveRequest* /*request*/,
                                            grpc::ServerWriter<SnapshotSaveResponse>* writer) {
  return Serve(*context, Caller::kAdmin, methods_.snapshot_save, [&] {
    bool first = true;
    return StreamSnapshot(context, [&](const SnapshotSaveInfo& info, std::string* chunk, uint64_t remaining,
                                       const std::string& sha256) {
      // The first message: the metadata and the first chunk.
      SnapshotSaveResponse msg;
      if (first) *msg.mutable_info() = info;
      first = false;
      msg.mutable_chunk()->swap(*chunk);
      if (!sha256.empty()) msg.set_sha256(sha256);
      return writer->Write(msg);
    });
  });
}

grpc::Status AdminServiceImpl::StreamEtcdSnapshot(grpc::ServerContext* context, const Write& write) {
  std::optional<EtcdSnapshotFrame> frame;
  return StreamSnapshot(context, [&](const SnapshotSaveInfo& info, std::string* chunk, uint64_t remaining,
                                     const std::string& sha256) {
    if (!frame) frame.emplace(info.size());
    frame->Update(*chunk);
    const bool last = !sha256.empty();
    if (last) chunk->append(frame->Trailer());
    return write(info, chunk, last ? 0 : remaining + frame->trailer_bytes(), std::string());
  });
}

grpc::Status AdminServiceImpl::StreamSnapshot(grpc::ServerContext* context, const Write& write) {
  // The file of the snapshot just taken (a checkpoint is written out as
  // one). Opening it holds it: the snapshots
  // taken meanwhile may prune it by name, but the transfer reads on (POSIX).
  // It can be pruned between the snapshot and the open (two more snapshots
  // in that instant): then take another.
  SnapshotInfo info;
  std::unique_ptr<SnapshotFileSource> source;
  int64_t revision = 0;
  constexpr int kAttempts = 3;
  for (int attempt = 1;; ++attempt) {
    if (grpc::Status s = WaitForSnapshot(context, "SnapshotSave", &info); !s.ok()) return s;
    Status s = node_->OpenSnapshotFile(info.last_index, info.last_term, &source);
    // The revision, from the file's first records (the store record precedes
    // the keys); the whole file is verified by the receiver.
    if (s.ok()) s = ReadSnapshotRevision(source->path(), &revision);
    if (s.ok()) break;
    std::error_code ec;
    const bool gone = !std::filesystem::exists(info.path, ec);
    if (!gone || attempt == kAttempts) {
      LOG(WARNING) << "Admin.SnapshotSave: cannot read snapshot " << info.path << ": "
                   << s.ToString();
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          "cannot read snapshot " + info.path + ": " + s.ToString());
    }
    LOG(INFO) << "Admin.SnapshotSave: snapshot " << info.path
              << " was pruned before it could be opened; taking another";
  }
  LOG(INFO) << "Admin.SnapshotSave: streaming " << source->path() << " (index " << info.last_index
            << ", term " << info.last_term << ", revision " << revision << ", "
            << source->size() << " bytes) to " << context->peer();

  SnapshotSaveInfo meta;
  meta.set_member_id(node_->id());
  meta.set_last_index(info.last_index);
  meta.set_last_term(info.last_term);
  meta.set_revision(revision);
  meta.set_size(source->size());
  Sha256 sha;
  uint64_t offset = 0;
  bool last = source->size() == 0;
  // Each write waits for flow control, so a slow client holds at most a few
  // chunks here.
  std::string chunk;
  do {
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the transfer");
    }
    chunk.clear();
    if (offset < source->size()) {
      Status s = source->ReadChunk(offset, kSnapshotSaveChunkBytes, &chunk, &last);
      if (!s.ok()) {
        LOG(WARNING) << "Admin.SnapshotSave: " << s.ToString();
        return grpc::Status(grpc::StatusCode::INTERNAL,
                            "cannot read the snapshot: " + s.ToString());
      }
      sha.Update(chunk);
      offset += chunk.size();
    }
    const uint64_t remaining = last ? 0 : source->size() - std::min<uint64_t>(offset, source->size());
    if (!write(meta, &chunk, remaining, last ? sha.HexDigest() : std::string())) {
      LOG(WARNING) << "Admin.SnapshotSave: the client went away after " << offset << " of "
                   << source->size() << " bytes";
      return grpc::Status(grpc::StatusCode::CANCELLED, "the stream was closed");
    }
  } while (!last);
  LOG(INFO) << "Admin.SnapshotSave: sent " << offset << " bytes of " << source->path();
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::ListMembers(grpc::ServerContext* context,
                                           const ListMembersRequest* /*request*/,
                                           ListMembersResponse* response) {
  return Serve(*context, Caller::kClient, methods_.list_members, [&] {
    FillMembers(node_->GetStatus(), response);
    return grpc::Status::OK;
  });
}

grpc::Status AdminServiceImpl::ChangeMembership(grpc::ServerContext* context,
                                                const raft::MembershipChange& change,
                                                MemberChangeResponse* response) {
  const Clock::time_point deadline = Deadline(*context);
  auto rv = std::make_shared<Rendezvous<Outcome>>();
  node_->ChangeMembership(change, deadline, [rv](Outcome out) { rv->Set(std::move(out)); });
  std::optional<Outcome> out = rv->Wait(deadline + kGrace, context);
  const std::string what = std::string("membership change ") + raft::ChangeTypeName(change.type) +
                           " " + std::to_string(change.id);
  if (!out) return TimedOut(what.c_str());
  if (!out->status.ok()) {
    VLOG(1) << "Admin: " << what << ": " << out->status.message();
    return FailedOutcome(context, *out, node_->id());
  }
  response->set_index(out->index);
  *response->mutable_config() = ToConfig(node_->GetStatus().members);
  LOG(INFO) << "Admin: " << what << " committed at index " << out->index;
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::AddMember(grpc::ServerContext* context,
                                         const AddMemberRequest* request,
                                         MemberChangeResponse* response) {
  return Serve(*context, Caller::kAdmin, methods_.add_member, [&] {
    if (grpc::Status bad = CheckMemberId(request->id()); !bad.ok()) return bad;
    if (Status bad = ParseEndpoint(request->address()); !bad.ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "address '" + request->address() + "' of member " +
                              std::to_string(request->id()) + ": " + bad.message());
    }
    return ChangeMembership(
        context, Change(raft::ChangeType::kAddLearner, request->id(), request->address()),
        response);
  });
}

grpc::Status AdminServiceImpl::PromoteMember(grpc::ServerContext* context,
                                             const PromoteMemberRequest* request,
                                             MemberChangeResponse* response) {
  return Serve(*context, Caller::kAdmin, methods_.promote_member, [&] {
    if (grpc::Status bad = CheckMemberId(request->id()); !bad.ok()) return bad;
    return ChangeMembership(context, Change(raft::ChangeType::kPromote, request->id()), response);
  });
}

grpc::Status AdminServiceImpl::RemoveMember(grpc::ServerContext* context,
                                            const RemoveMemberRequest* request,
                                            MemberChangeResponse* response) {
  return Serve(*context, Caller::kAdmin, methods_.remove_member, [&] {
    if (grpc::Status bad = CheckMemberId(request->id()); !bad.ok()) return bad;
    return ChangeMembership(context, Change(raft::ChangeType::kRemove, request->id()), response);
  });
}

grpc::Status AdminServiceImpl::TransferLeader(grpc::ServerContext* context,
                                              const TransferLeaderRequest* request,
                                              TransferLeaderResponse* response) {
  return Serve(*context, Caller::kAdmin, methods_.transfer_leader, [&] {
    if (grpc::Status bad = CheckMemberId(request->id()); !bad.ok()) return bad;
    if (request->id() == node_->id()) {
      // Transferring to the current leader is a no-op, not an error.
      const NodeStatus st = node_->GetStatus();
      if (st.role == raft::Role::kLeader) {
        response->set_leader_id(st.id);
        response->set_term(st.term);
        return grpc::Status::OK;
      }
    }
    const Clock::time_point deadline = Deadline(*context);
    auto rv = std::make_shared<Rendezvous<Outcome>>();
    node_->TransferLeadership(request->id(), deadline,
                              [rv](Outcome out) { rv->Set(std::move(out)); });
    std::optional<Outcome> out = rv->Wait(deadline + kGrace, context);
    if (!out) return TimedOut(("leadership transfer to " + std::to_string(request->id())).c_str());
    if (!out->status.ok()) return FailedOutcome(context, *out, node_->id());
    response->set_leader_id(out->leader_id != 0 ? out->leader_id : request->id());
    response->set_term(out->term);
    LOG(INFO) << "Admin: leadership transferred to member " << response->leader_id() << " (term "
              << out->term << ")";
    return grpc::Status::OK;
  });
}

}  // namespace raftkv
