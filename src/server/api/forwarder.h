// Forwarding: a follower answers a call that only the leader can serve
// (writes, transactions, sessions, lease calls, linearizable reads) by
// sending it to the leader itself and relaying the answer, so a client may
// use any member. The answer carries the leader's id and address in the
// trailers (raftkv-leader-id, raftkv-leader-addr) for clients that prefer to
// go direct; the leader's own trailers (raftkv-not-applied, ...) are copied.
//
// A forwarded call carries "raftkv-forwarded: <member id>" and is never
// forwarded again: a member that receives one and does not lead refuses it
// with FAILED_PRECONDITION and the hint, as without forwarding. The
// client's bearer token goes with the call; the channel to the leader uses
// the member's own TLS settings (its certificate, the cluster CA).
//
// Calls go out on one completion queue polled by one thread; Stop() cancels
// the calls in flight and returns once each has been answered.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/security.h"
#include "common/mutex.h"
#include "server/rpc/async_call.h"

namespace raftkv {

class RaftNode;

inline constexpr char kForwardedMetadataKey[] = "raftkv-forwarded";

struct ForwarderOptions {
  // Channel security of the member's own calls (its certificate, the CA).
  std::shared_ptr<const ChannelSecurity> security;
  // Cap of a forwarded call's deadline (and the deadline when the client set none).
  int max_request_timeout_ms = 10000;
};

class Forwarder {
 public:
  Forwarder(RaftNode* node, ForwarderOptions options);
  ~Forwarder();  // Stop()
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  // Sends `call` to the leader when this member is not the leader, knows
  // one, and the call was not forwarded already: true, and the call is
  // finished later with the leader's answer. False: answer it here (a
  // leader, no known leader, a forwarded call, or the forwarder stopped).
  // `method` is the method's name in Service ("Put" of KV); the full name
  // ("/raftkv.v1.KV/Put") is built only for a call that is forwarded. Call
  // it before the handler touches the request. A null `forwarder` forwards
  // nothing.
  template <class Service, class Req, class Resp>
  static bool MaybeForward(Forwarder* forwarder, UnaryCall<Req, Resp>* call, const char* method);

  // What the leader answered a request sent with ForwardRequest.
  template <class Resp>
  struct Answer {
    grpc::Status status;
    Resp response;
    uint64_t leader_id = 0;
    std::string leader_address;
    // The leader's raftkv-* trailers (its leader hint, raftkv-not-applied, ...).
    std::vector<std::pair<std::string, std::string>> trailers;
  };
  // Sends one request that arrived on `incoming` (a message of a stream) to
  // the leader's method `path` ("/raftkv.internal.Peer/RenewLease") with a
  // deadline of --max_request_timeout_ms, the client's token and the
  // forwarded marker: true, and `done` runs later on the forwarder's thread
  // with the leader's answer. False as MaybeForward.
  template <class Req, class Resp>
  bool ForwardRequest(const grpc::ServerContextBase& incoming, const std::string& path, const Req& request,
                      std::function<void(Answer<Resp>)> done);

  // The server is shutting down: forwards nothing new; calls in flight go on.
  void BeginStop();
  // Cancels the forwarded calls in flight and waits until every one has
  // been answered; later calls are answered locally.
  void Stop();

  // True if a leader other than this member is known.
  bool LeaderElsewhere() const;

  // Calls forwarded since start (for tests and metrics).
  uint64_t forwarded() const { return forwarded_.load(std::memory_order_relaxed); }

  // The full name of a method: MethodPath<KV>("Put") is "/raftkv.v1.KV/Put".
  template <class Service>
  static std::string MethodPath(const char* method) {
    return "/" + std::string(Service::service_full_name()) + "/" + method;
  }

  // True if the call came from another member's forwarder.
  static bool IsForwarded(const grpc::ServerContextBase& context);

 private:
  // One forwarded call in flight; deleted by the poll thread.
  struct Op : Tagged {
    Forwarder* forwarder = nullptr;
    grpc::ClientContext context;
    grpc::Status status;
    uint64_t leader_id = 0;
    std::string leader_address;
    // Held while the call is handed to gRPC (StartCall, Finish: inline code
    // that fills the reader's operations) and taken by Proceed before it
    // touches the op. The completion queue already orders the two, but
    // inside libgrpc, which ThreadSanitizer cannot see (as UnaryCall's
    // handoff_mu_).
    std::mutex handoff_mu;
  };
  template <class Req, class Resp>
  struct TypedOp;
  template <class Req, class Resp>
  struct CallbackOp;

  // MaybeForward once a leader elsewhere is known; `path` is the full name.
  template <class Req, class Resp>
  bool Forward(UnaryCall<Req, Resp>* call, const std::string& path);
  // The leader to forward to, with a channel to it; false when the call is
  // answered locally. Registers `context` as in flight on success, unless
  // `leader_down` is given and the channel to the leader is known down
  // (gRPC's TRANSIENT_FAILURE: a call would fail without being sent): then
  // *leader_down is set and nothing is registered.
  bool Target(const grpc::ServerContextBase& incoming, grpc::ClientContext* outgoing,
              uint64_t* leader_id, std::string* leader_address, std::shared_ptr<grpc::Channel>* channel,
              bool* leader_down = nullptr);
  // Answers `context`'s call for a leader known down: UNAVAILABLE with the
  // leader hint and "raftkv-not-applied" (nothing was sent, so nothing can
  // have been applied: a retry is safe).
  static grpc::Status LeaderDown(uint64_t leader_id, const std::string& leader_address,
                                 grpc::ServerContext* context);
  void Done(grpc::ClientContext* context);
  void Poll();
  // Copies the raftkv-* trailers of `from` and the leader hint to `to`.
  static void CopyTrailers(const grpc::ClientContext& from, uint64_t leader_id,
                           const std::string& leader_address, grpc::ServerContext* to);

