#include "server/etcd/etcd_maintenance.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "server/api/client_handlers.h"
#include "server/etcd/etcd_errors.h"
#include "server/etcd/etcd_kv.h"
#include "server/rpc/grpc_status.h"
#include "storage/crc32c.h"

namespace raftkv {

namespace pb = etcdserverpb;

EtcdMaintenanceService::EtcdMaintenanceService(const ServerOptions& options, const RaftNode* node)
    : streamer_(options.snapshot_streamer),
      auth_(options.auth),
      node_(node),
      metrics_(options.metrics == nullptr ? nullptr
                                          : options.metrics->Method(RpcName::Of<pb::Maintenance>("Snapshot"),
                                                                    RpcMethodMetrics::Kind::kStream)) {}

grpc::Status EtcdMaintenanceService::Snapshot(grpc::ServerContext* context, const pb::SnapshotRequest*,
                                              grpc::ServerWriter<pb::SnapshotResponse>* writer) {
  const auto start = std::chrono::steady_clock::now();
  if (metrics_ != nullptr) metrics_->StreamStarted();
  grpc::Status status = AuthorizeCall(auth_, *context, Caller::kAdmin);
  if (status.ok() && streamer_ == nullptr) {
    status = grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this server streams no snapshots");
  }
  if (status.ok()) {
    status = streamer_->StreamEtcdSnapshot(context, [&](const SnapshotSaveInfo& info, std::string* chunk,
                                                    uint64_t remaining, const std::string&) {
      pb::SnapshotResponse resp;
      EtcdKv::FillHeader(*node_, info.revision(), node_->KnownTerm(), resp.mutable_header());
      resp.set_remaining_bytes(remaining);
      resp.mutable_blob()->swap(*chunk);
      resp.set_version(EtcdMaintenance::kEtcdVersion);
      return writer->Write(resp);
    });
  }
  if (metrics_ != nullptr) metrics_->Finished(status.error_code(), std::chrono::steady_clock::now() - start);
  return status;
}

void EtcdMaintenance::Register(EtcdMaintenanceService* maintenance, EtcdAuthService* auth, AsyncMethods* methods) {
  const int n = 2;
  const Caller c = Caller::kClient;
  using M = EtcdMaintenanceService;
  using A = EtcdAuthService;
  auto name = [](const char* method) { return RpcName::Of<pb::Maintenance>(method); };
  methods->Add<pb::StatusRequest, pb::StatusResponse>(maintenance, &M::RequestStatus, name("Status"), c, n,
                                                      [this](StatusCall* call) { HandleStatus(call); });
  methods->Add<pb::AlarmRequest, pb::AlarmResponse>(maintenance, &M::RequestAlarm, name("Alarm"), Caller::kAdmin, n,
                                                    [this](AlarmCall* call) { HandleAlarm(call); });
  methods->Add<pb::DefragmentRequest, pb::DefragmentResponse>(
      maintenance, &M::RequestDefragment, name("Defragment"), Caller::kAdmin, n,
      [this](DefragmentCall* call) { HandleDefragment(call); });
  methods->Add<pb::HashKVRequest, pb::HashKVResponse>(maintenance, &M::RequestHashKV, name("HashKV"), c, n,
                                                      [this](HashKvCall* call) { HandleHashKv(call); });
  methods->Add<pb::HashRequest, pb::HashResponse>(maintenance, &M::RequestHash, name("Hash"), c, n,
                                                  [this](HashCall* call) { HandleHash(call); });
  methods->Add<pb::MoveLeaderRequest, pb::MoveLeaderResponse>(
      maintenance, &M::RequestMoveLeader, name("MoveLeader"), Caller::kAdmin, n,
      [this](MoveLeaderCall* call) { HandleMoveLeader(call); });
  methods->Add<pb::AuthStatusRequest, pb::AuthStatusResponse>(
      auth, &A::RequestAuthStatus, RpcName::Of<pb::Auth>("AuthStatus"), c, n,
      [this](AuthStatusCall* call) { HandleAuthStatus(call); });
  // Carries its own credentials (the password): asked for no token.
  methods->Add<pb::AuthenticateRequest, pb::AuthenticateResponse>(
      auth, &A::RequestAuthenticate, RpcName::Of<pb::Auth>("Authenticate"), Caller::kAnyone, n,
      [this](AuthenticateCall* call) { HandleAuthenticate(call); });
}

void EtcdMaintenance::FillHeader(pb::ResponseHeader* header) const {
  EtcdKv::FillHeader(*node_, node_->state_machine().Revision(), node_->KnownTerm(), header);
}

void EtcdMaintenance::HandleStatus(StatusCall* call) {
  const NodeStatus st = node_->GetStatus();
  pb::StatusResponse resp;
  EtcdKv::FillHeader(*node_, st.revision, st.term, resp.mutable_header());
  resp.set_version(kEtcdVersion);
  resp.set_leader(st.leader_id);
  resp.set_raftindex(st.commit_index);
  resp.set_raftterm(st.term);
  resp.set_raftappliedindex(st.applied_index);
  bool learner = true;
  for (uint64_t v : st.voters) learner = learner && v != st.id;
  resp.set_islearner(learner);
  // etcd's sizes are its database file's and the part of it in use. Here
  // in use is the state's size (StateBytes: keys, values, history, saved
  // answers; what the quota counts), and the size is what the RocksDB
  // engine holds for it, dead rows until compacted away included (the
  // memory engine has no free pages: the same).
  const KvStateMachine& sm = node_->state_machine();
  const size_t in_use = sm.StateBytes();
  resp.set_dbsize(static_cast<int64_t>(sm.persistent() ? sm.StoredBytes() : in_use));
  resp.set_dbsizeinuse(static_cast<int64_t>(in_use));
  if (st.leader_id == 0) resp.add_errors("etcdserver: no leader");
  for (const KvStateMachine::Alarm& a : sm.Alarms()) {
    resp.add_errors("memberID:" + std::to_string(a.member) + " alarm:" + pb::AlarmType_Name(a.type) + " ");
  }
  call->Finish(resp);
}

// As etcd: GET lists every alarm raised (on any member), linearizably (so
// a list after a disarm does not show what it cleared); ACTIVATE and
// DEACTIVATE go through the log and answer the alarm they changed (none when
// it was raised already, or not raised). On the leader.
void EtcdMaintenance::HandleAlarm(AlarmCall* call) {
  if (Forwarder::MaybeForward<pb::Maintenance>(forwarder_, call, "Alarm")) return;
  const pb::AlarmRequest& req = call->request();
  if (req.action() == pb::AlarmRequest::GET) {
    node_->ReadIndex(CallDeadline(call->context(), options_.max_request_timeout_ms), [this, call](Outcome out) {
      if (!out.status.ok()) return FinishWithOutcome(call, out, &etcd::ToEtcdStatus);
      pb::AlarmResponse resp;
      FillHeader(resp.mutable_header());
      for (const KvStateMachine::Alarm& a : node_->state_machine().Alarms()) {
        pb::AlarmMember* m = resp.add_alarms();
        m->set_memberid(a.member);
        m->set_alarm(static_cast<pb::AlarmType>(a.type));
      }
      call->Finish(resp);
    });
    return;
  }
  if (req.alarm() != pb::NOSPACE) {
    return call->FinishWithError(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                              "raftkv keeps only NOSPACE alarms (alarm " +
                                                  pb::AlarmType_Name(req.alarm()) + ")"));
  }
  // Raised for members of the configuration only; cleared for any (the
  // alarm of a member removed since must not stay for good).
  if (req.action() == pb::AlarmRequest::ACTIVATE && node_->AddressOf(req.memberid()).empty()) {
    return call->FinishWithError(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                              "member " + std::to_string(req.memberid()) +
                                                  " is not in the cluster's configuration"));
  }
  Command cmd;
  cmd.set_op(Command::ALARM);
  cmd.set_alarm_action(static_cast<uint32_t>(req.action()));
  cmd.set_alarm_type(static_cast<uint32_t>(req.alarm()));
  cmd.set_alarm_member(req.memberid());
  node_->Propose(cmd.SerializeAsString(), CallDeadline(call->context(), options_.max_request_timeout_ms),
                 [this, call, activate = req.action() == pb::AlarmRequest::ACTIVATE](Outcome out) {
                   if (!out.status.ok()) return FinishWithOutcome(call, out, &etcd::ToEtcdStatus);
                   const pb::AlarmRequest& r = call->request();
                   pb::AlarmResponse resp;
                   FillHeader(resp.mutable_header());
                   if (out.apply.existed != activate) {  // it changed
                     pb::AlarmMember* m = resp.add_alarms();
                     m->set_memberid(r.memberid());
                     m->set_alarm(r.alarm());
                   }
                   call->Finish(resp);
                 });
}

