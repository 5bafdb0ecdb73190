// client/txn_text.h: etcdctl's `txn` input format (raftkvctl txn), the
// prefix range end and hexadecimal lease ids.
#include "client/txn_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace raftkv {
namespace {

// Parses one compare line, failing the test on an error.
Compare Cmp(const std::string& line) {
  Compare c;
  Status s = ParseTxnCompare(line, 1, &c);
  EXPECT_TRUE(s.ok()) << line << ": " << s;
  return c;
}

RequestOp Req(const std::string& line) {
  RequestOp op;
  Status s = ParseTxnRequest(line, 1, &op);
  EXPECT_TRUE(s.ok()) << line << ": " << s;
  return op;
}

// The error message of a line that must be refused ("" if it was accepted).
std::string CmpError(const std::string& line) {
  Compare c;
  Status s = ParseTxnCompare(line, 7, &c);
  EXPECT_FALSE(s.ok()) << "accepted: " << line;
  if (!s.ok()) {
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  }
  return s.message();
}

std::string ReqError(const std::string& line) {
  RequestOp op;
  Status s = ParseTxnRequest(line, 7, &op);
  EXPECT_FALSE(s.ok()) << "accepted: " << line;
  if (!s.ok()) {
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  }
  return s.message();
}

std::string Unquote(const std::string& quoted) {
  std::string out;
  Status s = UnquoteGo(quoted, &out);
  EXPECT_TRUE(s.ok()) << quoted << ": " << s;
  return out;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- compares ----

TEST(TxnTextTest, EveryCompareTarget) {
  Compare c = Cmp(R"(value("k") = "v")");
  EXPECT_EQ(c.target(), Compare::VALUE);
  EXPECT_EQ(c.key(), "k");
  EXPECT_EQ(c.target_union_case(), Compare::kValue);
  EXPECT_EQ(c.value(), "v");

  c = Cmp(R"(version("k") = "3")");
  EXPECT_EQ(c.target(), Compare::VERSION);
  EXPECT_EQ(c.target_union_case(), Compare::kVersion);
  EXPECT_EQ(c.version(), 3);

  c = Cmp(R"(create("k") = "0")");
  EXPECT_EQ(c.target(), Compare::CREATE);
  EXPECT_EQ(c.target_union_case(), Compare::kCreateRevision);
  EXPECT_EQ(c.create_revision(), 0);

  c = Cmp(R"(mod("k") > "5")");
  EXPECT_EQ(c.target(), Compare::MOD);
  EXPECT_EQ(c.target_union_case(), Compare::kModRevision);
  EXPECT_EQ(c.mod_revision(), 5);

  c = Cmp(R"(lease("k") = "1a2b")");
  EXPECT_EQ(c.target(), Compare::LEASE);
  EXPECT_EQ(c.target_union_case(), Compare::kLease);
  EXPECT_EQ(c.lease(), 0x1a2b);

  // etcdctl's short names.
  EXPECT_EQ(Cmp(R"(val("k") = "v")").target(), Compare::VALUE);
  EXPECT_EQ(Cmp(R"(ver("k") = "1")").target(), Compare::VERSION);
  EXPECT_EQ(Cmp(R"(c("k") = "1")").target(), Compare::CREATE);
  EXPECT_EQ(Cmp(R"(m("k") = "1")").target(), Compare::MOD);
  EXPECT_EQ(Cmp(R"(mod("k") = "-1")").mod_revision(), -1);
}

TEST(TxnTextTest, EveryOperator) {
  EXPECT_EQ(Cmp(R"(mod("k") = "5")").result(), Compare::EQUAL);
  EXPECT_EQ(Cmp(R"(mod("k") != "5")").result(), Compare::NOT_EQUAL);
  EXPECT_EQ(Cmp(R"(mod("k") < "5")").result(), Compare::LESS);
  EXPECT_EQ(Cmp(R"(mod("k") > "5")").result(), Compare::GREATER);
  // Spacing is free.
  Compare c = Cmp(R"(  value ( "k" )!="v"  )");
  EXPECT_EQ(c.result(), Compare::NOT_EQUAL);
  EXPECT_EQ(c.key(), "k");
  EXPECT_EQ(c.value(), "v");
  EXPECT_EQ(Cmp(R"(value("k")<"v")").result(), Compare::LESS);
}

TEST(TxnTextTest, QuotedKeysAndValues) {
  Compare c = Cmp(R"(value("a key") = "a \"quoted\" value\twith\\escapes\n")");
  EXPECT_EQ(c.key(), "a key");
  EXPECT_EQ(c.value(), "a \"quoted\" value\twith\\escapes\n");
  c = Cmp(R"(value("k)(") = ")=(")");
  EXPECT_EQ(c.key(), "k)(");
  EXPECT_EQ(c.value(), ")=(");
  c = Cmp("value(`raw \\n`) = `x\"y`");
  EXPECT_EQ(c.key(), "raw \\n");
  EXPECT_EQ(c.value(), "x\"y");
  c = Cmp(R"(value("") = "")");
  EXPECT_EQ(c.key(), "");
  EXPECT_EQ(c.value(), "");
  EXPECT_EQ(c.target_union_case(), Compare::kValue);
  c = Cmp(R"(value(k) = v)");  // bare words
  EXPECT_EQ(c.key(), "k");
  EXPECT_EQ(c.value(), "v");
}

TEST(TxnTextTest, GoEscapes) {
  EXPECT_EQ(Unquote(R"("plain")"), "plain");
  EXPECT_EQ(Unquote(R"("\a\b\f\n\r\t\v\\\"")"), std::string("\a\b\f\n\r\t\v\\\""));
  EXPECT_EQ(Unquote(R"("\x41\x7a\xff")"), "Az\xff");
  EXPECT_EQ(Unquote(R"("\101\000\377")"), std::string("A\0\xff", 3));
  EXPECT_EQ(Unquote(R"("\u00e9")"), "\xc3\xa9");
  EXPECT_EQ(Unquote(R"("\u20AC")"), "\xe2\x82\xac");
  EXPECT_EQ(Unquote(R"("\U0001F600")"), "\xf0\x9f\x98\x80");
  EXPECT_EQ(Unquote("\"caf\xc3\xa9\""), "caf\xc3\xa9");

  std::string out;
  for (const char* bad : {R"("\q")", R"("\'")", R"("\x4")", R"("\xzz")", R"("\400")", R"("\12")",
                          R"("\ud800")", R"("\U00110000")", R"("open)", R"("a\")", R"("a"b)",
                          "plain", "\"new\nline\""}) {
    EXPECT_FALSE(UnquoteGo(bad, &out).ok()) << bad;
  }
}

TEST(TxnTextTest, BadComparesAreRefusedClearly) {
  std::string e = CmpError(R"(value "k" = "v")");
  EXPECT_TRUE(Contains(e, "line 7: ")) << e;
  EXPECT_TRUE(Contains(e, "'('")) << e;
  e = CmpError(R"(size("k") = "1")");
  EXPECT_TRUE(Contains(e, "unknown target \"size\"")) << e;
  e = CmpError(R"(value("k" = "v")");
  EXPECT_TRUE(Contains(e, "')'")) << e;
  e = CmpError(R"(value("k") == "v")");
  EXPECT_TRUE(Contains(e, "unknown operator \"==\"")) << e;
  e = CmpError(R"(mod("k") >= "1")");
  EXPECT_TRUE(Contains(e, "unknown operator \">=\"")) << e;
  e = CmpError(R"(value("k") ~ "v")");
  EXPECT_TRUE(Contains(e, "unknown operator \"~\"")) << e;
  e = CmpError(R"(value("k"))");
  EXPECT_TRUE(Contains(e, "missing operator")) << e;
  e = CmpError(R"(value("k") =)");
  EXPECT_TRUE(Contains(e, "missing value")) << e;
  e = CmpError(R"(value("k") = "v" "w")");
  EXPECT_TRUE(Contains(e, "unexpected text after the value")) << e;
  e = CmpError(R"(version("k") = "three")");
  EXPECT_TRUE(Contains(e, "\"three\" is not a decimal number")) << e;
  e = CmpError(R"(mod("k") = "5x")");
  EXPECT_TRUE(Contains(e, "not a decimal number")) << e;
  e = CmpError(R"(create("k") = "99999999999999999999")");
  EXPECT_TRUE(Contains(e, "not a decimal number")) << e;
  e = CmpError(R"(lease("k") = "xyz")");
  EXPECT_TRUE(Contains(e, "not a hexadecimal lease id")) << e;
  e = CmpError(R"(value("k) = "v")");
  EXPECT_TRUE(Contains(e, "line 7: ")) << e;
  e = CmpError(R"(value("\q") = "v")");
  EXPECT_TRUE(Contains(e, "invalid escape \\q")) << e;
  // The offending line is quoted in the message.
  EXPECT_TRUE(Contains(e, R"(value("\q") = "v")")) << e;
}

