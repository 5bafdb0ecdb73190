#include "server/peer/peer_client.h"

#include <glog/logging.h>

#include "client/channel_args.h"
#include "client/security.h"
#include "common/thread_name.h"
#include "common/tsan_handoff.h"

namespace raftkv {

namespace {
std::string GrpcStatusText(const grpc::Status& s) {
  return std::to_string(static_cast<int>(s.error_code())) + " " + s.error_message();
}
}  // namespace

// One outgoing unary call and everything it needs until its completion.
struct PeerClient::Call {
  uint64_t peer = 0;
  raft::MessageType type = raft::MessageType::kAppend;
  std::shared_ptr<internal::Peer::Stub> stub;  // keeps the channel for the call's life
  grpc::ClientContext context;
  grpc::Status status;
  AppendEntriesResponse append_resp;
  RequestVoteResponse vote_resp;
  TimeoutNowResponse timeout_now_resp;
  std::unique_ptr<grpc::ClientAsyncResponseReader<AppendEntriesResponse>> append_reader;
  std::unique_ptr<grpc::ClientAsyncResponseReader<RequestVoteResponse>> vote_reader;
  std::unique_ptr<grpc::ClientAsyncResponseReader<TimeoutNowResponse>> timeout_now_reader;
  // Held by Send while it hands the call to gRPC, taken by Poll before it
  // looks at the call. The completion queue already orders the two, but
  // inside the distribution's libgrpc, which ThreadSanitizer cannot see.
  std::mutex handoff_mu;
};

// One snapshot stream to one peer.
struct PeerClient::Transfer {
  std::thread thread;
  // The current stream's context, new for each transfer the thread runs
  // (replaced by the thread under mu_); TryCancel()ed by Shutdown().
  std::unique_ptr<grpc::ClientContext> context = std::make_unique<grpc::ClientContext>();
  // Guarded by PeerClient::mu_:
  bool reported = false;  // the current transfer has answered (or is answering) the core
  bool finished = false;  // the thread runs no more transfers and may be joined
  // A request that came after the current transfer reported: the thread
  // runs it next (the newest one wins).
  std::unique_ptr<raft::Message> next;
  std::shared_ptr<internal::Peer::Stub> next_stub;
};

PeerClient::PeerClient(const ClusterConfig& cluster, uint64_t self_id,
                       const PeerClientOptions& options, ResponseHandler on_response,
                       UnreachableHandler on_unreachable, SnapshotOpener open_snapshot)
    : self_id_(self_id),
      options_(options),
      on_response_(std::move(on_response)),
      on_unreachable_(std::move(on_unreachable)),
      open_snapshot_(std::move(open_snapshot)) {
  {
    MutexLock lock(&mu_);
    for (const Member& m : cluster.members) {
      if (m.id != self_id) DialLocked(m.id, m.address);
    }
  }
  const int cq_num = std::max(1, options_.cq_num);
  for (int i = 0; i < cq_num; ++i) cqs_.push_back(std::make_unique<grpc::CompletionQueue>());
  for (auto& cq : cqs_) {
    for (int t = 0; t < std::max(1, options_.threads_per_cq); ++t) {
      threads_.emplace_back([this, q = cq.get()] {
        SetThreadName("raftkv-peer-cq");
        Poll(q);
      });
    }
  }
}

PeerClient::~PeerClient() { Shutdown(); }

void PeerClient::DialLocked(uint64_t id, const std::string& address) {
  auto channel = MakeChannel(address, RaftkvChannelArguments(), options_.security);
  Peer& peer = peers_[id];
  peer.address = address;
  peer.stub = std::shared_ptr<internal::Peer::Stub>(internal::Peer::NewStub(channel));
}

void PeerClient::UpdateMembers(const MembershipConfig& config) {
  MutexLock lock(&mu_);
  for (const MemberConfig& m : config.members()) {
    if (m.id() == self_id_ || m.address().empty()) continue;
    auto it = peers_.find(m.id());
    if (it != peers_.end() && it->second.address == m.address()) continue;
    LOG(INFO) << "member " << self_id_ << " dials member " << m.id() << " at " << m.address()
              << (it == peers_.end() ? "" : " (was " + it->second.address + ")");
    // A replaced stub stays alive while calls in flight hold it.
    DialLocked(m.id(), m.address());
  }
}

bool PeerClient::ShouldLogFailureLocked(uint64_t peer) {
  auto& last = last_failure_log_[peer];
  if (Clock::now() - last <= std::chrono::seconds(5)) return false;
  last = Clock::now();
  return true;
}

void PeerClient::Send(raft::Message m) {
  std::shared_ptr<internal::Peer::Stub> stub;
  {
    MutexLock lock(&mu_);
    if (shut_down_) return;
    auto it = peers_.find(m.to);
    if (it == peers_.end()) {
      // The core only addresses members of a configuration, whose addresses
      // reached UpdateMembers() first; this is a bug, not a network fault.
      LOG_IF(ERROR, ShouldLogFailureLocked(m.to))
          << "no address for member " << m.to << "; dropped " << m.DebugString();
      return;
    }
    stub = it->second.stub;
  }
  // A cut link (test fault injection) loses the message, as a network would;
  // the core's retries and stall detection recover once it heals. (A
  // snapshot transfer checks inside, and reports the peer unreachable.)
  if (m.type != raft::MessageType::kSnapshot && options_.faults != nullptr &&
      options_.faults->IsBlocked(m.to)) {
    return;
  }
  if (options_.cluster_id) {
    const uint64_t cluster_id = options_.cluster_id();
    switch (m.type) {
      case raft::MessageType::kAppend: m.append.set_cluster_id(cluster_id); break;
      case raft::MessageType::kVote: m.vote.set_cluster_id(cluster_id); break;
      case raft::MessageType::kTimeoutNow: m.timeout_now.set_cluster_id(cluster_id); break;
      case raft::MessageType::kSnapshot: m.snapshot.set_cluster_id(cluster_id); break;
      default: break;
    }
  }
  if (m.type == raft::MessageType::kSnapshot) {
    StartSnapshotTransfer(std::move(m), std::move(stub));
    return;
  }
  if (m.type == raft::MessageType::kAppend && options_.append_stream && SendOnStream(&m, stub)) return;
  auto* call = new Call;
  call->peer = m.to;
  call->type = m.type;
  call->stub = std::move(stub);
  {
    MutexLock lock(&mu_);
    if (shut_down_) {
      delete call;
      return;
    }
    inflight_.insert(call);
  }
  grpc::CompletionQueue* cq = cqs_[next_cq_.fetch_add(1, std::memory_order_relaxed) % cqs_.size()].get();
  TsanReleaseTag(call);  // its construction (handoff_mu included), for Poll
  std::unique_lock<std::mutex> handoff(call->handoff_mu);
  auto deadline_in = [](int ms) {
    return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
  };
  switch (m.type) {
    case raft::MessageType::kAppend:
      call->context.set_deadline(deadline_in(options_.append_timeout_ms));
      call->append_reader = call->stub->PrepareAsyncAppendEntries(&call->context, m.append, cq);
      call->append_reader->StartCall();
      call->append_reader->Finish(&call->append_resp, &call->status, call);
      break;
    case raft::MessageType::kVote:
      call->context.set_deadline(deadline_in(options_.vote_timeout_ms));
      call->vote_reader = call->stub->PrepareAsyncRequestVote(&call->context, m.vote, cq);
      call->vote_reader->StartCall();
      call->vote_reader->Finish(&call->vote_resp, &call->status, call);
      break;
    case raft::MessageType::kTimeoutNow:
      call->context.set_deadline(deadline_in(options_.timeout_now_timeout_ms));
      call->timeout_now_reader = call->stub->PrepareAsyncTimeoutNow(&call->context, m.timeout_now, cq);
      call->timeout_now_reader->StartCall();
      call->timeout_now_reader->Finish(&call->timeout_now_resp, &call->status, call);
      break;
    default: {
      handoff.unlock();
      LOG(DFATAL) << "responses travel as RPC replies, not calls: " << m.DebugString();
      MutexLock lock(&mu_);
      inflight_.erase(call);
      delete call;
    }
  }
}

bool PeerClient::SendOnStream(raft::Message* m, const std::shared_ptr<internal::Peer::Stub>& stub) {
  const uint64_t peer = m->to;
  MutexLock lock(&mu_);
  if (shut_down_) return true;  // dropped
  if (unary_only_.count(peer) != 0) return false;
  Stream& slot = streams_[peer];
  if (slot.stream == nullptr || slot.stub != stub) {
    if (slot.stream != nullptr) slot.stream->Cancel();  // dialed anew: the old one ends by itself
    slot.stub = stub;
    // on_forget and on_end take mu_ (they wait until this returns); both run
    // once, one after the other, on the thread that ends the stream.
    auto replaced = std::make_shared<bool>(false);
    slot.stream = new AppendStreamClient(
        stub.get(), std::chrono::milliseconds(options_.append_timeout_ms), options_.append_stream_queue,
        [this, peer](AppendEntriesResponse* answer) {
          Deliver(peer, raft::AppendResponseMessage(peer, self_id_, answer));
        },
        [this, peer, replaced](AppendStreamClient* gone) {
          MutexLock lock(&mu_);
          auto it = streams_.find(peer);
          if (it != streams_.end() && it->second.stream == gone) {
            streams_.erase(it);
          } else {
            *replaced = true;
          }
        },
        [this, peer, replaced](const grpc::Status& status) { StreamEnded(peer, status, *replaced); });
    ++open_streams_;
  }
  slot.stream->Push(std::move(m->append));  // false: dropped, as a network would
  return true;
}

bool PeerClient::Deliver(uint64_t peer, const raft::Message& answer) {
  const Status why = raft::CheckPeerMessage(answer);
  if (why.ok()) {
    on_response_(answer);
    return true;
  }
  LOG(WARNING) << "dropped a malformed reply from member " << peer << ": " << why.message();
  return false;
}

void PeerClient::StreamEnded(uint64_t peer, const grpc::Status& status, bool replaced) {
  bool report = false;
  bool log_it = false;
  {
    MutexLock lock(&mu_);
    --open_streams_;
    streams_cv_.SignalAll();
    if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED && unary_only_.insert(peer).second) {
      LOG(WARNING) << "member " << peer << " does not serve Peer.Append; it gets one AppendEntries call "
                   << "per append";
    }
    report = !shut_down_ && !replaced;
    log_it = report && !status.ok() && ShouldLogFailureLocked(peer);
  }
  LOG_IF(WARNING, log_it) << "the append stream to member " << peer << " ended: " << GrpcStatusText(status)
                          << " (further failures muted for 5s)";
  if (report) on_unreachable_(peer);
}

