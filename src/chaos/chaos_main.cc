// raftkv-chaos: a linearizability-checked chaos run against real
// raftkv-server processes on loopback (driven by scripts/chaos.sh).
//
//  1. Starts an N-member cluster (ProcessCluster: one process and data
//     directory per member, --enable_test_faults so links can be cut,
//     --snapshot_entries small so logs are compacted during the run).
//  2. Runs --clients threads, each with its own KvClient and so its own
//     session (exactly-once retries; --impatient_clients of them give up
//     early, leaving writes in doubt), doing Get / Range over every register
//     / Put / CompareAndSwap (also as a one-key Txn) / two-key Txn / Delete
//     / DeleteRange on a small key space (--keys registers); a multi-key
//     operation is recorded as one operation per register it covers, with
//     its times (an atomic operation takes effect at one point, so each
//     projection must be linearizable on its register). Every tenth
//     operation is a Put of a key of its own ("ledger" writes, read back at
//     the end); every 25th a lease cycle: grant (--lease_ttl_s), put two
//     keys with it, then revoke it (a linearizable read must then miss
//     both keys), renew it once or let it expire.
//     --watchers threads watch every key from the first revision on with
//     KvClient::Watch, which moves to another member when its member dies.
//     The last --etcd_clients of the clients send the same operations
//     through etcd's v3 KV service instead (chaos/etcd_chaos_kv.h: Range,
//     Put, Txn for the compare-and-swaps, DeleteRange; no session, so a write
//     whose outcome is in doubt is not retried; no lease cycles). Every
//     operation is recorded: invoke and return time, inputs, outputs, and
//     its outcome: ok, failed (a read that did not happen, or an etcd write
//     every attempt of which was refused before it was proposed) or unknown
//     (a write that timed out or was refused after retries: it may or may
//     not have taken effect). When the membership changes, a client rebuilds
//     its KvClient (new session) or etcd client on the new endpoint list
//     between two operations.
//  3. Meanwhile the nemesis (this thread: it forks the servers) injects one
//     fault at a time, chosen at random among --faults, held for a random
//     time, then healed:
//       kill       SIGKILL the leader or a random member (sometimes two),
//                  restart it on its data directory;
//       pause      SIGSTOP the leader or a random member, SIGCONT it later
//                  (a GC pause or a clock jump, as seen by its peers);
//       partition  cut the links (Testing.SetFaults on every member) around
//                  the leader alone, or along a random minority/majority
//                  split; client traffic still reaches both sides;
//       transfer   Admin.TransferLeader from the leader to a random other
//                  voter;
//       snapshot   Admin.TakeSnapshot on a random member;
//       membership one cycle replacing a random non-leader voter V by a new,
//                  empty server W (see MembershipCycle): RemoveMember(V),
//                  stop V and wipe its data, start W with --join,
//                  AddMember(W) as a learner, wait for it to catch up,
//                  PromoteMember(W); with 3 voters W is added and promoted
//                  before V is removed, so there are never fewer than 3
//                  voters. A cycle may be left half done (another fault in
//                  between) and is continued by a later membership step.
//  4. Heals everything, restarts what is down, finishes a pending membership
//     cycle, waits for a leader, reads every key (recorded too), checks that
//     every acknowledged ledger write is there (lost = those that are not),
//     that the final configuration (ListMembers) is the servers the runner
//     believes are members, with at least 3 voters and no learner, that each
//     of its members holds the same values once caught up, and checks the
//     whole history for linearizability per key (src/check: WGL search;
//     unknown writes may take effect at any point after their invocation, or
//     never). Waits for every lease to expire, then compares each member's
//     whole store (values, create/mod revisions, versions, leases) with the
//     leader's. The watch check: every watcher delivered the same events up
//     to a final marker put, each once and in revision order, including
//     every acknowledged put at the revision its answer named; a lease's
//     keys were deleted at one revision, never before its TTL unless
//     revoked, and none is left once every lease is gone.
//
// Output ends with one line (ops_v1 includes the final reads):
//   chaos: ops=N faults=M violations=V lost=L watch_missed=W watch_duplicated=D ops_v1=A ops_etcd=B
// Exit status 0 only if V, L, W and D are 0 and every key's check completed.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include "chaos/chaos_kv.h"
#include "chaos/etcd_chaos_kv.h"
#include "check/linearizability.h"
#include "client/admin_client.h"
#include "client/channel_args.h"
#include "client/grpc_runtime.h"
#include "client/kv_client.h"
#include "testing/process_cluster.h"
#include "proto/internal.h"

DEFINE_int32(duration, 60, "Seconds of client load while faults are injected.");
DEFINE_int32(nodes, 3, "Cluster size (3 or 5).");
DEFINE_uint64(seed, 0, "Seed of every random choice (nemesis and clients); 0 = from the clock. "
                       "Printed at the start so a run can be replayed (timing still differs).");
DEFINE_int32(clients, 6, "Concurrent clients, each a thread with its own session.");
DEFINE_int32(etcd_clients, 2,
             "How many of the --clients (the last ones) send their operations through etcd's "
             "v3 KV service (Range, Put, Txn, DeleteRange; src/chaos/etcd_chaos_kv.h) instead "
             "of raftkv.v1's KvClient: no sessions, so a write that may have been applied is "
             "not retried and stays unknown; the same history and checks. 0: none.");
DEFINE_int32(keys, 8, "Number of keys (registers) the checked operations use.");
DEFINE_string(faults, "kill,pause,partition,transfer,membership,snapshot",
              "Comma-separated fault kinds the nemesis injects: kill, pause, partition, "
              "transfer, membership, snapshot.");
DEFINE_int32(fault_min_ms, 300, "Shortest time a fault is held before it is healed.");
DEFINE_int32(fault_max_ms, 4000, "Longest time a fault is held before it is healed.");
DEFINE_int32(quiet_min_ms, 300, "Shortest healthy interval between two faults.");
DEFINE_int32(quiet_max_ms, 2000, "Longest healthy interval between two faults.");
DEFINE_int32(think_ms, 3, "Each client pauses 0..think_ms ms between operations.");
DEFINE_int32(client_timeout_ms, 8000,
             "A client operation's total budget including retries; a write still unanswered "
             "then is recorded with an unknown outcome.");
DEFINE_int32(impatient_clients, 2,
             "How many of the clients give up after --impatient_timeout_ms instead: their "
             "writes that are still in doubt then are recorded as unknown (and may take effect "
             "later), which the checker must place correctly.");
DEFINE_int32(impatient_timeout_ms, 700, "Operation budget of the impatient clients.");
DEFINE_int32(check_budget_ms, 60000, "Linearizability search budget per key.");
DEFINE_string(history_out, "",
              "Write the recorded history here (JSON lines); on failure it is always written, "
              "into the kept cluster directory if this is empty.");
DEFINE_bool(keep_dir, false, "Keep the cluster directory (data and logs) even if the run passes.");
DEFINE_bool(stale_reads, false,
            "Negative control: clients read with allow_stale from one member each (not "
            "linearizable). Under partitions and pauses the checker should then report "
            "violations; a run that finds none shows the faults were too mild to tell.");
DEFINE_uint64(snapshot_entries, 2000,
              "--snapshot_entries of every server: small, so that logs are compacted and "
              "lagging or new members catch up by InstallSnapshot during the run (0: the "
              "server's default).");
DEFINE_int32(promote_lag, 500,
             "membership: a learner is promoted once its match index is within this many "
             "entries of the leader's last index (the servers refuse beyond "
             "--promote_max_lag, 1000 by default; refusals are retried).");
DEFINE_int32(membership_step_ms, 15000,
             "membership: time one nemesis step may spend advancing a cycle; what is left is "
             "continued by a later membership step or at the end of the run.");
DEFINE_int32(lease_ttl_s, 2,
             "TTL of the leases the clients grant (every 25th operation of a client: a lease "
             "with two keys, then revoked, renewed once or left to expire); 0: no leases. At "
             "least the servers' --min_lease_ttl_s.");
DEFINE_int32(watchers, 3,
             "Watchers of every key, each a KvClient::Watch that moves to another member when "
             "its member fails; all must deliver the same events, once, in revision order, "
             "including every acknowledged put at the revision its answer named.");
DEFINE_string(server_flags, "",
              "Extra flags for every raftkv-server, space-separated (e.g. \"--tick_ms=10\").");

