// Helpers for the snapshot, compaction and membership integration tests:
// bulk writes of deterministic keys by many threads, the Admin client, member
// lists and promotion with retries.
#pragma once

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/admin_client.h"
#include "gtest/integration/integration_test_util.h"

namespace raftkv {
namespace integration {

// Key and value number n of a bulk write; the value is ~40 bytes and can be
// recomputed for any n, so 200,000 writes need no map to be checked.
inline std::string BulkKey(const std::string& prefix, uint64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%08llu", static_cast<unsigned long long>(n));
  return prefix + buf;
}
inline std::string BulkValue(const std::string& prefix, uint64_t n) {
  return "value-" + prefix + std::to_string(n) + "-0123456789abcdefghijklmnop";
}

struct BulkResult {
  uint64_t acked = 0;
  std::vector<std::string> errors;  // the first few failures
  uint64_t failures = 0;
  int64_t ms = 0;
};

// Writes BulkKey(prefix, n) = BulkValue(prefix, n) for n in [begin, end) with
// `threads` threads spread over `clients` KvClients (sessions on).
inline BulkResult BulkWrite(ProcessCluster& cluster, const std::string& prefix, uint64_t begin,
                            uint64_t end, int threads, int clients = 2) {
  std::vector<std::unique_ptr<KvClient>> pool;
  for (int c = 0; c < clients; ++c) pool.push_back(cluster.NewClient(15000, 3000));
  BulkResult result;
  std::mutex mu;
  std::atomic<uint64_t> next{begin};
  std::atomic<uint64_t> acked{0};
  const auto start = Steady::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      KvClient& client = *pool[static_cast<size_t>(t % clients)];
      for (uint64_t n = next++; n < end; n = next++) {
        grpc::Status s = client.Put(BulkKey(prefix, n), BulkValue(prefix, n));
        if (s.ok()) {
          ++acked;
          continue;
        }
        std::lock_guard<std::mutex> lock(mu);
        ++result.failures;
        if (result.errors.size() < 20) result.errors.push_back(BulkKey(prefix, n) + ": " + Code(s));
      }
    });
  }
  for (auto& w : workers) w.join();
  result.acked = acked;
  result.ms = ElapsedMs(start);
  return result;
}

// Reads `samples` keys of [begin, end) (every k-th) through `client` and
// returns the mismatches.
inline std::vector<std::string> CheckBulkSample(KvClient& client, const std::string& prefix,
                                                uint64_t begin, uint64_t end, uint64_t samples,
                                                bool stale) {
  KvMap expected;
  const uint64_t step = std::max<uint64_t>(1, (end - begin) / std::max<uint64_t>(1, samples));
  for (uint64_t n = begin; n < end; n += step) expected[BulkKey(prefix, n)] = BulkValue(prefix, n);
  expected[BulkKey(prefix, end - 1)] = BulkValue(prefix, end - 1);
  return CheckAll(client, expected, stale);
}

inline std::unique_ptr<AdminClient> NewAdmin(const std::vector<std::string>& endpoints,
                                             int timeout_ms = 10000, int rpc_timeout_ms = 1000) {
  AdminClientOptions options;
  options.endpoints = endpoints;
  options.timeout_ms = timeout_ms;
  options.rpc_timeout_ms = rpc_timeout_ms;
  return std::make_unique<AdminClient>(options);
}

// "1v(match 120, replicate) 2v(...) 4l(...)"
inline std::string DescribeMembers(const ListMembersResponse& list) {
  std::string out = "leader " + std::to_string(list.leader_id()) + " term " +
                    std::to_string(list.term()) + " commit " +
                    std::to_string(list.commit_index()) + " last " +
                    std::to_string(list.last_index()) + " config@" +
                    std::to_string(list.config_index()) +
                    (list.config_committed() ? "(committed)" : "(uncommitted)") + ":";
  for (const MemberStatus& m : list.members()) {
    out += " " + std::to_string(m.id()) + (m.voter() ? "v" : "l") + "(" + m.address() +
           " match " + std::to_string(m.match_index()) + " " + m.state() + ")";
  }
  return out;
}

inline std::vector<uint64_t> MemberIds(const ListMembersResponse& list, bool voters_only = false) {
  std::vector<uint64_t> ids;
  for (const MemberStatus& m : list.members()) {
    if (!voters_only || m.voter()) ids.push_back(m.id());
  }
  return ids;
}

inline const MemberStatus* FindMemberStatus(const ListMembersResponse& list, uint64_t id) {
  for (const MemberStatus& m : list.members()) {
    if (m.id() == id) return &m;
  }
  return nullptr;
}

// The member list from the leader; a failed expectation if none answered as leader.
inline ListMembersResponse LeaderMembers(AdminClient& admin) {
  ListMembersResponse list;
  bool from_leader = false;
  grpc::Status s = admin.ListMembers(&list, &from_leader);
  EXPECT_TRUE(s.ok()) << "ListMembers: " << Code(s);
  EXPECT_TRUE(from_leader) << "no leader answered ListMembers; got " << DescribeMembers(list);
  return list;
}

// Promotes learner `id`, retrying while the leader refuses (not caught up,
// another change pending) until timeout_ms. *attempts counts the calls.
inline grpc::Status PromoteWhenCaughtUp(AdminClient& admin, uint64_t id, int timeout_ms,
                                        int* attempts = nullptr) {
  const auto start = Steady::now();
  grpc::Status s;
  for (int n = 1;; ++n) {
    MemberChangeResponse resp;
    s = admin.PromoteMember(id, &resp);
    if (attempts != nullptr) *attempts = n;
    if (s.ok()) return s;
    if (s.error_code() != grpc::StatusCode::FAILED_PRECONDITION &&
        s.error_code() != grpc::StatusCode::UNAVAILABLE) {
      return s;
    }
    if (ElapsedMs(start) > timeout_ms) return s;
    std::this_thread::sleep_for(Millis(100));
  }
}

// Waits until member i answers Status.
inline bool WaitAnswers(ProcessCluster& cluster, int i, int timeout_ms) {
  return WaitUntil(
      [&] {
        StatusResponse st;
        return cluster.StatusOf(i, &st, 300).ok();
      },
      timeout_ms, 20);
}

}  // namespace integration
}  // namespace raftkv
