// The load generator of the benchmark: unary KV calls issued through the
// asynchronous gRPC client API (PrepareAsync* on grpc::CompletionQueue).
//
//  - Connections: `n` channels to one server, each its own TCP connection
//    (GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL plus a distinct channel argument).
//  - RunLoad: `requests` calls, numbered 0..requests-1. Request n goes out on
//    connection n % conns and completion queue n % cq_num; cq_num queues are
//    each polled by threads_per_cq threads. At most `inflight` calls are
//    outstanding: the first `inflight` are started by the caller, and every
//    completion starts the next one from its polling thread (closed loop).
//  - Latency of a call: from just before it is started to the moment its
//    completion is taken off the queue. Only successful calls (status OK and
//    the expected answer) go into the latency histogram.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "bench/histogram.h"
#include "proto/internal.h"

namespace raftkv {
namespace bench {

class Connections {
 public:
  Connections(const std::string& target, int n);
  // Waits until every channel is connected. False (with *error) on timeout.
  bool WaitConnected(int timeout_ms, std::string* error);
  size_t size() const { return stubs_.size(); }
  KV::Stub* stub(size_t i) const { return stubs_[i % stubs_.size()].get(); }
  const std::string& target() const { return target_; }

 private:
  std::string target_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<KV::Stub>> stubs_;
};

// One call of a run. RunLoad sets `number`, the deadline and `start`, then
// calls Start(); the completion tag must be `this`.
class BenchCall {
 public:
  virtual ~BenchCall() = default;
  virtual void Start(KV::Stub* stub, grpc::CompletionQueue* cq) = 0;
  // Called when the call completed with status OK: whether the answer is the
  // expected one (a Get returned the written value, an Echo its payload...).
  virtual bool AnswerIsExpected() const = 0;

  grpc::ClientContext context;
  grpc::Status status;
  // Held by Start while it hands the call to gRPC, taken by RunLoad's poll
  // threads before they look at it (an ordering TSan cannot see inside the
  // uninstrumented libgrpc).
  std::mutex handoff_mu;
  uint64_t number = 0;
  std::chrono::steady_clock::time_point start;
};

// A BenchCall for one unary KV method.
template <typename Req, typename Resp>
class UnaryBenchCall : public BenchCall {
 public:
  using Prepare = std::unique_ptr<grpc::ClientAsyncResponseReader<Resp>> (KV::Stub::*)(
      grpc::ClientContext*, const Req&, grpc::CompletionQueue*);
  using Check = bool (*)(const UnaryBenchCall& call);

  UnaryBenchCall(Prepare prepare, Check check) : prepare_(prepare), check_(check) {}

  void Start(KV::Stub* stub, grpc::CompletionQueue* cq) override {
    std::lock_guard<std::mutex> handoff(handoff_mu);
    reader_ = (stub->*prepare_)(&context, request, cq);
    reader_->StartCall();
    reader_->Finish(&response, &status, this);
  }
  bool AnswerIsExpected() const override { return check_ == nullptr || check_(*this); }

  Req request;
  Resp response;
  std::string expected;  // for checks that compare against a known string

 private:
  Prepare prepare_;
  Check check_;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Resp>> reader_;
};

// Makes (but does not start) the call for request number n.
using CallFactory = std::function<std::unique_ptr<BenchCall>(uint64_t n)>;

struct LoadOptions {
  uint64_t requests = 0;
  int cq_num = 1;
  int threads_per_cq = 2;
  int inflight = 256;
  int timeout_ms = 5000;  // deadline of each call
  bool record_outcomes = false;  // fill LoadResult::succeeded
};

// Number of gRPC status codes (OK .. UNAUTHENTICATED).
inline constexpr int kNumStatusCodes = 17;

struct LoadResult {
  uint64_t sent = 0;
  uint64_t succeeded_count = 0;  // status OK and the expected answer
  uint64_t wrong_answer = 0;     // status OK but not the expected answer
  std::array<uint64_t, kNumStatusCodes> failed_by_code{};  // index = status code
  Histogram latency_ns;          // of the successful calls
  double seconds = 0;            // first start to last completion
  std::vector<uint8_t> succeeded;  // per request number, if record_outcomes

  uint64_t failed() const;  // sent - succeeded_count
};

// Runs one closed-loop load; returns when every call has completed.
LoadResult RunLoad(const Connections& connections, const LoadOptions& options,
                   const CallFactory& factory);

}  // namespace bench
}  // namespace raftkv
