#include "server/rpc/server_metrics.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace raftkv {

const char* GrpcCodeName(int code) {
  static const char* const kNames[kGrpcStatusCodes] = {
      "OK",                 "CANCELLED",         "UNKNOWN",        "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED",  "NOT_FOUND",         "ALREADY_EXISTS", "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",      "OUT_OF_RANGE",
      "UNIMPLEMENTED",      "INTERNAL",          "UNAVAILABLE",    "DATA_LOSS",
      "UNAUTHENTICATED"};
  return code >= 0 && code < kGrpcStatusCodes ? kNames[code] : "UNKNOWN";
}

std::vector<uint64_t> RequestBucketsNanos() {
  constexpr uint64_t kUs = 1000, kMs = 1000 * kUs, kS = 1000 * kMs;
  return {100 * kUs, 250 * kUs, 500 * kUs, 1 * kMs,   2500 * kUs, 5 * kMs,  10 * kMs, 25 * kMs,
          50 * kMs,  100 * kMs, 250 * kMs, 500 * kMs, 1 * kS,     2500 * kMs, 5 * kS, 10 * kS};
}

// ---------------------------------------------------------------------------
// RpcMethodMetrics
// ---------------------------------------------------------------------------

RpcMethodMetrics::RpcMethodMetrics(RpcName name, Kind kind)
    : name_(std::move(name)), kind_(kind), duration_(RequestBucketsNanos(), 1e9) {}

void RpcMethodMetrics::Finished(grpc::StatusCode code, std::chrono::nanoseconds elapsed) {
  int c = static_cast<int>(code);
  if (c < 0 || c >= kGrpcStatusCodes) c = grpc::StatusCode::UNKNOWN;
  finished_[c].fetch_add(1, std::memory_order_relaxed);
  if (kind_ == Kind::kUnary) {
    duration_.Observe(static_cast<uint64_t>(std::max<int64_t>(0, elapsed.count())));
  }
}

// ---------------------------------------------------------------------------
// ServerMetrics
// ---------------------------------------------------------------------------

RpcMethodMetrics* ServerMetrics::Method(const RpcName& name, RpcMethodMetrics::Kind kind) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& m : methods_) {
    if (m->name().service == name.service && m->name().method == name.method) return m.get();
  }
  methods_.push_back(std::make_unique<RpcMethodMetrics>(name, kind));
  return methods_.back().get();
}

std::vector<const RpcMethodMetrics*> ServerMetrics::Methods() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const RpcMethodMetrics*> out;
  out.reserve(methods_.size());
  for (const auto& m : methods_) out.push_back(m.get());
  return out;
}

void ServerMetrics::SetWatcherCount(std::function<size_t()> count) {
  std::lock_guard<std::mutex> lock(mu_);
  watchers_ = std::move(count);
}

size_t ServerMetrics::Watchers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watchers_ ? watchers_() : 0;
}

void ServerMetrics::Render(ExpositionWriter* w) const {
  // By service and method, for whoever reads a scrape by eye (registration
  // order scatters the services).
  std::vector<const RpcMethodMetrics*> methods = Methods();
  std::sort(methods.begin(), methods.end(),
            [](const RpcMethodMetrics* a, const RpcMethodMetrics* b) {
              return std::tie(a->name().service, a->name().method) <
                     std::tie(b->name().service, b->name().method);
            });
  w->Family("raftkv_grpc_requests_total", "counter",
            "gRPC calls this member answered, by service, method and status code (a stream "
            "counts when it ends; codes other than OK appear once they occurred).");
  for (const RpcMethodMetrics* m : methods) {
    ExpositionWriter::Labels labels = {
        {"service", m->name().service}, {"method", m->name().method}, {"code", ""}};
    for (int code = 0; code < kGrpcStatusCodes; ++code) {
      const uint64_t n = m->finished(code);
      if (n == 0 && code != 0) continue;
      labels.back().second = GrpcCodeName(code);
      w->Sample("raftkv_grpc_requests_total", labels, static_cast<double>(n));
    }
  }
  w->Family("raftkv_grpc_streams_started_total", "counter",
            "Streaming gRPC calls started on this member, by service and method (minus the ended "
            "ones in raftkv_grpc_requests_total: the streams open).");
  for (const RpcMethodMetrics* m : methods) {
    if (m->kind() != RpcMethodMetrics::Kind::kStream) continue;
    w->Sample("raftkv_grpc_streams_started_total",
              {{"service", m->name().service}, {"method", m->name().method}},
              static_cast<double>(m->streams_started()));
  }
  w->Family("raftkv_grpc_request_duration_seconds", "histogram",
            "Time from a unary gRPC call's arrival to its answer on this member, by service and "
            "method (every status code).");
  for (const RpcMethodMetrics* m : methods) {
    if (m->kind() != RpcMethodMetrics::Kind::kUnary) continue;
    w->HistogramSamples("raftkv_grpc_request_duration_seconds",
                        {{"service", m->name().service}, {"method", m->name().method}},
                        m->Latency());
  }
}

}  // namespace raftkv
