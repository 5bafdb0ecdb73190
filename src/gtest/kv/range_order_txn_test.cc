// etcd's semantics in the state machine and the request checks: ranges
// sorted by a target and filtered by revisions (count, more, limit, the
// byte bound), puts keeping the value or lease, compares over a key range,
// and nested transactions (their decisions, answers, depth and writes).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "gtest/kv/txn_ops.h"
#include "kv/kv_requests.h"
#include "kv/kv_state_machine.h"

namespace raftkv {
namespace {

using testing_txn::DelOp;
using testing_txn::PutOp;
using testing_txn::Txn;

RequestOp RangeOp(const RangeRequest& r) {
  RequestOp op;
  *op.mutable_request_range() = r;
  return op;
}

RequestOp TxnOp(const TxnRequest& t) {
  RequestOp op;
  *op.mutable_request_txn() = t;
  return op;
}

Compare VersionIs(const std::string& key, int64_t version, const std::string& end = "") {
  Compare c;
  c.set_target(Compare::VERSION);
  c.set_result(Compare::EQUAL);
  c.set_key(key);
  c.set_range_end(end);
  c.set_version(version);
  return c;
}

RangeRequest Prefix(const std::string& p) {
  RangeRequest r;
  r.set_key(p);
  r.set_range_end(p.substr(0, p.size() - 1) + static_cast<char>(p.back() + 1));
  return r;
}

std::vector<std::string> Keys(const RangeResponse& r) {
  std::vector<std::string> out;
  for (const KeyValue& kv : r.kvs()) out.push_back(kv.key());
  return out;
}

class RangeOrderTxnTest : public ::testing::Test {
 protected:
  ApplyResult Run(const Command& c) { return testing_txn::ApplyNext(&sm_, &index_, c); }
  ApplyResult Put(const std::string& k, const std::string& v, int64_t lease = 0) {
    Command c;
    c.set_op(Command::PUT);
    c.set_key(k);
    c.set_value(v);
    c.set_lease(lease);
    return Run(c);
  }
  ApplyResult RunTxn(const TxnRequest& t, uint64_t max_result_bytes = 0) {
    Command c;
    c.set_op(Command::TXN);
    *c.mutable_txn() = t;
    c.set_max_result_bytes(max_result_bytes);
    return Run(c);
  }
  RangeResponse Read(const RangeRequest& r, size_t max_bytes = 0) {
    RangeResponse resp;
    Status s = sm_.Range(r, &resp, max_bytes);
    EXPECT_TRUE(s.ok()) << s;
    return resp;
  }
  // Keys b, c, a, d created in this order (revisions 1..4), then c put twice
  // more and a once (revisions 5..7): versions a 2, b 1, c 3, d 1; values
  // a "1", b "3", c "0", d "2".
  void Fill() {
    Put("k/b", "3");
    Put("k/c", "x");
    Put("k/a", "y");
    Put("k/d", "2");
    Put("k/c", "y");
    Put("k/c", "0");
    Put("k/a", "1");
  }

