// Tests of the metrics (node/metrics.h) and the /metrics endpoint
// (ops/metrics_endpoint.h): the text exposition format is checked by a
// strict parser of version 0.0.4 (exposition_parser.h), then the values;
// finally a real single-member node is scraped over HTTP.
#include "node/metrics.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/version.h"
#include "gtest/common/exposition_parser.h"
#include "gtest/common/raw_http.h"
#include "proto/internal.h"
#include "ops/metrics_endpoint.h"
#include "node/node.h"
#include "ops/process_metrics.h"
#include "server/rpc/server_metrics.h"
#include "gtest/common/fake_peers.h"
#include "gtest/common/service_test_util.h"

namespace raftkv {
namespace {

using namespace std::chrono_literals;
using testing_util::Exposition;
using testing_util::ParseExposition;
using testing_util::Value;

// ---------------------------------------------------------------------------

TEST(ExpositionTest, ParserRejectsBrokenText) {
  // The parser must be able to fail, or the rendering tests prove nothing.
  EXPECT_EQ(ParseExposition("# HELP a x\n# TYPE a gauge\na 1\n").error, "");
  for (const char* bad : {
           "a 1\n",                                         // no TYPE
           "# HELP a x\n# TYPE a gauge\na 1",               // no final newline
           "# HELP a x\n# TYPE a gauge\na{b=\"c} 1\n",      // unterminated
           "# HELP a x\n# TYPE a gauge\na{b=\"\\x\"} 1\n",  // bad escape
           "# HELP a x\n# TYPE a gauge\na one\n",           // value
           "# HELP a x\n# TYPE a counter\na 1\n",           // counter not *_total
           "# HELP a x\n# TYPE a gauge\na 1\na 2\n",        // repeated series
           "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
           "h_sum 1\nh_count 1\n",                          // not cumulative
           "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
           "h_sum 1\nh_count 3\n",                          // count != +Inf
       }) {
    EXPECT_NE(ParseExposition(bad).error, "") << "accepted: " << bad;
  }
}

TEST(ExpositionTest, EscapingAndValues) {
  EXPECT_EQ(ExpositionWriter::EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(ExpositionWriter::EscapeHelp("x\\y\nz\"q"), "x\\\\y\\nz\"q");
  EXPECT_EQ(ExpositionWriter::FormatValue(0), "0");
  EXPECT_EQ(ExpositionWriter::FormatValue(42), "42");
  EXPECT_EQ(ExpositionWriter::FormatValue(18446744073709551615.0), "1.8446744073709552e+19");
  EXPECT_EQ(ExpositionWriter::FormatValue(0.1), "0.1");
  EXPECT_EQ(ExpositionWriter::FormatValue(5e-05), "5e-05");
  EXPECT_EQ(ExpositionWriter::FormatValue(HUGE_VAL), "+Inf");
  EXPECT_EQ(ExpositionWriter::FormatValue(-HUGE_VAL), "-Inf");
  EXPECT_EQ(ExpositionWriter::FormatValue(std::nan("")), "NaN");

  ExpositionWriter w;
  w.Family("raftkv_test", "gauge", "Help with \\ and\nnewline.");
  const std::string nasty = "q\"uote \\back\nline";
  w.Sample("raftkv_test", {{"peer", nasty}, {"x", ""}}, 1.5);
  const Exposition e = ParseExposition(w.text());
  ASSERT_EQ(e.error, "") << w.text();
  EXPECT_EQ(e.help.at("raftkv_test"), "Help with \\\\ and\\nnewline.");
  EXPECT_EQ(Value(e, "raftkv_test{peer=\"q\\\"uote \\\\back\\nline\",x=\"\"}"), 1.5);
}

TEST(HistogramTest, BucketsAreInclusiveCumulativeAndEndWithInf) {
  Histogram h({10, 20, 40}, 10);  // shown as 1, 2, 4
  for (uint64_t v : {0, 10, 11, 20, 39, 40, 41, 1000}) h.Observe(v);
  const Histogram::Snapshot s = h.Collect();
  ASSERT_EQ(s.bounds, (std::vector<double>{1, 2, 4}));
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 4, 6, 8}));
  EXPECT_EQ(s.count, 8u);
  EXPECT_DOUBLE_EQ(s.sum, (0 + 10 + 11 + 20 + 39 + 40 + 41 + 1000) / 10.0);

