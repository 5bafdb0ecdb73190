// The asynchronous unary call of the completion-queue server, and the table
// that registers each method once.
//
// Every call is an object that moves through "waiting for a request" ->
// "handled" -> "finished". When a request arrives, the call posts its
// replacement, runs the authorization check of its method (call_auth.h: the
// one place that decides who may call what) and then the method's handler;
// handlers never block and may finish the call from any thread (writes finish
// from the apply thread once they commit). Each call is counted in its
// method's RpcMethodMetrics (server_metrics.h) when it finishes: status code
// and the time since its request arrived.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "server/rpc/call_auth.h"
#include "server/rpc/server_metrics.h"
#include "common/tsan_handoff.h"

namespace raftkv {

// Anything whose pointer travels through a completion queue as a tag.
class Tagged {
 public:
  virtual ~Tagged() = default;
  virtual void Proceed(bool ok) = 0;
};

// Set by the server; read by every call when it is re-posted. Calls re-post
// themselves and finish from completion-queue threads while the server shuts
// the queues down: they hold `mu` shared and check `draining`; the server
// sets it under the exclusive lock before shutting the queues down, so no
// operation is ever started on a shut-down queue.
struct DrainGate {
  std::shared_mutex mu;
  bool draining = false;  // guarded by mu
};

template <class Req, class Resp>
class UnaryCall;

// One registered method: how to ask gRPC for its next call, who may call it,
// and what handles it.
template <class Req, class Resp>
struct UnaryMethod {
  using Writer = grpc::ServerAsyncResponseWriter<Resp>;
  std::function<void(grpc::ServerContext*, Req*, Writer*, grpc::ServerCompletionQueue*, void*)> request;
  std::function<void(UnaryCall<Req, Resp>*)> handler;
  Caller caller = Caller::kClient;
  const CallAuthorizer* auth = nullptr;
  DrainGate* gate = nullptr;
  RpcMethodMetrics* metrics = nullptr;  // null: not counted
};

// One unary call of any method. Lifetime: created waiting for a request;
// when one arrives, posts its replacement and runs the handler; deleted when
// its Finish completes (or when the server shuts down before a request came).
template <class Req, class Resp>
class UnaryCall final : public Tagged {
 public:
  using Method = UnaryMethod<Req, Resp>;

  // `method` is owned by the server and outlives every call.
  static void Post(const Method* method, grpc::ServerCompletionQueue* cq) { new UnaryCall(method, cq); }

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
    std::shared_lock<std::shared_mutex> lock(method_->gate->mu);
    if (method_->gate->draining) {  // the queues are being shut down: start nothing new
      delete this;
      return;
    }
    if (method_->metrics != nullptr) start_ = std::chrono::steady_clock::now();
    Post(method_, cq_);
    grpc::Status refused = AuthorizeCall(method_->auth, context_, method_->caller);
    if (!refused.ok()) return FinishWithError(refused);
    method_->handler(this);  // may Finish (and so delete this) from any thread
  }

  grpc::ServerContext& context() { return context_; }
  Req& request() { return request_; }

  void Finish(const Resp& resp) {
    Count(grpc::StatusCode::OK);
    std::lock_guard<std::mutex> lock(handoff_mu_);
    finishing_ = true;
    writer_.Finish(resp, grpc::Status::OK, this);
  }
  void FinishWithError(const grpc::Status& status) {
    Count(status.error_code());
    std::lock_guard<std::mutex> lock(handoff_mu_);
    finishing_ = true;
    writer_.FinishWithError(status, this);
  }

 private:
  UnaryCall(const Method* method, grpc::ServerCompletionQueue* cq)
      : method_(method), cq_(cq), writer_(&context_) {
    TsanReleaseTag(this);  // the construction, for the poll thread's Proceed call
    std::lock_guard<std::mutex> lock(handoff_mu_);
    method_->request(&context_, &request_, &writer_, cq_, this);
  }

  // Before the finish is handed to gRPC: once it is, the call may be
  // deleted on a poll thread as soon as handoff_mu_ is released.
  void Count(grpc::StatusCode code) {
    if (method_->metrics == nullptr) return;
    method_->metrics->Finished(code, std::chrono::steady_clock::now() - start_);
  }

  const Method* method_;
  grpc::ServerCompletionQueue* cq_;
  grpc::ServerContext context_;
  Req request_;
  typename Method::Writer writer_;
  // Held while the call is handed to gRPC (request, Finish) and taken by
  // Proceed before it looks at the call. The completion queue already orders
  // the two, but inside the distribution's libgrpc, which ThreadSanitizer
  // cannot see; without this every call (writer_'s op set filled on the
  // finishing thread, deleted on a poll thread) was reported as a race.
  std::mutex handoff_mu_;
  bool finishing_ = false;
  std::chrono::steady_clock::time_point start_;  // the request's arrival
};

// The asynchronous methods of the server, each registered once with Add().
class AsyncMethods {
 public:
  // `metrics` (may be null: nothing counted) gets each method's counters.
  AsyncMethods(const CallAuthorizer* auth, DrainGate* gate, ServerMetrics* metrics = nullptr)
      : auth_(auth), gate_(gate), metrics_(metrics) {}

  // Registers a method of `service` (a generated AsyncService, or a service
  // with WithAsyncMethod_ methods): `request` is its generated RequestX
  // member function, `name` its labels in the metrics, `calls_per_cq` how
  // many calls wait for a request on each completion queue, `caller` who may
  // call it.
  template <class Req, class Resp, class Service, class RequestX>
  void Add(Service* service, RequestX request, const RpcName& name, Caller caller, int calls_per_cq,
           std::function<void(UnaryCall<Req, Resp>*)> handler) {
    auto method = std::make_unique<Registered<Req, Resp>>();
    method->spec.request = [service, request](grpc::ServerContext* context, Req* req,
                                              grpc::ServerAsyncResponseWriter<Resp>* writer,
                                              grpc::ServerCompletionQueue* cq, void* tag) {
      (service->*request)(context, req, writer, cq, cq, tag);
    };
    method->spec.handler = std::move(handler);
    method->spec.caller = caller;
    method->spec.auth = auth_;
    method->spec.gate = gate_;
    if (metrics_ != nullptr) {
      method->spec.metrics = metrics_->Method(name, RpcMethodMetrics::Kind::kUnary);
    }
    method->calls_per_cq = calls_per_cq;
    methods_.push_back(std::move(method));
  }

  // Posts every method's calls on `cq`.
  void PostAll(grpc::ServerCompletionQueue* cq) const {
    for (const auto& method : methods_) {
      for (int i = 0; i < method->calls_per_cq; ++i) method->Post(cq);
    }
  }

 private:
  struct Entry {
    virtual ~Entry() = default;
    virtual void Post(grpc::ServerCompletionQueue* cq) const = 0;
    int calls_per_cq = 1;
  };
  template <class Req, class Resp>
  struct Registered final : Entry {
    void Post(grpc::ServerCompletionQueue* cq) const override { UnaryCall<Req, Resp>::Post(&spec, cq); }
    UnaryMethod<Req, Resp> spec;
  };

  const CallAuthorizer* const auth_;
  DrainGate* const gate_;
  ServerMetrics* const metrics_;
  std::vector<std::unique_ptr<Entry>> methods_;
};

}  // namespace raftkv
