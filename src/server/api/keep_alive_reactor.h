// One LeaseKeepAlive stream, of raftkv.v1's Lease service or etcd's (the
// same messages but for the header): read a request, renew the lease
// through LeaseService::Renew, write the answer, read the next. Deletes
// itself once gRPC is done with the stream and no renewal it started is
// still to answer.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "server/api/lease_service.h"

namespace raftkv {

template <class Req, class Resp>
class KeepAliveReactor final : public grpc::ServerBidiReactor<Req, Resp> {
 public:
  // Turns raftkv.v1's answer into the stream's.
  using Convert = std::function<void(LeaseKeepAliveResponse in, Resp* out)>;

  KeepAliveReactor(LeaseService* service, grpc::CallbackServerContext* context, Convert convert,
                   RpcMethodMetrics* metrics)
      : service_(service),
        context_(context),
        convert_(std::move(convert)),
        metrics_(metrics),
        start_(std::chrono::steady_clock::now()) {
    if (metrics_ != nullptr) metrics_->StreamStarted();
    grpc::Status refused = AuthorizeCall(service_->auth(), *context_, Caller::kClient);
    std::lock_guard<std::mutex> lock(mu_);
    if (!refused.ok()) {
      FinishLocked(refused);
      return;
    }
    this->StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (finished_) return;  // cancelled meanwhile
    if (!ok) return FinishLocked(grpc::Status::OK);  // the client ended its side (or left)
    if (request_.id() <= 0) {
      return FinishLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "lease ID must be > 0"));
    }
    ++holds_;
    const int64_t id = request_.id();
    lock.unlock();
    service_->Renew(*context_, id, [this](LeaseService::Renewal r) { OnRenewed(std::move(r)); });
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (!ok) return FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the keep-alive stream broke"));
    this->StartRead(&request_);
  }

  // The client cancelled, or the server is shutting down: finish now, not
  // when a renewal in flight returns (it may wait for its deadline).
  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the keep-alive stream was cancelled"));
  }

  void OnDone() override {
    bool last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      last = holds_ == 0;
    }
    if (last) delete this;
  }

 private:
  void OnRenewed(LeaseService::Renewal r) {
    bool last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --holds_;
      if (!finished_) {
        if (!r.status.ok()) {
          for (auto& [key, value] : r.trailers) context_->AddTrailingMetadata(key, value);
          FinishLocked(r.status);
        } else {
          convert_(std::move(r.response), &response_);
          this->StartWrite(&response_);
        }
      }
      last = done_ && holds_ == 0;
    }
    if (last) delete this;
  }

  void FinishLocked(const grpc::Status& status) {
    if (finished_) return;
    finished_ = true;
    if (metrics_ != nullptr) metrics_->Finished(status.error_code(), std::chrono::steady_clock::now() - start_);
    this->Finish(status);
  }

  LeaseService* const service_;
  grpc::CallbackServerContext* const context_;
  const Convert convert_;
  RpcMethodMetrics* const metrics_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  Req request_;    // written by gRPC between StartRead and OnReadDone
  Resp response_;  // read by gRPC between StartWrite and OnWriteDone
  bool finished_ = false;  // guarded by mu_: Finish was called
  bool done_ = false;      // guarded by mu_: OnDone came
  int holds_ = 0;          // guarded by mu_: renewals not yet answered
};

}  // namespace raftkv