  RaftNode* const node_;
  const ForwarderOptions options_;
  grpc::CompletionQueue cq_;
  std::thread poller_;
  std::atomic<uint64_t> forwarded_{0};

  Mutex mu_;
  CondVar idle_cv_;
  bool stopped_ GUARDED_BY(mu_) = false;
  std::set<grpc::ClientContext*> inflight_ GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ GUARDED_BY(mu_);  // by address
};

template <class Req, class Resp>
struct Forwarder::TypedOp final : Forwarder::Op {
  UnaryCall<Req, Resp>* call = nullptr;
  Resp response;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Resp>> reader;

  void Proceed(bool /*ok*/) override {
    { std::lock_guard<std::mutex> handed_off(handoff_mu); }
    CopyTrailers(context, leader_id, leader_address, &call->context());
    if (status.ok()) {
      call->Finish(response);
    } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
               status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      // The leader could not be reached: say so, with what the client
      // needs to retry (possibly elsewhere).
      call->FinishWithError(grpc::Status(
          status.error_code(), "forwarded to the leader (member " + std::to_string(leader_id) + " at " +
                                   leader_address + "): " + status.error_message()));
    } else {
      call->FinishWithError(status);
    }
    Forwarder* f = forwarder;
    grpc::ClientContext* ctx = &context;
    f->Done(ctx);  // before delete: Stop() waits for the answer, not the memory
    delete this;
  }
};

template <class Req, class Resp>
struct Forwarder::CallbackOp final : Forwarder::Op {
  Req request;
  Resp response;
  std::function<void(Answer<Resp>)> done;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Resp>> reader;

  void Proceed(bool /*ok*/) override {
    { std::lock_guard<std::mutex> handed_off(handoff_mu); }
    Answer<Resp> answer;
    answer.status = std::move(status);
    answer.response = std::move(response);
    answer.leader_id = leader_id;
    answer.leader_address = leader_address;
    for (const auto& [key, value] : context.GetServerTrailingMetadata()) {
      std::string k(key.data(), key.size());
      if (k.compare(0, 7, "raftkv-") == 0) answer.trailers.emplace_back(std::move(k), std::string(value.data(), value.size()));
    }
    Forwarder* f = forwarder;
    grpc::ClientContext* ctx = &context;
    auto callback = std::move(done);
    f->Done(ctx);
    delete this;
    callback(std::move(answer));
  }
};

template <class Req, class Resp>
bool Forwarder::ForwardRequest(const grpc::ServerContextBase& incoming, const std::string& path,
                               const Req& request, std::function<void(Answer<Resp>)> done) {
  auto op = std::make_unique<CallbackOp<Req, Resp>>();
  std::shared_ptr<grpc::Channel> channel;
  if (!Target(incoming, &op->context, &op->leader_id, &op->leader_address, &channel)) return false;
  op->forwarder = this;
  op->request = request;
  op->done = std::move(done);
  grpc::TemplatedGenericStub<Req, Resp> stub(channel);
  CallbackOp<Req, Resp>* raw = op.release();
  std::lock_guard<std::mutex> lock(raw->handoff_mu);
  TsanReleaseTag(raw);
  raw->reader = stub.PrepareUnaryCall(&raw->context, path, raw->request, &cq_);
  raw->reader->StartCall();
  raw->reader->Finish(&raw->response, &raw->status, raw);
  return true;
}

template <class Service, class Req, class Resp>
bool Forwarder::MaybeForward(Forwarder* forwarder, UnaryCall<Req, Resp>* call, const char* method) {
  // The leader's fast path: one atomic load.
  if (forwarder == nullptr || !forwarder->LeaderElsewhere()) return false;
  return forwarder->Forward(call, MethodPath<Service>(method));
}

template <class Req, class Resp>
bool Forwarder::Forward(UnaryCall<Req, Resp>* call, const std::string& path) {
  auto op = std::make_unique<TypedOp<Req, Resp>>();
  std::shared_ptr<grpc::Channel> channel;
  bool leader_down = false;
  if (!Target(call->context(), &op->context, &op->leader_id, &op->leader_address, &channel,
              &leader_down)) {
    return false;
  }
  if (leader_down) {
    call->FinishWithError(LeaderDown(op->leader_id, op->leader_address, &call->context()));
    return true;
  }
  op->forwarder = this;
  op->call = call;
  grpc::TemplatedGenericStub<Req, Resp> stub(channel);
  TypedOp<Req, Resp>* raw = op.release();
  std::lock_guard<std::mutex> lock(raw->handoff_mu);
  TsanReleaseTag(raw);
  raw->reader = stub.PrepareUnaryCall(&raw->context, path, call->request(), &cq_);
  raw->reader->StartCall();
  raw->reader->Finish(&raw->response, &raw->status, raw);
  return true;
}

}  // namespace raftkv