void PeerClient::Poll(grpc::CompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (TsanUncheckedNext(cq, &tag, &ok)) {
    TsanAcquireTag(tag);
    std::unique_ptr<Call> call(static_cast<Call*>(tag));
    { std::lock_guard<std::mutex> handoff(call->handoff_mu); }
    bool shutting_down;
    {
      MutexLock lock(&mu_);
      inflight_.erase(call.get());
      shutting_down = shut_down_;
    }
    if (shutting_down) continue;
    if (call->type == raft::MessageType::kTimeoutNow) {
      // One-way: the target campaigns (or not); the leader learns the outcome
      // from the election, and gives the transfer up on its own timer.
      LOG_IF(WARNING, !(ok && call->status.ok()))
          << "TimeoutNow to member " << call->peer << " failed: " << GrpcStatusText(call->status);
      continue;
    }
    // A malformed answer is handled like a failed call (the core retries by probing).
    if (ok && call->status.ok() &&
        Deliver(call->peer, call->type == raft::MessageType::kAppend
                                ? raft::AppendResponseMessage(call->peer, self_id_, &call->append_resp)
                                : raft::VoteResponseMessage(call->peer, self_id_, &call->vote_resp))) {
      continue;
    }
    bool log_it = false;
    {
      MutexLock lock(&mu_);
      log_it = ShouldLogFailureLocked(call->peer);
    }
    LOG_IF(WARNING, log_it) << "RPC " << raft::MessageTypeName(call->type) << " to member "
                            << call->peer << " failed: " << GrpcStatusText(call->status)
                            << " (further failures muted for 5s)";
    on_unreachable_(call->peer);
  }
}

