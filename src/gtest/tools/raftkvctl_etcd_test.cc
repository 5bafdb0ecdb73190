// tools/raftkvctl_etcd.h: etcdctl's habits in raftkvctl: Go durations,
// where the endpoints come from, https endpoints without a CA, "did you
// mean", txn -i and etcdctl's sizes.
#include "tools/raftkvctl_etcd.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace raftkv {
namespace ctl {
namespace {

// The milliseconds of a duration that must parse.
int64_t Ms(const std::string& text) {
  int64_t ms = -1;
  std::string error;
  EXPECT_TRUE(ParseDurationMs("--command-timeout", text, &ms, &error)) << text << ": " << error;
  return ms;
}

// The error of a duration that must be refused ("" if it was accepted).
std::string DurationError(const std::string& text) {
  int64_t ms = 0;
  std::string error;
  if (ParseDurationMs("--dial-timeout", text, &ms, &error)) return "";
  return error;
}

TEST(RaftkvctlDuration, GoSyntax) {
  EXPECT_EQ(Ms("500ms"), 500);
  EXPECT_EQ(Ms("5s"), 5000);
  EXPECT_EQ(Ms("1m"), 60000);
  EXPECT_EQ(Ms("1h"), 3600000);
  EXPECT_EQ(Ms("1m30s"), 90000);
  EXPECT_EQ(Ms("1.5s"), 1500);
  EXPECT_EQ(Ms(".5s"), 500);
  EXPECT_EQ(Ms("2s500ms"), 2500);
  EXPECT_EQ(Ms("+3s"), 3000);
  EXPECT_EQ(Ms("0"), 0);
  EXPECT_EQ(Ms("0s"), 0);
  // Below a millisecond rounds up: a positive duration stays positive.
  EXPECT_EQ(Ms("1500us"), 2);
  EXPECT_EQ(Ms("1\xC2\xB5s"), 1);  // µs
  EXPECT_EQ(Ms("1ns"), 1);
}

TEST(RaftkvctlDuration, BadInputIsNamed) {
  EXPECT_EQ(DurationError("5"), "--dial-timeout takes a duration such as 500ms, 5s or 1m: \"5\" has no unit");
  EXPECT_EQ(DurationError(""), "--dial-timeout takes a duration such as 500ms, 5s or 1m, not an empty value");
  EXPECT_EQ(DurationError("-1s"), "--dial-timeout must not be negative, not \"-1s\"");
  EXPECT_EQ(DurationError("5 s"), "--dial-timeout takes a duration such as 500ms, 5s or 1m, not \"5 s\"");
  EXPECT_NE(DurationError("5sec"), "");
  EXPECT_NE(DurationError("s"), "");
  EXPECT_NE(DurationError("."), "");
  EXPECT_NE(DurationError("1.s."), "");
  EXPECT_NE(DurationError("ms5"), "");
  EXPECT_EQ(DurationError("1000h"), "--dial-timeout is at most 24 days (576h), not \"1000h\"");
  EXPECT_EQ(DurationError("576h"), "");
}

TEST(RaftkvctlEndpoints, FlagThenRaftkvThenEtcdctlVariable) {
  const std::string def = "127.0.0.1:7001";
  EndpointChoice c = ChooseEndpoints(true, "a:1", "b:2", "c:3");
  EXPECT_EQ(c.list, "a:1");
  EXPECT_EQ(c.source, "--endpoints");
  c = ChooseEndpoints(false, def, "b:2", "c:3");
  EXPECT_EQ(c.list, "b:2");
  EXPECT_EQ(c.source, "RAFTKV_ENDPOINTS");
  c = ChooseEndpoints(false, def, nullptr, "http://c:3,http://d:4");
  EXPECT_EQ(c.list, "http://c:3,http://d:4");
  EXPECT_EQ(c.source, "ETCDCTL_ENDPOINTS");
  c = ChooseEndpoints(false, def, "", "c:3");  // an empty variable does not count
  EXPECT_EQ(c.source, "ETCDCTL_ENDPOINTS");
  c = ChooseEndpoints(false, def, nullptr, "");
  EXPECT_EQ(c.list, def);
  EXPECT_EQ(c.source, "--endpoints");
}

TEST(RaftkvctlEndpoints, HttpsNeedsACa) {
  std::string error;
  EXPECT_TRUE(CheckEndpointSchemes("http://a:1,b:2", false, "--endpoints", &error));
  EXPECT_TRUE(CheckEndpointSchemes("https://a:1", true, "--endpoints", &error));
  EXPECT_FALSE(CheckEndpointSchemes("http://a:1, https://b:2", false, "ETCDCTL_ENDPOINTS", &error));
  EXPECT_EQ(error,
            "ETCDCTL_ENDPOINTS: https://b:2 is an https endpoint but no CA certificate was given: "
            "pass --cacert=FILE (or --tls_ca_file) to connect with TLS");
}

TEST(RaftkvctlDidYouMean, EditDistance) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("put", "put"), 0u);
  EXPECT_EQ(EditDistance("pt", "put"), 1u);
  EXPECT_EQ(EditDistance("gte", "get"), 1u);  // a transposition counts once
  EXPECT_EQ(EditDistance("membr", "member"), 1u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
}

TEST(RaftkvctlDidYouMean, ClosestCommandOrFlag) {
  const std::vector<std::string> commands = {"put", "get", "del", "txn", "watch", "lease",
                                             "member", "move-leader", "transfer-leader", "snapshot"};
  EXPECT_EQ(ClosestName("pt", commands), "put");
  EXPECT_EQ(ClosestName("gte", commands), "get");
  EXPECT_EQ(ClosestName("delete", commands), "");  // 3 edits from del: too far for 6 letters
  EXPECT_EQ(ClosestName("membr", commands), "member");
  EXPECT_EQ(ClosestName("move-leadr", commands), "move-leader");
  EXPECT_EQ(ClosestName("snap", commands), "snapshot");  // the start of one command
  EXPECT_EQ(ClosestName("frobnicate", commands), "");
  EXPECT_EQ(ClosestName("xyz", commands), "");
  EXPECT_EQ(ClosestName("put", commands), "");  // itself is no suggestion
  const std::vector<std::string> flags = {"prefix", "prev-kv", "from-key", "timeout_ms",
                                          "command-timeout", "dial-timeout", "tls_ca_file"};
  EXPECT_EQ(ClosestName("prefx", flags), "prefix");
  EXPECT_EQ(ClosestName("from_key", flags), "from-key");
  EXPECT_EQ(ClosestName("comand-timeout", flags), "command-timeout");
  EXPECT_EQ(ClosestName("timeout", flags), "timeout_ms");
  EXPECT_EQ(ClosestName("tls_ca", flags), "tls_ca_file");
  EXPECT_EQ(ClosestName("pre", flags), "");  // the start of two
  EXPECT_EQ(DidYouMean("prefx", flags, "--", ""), " (did you mean --prefix?)");
  EXPECT_EQ(DidYouMean("pt", commands), " (did you mean \"put\"?)");
  EXPECT_EQ(DidYouMean("frobnicate", commands), "");
}

TEST(RaftkvctlDidYouMean, EtcdctlCommandsPointToEtcdctl) {
  for (const char* cmd : {"defrag", "alarm", "lock", "elect", "make-mirror", "check"}) {
    const std::string hint = EtcdctlOnlyCommand(cmd);
    EXPECT_NE(hint.find("use etcdctl: raftkv serves etcd's API"), std::string::npos) << hint;
    EXPECT_EQ(hint.find(std::string(cmd) + " is an etcdctl command"), 0u) << hint;
  }
  EXPECT_NE(EtcdctlOnlyCommand("compaction").find("use etcdctl"), std::string::npos);
  EXPECT_NE(EtcdctlOnlyCommand("user").find("no users or roles"), std::string::npos);
  EXPECT_EQ(EtcdctlOnlyCommand("put"), "");
  EXPECT_EQ(EtcdctlOnlyCommand("frobnicate"), "");
}

// etcdctl's three prompts, as txn -i prints them.
constexpr char kAllPrompts[] =
    "compares:\nsuccess requests (get, put, del):\nfailure requests (get, put, del):\n";

// Reads `text` as txn -i does: the transaction and the prompts printed.
Status ReadInteractive(std::istream& in, TxnRequest* txn, std::string* prompts) {
  std::ostringstream out;
  Status s = ReadTxnSections(in, &out, txn);
  *prompts = out.str();
  return s;
}

TEST(RaftkvctlTxnInteractive, PromptsBeforeEachSection) {
  std::istringstream in(
      "value(\"k\") = \"v\"\nmod(\"k\") > \"5\"\n\nput k v2\nget k --prefix\n\ndel k\n\n"
      "this line is never read\n");
  TxnRequest txn;
  std::string prompts;
  Status s = ReadInteractive(in, &txn, &prompts);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(prompts, kAllPrompts);
  ASSERT_EQ(txn.compare_size(), 2);
  EXPECT_EQ(txn.compare(0).target(), Compare::VALUE);
  EXPECT_EQ(txn.compare(0).value(), "v");
  EXPECT_EQ(txn.compare(1).target(), Compare::MOD);
  EXPECT_EQ(txn.compare(1).result(), Compare::GREATER);
  EXPECT_EQ(txn.compare(1).mod_revision(), 5);
  ASSERT_EQ(txn.success_size(), 2);
  EXPECT_EQ(txn.success(0).request_put().value(), "v2");
  EXPECT_NE(txn.success(1).request_range().range_end(), "");
  ASSERT_EQ(txn.failure_size(), 1);
  EXPECT_TRUE(txn.failure(0).has_request_delete_range());
  std::string rest;
  std::getline(in, rest);
  EXPECT_EQ(rest, "this line is never read");  // the transaction ended at its blank line
}

TEST(RaftkvctlTxnInteractive, EveryCompareTarget) {
  std::istringstream in(
      "create(\"a\") = \"0\"\nversion(\"b\") != \"1\"\nlease(\"c\") = \"1a2b\"\n\n\n");
  TxnRequest txn;
  Status s = ReadTxnSections(in, nullptr, &txn);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(txn.compare_size(), 3);
  EXPECT_EQ(txn.compare(0).target(), Compare::CREATE);
  EXPECT_EQ(txn.compare(0).create_revision(), 0);
  EXPECT_EQ(txn.compare(1).target(), Compare::VERSION);
  EXPECT_EQ(txn.compare(1).result(), Compare::NOT_EQUAL);
  EXPECT_EQ(txn.compare(2).target(), Compare::LEASE);
  EXPECT_EQ(txn.compare(2).lease(), 0x1a2b);
  EXPECT_EQ(txn.success_size(), 0);
  EXPECT_EQ(txn.failure_size(), 0);
}

TEST(RaftkvctlTxnInteractive, EndOfInputEndsTheTransaction) {
  std::istringstream in("\nput k v");  // no compares, no failure requests, no final newline
  TxnRequest txn;
  std::string prompts;
  Status s = ReadInteractive(in, &txn, &prompts);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(prompts, kAllPrompts);
  EXPECT_EQ(txn.compare_size(), 0);
  ASSERT_EQ(txn.success_size(), 1);
  EXPECT_EQ(txn.success(0).request_put().key(), "k");
}

TEST(RaftkvctlTxnInteractive, AMalformedLineStopsAtOnce) {
  std::istringstream in("value(\"k\") = \"v\"\n\nput k v\nfrobnicate k\nput never read\n");
  TxnRequest txn;
  std::string prompts;
  Status s = ReadInteractive(in, &txn, &prompts);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(prompts, "compares:\nsuccess requests (get, put, del):\n");
  EXPECT_EQ(s.message().rfind("line 4: ", 0), 0u) << s;
  EXPECT_NE(s.message().find("frobnicate"), std::string::npos) << s;
  std::string rest;
  std::getline(in, rest);
  EXPECT_EQ(rest, "put never read");
  std::istringstream bad_compare("value(\"k\") ~ \"v\"\n");
  EXPECT_FALSE(ReadTxnSections(bad_compare, nullptr, &txn).ok());
}

TEST(RaftkvctlSizes, AsEtcdctlPrintsThem) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(9), "9 B");
  EXPECT_EQ(HumanBytes(123), "123 B");
  EXPECT_EQ(HumanBytes(999), "999 B");
  EXPECT_EQ(HumanBytes(1000), "1.0 kB");
  EXPECT_EQ(HumanBytes(8200), "8.2 kB");
  EXPECT_EQ(HumanBytes(20480), "20 kB");
  EXPECT_EQ(HumanBytes(2100000), "2.1 MB");
  EXPECT_EQ(HumanBytes(21000000), "21 MB");
  EXPECT_EQ(HumanBytes(3000000000ULL), "3.0 GB");
}

}  // namespace
}  // namespace ctl
}  // namespace raftkv
