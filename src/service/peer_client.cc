#include "service/peer_client.h"

#include <glog/logging.h>

#include "client/channel_args.h"
#include "service/tsan_handoff.h"

namespace raftkv {


// One outgoing call and everything it needs until its completion.
struct PeerClient::Call {
  uint64_t peer = 0;
  raft::MessageType type = raft::MessageType::kAppend;
  grpc::ClientContext context;
  grpc::Status status;
  AppendEntriesResponse append_resp;
  RequestVoteResponse vote_resp;
  std::unique_ptr<grpc::ClientAsyncResponseReader<AppendEntriesResponse>> append_reader;
  std::unique_ptr<grpc::ClientAsyncResponseReader<RequestVoteResponse>> vote_reader;
  // Held by Send while it hands the call to gRPC, taken by Poll before it
  // looks at the call. The completion queue already orders the two, but
  // inside the distribution's libgrpc, which ThreadSanitizer cannot see.
  std::mutex handoff_mu;
};

PeerClient::PeerClient(const ClusterConfig& cluster, uint64_t self_id,
                       const PeerClientOptions& options, ResponseHandler on_response,
                       UnreachableHandler on_unreachable)
    : self_id_(self_id),
      options_(options),
      on_response_(std::move(on_response)),
      on_unreachable_(std::move(on_unreachable)) {
  for (const Member& m : cluster.members) {
    if (m.id == self_id) continue;
    auto channel = grpc::CreateCustomChannel(m.address, grpc::InsecureChannelCredentials(),
                                             RaftkvChannelArguments());
    stubs_.emplace(m.id, Raft::NewStub(channel));
  }
  const int cq_num = std::max(1, options_.cq_num);
  for (int i = 0; i < cq_num; ++i) cqs_.push_back(std::make_unique<grpc::CompletionQueue>());
  for (auto& cq : cqs_) {
    for (int t = 0; t < std::max(1, options_.threads_per_cq); ++t) {
      threads_.emplace_back([this, q = cq.get()] { Poll(q); });
    }
  }
}

PeerClient::~PeerClient() { Shutdown(); }

void PeerClient::Send(raft::Message m) {
  auto stub = stubs_.find(m.to);
  if (stub == stubs_.end()) {
    LOG(DFATAL) << "no channel to member " << m.to << " for " << m.DebugString();
    return;
  }
  // A cut link (test fault injection) loses the message, as a network would;
  // the core's retries and stall detection recover once it heals.
  if (options_.faults != nullptr && options_.faults->IsBlocked(m.to)) return;
  auto* call = new Call;
  call->peer = m.to;
  call->type = m.type;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) {
      delete call;
      return;
    }
    inflight_.insert(call);
  }
  grpc::CompletionQueue* cq = cqs_[next_cq_.fetch_add(1, std::memory_order_relaxed) % cqs_.size()].get();
  TsanReleaseTag(call);  // its construction (handoff_mu included), for Poll
  std::unique_lock<std::mutex> handoff(call->handoff_mu);
  switch (m.type) {
    case raft::MessageType::kAppend:
      call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(options_.append_timeout_ms));
      call->append_reader = stub->second->PrepareAsyncAppendEntries(&call->context, m.append, cq);
      call->append_reader->StartCall();
      call->append_reader->Finish(&call->append_resp, &call->status, call);
      break;
    case raft::MessageType::kVote:
      call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(options_.vote_timeout_ms));
      call->vote_reader = stub->second->PrepareAsyncRequestVote(&call->context, m.vote, cq);
      call->vote_reader->StartCall();
      call->vote_reader->Finish(&call->vote_resp, &call->status, call);
      break;
    default: {
      handoff.unlock();
      LOG(DFATAL) << "responses travel as RPC replies, not calls: " << m.DebugString();
      std::lock_guard<std::mutex> lock(mu_);
      inflight_.erase(call);
      delete call;
    }
  }
}

void PeerClient::Poll(grpc::CompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) {
    TsanAcquireTag(tag);
    std::unique_ptr<Call> call(static_cast<Call*>(tag));
    { std::lock_guard<std::mutex> handoff(call->handoff_mu); }
    bool shutting_down;
    {
      std::lock_guard<std::mutex> lock(mu_);
      inflight_.erase(call.get());
      shutting_down = shut_down_;
    }
    if (shutting_down) continue;
    if (ok && call->status.ok()) {
      raft::Message r =
          call->type == raft::MessageType::kAppend
              ? raft::AppendResponseMessage(call->peer, self_id_, &call->append_resp)
              : raft::VoteResponseMessage(call->peer, self_id_, &call->vote_resp);
      const std::string why = raft::CheckPeerMessage(r);
      if (why.empty()) {
        on_response_(r);
        continue;
      }
      // Handled like a failed call (the core retries by probing).
      LOG(WARNING) << "dropped a malformed reply from member " << call->peer << ": " << why;
    }
    bool log_it = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& last = last_failure_log_[call->peer];
      if (Clock::now() - last > std::chrono::seconds(5)) {
        last = Clock::now();
        log_it = true;
      }
    }
    LOG_IF(WARNING, log_it) << "RPC " << raft::MessageTypeName(call->type) << " to member "
                            << call->peer << " failed: "
                            << static_cast<int>(call->status.error_code()) << " "
                            << call->status.error_message() << " (further failures muted for 5s)";
    on_unreachable_(call->peer);
  }
}

void PeerClient::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (Call* call : inflight_) call->context.TryCancel();
  }
  for (auto& cq : cqs_) cq->Shutdown();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace raftkv