namespace raftkv {
namespace chaos {
namespace {

using Steady = std::chrono::steady_clock;
using check::Operation;
using check::OpType;
using check::Outcome;
using integration::ProcessCluster;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now().time_since_epoch())
      .count();
}

void SleepMs(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

std::vector<std::string> SplitSpaces(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// ---- clients ----

// An acknowledged put and the revision its answer named: the watchers must
// all deliver it as a PUT event at that revision.
struct AckedPut {
  int64_t revision = 0;
  std::string key;
  std::string value;
};

// A lease a client granted, and what it did with it.
struct LeaseRecord {
  int64_t id = 0;
  int64_t ttl = 0;
  int64_t grant_invoke_ns = 0;  // no key of it may vanish before this + ttl unless revoked
  std::vector<std::string> keys;  // keys put with the lease: acknowledged or unknown
  bool revoke_tried = false;      // a revoke was sent (whatever its outcome)
  bool revoked = false;           // ... and acknowledged
};

struct ClientResult {
  std::vector<Operation> history;
  std::vector<std::pair<std::string, std::string>> ledger_acked;  // key, value
  int64_t ledger_unknown = 0;
  int64_t unexpected_errors = 0;
  std::string first_unexpected;
  std::vector<AckedPut> acked_puts;
  std::vector<LeaseRecord> leases;
  int64_t lease_violations = 0;
  std::string first_lease_violation;
  std::map<std::string, int64_t> counts;  // operations by kind: "range", "txn2", ...
  std::string api = "v1";  // the API this client's operations went through: v1 or etcd
  int64_t calls = 0;       // its operations (ledger puts and lease cycles included)
};

bool OutcomeUnknown(const grpc::Status& s) {
  // KvClient retried what could be retried; what is left for a write means
  // "may or may not have been applied" (or, ABORTED, a session lost after
  // earlier attempts). Never treat a write as not applied: that would be
  // unsound for the checker.
  return !s.ok();
}

// The addresses of the current members, shared by the nemesis (which
// changes them with the membership) and the clients (which rebuild their
// KvClient on a change, between two operations).
class EndpointBook {
 public:
  explicit EndpointBook(std::vector<std::string> endpoints) : endpoints_(std::move(endpoints)) {}
  void Set(std::vector<std::string> endpoints) {
    std::lock_guard<std::mutex> lock(mu_);
    if (endpoints == endpoints_) return;
    endpoints_ = std::move(endpoints);
    version_.fetch_add(1);
  }
  uint64_t version() const { return version_.load(); }
  std::vector<std::string> Get(uint64_t* version) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (version != nullptr) *version = version_.load();
    return endpoints_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> endpoints_;
  std::atomic<uint64_t> version_{0};
};

void NoteLeaseViolation(ClientResult* out, const std::string& what) {
  ++out->lease_violations;
  if (out->first_lease_violation.empty()) out->first_lease_violation = what;
}

// One lease's life: grant (TTL --lease_ttl_s), put two keys with it, then
// revoke it, renew it once, or leave it to expire. After an acknowledged
// revoke a linearizable read must find neither key.
void LeaseCycle(int id, uint64_t n, KvClient* client, std::mt19937_64* rng, ClientResult* out) {
  auto expected_error = [](const grpc::Status& s) {
    return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
           s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
           s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
           s.error_code() == grpc::StatusCode::ABORTED;
  };
  auto unexpected = [&](const std::string& what, const grpc::Status& s) {
    ++out->unexpected_errors;
    if (out->first_unexpected.empty()) {
      out->first_unexpected =
          what + ": " + StatusCodeName(s.error_code()) + ": " + s.error_message();
    }
  };
  LeaseRecord lease;
  lease.ttl = FLAGS_lease_ttl_s;
  lease.grant_invoke_ns = NowNs();
  LeaseGrantResponse granted;
  grpc::Status s = client->LeaseGrant(lease.ttl, 0, &granted);
  if (!s.ok()) {
    ++out->counts["lease-grant-failed"];
    if (!expected_error(s)) unexpected("LeaseGrant", s);
    return;
  }
  ++out->counts["lease"];
  lease.id = granted.id();
  for (const char* suffix : {"a", "b"}) {
    const std::string key = "lease/c" + std::to_string(id) + "/" + std::to_string(n) + "/" + suffix;
    const std::string value = "v" + std::to_string(n);
    ClientPutOptions options;
    options.lease = lease.id;
    PutResponse resp;
    s = client->Put(key, value, options, &resp);
    if (s.ok()) {
      out->acked_puts.push_back({resp.revision(), key, value});
      lease.keys.push_back(key);
    } else if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
      ++out->counts["lease-gone-before-put"];  // expired already (a slow cluster)
    } else {
      lease.keys.push_back(key);  // unknown outcome
      if (!expected_error(s)) unexpected("Put with a lease", s);
    }
  }
  const int action = static_cast<int>((*rng)() % 3);
  if (action == 0) {
    lease.revoke_tried = true;
    s = client->LeaseRevoke(lease.id);
    if (s.ok()) {
      lease.revoked = true;
      ++out->counts["lease-revoked"];
      for (const std::string& key : lease.keys) {
        std::string value;
        bool found = false;
        const grpc::Status g = client->Get(key, &value, &found);
        if (g.ok() && found) {
          NoteLeaseViolation(out, key + " still present after the revoke of lease " +
                                      std::to_string(lease.id) + " was acknowledged");
        }
      }
    } else if (s.error_code() != grpc::StatusCode::NOT_FOUND && !expected_error(s)) {
      unexpected("LeaseRevoke", s);
    }
  } else if (action == 1) {
    LeaseKeepAliveResponse resp;
    s = client->LeaseKeepAliveOnce(lease.id, &resp);
    if (s.ok()) ++out->counts["lease-renewed"];
  }
  out->leases.push_back(std::move(lease));
}

// One client of the load (RunClient): its connections over the current
// members, what it last saw of each register, and its operations. Each
// operation method runs one kind of operation and records its outcome.
class ChaosClient {
 public:
  ChaosClient(int id, const EndpointBook* book, uint64_t seed, ClientResult* out)
      : id_(id),
        book_(book),
        out_(out),
        impatient_(id < FLAGS_impatient_clients),
        etcd_(id >= FLAGS_clients - FLAGS_etcd_clients),
        rng_(seed) {
    for (int k = 0; k < FLAGS_keys; ++k) registers_.insert("k" + std::to_string(k));
    out_->api = etcd_ ? "etcd" : "v1";
  }

  void Run(const std::atomic<bool>* stop) {
    for (uint64_t n = 1; !stop->load(); ++n) {
      if (book_->version() != version_) Connect();
      ++out_->calls;
      if (n % 10 == 0) {
        LedgerPut(n);
        continue;
      }
      if (n % 25 == 5 && FLAGS_lease_ttl_s > 0 && v1_ != nullptr) {  // leases: raftkv.v1 only
        LeaseCycle(id_, n, v1_->client(), &rng_, out_);
        continue;
      }
      Operation op;
      op.client = id_;
      op.key = RandomKey();
      const int dice = static_cast<int>(rng_() % 100);
      const std::string fresh = "c" + std::to_string(id_) + "-" + std::to_string(n);
      op.invoke_ns = NowNs();
      // Operations over several registers are recorded as one operation per
      // register (its projection), all with the operation's invoke and
      // return times: an atomic multi-key operation takes effect at one
      // point, so each projection must be linearizable on its own register.
      // Those record their projections themselves.
      grpc::Status s;
      if (dice < 25) {
        s = Get(&op);
      } else if (dice < 35) {
        RangeOfAll(op);
        Think();
        continue;
      } else if (dice < 55) {
        s = Put(&op, fresh);
      } else if (dice < 70 || (dice < 80 && FLAGS_keys < 2)) {
        s = Cas(&op, fresh, dice);
      } else if (dice < 80) {
        TwoKeyTxn(op, fresh);
        Think();
        continue;
      } else if (dice < 95) {
        s = Delete(&op);
      } else {
        DeleteRange(op);
        Think();
        continue;
      }
      if (op.type != OpType::kGet && OutcomeUnknown(s) &&
          (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
           s.error_code() == grpc::StatusCode::INTERNAL)) {
        NoteError("write", s);
      }
      out_->history.push_back(std::move(op));
      Think();
    }
  }

  // A new client over the current members: a KvClient (and so a new
  // session: the old one's writes all have an outcome, ok or unknown, by
  // now), or an etcd one. --stale_reads: its stale reads go to one member.
  void Connect() {
    const std::vector<std::string> endpoints = book_->Get(&version_);
    const int timeout_ms = impatient_ ? FLAGS_impatient_timeout_ms : FLAGS_client_timeout_ms;
    const int rpc_timeout_ms = impatient_ ? std::min(500, FLAGS_impatient_timeout_ms) : 1000;
    const std::string stale_endpoint = endpoints[static_cast<size_t>(id_) % endpoints.size()];
    v1_ = nullptr;
    if (etcd_) {
      EtcdChaosOptions options;
      options.endpoints = endpoints;
      options.stale_endpoint = stale_endpoint;
      options.timeout_ms = timeout_ms;
      options.rpc_timeout_ms = rpc_timeout_ms;
      kv_ = std::make_unique<EtcdChaosKv>(options);
      return;
    }
    ClientOptions options;
    options.endpoints = endpoints;
    options.timeout_ms = timeout_ms;
    options.rpc_timeout_ms = rpc_timeout_ms;
    options.use_session = true;
    ClientOptions stale_options = options;
    stale_options.endpoints = {stale_endpoint};
    stale_options.timeout_ms = 1000;
    auto v1 = std::make_unique<V1ChaosKv>(std::make_unique<KvClient>(options),
                                          std::make_unique<KvClient>(stale_options));
    v1_ = v1.get();
    kv_ = std::move(v1);
  }

 private:
  std::string RandomKey() {
    return "k" + std::to_string(rng_() % static_cast<uint64_t>(FLAGS_keys));
  }

  void Think() {
    if (FLAGS_think_ms > 0) SleepMs(static_cast<int64_t>(rng_() % (FLAGS_think_ms + 1)));
  }

  void NoteError(const std::string& what, const grpc::Status& s) {
    ++out_->unexpected_errors;
    if (out_->first_unexpected.empty()) {
      out_->first_unexpected =
          what + ": " + StatusCodeName(s.error_code()) + ": " + s.error_message();
    }
  }

  // Unavailability is expected under faults (FAILED_PRECONDITION: the
  // budget ran out while following stale leader hints); anything else is not.
  void ReadError(const char* what, const grpc::Status& st) {
    if (!st.ok() && st.error_code() != grpc::StatusCode::UNAVAILABLE &&
        st.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED &&
        st.error_code() != grpc::StatusCode::FAILED_PRECONDITION) {
      NoteError(what, st);
    }
  }

  // What this client last saw of `key`: false if absent or never seen.
  bool ExpectedOf(const std::string& key, std::string* expected) const {
    auto seen = last_seen_.find(key);
    const bool has = seen != last_seen_.end() && seen->second.has_value();
    if (has) *expected = *seen->second;
    return has;
  }

  // A write's outcome: ok, failed (known not applied: every attempt was
  // refused before it was proposed; only without a session) or unknown.
  Outcome WriteOutcome(const grpc::Status& s) const {
    return chaos::WriteOutcome(s, kv_->NotApplied());
  }

  // Every tenth operation: a Put to this client's ledger, checked at the end.
  void LedgerPut(uint64_t n) {
    const std::string key = "ledger/c" + std::to_string(id_) + "/" + std::to_string(n);
    const std::string value = "l" + std::to_string(n);
    PutResponse resp;
    grpc::Status s = kv_->Put(key, value, &resp);
    if (s.ok()) {
      out_->ledger_acked.emplace_back(key, value);
      out_->acked_puts.push_back({resp.revision(), key, value});
    } else {
      ++out_->ledger_unknown;
    }
  }

  grpc::Status Get(Operation* op) {
    op->type = OpType::kGet;
    std::string value;
    bool found = false;
    grpc::Status s = kv_->Get(op->key, FLAGS_stale_reads, &value, &found);
    op->return_ns = NowNs();
    if (s.ok()) {
      op->found = found;
      op->result = value;
      last_seen_[op->key] = found ? std::optional<std::string>(value) : std::nullopt;
    }
    // A failed read had no effect: dropped by the checker.
    op->outcome = s.ok() ? Outcome::kOk : Outcome::kFail;
    // Unavailability is expected under faults (FAILED_PRECONDITION: the
    // budget ran out while following stale leader hints); anything else is not.
    if (!FLAGS_stale_reads) ReadError("Get", s);
    return s;
  }

  // A range over every register: one Get per register.
  void RangeOfAll(const Operation& op) {
    ++out_->counts["range"];
    RangeRequest req;
    req.set_key("k");
    req.set_range_end("l");
    req.set_serializable(FLAGS_stale_reads);
    RangeResponse resp;
    grpc::Status s = kv_->Range(req, &resp);
    const int64_t returned = NowNs();
    if (!FLAGS_stale_reads) ReadError("Range", s);
    if (s.ok()) {
      std::map<std::string, std::string> got;
      std::string previous;
      for (const KeyValue& kv : resp.kvs()) {
        if (kv.key() <= previous || kv.mod_revision() > resp.header().revision() ||
            registers_.count(kv.key()) == 0) {
          NoteError("Range", grpc::Status(grpc::StatusCode::INTERNAL,
                                          "answer out of order, beyond its revision or with "
                                          "a foreign key: " + kv.key()));
        }
        previous = kv.key();
        got[kv.key()] = kv.value();
      }
      if (resp.count() != resp.kvs_size() || resp.more()) {
        NoteError("Range", grpc::Status(grpc::StatusCode::INTERNAL, "count/more wrong"));
      }
      for (const std::string& key : registers_) {
        Operation g = op;
        g.key = key;
        g.type = OpType::kGet;
        g.return_ns = returned;
        g.outcome = Outcome::kOk;
        auto it = got.find(key);
        g.found = it != got.end();
        if (g.found) g.result = it->second;
        last_seen_[key] = g.found ? std::optional<std::string>(g.result) : std::nullopt;
        out_->history.push_back(std::move(g));
      }
    }
  }

  grpc::Status Put(Operation* op, const std::string& fresh) {
    op->type = OpType::kPut;
    op->value = fresh;
    PutResponse resp;
    grpc::Status s = kv_->Put(op->key, op->value, &resp);
    op->return_ns = NowNs();
    op->outcome = WriteOutcome(s);
    if (s.ok()) out_->acked_puts.push_back({resp.revision(), op->key, op->value});
    return s;
  }

  grpc::Status Cas(Operation* op, const std::string& fresh, int dice) {
    grpc::Status s;
    op->type = OpType::kCas;
    op->value = fresh;
    // Expect what this client last saw (often stale: real contention).
    op->has_expected = ExpectedOf(op->key, &op->expected);
    bool swapped = false, found = false;
    std::string current;
    if (dice < 62) {
      int64_t revision = 0;
      s = kv_->CompareAndSwap(op->key, op->has_expected ? &op->expected : nullptr, op->value,
                              &swapped, &found, &current, &revision);
      if (s.ok() && swapped && revision > 0) {
        out_->acked_puts.push_back({revision, op->key, op->value});
      }
    } else {
      // The same through a transaction: compare, put, else read the key.
      ++out_->counts["txn1"];
      TxnRequest t;
      AddValueCompare(&t, op->key, op->has_expected ? &op->expected : nullptr);
      PutRequest* put = t.add_success()->mutable_request_put();
      put->set_key(op->key);
      put->set_value(op->value);
      t.add_failure()->mutable_request_range()->set_key(op->key);
      TxnResponse resp;
      s = kv_->Txn(&t, &resp);
      if (s.ok()) {
        swapped = resp.succeeded();
        if (swapped) {
          found = op->has_expected;
          current = op->expected;
          out_->acked_puts.push_back({resp.header().revision(), op->key, op->value});
        } else if (resp.responses_size() == 1 && resp.responses(0).has_response_range()) {
          const RangeResponse& rr = resp.responses(0).response_range();
          found = rr.kvs_size() > 0;
          if (found) current = rr.kvs(0).value();
        } else {
          NoteError("Txn", grpc::Status(grpc::StatusCode::INTERNAL,
                                        "a failed txn without its range answer"));
        }
      }
    }
    op->return_ns = NowNs();
    if (s.ok()) {
      op->swapped = swapped;
      op->found = found;
      op->result = current;
      last_seen_[op->key] = swapped ? std::optional<std::string>(op->value)
                                    : (found ? std::optional<std::string>(current) : std::nullopt);
    }
    op->outcome = WriteOutcome(s);
    return s;
  }

  void TwoKeyTxn(const Operation& op, const std::string& fresh) {
    // A transaction over two registers: if both hold what this client
    // last saw, write both, else read both.
    ++out_->counts["txn2"];
    std::string other = op.key;
    while (other == op.key) {
      other = "k" + std::to_string(rng_() % static_cast<uint64_t>(FLAGS_keys));
    }
    const std::vector<std::string> keys = {op.key, other};
    std::vector<Operation> parts(2, op);
    TxnRequest t;
    for (size_t i = 0; i < 2; ++i) {
      parts[i].key = keys[i];
      parts[i].value = fresh + (i == 0 ? "a" : "b");
      parts[i].has_expected = ExpectedOf(keys[i], &parts[i].expected);
      AddValueCompare(&t, keys[i], parts[i].has_expected ? &parts[i].expected : nullptr);
      PutRequest* put = t.add_success()->mutable_request_put();
      put->set_key(keys[i]);
      put->set_value(parts[i].value);
      t.add_failure()->mutable_request_range()->set_key(keys[i]);
    }
    TxnResponse resp;
    grpc::Status s = kv_->Txn(&t, &resp);
    const int64_t returned = NowNs();
    const bool answered = s.ok() && (resp.succeeded() || resp.responses_size() == 2);
    if (s.ok() && !answered) {
      NoteError("Txn", grpc::Status(grpc::StatusCode::INTERNAL,
                                    "a failed txn without its range answers"));
    }
    for (size_t i = 0; i < 2; ++i) {
      Operation& p = parts[i];
      p.return_ns = returned;
      if (!s.ok()) {
        p.type = OpType::kCas;  // may have swapped both, or neither
        p.outcome = WriteOutcome(s);
      } else if (!answered) {
        continue;
      } else if (resp.succeeded()) {
        p.type = OpType::kCas;
        p.swapped = true;
        p.found = p.has_expected;
        p.result = p.expected;
        last_seen_[p.key] = p.value;
        out_->acked_puts.push_back({resp.header().revision(), p.key, p.value});
      } else {
        p.type = OpType::kGet;
        const RangeResponse& rr = resp.responses(static_cast<int>(i)).response_range();
        p.found = rr.kvs_size() > 0;
        p.result = p.found ? rr.kvs(0).value() : "";
        p.value.clear();
        last_seen_[p.key] = p.found ? std::optional<std::string>(p.result) : std::nullopt;
      }
      out_->history.push_back(std::move(p));
    }
    if (!s.ok() && (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
                    s.error_code() == grpc::StatusCode::INTERNAL)) {
      NoteError("Txn", s);
    }
  }

  grpc::Status Delete(Operation* op) {
    op->type = OpType::kDelete;
    bool existed = false;
    grpc::Status s = kv_->Delete(op->key, &existed);
    op->return_ns = NowNs();
    op->existed = existed;
    op->outcome = WriteOutcome(s);
    return s;
  }

  void DeleteRange(const Operation& op) {
    // DeleteRange over a random run of registers, with the deleted ones.
    ++out_->counts["delete-range"];
    const std::string a = "k" + std::to_string(rng_() % static_cast<uint64_t>(FLAGS_keys));
    const std::string b = "k" + std::to_string(rng_() % static_cast<uint64_t>(FLAGS_keys));
    DeleteRangeRequest d;
    d.set_key(std::min(a, b));
    d.set_range_end(a == b ? std::string() : std::max(a, b));
    d.set_prev_kv(true);
    DeleteRangeResponse resp;
    grpc::Status s = kv_->DeleteRange(&d, &resp);
    const int64_t returned = NowNs();
    std::set<std::string> deleted;
    for (const KeyValue& kv : resp.prev_kvs()) deleted.insert(kv.key());
    if (s.ok() && resp.deleted() != resp.prev_kvs_size()) {
      NoteError("DeleteRange", grpc::Status(grpc::StatusCode::INTERNAL,
                                            "deleted != number of prev_kvs"));
    }
    if (!s.ok() && (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
                    s.error_code() == grpc::StatusCode::INTERNAL)) {
      NoteError("DeleteRange", s);
    }
    const std::string lo = std::min(a, b);
    const std::string hi = std::max(a, b);
    for (const std::string& key : registers_) {
      if (a == b ? key != a : (key < lo || key >= hi)) continue;
      Operation p = op;
      p.key = key;
      p.type = OpType::kDelete;
      p.return_ns = returned;
      p.outcome = WriteOutcome(s);
      p.existed = deleted.count(key) > 0;
      if (s.ok()) last_seen_[key] = std::nullopt;
      out_->history.push_back(std::move(p));
    }
  }

  const int id_;
  const EndpointBook* const book_;
  ClientResult* const out_;
  const bool impatient_;
  const bool etcd_;  // through etcd's KV service, else raftkv.v1's
  uint64_t version_ = 0;
  std::unique_ptr<ChaosKv> kv_;
  V1ChaosKv* v1_ = nullptr;  // kv_ when it is raftkv.v1's (for the lease cycles)
  std::mt19937_64 rng_;
  std::map<std::string, std::optional<std::string>> last_seen_;  // what this client last saw
  std::set<std::string> registers_;  // the checked keys, in key order
};

void RunClient(int id, const EndpointBook* book, uint64_t seed, const std::atomic<bool>* stop,
               ClientResult* out) {
  ChaosClient client(id, book, seed, out);
  client.Connect();
  client.Run(stop);
}

// ---- watchers ----

struct WatchedEvent {
  int64_t revision = 0;
  bool put = true;
  std::string key;
  std::string value;
  int64_t seen_ns = 0;  // when this watcher received it
};

struct WatcherResult {
  std::vector<WatchedEvent> events;
  grpc::Status end;  // not OK: ended before the final revision
  int64_t restarts = 0;  // Watch calls reopened on a new member list
};

// Watches every key from start_revision until it has delivered an event at
// or beyond *stop_at (0: not set yet). Reopens the watch from the next
// revision when the member list changes (membership).
void RunWatcher(int w, const EndpointBook* book, int64_t start_revision,
                const std::atomic<int64_t>* stop_at, WatchCancel* cancel, WatcherResult* out) {
  int64_t next = start_revision;
  for (;;) {
    uint64_t version = 0;
    std::vector<std::string> endpoints = book->Get(&version);
    std::rotate(endpoints.begin(),
                endpoints.begin() + static_cast<long>(static_cast<size_t>(w) % endpoints.size()),
                endpoints.end());
    ClientOptions options;
    options.endpoints = endpoints;
    options.timeout_ms = 30000;  // to find a member to resume on
    options.use_session = false;
    KvClient client(options);
    WatchRequest req;
    req.set_key(std::string(1, '\0'));
    req.set_range_end(std::string(1, '\0'));
    req.set_start_revision(next);
    bool reached = false, moved = false;
    const grpc::Status s = client.Watch(
        req,
        [&](const WatchResponse& resp) {
          const int64_t now = NowNs();
          for (const Event& e : resp.events()) {
            WatchedEvent we;
            we.revision = e.kv().mod_revision();
            we.put = e.type() == Event::PUT;
            we.key = e.kv().key();
            we.value = e.kv().value();
            we.seen_ns = now;
            next = std::max(next, we.revision + 1);
            out->events.push_back(std::move(we));
          }
          const int64_t stop = stop_at->load();
          if (stop > 0 && next > stop) {
            reached = true;
            return false;
          }
          if (book->version() != version) {
            moved = true;
            return false;
          }
          return true;
        },
        cancel);
    if (reached) return;
    if (moved && s.ok()) {
      ++out->restarts;
      continue;
    }
    out->end = s.ok() ? grpc::Status(grpc::StatusCode::UNKNOWN, "watch ended early") : s;
    return;
  }
}

// What the watchers' events show, against each other and against the
// acknowledged puts and the leases.
struct WatchCheck {
  int64_t events = 0;       // distinct events (all watchers agree on them)
  int64_t delivered = 0;    // events delivered, all watchers together
  int64_t missed = 0;       // (event, watcher) pairs not delivered, acknowledged puts absent
  int64_t duplicated = 0;   // an event delivered twice to one watcher
  int64_t out_of_order = 0; // a revision lower than the one before
  int64_t divergent = 0;    // two watchers saw different things at one (revision, key)
  int64_t errors = 0;       // watchers that did not reach the final revision
  int64_t lease_split = 0;  // one lease's keys deleted at different revisions
  int64_t lease_early = 0;  // a lease's key deleted before its TTL, without a revoke
  int64_t lease_stuck = 0;  // a gone lease whose put key was never deleted
  std::vector<std::string> samples;
  void Note(const std::string& what) {
    if (samples.size() < 10) samples.push_back(what);
  }
  int64_t violations() const {
    return out_of_order + divergent + lease_split + lease_early + lease_stuck;
  }
};

WatchCheck CheckWatchers(const std::vector<WatcherResult>& watchers, int64_t start_revision,
                         int64_t stop_at, const std::vector<AckedPut>& acked,
                         const std::vector<LeaseRecord>& leases,
                         const std::set<int64_t>& live_leases) {
  WatchCheck c;
  using Id = std::pair<int64_t, std::string>;  // (revision, key)
  std::map<Id, const WatchedEvent*> all;
  for (size_t w = 0; w < watchers.size(); ++w) {
    const WatcherResult& r = watchers[w];
    if (!r.end.ok()) {
      ++c.errors;
      c.Note("watcher " + std::to_string(w) + " ended: " + StatusCodeName(r.end.error_code()) +
             ": " + r.end.error_message());
    }
    std::set<Id> mine;
    int64_t last = 0;
    for (const WatchedEvent& e : r.events) {
      ++c.delivered;
      if (e.revision < last) {
        ++c.out_of_order;
        c.Note("watcher " + std::to_string(w) + ": revision " + std::to_string(e.revision) +
               " after " + std::to_string(last));
      }
      last = std::max(last, e.revision);
      const Id id(e.revision, e.key);
      if (!mine.insert(id).second) {
        ++c.duplicated;
        c.Note("watcher " + std::to_string(w) + ": " + e.key + "@" +
               std::to_string(e.revision) + " twice");
      }
      auto [it, fresh] = all.emplace(id, &e);
      if (!fresh && (it->second->put != e.put || it->second->value != e.value)) {
        ++c.divergent;
        c.Note(e.key + "@" + std::to_string(e.revision) + " differs between watchers");
      }
    }
  }
  // Every watcher that reached the end must have every event up to stop_at.
  for (size_t w = 0; w < watchers.size(); ++w) {
    if (!watchers[w].end.ok()) continue;
    std::set<Id> mine;
    for (const WatchedEvent& e : watchers[w].events) mine.insert(Id(e.revision, e.key));
    for (const auto& [id, e] : all) {
      if (id.first <= stop_at && mine.count(id) == 0) {
        if (c.missed < 5) {
          c.Note("watcher " + std::to_string(w) + " missed " + id.second + "@" +
                 std::to_string(id.first));
        }
        ++c.missed;
      }
    }
  }
  c.events = static_cast<int64_t>(all.size());
  // Every acknowledged put, at the revision its answer named.
  for (const AckedPut& p : acked) {
    if (p.revision < start_revision) continue;
    auto it = all.find(Id(p.revision, p.key));
    if (it == all.end() || !it->second->put || it->second->value != p.value) {
      if (c.missed < 5) {
        c.Note("acknowledged put " + p.key + "=" + p.value + " at revision " +
               std::to_string(p.revision) + " not delivered as such");
      }
      ++c.missed;
    }
  }
  // Leases: their keys vanish together, not before the TTL unless revoked,
  // and surely once the lease is gone.
  std::map<std::string, std::vector<const WatchedEvent*>> by_key;
  for (const WatcherResult& r : watchers) {
    for (const WatchedEvent& e : r.events) by_key[e.key].push_back(&e);
  }
  for (const LeaseRecord& l : leases) {
    std::set<int64_t> delete_revisions;
    for (const std::string& key : l.keys) {
      bool put = false, deleted = false;
      for (const WatchedEvent* e : by_key[key]) {
        if (e->put) {
          put = true;
          continue;
        }
        deleted = true;
        delete_revisions.insert(e->revision);
        if (!l.revoke_tried && e->seen_ns < l.grant_invoke_ns + l.ttl * 1000000000) {
          ++c.lease_early;
          c.Note(key + " of lease " + std::to_string(l.id) + " deleted " +
                 std::to_string((e->seen_ns - l.grant_invoke_ns) / 1000000) +
                 " ms after the grant was sent, TTL " + std::to_string(l.ttl) + " s");
        }
      }
      if (put && !deleted && live_leases.count(l.id) == 0) {
        ++c.lease_stuck;
        c.Note(key + " of lease " + std::to_string(l.id) + " (gone) was never deleted");
      }
    }
    if (delete_revisions.size() > 1) {
      ++c.lease_split;
      c.Note("the keys of lease " + std::to_string(l.id) + " were deleted at " +
             std::to_string(delete_revisions.size()) + " revisions");
    }
  }
  return c;
}

// ---- nemesis ----

class Nemesis {
 public:
  Nemesis(ProcessCluster* cluster, EndpointBook* book, uint64_t seed, std::set<std::string> kinds)
      : cluster_(cluster), book_(book), rng_(seed), kinds_(kinds.begin(), kinds.end()) {}

  int faults() const { return faults_; }
  const std::map<std::string, int>& counts() const { return counts_; }
  bool cycle_pending() const { return cycle_.active; }

  // Injects one fault, holds it, heals it.
  void InjectOne() {
    const std::string kind = kinds_[rng_() % kinds_.size()];
    const int hold = Between(FLAGS_fault_min_ms, FLAGS_fault_max_ms);
    const uint64_t leader = FindLeader();
    const std::vector<int> live = Live();
    const int n = static_cast<int>(live.size());
    auto any = [&]() { return live[rng_() % live.size()]; };
    auto pick = [&]() -> int {
      if (leader != 0 && rng_() % 2 == 0) return static_cast<int>(leader);
      return any();
    };
    if (kind == "kill") {
      std::vector<int> victims{pick()};
      if (rng_() % 6 == 0) {  // sometimes two at once (for 3 members: no quorum for a while)
        int other = any();
        if (other != victims[0]) victims.push_back(other);
      }
      Log("kill " + Names(victims) + Role(victims, leader) + " for " + std::to_string(hold) + " ms");
      for (int v : victims) cluster_->Kill(v);
      SleepMs(hold);
      for (int v : victims) {
        if (!cluster_->Restart(v)) Log("restart of member " + std::to_string(v) + " failed");
      }
      Count("kill" + std::string(victims.size() > 1 ? "2" : ""));
    } else if (kind == "pause") {
      const int v = pick();
      const pid_t pid = cluster_->Pid(v);
      if (pid <= 0) return;
      Log("pause " + Names({v}) + Role({v}, leader) + " for " + std::to_string(hold) + " ms");
      ::kill(pid, SIGSTOP);
      SleepMs(hold);
      ::kill(pid, SIGCONT);
      Count("pause");
    } else if (kind == "partition") {
      std::set<int> side;
      std::string what;
      if (leader != 0 && rng_() % 2 == 0) {
        side = {static_cast<int>(leader)};
        what = "leader " + std::to_string(leader) + " isolated";
      } else {
        // A minority of the members (learners and joining servers included).
        const int minority = 1 + static_cast<int>(rng_() % static_cast<uint64_t>((n - 1) / 2));
        while (static_cast<int>(side.size()) < minority) side.insert(any());
        what = "minority {" + Names(std::vector<int>(side.begin(), side.end())) + "} cut off" +
               (leader != 0 && side.count(static_cast<int>(leader)) ? " (with the leader)" : "");
      }
      Log("partition: " + what + " for " + std::to_string(hold) + " ms");
      Cut(side);
      SleepMs(hold);
      HealLinks();
      Count(side.size() == 1 && leader != 0 && side.count(static_cast<int>(leader)) ? "partition-leader"
                                                                               : "partition-split");
    } else if (kind == "transfer") {
      Transfer();
    } else if (kind == "snapshot") {
      Snapshot(any());
    } else {  // membership
      AdvanceCycle(FLAGS_membership_step_ms, /*may_pause=*/true);
    }
    ++faults_;
  }

  // Cuts every link between `side` and the rest of the running members.
  void Cut(const std::set<int>& side) {
    const std::vector<int> live = Live();
    for (int i : live) {
      std::vector<uint64_t> blocked;
      for (int j : live) {
        if (j != i && (side.count(i) > 0) != (side.count(j) > 0)) blocked.push_back(j);
      }
      SetFaults(i, blocked);
    }
  }
  void HealLinks() {
    for (int i : Live()) SetFaults(i, {});
  }

  // The servers the runner considers members (or joining): not removed.
  std::vector<int> Live() const {
    std::vector<int> out;
    for (int i = 1; i <= cluster_->size(); ++i) {
      if (!cluster_->IsRemoved(i)) out.push_back(i);
    }
    return out;
  }

  uint64_t FindLeader() {
    uint64_t best = 0, best_term = 0;
    for (int i : Live()) {
      if (cluster_->Pid(i) <= 0) continue;
      StatusResponse st;
      if (cluster_->StatusOf(i, &st, 300).ok() && st.role() == "leader" && st.term() >= best_term) {
        best = st.id();
        best_term = st.term();
      }
    }
    return best;
  }

  // The member list as the leader sees it; false if no leader answered.
  bool LeaderView(ListMembersResponse* out, std::string* why = nullptr) {
    bool from_leader = false;
    grpc::Status s = Admin()->ListMembers(out, &from_leader);
    if (!s.ok() || !from_leader) {
      if (why != nullptr) *why = s.ok() ? "no leader answered ListMembers" : Describe(s);
      return false;
    }
    return true;
  }

  // Finishes a pending membership cycle (end of run: the cluster is healed).
  // Returns false if it could not within timeout_ms.
  bool FinishCycle(int timeout_ms) {
    const auto until = Steady::now() + std::chrono::milliseconds(timeout_ms);
    while (cycle_.active && Steady::now() < until) {
      if (!AdvanceCycle(FLAGS_membership_step_ms, /*may_pause=*/false) && cycle_.active) SleepMs(500);
    }
    return !cycle_.active;
  }

  static std::string DescribeMembers(const ListMembersResponse& list) {
    std::string out = "leader " + std::to_string(list.leader_id()) + " term " +
                      std::to_string(list.term()) + " commit " + std::to_string(list.commit_index()) +
                      " last " + std::to_string(list.last_index()) + " config@" +
                      std::to_string(list.config_index()) +
                      (list.config_committed() ? "" : "(uncommitted)") + ":";
    for (const MemberStatus& m : list.members()) {
      out += " " + std::to_string(m.id()) + (m.voter() ? "v" : "l") + "(match " +
             std::to_string(m.match_index()) + " " + m.state() + ")";
    }
    return out;
  }

  void Log(const std::string& what) {
    const double t =
        std::chrono::duration<double>(Steady::now() - start_).count();
    std::printf("[%7.2fs] nemesis: %s\n", t, what.c_str());
    std::fflush(stdout);
  }

 private:
  // ---- transfer, snapshot ----

  void Transfer() {
    ListMembersResponse view;
    std::string why;
    if (!LeaderView(&view, &why)) {
      Log("transfer: skipped, " + why);
      Count("transfer-skipped");
      return;
    }
    std::vector<uint64_t> others;
    for (const MemberStatus& m : view.members()) {
      if (m.voter() && m.id() != view.leader_id()) others.push_back(m.id());
    }
    if (others.empty()) return;
    const uint64_t target = others[rng_() % others.size()];
    const auto t0 = Steady::now();
    TransferLeaderResponse resp;
    grpc::Status s = Admin()->TransferLeader(target, &resp);
    const long long ms = ElapsedMs(t0);
    if (s.ok()) {
      Log("transfer: leader " + std::to_string(view.leader_id()) + " -> " + std::to_string(target) +
          ": ok, " + std::to_string(resp.leader_id()) + " leads term " + std::to_string(resp.term()) +
          " after " + std::to_string(ms) + " ms");
      Count("transfer");
    } else {
      Log("transfer: leader " + std::to_string(view.leader_id()) + " -> " + std::to_string(target) +
          ": FAILED after " + std::to_string(ms) + " ms: " + Describe(s));
      Count("transfer-failed");
    }
  }

  void Snapshot(int member) {
    TakeSnapshotResponse resp;
    const auto t0 = Steady::now();
    grpc::Status s = Admin()->TakeSnapshot(cluster_->Endpoint(member), &resp, 10000);
    const long long ms = ElapsedMs(t0);
    if (s.ok()) {
      Log("snapshot of member " + std::to_string(member) + ": index " +
          std::to_string(resp.last_index()) + " term " + std::to_string(resp.last_term()) + ", " +
          std::to_string(resp.bytes()) + " bytes in " + std::to_string(ms) + " ms");
      Count("snapshot");
    } else {
      Log("snapshot of member " + std::to_string(member) + ": failed after " + std::to_string(ms) +
          " ms: " + Describe(s));
      Count("snapshot-failed");
    }
  }

  // ---- membership ----
  //
  // One cycle replaces voter V (not the leader when chosen) by a new empty
  // server W. The servers refuse --join for an id listed in the cluster file
  // (the bootstrap configuration), and a member restarted without --join on
  // an empty data directory would believe it is a voter of that bootstrap
  // configuration; so V cannot come back under its own id: W gets a fresh id
  // (ProcessCluster::AddNode: the next id, a new port, empty directories; the
  // harness passes --join on every start of it). Order:
  //   5+ voters: RemoveMember(V), stop V and wipe its data directory, start W
  //              with --join, AddMember(W) (learner), wait until it is close to
  //              the leader's log, PromoteMember(W);
  //   3 voters:  the same steps with W's first: start, add, promote (4
  //              voters), then remove V, stop and wipe it;
  // so the configuration never has fewer voters than the cluster started
  // with (and never fewer than 3). Every phase first looks at the leader's
  // member list, so a step whose answer was lost (leader change, timeout) is
  // recognized as done; a phase that fails stays pending and is retried by
  // the next membership step.
  enum class Phase { kRemove, kStopOld, kStartNew, kAdd, kPromote, kDone };
  struct Cycle {
    bool active = false;
    bool add_first = false;
    int old_id = 0;
    int new_id = 0;
    Phase phase = Phase::kDone;
    Steady::time_point started;
    int steps = 0;  // nemesis steps it took so far
  };
  static const char* PhaseName(Phase p) {
    switch (p) {
      case Phase::kRemove: return "remove";
      case Phase::kStopOld: return "stop-and-wipe";
      case Phase::kStartNew: return "start-joiner";
      case Phase::kAdd: return "add-learner";
      case Phase::kPromote: return "promote";
      case Phase::kDone: return "done";
    }
    return "?";
  }
  static const MemberStatus* FindIn(const ListMembersResponse& list, uint64_t id) {
    for (const MemberStatus& m : list.members()) {
      if (m.id() == id) return &m;
    }
    return nullptr;
  }
  static int Voters(const ListMembersResponse& list) {
    int v = 0;
    for (const MemberStatus& m : list.members()) v += m.voter() ? 1 : 0;
    return v;
  }
  void CycleLog(const std::string& what) {
    Log("membership: [" + std::to_string(cycle_.old_id) + "->" +
        (cycle_.new_id ? std::to_string(cycle_.new_id) : std::string("?")) + "] " + what);
  }

  // Advances the cycle (starting one if none is pending) for up to budget_ms.
  // Returns true if some phase was completed.
  bool AdvanceCycle(int budget_ms, bool may_pause) {
    const auto until = Steady::now() + std::chrono::milliseconds(budget_ms);
    if (!cycle_.active) {
      ListMembersResponse view;
      std::string why;
      if (!LeaderView(&view, &why)) {
        Log("membership: no cycle started, " + why);
        Count("member-skipped");
        return false;
      }
      std::vector<uint64_t> candidates;
      for (const MemberStatus& m : view.members()) {
        if (m.voter() && m.id() != view.leader_id()) candidates.push_back(m.id());
      }
      if (candidates.empty() || Voters(view) < 3) {
        Log("membership: no cycle started, " + DescribeMembers(view));
        return false;
      }
      cycle_ = Cycle();
      cycle_.active = true;
      cycle_.old_id = static_cast<int>(candidates[rng_() % candidates.size()]);
      cycle_.add_first = Voters(view) <= 3;
      cycle_.phase = cycle_.add_first ? Phase::kStartNew : Phase::kRemove;
      cycle_.started = Steady::now();
      CycleLog(std::string("cycle starts (") + (cycle_.add_first ? "add first" : "remove first") +
               "), " + DescribeMembers(view));
    } else {
      CycleLog(std::string("cycle continues at ") + PhaseName(cycle_.phase));
    }
    ++cycle_.steps;
    bool progressed = false;
    while (cycle_.active && Steady::now() < until) {
      const Phase before = cycle_.phase;
      std::string why;
      if (!RunPhase(until, &why)) {
        CycleLog(std::string(PhaseName(before)) + " not done (pending): " + why);
        Count("member-step-failed");
        return progressed;
      }
      progressed = true;
      if (cycle_.phase == Phase::kDone) {
        CycleLog("cycle complete in " + std::to_string(ElapsedMs(cycle_.started)) + " ms, " +
                 std::to_string(cycle_.steps) + " nemesis step(s)");
        Count("member-cycle");
        cycle_.active = false;
        return true;
      }
      // Sometimes leave the cycle half done, for other faults to hit the
      // intermediate configuration (a learner, 4 voters, a missing voter).
      if (may_pause && rng_() % 4 == 0) {
        CycleLog(std::string("left pending before ") + PhaseName(cycle_.phase));
        return true;
      }
    }
    return progressed;
  }

  // Runs the current phase; true (and the next phase set) when it is done.
  bool RunPhase(Steady::time_point until, std::string* why) {
    switch (cycle_.phase) {
      case Phase::kRemove:
        return RemoveOld(why);
      case Phase::kStopOld:
        return StopOld();
      case Phase::kStartNew:
        return StartNew(why);
      case Phase::kAdd:
        return AddNew(why);
      case Phase::kPromote:
        return PromoteNew(until, why);
      case Phase::kDone:
        return true;
    }
    return false;
  }

  // kRemove: the old member leaves the configuration (leadership moved away
  // from it first).
  bool RemoveOld(std::string* why) {
    const uint64_t V = static_cast<uint64_t>(cycle_.old_id);
    ListMembersResponse view;
    if (!LeaderView(&view, why)) return false;
    if (FindIn(view, V) == nullptr) {
      if (!view.config_committed()) {
        *why = "removal of " + std::to_string(V) + " not committed yet: " + DescribeMembers(view);
        return false;
      }
      cycle_.phase = Phase::kStopOld;
      return true;
    }
    if (Voters(view) < 4) {
      *why = "only " + std::to_string(Voters(view)) + " voters, not removing: " +
             DescribeMembers(view);
      return false;
    }
    if (view.leader_id() == V) {
      // V became leader since: move leadership away first.
      uint64_t to = 0;
      for (const MemberStatus& m : view.members()) {
        if (m.voter() && m.id() != V && (to == 0 || rng_() % 2 == 0)) to = m.id();
      }
      TransferLeaderResponse tr;
      grpc::Status s = Admin()->TransferLeader(to, &tr);
      CycleLog("member " + std::to_string(V) + " is leader; transfer to " + std::to_string(to) +
               ": " + (s.ok() ? std::string("ok") : Describe(s)));
      if (!s.ok()) {
        *why = "transfer away from " + std::to_string(V) + " failed";
        return false;
      }
      if (!LeaderView(&view, why)) return false;
      if (view.leader_id() == V) {
        *why = "member " + std::to_string(V) + " still leads";
        return false;
      }
    }
    MemberChangeResponse resp;
    const auto t0 = Steady::now();
    grpc::Status s = Admin()->RemoveMember(V, &resp);
    if (!s.ok()) {
      *why = "RemoveMember(" + std::to_string(V) + "): " + Describe(s);
      return false;
    }
    Count("member-remove");
    CycleLog("RemoveMember(" + std::to_string(V) + ") committed at index " +
             std::to_string(resp.index()) + " in " + std::to_string(ElapsedMs(t0)) + " ms");
    cycle_.phase = Phase::kStopOld;
    return true;
  }

  // kStopOld: the removed server stops and its data directory is wiped.
  bool StopOld() {
    const uint64_t V = static_cast<uint64_t>(cycle_.old_id);
    cluster_->Kill(cycle_.old_id);
    cluster_->MarkRemoved(cycle_.old_id);
    std::error_code ec;
    std::filesystem::remove_all(cluster_->DataDir(cycle_.old_id), ec);
    PublishEndpoints();
    CycleLog("member " + std::to_string(V) + " stopped, data directory wiped" +
             (ec ? " (error: " + ec.message() + ")" : std::string()));
    cycle_.phase = cycle_.add_first ? Phase::kDone : Phase::kStartNew;
    return true;
  }

  // kStartNew: a new, empty server starts with --join.
  bool StartNew(std::string* why) {
    if (cycle_.new_id == 0) cycle_.new_id = cluster_->AddNode();
    const int W = cycle_.new_id;
    if (!cluster_->IsRunning(W) && !cluster_->Start(W)) {
      *why = "cannot start server " + std::to_string(W);
      return false;
    }
    const bool answers = integration::WaitUntil(
        [&] {
          StatusResponse st;
          return cluster_->StatusOf(W, &st, 300).ok();
        },
        5000, 50);
    if (!answers) {
      *why = "new server " + std::to_string(W) + " does not answer";
      return false;
    }
    CycleLog("server " + std::to_string(W) + " started empty with --join at " +
             cluster_->Endpoint(W));
    cycle_.phase = Phase::kAdd;
    return true;
  }

  // kAdd: the new server joins as a learner.
  bool AddNew(std::string* why) {
    const uint64_t W = static_cast<uint64_t>(cycle_.new_id);
    ListMembersResponse view;
    if (!LeaderView(&view, why)) return false;
    if (FindIn(view, W) == nullptr) {
      MemberChangeResponse resp;
      const auto t0 = Steady::now();
      grpc::Status s = Admin()->AddMember(W, cluster_->Endpoint(cycle_.new_id), &resp);
      if (!s.ok()) {
        *why = "AddMember(" + std::to_string(W) + "): " + Describe(s);
        return false;
      }
      Count("member-add");
      CycleLog("AddMember(" + std::to_string(W) + ") as learner committed at index " +
               std::to_string(resp.index()) + " in " + std::to_string(ElapsedMs(t0)) + " ms");
    }
    PublishEndpoints();
    cycle_.phase = Phase::kPromote;
    return true;
  }

  // kPromote: the learner becomes a voter once it has caught up.
  bool PromoteNew(Steady::time_point until, std::string* why) {
    const uint64_t W = static_cast<uint64_t>(cycle_.new_id);
    const auto t0 = Steady::now();
    // Wait until its match index is close to the leader's log.
    ListMembersResponse view;
    bool close = false;
    std::string last;
    while (Steady::now() < until) {
      if (LeaderView(&view, why)) {
        const MemberStatus* m = FindIn(view, W);
        if (m == nullptr) {
          *why = "server " + std::to_string(W) + " is not a member: " + DescribeMembers(view);
          cycle_.phase = Phase::kAdd;
          return false;
        }
        if (m->voter()) {
          cycle_.phase = cycle_.add_first ? Phase::kRemove : Phase::kDone;
          return true;
        }
        last = DescribeMembers(view);
        if (m->match_index() + static_cast<uint64_t>(std::max(0, FLAGS_promote_lag)) >=
            view.last_index()) {
          close = true;
          break;
        }
      }
      SleepMs(100);
    }
    if (!close) {
      *why = "learner " + std::to_string(W) + " not caught up: " + last;
      return false;
    }
    const long long catch_up_ms = ElapsedMs(t0);
    const std::string caught = last;
    // Promote; the leader refuses while the learner lags (or another
    // change is pending): retry, bounded by the step's budget.
    int attempts = 0;
    grpc::Status s;
    for (;;) {
      ++attempts;
      MemberChangeResponse resp;
      s = Admin()->PromoteMember(W, &resp);
      if (s.ok()) {
        Count("member-promote");
        CycleLog("learner " + std::to_string(W) + " close after " + std::to_string(catch_up_ms) +
                 " ms (" + caught + "); PromoteMember committed at index " +
                 std::to_string(resp.index()) + " after " + std::to_string(attempts) +
                 " attempt(s); it holds " +
                 std::to_string(cluster_->SnapshotFiles(cycle_.new_id).size()) +
                 " snapshot file(s)");
        cycle_.phase = cycle_.add_first ? Phase::kRemove : Phase::kDone;
        return true;
      }
      if ((s.error_code() != grpc::StatusCode::FAILED_PRECONDITION &&
           s.error_code() != grpc::StatusCode::UNAVAILABLE) ||
          Steady::now() >= until) {
        break;
      }
      SleepMs(200);
    }
    *why = "PromoteMember(" + std::to_string(W) + ") after " + std::to_string(attempts) +
           " attempt(s): " + Describe(s);
    return false;
  }
  void PublishEndpoints() {
    std::vector<std::string> eps;
    for (int i : Live()) eps.push_back(cluster_->Endpoint(i));
    book_->Set(eps);
  }

  AdminClient* Admin() {
    const std::vector<std::string> eps = cluster_->Endpoints();
    if (!admin_ || eps != admin_endpoints_) {
      AdminClientOptions options;
      options.endpoints = eps;
      options.timeout_ms = 5000;
      options.rpc_timeout_ms = 1000;
      admin_ = std::make_unique<AdminClient>(options);
      admin_endpoints_ = eps;
    }
    return admin_.get();
  }

  static std::string Describe(const grpc::Status& s) {
    return std::string(StatusCodeName(s.error_code())) + ": " + s.error_message();
  }
  static long long ElapsedMs(Steady::time_point t0) {
    return static_cast<long long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - t0).count());
  }
  int Between(int lo, int hi) {
    if (hi <= lo) return lo;
    return lo + static_cast<int>(rng_() % static_cast<uint64_t>(hi - lo + 1));
  }
  void Count(const std::string& what) { ++counts_[what]; }
  static std::string Names(const std::vector<int>& ids) {
    std::string s;
    for (int id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
    return s;
  }
  static std::string Role(const std::vector<int>& ids, uint64_t leader) {
    for (int id : ids) {
      if (static_cast<uint64_t>(id) == leader) return " (leader)";
    }
    return "";
  }
  void SetFaults(int i, const std::vector<uint64_t>& blocked) {
    if (cluster_->Pid(i) <= 0) return;  // a restarted member starts healed
    auto& stub = stubs_[i];
    if (!stub) {
      stub = Testing::NewStub(grpc::CreateCustomChannel(
          cluster_->Endpoint(i), grpc::InsecureChannelCredentials(), RaftkvChannelArguments()));
    }
    SetFaultsRequest req;
    for (uint64_t b : blocked) req.add_blocked_peers(b);
    SetFaultsResponse resp;
    for (int attempt = 0; attempt < 3; ++attempt) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1000));
      grpc::Status s = stub->SetFaults(&ctx, req, &resp);
      if (s.ok()) return;
      if (attempt == 2) {
        Log("SetFaults on member " + std::to_string(i) + " failed: " + s.error_message());
      }
    }
  }

  ProcessCluster* cluster_;
  EndpointBook* book_;
  std::mt19937_64 rng_;
  std::vector<std::string> kinds_;
  int faults_ = 0;
  std::map<std::string, int> counts_;
  std::map<int, std::unique_ptr<Testing::Stub>> stubs_;
  std::unique_ptr<AdminClient> admin_;
  std::vector<std::string> admin_endpoints_;
  Cycle cycle_;
  const Steady::time_point start_ = Steady::now();
};

