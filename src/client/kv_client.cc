#include "client/kv_client.h"

#include "client/channel_args.h"
#include "client/security.h"
#include "client/retry_loop.h"

#include <algorithm>
#include <chrono>
#include <cctype>
#include <thread>
#include <utility>

#include <glog/logging.h>

namespace raftkv {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

const char* StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN_CODE";
  }
}

KvClient::KvClient(ClientOptions options)
    : options_(std::move(options)), retry_seeds_(options_.retry_seed) {
  if (options_.endpoints.empty()) {
    config_error_ = "no endpoints configured";
  }
  for (const auto& e : options_.endpoints) {
    if (Status s = ParseEndpoint(e); !s.ok()) {
      config_error_ = s.message();
      break;
    }
  }
  if (!config_error_.empty()) LOG(ERROR) << "KvClient: " << config_error_;
}

KvClient::~KvClient() { CloseSession(); }

uint64_t KvClient::session_id() const {
  std::lock_guard<std::mutex> lock(session_mu_);
  return client_id_;
}

void KvClient::CloseSession() {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(session_mu_);
    id = client_id_;
    client_id_ = 0;
    outstanding_.clear();
  }
  if (id == 0 || !config_error_.empty()) return;
  // Best effort: an unclosed session only costs memory until it expires.
  std::string target = LeaderHint();
  if (target.empty()) target = options_.endpoints[0];
  grpc::ClientContext ctx;
  SetTimeout(&ctx, std::chrono::milliseconds(std::min(500, std::max(1, options_.rpc_timeout_ms))));
  CloseSessionRequest req;
  req.set_client_id(id);
  CloseSessionResponse resp;
  grpc::Status s = StubFor(target)->CloseSession(&ctx, req, &resp);
  VLOG(1) << "KvClient: CloseSession " << id << " at " << target << ": "
          << StatusCodeName(s.error_code());
}

grpc::Status KvClient::BeginWrite(Session* session) {
  if (!options_.use_session) return grpc::Status::OK;
  std::lock_guard<std::mutex> open_lock(open_mu_);
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(session_mu_);
    id = client_id_;
  }
  if (id == 0) {
    // Retrying OpenSession is harmless: a duplicate only opens a session that
    // nobody uses, which expires.
    OpenSessionRequest req;
    OpenSessionResponse resp;
    grpc::Status s = Call("OpenSession", &KV::Stub::OpenSession, req, &resp, /*follow_leader=*/true);
    if (!s.ok()) return s;
    id = resp.client_id();
    VLOG(1) << "KvClient: opened session " << id;
  }
  std::lock_guard<std::mutex> lock(session_mu_);
  if (client_id_ != id) {  // a new session: sequences start again
    client_id_ = id;
    next_sequence_ = 1;
    outstanding_.clear();
  }
  const uint64_t seq = next_sequence_++;
  outstanding_.insert(seq);
  session->set_client_id(id);
  session->set_sequence(seq);
  session->set_first_outstanding(*outstanding_.begin());
  return grpc::Status::OK;
}

void KvClient::EndWrite(const Session& session, const grpc::Status& status) {
  if (session.client_id() == 0) return;
  std::lock_guard<std::mutex> lock(session_mu_);
  if (client_id_ != session.client_id()) return;
  // Retired even when the outcome is unknown: a late copy of the request
  // then arrives below first_outstanding and is refused, never applied.
  outstanding_.erase(session.sequence());
  if (status.error_code() == grpc::StatusCode::ABORTED) {  // only sent for a lost session
    LOG(WARNING) << "KvClient: session " << client_id_ << " expired; opening a new one";
    client_id_ = 0;
    outstanding_.clear();
  }
}

