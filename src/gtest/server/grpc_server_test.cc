// Tests of GrpcServer (server/grpc_server.h): a real node behind a real
// server on 127.0.0.1, called through the generated KV and Raft stubs, the
// async client API and KvClient.
#include "server/grpc_server.h"

#include <gtest/gtest.h>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <filesystem>
#include <random>

#include "client/kv_client.h"
#include "gtest/common/fake_peers.h"
#include "kv/kv_state_machine.h"
#include "storage/snapshot_format.h"
#include "proto/internal.h"
#include "server/peer/peer_client.h"
#include "gtest/common/service_test_util.h"
#include "gtest/server/server_fixture.h"

namespace raftkv {
namespace {

using namespace std::chrono_literals;
using testing_util::FakePeers;
using testing_util::TempDir;
using testing_util::WaitFor;

// ---------------------------------------------------------------------------
// A single-member cluster: the node leads and commits on its own.
// ---------------------------------------------------------------------------

TEST_F(ServerTest, PutGetDelete) {
  StartSingleLeader();
  PutResponse put;
  grpc::Status s = Put("fruit", "apple", &put);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_GE(put.index(), 2u);
  EXPECT_GE(put.term(), 1u);

  GetResponse get;
  s = Get("fruit", &get);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(get.found());
  EXPECT_EQ(get.value(), "apple");
  EXPECT_GE(get.applied_index(), put.index());

  PutResponse put2;
  ASSERT_TRUE(Put("fruit", "pear", &put2).ok());
  EXPECT_GT(put2.index(), put.index());
  ASSERT_TRUE(Get("fruit", &get).ok());
  EXPECT_EQ(get.value(), "pear");

  DeleteResponse del;
  s = Delete("fruit", &del);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(del.existed());
  EXPECT_GT(del.index(), put2.index());
  EXPECT_EQ(del.term(), put2.term());

  ASSERT_TRUE(Get("fruit", &get).ok());
  EXPECT_FALSE(get.found());
  EXPECT_EQ(get.value(), "");

  DeleteResponse del2;
  ASSERT_TRUE(Delete("fruit", &del2).ok());
  EXPECT_FALSE(del2.existed());
  EXPECT_GT(del2.index(), del.index());
}

TEST_F(ServerTest, BinaryKeysAndValues) {
  StartSingleLeader();
  const std::string key("k\0\xff\x01", 4);
  const std::string value("\0\0v\xfe", 4);
  ASSERT_TRUE(Put(key, value).ok());
  GetResponse get;
  ASSERT_TRUE(Get(key, &get).ok());
  EXPECT_TRUE(get.found());
  EXPECT_EQ(get.value(), value);
  ASSERT_TRUE(Get(std::string("k\0\xff", 3), &get).ok());
  EXPECT_FALSE(get.found());
  // An empty value is a value.
  ASSERT_TRUE(Put("empty", "").ok());
  ASSERT_TRUE(Get("empty", &get).ok());
  EXPECT_TRUE(get.found());
  EXPECT_EQ(get.value(), "");
}

TEST_F(ServerTest, GetMissingKey) {
  StartSingleLeader();
  GetResponse get;
  grpc::Status s = Get("never-written", &get);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_FALSE(get.found());
  EXPECT_EQ(get.value(), "");
  EXPECT_GE(get.applied_index(), 1u);
  ASSERT_TRUE(Get("never-written", &get, /*stale=*/true).ok());
  EXPECT_FALSE(get.found());
}

TEST_F(ServerTest, StatusOfALeader) {
  StartSingleLeader();
  PutResponse put;
  ASSERT_TRUE(Put("a", "b", &put).ok());
  StatusResponse st;
  grpc::Status s = GetStatus(&st);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_EQ(st.id(), 1u);
  EXPECT_EQ(st.address(), kSelfAddress);
  EXPECT_EQ(st.role(), "leader");
  EXPECT_GT(st.term(), 0u);
  EXPECT_EQ(st.term(), put.term());
  EXPECT_GE(st.commit_index(), put.index());
  EXPECT_GE(st.applied_index(), put.index());
  EXPECT_GE(st.commit_index(), 1u);
  EXPECT_GE(st.applied_index(), 1u);
  EXPECT_EQ(st.leader_id(), st.id());
  EXPECT_EQ(st.leader_address(), kSelfAddress);
  EXPECT_GE(st.last_log_index(), put.index());
  EXPECT_GE(st.durable_index(), put.index());
  ASSERT_EQ(st.voters_size(), 1);
  EXPECT_EQ(st.voters(0), 1u);
}

TEST_F(ServerTest, StaleGet) {
  StartSingleLeader();
  PutResponse put;
  ASSERT_TRUE(Put("s", "stale-ok", &put).ok());
  GetResponse get;
  grpc::Status s = Get("s", &get, /*stale=*/true);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  // A single member applies before acknowledging the write.
  EXPECT_TRUE(get.found());
  EXPECT_EQ(get.value(), "stale-ok");
  EXPECT_GE(get.applied_index(), put.index());
}

TEST_F(ServerTest, Echo) {
  StartSingleLeader();
  for (const std::string& payload :
       {std::string(), std::string("hello"), std::string("\0\x01\xff", 3), std::string(1 << 20, 'x')}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    EchoRequest req;
    req.set_payload(payload);
    EchoResponse resp;
    grpc::Status s = kv_->Echo(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << StatusText(s);
    EXPECT_EQ(resp.payload(), payload);
  }
}

TEST_F(ServerTest, InvalidArguments) {
  StartSingleLeader();
  // Empty keys.
  {
    grpc::Status s = Put("", "v");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
    EXPECT_CONTAINS(s.error_message(), "empty");
    GetResponse get;
    s = Get("", &get);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
    s = Get("", &get, /*stale=*/true);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
    DeleteResponse del;
    s = Delete("", &del);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  }
  // Keys over the limit: the message names the size, the limit and the flag.
  const std::string long_key(kMaxKey + 1, 'k');
  {
    grpc::Status s = Put(long_key, "v");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
    EXPECT_CONTAINS(s.error_message(), std::to_string(kMaxKey + 1));
    EXPECT_CONTAINS(s.error_message(), "limit is " + std::to_string(kMaxKey));
    EXPECT_CONTAINS(s.error_message(), "max_key_bytes");
    GetResponse get;
    s = Get(long_key, &get);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
    EXPECT_CONTAINS(s.error_message(), "max_key_bytes");
    DeleteResponse del;
    s = Delete(long_key, &del);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
    EXPECT_CONTAINS(s.error_message(), "max_key_bytes");
  }
  // Values over the limit.
  {
    grpc::Status s = Put("k", std::string(kMaxValue + 1, 'v'));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
    EXPECT_CONTAINS(s.error_message(), std::to_string(kMaxValue + 1));
    EXPECT_CONTAINS(s.error_message(), "limit is " + std::to_string(kMaxValue));
    EXPECT_CONTAINS(s.error_message(), "max_value_bytes");
  }
  // Exactly at the limits is fine.
  const std::string max_key(kMaxKey, 'k');
  grpc::Status s = Put(max_key, std::string(kMaxValue, 'v'));
  ASSERT_TRUE(s.ok()) << StatusText(s);
  GetResponse get;
  ASSERT_TRUE(Get(max_key, &get).ok());
  EXPECT_EQ(get.value().size(), kMaxValue);
  // Nothing rejected was written.
  ASSERT_TRUE(Get("k", &get).ok());
  EXPECT_FALSE(get.found());
  EXPECT_EQ(node_->state_machine().Size(), 1u);
}

TEST_F(ServerTest, CompareAndSwapSwapsOnMatch) {
  StartSingleLeader();
  ASSERT_TRUE(Put("reg", "1").ok());
  const std::string expected = "1";
  CompareAndSwapResponse resp;
  grpc::Status s = Cas("reg", &expected, "2", &resp);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(resp.swapped());
  EXPECT_TRUE(resp.found());
  EXPECT_EQ(resp.current(), "1");
  EXPECT_GT(resp.index(), 0u);
  EXPECT_GT(resp.term(), 0u);
  GetResponse get;
  ASSERT_TRUE(Get("reg", &get).ok());
  EXPECT_EQ(get.value(), "2");
}

TEST_F(ServerTest, CompareAndSwapMismatchReportsTheCurrentValue) {
  StartSingleLeader();
  ASSERT_TRUE(Put("reg", "actual").ok());
  const std::string expected = "stale";
  CompareAndSwapResponse resp;
  grpc::Status s = Cas("reg", &expected, "new", &resp);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_FALSE(resp.swapped());
  EXPECT_TRUE(resp.found());
  EXPECT_EQ(resp.current(), "actual");
  // An expected value on an absent key does not swap either.
  s = Cas("absent", &expected, "new", &resp);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_FALSE(resp.swapped());
  EXPECT_FALSE(resp.found());
  GetResponse get;
  ASSERT_TRUE(Get("reg", &get).ok());
  EXPECT_EQ(get.value(), "actual");
  ASSERT_TRUE(Get("absent", &get).ok());
  EXPECT_FALSE(get.found());
}

TEST_F(ServerTest, CompareAndSwapCreateOnly) {
  StartSingleLeader();
  CompareAndSwapResponse resp;
  grpc::Status s = Cas("new-key", nullptr, "first", &resp);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(resp.swapped());
  EXPECT_FALSE(resp.found());
  s = Cas("new-key", nullptr, "second", &resp);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_FALSE(resp.swapped());
  EXPECT_TRUE(resp.found());
  EXPECT_EQ(resp.current(), "first");
  GetResponse get;
  ASSERT_TRUE(Get("new-key", &get).ok());
  EXPECT_EQ(get.value(), "first");
}

TEST_F(ServerTest, CompareAndSwapInvalidArguments) {
  StartSingleLeader();
  ASSERT_TRUE(Put("k", "v").ok());
  const std::string v = "v";
  CompareAndSwapResponse resp;
  grpc::Status s = Cas("", &v, "x", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "empty");
  s = Cas(std::string(kMaxKey + 1, 'k'), &v, "x", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "max_key_bytes");
  s = Cas("k", &v, std::string(kMaxValue + 1, 'x'), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "value is " + std::to_string(kMaxValue + 1));
  const std::string long_expected(kMaxValue + 1, 'v');
  s = Cas("k", &long_expected, "x", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "expected is " + std::to_string(kMaxValue + 1));
  EXPECT_CONTAINS(s.error_message(), "max_value_bytes");
  // Nothing rejected was applied.
  GetResponse get;
  ASSERT_TRUE(Get("k", &get).ok());
  EXPECT_EQ(get.value(), "v");
  EXPECT_EQ(node_->state_machine().Size(), 1u);
}

TEST_F(ServerTest, KvClientCompareAndSwap) {
  StartSingleLeader();
  ClientOptions options;
  options.endpoints = {address_};
  KvClient client(options);
  bool swapped = false, found = false;
  std::string current = "stale";
  grpc::Status s = client.CompareAndSwap("c", nullptr, "1", &swapped, &found, &current);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(swapped);
  EXPECT_FALSE(found);
  EXPECT_EQ(current, "");
  const std::string wrong = "0";
  s = client.CompareAndSwap("c", &wrong, "2", &swapped, &found, &current);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_FALSE(swapped);
  EXPECT_TRUE(found);
  EXPECT_EQ(current, "1");
  const std::string right = "1";
  s = client.CompareAndSwap("c", &right, "2", &swapped);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(swapped);
  s = client.CompareAndSwap("", &right, "2", &swapped);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
}

// Many calls in flight at once through the async client API: every Put
// succeeds with its own log index, and every value is then readable.
TEST_F(ServerTest, ManyConcurrentAsyncPuts) { RunManyConcurrentAsyncPuts(Setup()); }

// The same with the answered calls handed to the completion queues in
// batches (--finish_on_cq): every call is finished exactly once, and the
// server shuts down with batches possibly in flight.
TEST_F(ServerTest, ManyConcurrentAsyncPutsFinishedOnTheQueues) {
  Setup setup;
  setup.finish_on_cq = true;
  RunManyConcurrentAsyncPuts(setup);
}

void ServerTest::RunManyConcurrentAsyncPuts(const Setup& setup) {
  StartSingleLeader(setup);
  constexpr int kCalls = 2000;
  struct PutCall {
    grpc::ClientContext ctx;
    PutResponse resp;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<PutResponse>> rpc;
  };
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<PutCall>> puts;
  for (int i = 0; i < kCalls; ++i) {
    auto call = std::make_unique<PutCall>();
    call->ctx.set_deadline(In(30s));
    PutRequest req;
    req.set_key("async-" + std::to_string(i));
    req.set_value("value-" + std::to_string(i));
    call->rpc = kv_->PrepareAsyncPut(&call->ctx, req, &cq);
    call->rpc->StartCall();
    call->rpc->Finish(&call->resp, &call->status, call.get());
    puts.push_back(std::move(call));
  }
  std::set<void*> seen;
  for (int i = 0; i < kCalls; ++i) {
    void* tag = nullptr;
    bool ok = false;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_TRUE(ok);
    EXPECT_TRUE(seen.insert(tag).second) << "tag completed twice";
  }
  std::set<uint64_t> indexes;
  int failed = 0;
  for (const auto& call : puts) {
    if (!call->status.ok()) {
      if (++failed <= 5) ADD_FAILURE() << StatusText(call->status);
      continue;
    }
    indexes.insert(call->resp.index());
  }
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(indexes.size(), static_cast<size_t>(kCalls)) << "indexes must be distinct";

  // Read them all back, also asynchronously.
  struct GetCall {
    grpc::ClientContext ctx;
    GetResponse resp;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<GetResponse>> rpc;
  };
  std::vector<std::unique_ptr<GetCall>> gets;
  for (int i = 0; i < kCalls; ++i) {
    auto call = std::make_unique<GetCall>();
    call->ctx.set_deadline(In(30s));
    GetRequest req;
    req.set_key("async-" + std::to_string(i));
    call->rpc = kv_->PrepareAsyncGet(&call->ctx, req, &cq);
    call->rpc->StartCall();
    call->rpc->Finish(&call->resp, &call->status, call.get());
    gets.push_back(std::move(call));
  }
  for (int i = 0; i < kCalls; ++i) {
    void* tag = nullptr;
    bool ok = false;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_TRUE(ok);
  }
  int missing = 0;
  for (int i = 0; i < kCalls; ++i) {
    const GetCall& call = *gets[i];
    if (!call.status.ok() || !call.resp.found() ||
        call.resp.value() != "value-" + std::to_string(i)) {
      if (++missing <= 5) {
        ADD_FAILURE() << "async-" << i << ": " << StatusText(call.status) << " found="
                      << call.resp.found() << " value=" << call.resp.value();
      }
    }
  }
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(node_->state_machine().Size(), static_cast<size_t>(kCalls));
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
}

TEST_F(ServerTest, ConcurrentSyncClientsFromManyThreads) {
  StartSingleLeader();
  constexpr int kThreads = 8;
  constexpr int kOps = 50;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        const std::string key = "t" + std::to_string(t) + "-" + std::to_string(i);
        if (!Put(key, key).ok()) ++errors;
        GetResponse get;
        if (!Get(key, &get).ok() || get.value() != key) ++errors;
        StatusResponse st;
        if (!GetStatus(&st).ok()) ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(node_->state_machine().Size(), static_cast<size_t>(kThreads * kOps));
}

TEST_F(ServerTest, ExpiredDeadlineAndTheServerKeepsWorking) {
  StartSingleLeader();
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() - 1s);
    PutRequest req;
    req.set_key("late");
    req.set_value("v");
    PutResponse resp;
    grpc::Status s = kv_->Put(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << StatusText(s);
  }
  {
    // Already expired (a deadline of exactly "now" may still be ahead of the
    // clock when the call starts, and a fast answer can then beat it).
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() - 1ms);
    GetRequest req;
    req.set_key("late");
    GetResponse resp;
    grpc::Status s = kv_->Get(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << StatusText(s);
  }
  // Deadlines that expire while the call is in the server: each call either
  // completes or fails with DEADLINE_EXCEEDED, and nothing leaks or crashes.
  int ok_count = 0, late_count = 0;
  for (int i = 0; i < 200; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::microseconds(50 * (i % 20)));
    PutRequest req;
    req.set_key("racy-" + std::to_string(i));
    req.set_value("v");
    PutResponse resp;
    grpc::Status s = kv_->Put(&ctx, req, &resp);
    if (s.ok()) {
      ++ok_count;
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << StatusText(s);
      ++late_count;
    }
  }
  EXPECT_EQ(ok_count + late_count, 200);
  // Still serving.
  PutResponse put;
  grpc::Status s = Put("after", "deadlines", &put);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  GetResponse get;
  ASSERT_TRUE(Get("after", &get).ok());
  EXPECT_EQ(get.value(), "deadlines");
  StatusResponse st;
  ASSERT_TRUE(GetStatus(&st).ok());
  EXPECT_EQ(st.role(), "leader");
}

TEST_F(ServerTest, KvClientAgainstTheServer) {
  StartSingleLeader();
  ClientOptions options;
  options.endpoints = {address_};
  KvClient client(options);
  grpc::Status s = client.Put("client-key", "client-value");
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_EQ(client.last_leader(), address_);
  std::string value;
  bool found = false;
  ASSERT_TRUE(client.Get("client-key", &value, &found).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(value, "client-value");
  ASSERT_TRUE(client.Get("client-key", &value, &found, /*allow_stale=*/true).ok());
  EXPECT_EQ(value, "client-value");
  bool existed = false;
  ASSERT_TRUE(client.Delete("client-key", &existed).ok());
  EXPECT_TRUE(existed);
  ASSERT_TRUE(client.Get("client-key", &value, &found).ok());
  EXPECT_FALSE(found);
  StatusResponse st;
  ASSERT_TRUE(client.StatusOf(address_, &st).ok());
  EXPECT_EQ(st.role(), "leader");
  // Not retried: returned at once.
  s = client.Put("", "x");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
}

TEST_F(ServerTest, ShutdownWithCallsInFlight) {
  StartSingleLeader();
  constexpr int kCalls = 300;
  grpc::CompletionQueue cq;
  struct Call {
    grpc::ClientContext ctx;
    PutResponse resp;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<PutResponse>> rpc;
  };
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < kCalls; ++i) {
    auto call = std::make_unique<Call>();
    call->ctx.set_deadline(In(10s));
    PutRequest req;
    req.set_key("inflight-" + std::to_string(i));
    req.set_value("v");
    call->rpc = kv_->PrepareAsyncPut(&call->ctx, req, &cq);
    call->rpc->StartCall();
    call->rpc->Finish(&call->resp, &call->status, call.get());
    calls.push_back(std::move(call));
  }
  Shutdown();  // must neither hang nor crash; every call completes somehow
  for (int i = 0; i < kCalls; ++i) {
    void* tag = nullptr;
    bool ok = false;
    ASSERT_TRUE(cq.Next(&tag, &ok));
  }
  for (const auto& call : calls) {
    const auto code = call->status.error_code();
    EXPECT_TRUE(code == grpc::StatusCode::OK || code == grpc::StatusCode::UNAVAILABLE ||
                code == grpc::StatusCode::CANCELLED)
        << StatusText(call->status);
  }
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
}

// Large requests still arriving while the server shuts down. Each cycle
// starts a server, lets clients stream 1 MB Echo and Put calls at it, and
// shuts it down in the middle. A call whose request completes (ok == true)
// after Join() shut the completion queues down must not be re-posted: gRPC
// aborts on a request for a call on a shut-down queue
// (server_cc.cc: "assertion failed: grpc_server_request_registered_call(...)
// == GRPC_CALL_OK").
TEST_F(ServerTest, ShutdownWhileLargeRequestsArrive) {
  for (int cycle = 0; cycle < 5; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    Setup setup;  // one polling thread with a long queue of posted calls
    setup.cq_num = 1;
    setup.threads_per_cq = 1;
    setup.calls_per_cq = 500;
    StartSingleLeader(setup);  // reopens the same data directory after cycle 0
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    const std::string big(1 << 20, 'x');
    for (int t = 0; t < 4; ++t) {
      clients.emplace_back([&, t] {
        auto stub = KV::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
        for (int i = 0; !stop; ++i) {
          grpc::ClientContext ctx;
          ctx.set_deadline(In(2s));
          if (t % 2 == 0) {
            EchoRequest req;
            req.set_payload(big);
            EchoResponse resp;
            stub->Echo(&ctx, req, &resp);
          } else {
            PutRequest req;
            req.set_key("big");
            req.set_value(std::string(kMaxValue, 'v'));
            PutResponse resp;
            stub->Put(&ctx, req, &resp);
          }
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30 + 20 * cycle));
    Shutdown(/*grace_ms=*/0);
    stop = true;
    for (auto& c : clients) c.join();
  }
}

// A second server on a port that is already served must fail to start, as
// Start()'s "address in use" error promises. gRPC sets SO_REUSEPORT by
// default, so without GRPC_ARG_ALLOW_REUSEPORT=0 both bind and the kernel
// splits connections between them (two raftkv-servers started on one port by
// mistake would each get part of the clients and peers).
TEST_F(ServerTest, StartFailsOnAPortInUse) {
  StartSingleLeader();
  ServerOptions so;
  so.listen_address = address_;
  GrpcServer second(so, node_.get());
  Status s = second.Start();
  EXPECT_FALSE(s.ok()) << "a second server bound " << address_;
  EXPECT_CONTAINS(s.message(), address_);
}

TEST_F(ServerTest, StartFailsOnAnAddressNotLocal) {
  StartSingleLeader();
  {
    ServerOptions so;
    so.listen_address = "192.0.2.1:7001";  // TEST-NET-1: not an address of this host
    GrpcServer other(so, node_.get());
    Status s = other.Start();
    EXPECT_FALSE(s.ok());
    EXPECT_CONTAINS(s.message(), "192.0.2.1:7001");
    EXPECT_EQ(other.bound_port(), 0);
  }  // destroying a server that never started must not hang
  // The real server is unaffected.
  ASSERT_TRUE(Put("still", "here").ok());
}

// A port out of range must be refused, not silently wrapped modulo 65536
// (gRPC binds "127.0.0.1:99999" as port 34463).
TEST_F(ServerTest, StartRejectsAnOutOfRangePort) {
  StartSingleLeader();
  {
    ServerOptions so;
    so.listen_address = "127.0.0.1:99999";
    GrpcServer other(so, node_.get());
    Status s = other.Start();
    EXPECT_FALSE(s.ok()) << "bound port " << other.bound_port();
    EXPECT_CONTAINS(s.message(), "127.0.0.1:99999");
  }
  ASSERT_TRUE(Put("still", "here").ok());
}

// ---------------------------------------------------------------------------
// Server-side deadlines: a leader that cannot commit (its fake peers grant
// votes but never acknowledge appends) fails calls at max_request_timeout_ms.
// ---------------------------------------------------------------------------

TEST_F(ServerTest, ServerCapsCallsWithoutDeadline) {
  Setup setup;
  setup.members = 3;
  setup.election_ticks = 20;
  setup.grant_votes = true;
  setup.max_request_timeout_ms = 100;
  StartNode(setup);
  grpc::Status s;
  for (int attempt = 0; attempt < 20; ++attempt) {
    ASSERT_TRUE(WaitFor([&] { return node_->GetStatus().role == raft::Role::kLeader; }));
    grpc::ClientContext ctx;  // no client deadline: the server's cap applies
    PutRequest req;
    req.set_key("k");
    req.set_value("v");
    PutResponse resp;
    const auto start = std::chrono::steady_clock::now();
    s = kv_->Put(&ctx, req, &resp);
    if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
      EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
      break;
    }
    // Refused because leadership was lost (check-quorum) just then: retry.
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << StatusText(s);
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "deadline");
  // Still serving other calls.
  StatusResponse st;
  ASSERT_TRUE(GetStatus(&st).ok());
  EXPECT_EQ(st.voters_size(), 3);
}

// ---------------------------------------------------------------------------
// Three members, the peers dead: the test plays member 2's leader role
// through the Peer service to make member 1 a follower.
// ---------------------------------------------------------------------------

class FollowerServerTest : public ServerTest {
 protected:
  void SetUp() override {
    Setup setup;
    setup.members = 3;
    setup.election_ticks = 40;  // 200-400 ms without a heartbeat before campaigning
    setup.real_peers = true;
    setup.forward_to_leader = Forwarding();
    StartNode(setup);
  }
  virtual bool Forwarding() const { return false; }

  grpc::Status Append(uint64_t term, uint64_t leader, uint64_t to, uint64_t prev_index,
                      uint64_t prev_term, std::vector<Entry> entries, uint64_t commit,
                      AppendEntriesResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    AppendEntriesRequest req;
    req.set_term(term);
    req.set_leader_id(leader);
    req.set_to(to);
    req.set_prev_log_index(prev_index);
    req.set_prev_log_term(prev_term);
    for (Entry& e : entries) *req.add_entries() = std::move(e);
    req.set_leader_commit(commit);
    return raft_->AppendEntries(&ctx, req, resp);
  }

  // Keeps member 1 following leader 2 while the test runs.
  void StartHeartbeats(uint64_t term, uint64_t match) {
    heartbeat_ = std::thread([this, term, match] {
      while (!stop_heartbeats_) {
        AppendEntriesResponse resp;
        Append(term, 2, 1, match, match == 0 ? 0 : term, {}, match, &resp);
        std::this_thread::sleep_for(20ms);
      }
    });
  }

  void TearDown() override {
    stop_heartbeats_ = true;
    if (heartbeat_.joinable()) heartbeat_.join();
    ServerTest::TearDown();
  }

  std::atomic<bool> stop_heartbeats_{false};
  std::thread heartbeat_;
};

TEST_F(FollowerServerTest, FollowerRedirectsToTheLeader) {
  Command cmd;
  cmd.set_op(Command::PUT);
  cmd.set_key("replicated");
  cmd.set_value("from-leader-2");
  Entry e;
  e.set_term(3);
  e.set_index(1);
  e.set_type(ENTRY_COMMAND);
  e.set_data(cmd.SerializeAsString());
  AppendEntriesResponse resp;
  grpc::Status s = Append(3, 2, 1, 0, 0, {e}, 1, &resp);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(resp.success());
  EXPECT_EQ(resp.term(), 3u);
  EXPECT_EQ(resp.match_index(), 1u);
  StartHeartbeats(3, 1);

  // The entry is applied and served by stale reads.
  ASSERT_TRUE(WaitFor([&] { return node_->state_machine().AppliedIndex() >= 1; }));
  GetResponse get;
  s = Get("replicated", &get, /*stale=*/true);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(get.found());
  EXPECT_EQ(get.value(), "from-leader-2");

  // Writes and linearizable reads are redirected to member 2.
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    PutRequest req;
    req.set_key("k");
    req.set_value("v");
    PutResponse put;
    s = kv_->Put(&ctx, req, &put);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << StatusText(s);
    EXPECT_CONTAINS(s.error_message(), "not leader");
    EXPECT_CONTAINS(s.error_message(), "127.0.0.1:1");
    EXPECT_EQ(Trailer(ctx, kLeaderIdMetadataKey), "2");
    EXPECT_EQ(Trailer(ctx, kLeaderAddrMetadataKey), "127.0.0.1:1");
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    GetRequest req;
    req.set_key("replicated");
    GetResponse g;
    s = kv_->Get(&ctx, req, &g);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << StatusText(s);
    EXPECT_EQ(Trailer(ctx, kLeaderAddrMetadataKey), "127.0.0.1:1");
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    DeleteRequest req;
    req.set_key("replicated");
    DeleteResponse d;
    s = kv_->Delete(&ctx, req, &d);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << StatusText(s);
    EXPECT_EQ(Trailer(ctx, kLeaderIdMetadataKey), "2");
  }
  StatusResponse st;
  ASSERT_TRUE(GetStatus(&st).ok());
  EXPECT_EQ(st.role(), "follower");
  EXPECT_EQ(st.term(), 3u);
  EXPECT_EQ(st.leader_id(), 2u);
  EXPECT_EQ(st.leader_address(), "127.0.0.1:1");
  EXPECT_EQ(st.commit_index(), 1u);
  EXPECT_EQ(st.applied_index(), 1u);
  EXPECT_EQ(st.durable_index(), 1u);

  // Leader stickiness: while member 2 is heard from, a vote for member 3 in
  // a later term is refused.
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    RequestVoteRequest req;
    req.set_term(9);
    req.set_candidate_id(3);
    req.set_to(1);
    req.set_last_log_index(1);
    req.set_last_log_term(3);
    RequestVoteResponse vote;
    s = raft_->RequestVote(&ctx, req, &vote);
    ASSERT_TRUE(s.ok()) << StatusText(s);
    EXPECT_FALSE(vote.granted());
  }
}