void PeerClient::StartSnapshotTransfer(raft::Message m, std::shared_ptr<internal::Peer::Stub> stub) {
  std::shared_ptr<Transfer> previous;
  {
    MutexLock lock(&mu_);
    if (shut_down_) return;
    std::shared_ptr<Transfer>& slot = transfers_[m.to];
    if (slot && !slot->finished) {
      // One transfer per peer at a time. Until the running one has answered
      // the core, the request is dropped: that answer comes later, and the
      // core asks again if it still needs a snapshot. Once it has answered
      // (the core may ask for the next snapshot from inside that answer, on
      // this very thread), the request is kept and the thread runs it next:
      // dropped, nothing would ever answer it, and the core would wait in
      // its snapshot state forever.
      if (!slot->reported) {
        VLOG(1) << "snapshot transfer to member " << m.to << " already running; "
                << m.DebugString() << " ignored";
      } else {
        slot->next = std::make_unique<raft::Message>(std::move(m));
        slot->next_stub = std::move(stub);
      }
      return;
    }
    previous = std::move(slot);
    auto transfer = std::make_shared<Transfer>();
    slot = transfer;
    // The thread only uses *transfer, which the map keeps alive until the
    // thread is joined.
    transfer->thread = std::thread([this, t = transfer.get(), m = std::move(m),
                                    stub = std::move(stub)]() mutable {
      for (;;) {
        RunSnapshotTransfer(t, m, std::move(stub));
        MutexLock lock(&mu_);
        if (t->next == nullptr || shut_down_) {
          t->finished = true;
          return;
        }
        m = std::move(*t->next);
        stub = std::move(t->next_stub);
        t->next.reset();
        t->reported = false;
        t->context = std::make_unique<grpc::ClientContext>();
      }
    });
  }
  if (previous && previous->thread.joinable()) previous->thread.join();  // it has finished
}