  ExpositionWriter w;
  w.Family("raftkv_h", "histogram", "A histogram.");
  w.HistogramSamples("raftkv_h", {{"direction", "sent"}}, s);
  const Exposition e = ParseExposition(w.text());
  ASSERT_EQ(e.error, "") << w.text();
  EXPECT_EQ(Value(e, "raftkv_h_bucket{direction=\"sent\",le=\"1\"}"), 2);
  EXPECT_EQ(Value(e, "raftkv_h_bucket{direction=\"sent\",le=\"4\"}"), 6);
  EXPECT_EQ(Value(e, "raftkv_h_bucket{direction=\"sent\",le=\"+Inf\"}"), 8);
  EXPECT_EQ(Value(e, "raftkv_h_count{direction=\"sent\"}"), 8);
  EXPECT_DOUBLE_EQ(Value(e, "raftkv_h_sum{direction=\"sent\"}"), 116.1);
}

TEST(RateWindowTest, RateOverTheWindow) {
  RateWindow r(5s);
  const auto t0 = Clock::now();
  EXPECT_EQ(r.PerSecond(), 0);
  r.Sample(t0, 100);
  EXPECT_EQ(r.PerSecond(), 0);
  r.Sample(t0 + 1s, 300);
  EXPECT_DOUBLE_EQ(r.PerSecond(), 200);
  for (int i = 2; i <= 10; ++i) r.Sample(t0 + std::chrono::seconds(i), 300 + 10 * (i - 1));
  // Only the last 5 s count: 10 per second, not the early burst.
  EXPECT_DOUBLE_EQ(r.PerSecond(), 10);
}

NodeStatus LeaderStatus() {
  NodeStatus st;
  st.id = 1;
  st.role = raft::Role::kLeader;
  st.term = 7;
  st.commit_index = 95;
  st.applied_index = 94;
  st.leader_id = 1;
  st.last_log_index = 100;
  st.durable_index = 100;
  for (uint64_t id : {1, 2, 3}) {
    MemberInfo m;
    m.id = id;
    m.voter = true;
    m.match_index = id == 1 ? 100 : id == 2 ? 90 : 100;
    m.state = id == 1 ? "self" : "replicate";
    st.members.push_back(m);
  }
  return st;
}

