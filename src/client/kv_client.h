// The raftkv client library: a synchronous, thread-safe client of the KV
// service (protos/raftkv/v1/kv.proto) that finds and follows the Raft leader.
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
//
// The etcd-style calls follow the same rules: Range like Get (serializable
// ranges go to the first reachable endpoint, linearizable ones follow the
// leader), DeleteRange and Txn like Delete and CompareAndSwap (session writes;
// without a session a Txn with writes is retried only when nothing can have
// been applied), and the Lease calls go to the leader with the same redirects
// and retries. Watch is a long-lived stream on any member that moves to
// another member when its member goes away (see Watch below).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "client/retry_loop.h"
#include "common/endpoint.h"
#include "client/security.h"
#include "proto/api.h"

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

// The options of a Put beyond its key and value.
struct ClientPutOptions {
  int64_t lease = 0;     // attach the key to this lease (0: none, detaches it)
  bool prev_kv = false;  // answer with the key-value before the put
};

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

// Stops a KvClient::Watch from another thread: Cancel() cancels the current
// stream and no new one is opened; the Watch then returns CANCELLED. One
// WatchCancel per Watch call; Cancel before the Watch starts is kept.
class WatchCancel {
 public:
  void Cancel();
  bool cancelled() const;

 private:
  friend class KvClient;
  // The stream the Watch is reading (null between streams). False if the
  // watch is cancelled already.
  bool Attach(grpc::ClientContext* ctx);
  void Detach();

