#include "server/peer/append_stream.h"

#include <utility>

#include "raft/core/message.h"
#include "server/rpc/grpc_status.h"

namespace raftkv {

AppendStreamReactor::AppendStreamReactor(grpc::CallbackServerContext* context, const CallAuthorizer* auth,
                                         RaftNode* node, Check check, RpcMethodMetrics* metrics)
    : node_(node), check_(std::move(check)), metrics_(metrics), start_(std::chrono::steady_clock::now()) {
  if (metrics_ != nullptr) metrics_->StreamStarted();
  const grpc::Status refused = AuthorizeCall(auth, *context, Caller::kPeer);
  std::lock_guard<std::mutex> lock(mu_);
  if (!refused.ok()) {
    FinishLocked(refused);
    return;
  }
  ProceedLocked();
}

void AppendStreamReactor::OnReadDone(bool ok) {
  std::unique_lock<std::mutex> lock(mu_);
  reading_ = false;
  if (finished_) return;
  if (!ok) {  // the leader closed its side (or left): answer what was stepped, then end
    read_ended_ = true;
    return ProceedLocked();
  }
  if (grpc::Status bad = check_(request_); !bad.ok()) return FinishLocked(bad);
  raft::Message m = raft::AppendRequestMessage(&request_);
  if (Status why = raft::CheckPeerMessage(m); !why.ok()) return FinishLocked(ToGrpcStatus(why));
  ++pending_;
  // Stepped in the order read: the next read starts once this one is
  // handed to the node (which answers later, once durable).
  stepping_ = true;
  lock.unlock();
  node_->StepRequest(std::move(m), [this](const raft::Message* reply) { OnReply(reply); });
  lock.lock();
  stepping_ = false;
  ProceedLocked();
}

void AppendStreamReactor::OnReply(const raft::Message* reply) {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --pending_;
    if (!finished_) {
      if (reply == nullptr) {
        FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
      } else {
        answers_.push_back(reply->append_resp);
        ProceedLocked();
      }
    }
    last = done_ && pending_ == 0;
  }
  if (last) delete this;
}

void AppendStreamReactor::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  write_active_ = false;
  if (finished_) return;
  if (!ok) return FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the append stream broke"));
  ProceedLocked();
}

void AppendStreamReactor::OnCancel() {
  std::lock_guard<std::mutex> lock(mu_);
  FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the append stream was cancelled"));
}

void AppendStreamReactor::OnDone() {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    last = pending_ == 0;
  }
  if (last) delete this;
}

void AppendStreamReactor::ProceedLocked() {
  if (finished_) return;
  if (!write_active_ && !answers_.empty()) {
    writing_ = std::move(answers_.front());
    answers_.pop_front();
    write_active_ = true;
    StartWrite(&writing_);
  }
  if (!reading_ && !stepping_ && !read_ended_ && pending_ + answers_.size() < kMaxPending) {
    reading_ = true;
    StartRead(&request_);
  }
  if (read_ended_ && pending_ == 0 && answers_.empty() && !write_active_) FinishLocked(grpc::Status::OK);
}

void AppendStreamReactor::FinishLocked(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  if (metrics_ != nullptr) metrics_->Finished(status.error_code(), std::chrono::steady_clock::now() - start_);
  Finish(status);
}

}  // namespace raftkv
