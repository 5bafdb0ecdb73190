// The raftkv client library: a synchronous, thread-safe client of the KV
// service (protos/raftkv.proto) that finds and follows the Raft leader.
//
// Writes and linearizable reads must be served by the leader. The client keeps
// one gRPC channel per server address and remembers the last leader it talked
// to. An operation is tried there first; then:
//   FAILED_PRECONDITION (not the leader): retried at once at the address named
//       by the trailing metadata "raftkv-leader-addr" if the server sent one,
//       else at the next configured endpoint;
//   UNAVAILABLE (no leader yet, connection refused, leadership lost) or
//   DEADLINE_EXCEEDED of one attempt: retried at the next endpoint after a
//       short jittered back-off (50 to 400 ms, client/retry_loop.h);
//   any other error (INVALID_ARGUMENT, ...): returned at once;
// until ClientOptions::timeout_ms has elapsed, after which the last error is
// returned with the list of endpoints tried appended to its message.
//
// Exactly-once writes (ClientOptions::use_session, on by default): before its
// first write the client opens a session (KV.OpenSession) and tags every
// write with the session id, a sequence number of its own and the lowest
// sequence still outstanding. The state machine applies each sequence once
// and answers a retry with the first application's result, so every write,
// CompareAndSwap included, is retried on UNAVAILABLE / DEADLINE_EXCEEDED with
// the same sequence until timeout_ms. If the session expired on the servers
// (ABORTED, "raftkv-session-expired: 1"), the next write opens a new one; the
// failed write's outcome is then unknown if an earlier attempt of it may have
// applied. One client (and so one session) may be used by many threads.
//
// Without a session (use_session = false): a retried Put is harmless; a
// retried Delete may report existed == false for a key that its first,
// unacknowledged attempt removed; and CompareAndSwap, which is not idempotent
// (a retried CAS can fail against its own first write, or swap twice if the
// value came back meanwhile), is retried only when nothing can have been
// applied: FAILED_PRECONDITION (not the leader; nothing was proposed) and
// UNAVAILABLE carrying the trailing metadata "raftkv-not-applied: 1" (no
// leader known, or the entry was overwritten by another leader's). Any other
// UNAVAILABLE (leadership lost or the server stopped after accepting it, the
// connection broke or could not be made: the client cannot tell a refused
// connection from one dropped after the server accepted the call) and
// DEADLINE_EXCEEDED are then returned at once: the outcome is unknown and the
// caller must read the key to find out.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "client/retry_loop.h"
#include "client/security.h"
#include "raftkv.grpc.pb.h"
#include "raftkv.pb.h"

namespace raftkv {

// Trailing-metadata keys by which a follower names the leader when it rejects
// a request with FAILED_PRECONDITION.
inline constexpr char kLeaderAddrMetadataKey[] = "raftkv-leader-addr";
inline constexpr char kLeaderIdMetadataKey[] = "raftkv-leader-id";
// Trailing-metadata key ("1") by which a server says a failed write was not
// applied, so retrying it is safe.
inline constexpr char kNotAppliedMetadataKey[] = "raftkv-not-applied";
// Trailing-metadata key ("1") of an ABORTED write whose session is unknown or
// expired on the servers.
inline constexpr char kSessionExpiredMetadataKey[] = "raftkv-session-expired";

struct ClientOptions {
  // Server addresses ("host:port"), tried in this order when no leader is known.
  std::vector<std::string> endpoints;
  // Total time budget of one operation, including all retries and back-offs.
  int timeout_ms = 5000;
  // Deadline of a single RPC attempt (capped by what is left of timeout_ms).
  int rpc_timeout_ms = 2000;
  // Exactly-once writes through a client session (see the top of this file).
  bool use_session = true;
  // TLS and token of the channels; null = the process-wide setting
  // (client/security.h: the --tls_* and --token_file flags).
  std::shared_ptr<const ChannelSecurity> security;
  // Seeds the jittered back-off between retries (client/retry_loop.h);
  // 0: random, so that clients that fail together do not retry in step.
  uint64_t retry_seed = 0;
};

// The canonical name of a gRPC status code, e.g. "FAILED_PRECONDITION".
const char* StatusCodeName(grpc::StatusCode code);

// Splits a comma-separated list of endpoints. Surrounding whitespace is
// trimmed and empty items are dropped; the items are not validated.
std::vector<std::string> SplitEndpoints(const std::string& csv);

// Checks that `endpoint` is "host:port": host a name or IPv4 address made of
// [A-Za-z0-9.-_], or a bracketed IPv6 address ("[::1]:7001"); port a decimal
// number in 1..65535. On success fills host/port (either may be null) and
// returns OK; otherwise InvalidArgument naming the bad input.
Status ParseEndpoint(const std::string& endpoint, std::string* host = nullptr, int* port = nullptr);

// SplitEndpoints + ParseEndpoint on every item. InvalidArgument on an empty
// list or any bad item, naming it.
Status ParseEndpointList(const std::string& csv, std::vector<std::string>* endpoints);

class KvClient {
 public:
  // Endpoints are validated here; if any is malformed (or none is given)
  // every operation returns INVALID_ARGUMENT naming the problem. No connection
  // is made before the first operation.
  explicit KvClient(ClientOptions options);
  ~KvClient();