KvClient::Stubs* KvClient::StubsFor(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& stubs = stubs_[address];
  if (!stubs) {
    stubs = std::make_unique<Stubs>();
    stubs->channel = MakeChannel(address, RaftkvChannelArguments(), options_.security);
    stubs->kv = KV::NewStub(stubs->channel);
    stubs->lease = ::raftkv::Lease::NewStub(stubs->channel);
    stubs->watch = ::raftkv::Watch::NewStub(stubs->channel);
    VLOG(1) << "KvClient: new channel to " << address;
  }
  return stubs.get();
}

std::string KvClient::LeaderHint() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leader_;
}

void KvClient::SetLeader(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  if (leader_ != address) VLOG(1) << "KvClient: leader is now " << address;
  leader_ = address;
}

void KvClient::ForgetLeader(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  if (leader_ == address) leader_.clear();
}

const std::string& KvClient::last_leader() const {
  thread_local std::string snapshot;
  snapshot = LeaderHint();
  return snapshot;
}

template <typename Attempt>
grpc::Status KvClient::Retry(const char* name, bool follow_leader, bool idempotent,
                             Attempt attempt) {
  if (!config_error_.empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, config_error_);
  }
  const auto rpc_timeout = std::chrono::milliseconds(std::max(1, options_.rpc_timeout_ms));
  // A known leader first (when following the leader), then the endpoints in
  // turn, or the leader a refusal names.
  RetryLoop loop(options_.endpoints, follow_leader ? LeaderHint() : std::string(),
                 std::chrono::milliseconds(options_.timeout_ms), retry_seeds_.Next());
  grpc::Status last(grpc::StatusCode::DEADLINE_EXCEEDED, "no attempt made");
  while (loop.Start()) {
    const std::string target = loop.target();
    grpc::ClientContext ctx;
    SetTimeout(&ctx, std::min<Clock::duration>(loop.left(), rpc_timeout));
    grpc::Status s = attempt(&ctx, target);
    if (s.ok()) {
      if (follow_leader) {
        // A follower that forwarded the call names the leader: go direct next time.
        const std::string hint = TrailingValue(ctx, kLeaderAddrMetadataKey);
        SetLeader(!hint.empty() && ParseEndpoint(hint).ok() ? hint : target);
      }
      return s;
    }
    VLOG(1) << "KvClient: " << name << " at " << target << " failed: "
            << StatusCodeName(s.error_code()) << ": " << s.error_message();
    last = s;

    bool sleep = false;
    switch (s.error_code()) {
      case grpc::StatusCode::FAILED_PRECONDITION: {
        if (!follow_leader) return s;
        ForgetLeader(target);
        const std::string hint = TrailingValue(ctx, kLeaderAddrMetadataKey);
        const Status hint_ok = hint.empty() ? Status::OK() : ParseEndpoint(hint);
        if (!hint.empty() && hint != target && hint_ok.ok()) {
          VLOG(1) << "KvClient: redirected to leader " << hint << " (id "
                  << TrailingValue(ctx, kLeaderIdMetadataKey) << ")";
          SetLeader(hint);
          sleep = loop.Redirect(hint);
        } else if (hint.empty() || hint == target) {
          // Not a redirect: the leader itself refused the request (a lease
          // that exists, ...). Retrying cannot change the answer.
          return s;
        } else {
          LOG(WARNING) << "KvClient: ignoring leader hint: " << hint_ok.message();
          loop.Advance();
          sleep = loop.RoundDone();
        }
        break;
      }
      case grpc::StatusCode::UNAVAILABLE:
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        if (follow_leader) ForgetLeader(target);
        if (!idempotent && (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                            TrailingValue(ctx, kNotAppliedMetadataKey) != "1")) {
          return grpc::Status(s.error_code(), s.error_message() + " (" + name + " at " + target +
                                                  ": outcome unknown, not retried)");
        }
        loop.Advance();
        sleep = true;
        break;
      default:
        return s;
    }
    if (sleep && !loop.Backoff()) break;
  }
  return loop.GaveUp(last, name);
}