// With forwarding on, a follower sends writes and linearizable reads to its
// leader; here the leader (member 2 at 127.0.0.1:1) is a dead address, so
// the forward fails: UNAVAILABLE naming the leader, with the hint trailers.
// A call already forwarded by another member is refused, never forwarded
// again. Tear-down with forwards in flight must not hang.
class ForwardingFollowerServerTest : public FollowerServerTest {
 protected:
  bool Forwarding() const override { return true; }
};

TEST_F(ForwardingFollowerServerTest, ForwardsToTheLeaderAndNeverForwardsTwice) {
  AppendEntriesResponse resp;
  ASSERT_TRUE(Append(3, 2, 1, 0, 0, {}, 0, &resp).ok());
  StartHeartbeats(3, 0);
  ASSERT_TRUE(WaitFor([&] { return node_->KnownLeader() == 2; }));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    PutRequest req;
    req.set_key("k");
    req.set_value("v");
    PutResponse put;
    grpc::Status s = kv_->Put(&ctx, req, &put);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << StatusText(s);
    EXPECT_CONTAINS(s.error_message(), "forwarded to the leader (member 2 at 127.0.0.1:1)");
    EXPECT_EQ(Trailer(ctx, kLeaderIdMetadataKey), "2");
    EXPECT_EQ(Trailer(ctx, kLeaderAddrMetadataKey), "127.0.0.1:1");
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    ctx.AddMetadata(kForwardedMetadataKey, "3");
    PutRequest req;
    req.set_key("k");
    req.set_value("v");
    PutResponse put;
    grpc::Status s = kv_->Put(&ctx, req, &put);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << StatusText(s);
    EXPECT_EQ(Trailer(ctx, kLeaderAddrMetadataKey), "127.0.0.1:1");
  }
  {  // a serializable read stays here
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    RangeRequest req;
    req.set_key("a");
    req.set_range_end("z");
    req.set_serializable(true);
    RangeResponse range;
    grpc::Status s = kv_->Range(&ctx, req, &range);
    EXPECT_TRUE(s.ok()) << StatusText(s);
  }
  // Forwards in flight while the server shuts down (each waits for the
  // dead leader until cancelled).
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([this] {
      grpc::ClientContext ctx;
      ctx.set_deadline(In(10s));
      GetRequest req;
      req.set_key("k");
      GetResponse get;
      kv_->Get(&ctx, req, &get);
    });
  }
  std::this_thread::sleep_for(50ms);
  stop_heartbeats_ = true;
  heartbeat_.join();
  Shutdown(/*grace_ms=*/0);
  for (auto& c : clients) c.join();
}