TEST(RenderNodeMetricsTest, LeaderState) {
  NodeMetrics m;
  m.proposals = 1234;
  m.snapshots_taken = 2;
  m.OnSync(30us);
  m.OnSync(75us);
  m.OnSync(2ms);
  m.OnSync(5s);
  for (uint64_t n : {1, 3, 4096, 5000}) m.append_entries_sent.Observe(n);
  const std::string text = RenderNodeMetrics(LeaderStatus(), m, 12.5);
  const Exposition e = ParseExposition(text);
  ASSERT_EQ(e.error, "") << text;
  EXPECT_EQ(Value(e, "raftkv_role{role=\"leader\"}"), 1);
  EXPECT_EQ(Value(e, "raftkv_role{role=\"follower\"}"), 0);
  EXPECT_EQ(Value(e, "raftkv_role{role=\"candidate\"}"), 0);
  EXPECT_EQ(Value(e, "raftkv_role{role=\"precandidate\"}"), 0);
  EXPECT_EQ(Value(e, "raftkv_term"), 7);
  EXPECT_EQ(Value(e, "raftkv_member_id"), 1);
  EXPECT_EQ(Value(e, "raftkv_leader_id"), 1);
  EXPECT_EQ(Value(e, "raftkv_has_leader"), 1);
  EXPECT_EQ(Value(e, "raftkv_is_leader"), 1);
  EXPECT_EQ(Value(e, "raftkv_commit_index"), 95);
  EXPECT_EQ(Value(e, "raftkv_applied_index"), 94);
  EXPECT_EQ(Value(e, "raftkv_peer_match_index{peer=\"2\"}"), 90);
  EXPECT_EQ(Value(e, "raftkv_peer_match_index{peer=\"3\"}"), 100);
  EXPECT_EQ(e.series.count("raftkv_peer_match_index{peer=\"1\"}"), 0u) << "the leader itself";
  EXPECT_EQ(Value(e, "raftkv_peer_replication_lag_entries{peer=\"2\"}"), 10);
  EXPECT_EQ(Value(e, "raftkv_peer_replication_lag_entries{peer=\"3\"}"), 0);
  EXPECT_EQ(Value(e, "raftkv_config_members{kind=\"voter\"}"), 3);
  EXPECT_EQ(Value(e, "raftkv_proposals_total"), 1234);
  EXPECT_EQ(Value(e, "raftkv_proposals_per_second"), 12.5);
  EXPECT_EQ(Value(e, "raftkv_snapshots_taken_total"), 2);
  EXPECT_EQ(e.type.at("raftkv_log_fsync_duration_seconds"), "histogram");
  EXPECT_EQ(Value(e, "raftkv_log_fsync_duration_seconds_bucket{le=\"5e-05\"}"), 1);
  EXPECT_EQ(Value(e, "raftkv_log_fsync_duration_seconds_bucket{le=\"0.0001\"}"), 2);
  EXPECT_EQ(Value(e, "raftkv_log_fsync_duration_seconds_bucket{le=\"0.0025\"}"), 3);
  EXPECT_EQ(Value(e, "raftkv_log_fsync_duration_seconds_bucket{le=\"1\"}"), 3);
  EXPECT_EQ(Value(e, "raftkv_log_fsync_duration_seconds_bucket{le=\"+Inf\"}"), 4);
  EXPECT_EQ(Value(e, "raftkv_log_fsync_duration_seconds_count"), 4);
  EXPECT_DOUBLE_EQ(Value(e, "raftkv_log_fsync_duration_seconds_sum"), 5.002105);
  EXPECT_EQ(Value(e, "raftkv_append_entries_batch_entries_bucket{direction=\"sent\",le=\"1\"}"), 1);
  EXPECT_EQ(Value(e, "raftkv_append_entries_batch_entries_bucket{direction=\"sent\",le=\"4\"}"), 2);
  EXPECT_EQ(Value(e, "raftkv_append_entries_batch_entries_bucket{direction=\"sent\",le=\"4096\"}"), 3);
  EXPECT_EQ(Value(e, "raftkv_append_entries_batch_entries_count{direction=\"sent\"}"), 4);
  EXPECT_EQ(Value(e, "raftkv_append_entries_batch_entries_sum{direction=\"sent\"}"), 9100);
  EXPECT_EQ(Value(e, "raftkv_append_entries_batch_entries_count{direction=\"received\"}"), 0);
}

TEST(RenderNodeMetricsTest, FollowerExportsNoPeerSeries) {
  NodeStatus st = LeaderStatus();
  st.id = 2;
  st.role = raft::Role::kFollower;
  st.leader_id = 1;
  for (MemberInfo& m : st.members) {  // what GetStatus() gives a follower
    m.match_index = 0;
    m.state.clear();
  }
  NodeMetrics m;
  const Exposition e = ParseExposition(RenderNodeMetrics(st, m, 0));
  ASSERT_EQ(e.error, "");
  EXPECT_EQ(Value(e, "raftkv_role{role=\"follower\"}"), 1);
  EXPECT_EQ(Value(e, "raftkv_role{role=\"leader\"}"), 0);
  EXPECT_EQ(Value(e, "raftkv_has_leader"), 1);
  EXPECT_EQ(Value(e, "raftkv_is_leader"), 0);
  for (const auto& [series, value] : e.series) {
    EXPECT_NE(series.rfind("raftkv_peer_", 0), 0u) << series;
  }
  // The families are still declared (HELP/TYPE), just empty.
  EXPECT_EQ(e.type.at("raftkv_peer_match_index"), "gauge");
}


