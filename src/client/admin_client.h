// AdminClient: a synchronous client of the Admin service (protos/raftkv/v1/admin.proto)
// that finds the leader itself, for raftkvctl and the tests.
//
// Membership changes and leadership transfer must reach the leader. A call is
// tried at the last leader seen (else the first endpoint); then:
//   FAILED_PRECONDITION with trailing metadata "raftkv-leader-addr" naming
//       another member: retried there at once (the leader may be a member
//       missing from the endpoint list, e.g. one added later);
//   FAILED_PRECONDITION without a hint: the leader refused the request
//       (invalid change, another change pending, learner not caught up,
//       transfer refused): returned at once;
//   UNAVAILABLE (no leader yet, connection refused, leadership lost): retried
//       at the next endpoint after a short back-off (jittered: 50 to 400 ms, client/retry_loop.h);
//   anything else: returned at once;
// until timeout_ms has elapsed. One attempt of a change may use the whole
// remaining budget (it waits for a commit or an election).
//
// A change retried after an attempt whose outcome is unknown (UNAVAILABLE
// after the leader may have appended it) can be refused because the first
// attempt took effect ("already a member"). Then the member list is read from
// the leader, and if the configuration already is what the change asked for,
// the call succeeds with the index of the configuration entry in effect.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "client/retry_loop.h"
#include "client/security.h"
#include "proto/api.h"

namespace raftkv {

struct AdminClientOptions {
  std::vector<std::string> endpoints;  // "host:port", tried in this order
  int timeout_ms = 5000;               // total budget of one operation
  int rpc_timeout_ms = 2000;           // one ListMembers / status attempt
  // TLS and token; null = the process-wide setting (client/security.h).
  std::shared_ptr<const ChannelSecurity> security;
  // Seeds the jittered back-off between retries; 0: random.
  uint64_t retry_seed = 0;
};

class AdminClient {
 public:
  explicit AdminClient(AdminClientOptions options);
  ~AdminClient();
  AdminClient(const AdminClient&) = delete;
  AdminClient& operator=(const AdminClient&) = delete;

  // The member list as the leader sees it (match indexes and replication
  // states are known only there). If no leader answers within the budget,
  // the view of the last member that answered is returned with OK and
  // *from_leader false (leader_id may then be 0); an error only if no member
  // answered at all. *answered_by (if set) gets the address that answered.
  grpc::Status ListMembers(ListMembersResponse* out, bool* from_leader = nullptr,
                           std::string* answered_by = nullptr);
  // One attempt at one member, no redirect.
  grpc::Status ListMembersOf(const std::string& endpoint, ListMembersResponse* out,
                             int timeout_ms);

  grpc::Status AddMember(uint64_t id, const std::string& address, MemberChangeResponse* out);
  grpc::Status PromoteMember(uint64_t id, MemberChangeResponse* out);
  grpc::Status RemoveMember(uint64_t id, MemberChangeResponse* out);
  grpc::Status TransferLeader(uint64_t id, TransferLeaderResponse* out);

  // A snapshot of `endpoint`'s state (any member; no redirect, one attempt).
  grpc::Status TakeSnapshot(const std::string& endpoint, TakeSnapshotResponse* out,
                            int timeout_ms);

  // A backup (Admin.SnapshotSave) from `endpoint` (any member; no redirect,
  // one attempt): `on_message` gets each message of the stream in order;
  // when it returns false the call is cancelled (and CANCELLED returned).
  // timeout_ms bounds the whole call: the snapshot and the transfer.
  grpc::Status SnapshotSave(const std::string& endpoint, int timeout_ms,
                            const std::function<bool(const SnapshotSaveResponse&)>& on_message);

  // The address of the last member that answered a leader-only call (or was
  // named as leader); "" if none yet.
  std::string last_leader() const;

 private:
  template <typename Req, typename Resp>
  using Method = grpc::Status (Admin::Stub::*)(grpc::ClientContext*, const Req&, Resp*);
  // The leader-following retry loop described above. *uncertain is set when
  // an attempt failed in a way that leaves its effect unknown.
  template <typename Req, typename Resp>
  grpc::Status CallLeader(const char* name, Method<Req, Resp> method, const Req& request,
                          Resp* response, bool* uncertain);
  // For a refused change after an uncertain attempt: whether the leader's
  // configuration already matches `want` (see the top of this file).
  enum class Want { kLearner, kVoter, kAbsent };
  bool AlreadyDone(uint64_t id, Want want, MemberChangeResponse* out);
  grpc::Status Change(const char* name, uint64_t id, Want want,
                      const std::function<grpc::Status(bool*, MemberChangeResponse*)>& call,
                      MemberChangeResponse* out);

  Admin::Stub* StubFor(const std::string& address);
  void SetLeader(const std::string& address);

  const AdminClientOptions options_;
  RetrySeeds retry_seeds_;  // one back-off seed per call
  mutable std::mutex mu_;
  std::string leader_;                                         // guarded by mu_
  std::map<std::string, std::unique_ptr<Admin::Stub>> stubs_;  // guarded by mu_
};

}  // namespace raftkv