// Once the connection to the leader is known down (the first forward failed
// to connect), a follower sends nothing more and says the write was not
// applied, so that even a write without a session may be retried.
TEST_F(ForwardingFollowerServerTest, ALeaderKnownDownIsReportedAsNotApplied) {
  AppendEntriesResponse resp;
  ASSERT_TRUE(Append(3, 2, 1, 0, 0, {}, 0, &resp).ok());
  StartHeartbeats(3, 0);
  ASSERT_TRUE(WaitFor([&] { return node_->KnownLeader() == 2; }));
  bool not_applied = false;
  for (int attempt = 0; attempt < 50 && !not_applied; ++attempt) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    CompareAndSwapRequest req;  // not idempotent: the case the trailer is for
    req.set_key("k");
    req.set_value("v");
    CompareAndSwapResponse cas;
    grpc::Status s = kv_->CompareAndSwap(&ctx, req, &cas);
    ASSERT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << StatusText(s);
    EXPECT_EQ(Trailer(ctx, kLeaderIdMetadataKey), "2");
    EXPECT_EQ(Trailer(ctx, kLeaderAddrMetadataKey), "127.0.0.1:1");
    if (Trailer(ctx, kNotAppliedMetadataKey) == "1") {
      not_applied = true;
      EXPECT_CONTAINS(s.error_message(), "cannot reach the leader (member 2 at 127.0.0.1:1)");
    } else {  // the attempt that found the connection down: outcome unknown
      EXPECT_CONTAINS(s.error_message(), "forwarded to the leader (member 2 at 127.0.0.1:1)");
      std::this_thread::sleep_for(20ms);
    }
  }
  EXPECT_TRUE(not_applied) << "no refusal said the write was not applied";
}

