// The gRPC server's metrics: per method, the calls by status code and the
// latency of the unary ones (raftkv_grpc_requests_total,
// raftkv_grpc_request_duration_seconds, raftkv_grpc_streams_started_total),
// and the watchers of the running server. The list: doc/metrics.md.
//
// Each method's counters are created once, when the method is registered
// (AsyncMethods::Add, or a synchronous service's constructor); a call then
// updates its method's own atomics -- one relaxed fetch_add for its status
// code and two for the histogram, no lock, no lookup. Only registration and
// scrapes take the registry's lock.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>

#include "node/metrics.h"

namespace raftkv {

// The gRPC status codes, OK (0) .. UNAUTHENTICATED (16).
inline constexpr int kGrpcStatusCodes = 17;
// The code's name as gRPC spells it ("OK", "DEADLINE_EXCEEDED", ...);
// "UNKNOWN" for a number outside 0..16.
const char* GrpcCodeName(int code);

// Bounds 100 us .. 10 s (nanoseconds) for the calls' latencies: a
// linearizable read on an idle member takes well under a millisecond, a
// write one fsync or two, and --max_request_timeout_ms (10 s by default)
// ends the slowest.
std::vector<uint64_t> RequestBucketsNanos();

// A method's labels: RpcName::Of<KV>("Put") is {"KV", "Put"} (the service's
// full name, "raftkv.v1.KV", without its package).
struct RpcName {
  std::string service;
  std::string method;
  template <class Service>
  static RpcName Of(const char* method) {
    const std::string full = Service::service_full_name();
    return RpcName{full.substr(full.rfind('.') + 1), method};
  }
};

// The counters of one method. Safe to update and read from any thread.
class RpcMethodMetrics {
 public:
  enum class Kind { kUnary, kStream };
  RpcMethodMetrics(RpcName name, Kind kind);

  // A stream's request arrived.
  void StreamStarted() { streams_started_.fetch_add(1, std::memory_order_relaxed); }
  // A call ended with `code`, `elapsed` after its request arrived. The
  // latency is kept for unary methods only: a stream lasts as long as its
  // client wants, which says nothing about the server.
  void Finished(grpc::StatusCode code, std::chrono::nanoseconds elapsed);

  const RpcName& name() const { return name_; }
  Kind kind() const { return kind_; }
  uint64_t finished(int code) const { return finished_[code].load(std::memory_order_relaxed); }
  uint64_t streams_started() const { return streams_started_.load(std::memory_order_relaxed); }
  Histogram::Snapshot Latency() const { return duration_.Collect(); }

 private:
  const RpcName name_;
  const Kind kind_;
  std::array<std::atomic<uint64_t>, kGrpcStatusCodes> finished_{};
  std::atomic<uint64_t> streams_started_{0};
  Histogram duration_;
};

class ServerMetrics {
 public:
  // The counters of a method, created by the first call for its name (at
  // registration, never per call); later calls for the same name return the
  // same object, so a server restarted on the same node counts on. Valid as
  // long as this object.
  RpcMethodMetrics* Method(const RpcName& name, RpcMethodMetrics::Kind kind);
  // Every method, in registration order.
  std::vector<const RpcMethodMetrics*> Methods() const;

  // How to count the running server's watchers (its WatchHub), read at
  // scrape time; null (the server is gone or not started) counts 0.
  void SetWatcherCount(std::function<size_t()> count);
  size_t Watchers() const;

  // The families raftkv_grpc_requests_total (every method's OK series, and
  // the other codes once they occurred), raftkv_grpc_streams_started_total
  // (streaming methods) and raftkv_grpc_request_duration_seconds (unary
  // methods), labelled service, method (and code).
  void Render(ExpositionWriter* w) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<RpcMethodMetrics>> methods_;  // guarded by mu_
  std::function<size_t()> watchers_;                        // guarded by mu_
};

// Counts one call of a synchronous method (run on gRPC's thread pool, so
// not through UnaryCall): made when the handler starts, which counts a
// stream's start, and `return call.Done(status)` counts how it ended.
// `metrics` may be null (nothing counted).
class SyncCallRecorder {
 public:
  explicit SyncCallRecorder(RpcMethodMetrics* metrics)
      : metrics_(metrics), start_(std::chrono::steady_clock::now()) {
    if (metrics_ != nullptr && metrics_->kind() == RpcMethodMetrics::Kind::kStream) {
      metrics_->StreamStarted();
    }
  }
  grpc::Status Done(grpc::Status status) {
    if (metrics_ != nullptr) {
      metrics_->Finished(status.error_code(), std::chrono::steady_clock::now() - start_);
    }
    return status;
  }

 private:
  RpcMethodMetrics* const metrics_;
  const std::chrono::steady_clock::time_point start_;
};

}  // namespace raftkv