// ---- requests ----

TEST(TxnTextTest, PutWithFlags) {
  RequestOp op = Req("put k v");
  ASSERT_TRUE(op.has_request_put());
  EXPECT_EQ(op.request_put().key(), "k");
  EXPECT_EQ(op.request_put().value(), "v");
  EXPECT_EQ(op.request_put().lease(), 0);
  EXPECT_FALSE(op.request_put().prev_kv());

  op = Req("put k v --lease=1a2b --prev-kv");
  ASSERT_TRUE(op.has_request_put());
  EXPECT_EQ(op.request_put().lease(), 0x1a2b);
  EXPECT_TRUE(op.request_put().prev_kv());

  op = Req("put --lease 7F k --prev-kv=false v");  // flags anywhere, value as next argument
  ASSERT_TRUE(op.has_request_put());
  EXPECT_EQ(op.request_put().key(), "k");
  EXPECT_EQ(op.request_put().value(), "v");
  EXPECT_EQ(op.request_put().lease(), 0x7f);
  EXPECT_FALSE(op.request_put().prev_kv());
}

TEST(TxnTextTest, QuotedArguments) {
  RequestOp op = Req(R"(put "a key" "two\nlines")");
  ASSERT_TRUE(op.has_request_put());
  EXPECT_EQ(op.request_put().key(), "a key");
  EXPECT_EQ(op.request_put().value(), "two\nlines");
  op = Req(R"(put 'raw \n' "")");
  EXPECT_EQ(op.request_put().key(), "raw \\n");
  EXPECT_EQ(op.request_put().value(), "");
  // A quoted argument is never a flag; "--" ends the flags.
  op = Req(R"(put "--prev-kv" v)");
  EXPECT_EQ(op.request_put().key(), "--prev-kv");
  EXPECT_FALSE(op.request_put().prev_kv());
  op = Req("put -- -k -v");
  EXPECT_EQ(op.request_put().key(), "-k");
  EXPECT_EQ(op.request_put().value(), "-v");
  op = Req("\tput   k\t v  \r");
  EXPECT_EQ(op.request_put().key(), "k");
  EXPECT_EQ(op.request_put().value(), "v");

  std::vector<std::string> args;
  std::vector<bool> quoted;
  ASSERT_TRUE(SplitTxnArgs(R"(a "b c" 'd e' f)", &args, &quoted).ok());
  EXPECT_EQ(args, (std::vector<std::string>{"a", "b c", "d e", "f"}));
  EXPECT_EQ(quoted, (std::vector<bool>{false, true, true, false}));
}

