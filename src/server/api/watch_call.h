// Watch.Watch on the completion queues: an asynchronous server stream fed by
// the WatchHub. One object per call, with one tag per kind of operation in
// flight (the request, a write, the finish, the "call done" notice); it
// deletes itself once every operation it started has completed and no
// completion-queue thread is still handling one.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>

#include <grpcpp/grpcpp.h>

#include "proto/internal.h"
#include "server/rpc/async_call.h"
#include "kv/kv_requests.h"
#include "server/api/watch_hub.h"

namespace raftkv {

struct WatchMethod {
  Watch::AsyncService* service = nullptr;
  WatchHub* hub = nullptr;
  RequestLimits limits;
  const CallAuthorizer* auth = nullptr;
  DrainGate* gate = nullptr;
  RpcMethodMetrics* metrics = nullptr;  // streams started and ended (null: not counted)
};

class WatchCall final : public WatchSink {
 public:
  static void Post(const WatchMethod* method, grpc::ServerCompletionQueue* cq);

  void Send(WatchResponse resp) override;
  void End(const grpc::Status& status, int64_t compact_revision) override;
  void Cut(const grpc::Status& status) override;

  // The client part of a call's peer ("ipv4:10.0.0.7:41234" -> "ipv4:10.0.0.7").
  static std::string ClientAddress(const std::string& peer);

 private:
  enum class Op { kRequest, kWrite, kFinish, kDone };
  struct OpTag final : Tagged {
    WatchCall* call = nullptr;
    Op op = Op::kRequest;
    void Proceed(bool ok) override { call->OnEvent(op, ok); }
  };

  WatchCall(const WatchMethod* method, grpc::ServerCompletionQueue* cq);
  void OnEvent(Op op, bool ok);
  void OnRequest(bool ok);
  // Starts Finish if the stream should end and no write is in flight.
  // Requires mu_. Returns whether the object may be deleted now.
  void MaybeFinishLocked();
  bool DeletableLocked() const;

  const WatchMethod* const method_;
  grpc::ServerCompletionQueue* const cq_;
  grpc::ServerContext context_;
  WatchRequest request_;
  grpc::ServerAsyncWriter<WatchResponse> writer_;
  OpTag request_tag_, write_tag_, finish_tag_, done_tag_;

  // Held by the constructor while it hands the call to gRPC, and taken
  // (empty) by every completion before it looks at the call: the order
  // gRPC gives the two, made visible to ThreadSanitizer (as in UnaryCall).
  // Not mu_: the replacement call is constructed under the drain gate, which
  // MaybeFinishLocked takes under mu_.
  std::mutex handoff_mu_;
  std::mutex mu_;
  bool started_ = false;        // the request arrived: a done notice will come
  std::chrono::steady_clock::time_point start_;  // when it arrived
  bool in_hub_ = false;         // registered and not yet removed/ended by the hub
  uint64_t id_ = 0;
  bool writing_ = false;
  std::optional<grpc::Status> end_;  // the stream is to end with this
  bool finishing_ = false;
  bool finished_ = false;
  bool done_ = false;           // the done notice came (call over or cancelled)
  // Threads inside OnEvent/OnRequest past their first lock: they touch the
  // object again after releasing mu_ (to call the hub), so whichever of them
  // leaves last, with everything else complete, deletes it.
  int handlers_ = 0;
};

}  // namespace raftkv