TEST_F(FollowerServerTest, NoLeaderIsUnavailable) {
  // Nobody heartbeats and the peers are dead: member 1 never leads.
  std::this_thread::sleep_for(50ms);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(10s));
  PutRequest req;
  req.set_key("k");
  req.set_value("v");
  PutResponse put;
  grpc::Status s = kv_->Put(&ctx, req, &put);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "no leader");
  EXPECT_EQ(Trailer(ctx, kLeaderIdMetadataKey), "");
  // Nothing was proposed: the server says so, and a CAS may be retried.
  EXPECT_EQ(Trailer(ctx, kNotAppliedMetadataKey), "1");
}

// Without a session, a CAS whose attempt failed with an unknown outcome is
// not retried: here the connection cannot be made, which the client cannot
// tell apart from one dropped after the server accepted the call. A Put is
// retried until timeout.
TEST(KvClientCasTest, UnknownOutcomeIsNotRetried) {
  ClientOptions options;
  options.endpoints = {"127.0.0.1:1"};  // nothing listens on port 1
  options.timeout_ms = 3000;
  options.use_session = false;
  KvClient client(options);
  const auto start = std::chrono::steady_clock::now();
  bool swapped = true;
  grpc::Status s = client.CompareAndSwap("k", nullptr, "v", &swapped);
  const auto cas_time = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "not retried");
  EXPECT_LT(cas_time, 1500ms);
  const auto put_start = std::chrono::steady_clock::now();
  s = client.Put("k", "v");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << StatusText(s);
  EXPECT_GE(std::chrono::steady_clock::now() - put_start, 2500ms);
}

