// The Prometheus endpoint of real raftkv-server processes (--metrics_port):
// a 3-member cluster takes writes, then every member is scraped over HTTP
// and the members' reports must agree with each other and with the writes.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/common/raw_http.h"
#include "gtest/integration/integration_test_util.h"

namespace raftkv {
namespace integration {
namespace {

using Samples = std::map<std::string, double>;

// The samples of a scrape ("name{labels}" -> value); comment lines are
// checked to be HELP or TYPE. *error says what is malformed.
Samples ParseSamples(const std::string& body, std::string* error) {
  Samples out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t eol = body.find('\n', pos);
    if (eol == std::string::npos) {
      *error = "no newline at the end";
      return out;
    }
    const std::string line = body.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) continue;
    const size_t sp = line.rfind(' ');
    char* end = nullptr;
    const double v = sp == std::string::npos ? 0 : std::strtod(line.c_str() + sp + 1, &end);
    if (sp == std::string::npos || line[0] == '#' || end != line.c_str() + line.size()) {
      *error = "malformed line '" + line + "'";
      return out;
    }
    out[line.substr(0, sp)] = v;
  }
  return out;
}

struct Scrape {
  bool ok = false;
  std::string error;
  Samples samples;
  double Get(const std::string& series) const {
    auto it = samples.find(series);
    return it == samples.end() ? -1 : it->second;
  }
  bool Has(const std::string& series) const { return samples.count(series) != 0; }
};

Scrape ScrapeMember(const ProcessCluster& cluster, int i) {
  Scrape s;
  testing_util::RawResponse r = testing_util::HttpGet(cluster.MetricsPort(i), "/metrics");
  if (!r.ok || r.status != 200) {
    s.error = "member " + std::to_string(i) + ": no 200 response: " + r.raw.substr(0, 300);
    return s;
  }
  if (r.headers["content-type"] != "text/plain; version=0.0.4") {
    s.error = "member " + std::to_string(i) + ": Content-Type " + r.headers["content-type"];
    return s;
  }
  s.samples = ParseSamples(r.body, &s.error);
  s.ok = s.error.empty();
  return s;
}

TEST_F(Integration, MetricsEndpointOfEveryMember) {
  cluster_ = std::make_unique<ProcessCluster>(3, FastTimeoutFlags());
  cluster_->EnableMetrics();
  std::string error;
  ASSERT_TRUE(cluster_->StartAll(&error)) << error;
  const uint64_t leader = cluster_->WaitForLeader(15000 * kTimeScale, &error);
  ASSERT_NE(leader, 0u) << error;
  for (int i = 1; i <= 3; ++i) ASSERT_GT(cluster().MetricsPort(i), 0);

  constexpr int kWrites = 300;
  std::vector<std::pair<std::string, std::string>> kvs;
  for (int i = 0; i < kWrites; ++i) kvs.emplace_back("metrics-" + std::to_string(i), "v");
  auto client = cluster().NewClient();
  std::vector<std::string> errors;
  const KvMap acked = PutAll(*client, kvs, 8, &errors);
  ASSERT_EQ(acked.size(), kvs.size()) << JoinLines(errors);

  // Followers learn the commit index with the next AppendEntries: poll until
  // every member reports all writes applied.
  std::vector<Scrape> scrapes(4);
  const bool caught_up = WaitUntil(
      [&] {
        for (int i = 1; i <= 3; ++i) {
          scrapes[i] = ScrapeMember(cluster(), i);
          if (!scrapes[i].ok || scrapes[i].Get("raftkv_applied_index") < kWrites) return false;
        }
        return true;
      },
      10000 * kTimeScale, 100);
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(scrapes[i].ok) << scrapes[i].error;
  ASSERT_TRUE(caught_up) << "applied index of members 1..3: "
                         << scrapes[1].Get("raftkv_applied_index") << ", "
                         << scrapes[2].Get("raftkv_applied_index") << ", "
                         << scrapes[3].Get("raftkv_applied_index");

  std::set<int> leaders;
  std::set<double> terms;
  for (int i = 1; i <= 3; ++i) {
    const Scrape& s = scrapes[i];
    SCOPED_TRACE("member " + std::to_string(i));
    EXPECT_EQ(s.Get("raftkv_member_id"), i);
    EXPECT_EQ(s.Get("raftkv_leader_id"), static_cast<double>(leader));
    double roles = 0;
    for (const char* role : {"follower", "precandidate", "candidate", "leader"}) {
      roles += s.Get(std::string("raftkv_role{role=\"") + role + "\"}");
    }
    EXPECT_EQ(roles, 1) << "exactly one role is 1";
    if (s.Get("raftkv_role{role=\"leader\"}") == 1) leaders.insert(i);
    terms.insert(s.Get("raftkv_term"));
    EXPECT_GE(s.Get("raftkv_commit_index"), kWrites);
    EXPECT_GE(s.Get("raftkv_applied_index"), kWrites);
    EXPECT_GE(s.Get("raftkv_applied_entries_total"), kWrites);
    // Every member syncs its log (the leader its own entries, followers
    // what they receive).
    EXPECT_GT(s.Get("raftkv_log_fsync_duration_seconds_count"), 0);
    EXPECT_EQ(s.Get("raftkv_log_fsync_duration_seconds_count"),
              s.Get("raftkv_log_fsync_duration_seconds_bucket{le=\"+Inf\"}"));
    EXPECT_GT(s.Get("raftkv_log_fsync_duration_seconds_sum"), 0);
  }
  EXPECT_EQ(leaders, std::set<int>{static_cast<int>(leader)});
  EXPECT_EQ(terms.size(), 1u) << "the members disagree on the term";

  const Scrape& l = scrapes[leader];
  EXPECT_GE(l.Get("raftkv_proposals_total"), kWrites);
  EXPECT_GT(l.Get("raftkv_append_entries_batch_entries_count{direction=\"sent\"}"), 0);
  EXPECT_GE(l.Get("raftkv_append_entries_batch_entries_sum{direction=\"sent\"}"), 2 * kWrites)
      << "every write goes to both followers";
  for (int i = 1; i <= 3; ++i) {
    const std::string peer = "{peer=\"" + std::to_string(i) + "\"}";
    if (static_cast<uint64_t>(i) == leader) {
      EXPECT_FALSE(l.Has("raftkv_peer_match_index" + peer)) << "the leader lists itself";
      continue;
    }
    ASSERT_TRUE(l.Has("raftkv_peer_match_index" + peer)) << "no match index of member " << i;
    EXPECT_GE(l.Get("raftkv_peer_match_index" + peer), kWrites);
    EXPECT_GE(l.Get("raftkv_peer_replication_lag_entries" + peer), 0);
    // A follower: received batches, no per-peer series, no proposals.
    const Scrape& f = scrapes[i];
    EXPECT_GT(f.Get("raftkv_append_entries_batch_entries_count{direction=\"received\"}"), 0);
    EXPECT_EQ(f.Get("raftkv_proposals_total"), 0);
    for (const auto& [series, value] : f.samples) {
      EXPECT_NE(series.rfind("raftkv_peer_", 0), 0u) << "member " << i << ": " << series;
    }
  }

  // The endpoint is only /metrics.
  testing_util::RawResponse r = testing_util::HttpGet(cluster().MetricsPort(1), "/");
  EXPECT_EQ(r.status, 404) << r.raw;
  r = testing_util::RawRequest(cluster().MetricsPort(1), "POST /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.status, 405) << r.raw;
}

// The snapshot counters: a follower that was down while the others wrote
// and compacted their logs past it gets the leader's snapshot.
TEST_F(Integration, MetricsCountSnapshots) {
  std::vector<std::string> flags = FastTimeoutFlags();
  flags.push_back("--snapshot_entries=200");
  flags.push_back("--segment_bytes=4096");  // small segments: compaction removes files
  cluster_ = std::make_unique<ProcessCluster>(3, flags);
  cluster_->EnableMetrics();
  std::string error;
  ASSERT_TRUE(cluster_->StartAll(&error)) << error;
  const uint64_t leader = cluster_->WaitForLeader(15000 * kTimeScale, &error);
  ASSERT_NE(leader, 0u) << error;
  const int lagging = leader == 3 ? 2 : 3;
  cluster().Kill(lagging);

  constexpr int kWrites = 700;
  std::vector<std::pair<std::string, std::string>> kvs;
  for (int i = 0; i < kWrites; ++i) kvs.emplace_back("snap-" + std::to_string(i), "v");
  auto client = cluster().NewClient();
  std::vector<std::string> errors;
  ASSERT_EQ(PutAll(*client, kvs, 8, &errors).size(), kvs.size()) << JoinLines(errors);
  // The leader's log no longer holds what the lagging member needs.
  Scrape l;
  ASSERT_TRUE(WaitUntil(
      [&] {
        l = ScrapeMember(cluster(), static_cast<int>(leader));
        return l.ok && l.Get("raftkv_snapshots_taken_total") >= 1 &&
               l.Get("raftkv_first_log_index") > 100;
      },
      20000 * kTimeScale, 100))
      << l.error << " snapshots taken " << l.Get("raftkv_snapshots_taken_total")
      << ", first log index " << l.Get("raftkv_first_log_index");
  EXPECT_EQ(l.Get("raftkv_snapshots_installed_total"), 0);

  ASSERT_TRUE(cluster().Restart(lagging));
  Scrape f;
  ASSERT_TRUE(WaitUntil(
      [&] {
        f = ScrapeMember(cluster(), lagging);
        return f.ok && f.Get("raftkv_applied_index") >= kWrites &&
               f.Get("raftkv_snapshots_installed_total") >= 1;
      },
      30000 * kTimeScale, 100))
      << f.error << " applied " << f.Get("raftkv_applied_index") << ", installed "
      << f.Get("raftkv_snapshots_installed_total");
  EXPECT_GE(f.Get("raftkv_snapshot_index"), 100);
  // Sent by whoever led then (the same leader unless an election happened).
  double sent = 0;
  for (int i = 1; i <= 3; ++i) {
    const Scrape s = ScrapeMember(cluster(), i);
    ASSERT_TRUE(s.ok) << s.error;
    sent += s.Get("raftkv_snapshots_sent_total");
  }
  EXPECT_GE(sent, 1);
}

TEST_F(Integration, MetricsFlagErrors) {
  cluster_ = std::make_unique<ProcessCluster>(1);
  const std::string scratch = cluster().NodeDir(1);
  const std::vector<std::string> base = {"--id=1", "--cluster_file=" + cluster().cluster_file(),
                                         "--data_dir=" + cluster().DataDir(1),
                                         "--listen_address=" + cluster().Endpoint(1)};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), base.begin(), base.end());
    return RunToCompletion(ServerBinary(), more, scratch, 20000 * kTimeScale);
  };
  RunResult r = with({"--metrics_port=70000"});
  EXPECT_TRUE(r.exited && r.exit_code == 2) << r.output;
  EXPECT_NE(r.output.find("--metrics_port must be"), std::string::npos) << r.output;
  r = with({"--metrics_port=9", "--metrics_address=not-an-ip"});
  EXPECT_TRUE(r.exited && r.exit_code == 2) << r.output;
  EXPECT_NE(r.output.find("not-an-ip"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace integration
}  // namespace raftkv