// ---- the run ----

// Per API (v1, etcd): its clients, their operations, and the history
// operations they recorded by outcome (a multi-key operation records one
// per key). *recorded gets the history operations per API.
std::string ApiSummary(const std::vector<ClientResult>& results,
                       std::map<std::string, int64_t>* recorded) {
  struct Tally {
    int clients = 0;
    int64_t calls = 0, ok = 0, unknown = 0, failed = 0;
  };
  std::map<std::string, Tally> by_api = {{"v1", {}}, {"etcd", {}}};
  for (const ClientResult& r : results) {
    Tally& t = by_api[r.api];
    ++t.clients;
    t.calls += r.calls;
    for (const Operation& op : r.history) {
      (op.outcome == Outcome::kOk ? t.ok : op.outcome == Outcome::kUnknown ? t.unknown : t.failed)++;
    }
  }
  std::string out;
  for (const auto& [api, t] : by_api) {
    (*recorded)[api] = t.ok + t.unknown + t.failed;
    out += " " + api + ": clients=" + std::to_string(t.clients) +
           " operations=" + std::to_string(t.calls) + " recorded=" +
           std::to_string((*recorded)[api]) + " (ok=" + std::to_string(t.ok) +
           " unknown=" + std::to_string(t.unknown) + " failed=" + std::to_string(t.failed) + ");";
  }
  return out;
}