  KvStateMachine sm_;
  uint64_t index_ = 0;
};

TEST_F(RangeOrderTxnTest, RangesSortByEveryTargetBothWays) {
  Fill();
  struct Case {
    RangeRequest::SortTarget target;
    RangeRequest::SortOrder order;
    std::vector<std::string> keys;
  } cases[] = {
      {RangeRequest::KEY, RangeRequest::NONE, {"k/a", "k/b", "k/c", "k/d"}},
      {RangeRequest::KEY, RangeRequest::ASCEND, {"k/a", "k/b", "k/c", "k/d"}},
      {RangeRequest::KEY, RangeRequest::DESCEND, {"k/d", "k/c", "k/b", "k/a"}},
      // Equal targets (b and d: version 1) stay in key order, both ways.
      {RangeRequest::VERSION, RangeRequest::ASCEND, {"k/b", "k/d", "k/a", "k/c"}},
      {RangeRequest::VERSION, RangeRequest::DESCEND, {"k/c", "k/a", "k/b", "k/d"}},
      {RangeRequest::VERSION, RangeRequest::NONE, {"k/b", "k/d", "k/a", "k/c"}},  // NONE: ascending
      {RangeRequest::CREATE, RangeRequest::ASCEND, {"k/b", "k/c", "k/a", "k/d"}},
      {RangeRequest::CREATE, RangeRequest::DESCEND, {"k/d", "k/a", "k/c", "k/b"}},
      {RangeRequest::MOD, RangeRequest::ASCEND, {"k/b", "k/d", "k/c", "k/a"}},
      {RangeRequest::MOD, RangeRequest::DESCEND, {"k/a", "k/c", "k/d", "k/b"}},
      {RangeRequest::VALUE, RangeRequest::ASCEND, {"k/c", "k/a", "k/d", "k/b"}},
      {RangeRequest::VALUE, RangeRequest::DESCEND, {"k/b", "k/d", "k/a", "k/c"}},
  };
  for (const Case& tc : cases) {
    RangeRequest r = Prefix("k/");
    r.set_sort_target(tc.target);
    r.set_sort_order(tc.order);
    RangeResponse got = Read(r);
    EXPECT_EQ(Keys(got), tc.keys) << r.ShortDebugString();
    EXPECT_EQ(got.count(), 4);
    EXPECT_FALSE(got.more());
    // With a limit: the first keys of the same order, with their values
    // (the rest of the range is counted without them), and more.
    const RangeResponse whole = got;
    r.set_limit(2);
    got = Read(r);
    EXPECT_EQ(Keys(got), std::vector<std::string>(tc.keys.begin(), tc.keys.begin() + 2))
        << r.ShortDebugString();
    for (int i = 0; i < got.kvs_size() && i < whole.kvs_size(); ++i) {
      EXPECT_EQ(got.kvs(i).ShortDebugString(), whole.kvs(i).ShortDebugString());
    }
    EXPECT_EQ(got.count(), 4);
    EXPECT_TRUE(got.more());
    // The same at a past revision (the store as it was, sorted alike): at
    // revision 4, every key at version 1.
    r.set_limit(0);
    r.set_revision(4);
    got = Read(r);
    EXPECT_EQ(got.count(), 4);
    ASSERT_EQ(got.kvs_size(), 4);
    for (const KeyValue& kv : got.kvs()) EXPECT_EQ(kv.version(), 1);
  }
  RangeRequest r = Prefix("k/");
  r.set_sort_target(RangeRequest::CREATE);
  r.set_sort_order(RangeRequest::DESCEND);
  r.set_revision(4);
  EXPECT_EQ(Keys(Read(r)), (std::vector<std::string>{"k/d", "k/a", "k/c", "k/b"}));
  r.set_keys_only(true);
  RangeResponse keys_only = Read(r);
  ASSERT_EQ(keys_only.kvs_size(), 4);
  EXPECT_EQ(keys_only.kvs(0).value(), "");
  r.set_count_only(true);
  RangeResponse counted = Read(r);
  EXPECT_EQ(counted.count(), 4);
  EXPECT_EQ(counted.kvs_size(), 0);
}

TEST_F(RangeOrderTxnTest, RevisionFiltersCountBeforeAndLimitAfter) {
  Fill();  // mod revisions: b 1, d 4, c 6, a 7; create: b 1, c 2, a 3, d 4
  RangeRequest r = Prefix("k/");
  r.set_min_mod_revision(4);
  EXPECT_EQ(Keys(Read(r)), (std::vector<std::string>{"k/a", "k/c", "k/d"}));
  r.set_max_mod_revision(6);
  RangeResponse got = Read(r);
  EXPECT_EQ(Keys(got), (std::vector<std::string>{"k/c", "k/d"}));
  EXPECT_EQ(got.count(), 4);  // the range's keys, before the filters
  r.set_limit(1);
  got = Read(r);
  EXPECT_EQ(Keys(got), (std::vector<std::string>{"k/c"}));
  EXPECT_TRUE(got.more());  // two keys passed
  r.set_limit(2);
  EXPECT_FALSE(Read(r).more());

  RangeRequest c = Prefix("k/");
  c.set_min_create_revision(2);
  c.set_max_create_revision(3);
  EXPECT_EQ(Keys(Read(c)), (std::vector<std::string>{"k/a", "k/c"}));
  // What a lock's waiter asks (etcd's Mutex): the oldest key created up to
  // its own revision, sorted by create revision, one key.
  RangeRequest oldest = Prefix("k/");
  oldest.set_sort_target(RangeRequest::CREATE);
  oldest.set_sort_order(RangeRequest::DESCEND);
  oldest.set_max_create_revision(3);
  oldest.set_limit(1);
  got = Read(oldest);
  EXPECT_EQ(Keys(got), (std::vector<std::string>{"k/a"}));
  EXPECT_TRUE(got.more());
  EXPECT_EQ(got.count(), 4);
  oldest.set_sort_order(RangeRequest::ASCEND);
  EXPECT_EQ(Keys(Read(oldest)), (std::vector<std::string>{"k/b"}));
  // Filters that keep nothing.
  RangeRequest none = Prefix("k/");
  none.set_min_mod_revision(100);
  none.set_sort_target(RangeRequest::MOD);
  got = Read(none);
  EXPECT_EQ(got.kvs_size(), 0);
  EXPECT_FALSE(got.more());
  EXPECT_EQ(got.count(), 4);
  // count_only counts the range whatever the filters (as etcd).
  none.set_count_only(true);
  EXPECT_EQ(Read(none).count(), 4);
}

TEST_F(RangeOrderTxnTest, SortedRangesAreBoundedLikeAnyAnswer) {
  for (int i = 0; i < 50; ++i) Put("big/" + std::to_string(100 + i), std::string(1000, 'v'));
  RangeRequest r = Prefix("big/");
  r.set_sort_order(RangeRequest::DESCEND);
  RangeResponse resp;
  Status s = sm_.Range(r, &resp, 10000);  // 50 KB of values asked, 10 KB allowed
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("--max_response_bytes"), std::string::npos) << s;
  r.set_limit(5);  // 5 KB: served, the newest five keys first
  ASSERT_TRUE(sm_.Range(r, &resp, 10000).ok());
  EXPECT_EQ(Keys(resp), (std::vector<std::string>{"big/149", "big/148", "big/147", "big/146", "big/145"}));
  EXPECT_TRUE(resp.more());
  EXPECT_EQ(resp.count(), 50);
  r.set_limit(20);  // sorted and cut, then over the bound
  EXPECT_EQ(sm_.Range(r, &resp, 10000).code(), Status::Code::kResourceExhausted);
  r.set_keys_only(true);  // keys only: small
  ASSERT_TRUE(sm_.Range(r, &resp, 10000).ok());
  EXPECT_EQ(resp.kvs_size(), 20);
  // Many keys, even without values: at least kVisitCost each.
  r.clear_limit();
  EXPECT_EQ(sm_.Range(r, &resp, 20 * KvStateMachine::kVisitCost).code(), Status::Code::kResourceExhausted);

