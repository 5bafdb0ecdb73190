// Tests of the cluster file parser (node/cluster_config.h).
#include "node/cluster_config.h"

#include <gtest/gtest.h>

#include <string>

#include "client/kv_client.h"
#include "gtest/common/service_test_util.h"

namespace raftkv {
namespace {

// Parses `text` expecting a failure; returns the error message.
std::string ParseError(const std::string& text, const std::string& source = "conf/cluster.conf") {
  ClusterConfig config;
  config.members.push_back(Member{99, "untouched:1"});
  Status s = ParseClusterConfig(text, source, &config);
  EXPECT_FALSE(s.ok()) << "expected a parse error for:\n" << text;
  // A failed parse leaves the output alone.
  EXPECT_EQ(config.members.size(), 1u);
  if (!config.members.empty()) {
    EXPECT_EQ(config.members[0].id, 99u);
  }
  return s.message();
}

TEST(ClusterConfigTest, ParsesMembersInFileOrder) {
  ClusterConfig config;
  Status s = ParseClusterConfig("3 10.0.0.3:7003\n1 10.0.0.1:7001\n2 host-b.example:7002\n",
                                "c.conf", &config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(config.members.size(), 3u);
  EXPECT_EQ(config.members[0].id, 3u);
  EXPECT_EQ(config.members[0].address, "10.0.0.3:7003");
  EXPECT_EQ(config.members[1].id, 1u);
  EXPECT_EQ(config.members[1].address, "10.0.0.1:7001");
  EXPECT_EQ(config.members[2].id, 2u);
  EXPECT_EQ(config.members[2].address, "host-b.example:7002");
  EXPECT_EQ(config.Ids(), (std::vector<uint64_t>{3, 1, 2}));
  ASSERT_NE(config.Find(2), nullptr);
  EXPECT_EQ(config.Find(2)->address, "host-b.example:7002");
  EXPECT_EQ(config.Find(4), nullptr);
  EXPECT_EQ(config.Find(0), nullptr);
}

TEST(ClusterConfigTest, AcceptsCommentsBlankLinesAndWhitespace) {
  const std::string text =
      "# raftkv cluster\n"
      "\n"
      "   \n"
      "\t# indented comment\n"
      "  1    127.0.0.1:7001   # the first member\n"
      "\t2\t127.0.0.1:7002\t\n"
      "3 127.0.0.1:7003#no space before the comment\n"
      "4 127.0.0.1:7004\r\n"  // CRLF line ending
      "# trailing comment without newline";
  ClusterConfig config;
  Status s = ParseClusterConfig(text, "conf/cluster.conf", &config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(config.members.size(), 4u);
  EXPECT_EQ(config.members[0].address, "127.0.0.1:7001");
  EXPECT_EQ(config.members[1].address, "127.0.0.1:7002");
  EXPECT_EQ(config.members[2].address, "127.0.0.1:7003");
  EXPECT_EQ(config.members[3].address, "127.0.0.1:7004");
  EXPECT_EQ(config.Ids(), (std::vector<uint64_t>{1, 2, 3, 4}));
}

TEST(ClusterConfigTest, LastLineWithoutNewline) {
  ClusterConfig config;
  ASSERT_TRUE(ParseClusterConfig("1 a:1\n2 b:2", "x", &config).ok());
  EXPECT_EQ(config.members.size(), 2u);
}

TEST(ClusterConfigTest, AcceptsIpv6) {
  ClusterConfig config;
  Status s = ParseClusterConfig("1 [::1]:7001\n2 [fe80::1]:7002\n", "v6.conf", &config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(config.members.size(), 2u);
  EXPECT_EQ(config.members[0].address, "[::1]:7001");
  EXPECT_EQ(config.members[1].address, "[fe80::1]:7002");
}

TEST(ClusterConfigTest, SingleMember) {
  ClusterConfig config;
  ASSERT_TRUE(ParseClusterConfig("7 localhost:65535\n", "one.conf", &config).ok());
  ASSERT_EQ(config.members.size(), 1u);
  EXPECT_EQ(config.members[0].id, 7u);
}

TEST(ClusterConfigTest, LargestIdAccepted) {
  ClusterConfig config;
  ASSERT_TRUE(ParseClusterConfig("18446744073709551615 h:1\n", "big.conf", &config).ok());
  EXPECT_EQ(config.members[0].id, 18446744073709551615ull);
}

TEST(ClusterConfigTest, RejectsMissingAddress) {
  const std::string msg = ParseError("1 127.0.0.1:7001\n\n2\n");
  EXPECT_CONTAINS(msg, "conf/cluster.conf:3:");
  EXPECT_CONTAINS(msg, "'2'");
  EXPECT_CONTAINS(msg, "<id> <host:port>");
}

TEST(ClusterConfigTest, RejectsExtraField) {
  const std::string msg = ParseError("1 127.0.0.1:7001 voter\n");
  EXPECT_CONTAINS(msg, "conf/cluster.conf:1:");
  EXPECT_CONTAINS(msg, "voter");
}

TEST(ClusterConfigTest, RejectsIdZero) {
  const std::string msg = ParseError("# header\n0 127.0.0.1:7001\n");
  EXPECT_CONTAINS(msg, "conf/cluster.conf:2:");
  EXPECT_CONTAINS(msg, "'0'");
  EXPECT_CONTAINS(msg, "positive");
}

TEST(ClusterConfigTest, RejectsNegativeId) {
  const std::string msg = ParseError("-1 127.0.0.1:7001\n");
  EXPECT_CONTAINS(msg, "conf/cluster.conf:1:");
  EXPECT_CONTAINS(msg, "'-1'");
  // strtoull would wrap "-0" to 0 and "-5" to 2^64-5: both must be refused.
  EXPECT_CONTAINS(ParseError("-5 h:1\n"), ":1:");
  EXPECT_CONTAINS(ParseError("-0 h:1\n"), ":1:");
}

TEST(ClusterConfigTest, RejectsNonNumericId) {
  EXPECT_CONTAINS(ParseError("one 127.0.0.1:7001\n"), "conf/cluster.conf:1: member id 'one'");
  EXPECT_CONTAINS(ParseError("1 a:1\n2x b:2\n"), "conf/cluster.conf:2:");
  EXPECT_CONTAINS(ParseError("1.5 a:1\n"), ":1:");
  EXPECT_CONTAINS(ParseError("0x10 a:1\n"), ":1:");
  // Out of range for uint64.
  EXPECT_CONTAINS(ParseError("18446744073709551616 a:1\n"), ":1:");
}

TEST(ClusterConfigTest, RejectsDuplicateId) {
  const std::string msg = ParseError("1 127.0.0.1:7001\n2 127.0.0.1:7002\n1 127.0.0.1:7003\n");
  EXPECT_CONTAINS(msg, "conf/cluster.conf:3:");
  EXPECT_CONTAINS(msg, "member id 1");
  EXPECT_CONTAINS(msg, "twice (also on line 1)");
}

TEST(ClusterConfigTest, RejectsDuplicateAddress) {
  const std::string msg = ParseError("1 127.0.0.1:7001\n\n2 127.0.0.1:7001\n");
  EXPECT_CONTAINS(msg, "conf/cluster.conf:3:");
  EXPECT_CONTAINS(msg, "127.0.0.1:7001");
  EXPECT_CONTAINS(msg, "twice (also on line 1, member 1)");
  // The same port on different hosts is fine (one member per machine).
  ClusterConfig config;
  ASSERT_TRUE(ParseClusterConfig("1 10.0.0.1:7001\n2 10.0.0.2:7001\n", "c", &config).ok());
  EXPECT_EQ(config.members.size(), 2u);
}

TEST(ClusterConfigTest, RejectsBadPorts) {
  struct Case {
    std::string address;
    std::string expect;  // part of the message
  };
  const Case cases[] = {
      {"127.0.0.1:0", "out of range"},     {"127.0.0.1:70000", "out of range"},
      {"127.0.0.1:65536", "out of range"}, {"127.0.0.1:abc", "not a number"},
      {"127.0.0.1:-1", "not a number"},    {"127.0.0.1:", "host:port"},
      {"127.0.0.1", "host:port"},          {":7001", "host:port"},
      {"127.0.0.1:99999999999999999999", "out of range"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.address);
    const std::string msg = ParseError("1 good:1\n2 " + c.address + "\n", "my.conf");
    EXPECT_CONTAINS(msg, "my.conf:2:");
    EXPECT_CONTAINS(msg, c.expect);
  }
}

TEST(ClusterConfigTest, RejectsEmptyConfig) {
  for (const std::string text : {"", "\n\n", "# only comments\n   # more\n\t\n"}) {
    SCOPED_TRACE("text: '" + text + "'");
    const std::string msg = ParseError(text, "conf/empty.conf");
    EXPECT_CONTAINS(msg, "conf/empty.conf");
    EXPECT_CONTAINS(msg, "no members");
  }
}

TEST(ClusterConfigTest, ErrorReportsFirstBadLine) {
  // Line 2 and line 4 are both wrong; the first is reported.
  const std::string msg = ParseError("1 a:1\n0 b:2\n3 c:3\n4\n");
  EXPECT_CONTAINS(msg, "conf/cluster.conf:2:");
}

TEST(ClusterConfigTest, LoadReadsFile) {
  testing_util::TempDir dir;
  const std::string path = dir.Join("cluster.conf");
  testing_util::WriteFileBytes(path, "# test\n1 127.0.0.1:7001\n2 127.0.0.1:7002\n");
  ClusterConfig config;
  Status s = LoadClusterConfig(path, &config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(config.Ids(), (std::vector<uint64_t>{1, 2}));
}

TEST(ClusterConfigTest, LoadErrorsNameThePath) {
  testing_util::TempDir dir;
  const std::string path = dir.Join("bad.conf");
  testing_util::WriteFileBytes(path, "1 127.0.0.1:7001\n1 127.0.0.1:7002\n");
  ClusterConfig config;
  Status s = LoadClusterConfig(path, &config);
  ASSERT_FALSE(s.ok());
  EXPECT_CONTAINS(s.message(), path + ":2:");
}

TEST(ClusterConfigTest, LoadMissingFileIsIOError) {
  testing_util::TempDir dir;
  const std::string path = dir.Join("does-not-exist.conf");
  ClusterConfig config;
  Status s = LoadClusterConfig(path, &config);
  ASSERT_FALSE(s.ok());
  EXPECT_FALSE(s.IsCorruption());
  EXPECT_CONTAINS(s.ToString(), "IO error");
  EXPECT_CONTAINS(s.message(), path + ": No such file or directory");
}

TEST(ParseEndpointTest, Accepts) {
  for (const std::string address :
       {"127.0.0.1:7001", "localhost:1", "host-a.example.com:65535", "[::1]:7001",
        "[fe80::1%eth0]:80", "0.0.0.0:8080"}) {
    const Status s = ParseEndpoint(address);
    EXPECT_TRUE(s.ok()) << address << ": " << s;
  }
}

TEST(ParseEndpointTest, Rejects) {
  struct Case {
    std::string address;
    std::string expect;
  };
  const Case cases[] = {
      {"", "host:port"},
      {"localhost", "host:port"},
      {"localhost:", "host:port"},
      {":7001", "host:port"},
      {"localhost:0", "out of range"},
      {"localhost:65536", "out of range"},
      {"localhost:70000", "out of range"},
      {"localhost:123456", "out of range"},
      {"localhost:abc", "not a number"},
      {"localhost:12a", "not a number"},
      {"localhost:+80", "not a number"},
      {"localhost:-80", "not a number"},
      {"localhost: 80", "not a number"},
      {"[::1:7001", "unbalanced"},
  };
  for (const Case& c : cases) {
    const Status s = ParseEndpoint(c.address);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << "'" << c.address << "'";
    EXPECT_CONTAINS(s.message(), c.expect) << "'" << c.address << "'";
  }
}

// "[v6]:port allowed" implies the host is either a name/IPv4 address or a
// bracketed, non-empty IPv6 address. These are not host:port for gRPC (an
// unbracketed "::1:7001" is an IPv6 address without a port), so they should
// be refused when the cluster file is read, not when the first peer dials.
TEST(ParseEndpointTest, RejectsMalformedIpv6Hosts) {
  for (const std::string address : {"[]:7001", "::1]:7001", "::1:7001", "fe80::1:80"}) {
    EXPECT_FALSE(ParseEndpoint(address).ok()) << "'" << address << "' was accepted";
  }
}

TEST(ParseEndpointTest, ErrorNamesTheInput) {
  EXPECT_CONTAINS(ParseEndpoint("nohostport").message(), "nohostport");
  EXPECT_CONTAINS(ParseEndpoint("h:99999").message(), "99999");
}

// etcd's URL form of an endpoint is accepted in a list (as etcdctl's
// --endpoints=http://127.0.0.1:2379): the scheme and trailing slashes go.
TEST(ParseEndpointTest, ListsAcceptEtcdStyleUrls) {
  std::vector<std::string> endpoints;
  ASSERT_TRUE(ParseEndpointList("http://127.0.0.1:2379, https://[::1]:7001/,10.0.0.1:7001", &endpoints).ok());
  EXPECT_EQ(endpoints, (std::vector<std::string>{"127.0.0.1:2379", "[::1]:7001", "10.0.0.1:7001"}));
  EXPECT_FALSE(ParseEndpointList("http://", &endpoints).ok());
  EXPECT_FALSE(ParseEndpointList("ftp://127.0.0.1:21", &endpoints).ok());
}

}  // namespace
}  // namespace raftkv