TEST_F(FollowerServerTest, PeerServiceChecksSenderAndRecipient) {
  AppendEntriesResponse resp;
  // Addressed to another member.
  grpc::Status s = Append(1, 2, 3, 0, 0, {}, 0, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "member 3");
  // From itself, or from member 0.
  s = Append(1, 1, 1, 0, 0, {}, 0, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "sender 1");
  s = Append(1, 0, 1, 0, 0, {}, 0, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    RequestVoteRequest req;
    req.set_term(5);
    req.set_candidate_id(0);
    req.set_to(1);
    RequestVoteResponse vote;
    s = raft_->RequestVote(&ctx, req, &vote);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    RequestVoteRequest req;
    req.set_term(5);
    req.set_candidate_id(2);
    req.set_to(2);
    RequestVoteResponse vote;
    s = raft_->RequestVote(&ctx, req, &vote);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << StatusText(s);
  }
  // None of it changed the node's term.
  EXPECT_LT(node_->GetStatus().term, 5u);
  // A member that is not in this member's configuration is a peer all the
  // same (it may have been added by a configuration this member has not
  // received yet): its request reaches the core and is answered.
  s = Append(1, 9, 1, 0, 0, {}, 0, &resp);
  EXPECT_TRUE(s.ok()) << StatusText(s);
}

Entry NoopEntry(uint64_t index, uint64_t term) {
  Entry e;
  e.set_index(index);
  e.set_term(term);
  e.set_type(ENTRY_NOOP);
  return e;
}

// Structurally malformed peer requests are refused with INVALID_ARGUMENT
// before they reach the core (raft::CheckPeerMessage; found by
// src/fuzz/fuzz_raft_step). An entry numbered past prev_log_index + 1 used to
// hit the CHECK in Raft::AppendToLog and abort the server.
TEST_F(FollowerServerTest, MalformedPeerRequestsAreRefused) {
  const auto entry = NoopEntry;
  AppendEntriesResponse resp;
  grpc::Status s = Append(3, 2, 1, 0, 0, {entry(5, 3)}, 0, &resp);  // a gap
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "index 5");
  s = Append(3, 2, 1, 0, 0, {entry(1, 2), entry(2, 1)}, 0, &resp);  // terms decrease
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  s = Append(3, 2, 1, 0, 0, {entry(1, 4)}, 0, &resp);  // entry term above the message's
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  s = Append(UINT64_MAX, 2, 1, 0, 0, {}, 0, &resp);  // a term that would wrap
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    RequestVoteRequest req;
    req.set_term(UINT64_MAX);
    req.set_candidate_id(2);
    req.set_to(1);
    RequestVoteResponse vote;
    s = raft_->RequestVote(&ctx, req, &vote);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  }
  // The node is still up, and a well-formed AppendEntries works.
  s = Append(3, 2, 1, 0, 0, {entry(1, 3)}, 0, &resp);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(resp.success());
  EXPECT_LT(node_->GetStatus().term, 4u);
}

// Peer.Append: appends on one stream are answered on it, in order, each
// once durable; a malformed one ends the stream with its status (the node
// keeps its log), and a new stream carries on.
TEST_F(FollowerServerTest, AnAppendStreamAnswersInOrderAndEndsOnAMalformedAppend) {
  const auto entry = NoopEntry;
  auto append = [](uint64_t prev, std::vector<Entry> entries, uint64_t seq) {
    AppendEntriesRequest req;
    req.set_term(3);
    req.set_leader_id(2);
    req.set_to(1);
    req.set_prev_log_index(prev);
    req.set_prev_log_term(prev == 0 ? 0 : 3);
    for (Entry& e : entries) *req.add_entries() = std::move(e);
    req.set_seq(seq);
    return req;
  };
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    auto stream = raft_->Append(&ctx);
    // Five appends written before any answer is read: pipelined.
    for (uint64_t i = 1; i <= 5; ++i) ASSERT_TRUE(stream->Write(append(i - 1, {entry(i, 3)}, i)));
    for (uint64_t i = 1; i <= 5; ++i) {
      AppendEntriesResponse resp;
      ASSERT_TRUE(stream->Read(&resp)) << "answer " << i;
      EXPECT_EQ(resp.seq(), i);
      EXPECT_TRUE(resp.success());
      EXPECT_EQ(resp.match_index(), i);
    }
    ASSERT_TRUE(stream->Write(append(5, {entry(7, 3)}, 6)));  // a gap: malformed
    AppendEntriesResponse resp;
    EXPECT_FALSE(stream->Read(&resp));
    const grpc::Status s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
    EXPECT_CONTAINS(s.error_message(), "index 7");
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    auto stream = raft_->Append(&ctx);
    ASSERT_TRUE(stream->Write(append(5, {entry(6, 3)}, 7)));
    AppendEntriesResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    EXPECT_TRUE(resp.success());
    EXPECT_EQ(resp.match_index(), 6u);
    ASSERT_TRUE(stream->WritesDone());
    EXPECT_FALSE(stream->Read(&resp));
    const grpc::Status s = stream->Finish();
    EXPECT_TRUE(s.ok()) << StatusText(s);
  }
}

// ---------------------------------------------------------------------------
// InstallSnapshot and TimeoutNow on a follower (member 1; the test plays
// leader 2)
// ---------------------------------------------------------------------------

// The bytes of a valid snapshot file: the state after PUT entries 1..index
// (keys snap-k<i>), all of term `term`, with the test cluster's configuration.
std::string SnapshotFileBytes(uint64_t index, uint64_t term) {
  KvStateMachine sm;
  for (uint64_t i = 1; i <= index; ++i) {
    Command cmd;
    cmd.set_op(Command::PUT);
    cmd.set_key("snap-k" + std::to_string(i));
    cmd.set_value("v" + std::to_string(i) + std::string(20, 'z'));
    Entry e;
    e.set_index(i);
    e.set_term(term);
    e.set_type(ENTRY_COMMAND);
    e.set_data(cmd.SerializeAsString());
    sm.Apply(e);
  }
  SnapshotWriter writer;
  sm.Snapshot(&writer);
  MembershipConfig config;
  const char* addresses[] = {kSelfAddress, "127.0.0.1:1", "127.0.0.1:2"};
  for (uint64_t id = 1; id <= 3; ++id) {
    MemberConfig* m = config.add_members();
    m->set_id(id);
    m->set_address(addresses[id - 1]);
    m->set_voter(true);
  }
  writer.meta().config = config.SerializeAsString();
  return EncodeSnapshotFile(writer);
}

InstallSnapshotRequest SnapshotMeta(uint64_t term, uint64_t index, uint64_t last_term,
                                    uint64_t total_bytes, uint64_t to = 1) {
  InstallSnapshotRequest req;
  req.set_term(term);
  req.set_leader_id(2);
  req.set_to(to);
  req.set_last_index(index);
  req.set_last_term(last_term);
  req.set_total_bytes(total_bytes);
  return req;
}

// `bytes` cut into consecutive chunks of `chunk` bytes, the last one done.
std::vector<InstallSnapshotRequest> Chunks(const InstallSnapshotRequest& meta, const std::string& bytes,
                                           size_t chunk) {
  std::vector<InstallSnapshotRequest> out;
  for (size_t offset = 0; offset < bytes.size(); offset += chunk) {
    InstallSnapshotRequest req = meta;
    req.set_offset(offset);
    req.set_data(bytes.substr(offset, chunk));
    req.set_done(offset + chunk >= bytes.size());
    out.push_back(std::move(req));
  }
  return out;
}

class SnapshotRpcTest : public FollowerServerTest {
 protected:
  grpc::Status Stream(const std::vector<InstallSnapshotRequest>& chunks,
                      InstallSnapshotResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(20s));
    auto writer = raft_->InstallSnapshot(&ctx, resp);
    for (const InstallSnapshotRequest& c : chunks) {
      if (!writer->Write(c)) break;  // the server answered early (refused)
    }
    writer->WritesDone();
    return writer->Finish();
  }
  // Files in the snapshot directory (complete or temporary).
  std::vector<std::string> SnapDirFiles() {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_.Join("snap"), ec)) {
      out.push_back(e.path().filename().string());
    }
    return out;
  }
};