template <typename Req, typename Resp>
grpc::Status KvClient::Call(const char* name, RpcMethod<Req, Resp> method, const Req& request,
                            Resp* response, bool follow_leader, bool idempotent) {
  return Retry(name, follow_leader, idempotent,
               [&](grpc::ClientContext* ctx, const std::string& target) {
                 *response = Resp();
                 return (StubFor(target)->*method)(ctx, request, response);
               });
}

template <typename Req, typename Resp>
grpc::Status KvClient::CallLease(const char* name, LeaseMethod<Req, Resp> method,
                                 const Req& request, Resp* response, bool idempotent) {
  return Retry(name, /*follow_leader=*/true, idempotent,
               [&](grpc::ClientContext* ctx, const std::string& target) {
                 *response = Resp();
                 return (LeaseStubFor(target)->*method)(ctx, request, response);
               });
}

template <typename Req, typename Resp>
grpc::Status KvClient::Write(const char* name, RpcMethod<Req, Resp> method, Req* request,
                             Resp* response, bool idempotent) {
  grpc::Status s = BeginWrite(request->mutable_session());
  if (!s.ok()) return s;
  if (!options_.use_session) request->clear_session();
  s = Call(name, method, *request, response, /*follow_leader=*/true, idempotent);
  EndWrite(request->session(), s);
  return s;
}

grpc::Status KvClient::Put(const std::string& key, const std::string& value) {
  return Put(key, value, ClientPutOptions(), nullptr);
}

grpc::Status KvClient::Put(const std::string& key, const std::string& value,
                           const ClientPutOptions& put_options, PutResponse* response) {
  PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(put_options.lease);
  req.set_prev_kv(put_options.prev_kv);
  PutResponse resp;
  grpc::Status s = Write("Put", &KV::Stub::Put, &req, &resp);
  if (s.ok() && response != nullptr) *response = std::move(resp);
  return s;
}

grpc::Status KvClient::Range(const RangeRequest& request, RangeResponse* response) {
  RangeResponse resp;
  grpc::Status s =
      Call("Range", &KV::Stub::Range, request, &resp, /*follow_leader=*/!request.serializable());
  if (s.ok() && response != nullptr) *response = std::move(resp);
  return s;
}

grpc::Status KvClient::DeleteRange(DeleteRangeRequest* request, DeleteRangeResponse* response) {
  DeleteRangeResponse resp;
  grpc::Status s = Write("DeleteRange", &KV::Stub::DeleteRange, request, &resp);
  if (s.ok() && response != nullptr) *response = std::move(resp);
  return s;
}

namespace {

bool HasWrites(const google::protobuf::RepeatedPtrField<RequestOp>& ops) {
  for (const RequestOp& op : ops) {
    if (op.has_request_put() || op.has_request_delete_range()) return true;
  }
  return false;
}

}  // namespace

grpc::Status KvClient::Txn(TxnRequest* request, TxnResponse* response) {
  // Without a session a retried Txn could apply twice or fail against its own
  // first application, unless it only reads.
  const bool idempotent =
      options_.use_session || (!HasWrites(request->success()) && !HasWrites(request->failure()));
  TxnResponse resp;
  grpc::Status s = Write("Txn", &KV::Stub::Txn, request, &resp, idempotent);
  if (s.ok() && response != nullptr) *response = std::move(resp);
  return s;
}

grpc::Status KvClient::LeaseGrant(int64_t ttl, int64_t id, LeaseGrantResponse* response) {
  LeaseGrantRequest req;
  req.set_ttl(ttl);
  req.set_id(id);
  grpc::Status s = BeginWrite(req.mutable_session());
  if (!s.ok()) return s;
  if (!options_.use_session) req.clear_session();
  LeaseGrantResponse resp;
  // Through the session a retry answers with the first attempt's lease;
  // without one a grant whose outcome is unknown is not retried (it could
  // grant a second lease, or fail against its own first grant).
  s = CallLease("LeaseGrant", &::raftkv::Lease::Stub::LeaseGrant, req, &resp,
                /*idempotent=*/options_.use_session);
  EndWrite(req.session(), s);
  if (s.ok() && response != nullptr) *response = std::move(resp);
  return s;
}

