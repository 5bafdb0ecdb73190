// Tests of the metrics (service/metrics.h) and the /metrics endpoint
// (service/metrics_endpoint.h): the text exposition format is checked by a
// strict parser of version 0.0.4 (below), then the values; finally a real
// single-member node is scraped over HTTP.
#include "service/metrics.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/common/raw_http.h"
#include "proto/internal.h"
#include "service/metrics_endpoint.h"
#include "service/node.h"
#include "fake_peers.h"
#include "service_test_util.h"

namespace raftkv {
namespace {

using namespace std::chrono_literals;

// ---------------------------------------------------------------------------
// A strict parser of the text exposition format (what Prometheus accepts,
// and the conventions we promise: HELP and TYPE for every family before its
// samples, counters named *_total, cumulative histogram buckets ending with
// +Inf equal to _count).
// ---------------------------------------------------------------------------

struct Exposition {
  std::map<std::string, std::string> type;  // family -> type
  std::map<std::string, std::string> help;
  std::map<std::string, double> series;     // "name{a=\"b\",...}" (as written) -> value
  std::string error;                        // empty: valid
};

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool IsNameChar(char c) { return IsNameStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

bool ParseName(const std::string& s, size_t* pos, std::string* name) {
  const size_t start = *pos;
  if (*pos >= s.size() || !IsNameStart(s[*pos])) return false;
  while (*pos < s.size() && IsNameChar(s[*pos])) ++*pos;
  *name = s.substr(start, *pos - start);
  return true;
}

bool ParseValue(const std::string& text, double* v) {
  if (text == "+Inf") *v = HUGE_VAL;
  else if (text == "-Inf") *v = -HUGE_VAL;
  else if (text == "NaN") *v = std::nan("");
  else {
    if (text.empty()) return false;
    char* end = nullptr;
    *v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) return false;
  }
  return true;
}

std::string FamilyOf(const std::string& name, const std::map<std::string, std::string>& types) {
  if (types.count(name) != 0) return name;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string sfx = suffix;
    if (name.size() > sfx.size() && name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) {
      const std::string base = name.substr(0, name.size() - sfx.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return "";
}

Exposition ParseExposition(const std::string& text) {
  Exposition e;
  if (text.empty() || text.back() != '\n') {
    e.error = "does not end with a newline";
    return e;
  }
  std::set<std::string> finished;  // families whose samples ended
  std::string current;             // family of the previous line
  // Histograms: (family, labels without le) -> buckets in order.
  std::map<std::string, std::vector<std::pair<double, double>>> buckets;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    const size_t eol = text.find('\n', pos);
    const std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    auto fail = [&](const std::string& why) {
      e.error = "line " + std::to_string(line_no) + " '" + line + "': " + why;
      return e;
    };
    if (line.empty()) return fail("empty line");
    if (line[0] == '#') {
      const bool is_help = line.compare(0, 7, "# HELP ") == 0;
      const bool is_type = line.compare(0, 7, "# TYPE ") == 0;
      if (!is_help && !is_type) return fail("comment that is not HELP or TYPE");
      size_t p = 7;
      std::string name;
      if (!ParseName(line, &p, &name) || p >= line.size() || line[p] != ' ') {
        return fail("bad metric name");
      }
      const std::string rest = line.substr(p + 1);
      if (current != name && current != "") finished.insert(current);
      if (finished.count(name) != 0) return fail("family declared after its samples ended");
      current = name;
      if (is_help) {
        if (e.help.count(name) != 0) return fail("second HELP");
        if (e.type.count(name) != 0) return fail("HELP after TYPE");
        for (size_t i = 0; i < rest.size(); ++i) {
          if (rest[i] == '\\' && (i + 1 >= rest.size() || (rest[i + 1] != '\\' && rest[i + 1] != 'n'))) {
            return fail("bad escape in HELP");
          }
          if (rest[i] == '\\') ++i;
        }
        e.help[name] = rest;
      } else {
        if (e.type.count(name) != 0) return fail("second TYPE");
        if (rest != "counter" && rest != "gauge" && rest != "histogram") return fail("bad type");
        if (e.help.count(name) == 0) return fail("TYPE without HELP");
        if (rest == "counter" && (name.size() < 6 || name.compare(name.size() - 6, 6, "_total") != 0)) {
          return fail("counter not named *_total");
        }
        e.type[name] = rest;
      }
      continue;
    }
    size_t p = 0;
    std::string name;
    if (!ParseName(line, &p, &name)) return fail("bad sample name");
    const std::string family = FamilyOf(name, e.type);
    if (family.empty()) return fail("sample before its family's TYPE");
    if (family != current) return fail("sample of family " + family + " outside its group");
    std::string labels_key;  // labels without le
    std::string le;
    std::set<std::string> label_names;
    if (p < line.size() && line[p] == '{') {
      ++p;
      while (p < line.size() && line[p] != '}') {
        std::string lname;
        if (!ParseName(line, &p, &lname)) return fail("bad label name");
        if (!label_names.insert(lname).second) return fail("repeated label");
        if (line.compare(p, 2, "=\"") != 0) return fail("label without =\"");
        p += 2;
        std::string value;
        for (;;) {
          if (p >= line.size()) return fail("unterminated label value");
          const char c = line[p++];
          if (c == '"') break;
          if (c == '\\') {
            if (p >= line.size()) return fail("bad escape");
            const char n = line[p++];
            if (n == 'n') value += '\n';
            else if (n == '\\' || n == '"') value += n;
            else return fail("bad escape in a label value");
          } else {
            value += c;
          }
        }
        if (lname == "le") le = value;
        else labels_key += lname + "=" + value + ",";
        if (p < line.size() && line[p] == ',') ++p;
      }
      if (p >= line.size()) return fail("unterminated labels");
      ++p;
    }
    if (p >= line.size() || line[p] != ' ') return fail("no space before the value");
    double value;
    if (!ParseValue(line.substr(p + 1), &value)) return fail("bad value");
    const std::string series = line.substr(0, p);
    if (e.series.count(series) != 0) return fail("repeated series");
    e.series[series] = value;
    if (e.type[family] == "histogram") {
      const std::string key = family + "|" + labels_key;
      if (name == family + "_bucket") {
        double bound;
        if (le.empty() || !ParseValue(le, &bound)) return fail("bucket without a valid le");
        auto& b = buckets[key];
        if (!b.empty() && (bound <= b.back().first || value < b.back().second)) {
          return fail("buckets not ascending or not cumulative");
        }
        b.emplace_back(bound, value);
      } else if (!le.empty()) {
        return fail("le on a non-bucket sample");
      } else if (name == family + "_count") {
        auto& b = buckets[key];
        if (b.empty() || !std::isinf(b.back().first) || b.back().second != value) {
          return fail("_count differs from the +Inf bucket, or no +Inf bucket");
        }
      }
    }
  }
  return e;
}

double Value(const Exposition& e, const std::string& series) {
  auto it = e.series.find(series);
  if (it == e.series.end()) {
    ADD_FAILURE() << "no series " << series;
    return -1;
  }
  return it->second;
}

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
  for (const auto& [series, value] : e.series) {
    EXPECT_NE(series.rfind("raftkv_peer_", 0), 0u) << series;
  }
  // The families are still declared (HELP/TYPE), just empty.
  EXPECT_EQ(e.type.at("raftkv_peer_match_index"), "gauge");
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

  MetricsEndpoint endpoint(node.get(), "127.0.0.1", 0);
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