TEST(TxnTextTest, GetWithFlags) {
  RequestOp op = Req("get k");
  ASSERT_TRUE(op.has_request_range());
  EXPECT_EQ(op.request_range().key(), "k");
  EXPECT_EQ(op.request_range().range_end(), "");
  EXPECT_EQ(op.request_range().limit(), 0);
  EXPECT_FALSE(op.request_range().keys_only());
  EXPECT_FALSE(op.request_range().count_only());

  op = Req("get a z");
  EXPECT_EQ(op.request_range().key(), "a");
  EXPECT_EQ(op.request_range().range_end(), "z");

  op = Req("get foo --prefix --limit=10 --keys-only");
  EXPECT_EQ(op.request_range().key(), "foo");
  EXPECT_EQ(op.request_range().range_end(), "fop");
  EXPECT_EQ(op.request_range().limit(), 10);
  EXPECT_TRUE(op.request_range().keys_only());

  op = Req("get --count-only --limit 3 \"\" --prefix");
  EXPECT_EQ(op.request_range().key(), std::string(1, '\0'));
  EXPECT_EQ(op.request_range().range_end(), std::string(1, '\0'));
  EXPECT_EQ(op.request_range().limit(), 3);
  EXPECT_TRUE(op.request_range().count_only());
}

TEST(TxnTextTest, DelWithFlags) {
  RequestOp op = Req("del k");
  ASSERT_TRUE(op.has_request_delete_range());
  EXPECT_EQ(op.request_delete_range().key(), "k");
  EXPECT_EQ(op.request_delete_range().range_end(), "");
  EXPECT_FALSE(op.request_delete_range().prev_kv());

  op = Req("del a c --prev-kv");
  EXPECT_EQ(op.request_delete_range().key(), "a");
  EXPECT_EQ(op.request_delete_range().range_end(), "c");
  EXPECT_TRUE(op.request_delete_range().prev_kv());

  op = Req("del --prefix dir/");
  EXPECT_EQ(op.request_delete_range().key(), "dir/");
  EXPECT_EQ(op.request_delete_range().range_end(), "dir0");
}

