#include "server/api/forwarder.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>

#include "client/channel_args.h"
#include "node/node.h"
#include "common/thread_name.h"
#include "common/tsan_handoff.h"

namespace raftkv {

Forwarder::Forwarder(RaftNode* node, ForwarderOptions options) : node_(node), options_(std::move(options)) {
  poller_ = std::thread([this] {
    SetThreadName("raftkv-forward");
    Poll();
  });
}

Forwarder::~Forwarder() { Stop(); }

bool Forwarder::IsForwarded(const grpc::ServerContextBase& context) {
  return context.client_metadata().count(kForwardedMetadataKey) != 0;
}

bool Forwarder::LeaderElsewhere() const {
  const uint64_t leader = node_->KnownLeader();
  return leader != 0 && leader != node_->id();
}

bool Forwarder::Target(const grpc::ServerContextBase& incoming, grpc::ClientContext* outgoing,
                       uint64_t* leader_id, std::string* leader_address,
                       std::shared_ptr<grpc::Channel>* channel, bool* leader_down) {
  const uint64_t leader = node_->KnownLeader();
  if (leader == 0 || leader == node_->id() || IsForwarded(incoming)) return false;
  const std::string address = node_->AddressOf(leader);
  if (address.empty()) return false;
  auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(options_.max_request_timeout_ms);
  deadline = std::min(deadline, incoming.deadline());
  outgoing->set_deadline(deadline);
  for (const auto& [key, value] : incoming.client_metadata()) {
    if (key == "authorization") outgoing->AddMetadata("authorization", std::string(value.data(), value.size()));
  }
  outgoing->AddMetadata(kForwardedMetadataKey, std::to_string(node_->id()));
  MutexLock lock(&mu_);
  if (stopped_) return false;
  auto& ch = channels_[address];
  if (!ch) {
    // A connection of its own (a local subchannel pool): gRPC would
    // otherwise share one TCP connection between these client calls and
    // the member's Raft channel to the same peer (same target, same
    // arguments), putting forwarded traffic on the connection that carries
    // AppendEntries and snapshot streams.
    grpc::ChannelArguments args = RaftkvChannelArguments();
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    ch = MakeChannel(address, args, options_.security);
  }
  *channel = ch;
  *leader_id = leader;
  *leader_address = address;
  if (leader_down != nullptr &&
      ch->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    *leader_down = true;
    return true;
  }
  inflight_.insert(outgoing);
  forwarded_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

grpc::Status Forwarder::LeaderDown(uint64_t leader_id, const std::string& leader_address,
                                   grpc::ServerContext* context) {
  context->AddTrailingMetadata("raftkv-leader-id", std::to_string(leader_id));
  context->AddTrailingMetadata("raftkv-leader-addr", leader_address);
  context->AddTrailingMetadata("raftkv-not-applied", "1");
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "cannot reach the leader (member " + std::to_string(leader_id) + " at " +
                          leader_address +
                          "): the connection to it is down, so nothing was sent (not applied; "
                          "retry, here or at another member)");
}

void Forwarder::Done(grpc::ClientContext* context) {
  MutexLock lock(&mu_);
  inflight_.erase(context);
  if (inflight_.empty()) idle_cv_.SignalAll();
}

void Forwarder::CopyTrailers(const grpc::ClientContext& from, uint64_t leader_id,
                             const std::string& leader_address, grpc::ServerContext* to) {
  bool hint = false;
  for (const auto& [key, value] : from.GetServerTrailingMetadata()) {
    const std::string k(key.data(), key.size());
    if (k.compare(0, 7, "raftkv-") != 0) continue;
    if (k == "raftkv-leader-id" || k == "raftkv-leader-addr") hint = true;
    to->AddTrailingMetadata(k, std::string(value.data(), value.size()));
  }
  if (!hint) {  // the leader's own answer names no other leader: it is the one
    to->AddTrailingMetadata("raftkv-leader-id", std::to_string(leader_id));
    to->AddTrailingMetadata("raftkv-leader-addr", leader_address);
  }
}

void Forwarder::Poll() {
  void* tag = nullptr;
  bool ok = false;
  while (TsanUncheckedNext(&cq_, &tag, &ok)) {
    TsanAcquireTag(tag);
    static_cast<Tagged*>(tag)->Proceed(ok);
  }
}

void Forwarder::BeginStop() {
  MutexLock lock(&mu_);
  stopped_ = true;
}

void Forwarder::Stop() {
  {
    MutexLock lock(&mu_);
    stopped_ = true;
    for (grpc::ClientContext* c : inflight_) c->TryCancel();
    while (!inflight_.empty()) idle_cv_.Wait(&mu_);
  }
  if (poller_.joinable()) {
    cq_.Shutdown();
    poller_.join();
  }
  // Only now: the poll thread may still have been destroying the last op
  // (its context) when the wait above ended.
  MutexLock lock(&mu_);
  channels_.clear();
}

}  // namespace raftkv