TEST_F(SnapshotRpcTest, ValidSnapshotIsInstalledAndTheLogContinuesAfterIt) {
  const std::string bytes = SnapshotFileBytes(30, 3);
  InstallSnapshotResponse resp;
  grpc::Status s = Stream(Chunks(SnapshotMeta(3, 30, 3, bytes.size()), bytes, 100), &resp);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(resp.success());
  EXPECT_EQ(resp.term(), 3u);
  EXPECT_EQ(resp.from(), 1u);
  EXPECT_EQ(resp.match_index(), 30u);
  EXPECT_EQ(resp.last_log_index(), 30u);
  // Answered after the install: the state is there already.
  EXPECT_EQ(node_->state_machine().AppliedIndex(), 30u);
  EXPECT_EQ(node_->state_machine().Size(), 30u);
  EXPECT_EQ(node_->state_machine().Get("snap-k7").value_or(""), "v7" + std::string(20, 'z'));
  NodeStatus st = node_->GetStatus();
  EXPECT_EQ(st.snapshot_index, 30u);
  EXPECT_EQ(st.snapshot_term, 3u);
  EXPECT_EQ(st.first_log_index, 31u);
  EXPECT_EQ(st.leader_id, 2u);
  EXPECT_EQ(SnapDirFiles(), std::vector<std::string>{SnapshotStore::FileName(30, 3)});
  // The log continues after the snapshot.
  Command cmd;
  cmd.set_op(Command::PUT);
  cmd.set_key("after");
  cmd.set_value("snapshot");
  Entry e;
  e.set_index(31);
  e.set_term(3);
  e.set_type(ENTRY_COMMAND);
  e.set_data(cmd.SerializeAsString());
  AppendEntriesResponse append;
  s = Append(3, 2, 1, 30, 3, {e}, 31, &append);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(append.success());
  EXPECT_EQ(append.match_index(), 31u);
  ASSERT_TRUE(WaitFor([&] { return node_->state_machine().Get("after").has_value(); }));
  // A repeat of the same snapshot is nothing new: answered with the commit.
  s = Stream(Chunks(SnapshotMeta(3, 30, 3, bytes.size()), bytes, 1000), &resp);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(resp.success());
  EXPECT_EQ(resp.match_index(), 31u);
  EXPECT_EQ(node_->state_machine().Get("after").value_or(""), "snapshot");
}

TEST_F(SnapshotRpcTest, GarbageAndOutOfOrderChunksAreRefusedWithAClearStatus) {
  const std::string bytes = SnapshotFileBytes(30, 3);
  const InstallSnapshotRequest meta = SnapshotMeta(3, 30, 3, bytes.size());
  InstallSnapshotResponse resp;

  // Random bytes: they arrive, but do not verify.
  std::string garbage(bytes.size(), '\0');
  std::mt19937 rng(7);
  for (char& c : garbage) c = static_cast<char>(rng());
  grpc::Status s = Stream(Chunks(meta, garbage, 128), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "failed verification");
  // A valid file announced under another index than its header's.
  s = Stream(Chunks(SnapshotMeta(3, 31, 3, bytes.size()), bytes, 128), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "failed verification");

  std::vector<InstallSnapshotRequest> chunks = Chunks(meta, bytes, 128);
  ASSERT_GE(chunks.size(), 3u);
  // A chunk missing (a gap).
  std::vector<InstallSnapshotRequest> gap = chunks;
  gap.erase(gap.begin() + 1);
  s = Stream(gap, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "chunk at offset 256, expected offset 128");
  // Chunks swapped.
  std::vector<InstallSnapshotRequest> swapped = chunks;
  std::swap(swapped[1], swapped[2]);
  s = Stream(swapped, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "expected offset 128");
  // A stream that does not start at offset 0.
  s = Stream({chunks[1]}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "expected offset 0");
  // A chunk repeated.
  std::vector<InstallSnapshotRequest> repeated = chunks;
  repeated.insert(repeated.begin() + 1, chunks[0]);
  s = Stream(repeated, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  // The metadata changes mid-stream.
  std::vector<InstallSnapshotRequest> changed = chunks;
  changed[1].set_last_index(29);
  s = Stream(changed, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "metadata");
  // Every chunk but none marked done.
  std::vector<InstallSnapshotRequest> unfinished = chunks;
  unfinished.back().set_done(false);
  s = Stream(unfinished, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "without a chunk marked done");
  // Done before total_bytes, and data past total_bytes.
  std::vector<InstallSnapshotRequest> early = {chunks[0]};
  early[0].set_done(true);
  s = Stream(early, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "total_bytes");
  s = Stream(Chunks(SnapshotMeta(3, 30, 3, 100), bytes, 128), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "past total_bytes");
  // Bad metadata.
  s = Stream(Chunks(SnapshotMeta(3, 0, 3, bytes.size()), bytes, 4096), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  s = Stream(Chunks(SnapshotMeta(3, 30, 4, bytes.size()), bytes, 4096), &resp);  // last term > term
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  s = Stream(Chunks(SnapshotMeta(3, 30, 3, 0), bytes, 4096), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  s = Stream(Chunks(SnapshotMeta(3, 30, 3, bytes.size(), /*to=*/3), bytes, 4096), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << StatusText(s);
  s = Stream({}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "empty");

  // Nothing was installed, no temporary file is left, the node is unchanged
  // and still takes a valid snapshot.
  EXPECT_TRUE(SnapDirFiles().empty()) << SnapDirFiles().front();
  EXPECT_EQ(node_->state_machine().AppliedIndex(), 0u);
  s = Stream(chunks, &resp);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(resp.success());
  EXPECT_EQ(node_->state_machine().AppliedIndex(), 30u);
}

TEST_F(SnapshotRpcTest, SecondConcurrentTransferIsRefused) {
  const std::string bytes = SnapshotFileBytes(30, 3);
  std::vector<InstallSnapshotRequest> chunks = Chunks(SnapshotMeta(3, 30, 3, bytes.size()), bytes, 128);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(20s));
  InstallSnapshotResponse first_resp;
  auto writer = raft_->InstallSnapshot(&ctx, &first_resp);
  ASSERT_TRUE(writer->Write(chunks[0]));
  // The first transfer has begun once its temporary file exists.
  ASSERT_TRUE(WaitFor([&] { return !SnapDirFiles().empty(); }));

  InstallSnapshotResponse resp;
  grpc::Status s = Stream(chunks, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << StatusText(s);
  EXPECT_CONTAINS(s.error_message(), "already receiving");

  for (size_t i = 1; i < chunks.size(); ++i) ASSERT_TRUE(writer->Write(chunks[i]));
  writer->WritesDone();
  s = writer->Finish();
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(first_resp.success());
  EXPECT_EQ(first_resp.match_index(), 30u);
}

TEST_F(SnapshotRpcTest, BrokenStreamLeavesNothingBehind) {
  const std::string bytes = SnapshotFileBytes(30, 3);
  std::vector<InstallSnapshotRequest> chunks = Chunks(SnapshotMeta(3, 30, 3, bytes.size()), bytes, 128);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(20s));
    InstallSnapshotResponse resp;
    auto writer = raft_->InstallSnapshot(&ctx, &resp);
    ASSERT_TRUE(writer->Write(chunks[0]));
    ASSERT_TRUE(WaitFor([&] { return !SnapDirFiles().empty(); }));
    ctx.TryCancel();  // the sender goes away mid-transfer
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  ASSERT_TRUE(WaitFor([&] { return SnapDirFiles().empty(); })) << SnapDirFiles().front();
  // The receiver is free again.
  InstallSnapshotResponse resp;
  grpc::Status s;
  ASSERT_TRUE(WaitFor([&] {
    s = Stream(chunks, &resp);
    return s.error_code() != grpc::StatusCode::FAILED_PRECONDITION;
  }));
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_EQ(node_->state_machine().AppliedIndex(), 30u);
}

TEST_F(SnapshotRpcTest, TimeoutNowMakesTheFollowerCampaignAtOnce) {
  AppendEntriesResponse append;
  ASSERT_TRUE(Append(3, 2, 1, 0, 0, {}, 0, &append).ok());
  StartHeartbeats(3, 0);  // member 1 would not campaign on its own
  ASSERT_EQ(node_->GetStatus().term, 3u);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(10s));
  TimeoutNowRequest req;
  req.set_term(3);
  req.set_leader_id(2);
  req.set_to(1);
  TimeoutNowResponse resp;
  grpc::Status s = raft_->TimeoutNow(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  ASSERT_TRUE(WaitFor([&] { return node_->GetStatus().term >= 4; }, 2s))
      << "TimeoutNow did not start an election";
  // Misaddressed.
  grpc::ClientContext ctx2;
  ctx2.set_deadline(In(10s));
  req.set_to(3);
  s = raft_->TimeoutNow(&ctx2, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << StatusText(s);
}

TEST_F(FollowerServerTest, GrantsAVoteWithoutALeader) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(10s));
  RequestVoteRequest req;
  req.set_term(50);
  req.set_candidate_id(3);
  req.set_to(1);
  RequestVoteResponse vote;
  grpc::Status s = raft_->RequestVote(&ctx, req, &vote);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_TRUE(vote.granted());
  EXPECT_EQ(vote.term(), 50u);
  EXPECT_GE(node_->GetStatus().term, 50u);
}


// ---------------------------------------------------------------------------
// Client sessions: exactly-once writes.
// ---------------------------------------------------------------------------

namespace {

Session MakeSession(uint64_t client, uint64_t seq, uint64_t first_outstanding) {
  Session session;
  session.set_client_id(client);
  session.set_sequence(seq);
  session.set_first_outstanding(first_outstanding);
  return session;
}

std::string Trailing(const grpc::ClientContext& ctx, const std::string& key) {
  auto range = ctx.GetServerTrailingMetadata().equal_range(key);
  if (range.first == range.second) return "";
  return std::string(range.first->second.data(), range.first->second.size());
}

}  // namespace

TEST_F(ServerTest, SessionRetryIsAnsweredWithTheFirstResult) {
  StartSingleLeader();
  OpenSessionResponse open;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    ASSERT_TRUE(kv_->OpenSession(&ctx, OpenSessionRequest(), &open).ok());
  }
  ASSERT_GT(open.client_id(), 0u);
  EXPECT_EQ(open.timeout_ms(), 600000u);

  CompareAndSwapRequest req;
  req.set_key("k");
  req.set_has_expected(false);  // create-only: a plain retry would fail against itself
  req.set_value("v1");
  *req.mutable_session() = MakeSession(open.client_id(), 1, 1);
  CompareAndSwapResponse first, retry;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    ASSERT_TRUE(kv_->CompareAndSwap(&ctx, req, &first).ok());
  }
  ASSERT_TRUE(first.swapped());
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    ASSERT_TRUE(kv_->CompareAndSwap(&ctx, req, &retry).ok());
  }
  EXPECT_TRUE(retry.swapped()) << "the retry must get the first attempt's answer";
  EXPECT_EQ(retry.index(), first.index());
  EXPECT_EQ(retry.term(), first.term());

  StatusResponse st;
  ASSERT_TRUE(GetStatus(&st).ok());
  EXPECT_EQ(st.sessions(), 1u);

  // An unknown session: ABORTED, with the metadata clients act on.
  {
    PutRequest put;
    put.set_key("k");
    put.set_value("x");
    *put.mutable_session() = MakeSession(open.client_id() + 1000, 1, 1);
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    PutResponse resp;
    grpc::Status s = kv_->Put(&ctx, put, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED) << StatusText(s);
    EXPECT_EQ(Trailing(ctx, kSessionExpiredMetadataKey), "1");
  }
  // Malformed session headers.
  for (const Session& bad : {MakeSession(0, 1, 1), MakeSession(open.client_id(), 0, 0),
                             MakeSession(open.client_id(), 3, 4)}) {
    DeleteRequest del;
    del.set_key("k");
    *del.mutable_session() = bad;
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    DeleteResponse resp;
    grpc::Status s = kv_->Delete(&ctx, del, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad.DebugString();
  }
  // Closing forgets it.
  {
    CloseSessionRequest close;
    close.set_client_id(open.client_id());
    CloseSessionResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    ASSERT_TRUE(kv_->CloseSession(&ctx, close, &resp).ok());
  }
  ASSERT_TRUE(GetStatus(&st).ok());
  EXPECT_EQ(st.sessions(), 0u);
}

