// The gRPC server's per-method metrics (server/rpc/server_metrics.h) on a real
// server: every call counted once, by method and status code, when it
// finishes (unary calls through UnaryCall, the watch stream through
// WatchCall), the watchers' gauge, and the families as a scrape renders them.
#include "server/rpc/server_metrics.h"

#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <string>

#include "gtest/common/exposition_parser.h"
#include "ops/metrics_endpoint.h"
#include "gtest/server/server_fixture.h"

namespace raftkv {
namespace {

using testing_util::Exposition;
using testing_util::ParseExposition;
using testing_util::Value;

class ServerMetricsCallsTest : public ServerTest {
 protected:
  // The counters of a registered method (found by name, as a scrape does).
  const RpcMethodMetrics* Method(const std::string& service, const std::string& method) {
    for (const RpcMethodMetrics* m : server_->metrics().Methods()) {
      if (m->name().service == service && m->name().method == method) return m;
    }
    ADD_FAILURE() << "no method " << service << "." << method;
    static const RpcMethodMetrics none(RpcName{}, RpcMethodMetrics::Kind::kUnary);
    return &none;
  }
};

// --rpc_metrics=false: the asynchronous unary calls (KV, Lease, the peers'
// appends and votes, etcd's) are served but not counted, so that the cost of
// counting is measurable; streams still are.
TEST_F(ServerMetricsCallsTest, UnaryCallsUncountedWhenAskedSo) {
  Setup setup;
  setup.count_unary_calls = false;
  StartSingleLeader(setup);
  ASSERT_TRUE(Put("k", "v").ok());
  for (const RpcMethodMetrics* m : server_->metrics().Methods()) {
    EXPECT_NE(m->name().service, "KV") << m->name().method;
    EXPECT_NE(m->name().method, "AppendEntries");
  }
  EXPECT_EQ(Method("Watch", "Watch")->kind(), RpcMethodMetrics::Kind::kStream);
}

TEST_F(ServerMetricsCallsTest, EveryCallCountedByMethodAndCode) {
  StartSingleLeader();
  // Every KV, Lease and Raft method is registered before any call.
  for (const char* method : {"Put", "Get", "Delete", "CompareAndSwap", "Batch", "Status", "Echo",
                             "OpenSession", "CloseSession", "Range", "DeleteRange", "Txn"}) {
    EXPECT_EQ(Method("KV", method)->finished(grpc::StatusCode::OK), 0u) << method;
  }
  for (const char* method : {"LeaseGrant", "LeaseRevoke", "LeaseTimeToLive", "LeaseLeases"}) {
    EXPECT_EQ(Method("Lease", method)->kind(), RpcMethodMetrics::Kind::kUnary) << method;
  }
  EXPECT_EQ(Method("Lease", "LeaseKeepAlive")->kind(), RpcMethodMetrics::Kind::kStream);
  EXPECT_EQ(Method("Watch", "Watch")->kind(), RpcMethodMetrics::Kind::kStream);
  EXPECT_EQ(Method("Peer", "InstallSnapshot")->kind(), RpcMethodMetrics::Kind::kStream);
  Method("Peer", "TimeoutNow");

  const RpcMethodMetrics* put = Method("KV", "Put");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Put("k" + std::to_string(i), "v").ok());
  // Refused by validation: counted with its code.
  EXPECT_EQ(Put(std::string(kMaxKey + 1, 'x'), "v").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  GetResponse got;
  ASSERT_TRUE(Get("k1", &got).ok());
  EXPECT_EQ(put->finished(grpc::StatusCode::OK), 3u);
  EXPECT_EQ(put->finished(grpc::StatusCode::INVALID_ARGUMENT), 1u);
  EXPECT_EQ(put->Latency().count, 4u);
  EXPECT_GT(put->Latency().sum, 0);
  EXPECT_EQ(Method("KV", "Get")->finished(grpc::StatusCode::OK), 1u);

  // A peer request naming another member: counted under the Peer service.
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    AppendEntriesRequest req;
    req.set_leader_id(2);
    req.set_to(9);
    AppendEntriesResponse resp;
    EXPECT_EQ(raft_->AppendEntries(&ctx, req, &resp).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
  }
  EXPECT_EQ(Method("Peer", "AppendEntries")->finished(grpc::StatusCode::FAILED_PRECONDITION), 1u);

  // A watch stream: started, one watcher while it runs, counted CANCELLED
  // when the client cancels it.
  auto watch = Watch::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  const RpcMethodMetrics* watch_metrics = Method("Watch", "Watch");
  {
    grpc::ClientContext ctx;
    WatchRequest req;
    req.set_key("k");
    auto reader = watch->Watch(&ctx, req);
    WatchResponse created;
    ASSERT_TRUE(reader->Read(&created));
    EXPECT_EQ(watch_metrics->streams_started(), 1u);
    EXPECT_EQ(server_->metrics().Watchers(), 1u);
    ctx.TryCancel();
    while (reader->Read(&created)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  ASSERT_TRUE(WaitFor([&] { return watch_metrics->finished(grpc::StatusCode::CANCELLED) == 1; }));
  EXPECT_TRUE(WaitFor([&] { return server_->metrics().Watchers() == 0; }));
  EXPECT_EQ(watch_metrics->Latency().count, 0u);

  // As a scrape shows them.
  ScrapeExtras x;
  x.server = &server_->metrics();
  x.watchers = server_->metrics().Watchers();
  const std::string text = RenderNodeMetrics(node_->GetStatus(), node_->metrics(), 0, x);
  const Exposition e = ParseExposition(text);
  ASSERT_EQ(e.error, "") << text;
  EXPECT_EQ(Value(e, "raftkv_grpc_requests_total{service=\"KV\",method=\"Put\",code=\"OK\"}"), 3);
  EXPECT_EQ(Value(e, "raftkv_grpc_requests_total{service=\"KV\",method=\"Put\",code=\"INVALID_ARGUMENT\"}"), 1);
  EXPECT_EQ(Value(e, "raftkv_grpc_requests_total{service=\"Watch\",method=\"Watch\",code=\"CANCELLED\"}"), 1);
  EXPECT_EQ(Value(e, "raftkv_grpc_streams_started_total{service=\"Watch\",method=\"Watch\"}"), 1);
  EXPECT_EQ(Value(e, "raftkv_grpc_request_duration_seconds_count{service=\"KV\",method=\"Put\"}"), 4);
  EXPECT_EQ(Value(e, "raftkv_grpc_request_duration_seconds_count{service=\"KV\",method=\"Echo\"}"), 0);
}

}  // namespace
}  // namespace raftkv
