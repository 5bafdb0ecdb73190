// Helpers shared by the integration tests: the test fixture (which prints the
// servers' output and logs when a test fails), bulk writes and read-backs
// through KvClient, raw gRPC stubs, and catch-up waits.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/kv_client.h"
#include "testing/process_cluster.h"
#include "proto/internal.h"

namespace raftkv {
namespace integration {

using KvMap = std::map<std::string, std::string>;
using Millis = std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

inline int64_t ElapsedMs(Steady::time_point start) {
  return std::chrono::duration_cast<Millis>(Steady::now() - start).count();
}

inline std::string Code(const grpc::Status& s) {
  return std::string(StatusCodeName(s.error_code())) + ": " + s.error_message();
}

inline std::string JoinLines(const std::vector<std::string>& lines, size_t max = 20) {
  std::string out;
  for (size_t i = 0; i < lines.size() && i < max; ++i) out += "  " + lines[i] + "\n";
  if (lines.size() > max) out += "  ... and " + std::to_string(lines.size() - max) + " more\n";
  return out;
}

// A plain TCP connection to 127.0.0.1:port (for tests that speak raw bytes
// to the server); -1 on failure.
inline int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline std::shared_ptr<grpc::Channel> NewChannel(const std::string& endpoint) {
  // A private channel (not shared with other stubs through the global pool).
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
}

inline void SetDeadline(grpc::ClientContext* ctx, int ms) {
  ctx->set_deadline(std::chrono::system_clock::now() + Millis(ms));
}

// The value of trailing-metadata `key`, or "<absent>".
inline std::string Trailer(const grpc::ClientContext& ctx, const std::string& key) {
  const auto& md = ctx.GetServerTrailingMetadata();
  auto it = md.find(key);
  if (it == md.end()) return "<absent>";
  return std::string(it->second.data(), it->second.size());
}

// Puts every pair with `threads` threads sharing `client`. Returns the pairs
// acknowledged; failures are described in *errors.
inline KvMap PutAll(KvClient& client, const std::vector<std::pair<std::string, std::string>>& kvs,
                    int threads, std::vector<std::string>* errors) {
  KvMap acked;
  std::mutex mu;
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < kvs.size(); i = next++) {
        grpc::Status s = client.Put(kvs[i].first, kvs[i].second);
        std::lock_guard<std::mutex> lock(mu);
        if (s.ok()) {
          acked[kvs[i].first] = kvs[i].second;
        } else if (errors != nullptr) {
          errors->push_back("Put " + kvs[i].first + ": " + Code(s));
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  return acked;
}

// Reads every key of `expected` (linearizable, or stale from the client's
// first endpoint) and returns a description of each mismatch or error.
inline std::vector<std::string> CheckAll(KvClient& client, const KvMap& expected, bool stale,
                                         int threads = 4) {
  std::vector<std::pair<std::string, std::string>> items(expected.begin(), expected.end());
  std::vector<std::string> problems;
  std::mutex mu;
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < items.size(); i = next++) {
        std::string value;
        bool found = false;
        grpc::Status s = client.Get(items[i].first, &value, &found, stale);
        std::string problem;
        if (!s.ok()) {
          problem = "Get " + items[i].first + ": " + Code(s);
        } else if (!found) {
          problem = "Get " + items[i].first + ": not found, expected '" + items[i].second + "'";
        } else if (value != items[i].second) {
          problem =
              "Get " + items[i].first + ": '" + value + "', expected '" + items[i].second + "'";
        }
        if (!problem.empty()) {
          std::lock_guard<std::mutex> lock(mu);
          problems.push_back(problem);
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  std::sort(problems.begin(), problems.end());
  return problems;
}

// Waits until member i's applied_index reaches `index`; *last gets its last
// status (if any answered).
inline bool WaitForApplied(ProcessCluster& cluster, int i, uint64_t index, int timeout_ms,
                           StatusResponse* last = nullptr) {
  StatusResponse st;
  const bool ok = WaitUntil(
      [&] {
        StatusResponse s;
        if (!cluster.StatusOf(i, &s, 500).ok()) return false;
        st = s;
        return s.applied_index() >= index;
      },
      timeout_ms, 20);
  if (last != nullptr) *last = st;
  return ok;
}

// The status of member i; a failed gtest expectation if it does not answer.
inline StatusResponse MustStatus(ProcessCluster& cluster, int i) {
  StatusResponse st;
  grpc::Status s = cluster.StatusOf(i, &st, 1000);
  EXPECT_TRUE(s.ok()) << "Status of member " << i << ": " << Code(s);
  return st;
}

// A member other than `a` and `b` (0 = none).
// Cuts member's links to `blocked` (servers started with
// --enable_test_faults; empty: heals). Cut both ends for a clean partition.
inline grpc::Status SetFaults(ProcessCluster& cluster, int member,
                              const std::vector<uint64_t>& blocked) {
  auto stub = Testing::NewStub(NewChannel(cluster.Endpoint(member)));
  SetFaultsRequest req;
  for (uint64_t b : blocked) req.add_blocked_peers(b);
  SetFaultsResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 2000);
  return stub->SetFaults(&ctx, req, &resp);
}

inline int OtherThan(const ProcessCluster& cluster, int a, int b = 0) {
  for (int i = 1; i <= cluster.size(); ++i) {
    if (i != a && i != b) return i;
  }
  return 0;
}

// The fixture: owns the cluster, prints its output and logs on failure.
class Integration : public ::testing::Test {
 protected:
  // Starts an n-member cluster with `flags` and waits for a leader (fatal
  // failure if there is none within timeout_ms).
  void StartCluster(int n, std::vector<std::string> flags, uint64_t* leader,
                    int timeout_ms = 15000) {
    const auto start = Steady::now();
    cluster_ = std::make_unique<ProcessCluster>(n, std::move(flags));
    std::string error;
    ASSERT_TRUE(cluster_->StartAll(&error)) << error;
    *leader = cluster_->WaitForLeader(timeout_ms, &error);
    ASSERT_NE(*leader, 0u) << error;
    std::cerr << "[ cluster  ] " << n << " members in " << cluster_->dir() << "; leader " << *leader
              << " (term " << cluster_->last_leader_term() << ") after " << ElapsedMs(start)
              << " ms" << std::endl;
  }

  void TearDown() override {
    const auto start = Steady::now();
    if (HasFailure() && cluster_) {
      std::cerr << "================ cluster state at failure ================\n"
                << cluster_->Describe(6000) << std::endl;
    }
    cluster_.reset();
    std::cerr << "[ cluster  ] teardown took " << ElapsedMs(start) << " ms" << std::endl;
  }

  ProcessCluster& cluster() { return *cluster_; }

  std::unique_ptr<ProcessCluster> cluster_;
};

}  // namespace integration
}  // namespace raftkv