// One run once its cluster is up: the load (watchers, clients, nemesis),
// then the healing and the final checks, each a step below. The members are
// the run's state, declared in the order the steps create them (and so
// destroyed in reverse: the clients before the nemesis, the nemesis before
// the cluster's book).
struct ChaosRun {
  ChaosRun(ProcessCluster* c, uint64_t seed) : cluster(*c), book(c->Endpoints()), seeder(seed) {}


  // The watchers start at the revision after the empty store's.
  bool ReadStartRevision() {
    auto first = cluster.NewClient(10000, 2000);
    RangeRequest all;
    all.set_key(std::string(1, '\0'));
    all.set_range_end(std::string(1, '\0'));
    all.set_count_only(true);
    RangeResponse resp;
    const grpc::Status s = first->Range(all, &resp);
    if (!s.ok()) {
      std::cerr << "raftkv-chaos: cannot read the start revision: " << s.error_message() << "\n";
      cluster.KeepDir();
      return false;
    }
    start_revision = resp.header().revision() + 1;
    return true;
  }

  // The watchers, then the clients, then the nemesis (seeded in that order).
  void StartLoad(const std::set<std::string>& kinds) {
    for (int w = 0; w < FLAGS_watchers; ++w) {
      watch_cancels.push_back(std::make_unique<WatchCancel>());
      watch_threads.emplace_back(RunWatcher, w, &book, start_revision, &watch_stop_at,
                                 watch_cancels.back().get(), &watch_results[static_cast<size_t>(w)]);
    }
    for (int c = 0; c < FLAGS_clients; ++c) {
      threads.emplace_back(RunClient, c, &book, seeder(), &stop, &results[c]);
    }
    nemesis = std::make_unique<Nemesis>(&cluster, &book, seeder(), kinds);
  }