void PeerClient::RunSnapshotTransfer(Transfer* transfer, const raft::Message& m,
                                     std::shared_ptr<internal::Peer::Stub> stub) {
  const uint64_t peer = m.to;
  const uint64_t index = m.snapshot.last_index();
  const uint64_t term = m.snapshot.last_term();
  const Clock::time_point start = Clock::now();
  InstallSnapshotResponse resp;
  std::string failure;  // empty: success
  uint64_t total = 0;
  auto blocked = [&] { return options_.faults != nullptr && options_.faults->IsBlocked(peer); };
  std::unique_ptr<SnapshotSource> source;
  if (blocked()) {
    failure = "link cut by test fault injection";
  } else {
    Status s = open_snapshot_ ? open_snapshot_(index, term, &source)
                              : Status::IOError("this peer client cannot open snapshot files");
    if (!s.ok()) failure = "cannot open the snapshot: " + s.ToString();
  }
  if (failure.empty()) {
    total = source->size();
    LOG(INFO) << "member " << self_id_ << " sends snapshot " << index << "/" << term << " ("
              << total << " bytes, " << source->path() << ") to member " << peer;
    // No wait-for-ready: an unreachable peer fails the call at once, and the
    // core falls back to probing it.
    // The thread that runs this transfer is the only one that replaces the
    // context, so it reads the pointer without mu_.
    grpc::ClientContext* context = transfer->context.get();
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(options_.snapshot_timeout_ms));
    std::unique_ptr<grpc::ClientWriter<InstallSnapshotRequest>> writer =
        stub->InstallSnapshot(context, &resp);
    InstallSnapshotRequest req = m.snapshot;  // the metadata, repeated in every chunk
    req.set_total_bytes(total);
    req.set_format(static_cast<uint32_t>(source->format()));
    uint64_t offset = 0;
    bool last = false;
    bool stream_ok = true;
    while (!last) {
      std::string data;
      Status s = source->ReadChunk(offset, options_.snapshot_chunk_bytes, &data, &last);
      if (!s.ok()) {
        failure = "cannot read the snapshot: " + s.ToString();
      } else if (blocked()) {
        failure = "link cut by test fault injection";
      }
      if (!failure.empty()) {
        context->TryCancel();
        break;
      }
      req.set_offset(offset);
      offset += data.size();
      req.set_data(std::move(data));
      req.set_done(last);
      // Blocks while gRPC's flow control window is full: the follower's pace.
      if (!writer->Write(req)) {
        stream_ok = false;  // the stream broke; Finish() says why
        break;
      }
    }
    if (stream_ok && failure.empty()) writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (failure.empty() && !status.ok()) {
      failure = "InstallSnapshot failed (" + std::to_string(offset) + " of " +
                std::to_string(total) + " bytes handed to gRPC): " + GrpcStatusText(status);
    }
  }
  if (failure.empty()) {
    raft::Message r = raft::SnapshotResponseMessage(peer, self_id_, resp);
    const Status why = raft::CheckPeerMessage(r);
    if (why.ok()) {
      LOG(INFO) << "member " << self_id_ << " sent snapshot " << index << "/" << term << " ("
                << total << " bytes) to member " << peer << " in "
                << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()
                << " ms; it answered success=" << resp.success()
                << " match=" << resp.match_index();
    } else {
      failure = "malformed InstallSnapshot reply: " + why.message();
    }
    bool shutting_down;
    {
      MutexLock lock(&mu_);
      shutting_down = shut_down_;
      if (failure.empty()) transfer->reported = true;
    }
    if (failure.empty() && !shutting_down) on_response_(r);
  }
  bool shutting_down;
  {
    MutexLock lock(&mu_);
    if (!failure.empty() && !shut_down_) {
      LOG(WARNING) << "snapshot " << index << "/" << term << " to member " << peer
                   << " failed: " << failure << "; the core retries in "
                   << options_.snapshot_retry_ms << " ms";
      const auto until = Clock::now() + std::chrono::milliseconds(options_.snapshot_retry_ms);
      while (!shut_down_ && shutdown_cv_.WaitUntil(&mu_, until)) {
      }
    }
    shutting_down = shut_down_;
    if (!failure.empty()) transfer->reported = true;
  }
  if (!failure.empty() && !shutting_down) on_unreachable_(peer);
}

void PeerClient::Shutdown() {
  std::vector<std::shared_ptr<Transfer>> transfers;
  {
    MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (Call* call : inflight_) call->context.TryCancel();
    for (auto& [peer, slot] : streams_) slot.stream->Cancel();
    streams_cv_.Wait(&mu_, [this]() REQUIRES(mu_) { return open_streams_ == 0; });
    for (auto& [peer, t] : transfers_) {
      t->context->TryCancel();
      transfers.push_back(t);
    }
    transfers_.clear();
  }
  shutdown_cv_.SignalAll();
  for (auto& t : transfers) {
    if (t->thread.joinable()) t->thread.join();
  }
  for (auto& cq : cqs_) cq->Shutdown();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace raftkv