BatchOp MakeOp(BatchOp::Op op, const std::string& key, const std::string& value = "") {
  BatchOp o;
  o.set_op(op);
  o.set_key(key);
  o.set_value(value);
  return o;
}

// A batch is one log entry: every op applied in order at one index, with
// one existed flag per op; reads see all of it.
TEST_F(ServerTest, BatchAppliesEveryOpAtOneIndex) {
  StartSingleLeader();
  PutResponse before;
  ASSERT_TRUE(Put("b", "old", &before).ok());
  BatchRequest req;
  *req.add_ops() = MakeOp(BatchOp::PUT, "a", "1");
  *req.add_ops() = MakeOp(BatchOp::PUT, "b", "2");
  *req.add_ops() = MakeOp(BatchOp::DELETE, "missing");
  *req.add_ops() = MakeOp(BatchOp::PUT, std::string("c\0c", 3), std::string("\x00\xff", 2));
  *req.add_ops() = MakeOp(BatchOp::DELETE, "a");
  BatchResponse resp;
  grpc::Status s = Batch(req, &resp);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_EQ(resp.index(), before.index() + 1) << "the whole batch is one entry";
  EXPECT_EQ(resp.term(), before.term());
  ASSERT_EQ(resp.existed_size(), 5);
  EXPECT_EQ(std::vector<bool>(resp.existed().begin(), resp.existed().end()),
            (std::vector<bool>{false, true, false, false, true}));
  GetResponse get;
  ASSERT_TRUE(Get("b", &get).ok());
  EXPECT_EQ(get.value(), "2");
  EXPECT_GE(get.applied_index(), resp.index());
  ASSERT_TRUE(Get(std::string("c\0c", 3), &get).ok());
  EXPECT_EQ(get.value(), std::string("\x00\xff", 2));
  ASSERT_TRUE(Get("a", &get).ok());
  EXPECT_FALSE(get.found());

  // Through KvClient, in a session: a retry of the same sequence is answered
  // with the first result and not applied again.
  ClientOptions options;
  options.endpoints = {address_};
  KvClient client(options);
  std::vector<bool> existed;
  s = client.Batch({MakeOp(BatchOp::PUT, "k1", "x"), MakeOp(BatchOp::PUT, "b", "3")}, &existed);
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_EQ(existed, (std::vector<bool>{false, true}));
  EXPECT_GT(client.session_id(), 0u);
  BatchRequest again;
  *again.add_ops() = MakeOp(BatchOp::PUT, "b", "dup");
  *again.mutable_session() = MakeSession(client.session_id(), 1, 1);
  BatchResponse dup;
  ASSERT_TRUE(Batch(again, &dup).ok());
  EXPECT_EQ(dup.existed_size(), 2) << "a duplicate gets the first application's answer";
  ASSERT_TRUE(Get("b", &get).ok());
  EXPECT_EQ(get.value(), "3") << "a duplicate batch must not be applied again";
}