grpc::Status KvClient::LeaseRevoke(int64_t id, LeaseRevokeResponse* response) {
  LeaseRevokeRequest req;
  req.set_id(id);
  LeaseRevokeResponse resp;
  grpc::Status s = CallLease("LeaseRevoke", &::raftkv::Lease::Stub::LeaseRevoke, req, &resp);
  if (s.ok() && response != nullptr) *response = std::move(resp);
  return s;
}

grpc::Status KvClient::LeaseTimeToLive(int64_t id, bool keys, LeaseTimeToLiveResponse* response) {
  LeaseTimeToLiveRequest req;
  req.set_id(id);
  req.set_keys(keys);
  LeaseTimeToLiveResponse resp;
  grpc::Status s =
      CallLease("LeaseTimeToLive", &::raftkv::Lease::Stub::LeaseTimeToLive, req, &resp);
  if (s.ok() && response != nullptr) *response = std::move(resp);
  return s;
}

grpc::Status KvClient::LeaseLeases(LeaseLeasesResponse* response) {
  LeaseLeasesRequest req;
  LeaseLeasesResponse resp;
  grpc::Status s = CallLease("LeaseLeases", &::raftkv::Lease::Stub::LeaseLeases, req, &resp);
  if (s.ok() && response != nullptr) *response = std::move(resp);
  return s;
}

grpc::Status KvClient::LeaseKeepAliveOnce(int64_t id, LeaseKeepAliveResponse* response) {
  LeaseKeepAliveRequest req;
  req.set_id(id);
  LeaseKeepAliveResponse resp;
  grpc::Status s = Retry(
      "LeaseKeepAlive", /*follow_leader=*/true, /*idempotent=*/true,
      [&](grpc::ClientContext* ctx, const std::string& target) {
        resp = LeaseKeepAliveResponse();
        auto stream = LeaseStubFor(target)->LeaseKeepAlive(ctx);
        if (stream->Write(req) && stream->Read(&resp)) {
          // Half-close: the server ends the stream (OK) once it has read it.
          // The answer is in hand whatever the final status says.
          stream->WritesDone();
          grpc::Status finish = stream->Finish();
          if (!finish.ok()) {
            VLOG(1) << "KvClient: LeaseKeepAlive at " << target << " ended with "
                    << StatusCodeName(finish.error_code()) << " after its answer";
          }
          return grpc::Status::OK;
        }
        // Refused (not the leader, ...) or broken: the status says why.
        LeaseKeepAliveResponse ignored;
        while (stream->Read(&ignored)) {
        }
        return stream->Finish();
      });
  if (s.ok() && response != nullptr) *response = std::move(resp);
  return s;
}

namespace {

// A watch stream that ended with one of these is opened again on another
// member; any other status ends the watch.
bool WatchResumable(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::OK:  // the member closed the stream (shutting down)
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return true;
    default:
      return false;
  }
}

// The revision of an event: the change's (PUT: the key's new mod revision;
// DELETE: the delete's).
int64_t EventRevision(const Event& e) { return e.kv().mod_revision(); }

}  // namespace

void WatchCancel::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (ctx_ != nullptr) ctx_->TryCancel();
}

bool WatchCancel::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

bool WatchCancel::Attach(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) return false;
  ctx_ = ctx;
  return true;
}

void WatchCancel::Detach() {
  std::lock_guard<std::mutex> lock(mu_);
  ctx_ = nullptr;
}