TEST(TxnTextTest, BadRequestsAreRefusedClearly) {
  std::string e = ReqError("set k v");
  EXPECT_TRUE(Contains(e, "line 7: ")) << e;
  EXPECT_TRUE(Contains(e, "unknown request \"set\"")) << e;
  EXPECT_TRUE(Contains(e, "set k v")) << e;
  e = ReqError("put k");
  EXPECT_TRUE(Contains(e, "put takes KEY VALUE, got 1 argument")) << e;
  e = ReqError("put k v w");
  EXPECT_TRUE(Contains(e, "got 3 arguments")) << e;
  e = ReqError("get");
  EXPECT_TRUE(Contains(e, "get takes KEY [RANGE_END]")) << e;
  e = ReqError("del a b c");
  EXPECT_TRUE(Contains(e, "del takes KEY [RANGE_END]")) << e;
  e = ReqError("get a b --prefix");
  EXPECT_TRUE(Contains(e, "no RANGE_END with --prefix")) << e;
  e = ReqError("put k v --prefix");
  EXPECT_TRUE(Contains(e, "put does not take the flag --prefix")) << e;
  e = ReqError("get k --prev-kv");
  EXPECT_TRUE(Contains(e, "get does not take the flag --prev-kv")) << e;
  e = ReqError("del k --limit=3");
  EXPECT_TRUE(Contains(e, "del does not take the flag --limit=3")) << e;
  e = ReqError("get k --limit=ten");
  EXPECT_TRUE(Contains(e, "--limit \"ten\" is not a number")) << e;
  e = ReqError("get k --limit");
  EXPECT_TRUE(Contains(e, "--limit needs a value")) << e;
  e = ReqError("put k v --lease=0x1a");
  EXPECT_TRUE(Contains(e, "--lease \"0x1a\" is not a hexadecimal lease id")) << e;
  e = ReqError("put k v --prev-kv=maybe");
  EXPECT_TRUE(Contains(e, "takes true or false")) << e;
  e = ReqError(R"(put "k v)");
  EXPECT_TRUE(Contains(e, "unterminated")) << e;
  e = ReqError(R"(put "k"v w)");
  EXPECT_TRUE(Contains(e, "unexpected text after the quoted argument")) << e;
  e = ReqError(R"(put "\z" v)");
  EXPECT_TRUE(Contains(e, "invalid escape \\z")) << e;
}

// ---- whole inputs ----

TEST(TxnTextTest, WholeInput) {
  const std::string text =
      "value(\"k\") = \"v\"\n"
      "mod(\"k\") > \"5\"\n"
      "\n"
      "put k v2 --prev-kv\n"
      "get k\n"
      "\n"
      "del k\n"
      "put other x\n"
      "\n";
  TxnRequest txn;
  Status s = ParseTxnText(text, &txn);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(txn.compare_size(), 2);
  EXPECT_EQ(txn.compare(0).target(), Compare::VALUE);
  EXPECT_EQ(txn.compare(1).target(), Compare::MOD);
  ASSERT_EQ(txn.success_size(), 2);
  EXPECT_TRUE(txn.success(0).has_request_put());
  EXPECT_TRUE(txn.success(1).has_request_range());
  ASSERT_EQ(txn.failure_size(), 2);
  EXPECT_TRUE(txn.failure(0).has_request_delete_range());
  EXPECT_EQ(txn.failure(1).request_put().key(), "other");

  // CRLF line ends, whitespace-only separators, no final newline.
  s = ParseTxnText("value(\"k\") = \"v\"\r\n  \r\nput k v\r\n\t\r\ndel k", &txn);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(txn.compare_size(), 1);
  EXPECT_EQ(txn.success_size(), 1);
  EXPECT_EQ(txn.failure_size(), 1);
  EXPECT_EQ(txn.success(0).request_put().value(), "v");
}