// Every way a batch can be malformed is refused with INVALID_ARGUMENT naming
// the op and the limit, and nothing of it is written.
TEST_F(ServerTest, BatchInvalidArgumentsAreRefusedWhole) {
  StartSingleLeader();
  const size_t keys_before = node_->state_machine().Size();
  struct Case {
    const char* name;
    std::vector<BatchOp> ops;
    const char* message;
  };
  std::vector<BatchOp> too_many(kMaxBatchOps + 1, MakeOp(BatchOp::PUT, "k", "v"));
  std::vector<BatchOp> too_big(4, MakeOp(BatchOp::PUT, "k", std::string(kMaxValue, 'v')));
  BatchOp unknown = MakeOp(BatchOp::PUT, "k", "v");
  unknown.set_op(static_cast<BatchOp::Op>(7));
  const std::vector<Case> cases = {
      {"empty", {}, "no operations"},
      {"too many", too_many, "--max_batch_ops"},
      {"too many bytes", too_big, "--max_batch_bytes"},
      {"empty key", {MakeOp(BatchOp::PUT, "ok", "v"), MakeOp(BatchOp::PUT, "", "v")}, "ops[1]: key must not be empty"},
      {"long key", {MakeOp(BatchOp::DELETE, std::string(kMaxKey + 1, 'k'))}, "ops[0]: key is"},
      {"long value", {MakeOp(BatchOp::PUT, "a"), MakeOp(BatchOp::PUT, "b"), MakeOp(BatchOp::PUT, "c", std::string(kMaxValue + 1, 'v'))}, "ops[2]: value is"},
      {"delete with value", {MakeOp(BatchOp::DELETE, "k", "v")}, "ops[0]: a DELETE carries no value"},
      {"unknown op", {MakeOp(BatchOp::PUT, "k", "v"), unknown}, "ops[1]: unknown op 7"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    BatchRequest req;
    for (const BatchOp& op : c.ops) *req.add_ops() = op;
    BatchResponse resp;
    grpc::Status s = Batch(req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
    EXPECT_CONTAINS(s.error_message(), c.message);
  }
  BatchRequest bad_session;
  *bad_session.add_ops() = MakeOp(BatchOp::PUT, "k", "v");
  *bad_session.mutable_session() = MakeSession(0, 1, 1);
  BatchResponse resp;
  EXPECT_EQ(Batch(bad_session, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(node_->state_machine().Size(), keys_before) << "nothing of a refused batch is written";
  // At the limits exactly: accepted.
  std::vector<BatchOp> at_limit(kMaxBatchOps, MakeOp(BatchOp::PUT, "k", "v"));
  BatchRequest ok;
  for (const BatchOp& op : at_limit) *ok.add_ops() = op;
  grpc::Status s = Batch(ok, &resp);
  EXPECT_TRUE(s.ok()) << StatusText(s);
}

// Raw bytes of a message for the generic stub.
grpc::ByteBuffer Bytes(const std::string& data) {
  grpc::Slice slice(data);
  return grpc::ByteBuffer(&slice, 1);
}
std::string Bytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// The standard health service answers SERVING (grpc_health_probe's check)
// and server reflection lists the raftkv services and describes them and the
// health service (what grpcurl asks), all
// on the same port, through the generic stub with hand-encoded messages.
TEST_F(ServerTest, HealthCheckAndReflectionAreServed) {
  StartSingleLeader();
  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  void* tag = nullptr;
  bool ok = false;
  {
    // grpc.health.v1.HealthCheckRequest{service: ""} is empty; the response
    // {status: SERVING (1)} is field 1, varint 1.
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    grpc::ByteBuffer request = Bytes(""), response;
    grpc::Status status;
    auto call = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
    call->StartCall();
    call->Finish(&response, &status, reinterpret_cast<void*>(1));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    ASSERT_TRUE(status.ok()) << StatusText(status);
    EXPECT_EQ(Bytes(response), std::string("\x08\x01", 2));
  }
  {
    // grpc.reflection.v1alpha.ServerReflectionRequest{list_services: ""}
    // (field 7, a string) on the bidirectional stream.
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    auto stream = stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
    stream->StartCall(reinterpret_cast<void*>(2));
    ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
    stream->Write(Bytes(std::string("\x3a\x00", 2)), reinterpret_cast<void*>(3));
    ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
    grpc::ByteBuffer response;
    stream->Read(&response, reinterpret_cast<void*>(4));
    ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
    const std::string listed = Bytes(response);
    EXPECT_CONTAINS(listed, "raftkv.v1.KV");
    EXPECT_CONTAINS(listed, "raftkv.v1.Watch");
    EXPECT_CONTAINS(listed, "raftkv.v1.Lease");
    EXPECT_CONTAINS(listed, "grpc.health.v1.Health");
    // The members' own protocol is not advertised (this fixture serves no
    // Admin service).
    EXPECT_EQ(listed.find("raftkv.internal"), std::string::npos) << listed;
    EXPECT_EQ(listed.find("raftkv.v1.Admin"), std::string::npos) << listed;
    // {file_containing_symbol: S} (field 4): grpcurl's next question, whose
    // answer (the descriptor of S's file, field 4) it needs to call S.
    for (const auto& [symbol, file] : {std::pair{"grpc.health.v1.Health", "grpc/health/v1/health.proto"},
                                       std::pair{"raftkv.v1.KV", "raftkv/v1/kv.proto"},
                                       std::pair{"raftkv.v1.Lease", "raftkv/v1/lease.proto"}}) {
      const std::string name = symbol;
      stream->Write(Bytes("\x22" + std::string(1, static_cast<char>(name.size())) + name), reinterpret_cast<void*>(3));
      ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
      stream->Read(&response, reinterpret_cast<void*>(4));
      ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
      const std::string answer = Bytes(response);
      EXPECT_CONTAINS(answer, file) << symbol;
    }
    // Nor described: its file is NOT_FOUND (error_response, field 7, with
    // error_code 5).
    const std::string internal = "raftkv.internal.Peer";
    stream->Write(Bytes("\x22" + std::string(1, static_cast<char>(internal.size())) + internal),
                  reinterpret_cast<void*>(3));
    ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
    stream->Read(&response, reinterpret_cast<void*>(4));
    ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
    const std::string refused = Bytes(response);
    EXPECT_EQ(refused.find("raftkv/internal/raft.proto"), std::string::npos);
    EXPECT_CONTAINS(refused, "not found");
    stream->WritesDone(reinterpret_cast<void*>(5));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    grpc::Status status;
    stream->Finish(&status, reinterpret_cast<void*>(6));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_TRUE(status.ok()) << StatusText(status);
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

// gRPC's receive limit is set from the request limits (MaxReceiveMessageBytes):
// anything larger, on the client or the peer service, is refused with
// RESOURCE_EXHAUSTED before it is read, and the server goes on serving.
TEST_F(ServerTest, OversizedMessagesAreRefusedAndTheServerKeepsServing) {
  StartSingleLeader();
  ServerOptions so;
  so.max_key_bytes = kMaxKey;
  so.max_value_bytes = kMaxValue;
  so.max_batch_ops = kMaxBatchOps;
  so.max_batch_bytes = kMaxBatchBytes;
  const size_t limit = MaxReceiveMessageBytes(so);
  EXPECT_GE(limit, 2 * so.max_append_bytes);
  EXPECT_GE(limit, 2 * so.snapshot_chunk_bytes);
  EXPECT_LT(limit, 8u << 20) << "derived from the (small) test limits";
  const std::string huge(limit + 1, 'x');
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    EchoRequest req;
    req.set_payload(huge);
    EchoResponse resp;
    grpc::Status s = kv_->Echo(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << StatusText(s);
  }
  {
    grpc::Status s = Put("k", huge);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << StatusText(s);
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    AppendEntriesRequest req;
    req.set_term(1000);
    req.set_leader_id(2);
    req.set_to(1);
    Entry* e = req.add_entries();
    e->set_index(1);
    e->set_term(1000);
    e->set_data(huge);
    AppendEntriesResponse resp;
    grpc::Status s = raft_->AppendEntries(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << StatusText(s);
  }
  // Just under the limit still arrives (and is refused by the request check).
  {
    grpc::Status s = Put("k", std::string(limit - 1024, 'v'));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << StatusText(s);
    EXPECT_CONTAINS(s.error_message(), "max_value_bytes");
  }
  grpc::Status s = Put("k", "small");
  ASSERT_TRUE(s.ok()) << StatusText(s);
  EXPECT_EQ(node_->GetStatus().role, raft::Role::kLeader) << "the oversized append changed nothing";
}

TEST_F(ServerTest, KvClientUsesAndClosesASession) {
  StartSingleLeader();
  {
    ClientOptions options;
    options.endpoints = {address_};
    KvClient client(options);
    EXPECT_EQ(client.session_id(), 0u) << "no session before the first write";
    ASSERT_TRUE(client.Put("a", "1").ok());
    const uint64_t id = client.session_id();
    EXPECT_GT(id, 0u);
    bool swapped = false;
    ASSERT_TRUE(client.CompareAndSwap("a", nullptr, "2", &swapped).ok());
    EXPECT_FALSE(swapped);
    EXPECT_EQ(client.session_id(), id) << "one session for the client's lifetime";
    StatusResponse st;
    ASSERT_TRUE(GetStatus(&st).ok());
    EXPECT_EQ(st.sessions(), 1u);
  }
  StatusResponse st;
  ASSERT_TRUE(GetStatus(&st).ok());
  EXPECT_EQ(st.sessions(), 0u) << "~KvClient closes its session";
}

// Sessions expire by cluster time (the leader's ticks stamped on entries):
// a client idle for longer than --session_timeout_ms gets ABORTED, and the
// KvClient then opens a new session for its next write.
TEST_F(ServerTest, IdleSessionExpiresAndTheClientReopens) {
  Setup setup;
  setup.session_timeout_ms = 100;  // 20 ticks of 5 ms
  StartSingleLeader(setup);
  ClientOptions options;
  options.endpoints = {address_};
  KvClient idle(options);
  ASSERT_TRUE(idle.Put("a", "1").ok());
  const uint64_t first = idle.session_id();
  // Cluster time only advances through entries: another writer keeps the log moving.
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(Put("other", "x").ok());
  grpc::Status s = idle.Put("a", "2");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED) << StatusText(s);
  ASSERT_TRUE(idle.Put("a", "3").ok()) << "the next write opens a new session";
  EXPECT_NE(idle.session_id(), first);
  GetResponse got;
  ASSERT_TRUE(Get("a", &got).ok());
  EXPECT_EQ(got.value(), "3");
}

TEST_F(ServerTest, TestingServiceIsOffByDefault) {
  StartSingleLeader();
  auto testing = Testing::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(In(10s));
  SetFaultsResponse resp;
  grpc::Status s = testing->SetFaults(&ctx, SetFaultsRequest(), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << StatusText(s);
}

// Without a session, CompareAndSwap is retried as long as the outcome is
// known; with one, every failed attempt is retried until the timeout.
TEST(KvClientCasTest, WithASessionUnknownOutcomesAreRetried) {
  ClientOptions options;
  options.endpoints = {"127.0.0.1:1"};  // nothing listens on port 1
  options.timeout_ms = 1500;
  KvClient client(options);
  const auto start = std::chrono::steady_clock::now();
  bool swapped = true;
  grpc::Status s = client.CompareAndSwap("k", nullptr, "v", &swapped);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << StatusText(s);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1200ms);
}

}  // namespace
}  // namespace raftkv