grpc::Status KvClient::Watch(WatchRequest request,
                             std::function<bool(const WatchResponse&)> on_response,
                             WatchCancel* cancel) {
  const grpc::Status cancelled(grpc::StatusCode::CANCELLED, "the watch was cancelled");
  if (!config_error_.empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, config_error_);
  }
  // The first revision not delivered yet: every event below it has been
  // (0 until known: "from the next change on").
  int64_t next_revision = request.start_revision();
  bool created_delivered = false;
  // The reconnection window: restarted each time a stream is established.
  auto loop = std::make_unique<RetryLoop>(options_.endpoints, std::string(),
                                          std::chrono::milliseconds(options_.timeout_ms),
                                          retry_seeds_.Next());
  grpc::Status last(grpc::StatusCode::UNAVAILABLE, "no attempt made");
  // The members that answered OUT_OF_RANGE for next_revision (they no
  // longer keep, or restarted never had, the history from there): given up
  // once every endpoint has, or with their answer when the window ends.
  std::set<std::string> out_of_range_at;
  int64_t out_of_range_revision = -1;
  grpc::Status out_of_range;
  // The members that refused the watch for want of room (RESOURCE_EXHAUSTED:
  // watcher limits, or a stream cut off for not reading): another may have
  // room; given up once every endpoint refused.
  std::set<std::string> exhausted_at;
  while (loop->Start()) {
    const std::string target = loop->target();
    grpc::ClientContext ctx;  // no deadline: a watch lasts
    if (cancel != nullptr && !cancel->Attach(&ctx)) return cancelled;
    struct DetachAtExit {
      WatchCancel* cancel;
      ~DetachAtExit() {
        if (cancel != nullptr) cancel->Detach();
      }
    } detach{cancel};
    request.set_start_revision(next_revision);
    auto reader = WatchStubFor(target)->Watch(&ctx, request);
    bool established = false;
    bool delivered = false;
    bool stopped = false;
    WatchResponse resp;
    while (reader->Read(&resp)) {
      if (!established && resp.created()) {
        established = true;
        VLOG(1) << "KvClient: watch established at " << target << " from revision "
                << next_revision << " (member at revision " << resp.header().revision() << ")";
        if (next_revision == 0) next_revision = resp.header().revision() + 1;
      }
      // Drop what was delivered already (a member that resent it).
      if (resp.events_size() > 0) {
        auto* events = resp.mutable_events();
        int kept = 0;
        for (int i = 0; i < events->size(); ++i) {
          if (next_revision != 0 && EventRevision(events->Get(i)) < next_revision) continue;
          if (kept != i) events->SwapElements(kept, i);
          ++kept;
        }
        const bool had_events = events->size() > 0;
        while (events->size() > kept) events->RemoveLast();
        if (had_events && kept == 0 && !resp.created()) continue;
      }
      if (resp.created()) {
        if (created_delivered) {
          if (resp.events_size() == 0) continue;
          resp.set_created(false);
        }
        created_delivered = true;
      }
      int64_t highest = 0;
      for (const Event& e : resp.events()) highest = std::max(highest, EventRevision(e));
      delivered = delivered || resp.events_size() > 0;
      if (!on_response(resp)) {
        stopped = true;
        break;
      }
      if (highest >= next_revision) next_revision = highest + 1;
    }
    if (stopped) {
      ctx.TryCancel();
      reader->Finish();
      return grpc::Status::OK;
    }
    grpc::Status s = reader->Finish();
    VLOG(1) << "KvClient: watch at " << target << " ended: " << StatusCodeName(s.error_code())
            << ": " << s.error_message();
    if (cancel != nullptr && cancel->cancelled()) return cancelled;
    const bool out_of_range_here = s.error_code() == grpc::StatusCode::OUT_OF_RANGE;
    if (out_of_range_here) {
      if (out_of_range_revision != next_revision) {
        out_of_range_at.clear();
        out_of_range_revision = next_revision;
      }
      out_of_range_at.insert(target);
      out_of_range = s;
      if (out_of_range_at.size() >= options_.endpoints.size()) return s;
    } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      if (delivered || established) exhausted_at.clear();
      exhausted_at.insert(target);
      if (exhausted_at.size() >= options_.endpoints.size()) return s;
    } else if (!WatchResumable(s)) {
      return s;
    }
    if (s.ok()) s = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the member ended the watch");
    last = s;
    // A stream that delivered events, or lasted until its member went away,
    // is progress; one refused at once (OUT_OF_RANGE) is not.
    if (delivered || (established && !out_of_range_here)) {
      // A new window, from the member after this one.
      loop = std::make_unique<RetryLoop>(options_.endpoints, target,
                                         std::chrono::milliseconds(options_.timeout_ms),
                                         retry_seeds_.Next());
    }
    loop->Advance();
    if (!loop->Backoff()) break;
    if (cancel != nullptr && cancel->cancelled()) return cancelled;
  }
  if (out_of_range_revision == next_revision) return out_of_range;
  return loop->GaveUp(last, "Watch");
}