  // In a transaction: refused whole before any change when the sorted
  // answer is over the entry's budget; served when within it.
  RangeRequest in_txn = Prefix("big/");
  in_txn.set_sort_target(RangeRequest::MOD);
  in_txn.set_sort_order(RangeRequest::DESCEND);
  in_txn.set_limit(3);
  ApplyResult over = RunTxn(Txn({}, {PutOp("x", "1"), RangeOp(in_txn)}), 2000);
  EXPECT_EQ(over.Rejection().code(), Status::Code::kResourceExhausted);
  EXPECT_FALSE(sm_.Get("x").has_value());
  EXPECT_EQ(sm_.CheckTxnAnswer(Txn({}, {PutOp("x", "1"), RangeOp(in_txn)}), 2000).code(),
            Status::Code::kResourceExhausted);
  ApplyResult ok = RunTxn(Txn({}, {PutOp("x", "1"), RangeOp(in_txn)}), 10000);
  ASSERT_FALSE(ok.rejected()) << ok.answer.reject_message();
  EXPECT_EQ(Keys(ok.answer.txn().responses(1).response_range()),
            (std::vector<std::string>{"big/149", "big/148", "big/147"}));
}

TEST_F(RangeOrderTxnTest, SortedRangesInTransactionsSeeTheWritesBeforeThem) {
  Fill();
  RangeRequest newest = Prefix("k/");
  newest.set_sort_target(RangeRequest::MOD);
  newest.set_sort_order(RangeRequest::DESCEND);
  newest.set_limit(2);
  ApplyResult r = RunTxn(Txn({}, {PutOp("k/b", "new"), RangeOp(newest)}));
  ASSERT_FALSE(r.rejected()) << r.answer.reject_message();
  EXPECT_EQ(Keys(r.answer.txn().responses(1).response_range()), (std::vector<std::string>{"k/b", "k/a"}));
  EXPECT_EQ(r.answer.txn().responses(1).response_range().count(), 4);
  TxnResponse read;
  ASSERT_TRUE(sm_.ReadTxn(Txn({}, {RangeOp(newest)}), &read).ok());
  EXPECT_EQ(Keys(read.responses(0).response_range()), (std::vector<std::string>{"k/b", "k/a"}));
}

TEST_F(RangeOrderTxnTest, PutsKeepTheValueOrLeaseOfAnExistingKey) {
  Command grant;
  grant.set_op(Command::LEASE_GRANT);
  grant.set_lease(7);
  grant.set_lease_ttl(60);
  ASSERT_FALSE(Run(grant).rejected());
  Put("k", "v", 7);
  Command keep_value;
  keep_value.set_op(Command::PUT);
  keep_value.set_key("k");
  keep_value.set_ignore_value(true);
  ApplyResult r = Run(keep_value);  // no lease: detached, value kept
  ASSERT_FALSE(r.rejected()) << r.answer.reject_message();
  std::optional<KvRecord> rec = sm_.GetRecord("k");
  EXPECT_EQ(rec->value, "v");
  EXPECT_EQ(rec->lease, 0);
  EXPECT_EQ(rec->version, 2);
  Put("k", "w", 7);
  Command keep_lease;
  keep_lease.set_op(Command::PUT);
  keep_lease.set_key("k");
  keep_lease.set_value("z");
  keep_lease.set_ignore_lease(true);
  ASSERT_FALSE(Run(keep_lease).rejected());
  rec = sm_.GetRecord("k");
  EXPECT_EQ(rec->value, "z");
  EXPECT_EQ(rec->lease, 7);
  int64_t ttl = 0;
  std::vector<std::string> keys;
  ASSERT_TRUE(sm_.GetLease(7, &ttl, &keys));
  EXPECT_EQ(keys, std::vector<std::string>{"k"});
  // A key that does not exist: refused, nothing changed.
  const int64_t before = sm_.Revision();
  keep_value.set_key("absent");
  Status refused = Run(keep_value).Rejection();
  EXPECT_EQ(refused.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(refused.reason(), Status::Reason::kKeyNotFound);
  keep_lease.set_key("absent");
  EXPECT_EQ(Run(keep_lease).Rejection().reason(), Status::Reason::kKeyNotFound);
  EXPECT_EQ(sm_.Revision(), before);
  // In a transaction: the whole refused before any change.
  RequestOp keep = PutOp("absent", "");
  keep.mutable_request_put()->set_ignore_value(true);
  r = RunTxn(Txn({}, {PutOp("other", "1"), keep}));
  EXPECT_EQ(r.Rejection().reason(), Status::Reason::kKeyNotFound);
  EXPECT_FALSE(sm_.Get("other").has_value());
  keep.mutable_request_put()->set_key("k");
  r = RunTxn(Txn({}, {PutOp("other", "1"), keep}));
  ASSERT_FALSE(r.rejected()) << r.answer.reject_message();
  EXPECT_EQ(sm_.Get("k"), "z");
  EXPECT_EQ(sm_.GetRecord("k")->lease, 0);
  // The requests: a value with ignore_value, a lease with ignore_lease.
  RequestLimits limits;
  Command cmd;
  PutRequest bad;
  bad.set_key("k");
  bad.set_value("v");
  bad.set_ignore_value(true);
  EXPECT_EQ(PutCommand(&bad, limits, &cmd).reason(), Status::Reason::kValueProvided);
  bad.clear_value();
  bad.set_ignore_value(false);
  bad.set_ignore_lease(true);
  bad.set_lease(7);
  EXPECT_EQ(PutCommand(&bad, limits, &cmd).reason(), Status::Reason::kLeaseProvided);
  bad.set_lease(0);
  ASSERT_TRUE(PutCommand(&bad, limits, &cmd).ok());
  EXPECT_TRUE(cmd.ignore_lease());
}

TEST_F(RangeOrderTxnTest, ComparesOverARangeHoldForEveryKeyOrAsAnAbsentKey) {
  Put("r/a", "1");
  Put("r/b", "1");
  Put("r/b", "2");
  auto holds = [&](const Compare& c) { return RunTxn(Txn({c}, {}, {})).answer.txn().succeeded(); };
  EXPECT_FALSE(holds(VersionIs("r/", 1, "r0")));  // r/b is at version 2
  Compare positive = VersionIs("r/", 0, "r0");
  positive.set_result(Compare::GREATER);
  EXPECT_TRUE(holds(positive));
  EXPECT_TRUE(holds(VersionIs("r/a", 1, "r/b")));  // [r/a, r/b): r/a alone
  Compare all = positive;
  all.set_key(std::string(1, '\0'));
  all.set_range_end(std::string(1, '\0'));
  EXPECT_TRUE(holds(all));
  // No key in the range: compared as one absent key (as etcd).
  EXPECT_TRUE(holds(VersionIs("s/", 0, "s0")));
  Compare none_greater = VersionIs("s/", 0, "s0");
  none_greater.set_result(Compare::GREATER);
  EXPECT_FALSE(holds(none_greater));
  Compare value;
  value.set_target(Compare::VALUE);
  value.set_result(Compare::NOT_EQUAL);
  value.set_key("s/");
  value.set_range_end("s0");
  value.set_value("x");
  EXPECT_FALSE(holds(value));  // no value to compare
  value.set_key("r/");
  value.set_range_end("r0");
  EXPECT_TRUE(holds(value));
  value.set_value("2");
  EXPECT_FALSE(holds(value));  // r/b holds "2"
}

TEST_F(RangeOrderTxnTest, NestedTransactionsDecideOnTheStateBeforeAndAnswerInPlace) {
  Put("n/k", "v");  // 1
  // Outer: put n/k, then a nested txn whose compare reads n/k's version
  // before the outer put (1, not 2) and whose failure list would put n/x.
  TxnRequest inner = Txn({VersionIs("n/k", 1)}, {PutOp("n/y", "yes"), RangeOp(Prefix("n/"))},
                         {PutOp("n/x", "no")});
  ApplyResult r = RunTxn(Txn({VersionIs("n/k", 1)}, {PutOp("n/k", "w"), TxnOp(inner)}, {}));
  ASSERT_FALSE(r.rejected()) << r.answer.reject_message();
  const TxnResponse& outer = r.answer.txn();
  EXPECT_TRUE(outer.succeeded());
  ASSERT_EQ(outer.responses_size(), 2);
  ASSERT_TRUE(outer.responses(1).has_response_txn());
  const TxnResponse& nested = outer.responses(1).response_txn();
  EXPECT_TRUE(nested.succeeded());
  EXPECT_EQ(nested.header().revision(), 2);
  EXPECT_EQ(outer.header().revision(), 2);  // one revision for the whole
  ASSERT_EQ(nested.responses_size(), 2);
  EXPECT_EQ(Keys(nested.responses(1).response_range()), (std::vector<std::string>{"n/k", "n/y"}));
  EXPECT_EQ(sm_.Get("n/y"), "yes");
  EXPECT_FALSE(sm_.Get("n/x").has_value());
  EXPECT_EQ(sm_.GetRecord("n/y")->mod_revision, 2);
  // The failure list of a nested transaction, and read-only nesting.
  TxnRequest reads = Txn({VersionIs("n/k", 1)}, {RangeOp(Prefix("n/"))},
                         {TxnOp(Txn({VersionIs("n/y", 1)}, {RangeOp(Prefix("n/y"))}))});
  EXPECT_TRUE(TxnIsReadOnly(reads));
  TxnResponse read;
  ASSERT_TRUE(sm_.ReadTxn(reads, &read).ok());
  EXPECT_FALSE(read.succeeded());
  ASSERT_TRUE(read.responses(0).has_response_txn());
  EXPECT_TRUE(read.responses(0).response_txn().succeeded());
  EXPECT_EQ(Keys(read.responses(0).response_txn().responses(0).response_range()),
            std::vector<std::string>{"n/y"});
  EXPECT_FALSE(TxnIsReadOnly(Txn({}, {}, {TxnOp(Txn({}, {}, {DelOp("n/y")}))})));
  // A nested put on a lease that does not exist refuses the whole.
  RequestOp leased = PutOp("n/z", "1");
  leased.mutable_request_put()->set_lease(99);
  r = RunTxn(Txn({}, {PutOp("n/w", "1"), TxnOp(Txn({}, {leased}))}));
  EXPECT_EQ(r.Rejection().reason(), Status::Reason::kLeaseNotFound);
  EXPECT_FALSE(sm_.Get("n/w").has_value());
}

// A transaction `depth` levels of request_txn above one running `op`.
TxnRequest Nest(int depth, const RequestOp& op = PutOp("deep", "1")) {
  TxnRequest t = Txn({}, {op});
  for (int i = 0; i < depth; ++i) t = Txn({}, {TxnOp(t)});
  return t;
}

TEST(TxnChecksTest, NestingIsBoundedAndWritesAreCheckedAcrossIt) {
  RequestLimits limits;
  Command cmd;
  TxnRequest ok = Nest(kMaxTxnDepth);
  ASSERT_TRUE(TxnCommand(&ok, limits, &cmd).ok());
  TxnRequest deep = Nest(kMaxTxnDepth + 1);
  Status s = TxnCommand(&deep, limits, &cmd);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("at most " + std::to_string(kMaxTxnDepth) + " deep"), std::string::npos) << s;
  // Read-only as deep as allowed; deeper, not read-only (so refused by
  // TxnCommand), without recursing deeper.
  EXPECT_TRUE(TxnIsReadOnly(Nest(kMaxTxnDepth, RangeOp(Prefix("r/")))));
  EXPECT_FALSE(TxnIsReadOnly(Nest(100, RangeOp(Prefix("r/")))));

  auto check = [&](TxnRequest t) { return TxnCommand(&t, limits, &cmd); };
  // A key written twice: outer and nested, nested siblings, a put in a
  // deleted range (either way round), and deep down.
  EXPECT_EQ(check(Txn({}, {PutOp("a", "1"), TxnOp(Txn({}, {PutOp("a", "2")}))})).reason(),
            Status::Reason::kDuplicateKey);
  EXPECT_EQ(check(Txn({}, {TxnOp(Txn({}, {PutOp("a", "1")})), TxnOp(Txn({}, {}, {PutOp("a", "2")}))}))
                .reason(),
            Status::Reason::kDuplicateKey);
  EXPECT_EQ(check(Txn({}, {TxnOp(Txn({}, {PutOp("a/1", "1")})), DelOp("a/", "a0")})).reason(),
            Status::Reason::kDuplicateKey);
  EXPECT_EQ(check(Txn({}, {DelOp("a/", "a0"), TxnOp(Txn({}, {}, {PutOp("a/1", "1")}))})).reason(),
            Status::Reason::kDuplicateKey);
  EXPECT_EQ(check(Txn({}, {PutOp("deep", "0"), TxnOp(Nest(3))})).reason(), Status::Reason::kDuplicateKey);
  // Not twice: the two lists of one nested transaction (one runs), the two
  // lists of the outer one, and deletes over each other.
  EXPECT_TRUE(check(Txn({}, {TxnOp(Txn({}, {PutOp("a", "1")}, {PutOp("a", "2")}))})).ok());
  EXPECT_TRUE(check(Txn({}, {PutOp("a", "1")}, {TxnOp(Txn({}, {PutOp("a", "2")}))})).ok());
  EXPECT_TRUE(check(Txn({}, {DelOp("a", "c"), TxnOp(Txn({}, {DelOp("b", "d")}))})).ok());
  // Every compare and operation counts toward --max_txn_ops, nested ones too.
  limits.max_txn_ops = 6;
  std::vector<RequestOp> four(4, RangeOp(Prefix("r/")));
  s = check(Txn({}, {RangeOp(Prefix("r/")), TxnOp(Txn({VersionIs("a", 0)}, four))}));
  EXPECT_EQ(s.reason(), Status::Reason::kTooManyOps) << s;
  EXPECT_TRUE(check(Txn({}, {RangeOp(Prefix("r/")), TxnOp(Txn({}, four))})).ok());
  // A compare's range must be a range.
  Compare backwards = VersionIs("b", 0, "a");
  EXPECT_EQ(check(Txn({backwards}, {})).code(), Status::Code::kInvalidArgument);
  // Unknown sort values are refused.
  RangeRequest odd = Prefix("r/");
  odd.set_sort_order(static_cast<RangeRequest::SortOrder>(9));
  EXPECT_EQ(CheckRangeRequest(odd, limits).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace raftkv