  // Faults at random quiet intervals until --duration is over; then the
  // clients stop.
  void InjectFaults() {
    std::mt19937_64 rng(seeder());
    const auto end = Steady::now() + std::chrono::seconds(FLAGS_duration);
    while (Steady::now() < end) {
      const int quiet = FLAGS_quiet_min_ms +
                        static_cast<int>(rng() % static_cast<uint64_t>(
                                                     std::max(1, FLAGS_quiet_max_ms - FLAGS_quiet_min_ms + 1)));
      SleepMs(quiet);
      if (Steady::now() >= end) break;
      nemesis->InjectOne();
    }
    stop = true;
    for (auto& t : threads) t.join();
  }

  void Heal() {
    // Heal: links, paused and dead members; finish a pending membership cycle.
    nemesis->HealLinks();
    for (int i : nemesis->Live()) {
      if (cluster.Pid(i) > 0) ::kill(cluster.Pid(i), SIGCONT);
      if (!cluster.IsRunning(i)) cluster.Restart(i);
    }
    // (Before waiting for a leader all members agree on: a server started
    // with --join but not added yet knows no leader.)
    if (nemesis->cycle_pending()) {
      nemesis->Log("end of run: finishing the pending membership cycle");
      if (!nemesis->FinishCycle(120000)) {
        std::printf("chaos: the pending membership cycle could not be finished\n");
        ++config_errors;
      }
    }
    leader = cluster.WaitForLeader(30000, &error);
    if (leader == 0) {
      std::printf("chaos: no leader after healing: %s\n", error.c_str());
      exit_code = 1;
    }
  }