grpc::Status KvClient::Get(const std::string& key, std::string* value, bool* found,
                           bool allow_stale) {
  GetRequest req;
  req.set_key(key);
  req.set_allow_stale(allow_stale);
  GetResponse resp;
  grpc::Status s = Call("Get", &KV::Stub::Get, req, &resp, /*follow_leader=*/!allow_stale);
  if (s.ok()) {
    if (found != nullptr) *found = resp.found();
    if (value != nullptr) {
      if (resp.found()) {
        *value = std::move(*resp.mutable_value());
      } else {
        value->clear();
      }
    }
  }
  return s;
}

grpc::Status KvClient::Delete(const std::string& key, bool* existed) {
  DeleteRequest req;
  req.set_key(key);
  DeleteResponse resp;
  grpc::Status s = Write("Delete", &KV::Stub::Delete, &req, &resp);
  if (s.ok() && existed != nullptr) *existed = resp.existed();
  return s;
}

grpc::Status KvClient::Batch(const std::vector<BatchOp>& ops, std::vector<bool>* existed) {
  BatchRequest req;
  req.mutable_ops()->Reserve(static_cast<int>(ops.size()));
  for (const BatchOp& op : ops) *req.add_ops() = op;
  BatchResponse resp;
  grpc::Status s = Write("Batch", &KV::Stub::Batch, &req, &resp);
  if (s.ok() && existed != nullptr) existed->assign(resp.existed().begin(), resp.existed().end());
  return s;
}

grpc::Status KvClient::CompareAndSwap(const std::string& key, const std::string* expected,
                                      const std::string& value, bool* swapped, bool* found,
                                      std::string* current) {
  CompareAndSwapRequest req;
  req.set_key(key);
  req.set_has_expected(expected != nullptr);
  if (expected != nullptr) req.set_expected(*expected);
  req.set_value(value);
  CompareAndSwapResponse resp;
  // With a session a retry is answered with the first attempt's result.
  grpc::Status s = Write("CompareAndSwap", &KV::Stub::CompareAndSwap, &req, &resp,
                         /*idempotent=*/options_.use_session);
  if (s.ok()) {
    if (swapped != nullptr) *swapped = resp.swapped();
    if (found != nullptr) *found = resp.found();
    if (current != nullptr) *current = std::move(*resp.mutable_current());
  }
  return s;
}

grpc::Status KvClient::StatusOf(const std::string& endpoint, StatusResponse* out,
                                int timeout_ms) {
  if (Status s = ParseEndpoint(endpoint); !s.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, s.message());
  }
  grpc::ClientContext ctx;
  SetTimeout(&ctx, std::chrono::milliseconds(timeout_ms));
  StatusRequest req;
  StatusResponse resp;
  grpc::Status s = StubFor(endpoint)->Status(&ctx, req, &resp);
  if (s.ok() && out != nullptr) *out = std::move(resp);
  return s;
}

}  // namespace raftkv