TEST(RenderNodeMetricsTest, NoLeaderKnown) {
  NodeStatus st = LeaderStatus();
  st.role = raft::Role::kCandidate;
  st.leader_id = 0;
  NodeMetrics m;
  const Exposition e = ParseExposition(RenderNodeMetrics(st, m, 0));
  ASSERT_EQ(e.error, "");
  EXPECT_EQ(Value(e, "raftkv_has_leader"), 0);
  EXPECT_EQ(Value(e, "raftkv_is_leader"), 0);
  // Without the extras: no per-RPC families, no process metrics.
  EXPECT_EQ(e.type.count("raftkv_grpc_requests_total"), 0u);
  EXPECT_EQ(e.type.count("process_open_fds"), 0u);
}

TEST(RenderNodeMetricsTest, BuildStoreDiskRpcAndProcess) {
  NodeStatus st = LeaderStatus();
  st.revision = 41;
  NodeMetrics m;
  m.log_bytes = 123456;
  m.snapshot_failures = 2;
  ServerMetrics server;
  RpcMethodMetrics* put = server.Method(RpcName{"KV", "Put"}, RpcMethodMetrics::Kind::kUnary);
  RpcMethodMetrics* watch = server.Method(RpcName{"Watch", "Watch"}, RpcMethodMetrics::Kind::kStream);
  server.Method(RpcName{"KV", "Get"}, RpcMethodMetrics::Kind::kUnary);  // never called
  put->Finished(grpc::StatusCode::OK, 300us);
  put->Finished(grpc::StatusCode::OK, 2ms);
  put->Finished(grpc::StatusCode::FAILED_PRECONDITION, 50us);
  watch->StreamStarted();
  watch->StreamStarted();
  watch->Finished(grpc::StatusCode::CANCELLED, 30s);
  ScrapeExtras x;
  x.keys = 7;
  x.leases = 3;
  x.saved_answer_bytes = 2048;
  x.watchers = 1;
  x.snapshot_bytes = 4096;
  x.store_bytes = 5 << 20;
  x.store_memtable_memory_bytes = 3 << 20;
  x.server = &server;
  ProcessStats p;
  p.cpu_seconds = 1.25;
  p.resident_bytes = 10 << 20;
  p.virtual_bytes = 100 << 20;
  p.open_fds = 12;
  p.max_fds = 1024;
  p.start_time_seconds = 1.7e9;
  x.process = p;
  const std::string text = RenderNodeMetrics(st, m, 0, x);
  const Exposition e = ParseExposition(text);
  ASSERT_EQ(e.error, "") << text;
  // The build: labels from common/version.h and the API's proto package.
  const std::string build = std::string("raftkv_build_info{version=\"") + Version() +
                            "\",git_commit=\"" + GitCommit() + "\",api=\"raftkv.v1\"}";
  EXPECT_EQ(Value(e, build), 1) << text;
  EXPECT_EQ(Value(e, "raftkv_revision"), 41);
  EXPECT_EQ(Value(e, "raftkv_keys"), 7);
  EXPECT_EQ(Value(e, "raftkv_leases"), 3);
  EXPECT_EQ(Value(e, "raftkv_session_saved_bytes"), 2048);
  EXPECT_EQ(Value(e, "raftkv_watchers"), 1);
  EXPECT_EQ(Value(e, "raftkv_log_bytes"), 123456);
  EXPECT_EQ(Value(e, "raftkv_snapshot_bytes"), 4096);
  EXPECT_EQ(Value(e, "raftkv_store_bytes"), 5 << 20);
  EXPECT_EQ(Value(e, "raftkv_store_memtable_memory_bytes"), 3 << 20);
  EXPECT_EQ(Value(e, "raftkv_snapshot_failures_total"), 2);
  // Per method and code; the OK series exists for every method, the others
  // once they occurred.
  EXPECT_EQ(Value(e, "raftkv_grpc_requests_total{service=\"KV\",method=\"Put\",code=\"OK\"}"), 2);
  EXPECT_EQ(Value(e, "raftkv_grpc_requests_total{service=\"KV\",method=\"Put\",code=\"FAILED_PRECONDITION\"}"), 1);
  EXPECT_EQ(Value(e, "raftkv_grpc_requests_total{service=\"KV\",method=\"Get\",code=\"OK\"}"), 0);
  EXPECT_EQ(e.series.count("raftkv_grpc_requests_total{service=\"KV\",method=\"Get\",code=\"UNAVAILABLE\"}"), 0u);
  EXPECT_EQ(Value(e, "raftkv_grpc_requests_total{service=\"Watch\",method=\"Watch\",code=\"CANCELLED\"}"), 1);
  EXPECT_EQ(Value(e, "raftkv_grpc_streams_started_total{service=\"Watch\",method=\"Watch\"}"), 2);
  EXPECT_EQ(e.series.count("raftkv_grpc_streams_started_total{service=\"KV\",method=\"Put\"}"), 0u);
  // Latency of unary calls only, every code included.
  EXPECT_EQ(Value(e, "raftkv_grpc_request_duration_seconds_bucket{service=\"KV\",method=\"Put\",le=\"0.0001\"}"), 1);
  EXPECT_EQ(Value(e, "raftkv_grpc_request_duration_seconds_bucket{service=\"KV\",method=\"Put\",le=\"0.0005\"}"), 2);
  EXPECT_EQ(Value(e, "raftkv_grpc_request_duration_seconds_bucket{service=\"KV\",method=\"Put\",le=\"0.0025\"}"), 3);
  EXPECT_EQ(Value(e, "raftkv_grpc_request_duration_seconds_count{service=\"KV\",method=\"Put\"}"), 3);
  EXPECT_DOUBLE_EQ(Value(e, "raftkv_grpc_request_duration_seconds_sum{service=\"KV\",method=\"Put\"}"), 0.00235);
  EXPECT_EQ(Value(e, "raftkv_grpc_request_duration_seconds_count{service=\"KV\",method=\"Get\"}"), 0);
  EXPECT_EQ(e.series.count("raftkv_grpc_request_duration_seconds_count{service=\"Watch\",method=\"Watch\"}"), 0u);
  // The process, under the client libraries' names.
  EXPECT_EQ(e.type.at("process_cpu_seconds_total"), "counter");
  EXPECT_EQ(Value(e, "process_cpu_seconds_total"), 1.25);
  EXPECT_EQ(Value(e, "process_resident_memory_bytes"), 10 << 20);
  EXPECT_EQ(Value(e, "process_virtual_memory_bytes"), 100 << 20);
  EXPECT_EQ(Value(e, "process_open_fds"), 12);
  EXPECT_EQ(Value(e, "process_max_fds"), 1024);
  EXPECT_EQ(Value(e, "process_start_time_seconds"), 1.7e9);
}