  void CheckFinalConfiguration() {
    // The final configuration, as the leader sees it: it must be the servers
    // the runner believes are members, all voters, at least 3 of them.
    ListMembersResponse final_view;
    std::string view_error;
    bool have_view = false;
    for (int attempt = 0; attempt < 5 && !have_view; ++attempt) {
      have_view = nemesis->LeaderView(&final_view, &view_error);
      if (!have_view) SleepMs(1000);
    }
    if (!have_view) {
      std::printf("chaos: no final member list from a leader: %s\n", view_error.c_str());
      ++config_errors;
      final_members = nemesis->Live();
    } else {
      std::set<int> listed;
      int voters = 0, learners = 0;
      for (const MemberStatus& m : final_view.members()) {
        listed.insert(static_cast<int>(m.id()));
        (m.voter() ? voters : learners)++;
      }
      final_members.assign(listed.begin(), listed.end());
      const std::vector<int> live = nemesis->Live();
      const std::set<int> expected(live.begin(), live.end());
      std::printf("chaos: final configuration: %s\n", Nemesis::DescribeMembers(final_view).c_str());
      if (listed != expected || voters < 3 || learners > 0 || !final_view.config_committed()) {
        std::printf("chaos: FINAL CONFIGURATION differs from the runner's members {%s} (or has "
                    "fewer than 3 voters, a learner, or is uncommitted)\n",
                    [&] {
                      std::string t;
                      for (int i : live) t += (t.empty() ? "" : ",") + std::to_string(i);
                      return t;
                    }()
                        .c_str());
        ++config_errors;
      }
      for (int i : final_members) {
        if (i < 1 || i > cluster.size() || cluster.IsRemoved(i)) {
          std::printf("chaos: member %d of the final configuration is not a server of this run\n", i);
          ++config_errors;
        }
      }
      final_members.erase(std::remove_if(final_members.begin(), final_members.end(),
                                         [&](int i) { return i < 1 || i > cluster.size(); }),
                          final_members.end());
    }
  }