  // Closes the session, if one was opened (one attempt, bounded wait).
  // ~KvClient does the same.
  void CloseSession();
  // The current session id (0 before the first write, or without sessions).
  uint64_t session_id() const;

  KvClient(const KvClient&) = delete;
  KvClient& operator=(const KvClient&) = delete;

  // Sets key to value through the leader.
  grpc::Status Put(const std::string& key, const std::string& value);

  // Reads key. *found tells whether it exists; *value is its value (cleared
  // when absent). With allow_stale the read is served from the local state of
  // the first reachable endpoint (possibly behind the leader) and is not
  // redirected; otherwise it is a linearizable read through the leader.
  grpc::Status Get(const std::string& key, std::string* value, bool* found,
                   bool allow_stale = false);

  // Removes key through the leader. *existed (if non-null) tells whether the
  // key was present.
  grpc::Status Delete(const std::string& key, bool* existed = nullptr);

  // Sets key to value iff it currently holds *expected, or, with expected ==
  // nullptr, iff it is absent (create-only). On OK, *swapped tells whether the
  // value was written; *found and *current (if non-null) give the key's state
  // just before the operation (current cleared when absent). Retries only
  // attempts known not to have been applied (see the top of this file): an
  // UNAVAILABLE or DEADLINE_EXCEEDED result means the outcome is unknown.
  grpc::Status CompareAndSwap(const std::string& key, const std::string* expected,
                              const std::string& value, bool* swapped, bool* found = nullptr,
                              std::string* current = nullptr);

  // Applies `ops` (PUTs and DELETEs, in order) through the leader as one log
  // entry: all or none, exactly once with a session. On OK, *existed (if
  // non-null) gets one flag per op: whether its key was present just before.
  grpc::Status Batch(const std::vector<BatchOp>& ops, std::vector<bool>* existed = nullptr);

  // Queries the status of one server: a single attempt, no redirect, no retry.
  grpc::Status StatusOf(const std::string& endpoint, StatusResponse* out,
                        int timeout_ms = 1000);

  // The address of the last server that accepted a leader-only request (or
  // that a follower named as leader); empty if none yet. The reference is to
  // a per-thread snapshot, valid until this thread calls last_leader() again.
  const std::string& last_leader() const;

 private:
  // Invokes one RPC attempt on a stub with a prepared context.
  template <typename Req, typename Resp>
  using RpcMethod = grpc::Status (KV::Stub::*)(grpc::ClientContext*, const Req&, Resp*);

  // Runs `method` with the retry policy described at the top of this file.
  // follow_leader=false (stale reads) starts at the first endpoint and never
  // redirects or updates the leader cache. idempotent=false (CAS) stops at an
  // attempt whose outcome is unknown instead of retrying it.
  template <typename Req, typename Resp>
  grpc::Status Call(const char* name, RpcMethod<Req, Resp> method, const Req& request,
                    Resp* response, bool follow_leader, bool idempotent = true);

  // The stub for `address`, creating its channel on first use. Never null;
  // stubs live as long as the client.
  KV::Stub* StubFor(const std::string& address);

  // Session bookkeeping around one write: Begin opens the session if needed
  // and fills `session` with a new sequence; End retires the sequence and,
  // if the servers reported the session gone, forgets it.
  grpc::Status BeginWrite(Session* session);
  void EndWrite(const Session& session, const grpc::Status& status);
  // A write through the leader in the session: BeginWrite, Call, EndWrite
  // (without a session the request carries none).
  template <typename Req, typename Resp>
  grpc::Status Write(const char* name, RpcMethod<Req, Resp> method, Req* request, Resp* response,
                     bool idempotent = true);

  std::string LeaderHint() const;
  void SetLeader(const std::string& address);
  void ForgetLeader(const std::string& address);

  const ClientOptions options_;
  std::string config_error_;  // non-empty if options_.endpoints is unusable
  RetrySeeds retry_seeds_;    // one back-off seed per call

  mutable std::mutex mu_;
  std::string leader_;                                    // guarded by mu_
  std::map<std::string, std::unique_ptr<KV::Stub>> stubs_;  // guarded by mu_

  std::mutex open_mu_;  // one OpenSession at a time; taken before session_mu_
  mutable std::mutex session_mu_;
  uint64_t client_id_ = 0;        // guarded by session_mu_; 0 = none open
  uint64_t next_sequence_ = 1;    // guarded by session_mu_
  std::set<uint64_t> outstanding_;  // guarded by session_mu_
};

}  // namespace raftkv