// As etcd's: this member's store is rewritten so that deleted keys and
// compacted revisions free their space (RocksDB: a full compaction; the
// memory engine frees it at once, and the log's segments go whole), and the
// call waits for it, as etcd's does. An administrator's call, one at a time.
void EtcdMaintenance::HandleDefragment(DefragmentCall* call) {
  if (defragmenting_.exchange(true)) {
    return call->FinishWithError(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                              "a defragmentation is already running on this member"));
  }
  const Status s = node_->state_machine().CompactStore();
  defragmenting_.store(false);
  if (!s.ok()) return call->FinishWithError(ToGrpcStatus(s));
  pb::DefragmentResponse resp;
  FillHeader(resp.mutable_header());
  call->Finish(resp);
}

namespace {

uint32_t ExtendInt(uint32_t crc, int64_t v) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(static_cast<uint64_t>(v) >> (8 * i));
  return crc32c::Extend(crc, bytes, sizeof(bytes));
}

}  // namespace

// Every key of the store as it was at the revision, read a page at a time
// (each page within --max_response_bytes, as any range), folded into one
// CRC-32C of keys, values, revisions, versions and leases.
grpc::Status EtcdMaintenance::HashAt(int64_t revision, uint32_t* hash) const {
  const KvStateMachine& sm = node_->state_machine();
  RangeRequest page;
  page.set_key(std::string(1, '\0'));
  page.set_range_end(std::string(1, '\0'));
  page.set_revision(revision);
  page.set_limit(static_cast<int64_t>(
      std::max<size_t>(1, options_.max_response_bytes / (options_.max_key_bytes + options_.max_value_bytes + 64))));
  uint32_t crc = 0;
  for (;;) {
    RangeResponse resp;
    if (Status s = sm.Range(page, &resp, options_.max_response_bytes); !s.ok()) return etcd::ToEtcdStatus(s);
    for (const KeyValue& kv : resp.kvs()) {
      crc = ExtendInt(crc, static_cast<int64_t>(kv.key().size()));
      crc = crc32c::Extend(crc, kv.key().data(), kv.key().size());
      crc = ExtendInt(crc, static_cast<int64_t>(kv.value().size()));
      crc = crc32c::Extend(crc, kv.value().data(), kv.value().size());
      for (int64_t v : {kv.create_revision(), kv.mod_revision(), kv.version(), kv.lease()}) crc = ExtendInt(crc, v);
    }
    if (!resp.more() || resp.kvs_size() == 0) break;
    page.set_key(resp.kvs(resp.kvs_size() - 1).key() + std::string(1, '\0'));
  }
  *hash = crc;
  return grpc::Status::OK;
}