  void WaitForLeasesGone() {
    // Every lease expires (none is renewed for long): wait for that, so that
    // nothing changes the store during the final comparisons.
    reader = cluster.NewClient(10000, 2000);
    {
      std::string left;
      const bool gone = integration::WaitUntil(
          [&] {
            LeaseLeasesResponse resp;
            if (!reader->LeaseLeases(&resp).ok()) return false;
            live_leases.clear();
            left.clear();
            for (const LeaseStatus& l : resp.leases()) {
              live_leases.insert(l.id());
              left += " " + std::to_string(l.id());
            }
            return live_leases.empty();
          },
          30000, 200);
      if (!gone) {
        std::printf("chaos: LEASES STILL ALIVE 30 s after the run:%s\n", left.c_str());
        ++config_errors;
      }
    }
  }

  void FinalReads() {
    // Final reads: part of the history (client id = clients), so the checker
    // also verifies the end state.
    for (auto& r : results) {
      history.insert(history.end(), r.history.begin(), r.history.end());
      unexpected += r.unexpected_errors;
      if (!r.first_unexpected.empty()) std::printf("chaos: unexpected error: %s\n", r.first_unexpected.c_str());
    }
    for (int k = 0; k < FLAGS_keys; ++k) {
      Operation op;
      op.client = FLAGS_clients;
      op.key = "k" + std::to_string(k);
      op.type = OpType::kGet;
      op.invoke_ns = NowNs();
      std::string value;
      bool found = false;
      grpc::Status s = reader->Get(op.key, &value, &found);
      op.return_ns = NowNs();
      op.outcome = s.ok() ? Outcome::kOk : Outcome::kFail;
      op.found = found;
      op.result = value;
      if (s.ok()) {
        final_values[op.key] = found ? std::optional<std::string>(value) : std::nullopt;
      } else {
        std::printf("chaos: final read of %s failed: %s\n", op.key.c_str(), s.error_message().c_str());
        exit_code = 1;
      }
      history.push_back(op);
    }
  }

  void CheckLedger() {
    // Lost acknowledged writes: every acknowledged ledger Put must be there.
    for (auto& r : results) {
      ledger_unknown += r.ledger_unknown;
      for (auto& [key, value] : r.ledger_acked) {
        ++ledger_acked;
        std::string got;
        bool found = false;
        grpc::Status s = reader->Get(key, &got, &found);
        if (!s.ok()) {
          std::printf("chaos: ledger read of %s failed: %s\n", key.c_str(), s.error_message().c_str());
          exit_code = 1;
        } else if (!found || got != value) {
          if (lost < 10) std::printf("chaos: LOST acknowledged write %s=%s (found=%d value=%s)\n",
                                     key.c_str(), value.c_str(), found, got.c_str());
          ++lost;
        }
      }
    }
  }

  void StopWatchers() {
    // The watchers stop at a marker put after everything else; more markers
    // wake up a watcher that is waiting for its next event.
    for (auto& r : results) {
      acked_puts.insert(acked_puts.end(), r.acked_puts.begin(), r.acked_puts.end());
      leases.insert(leases.end(), r.leases.begin(), r.leases.end());
      lease_violations += r.lease_violations;
      if (!r.first_lease_violation.empty()) {
        std::printf("chaos: LEASE VIOLATION: %s\n", r.first_lease_violation.c_str());
      }
      for (auto& [k, v] : r.counts) op_counts[k] += v;
    }
    {
      // A watcher stops once it has delivered an event beyond the first
      // marker's revision; later markers wake up the ones still waiting.
      const auto deadline = Steady::now() + std::chrono::seconds(60);
      while (watch_stop_at.load() == 0 && Steady::now() < deadline) {
        PutResponse resp;
        if (reader->Put("zz/watch-end", "end", ClientPutOptions(), &resp).ok()) {
          watch_stop_at.store(resp.revision());
        } else {
          SleepMs(500);
        }
      }
      std::vector<std::atomic<bool>> joined(watch_threads.size());
      std::thread waker([&] {
        for (int marker = 1;; ++marker) {
          bool all = true;
          for (auto& j : joined) all = all && j.load();
          if (all) return;
          if (Steady::now() >= deadline || watch_stop_at.load() == 0) break;
          SleepMs(1000);
          PutResponse resp;
          (void)reader->Put("zz/watch-wake/" + std::to_string(marker), "wake", ClientPutOptions(),
                            &resp);
        }
        for (auto& c : watch_cancels) c->Cancel();
      });
      for (size_t w = 0; w < watch_threads.size(); ++w) {
        watch_threads[w].join();
        joined[w].store(true);
      }
      waker.join();
    }
    watch = CheckWatchers(watch_results, start_revision, watch_stop_at.load(),
                          acked_puts, leases, live_leases);
    for (const std::string& line : watch.samples) std::printf("chaos: watch: %s\n", line.c_str());
  }

  void CheckReplicas() {
    // Replica convergence: once every member of the final configuration
    // applied the leader's commit index, stale reads from each must match the
    // final linearizable reads.
    StatusResponse lst;
    leader = cluster.WaitForLeader(10000, &error);
    // The whole store as the leader has it (nothing writes any more): each
    // member's must be the same, revisions and versions included.
    all_keys.set_key(std::string(1, '\0'));
    all_keys.set_range_end(std::string(1, '\0'));
    store_status = reader->Range(all_keys, &leader_store);
    if (!store_status.ok()) {
      std::printf("chaos: final range of every key failed: %s\n", store_status.error_message().c_str());
      exit_code = 1;
    }
    for (const KeyValue& kv : leader_store.kvs()) {
      if (kv.key().rfind("lease/", 0) == 0 && live_leases.empty()) {
        if (lease_keys_left < 5) {
          std::printf("chaos: LEASE KEY LEFT: %s (lease %lld) though every lease is gone\n",
                      kv.key().c_str(), static_cast<long long>(kv.lease()));
        }
        ++lease_keys_left;
      }
    }
    if (leader != 0 && cluster.StatusOf(static_cast<int>(leader), &lst, 2000).ok()) {
      const uint64_t target = lst.commit_index();
      for (int i : final_members) {
        CompareMember(i, target);
      }
    } else {
      std::printf("chaos: no leader status for the replica comparison: %s\n", error.c_str());
      exit_code = 1;
    }
  }

  // Member i, once it has applied the leader's commit index `target`: its
  // store and its stale reads must be the leader's.
  void CompareMember(int i, uint64_t target) {
    StatusResponse last;
    const bool caught_up = integration::WaitUntil([&] {
      StatusResponse st;
      if (!cluster.StatusOf(i, &st, 500).ok()) return false;
      last = st;
      return st.applied_index() >= target;
    }, 20000, 50);
    if (!caught_up) {
      // Liveness, not safety: its (stale) values are not compared, but the
      // run fails.
      std::printf("chaos: MEMBER %d DID NOT CATCH UP within 20 s after healing: applied %llu "
                  "of the leader's (%llu) commit index %llu\n",
                  i, static_cast<unsigned long long>(last.applied_index()),
                  static_cast<unsigned long long>(leader),
                  static_cast<unsigned long long>(target));
      ++lagging;
      return;
    }
    auto local = cluster.NewClientFor(i);
    if (store_status.ok()) {
      RangeRequest serializable = all_keys;
      serializable.set_serializable(true);
      RangeResponse mine;
      const grpc::Status ms = local->Range(serializable, &mine);
      std::string difference;
      if (!ms.ok()) {
        difference = "range failed: " + ms.error_message();
      } else if (mine.header().revision() != leader_store.header().revision()) {
        difference = "revision " + std::to_string(mine.header().revision()) + " vs the leader's " +
                     std::to_string(leader_store.header().revision());
      } else if (mine.kvs_size() != leader_store.kvs_size()) {
        difference = std::to_string(mine.kvs_size()) + " keys vs the leader's " +
                     std::to_string(leader_store.kvs_size());
      } else {
        for (int k = 0; k < mine.kvs_size() && difference.empty(); ++k) {
          const KeyValue& a = mine.kvs(k);
          const KeyValue& b = leader_store.kvs(k);
          if (a.key() != b.key() || a.value() != b.value() ||
              a.create_revision() != b.create_revision() ||
              a.mod_revision() != b.mod_revision() || a.version() != b.version() ||
              a.lease() != b.lease()) {
            difference = "key " + a.key() + " / " + b.key() + " differs (value, revisions, "
                         "version or lease)";
          }
        }
      }
      if (!difference.empty()) {
        ++divergent;
        std::printf("chaos: member %d's store diverges from the leader's: %s\n", i,
                    difference.c_str());
      }
    }
    for (auto& [key, expected] : final_values) {
      std::string got;
      bool found = false;
      grpc::Status s = local->Get(key, &got, &found, /*allow_stale=*/true);
      const bool same = s.ok() && found == expected.has_value() && (!found || got == *expected);
      if (!same) {
        ++divergent;
        std::printf("chaos: member %d diverges on %s: %s\n", i, key.c_str(),
                    s.ok() ? (found ? got.c_str() : "<absent>") : s.error_message().c_str());
      }
    }
  }

