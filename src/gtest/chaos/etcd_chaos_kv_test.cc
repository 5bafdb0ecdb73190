// The chaos runner's etcd workers (src/chaos/etcd_chaos_kv.h): how each
// answer is classified, against fake etcd KV members that answer what a test
// tells them, and that the checker fails a history whose etcd writes are
// recorded with the wrong outcome.
#include "chaos/etcd_chaos_kv.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "check/linearizability.h"

namespace raftkv::chaos {
namespace {

using grpc::StatusCode;

TEST(EtcdChaosKv, ClassifiesAttemptsAsTheV1PathDoes) {
  const grpc::Status unavailable(StatusCode::UNAVAILABLE, "x");
  const grpc::Status deadline(StatusCode::DEADLINE_EXCEEDED, "x");
  const grpc::Status not_leader(StatusCode::FAILED_PRECONDITION, "etcdserver: not leader");
  EXPECT_EQ(ClassifyEtcdAttempt(grpc::Status::OK, true, false, false), EtcdAttempt::kAnswered);
  // A write: unknown unless the trailer says not applied.
  EXPECT_EQ(ClassifyEtcdAttempt(unavailable, true, false, false), EtcdAttempt::kIndeterminate);
  EXPECT_EQ(ClassifyEtcdAttempt(unavailable, true, true, false), EtcdAttempt::kRetry);
  EXPECT_EQ(ClassifyEtcdAttempt(deadline, true, false, false), EtcdAttempt::kIndeterminate);
  EXPECT_EQ(ClassifyEtcdAttempt(deadline, true, true, false), EtcdAttempt::kIndeterminate);
  // A read is tried again.
  EXPECT_EQ(ClassifyEtcdAttempt(unavailable, false, false, false), EtcdAttempt::kRetry);
  EXPECT_EQ(ClassifyEtcdAttempt(deadline, false, false, false), EtcdAttempt::kRetry);
  // A refusal naming the leader is followed; without a hint it ends the call.
  EXPECT_EQ(ClassifyEtcdAttempt(not_leader, true, false, true), EtcdAttempt::kRedirect);
  EXPECT_EQ(ClassifyEtcdAttempt(not_leader, true, false, false), EtcdAttempt::kFinal);
  EXPECT_EQ(ClassifyEtcdAttempt(grpc::Status(StatusCode::INVALID_ARGUMENT, "x"), true, true, false),
            EtcdAttempt::kFinal);
  // How the worker records a write.
  EXPECT_EQ(WriteOutcome(grpc::Status::OK, false), check::Outcome::kOk);
  EXPECT_EQ(WriteOutcome(unavailable, false), check::Outcome::kUnknown);
  EXPECT_EQ(WriteOutcome(unavailable, true), check::Outcome::kFail);
}

TEST(EtcdChaosKv, ConvertsTransactionsBothWays) {
  TxnRequest t;
  const std::string expected = "old";
  AddValueCompare(&t, "k1", &expected);
  AddValueCompare(&t, "k2", nullptr);
  t.add_success()->mutable_request_put()->set_key("k1");
  t.add_failure()->mutable_request_range()->set_key("k1");
  t.add_failure()->mutable_request_delete_range()->set_key("k2");
  etcdserverpb::TxnRequest e;
  ASSERT_TRUE(ToEtcd(t, &e).ok());
  ASSERT_EQ(e.compare_size(), 2);
  EXPECT_EQ(e.compare(0).target(), etcdserverpb::Compare::VALUE);
  EXPECT_EQ(e.compare(0).value(), "old");
  EXPECT_EQ(e.compare(1).target(), etcdserverpb::Compare::CREATE);
  EXPECT_EQ(e.compare(1).target_union_case(), etcdserverpb::Compare::kCreateRevision);
  EXPECT_EQ(e.compare(1).create_revision(), 0);
  EXPECT_TRUE(e.success(0).has_request_put());
  EXPECT_TRUE(e.failure(0).has_request_range());
  EXPECT_TRUE(e.failure(1).has_request_delete_range());
  TxnRequest nested;
  nested.add_success()->mutable_request_txn();
  etcdserverpb::TxnRequest unused;
  EXPECT_EQ(ToEtcd(nested, &unused).error_code(), StatusCode::INVALID_ARGUMENT);

  etcdserverpb::TxnResponse answer;
  answer.mutable_header()->set_revision(42);
  answer.set_succeeded(false);
  mvccpb::KeyValue* kv = answer.add_responses()->mutable_response_range()->add_kvs();
  kv->set_key("k1");
  kv->set_value("v");
  kv->set_mod_revision(40);
  answer.add_responses()->mutable_response_put()->mutable_header()->set_revision(42);
  TxnResponse v1;
  FromEtcd(answer, &v1);
  EXPECT_EQ(v1.header().revision(), 42);
  EXPECT_FALSE(v1.succeeded());
  ASSERT_EQ(v1.responses_size(), 2);
  EXPECT_EQ(v1.responses(0).response_range().kvs(0).value(), "v");
  EXPECT_EQ(v1.responses(0).response_range().kvs(0).mod_revision(), 40);
  EXPECT_EQ(v1.responses(1).response_put().revision(), 42);
}

// ---- fake members ----

// One member's KV service: each Put and Range is answered by `answer`
// (status and trailers), with revision 7 when it says OK.
class FakeMember final : public etcdserverpb::KV::Service {
 public:
  using Answer = std::function<grpc::Status(grpc::ServerContext*)>;
  explicit FakeMember(Answer answer) : answer_(std::move(answer)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeMember() override { server_->Shutdown(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int calls() const { return calls_.load(); }

  grpc::Status Put(grpc::ServerContext* ctx, const etcdserverpb::PutRequest*,
                   etcdserverpb::PutResponse* resp) override {
    ++calls_;
    resp->mutable_header()->set_revision(7);
    return answer_(ctx);
  }
  grpc::Status Range(grpc::ServerContext* ctx, const etcdserverpb::RangeRequest* req,
                     etcdserverpb::RangeResponse* resp) override {
    ++calls_;
    resp->mutable_header()->set_revision(7);
    mvccpb::KeyValue* kv = resp->add_kvs();
    kv->set_key(req->key());
    kv->set_value("v");
    resp->set_count(1);
    return answer_(ctx);
  }

 private:
  Answer answer_;
  int port_ = 0;
  std::atomic<int> calls_{0};
  std::unique_ptr<grpc::Server> server_;
};

grpc::Status Ok(grpc::ServerContext*) { return grpc::Status::OK; }

grpc::Status NotApplied(grpc::ServerContext* ctx) {
  ctx->AddTrailingMetadata("raftkv-not-applied", "1");
  return grpc::Status(StatusCode::UNAVAILABLE, "etcdserver: no leader");
}

grpc::Status LeaderChanged(grpc::ServerContext*) {
  return grpc::Status(StatusCode::UNAVAILABLE, "etcdserver: leader changed");
}

EtcdChaosKv Client(const std::vector<std::string>& endpoints, int timeout_ms = 2000) {
  EtcdChaosOptions options;
  options.endpoints = endpoints;
  options.stale_endpoint = endpoints.front();
  options.timeout_ms = timeout_ms;
  options.rpc_timeout_ms = 300;
  options.retry_seed = 1;
  return EtcdChaosKv(options);
}

TEST(EtcdChaosKv, RetriesAWriteOnlyWhenItWasNotApplied) {
  FakeMember a(&NotApplied), b(&Ok);
  EtcdChaosKv kv = Client({a.address(), b.address()});
  PutResponse resp;
  ASSERT_TRUE(kv.Put("k", "v", &resp).ok());
  EXPECT_EQ(resp.revision(), 7);
  EXPECT_EQ(a.calls(), 1);
  EXPECT_EQ(b.calls(), 1);

  FakeMember c(&LeaderChanged), d(&Ok);
  EtcdChaosKv unsure = Client({c.address(), d.address()});
  const grpc::Status s = unsure.Put("k", "v", &resp);
  EXPECT_EQ(s.error_code(), StatusCode::UNAVAILABLE);
  EXPECT_FALSE(unsure.NotApplied());
  EXPECT_EQ(WriteOutcome(s, unsure.NotApplied()), check::Outcome::kUnknown);
  EXPECT_EQ(d.calls(), 0) << "an indeterminate write must not be retried";
}

TEST(EtcdChaosKv, AWriteRefusedEverywhereIsKnownNotApplied) {
  FakeMember a(&NotApplied), b(&NotApplied);
  EtcdChaosKv kv = Client({a.address(), b.address()}, 600);
  PutResponse resp;
  const grpc::Status s = kv.Put("k", "v", &resp);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(kv.NotApplied());
  EXPECT_EQ(WriteOutcome(s, kv.NotApplied()), check::Outcome::kFail);
  EXPECT_GE(a.calls() + b.calls(), 2);
}

TEST(EtcdChaosKv, FollowsTheLeaderHintAndRetriesReads) {
  FakeMember leader(&Ok);
  const std::string leader_address = leader.address();
  FakeMember follower([&](grpc::ServerContext* ctx) {
    ctx->AddTrailingMetadata("raftkv-leader-addr", leader_address);
    return grpc::Status(StatusCode::FAILED_PRECONDITION, "etcdserver: not leader");
  });
  EtcdChaosKv kv = Client({follower.address(), leader_address});
  PutResponse resp;
  ASSERT_TRUE(kv.Put("k", "v", &resp).ok());
  EXPECT_EQ(follower.calls(), 1);
  EXPECT_EQ(leader.calls(), 1);
  ASSERT_TRUE(kv.Put("k", "v", &resp).ok());
  EXPECT_EQ(follower.calls(), 1) << "the leader it learned is tried first";

  FakeMember flaky(&LeaderChanged);
  EtcdChaosKv reader = Client({flaky.address(), leader_address});
  std::string value;
  bool found = false;
  ASSERT_TRUE(reader.Get("k", false, &value, &found).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(value, "v");
  EXPECT_EQ(flaky.calls(), 1);
}

TEST(EtcdChaosKv, AWriteIsNotSentToAMemberThatDoesNotConnect) {
  FakeMember up(&Ok);
  std::string down;
  {
    FakeMember gone(&Ok);
    down = gone.address();
  }
  EtcdChaosKv kv = Client({down, up.address()});
  PutResponse resp;
  ASSERT_TRUE(kv.Put("k", "v", &resp).ok());
  EXPECT_EQ(up.calls(), 1);
}

// ---- the checker on what the etcd workers record ----

check::Operation EtcdPut(int client, const std::string& value, const grpc::Status& s,
                         bool not_applied, int64_t invoke, int64_t ret) {
  check::Operation op;
  op.client = client;
  op.key = "k0";
  op.type = check::OpType::kPut;
  op.value = value;
  op.outcome = WriteOutcome(s, not_applied);
  op.invoke_ns = invoke;
  op.return_ns = ret;
  return op;
}

check::Operation Read(int client, const std::string& value, int64_t invoke, int64_t ret) {
  check::Operation op;
  op.client = client;
  op.key = "k0";
  op.type = check::OpType::kGet;
  op.found = true;
  op.result = value;
  op.invoke_ns = invoke;
  op.return_ns = ret;
  return op;
}

TEST(EtcdChaosKv, TheCheckerFailsAWrongMappingOfAnEtcdWrite) {
  // An etcd Put whose answer was lost (UNAVAILABLE, no trailer) but that was
  // applied: a later read sees its value.
  const grpc::Status lost(StatusCode::UNAVAILABLE, "etcdserver: leader changed");
  std::vector<check::Operation> right = {EtcdPut(4, "a", grpc::Status::OK, false, 0, 10),
                                         EtcdPut(5, "b", lost, false, 20, 30),
                                         Read(0, "b", 40, 50)};
  EXPECT_TRUE(check::CheckHistory(right, std::chrono::seconds(5)).linearizable);
  // Recorded as not applied, the history is not linearizable: a mapping that
  // hid the doubt would make the run fail on a correct server...
  std::vector<check::Operation> wrong = right;
  wrong[1] = EtcdPut(5, "b", lost, true, 20, 30);
  EXPECT_EQ(wrong[1].outcome, check::Outcome::kFail);
  EXPECT_FALSE(check::CheckHistory(wrong, std::chrono::seconds(5)).linearizable);
  // ... and a read through etcd of a value nobody wrote fails the check.
  std::vector<check::Operation> stale = {EtcdPut(4, "a", grpc::Status::OK, false, 0, 10),
                                         EtcdPut(4, "b", grpc::Status::OK, false, 20, 30),
                                         Read(5, "a", 40, 50)};
  const check::CheckResult r = check::CheckHistory(stale, std::chrono::seconds(5));
  EXPECT_FALSE(r.linearizable);
  EXPECT_EQ(r.violations, 1u);
}

}  // namespace
}  // namespace raftkv::chaos
