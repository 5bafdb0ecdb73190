#include "server/api/watch_call.h"

#include <grpc/grpc.h>

#include <shared_mutex>
#include <string>
#include <utility>

#include "common/tsan_handoff.h"
#include "server/rpc/grpc_status.h"

namespace raftkv {

void WatchCall::Post(const WatchMethod* method, grpc::ServerCompletionQueue* cq) { new WatchCall(method, cq); }

WatchCall::WatchCall(const WatchMethod* method, grpc::ServerCompletionQueue* cq)
    : method_(method), cq_(cq), writer_(&context_) {
  for (auto [tag, op] : {std::pair{&request_tag_, Op::kRequest}, std::pair{&write_tag_, Op::kWrite},
                         std::pair{&finish_tag_, Op::kFinish}, std::pair{&done_tag_, Op::kDone}}) {
    tag->call = this;
    tag->op = op;
  }
  TsanReleaseTag(&request_tag_);
  std::lock_guard<std::mutex> lock(handoff_mu_);
  // Before the request: the done notice comes once the call is over, also
  // when the client cancels it (and only for a call that started).
  context_.AsyncNotifyWhenDone(&done_tag_);
  method_->service->RequestWatch(&context_, &request_, &writer_, cq_, cq_, &request_tag_);
}

void WatchCall::OnEvent(Op op, bool ok) {
  { std::lock_guard<std::mutex> construction_done(handoff_mu_); }
  if (op == Op::kRequest) return OnRequest(ok);
  bool remove = false;
  bool erase = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++handlers_;
    switch (op) {
      case Op::kWrite:
        writing_ = false;
        if (!ok && !end_) {  // the client is gone
          end_ = grpc::Status(grpc::StatusCode::CANCELLED, "watch stream broken");
          remove = in_hub_;
          in_hub_ = false;
        }
        break;
      case Op::kFinish:
        finished_ = true;
        break;
      case Op::kDone:
        done_ = true;
        if (!end_) {
          end_ = grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled by the client");
          remove = in_hub_;
          in_hub_ = false;
        }
        break;
      default:
        break;
    }
  }
  // The hub's lock is never taken with mu_ held (the hub calls Send/End
  // with its lock held, and those take mu_).
  if (remove) method_->hub->Remove(id_);
  if (op == Op::kWrite && ok) {
    std::unique_lock<std::mutex> lock(mu_);
    const bool live = in_hub_ && !end_;
    lock.unlock();
    if (live) method_->hub->SendDone(id_);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    --handlers_;
    MaybeFinishLocked();
    erase = DeletableLocked();
  }
  if (erase) delete this;
}

void WatchCall::OnRequest(bool ok) {
  if (!ok) {  // the server is shutting down before a call came: no done notice follows
    delete this;
    return;
  }
  {
    std::shared_lock<std::shared_mutex> gate(method_->gate->mu);
    if (!method_->gate->draining) Post(method_, cq_);
  }
  if (method_->metrics != nullptr) method_->metrics->StreamStarted();
  grpc::Status status = AuthorizeCall(method_->auth, context_, Caller::kClient);
  if (status.ok()) status = ToGrpcStatus(CheckKeyRange(request_.key(), request_.range_end(), method_->limits));
  if (status.ok() && request_.start_revision() < 0) {
    status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "start_revision must be >= 0 (0: from the next change)");
  }
  bool add = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = true;
    start_ = std::chrono::steady_clock::now();
    ++handlers_;
    id_ = method_->hub->NewId();
    add = status.ok() && !end_;  // not when the client already cancelled
    if (add) in_hub_ = true;     // set first: the hub may Send at once
  }
  if (add) {
    status = method_->hub->Add(id_, request_, this, ClientAddress(context_.peer()));
    bool cancelled_meanwhile = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!status.ok()) in_hub_ = false;
      // The done notice came during Add and its Remove may have run first.
      cancelled_meanwhile = status.ok() && !in_hub_;
    }
    if (cancelled_meanwhile) method_->hub->Remove(id_);
  }
  bool erase = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --handlers_;
    if (!status.ok() && !end_) end_ = status;
    MaybeFinishLocked();
    erase = DeletableLocked();
  }
  if (erase) delete this;
}

void WatchCall::Send(WatchResponse resp) {
  std::lock_guard<std::mutex> lock(mu_);
  if (end_ || writing_) return;
  writing_ = true;
  TsanReleaseTag(&write_tag_);
  writer_.Write(resp, &write_tag_);
}

void WatchCall::End(const grpc::Status& status, int64_t compact_revision) {
  std::lock_guard<std::mutex> lock(mu_);
  in_hub_ = false;
  if (end_) return;
  if (compact_revision > 0) {
    context_.AddTrailingMetadata("raftkv-compact-revision", std::to_string(compact_revision));
  }
  end_ = status;
  MaybeFinishLocked();
}

void WatchCall::Cut(const grpc::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  in_hub_ = false;
  if (end_) return;
  end_ = status;
  // The status goes out in the trailers, which HTTP/2 flow control does not
  // hold back; the write in flight then fails and the call finishes as usual.
  grpc_call_cancel_with_status(context_.c_call(), static_cast<grpc_status_code>(status.error_code()),
                               status.error_message().c_str(), nullptr);
  MaybeFinishLocked();
}

std::string WatchCall::ClientAddress(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  const size_t scheme = peer.find(':');
  if (colon == std::string::npos || colon == scheme) return peer;  // "unix:/path": no port
  return peer.substr(0, colon);
}

void WatchCall::MaybeFinishLocked() {
  if (!end_ || writing_ || finishing_ || in_hub_ || !started_) return;
  finishing_ = true;
  // Counted once per started stream, with the status it ends with (also
  // when the queues shut down and the status cannot be sent any more).
  if (method_->metrics != nullptr) {
    method_->metrics->Finished(end_->error_code(), std::chrono::steady_clock::now() - start_);
  }
  std::shared_lock<std::shared_mutex> gate(method_->gate->mu);
  if (method_->gate->draining) {  // the queues are shutting down: start nothing
    finished_ = true;
    return;
  }
  TsanReleaseTag(&finish_tag_);
  writer_.Finish(*end_, &finish_tag_);
}

bool WatchCall::DeletableLocked() const {
  return finished_ && !writing_ && (done_ || !started_) && handlers_ == 0;
}

}  // namespace raftkv