  void CheckAndReport() {
    // Linearizability.
    const auto check_start = Steady::now();
    check::CheckResult result =
        check::CheckHistory(history, std::chrono::milliseconds(FLAGS_check_budget_ms));
    const double check_s = std::chrono::duration<double>(Steady::now() - check_start).count();
    int64_t ok = 0, unknown = 0, failed = 0;
    for (const Operation& op : history) {
      if (op.outcome == Outcome::kOk) ++ok;
      else if (op.outcome == Outcome::kUnknown) ++unknown;
      else ++failed;
    }
    for (const auto& rep : result.reports) {
      if (!rep.linearizable || rep.timed_out) {
        std::printf("chaos: key %s (%zu ops): %s%s\n", rep.key.c_str(), rep.ops,
                    rep.timed_out ? "CHECK TIMED OUT " : "NOT LINEARIZABLE ", rep.explanation.c_str());
      }
    }
    std::string fault_counts;
    for (auto& [k, v] : nemesis->counts()) fault_counts += " " + k + "=" + std::to_string(v);
    // What the servers did with snapshots (from their logs, removed members
    // included): taken (automatic or Admin.TakeSnapshot) and installed from a
    // leader (InstallSnapshot: a lagging or new member caught up that way).
    auto count_in_logs = [&](const std::string& needle) {
      int64_t total = 0;
      for (int i = 1; i <= cluster.size(); ++i) {
        const std::string text = cluster.LogText(i);
        for (size_t pos = text.find(needle); pos != std::string::npos;
             pos = text.find(needle, pos + needle.size())) {
          ++total;
        }
      }
      return total;
    };
    const int64_t snapshots_taken = count_in_logs(" took snapshot ");
    const int64_t snapshots_installed = count_in_logs(" installed the leader's snapshot ");
    std::printf("chaos: history ok=%lld unknown=%lld failed-reads=%lld; ledger acked=%lld unknown=%lld; "
                "faults:%s; snapshots taken=%lld installed=%lld; divergent=%lld lagging=%lld "
                "unexpected-errors=%lld config-errors=%lld; final members %zu; checked %zu keys in "
                "%.2fs%s\n",
                static_cast<long long>(ok), static_cast<long long>(unknown),
                static_cast<long long>(failed), static_cast<long long>(ledger_acked),
                static_cast<long long>(ledger_unknown), fault_counts.c_str(),
                static_cast<long long>(snapshots_taken), static_cast<long long>(snapshots_installed),
                static_cast<long long>(divergent), static_cast<long long>(lagging),
                static_cast<long long>(unexpected), static_cast<long long>(config_errors), final_members.size(), result.keys,
                check_s, result.timed_out ? " (SOME KEYS TIMED OUT)" : "");
    std::printf("chaos: api:%s final reads (v1)=%d\n", ApiSummary(results, &api_ops).c_str(),
                FLAGS_keys);
    std::string op_text;
    for (auto& [k, v] : op_counts) op_text += " " + k + "=" + std::to_string(v);
    std::printf("chaos: operations:%s; leases granted=%zu, violations=%lld, keys left=%lld\n",
                op_text.c_str(), leases.size(), static_cast<long long>(lease_violations),
                static_cast<long long>(lease_keys_left));
    std::printf("chaos: watch: watchers=%d from revision %lld to %lld: events=%lld delivered=%lld "
                "missed=%lld duplicated=%lld out-of-order=%lld divergent=%lld errors=%lld; "
                "leases: split=%lld early=%lld never-deleted=%lld\n",
                FLAGS_watchers, static_cast<long long>(start_revision),
                static_cast<long long>(watch_stop_at.load()), static_cast<long long>(watch.events),
                static_cast<long long>(watch.delivered), static_cast<long long>(watch.missed),
                static_cast<long long>(watch.duplicated), static_cast<long long>(watch.out_of_order),
                static_cast<long long>(watch.divergent), static_cast<long long>(watch.errors),
                static_cast<long long>(watch.lease_split), static_cast<long long>(watch.lease_early),
                static_cast<long long>(watch.lease_stuck));
    violations = static_cast<int64_t>(result.violations) + divergent +
                 watch.violations() + lease_violations + lease_keys_left;
    watch_missed = watch.missed + watch.errors;
    if (violations > 0 || lost > 0 || result.timed_out || unexpected > 0 || config_errors > 0 ||
        lagging > 0 || watch_missed > 0 || watch.duplicated > 0) {
      exit_code = 1;
    }
  }

  int Finish() {
    // Graceful stop (sanitized servers run their leak check at exit); any
    // sanitizer report (ASan, UBSan, TSan) of any server fails the run.
    const std::string sanitizer_reports = cluster.StopAllAndCollectSanitizerReports();
    if (!sanitizer_reports.empty()) {
      std::printf("chaos: SANITIZER REPORTS in server output:\n%s", sanitizer_reports.c_str());
      exit_code = 1;
    }

    std::string history_path = FLAGS_history_out;
    if (exit_code != 0 || FLAGS_keep_dir) {
      cluster.KeepDir();
      if (history_path.empty()) history_path = cluster.dir() + "/history.jsonl";
      std::printf("chaos: cluster directory kept: %s\n", cluster.dir().c_str());
    }
    if (!history_path.empty()) {
      if (const Status s = check::WriteHistory(history_path, history); s.ok()) {
        std::printf("chaos: history written to %s\n", history_path.c_str());
      } else {
        std::printf("chaos: cannot write history: %s\n", s.message().c_str());
      }
    }
    // ops_v1 counts the final reads too (ops = ops_v1 + ops_etcd).
    std::printf("chaos: ops=%zu faults=%d violations=%lld lost=%lld watch_missed=%lld "
                "watch_duplicated=%lld ops_v1=%lld ops_etcd=%lld\n",
                history.size(), nemesis->faults(), static_cast<long long>(violations),
                static_cast<long long>(lost), static_cast<long long>(watch_missed),
                static_cast<long long>(watch.duplicated),
                static_cast<long long>(history.size()) - static_cast<long long>(api_ops["etcd"]),
                static_cast<long long>(api_ops["etcd"]));
    std::fflush(stdout);
    return exit_code;
  }

  ProcessCluster& cluster;
  std::string error;
  EndpointBook book;
  int64_t start_revision = 0;
  std::atomic<int64_t> watch_stop_at{0};
  std::vector<WatcherResult> watch_results =
      std::vector<WatcherResult>(static_cast<size_t>(std::max(0, FLAGS_watchers)));
  std::vector<std::unique_ptr<WatchCancel>> watch_cancels;
  std::vector<std::thread> watch_threads;
  std::atomic<bool> stop{false};
  std::vector<ClientResult> results = std::vector<ClientResult>(FLAGS_clients);
  std::vector<std::thread> threads;
  std::mt19937_64 seeder;
  std::unique_ptr<Nemesis> nemesis;
  int exit_code = 0;
  int64_t config_errors = 0;
  uint64_t leader = 0;
  std::vector<int> final_members;
  std::unique_ptr<KvClient> reader;
  std::set<int64_t> live_leases;
  std::vector<Operation> history;
  int64_t unexpected = 0;
  std::map<std::string, std::optional<std::string>> final_values;
  int64_t lost = 0, ledger_acked = 0, ledger_unknown = 0;
  std::vector<AckedPut> acked_puts;
  std::vector<LeaseRecord> leases;
  int64_t lease_violations = 0;
  std::map<std::string, int64_t> op_counts;
  std::map<std::string, int64_t> api_ops;  // history operations per API (final reads aside)
  WatchCheck watch;
  int64_t divergent = 0, lagging = 0;
  RangeRequest all_keys;
  RangeResponse leader_store;
  grpc::Status store_status;
  int64_t lease_keys_left = 0;
  int64_t violations = 0;
  int64_t watch_missed = 0;
};


// The fault kinds of --faults, and the other flags' bounds: 0 if they hold,
// else 2 (reported).
int CheckFlags(std::set<std::string>* kinds) {

  for (std::string k : SplitSpaces([] {
         std::string s = FLAGS_faults;
         for (char& c : s) if (c == ',') c = ' ';
         return s;
       }())) {
    static const std::set<std::string> kKnown = {"kill",     "pause",      "partition",
                                                 "transfer", "membership", "snapshot"};
    if (kKnown.count(k) == 0) {
      std::cerr << "raftkv-chaos: unknown fault kind '" << k
                << "' in --faults (kill, pause, partition, transfer, membership, snapshot)\n";
      return 2;
    }
    kinds->insert(k);
  }
  if (kinds->empty()) {
    std::cerr << "raftkv-chaos: --faults names no fault kind\n";
    return 2;
  }
  if (FLAGS_nodes != 3 && FLAGS_nodes != 5) {
    std::cerr << "raftkv-chaos: --nodes must be 3 or 5\n";
    return 2;
  }
  if (FLAGS_duration < 1 || FLAGS_clients < 1 || FLAGS_keys < 1) {
    std::cerr << "raftkv-chaos: --duration, --clients and --keys must be >= 1\n";
    return 2;
  }
  if (FLAGS_etcd_clients < 0 || FLAGS_etcd_clients > FLAGS_clients) {
    std::cerr << "raftkv-chaos: --etcd_clients must be between 0 and --clients\n";
    return 2;
  }
  return 0;
}

// The servers' flags: fast timeouts, the test faults, --snapshot_entries and
// --server_flags.
std::vector<std::string> ServerFlags() {
  std::vector<std::string> flags = integration::FastTimeoutFlags();
  flags.push_back("--enable_test_faults");
  if (FLAGS_snapshot_entries > 0) {
    flags.push_back("--snapshot_entries=" + std::to_string(FLAGS_snapshot_entries));
  }
  for (const std::string& f : SplitSpaces(FLAGS_server_flags)) flags.push_back(f);
  return flags;
}

int Run() {
  std::set<std::string> kinds;
  if (const int code = CheckFlags(&kinds); code != 0) return code;
  uint64_t seed = FLAGS_seed;
  if (seed == 0) seed = static_cast<uint64_t>(Steady::now().time_since_epoch().count()) | 1;
  std::printf("chaos: seed=%llu nodes=%d duration=%ds clients=%d (etcd API: %d, ids %d..%d) "
              "keys=%d faults=%s\n",
              static_cast<unsigned long long>(seed), FLAGS_nodes, FLAGS_duration, FLAGS_clients,
              FLAGS_etcd_clients, FLAGS_clients - FLAGS_etcd_clients, FLAGS_clients - 1,
              FLAGS_keys, FLAGS_faults.c_str());
  std::fflush(stdout);

  ProcessCluster cluster(FLAGS_nodes, ServerFlags());
  std::string error;
  if (!cluster.StartAll(&error) || cluster.WaitForLeader(20000, &error) == 0) {
    std::cerr << "raftkv-chaos: cluster did not start: " << error << "\n" << cluster.Describe();
    cluster.KeepDir();
    return 2;
  }
  std::printf("chaos: cluster in %s\n", cluster.dir().c_str());

  ChaosRun run(&cluster, seed);
  if (!run.ReadStartRevision()) return 2;
  run.StartLoad(kinds);
  run.InjectFaults();
  run.Heal();
  run.CheckFinalConfiguration();
  run.WaitForLeasesGone();
  run.FinalReads();
  run.CheckLedger();
  run.StopWatchers();
  run.CheckReplicas();
  run.CheckAndReport();
  return run.Finish();
}

}  // namespace
}  // namespace chaos
}  // namespace raftkv

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "raftkv-chaos --duration=60 --nodes=3 --seed=1  (see scripts/chaos.sh and --help)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = false;
  // The client library's retries are expected here: warnings are noise
  // unless asked for (--minloglevel=0 --vmodule=kv_client=1 --log_dir=D).
  if (gflags::GetCommandLineFlagInfoOrDie("minloglevel").is_default) FLAGS_minloglevel = 2;
  google::InitGoogleLogging(argv[0]);
  raftkv::InitGrpcRuntime();
  if (argc > 1) {
    std::cerr << "raftkv-chaos: unexpected argument '" << argv[1] << "'\n";
    return 2;
  }
  return raftkv::chaos::Run();
}