TEST(TxnTextTest, EmptyLists) {
  TxnRequest txn;
  for (const char* text : {"", "\n", "\n\n", "\n\n\n"}) {
    ASSERT_TRUE(ParseTxnText(text, &txn).ok()) << text;
    EXPECT_EQ(txn.compare_size() + txn.success_size() + txn.failure_size(), 0) << text;
  }
  // No compares: the success list runs.
  ASSERT_TRUE(ParseTxnText("\nput a 1\n\n", &txn).ok());
  EXPECT_EQ(txn.compare_size(), 0);
  EXPECT_EQ(txn.success_size(), 1);
  EXPECT_EQ(txn.failure_size(), 0);
  // Only a failure list.
  ASSERT_TRUE(ParseTxnText("mod(\"a\") = \"0\"\n\n\nput a 1\n", &txn).ok());
  EXPECT_EQ(txn.compare_size(), 1);
  EXPECT_EQ(txn.success_size(), 0);
  EXPECT_EQ(txn.failure_size(), 1);
  // The end of input ends the compares: both lists empty.
  ASSERT_TRUE(ParseTxnText("mod(\"a\") = \"0\"\n", &txn).ok());
  EXPECT_EQ(txn.compare_size(), 1);
  EXPECT_EQ(txn.success_size() + txn.failure_size(), 0);
  // Parsing again replaces what was there.
  ASSERT_TRUE(ParseTxnText("", &txn).ok());
  EXPECT_EQ(txn.compare_size(), 0);
}

TEST(TxnTextTest, ErrorsNameTheLine) {
  TxnRequest txn;
  Status s = ParseTxnText("value(\"k\") = \"v\"\nvalue(\"k\") == \"v\"\n\nput k v\n", &txn);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), "line 2: malformed comparison")) << s;
  // A request where a compare belongs, and the reverse.
  s = ParseTxnText("put k v\n", &txn);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), "line 1: malformed comparison")) << s;
  s = ParseTxnText("\nput k v\nvalue(\"k\") = \"v\"\n", &txn);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), "line 3: invalid txn request")) << s;
  s = ParseTxnText("\n\nput k v\nget\n", &txn);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), "line 4: invalid txn request: get takes KEY")) << s;
  s = ParseTxnText("\n\nput k v\n", &txn);  // no compares, no success: a failure request
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(txn.failure_size(), 1);
  s = ParseTxnText("\n\n\nput k v\n", &txn);  // the third blank line ends the failure list
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), "line 4: unexpected text after the failure requests")) << s;
}

// ---- prefix range and lease ids ----

TEST(TxnTextTest, PrefixEnd) {
  EXPECT_EQ(PrefixEnd("a"), "b");
  EXPECT_EQ(PrefixEnd("ab"), "ac");
  EXPECT_EQ(PrefixEnd("dir/"), "dir0");
  EXPECT_EQ(PrefixEnd("a\xff"), "b");
  EXPECT_EQ(PrefixEnd("a\xfe\xff\xff"), "a\xff");
  EXPECT_EQ(PrefixEnd(std::string("\x00", 1)), "\x01");
  EXPECT_EQ(PrefixEnd("\xff\xff"), std::string(1, '\0'));
  EXPECT_EQ(PrefixEnd(""), std::string(1, '\0'));

  std::string key, end;
  PrefixRange("", &key, &end);
  EXPECT_EQ(key, std::string(1, '\0'));
  EXPECT_EQ(end, std::string(1, '\0'));
  PrefixRange("x", &key, &end);
  EXPECT_EQ(key, "x");
  EXPECT_EQ(end, "y");
}

TEST(TxnTextTest, LeaseIdsInHex) {
  EXPECT_EQ(LeaseIdHex(0), "0");
  EXPECT_EQ(LeaseIdHex(0x1a2b), "1a2b");
  EXPECT_EQ(LeaseIdHex(0x694d77aa0f3bb52c), "694d77aa0f3bb52c");
  EXPECT_EQ(LeaseIdHex(-1), "ffffffffffffffff");
  int64_t id = 0;
  ASSERT_TRUE(ParseLeaseIdHex("1a2b", &id));
  EXPECT_EQ(id, 0x1a2b);
  ASSERT_TRUE(ParseLeaseIdHex("1A2B", &id));
  EXPECT_EQ(id, 0x1a2b);
  ASSERT_TRUE(ParseLeaseIdHex("000000000000001a", &id));  // etcdctl's %016x
  EXPECT_EQ(id, 0x1a);
  ASSERT_TRUE(ParseLeaseIdHex("ffffffffffffffff", &id));
  EXPECT_EQ(id, -1);
  for (const char* bad : {"", "0x1a", "1g", "-1", " 1", "10000000000000000"}) {
    EXPECT_FALSE(ParseLeaseIdHex(bad, &id)) << bad;
  }
  for (int64_t v : {int64_t{1}, int64_t{0x7fffffffffffffff}, int64_t{-42}}) {
    ASSERT_TRUE(ParseLeaseIdHex(LeaseIdHex(v), &id));
    EXPECT_EQ(id, v);
  }
}

}  // namespace
}  // namespace raftkv