  mutable std::mutex mu_;
  grpc::ClientContext* ctx_ = nullptr;  // guarded by mu_
  bool cancelled_ = false;              // guarded by mu_
};

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
  // The same with a lease and prev_kv; *response (if non-null) gets the
  // answer (revision, prev_kv when asked for and the key existed).
  grpc::Status Put(const std::string& key, const std::string& value,
                   const ClientPutOptions& put_options, PutResponse* response);

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

  // The keys in [key, range_end) (RangeRequest). request.serializable: from
  // the local state of the first reachable endpoint, not redirected (like
  // Get with allow_stale); otherwise linearizable, through the leader.
  grpc::Status Range(const RangeRequest& request, RangeResponse* response);

  // Deletes [key, range_end) through the leader, exactly once with a session
  // (request->session is filled in here). Without one, a retry may count
  // fewer keys deleted than its first, unacknowledged attempt removed.
  grpc::Status DeleteRange(DeleteRangeRequest* request, DeleteRangeResponse* response);

  // A transaction through the leader, exactly once with a session
  // (request->session is filled in here). Without a session, a Txn with a
  // put or delete in either list is retried only when nothing can have been
  // applied (as CompareAndSwap); a read-only one always.
  grpc::Status Txn(TxnRequest* request, TxnResponse* response);

  // Leases, through the leader. LeaseGrant: ttl seconds, id 0 for one picked
  // by the server. With sessions (the default) a grant goes through the
  // session like a Put, so a retry answers with the first attempt's lease;
  // without, it is retried only when nothing can have been applied. A
  // refusal by the leader (FAILED_PRECONDITION without a leader hint: an id
  // in use) is returned at once. A retried LeaseRevoke may report NOT_FOUND
  // for a lease its first attempt revoked.
  grpc::Status LeaseGrant(int64_t ttl, int64_t id, LeaseGrantResponse* response);
  grpc::Status LeaseRevoke(int64_t id, LeaseRevokeResponse* response = nullptr);
  grpc::Status LeaseTimeToLive(int64_t id, bool keys, LeaseTimeToLiveResponse* response);
  grpc::Status LeaseLeases(LeaseLeasesResponse* response);
  // Renews lease `id` once: opens a LeaseKeepAlive stream to the leader,
  // sends one request and reads one answer (TTL 0: the lease is gone).
  grpc::Status LeaseKeepAliveOnce(int64_t id, LeaseKeepAliveResponse* response);

  // Watches [request.key, request.range_end) from request.start_revision
  // (0: from the next change on), calling on_response for each answer on
  // this thread until it returns false (then returns OK). The first answer
  // has created = true; the following ones carry the events.
  //
  // When the stream breaks (UNAVAILABLE, connection lost, CANCELLED by the
  // server, or the member ended it with OK), the watch is opened again on the
  // next endpoint after a jittered back-off, from the revision after the
  // last event delivered (or the original start_revision, or the first
  // member's revision + 1 when it was 0 and nothing was delivered yet), so
  // no event is lost or repeated and no second created answer is delivered.
  // A new stream must be established within timeout_ms of the break, else
  // the last error is returned (with the endpoints tried). OUT_OF_RANGE (the
  // member no longer keeps the history from that revision, e.g. restarted
  // from a snapshot, or the watcher fell behind) moves to the next endpoint
  // too; it is returned once every endpoint answered it for the same
  // revision, or when no stream made progress within timeout_ms.
  // RESOURCE_EXHAUSTED (a member with no room for another watcher, or one
  // that cut this stream off) moves to the next endpoint too and is returned
  // once every endpoint answered it. Any other error ends the watch:
  // INVALID_ARGUMENT, PERMISSION_DENIED, ...
  //
  // A member that has heard from no leader for three election timeouts
  // (cut off from the majority, or removed) ends its streams with
  // UNAVAILABLE, so the watch moves on. A member that stops answering
  // without closing the connection (paused, or the client's own link
  // broken) is not detected: the stream then stays idle until it answers.
  //
  // `cancel` (optional) stops the watch from another thread (CANCELLED).
  grpc::Status Watch(WatchRequest request,
                     std::function<bool(const WatchResponse&)> on_response,
                     WatchCancel* cancel = nullptr);

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

  template <typename Req, typename Resp>
  using LeaseMethod =
      grpc::Status (::raftkv::Lease::Stub::*)(grpc::ClientContext*, const Req&, Resp*);

  // Runs attempt(&ctx, target) -> grpc::Status with the retry policy
  // described at the top of this file; ctx has the attempt's deadline.
  // follow_leader=false (stale reads) starts at the first endpoint and never
  // redirects or updates the leader cache. idempotent=false (CAS) stops at an
  // attempt whose outcome is unknown instead of retrying it.
  template <typename Attempt>
  grpc::Status Retry(const char* name, bool follow_leader, bool idempotent, Attempt attempt);

  // Retry of a unary KV method.
  template <typename Req, typename Resp>
  grpc::Status Call(const char* name, RpcMethod<Req, Resp> method, const Req& request,
                    Resp* response, bool follow_leader, bool idempotent = true);
  // Retry of a unary Lease method, through the leader.
  template <typename Req, typename Resp>
  grpc::Status CallLease(const char* name, LeaseMethod<Req, Resp> method, const Req& request,
                         Resp* response, bool idempotent = true);

  // The stubs of the channel to `address`, creating it on first use. Never
  // null; stubs live as long as the client.
  struct Stubs {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<KV::Stub> kv;
    std::unique_ptr<::raftkv::Lease::Stub> lease;
    std::unique_ptr<::raftkv::Watch::Stub> watch;
  };
  Stubs* StubsFor(const std::string& address);
  KV::Stub* StubFor(const std::string& address) { return StubsFor(address)->kv.get(); }
  ::raftkv::Lease::Stub* LeaseStubFor(const std::string& address) {
    return StubsFor(address)->lease.get();
  }
  ::raftkv::Watch::Stub* WatchStubFor(const std::string& address) {
    return StubsFor(address)->watch.get();
  }

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
  std::map<std::string, std::unique_ptr<Stubs>> stubs_;  // guarded by mu_

  std::mutex open_mu_;  // one OpenSession at a time; taken before session_mu_
  mutable std::mutex session_mu_;
  uint64_t client_id_ = 0;        // guarded by session_mu_; 0 = none open
  uint64_t next_sequence_ = 1;    // guarded by session_mu_
  std::set<uint64_t> outstanding_;  // guarded by session_mu_
};

}  // namespace raftkv