void EtcdMaintenance::HandleHashKv(HashKvCall* call) {
  const KvStateMachine& sm = node_->state_machine();
  const int64_t asked = call->request().revision();
  if (asked < 0) {
    return call->FinishWithError(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "revision must be >= 0"));
  }
  const int64_t now = sm.Revision();
  if (asked > now) {
    return call->FinishWithError(
        grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision"));
  }
  const int64_t revision = asked > 0 ? asked : now;
  pb::HashKVResponse resp;
  uint32_t hash = 0;
  if (grpc::Status bad = HashAt(revision, &hash); !bad.ok()) return call->FinishWithError(bad);
  FillHeader(resp.mutable_header());
  resp.set_hash(hash);
  resp.set_compact_revision(sm.CompactRevision());
  resp.set_hash_revision(revision);
  call->Finish(resp);
}

// etcd hashes its whole database file; here, every key at the store's
// revision (so members that applied the same entries agree).
void EtcdMaintenance::HandleHash(HashCall* call) {
  pb::HashResponse resp;
  uint32_t hash = 0;
  if (grpc::Status bad = HashAt(node_->state_machine().Revision(), &hash); !bad.ok()) {
    return call->FinishWithError(bad);
  }
  FillHeader(resp.mutable_header());
  resp.set_hash(hash);
  call->Finish(resp);
}

void EtcdMaintenance::HandleMoveLeader(MoveLeaderCall* call) {
  const uint64_t target = call->request().targetid();
  if (node_->KnownLeader() != node_->id()) {
    return call->FinishWithError(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "etcdserver: not leader"));
  }
  if (target == 0 || node_->AddressOf(target).empty()) {
    return call->FinishWithError(grpc::Status(grpc::StatusCode::NOT_FOUND, "etcdserver: bad leader transferee"));
  }
  node_->TransferLeadership(target, CallDeadline(call->context(), options_.max_request_timeout_ms),
                            [this, call](Outcome out) {
                              if (!out.status.ok()) return FinishWithOutcome(call, out, &etcd::ToEtcdStatus);
                              pb::MoveLeaderResponse resp;
                              FillHeader(resp.mutable_header());
                              call->Finish(resp);
                            });
}

void EtcdMaintenance::HandleAuthStatus(AuthStatusCall* call) {
  pb::AuthStatusResponse resp;
  FillHeader(resp.mutable_header());
  resp.set_enabled(options_.auth != nullptr && options_.auth->tokens_required());
  call->Finish(resp);
}

void EtcdMaintenance::HandleAuthenticate(AuthenticateCall* call) {
  if (options_.auth == nullptr || !options_.auth->tokens_required()) {
    return call->FinishWithError(
        grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "etcdserver: authentication is not enabled"));
  }
  const std::string& password = call->request().password();
  if (!options_.auth->AcceptsClientToken(password)) {
    return call->FinishWithError(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                              "etcdserver: authentication failed, invalid user ID or password"));
  }
  pb::AuthenticateResponse resp;
  FillHeader(resp.mutable_header());
  resp.set_token(password);
  call->Finish(resp);
}

}  // namespace raftkv