TEST(ServerMetricsTest, OneCounterSetPerMethodName) {
  EXPECT_EQ(RpcName::Of<KV>("Put").service, "KV");
  EXPECT_EQ(RpcName::Of<KV>("Put").method, "Put");
  EXPECT_EQ(RpcName::Of<Lease>("LeaseGrant").service, "Lease");
  EXPECT_EQ(RpcName::Of<Peer>("AppendEntries").service, "Peer");
  ServerMetrics server;
  RpcMethodMetrics* put = server.Method(RpcName{"KV", "Put"}, RpcMethodMetrics::Kind::kUnary);
  RpcMethodMetrics* get = server.Method(RpcName{"KV", "Get"}, RpcMethodMetrics::Kind::kUnary);
  RpcMethodMetrics* other_put = server.Method(RpcName{"Other", "Put"}, RpcMethodMetrics::Kind::kUnary);
  EXPECT_NE(put, get);
  EXPECT_NE(put, other_put);
  // A server registered again on the same node (a restart in a test) counts on.
  EXPECT_EQ(server.Method(RpcName{"KV", "Put"}, RpcMethodMetrics::Kind::kUnary), put);
  ASSERT_EQ(server.Methods().size(), 3u);
  EXPECT_EQ(server.Methods()[1], get);  // registration order

  put->Finished(grpc::StatusCode::UNAUTHENTICATED, 1ms);
  put->Finished(static_cast<grpc::StatusCode>(99), 1ms);  // not a gRPC code: UNKNOWN
  EXPECT_EQ(put->finished(grpc::StatusCode::UNAUTHENTICATED), 1u);
  EXPECT_EQ(put->finished(grpc::StatusCode::UNKNOWN), 1u);
  EXPECT_EQ(put->Latency().count, 2u);
  EXPECT_EQ(get->finished(grpc::StatusCode::OK), 0u);

  // The names are gRPC's own, in the order of grpc::StatusCode.
  EXPECT_STREQ(GrpcCodeName(grpc::StatusCode::OK), "OK");
  EXPECT_STREQ(GrpcCodeName(grpc::StatusCode::DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
  EXPECT_STREQ(GrpcCodeName(grpc::StatusCode::FAILED_PRECONDITION), "FAILED_PRECONDITION");
  EXPECT_STREQ(GrpcCodeName(grpc::StatusCode::UNAVAILABLE), "UNAVAILABLE");
  EXPECT_STREQ(GrpcCodeName(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_STREQ(GrpcCodeName(17), "UNKNOWN");
  EXPECT_STREQ(GrpcCodeName(-1), "UNKNOWN");

  // The watchers' count: from the server while it runs, 0 without one.
  EXPECT_EQ(server.Watchers(), 0u);
  server.SetWatcherCount([] { return size_t{5}; });
  EXPECT_EQ(server.Watchers(), 5u);
  server.SetWatcherCount(nullptr);
  EXPECT_EQ(server.Watchers(), 0u);
}

TEST(ServerMetricsTest, SyncCallRecorderCountsStartsAndEnds) {
  ServerMetrics server;
  RpcMethodMetrics* unary = server.Method(RpcName{"Admin", "ListMembers"}, RpcMethodMetrics::Kind::kUnary);
  RpcMethodMetrics* stream = server.Method(RpcName{"Lease", "LeaseKeepAlive"}, RpcMethodMetrics::Kind::kStream);
  {
    SyncCallRecorder call(unary);
    EXPECT_EQ(call.Done(grpc::Status::OK).error_code(), grpc::StatusCode::OK);
  }
  {
    SyncCallRecorder call(stream);
    EXPECT_EQ(stream->streams_started(), 1u);
    EXPECT_EQ(stream->finished(grpc::StatusCode::INVALID_ARGUMENT), 0u);
    const grpc::Status s = call.Done(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad id"));
    EXPECT_EQ(s.error_message(), "bad id");  // handed back unchanged
  }
  SyncCallRecorder(nullptr).Done(grpc::Status::OK);  // no metrics: nothing to count
  EXPECT_EQ(unary->finished(grpc::StatusCode::OK), 1u);
  EXPECT_EQ(unary->streams_started(), 0u);
  EXPECT_EQ(unary->Latency().count, 1u);
  EXPECT_EQ(stream->finished(grpc::StatusCode::INVALID_ARGUMENT), 1u);
  EXPECT_EQ(stream->Latency().count, 0u);  // no latency for streams
}

TEST(DirectoryBytesTest, SumsTheFilesOfOneDirectory) {
  testing_util::TempDir dir;
  EXPECT_EQ(DirectoryBytes(dir.path()), 0u);
  EXPECT_EQ(DirectoryBytes(dir.path() + "/missing"), 0u);
  auto write = [](const std::string& path, size_t bytes) {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const std::string data(bytes, 'x');
    ASSERT_EQ(std::fwrite(data.data(), 1, data.size(), f), data.size());
    std::fclose(f);
  };
  write(dir.path() + "/a", 1000);
  write(dir.path() + "/b.tmp", 24);
  ASSERT_EQ(::mkdir((dir.path() + "/sub").c_str(), 0755), 0);
  write(dir.path() + "/sub/c", 5000);  // not counted: one level only
  EXPECT_EQ(DirectoryBytes(dir.path()), 1024u);
}

// ---------------------------------------------------------------------------
// A real node, scraped over HTTP.
// ---------------------------------------------------------------------------

TEST(MetricsEndpointTest, SingleMemberNodeOverHttp) {
  testing_util::TempDir dir;
  NodeOptions options;
  options.id = 1;
  options.cluster.members.push_back(Member{1, "127.0.0.1:1"});
  options.data_dir = dir.path();
  options.core.tick_ms = 5;
  options.core.election_ticks = 5;
  options.core.heartbeat_ticks = 1;
  std::unique_ptr<RaftNode> node;
  ASSERT_TRUE(RaftNode::Open(options, &node).ok());
  testing_util::FakePeers peers;
  node->Start(&peers);
  ASSERT_TRUE(testing_util::WaitFor([&] { return node->GetStatus().role == raft::Role::kLeader; }));

  MetricsEndpoint endpoint(node.get(), nullptr, "127.0.0.1", 0);
  ASSERT_TRUE(endpoint.Start().ok());
  constexpr int kWrites = 5;
  for (int i = 0; i < kWrites; ++i) {
    Command cmd;
    cmd.set_op(Command::PUT);
    cmd.set_key("k" + std::to_string(i));
    cmd.set_value("v");
    std::promise<Outcome> done;
    node->Propose(cmd.SerializeAsString(), Clock::now() + 5s,
                  [&done](Outcome out) { done.set_value(std::move(out)); });
    ASSERT_TRUE(done.get_future().get().status.ok());
  }
  Exposition e;
  // The rate gauge is sampled every second: wait until it saw the writes.
  ASSERT_TRUE(testing_util::WaitFor(
      [&] {
        testing_util::RawResponse r = testing_util::HttpGet(endpoint.port(), "/metrics");
        if (!r.ok || r.status != 200) return false;
        EXPECT_EQ(r.headers["content-type"], "text/plain; version=0.0.4");
        e = ParseExposition(r.body);
        return e.error.empty() && e.series["raftkv_proposals_per_second"] > 0;
      },
      5s))
      << e.error;
  EXPECT_EQ(Value(e, "raftkv_role{role=\"leader\"}"), 1);
  EXPECT_EQ(Value(e, "raftkv_member_id"), 1);
  EXPECT_EQ(Value(e, "raftkv_leader_id"), 1);
  EXPECT_GE(Value(e, "raftkv_term"), 1);
  EXPECT_EQ(Value(e, "raftkv_proposals_total"), kWrites);
  EXPECT_GE(Value(e, "raftkv_commit_index"), kWrites);
  EXPECT_GE(Value(e, "raftkv_applied_index"), kWrites);
  EXPECT_GE(Value(e, "raftkv_applied_entries_total"), kWrites);
  EXPECT_EQ(Value(e, "raftkv_leader_changes_total"), 1);
  // Each write waited for its own fsync (nothing else to group with).
  EXPECT_GE(Value(e, "raftkv_log_fsync_duration_seconds_count"), kWrites);
  EXPECT_GT(Value(e, "raftkv_log_fsync_duration_seconds_sum"), 0);
  // No peers: no AppendEntries, no per-peer series besides none.
  EXPECT_EQ(Value(e, "raftkv_append_entries_batch_entries_count{direction=\"sent\"}"), 0);
  // The store and the disk, gathered at scrape time.
  EXPECT_EQ(Value(e, "raftkv_keys"), kWrites);
  EXPECT_EQ(Value(e, "raftkv_leases"), 0);
  EXPECT_EQ(Value(e, "raftkv_watchers"), 0);  // no gRPC server here
  EXPECT_GT(Value(e, "raftkv_log_bytes"), 0);
  EXPECT_EQ(Value(e, "raftkv_snapshot_bytes"), 0);
  EXPECT_EQ(Value(e, "raftkv_has_leader"), 1);
#if defined(__linux__)
  EXPECT_GT(Value(e, "process_open_fds"), 0);
  EXPECT_GT(Value(e, "process_resident_memory_bytes"), 0);
  EXPECT_GT(Value(e, "process_start_time_seconds"), 0);
#endif
  EXPECT_EQ(node->metrics().proposals.load(), static_cast<uint64_t>(kWrites));

  endpoint.Stop();
  node->Stop();
  // A proposal after Stop() is refused and counted as such.
  std::promise<Outcome> refused;
  node->Propose("x", Clock::now() + 1s, [&](Outcome out) { refused.set_value(std::move(out)); });
  EXPECT_FALSE(refused.get_future().get().status.ok());
  EXPECT_EQ(node->metrics().proposals_refused.load(), 1u);
}

}  // namespace
}  // namespace raftkv
