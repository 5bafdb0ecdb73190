#include "kv/kv_state_machine.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <mutex>
#include <vector>

#include <glog/logging.h>

#include "storage/snapshot_format.h"

namespace raftkv {

namespace {

bool IsDataOp(Command::Op op) {
  return op == Command::PUT || op == Command::DELETE || op == Command::CAS ||
         op == Command::BATCH || op == Command::TXN || op == Command::DELETE_RANGE ||
         op == Command::LEASE_GRANT || op == Command::LEASE_REVOKE;
}

std::string Hex(int64_t id) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(id));
  return buf;
}

void Reject(ApplyResult* result, Status::Code code, std::string message) {
  result->answer.set_reject_code(static_cast<uint32_t>(code));
  result->answer.set_reject_message(std::move(message));
}

// What a key-value adds to an answer, at most (the message's framing included).
size_t KeyValueBytes(const std::string& key, const KvRecord& r, bool keys_only) {
  return key.size() + (keys_only ? 0 : r.value.size()) + KvStateMachine::kVisitCost;
}

// A range's answer being built: the count, and the key-values up to the
// request's limit and a byte bound.
class RangeBuilder {
 public:
  RangeBuilder(const RangeRequest& req, RangeResponse* resp, size_t max_bytes)
      : req_(req), resp_(resp), max_bytes_(max_bytes) {}
  // Adds one key (count, and the key-value unless count_only or past the
  // limit). False once the answer would exceed max_bytes: stop.
  bool Add(const std::string& key, const KvRecord& r) {
    resp_->set_count(resp_->count() + 1);
    if (req_.count_only()) return true;
    if (req_.limit() > 0 && resp_->kvs_size() >= req_.limit()) {
      resp_->set_more(true);
      return true;
    }
    bytes_ += KeyValueBytes(key, r, req_.keys_only());
    if (max_bytes_ > 0 && bytes_ > max_bytes_) {
      exceeded_ = true;
      return false;
    }
    ToKeyValue(key, r, req_.keys_only(), resp_->add_kvs());
    return true;
  }
  Status Done() const {
    if (!exceeded_) return Status::OK();
    return Status::ResourceExhausted(
        "the answer exceeds " + std::to_string(max_bytes_) +
        " bytes (--max_response_bytes) after " + std::to_string(resp_->kvs_size()) +
        " keys; ask for fewer with limit (and continue from the last key), keys_only or count_only");
  }

 private:
  const RangeRequest& req_;
  RangeResponse* const resp_;
  const size_t max_bytes_;
  size_t bytes_ = 0;
  bool exceeded_ = false;
};

// Empty if every op of a BATCH is a PUT or DELETE, else why not. The server
// never proposes anything else; an entry that does (a bug, a newer version)
// is skipped whole by every replica alike.
std::string CheckBatchOps(const Command& command) {
  for (int i = 0; i < command.ops_size(); ++i) {
    const Command::Op op = command.ops(i).op();
    if (op != Command::PUT && op != Command::DELETE) {
      return "batch op " + std::to_string(i) + " has op " + std::to_string(op) +
             " (only PUT and DELETE may be batched)";
    }
  }
  return "";
}

constexpr uint32_t kMaxSessionError =
    static_cast<uint32_t>(ApplyResult::SessionError::kStaleSequence);

// A refusal for an answer over its budget.
std::string TooLarge(const char* what, size_t budget) {
  return std::string(what) + " would answer more than " + std::to_string(budget) +
         " bytes (--max_txn_result_bytes: the ranges and previous key-values of a write, "
         "counting at least " + std::to_string(KvStateMachine::kVisitCost) +
         " bytes for each key visited); read with a separate Range, or ask for less (limit, "
         "keys_only, no prev_kv)";
}

}  // namespace

void ToKeyValue(const std::string& key, const KvRecord& r, bool keys_only, KeyValue* out) {
  out->set_key(key);
  out->set_create_revision(r.create_revision);
  out->set_mod_revision(r.mod_revision);
  out->set_version(r.version);
  out->set_lease(r.lease);
  if (!keys_only) out->set_value(r.value);
}

Status ApplyResult::Rejection() const {
  switch (static_cast<Status::Code>(answer.reject_code())) {
    case Status::Code::kOk: return Status::OK();
    case Status::Code::kNotFound: return Status::NotFound(answer.reject_message());
    case Status::Code::kOutOfRange: return Status::OutOfRange(answer.reject_message());
    case Status::Code::kInvalidArgument: return Status::InvalidArgument(answer.reject_message());
    case Status::Code::kResourceExhausted: return Status::ResourceExhausted(answer.reject_message());
    default: return Status::FailedPrecondition(answer.reject_message());
  }
}

size_t ApplyResult::SavedBytes() const {
  constexpr size_t kRecord = 128;  // the result's own fields and its place in the session
  return kRecord + current.size() + error.size() + batch_existed.size() / 8 + answer.ByteSizeLong();
}

ApplyResult KvStateMachine::Apply(const Entry& entry) {
  ApplyResult result;
  Command command;
  const bool have_command = Decode(entry, &command, &result);
  WriterLock lock(&mu_);
  if (apply_hook_) apply_hook_(entry);
  ApplyLocked(entry, command, have_command, &result);
  PublishLocked();
  return result;
}

void KvStateMachine::PublishLocked() {
  published_revision_.store(revision_, std::memory_order_release);
  published_lease_generation_.store(lease_generation_, std::memory_order_release);
  published_applied_index_.store(applied_index_, std::memory_order_release);
  published_applied_term_.store(applied_term_, std::memory_order_release);
  published_size_.store(data_.size(), std::memory_order_release);
  published_sessions_.store(sessions_.size(), std::memory_order_release);
  published_saved_bytes_.store(sessions_.saved_bytes(), std::memory_order_release);
}

bool KvStateMachine::Decode(const Entry& entry, Command* out, ApplyResult* result_out) {
  ApplyResult& result = *result_out;
  Command& command = *out;
  result.index = entry.index();
  result.term = entry.term();
  // Decode outside the lock: readers are only blocked for the map update.
  bool have_command = false;
  if (entry.type() == ENTRY_COMMAND) {
    if (!command.ParseFromString(entry.data())) {
      result.ok = false;
      result.error = "undecodable command at index " + std::to_string(entry.index());
    } else if (!IsDataOp(command.op()) && command.op() != Command::OPEN_SESSION &&
               command.op() != Command::CLOSE_SESSION) {
      result.ok = false;
      result.error = "unknown command op " + std::to_string(command.op()) + " at index " +
                     std::to_string(entry.index());
    } else if (std::string why = command.op() == Command::BATCH ? CheckBatchOps(command) : "";
               !why.empty()) {
      result.ok = false;
      result.error = why + " at index " + std::to_string(entry.index());
    } else {
      have_command = true;
    }
  } else if (entry.type() != ENTRY_NOOP && entry.type() != ENTRY_CONFIG) {
    // ENTRY_CONFIG (a MembershipConfig) is the consensus layer's business:
    // here it is a no-op like ENTRY_NOOP, and a successful one.
    // An entry type added by a newer version: every replica skips it alike.
    result.ok = false;
    result.error = "unknown entry type " + std::to_string(entry.type()) + " at index " +
                   std::to_string(entry.index());
  }
  return have_command;
}

void KvStateMachine::ApplyLocked(const Entry& entry, Command& command, bool have_command,
                                 ApplyResult* result_out) {
  ApplyResult& result = *result_out;
  CHECK_EQ(entry.index(), applied_index_ + 1) << "entries must be applied in index order";
  applied_index_ = entry.index();
  applied_term_ = entry.term();
  // Cluster time never goes back along the committed log; max() keeps it so
  // even for a log written before entries carried a time.
  cluster_time_ms_ = std::max(cluster_time_ms_, entry.cluster_time_ms());
  sessions_.Expire(cluster_time_ms_);
  if (!have_command) return;

  if (command.op() == Command::OPEN_SESSION) {
    const uint64_t id = entry.index();
    Status opened = sessions_.Open(id, command.session_timeout_ms(), cluster_time_ms_,
                                   command.max_sessions());
    if (!opened.ok()) {
      Reject(&result, opened.code(), opened.message());
      return;
    }
    result.client_id = id;
    return;
  }
  if (command.op() == Command::CLOSE_SESSION) {
    sessions_.Close(command.client_id());
    return;
  }
  if (command.client_id() == 0) {  // no session: at-least-once
    ApplyToMap(command, &result);
    return;
  }
  if (!sessions_.Begin(command, cluster_time_ms_, &result)) return;
  ApplyToMap(command, &result);
  sessions_.Save(command, result);
}

void KvStateMachine::ApplyToMap(Command& command, ApplyResult* result) {
  Changes changes;
  changes.rev = revision_ + 1;
  SavedAnswer& answer = result->answer;
  switch (command.op()) {
    case Command::PUT:
      if (command.lease() != 0 && leases_.count(command.lease()) == 0) {
        Reject(result, Status::Code::kNotFound, "lease " + Hex(command.lease()) + " not found");
        break;
      }
      result->existed = PutKey(std::move(*command.mutable_key()), std::move(*command.mutable_value()),
                               command.lease(), &changes,
                               command.prev_kv() ? answer.mutable_prev_kv() : nullptr);
      if (!result->existed) answer.clear_prev_kv();
      break;
    case Command::DELETE:
      result->existed = DeleteKey(command.key(), &changes, nullptr);
      break;
    case Command::DELETE_RANGE:
      if (command.prev_kv() && command.max_result_bytes() > 0 &&
          RangeCostLocked(command.key(), command.range_end(), false, false, 0,
                          command.max_result_bytes()) > command.max_result_bytes()) {
        Reject(result, Status::Code::kResourceExhausted,
               TooLarge("this delete with prev_kv", command.max_result_bytes()));
        break;
      }
      answer.set_deleted(DeleteRangeKeys(command.key(), command.range_end(), &changes,
                                         command.prev_kv() ? answer.mutable_prev_kvs() : nullptr));
      break;
    case Command::BATCH:
      result->batch_existed.reserve(static_cast<size_t>(command.ops_size()));
      for (Command& op : *command.mutable_ops()) {
        if (op.op() == Command::PUT) {
          result->batch_existed.push_back(PutKey(std::move(*op.mutable_key()),
                                                 std::move(*op.mutable_value()), 0, &changes, nullptr));
        } else {
          result->batch_existed.push_back(DeleteKey(op.key(), &changes, nullptr));
        }
      }
      break;
    case Command::CAS: {
      const KvRecord* current = data_.find(command.key());
      result->found = current != nullptr;
      if (result->found) result->current = current->value;
      result->swapped = command.has_expected() ? result->found && current->value == command.expected()
                                               : !result->found;
      if (result->swapped) {
        PutKey(std::move(*command.mutable_key()), std::move(*command.mutable_value()), 0, &changes,
               nullptr);
      }
      break;
    }
    case Command::TXN:
      ApplyTxn(command, result, &changes);
      break;
    case Command::LEASE_GRANT: {
      const int64_t id = command.lease() != 0 ? command.lease()
                                              : static_cast<int64_t>(result->index);
      if (id <= 0 || command.lease_ttl() <= 0) {
        Reject(result, Status::Code::kInvalidArgument,
               "lease id and TTL must be > 0 (id " + std::to_string(id) + ", TTL " +
                   std::to_string(command.lease_ttl()) + ")");
      } else if (!leases_.emplace(id, LeaseState{command.lease_ttl(), result->index, {}}).second) {
        Reject(result, Status::Code::kFailedPrecondition, "lease " + Hex(id) + " already exists");
      } else {
        ++lease_generation_;
        answer.set_lease_id(id);
        answer.set_lease_ttl(command.lease_ttl());
      }
      break;
    }
    case Command::LEASE_REVOKE: {
      auto it = leases_.find(command.lease());
      if (command.lease_granted_index() != 0 && it != leases_.end() &&
          it->second.granted_index != command.lease_granted_index()) {
        // The expiry of an earlier grant of this id: the lease it meant is gone.
        Reject(result, Status::Code::kNotFound,
               "lease " + Hex(command.lease()) + " granted at index " +
                   std::to_string(command.lease_granted_index()) + " not found");
        break;
      }
      ApplyLeaseRevoke(command.lease(), result, &changes);
      break;
    }
    default:
      break;
  }
  if (!changes.events.empty()) {
    revision_ = changes.rev;
    history_.AppendRevision(&changes.events);
  }
  answer.set_revision(revision_);
}

bool KvStateMachine::PutKey(std::string key, std::string value, int64_t lease, Changes* changes,
                            KeyValue* prev) {
  KvEvent e;
  e.revision = changes->rev;
  KvRecord r;
  if (const KvRecord* old = data_.find(key)) {
    e.has_prev = true;
    e.prev = *old;
    r.create_revision = old->create_revision;
    r.version = old->version + 1;
    if (old->lease != lease) DetachLease(key, old->lease);
  } else {
    r.create_revision = changes->rev;
    r.version = 1;
  }
  r.mod_revision = changes->rev;
  r.lease = lease;
  if (lease != 0) {
    auto it = leases_.find(lease);
    if (it != leases_.end()) it->second.keys.insert(key);
  }
  if (prev != nullptr && e.has_prev) ToKeyValue(key, e.prev, false, prev);
  r.value = std::move(value);
  e.kv = r;
  e.key = key;
  data_.insert_or_assign(std::move(key), std::move(r));
  changes->events.push_back(std::move(e));
  return changes->events.back().has_prev;
}

bool KvStateMachine::DeleteKey(const std::string& key, Changes* changes, KeyValue* prev) {
  const KvRecord* old = data_.find(key);
  if (old == nullptr) return false;
  KvEvent e;
  e.revision = changes->rev;
  e.is_delete = true;
  e.key = key;
  e.kv.mod_revision = changes->rev;
  e.has_prev = true;
  e.prev = *old;
  if (prev != nullptr) ToKeyValue(key, *old, false, prev);
  DetachLease(key, old->lease);
  data_.erase(key);
  changes->events.push_back(std::move(e));
  return true;
}

int64_t KvStateMachine::DeleteRangeKeys(const std::string& key, const std::string& end,
                                        Changes* changes,
                                        google::protobuf::RepeatedPtrField<KeyValue>* prevs) {
  if (key.empty()) return 0;
  std::vector<std::string> keys;
  if (end.empty()) {
    if (data_.find(key) != nullptr) keys.push_back(key);
  } else {
    for (auto it = data_.lower_bound(key); it.Valid() && InKeyRange(it.key(), key, end); it.Next()) {
      keys.push_back(it.key());
    }
  }
  for (const std::string& k : keys) DeleteKey(k, changes, prevs != nullptr ? prevs->Add() : nullptr);
  return static_cast<int64_t>(keys.size());
}

void KvStateMachine::DetachLease(const std::string& key, int64_t lease) {
  if (lease == 0) return;
  auto it = leases_.find(lease);
  if (it != leases_.end()) it->second.keys.erase(key);
}

bool KvStateMachine::CompareHolds(const Compare& c) const {
  const KvRecord* r = data_.find(c.key());
  int cmp = 0;
  auto three_way = [](int64_t a, int64_t b) { return a < b ? -1 : (a > b ? 1 : 0); };
  switch (c.target()) {
    case Compare::VALUE:
      if (r == nullptr) return false;  // as etcd: no value to compare
      cmp = r->value.compare(c.value());
      cmp = cmp < 0 ? -1 : (cmp > 0 ? 1 : 0);
      break;
    case Compare::VERSION: cmp = three_way(r ? r->version : 0, c.version()); break;
    case Compare::CREATE: cmp = three_way(r ? r->create_revision : 0, c.create_revision()); break;
    case Compare::MOD: cmp = three_way(r ? r->mod_revision : 0, c.mod_revision()); break;
    case Compare::LEASE: cmp = three_way(r ? r->lease : 0, c.lease()); break;
    default: return false;
  }
  switch (c.result()) {
    case Compare::EQUAL: return cmp == 0;
    case Compare::NOT_EQUAL: return cmp != 0;
    case Compare::GREATER: return cmp > 0;
    case Compare::LESS: return cmp < 0;
    default: return false;
  }
}

bool KvStateMachine::CompareAllLocked(const TxnRequest& txn) const {
  for (const Compare& c : txn.compare()) {
    if (!CompareHolds(c)) return false;
  }
  return true;
}

size_t KvStateMachine::RangeCostLocked(const std::string& key, const std::string& end,
                                       bool keys_only, bool count_only, int64_t limit,
                                       size_t budget) const {
  size_t cost = 0;
  int64_t carried = 0;
  auto visit = [&](const std::string& k, const KvRecord& r) {
    const bool carries = !count_only && (limit <= 0 || carried < limit);
    if (carries) ++carried;
    cost += carries ? KeyValueBytes(k, r, keys_only) : kVisitCost;
    return cost <= budget;
  };
  if (end.empty()) {
    if (const KvRecord* r = data_.find(key)) visit(key, *r);
    return cost;
  }
  for (auto it = data_.lower_bound(key); it.Valid() && InKeyRange(it.key(), key, end); it.Next()) {
    if (!visit(it.key(), it.value())) break;
  }
  return cost;
}

size_t KvStateMachine::EstimateAnswerLocked(const google::protobuf::RepeatedPtrField<RequestOp>& ops,
                                            size_t budget) const {
  size_t total = 0;
  for (const RequestOp& op : ops) {
    if (total > budget) break;
    const size_t left = budget - total;
    if (op.has_request_range()) {
      const RangeRequest& r = op.request_range();
      total += RangeCostLocked(r.key(), r.range_end(), r.keys_only(), r.count_only(), r.limit(), left);
      // A key this list puts may show up in the range as well (from above:
      // whether the put comes before the range or not).
      for (const RequestOp& other : ops) {
        if (!other.has_request_put() || !InKeyRange(other.request_put().key(), r.key(), r.range_end())) continue;
        total += other.request_put().key().size() + kVisitCost +
                 (r.keys_only() || r.count_only() ? 0 : other.request_put().value().size());
      }
    } else if (op.has_request_delete_range()) {
      const DeleteRangeRequest& d = op.request_delete_range();
      if (d.prev_kv()) total += RangeCostLocked(d.key(), d.range_end(), false, false, 0, left);
    } else if (op.has_request_put() && op.request_put().prev_kv()) {
      total += RangeCostLocked(op.request_put().key(), "", false, false, 0, left);
    }
  }
  return total;
}

Status KvStateMachine::CheckTxnAnswer(const TxnRequest& req, size_t max_bytes) const {
  if (max_bytes == 0) return Status::OK();
  ReaderLock lock(&mu_);
  const auto& ops = CompareAllLocked(req) ? req.success() : req.failure();
  if (EstimateAnswerLocked(ops, max_bytes) > max_bytes) {
    return Status::ResourceExhausted(TooLarge("this transaction", max_bytes));
  }
  return Status::OK();
}

Status KvStateMachine::CheckDeleteAnswer(const std::string& key, const std::string& end,
                                         size_t max_bytes) const {
  if (max_bytes == 0) return Status::OK();
  ReaderLock lock(&mu_);
  if (RangeCostLocked(key, end, false, false, 0, max_bytes) > max_bytes) {
    return Status::ResourceExhausted(TooLarge("this delete with prev_kv", max_bytes));
  }
  return Status::OK();
}

void KvStateMachine::ApplyTxn(Command& command, ApplyResult* result, Changes* changes) {
  TxnRequest& txn = *command.mutable_txn();
  const bool succeeded = CompareAllLocked(txn);
  auto& ops = succeeded ? *txn.mutable_success() : *txn.mutable_failure();
  // Refused whole before any change: an answer over the entry's budget.
  const size_t budget = command.max_result_bytes();
  if (budget > 0 && EstimateAnswerLocked(ops, budget) > budget) {
    Reject(result, Status::Code::kResourceExhausted, TooLarge("this transaction", budget));
    return;
  }
  // Refused whole before any change: a put on a lease that does not exist.
  for (const RequestOp& op : ops) {
    if (op.has_request_put() && op.request_put().lease() != 0 &&
        leases_.count(op.request_put().lease()) == 0) {
      Reject(result, Status::Code::kNotFound,
             "lease " + Hex(op.request_put().lease()) + " not found");
      return;
    }
  }
  TxnResponse* resp = result->answer.mutable_txn();
  resp->set_succeeded(succeeded);
  for (RequestOp& op : ops) {
    ResponseOp* r = resp->add_responses();
    if (op.has_request_range()) {
      RangeRequest range = op.request_range();
      range.set_revision(0);  // the current state: every replica reads alike
      (void)RangeLocked(range, r->mutable_response_range(), 0);  // bounded by the estimate above
      r->mutable_response_range()->mutable_header()->set_revision(changes->events.empty()
                                                                      ? revision_
                                                                      : changes->rev);
    } else if (op.has_request_put()) {
      PutRequest& put = *op.mutable_request_put();
      PutResponse* pr = r->mutable_response_put();
      KeyValue prev;
      const bool existed = PutKey(std::move(*put.mutable_key()), std::move(*put.mutable_value()),
                                  put.lease(), changes, put.prev_kv() ? &prev : nullptr);
      if (put.prev_kv() && existed) *pr->mutable_prev_kv() = std::move(prev);
      pr->set_revision(changes->rev);
    } else if (op.has_request_delete_range()) {
      const DeleteRangeRequest& del = op.request_delete_range();
      DeleteRangeResponse* dr = r->mutable_response_delete_range();
      dr->set_deleted(DeleteRangeKeys(del.key(), del.range_end(), changes,
                                      del.prev_kv() ? dr->mutable_prev_kvs() : nullptr));
    }
  }
  resp->mutable_header()->set_revision(changes->events.empty() ? revision_ : changes->rev);
}

void KvStateMachine::ApplyLeaseRevoke(int64_t id, ApplyResult* result, Changes* changes) {
  auto it = leases_.find(id);
  if (it == leases_.end()) {
    Reject(result, Status::Code::kNotFound, "lease " + Hex(id) + " not found");
    return;
  }
  const std::set<std::string> keys = std::move(it->second.keys);
  leases_.erase(it);
  ++lease_generation_;
  for (const std::string& k : keys) DeleteKey(k, changes, nullptr);
  result->answer.set_deleted(static_cast<int64_t>(keys.size()));
}

namespace {

void RecordToKeyValue(const std::string& key, const KvRecord& r, KeyValue* out) {
  out->set_key(key);
  out->set_value(r.value);
  out->set_create_revision(r.create_revision);
  out->set_mod_revision(r.mod_revision);
  out->set_version(r.version);
  out->set_lease(r.lease);
}

KvRecord KeyValueToRecord(KeyValue* kv) {
  KvRecord r;
  r.value = std::move(*kv->mutable_value());
  r.create_revision = kv->create_revision();
  r.mod_revision = kv->mod_revision();
  r.version = kv->version();
  r.lease = kv->lease();
  return r;
}

}  // namespace

void KvStateMachine::Snapshot(SnapshotWriter* out) const {
  // The image: the map's root is shared (O(1)); the sessions are copied.
  // Apply waits only for this; it goes on while the image is encoded.
  CowBTree<std::string, KvRecord> data;
  SessionTable sessions;
  SnapshotStoreState store;
  std::vector<KvEvent> history;  // the newest snapshot_history_revisions_ of it
  {
    ReaderLock lock(&mu_);
    out->meta().last_index = applied_index_;
    out->meta().last_term = applied_term_;
    out->meta().cluster_time_ms = cluster_time_ms_;
    data = data_;
    sessions = sessions_;
    store.set_revision(revision_);
    for (const auto& [id, lease] : leases_) {
      SnapshotStoreState::LeaseRecord* l = store.add_leases();
      l->set_id(id);
      l->set_ttl(lease.ttl);
      l->set_granted_index(lease.granted_index);
    }
    // Whole revisions from the newest back; the history kept covers every
    // revision above history_.compacted().
    const int64_t wanted = static_cast<int64_t>(std::min<size_t>(
        snapshot_history_revisions_, static_cast<size_t>(std::max<int64_t>(revision_, 0))));
    const int64_t from = std::max(history_.compacted(), revision_ - wanted);
    store.set_history_compacted(from);
    for (size_t i = history_.LowerBound(from + 1); i < history_.size(); ++i) {
      history.push_back(history_.at(i));
    }
  }
  SnapshotSession session;
  SnapshotSessionResult saved;
  std::string buf;
  for (const auto& [id, s] : sessions.sessions()) {
    session.set_client_id(id);
    session.set_timeout_ms(s.timeout_ms);
    session.set_expires_at_ms(s.expires_at_ms);
    session.set_first_outstanding(s.first_outstanding);
    session.set_result_count(s.results.size());
    session.SerializeToString(&buf);
    out->AddRecord(SnapshotRecordType::kSession, buf);
    for (const auto& [sequence, r] : s.results) {
      saved.Clear();
      saved.set_client_id(id);
      saved.set_sequence(sequence);
      saved.set_ok(r.ok);
      saved.set_existed(r.existed);
      saved.set_swapped(r.swapped);
      saved.set_found(r.found);
      saved.set_current(r.current);
      saved.set_error(r.error);
      saved.set_session_error(static_cast<uint32_t>(r.session_error));
      saved.set_duplicate(r.duplicate);
      saved.set_index(r.index);
      saved.set_term(r.term);
      saved.set_result_client_id(r.client_id);
      for (bool e : r.batch_existed) saved.add_batch_existed(e);
      r.answer.SerializeToString(saved.mutable_answer());
      saved.SerializeToString(&buf);
      out->AddRecord(SnapshotRecordType::kSessionResult, buf);
    }
  }
  store.SerializeToString(&buf);
  out->AddRecord(SnapshotRecordType::kStore, buf);
  SnapshotEvent event;
  for (const KvEvent& e : history) {
    event.Clear();
    event.set_revision(e.revision);
    event.set_is_delete(e.is_delete);
    RecordToKeyValue(e.key, e.kv, event.mutable_kv());
    if (e.has_prev) RecordToKeyValue(e.key, e.prev, event.mutable_prev());
    event.SerializeToString(&buf);
    out->AddRecord(SnapshotRecordType::kHistory, buf);
  }
  for (auto it = data.begin(); it.Valid(); it.Next()) {
    const KvRecord& r = it.value();
    out->AddKv(it.key(), r.value, r.create_revision, r.mod_revision, r.version, r.lease);
  }
}

// What Restore() builds aside from the file's records, and where it is in
// them (for the checks that span records and for the error messages).
struct KvStateMachine::RestoreState {
  explicit RestoreState(const std::string& path) : path(path) {}
  // A corruption at the current record.
  Status Bad(const std::string& what) const {
    return Status::Corruption(path + ": record " + std::to_string(record) + ": " + what);
  }

  const std::string& path;
  uint64_t record = 0;
  CowBTree<std::string, KvRecord> data;
  SessionTable sessions;
  std::map<int64_t, LeaseState> leases;
  int64_t revision = 0;
  bool have_store = false;  // files written before revisions have no store record
  int64_t history_compacted = 0;
  std::vector<std::deque<KvEvent>> history;  // one entry per revision, in order
  uint64_t session_id = 0;  // the session whose results are being read
  uint64_t results_left = 0;
  bool in_data = false;     // a KV record was seen: no more sessions
  std::string last_key;     // of the previous KV record
  // Parsed into again for each record of their kind.
  SnapshotSession session_msg;
  SnapshotSessionResult result_msg;
  SnapshotKv kv_msg;
  SnapshotStoreState store_msg;
  SnapshotEvent event_msg;
};

Status KvStateMachine::Restore(SnapshotReader* in) {
  // Built aside; swapped in only once the reader has verified the file.
  RestoreState st(in->path());
  for (;; ++st.record) {
    SnapshotRecordType type;
    std::string_view msg;
    bool done = false;
    Status s = in->Next(&type, &msg, &done);
    if (!s.ok()) return s;
    if (done) break;
    if (type != SnapshotRecordType::kSessionResult && st.results_left > 0) {
      return st.Bad("session " + std::to_string(st.session_id) + " is missing " +
                    std::to_string(st.results_left) + " saved results");
    }
    s = RestoreRecord(type, msg, &st);
    if (!s.ok()) return s;
  }
  if (st.results_left > 0) {
    return st.Bad("session " + std::to_string(st.session_id) + " is missing " +
                  std::to_string(st.results_left) + " saved results");
  }
  SwapInRestored(in->meta(), &st);
  // The old state (now in `st`) is freed here, outside the lock.
  return Status::OK();
}

Status KvStateMachine::RestoreRecord(SnapshotRecordType type, std::string_view msg,
                                     RestoreState* st) {
  switch (type) {
    case SnapshotRecordType::kSession:
      return RestoreSession(msg, st);
    case SnapshotRecordType::kSessionResult:
      return RestoreSessionResult(msg, st);
    case SnapshotRecordType::kStore:
      return RestoreStore(msg, st);
    case SnapshotRecordType::kHistory:
      return RestoreHistory(msg, st);
    case SnapshotRecordType::kKv:
      return RestoreKv(msg, st);
  }
  return Status::OK();
}

Status KvStateMachine::RestoreSession(std::string_view msg, RestoreState* st) {
  if (st->in_data) return st->Bad("session record after the key/value records");
  SnapshotSession& m = st->session_msg;
  if (!m.ParseFromArray(msg.data(), static_cast<int>(msg.size()))) {
    return st->Bad("bad SnapshotSession");
  }
  const uint64_t id = m.client_id();
  SessionTable::Session fields;
  fields.timeout_ms = m.timeout_ms();
  fields.expires_at_ms = m.expires_at_ms();
  fields.first_outstanding = m.first_outstanding();
  if (!st->sessions.AddRestored(id, fields)) {
    return st->Bad("session id " + std::to_string(id) + " out of order");
  }
  st->session_id = id;
  st->results_left = m.result_count();
  return Status::OK();
}

Status KvStateMachine::RestoreSessionResult(std::string_view msg, RestoreState* st) {
  if (st->results_left == 0) return st->Bad("saved result without a session expecting it");
  SnapshotSessionResult& m = st->result_msg;
  if (!m.ParseFromArray(msg.data(), static_cast<int>(msg.size()))) {
    return st->Bad("bad SnapshotSessionResult");
  }
  if (m.client_id() != st->session_id) {
    return st->Bad("saved result of session " + std::to_string(m.client_id()) +
                   " inside session " + std::to_string(st->session_id));
  }
  const uint64_t sequence = m.sequence();
  if (m.session_error() > kMaxSessionError) {
    return st->Bad("unknown session error " + std::to_string(m.session_error()));
  }
  ApplyResult r;
  r.ok = m.ok();
  r.existed = m.existed();
  r.swapped = m.swapped();
  r.found = m.found();
  r.current = std::move(*m.mutable_current());
  r.error = std::move(*m.mutable_error());
  r.session_error = static_cast<ApplyResult::SessionError>(m.session_error());
  r.duplicate = m.duplicate();
  r.index = m.index();
  r.term = m.term();
  r.client_id = m.result_client_id();
  r.batch_existed.assign(m.batch_existed().begin(), m.batch_existed().end());
  if (!r.answer.ParseFromString(m.answer())) return st->Bad("bad saved answer");
  if (!st->sessions.AddRestoredResult(st->session_id, sequence, std::move(r))) {
    return st->Bad("saved result sequence " + std::to_string(sequence) + " out of order");
  }
  --st->results_left;
  return Status::OK();
}

Status KvStateMachine::RestoreStore(std::string_view msg, RestoreState* st) {
  if (st->in_data || st->have_store) return st->Bad("store record after the key/value records");
  SnapshotStoreState& m = st->store_msg;
  if (!m.ParseFromArray(msg.data(), static_cast<int>(msg.size()))) {
    return st->Bad("bad SnapshotStoreState");
  }
  if (m.revision() < 0) return st->Bad("negative revision");
  st->revision = m.revision();
  std::map<int64_t, LeaseState>& leases = st->leases;
  for (const SnapshotStoreState::LeaseRecord& l : m.leases()) {
    if (l.id() <= 0 || (!leases.empty() && l.id() <= leases.rbegin()->first)) {
      return st->Bad("lease id " + std::to_string(l.id()) + " out of order");
    }
    leases.emplace_hint(leases.end(), l.id(), LeaseState{l.ttl(), l.granted_index(), {}});
  }
  // Used only when history records follow (older files have none).
  st->history_compacted = m.history_compacted();
  st->have_store = true;
  return Status::OK();
}

Status KvStateMachine::RestoreHistory(std::string_view msg, RestoreState* st) {
  if (!st->have_store || st->in_data) return st->Bad("history record outside the store's records");
  SnapshotEvent& m = st->event_msg;
  if (!m.ParseFromArray(msg.data(), static_cast<int>(msg.size()))) {
    return st->Bad("bad SnapshotEvent");
  }
  std::vector<std::deque<KvEvent>>& history = st->history;
  const int64_t rev = m.revision();
  const int64_t last = history.empty() ? st->history_compacted : history.back().front().revision;
  if (rev <= st->history_compacted || rev > st->revision || rev < last) {
    return st->Bad("history revision " + std::to_string(rev) + " out of order or bounds");
  }
  KvEvent e;
  e.revision = rev;
  e.is_delete = m.is_delete();
  e.key = m.kv().key();
  e.kv = KeyValueToRecord(m.mutable_kv());
  e.has_prev = m.has_prev();  // the message is present
  if (e.has_prev) e.prev = KeyValueToRecord(m.mutable_prev());
  if (history.empty() || rev != last) history.emplace_back();
  history.back().push_back(std::move(e));
  return Status::OK();
}

Status KvStateMachine::RestoreKv(std::string_view msg, RestoreState* st) {
  SnapshotKv& m = st->kv_msg;
  if (!m.ParseFromArray(msg.data(), static_cast<int>(msg.size()))) return st->Bad("bad SnapshotKv");
  if (!st->last_key.empty() && !(st->last_key < m.key())) return st->Bad("key out of order");
  st->last_key = m.key();
  KvRecord r;
  if (!st->have_store) {  // before revisions: every key as created at revision 1
    st->revision = 1;
    r.create_revision = r.mod_revision = r.version = 1;
  } else {
    r.create_revision = m.create_revision();
    r.mod_revision = m.mod_revision();
    r.version = m.version();
    r.lease = m.lease();
    if (r.create_revision <= 0 || r.mod_revision < r.create_revision ||
        r.mod_revision > st->revision || r.version <= 0) {
      return st->Bad("key revisions out of bounds (create " + std::to_string(r.create_revision) +
                     ", mod " + std::to_string(r.mod_revision) + ", version " +
                     std::to_string(r.version) + ", store revision " +
                     std::to_string(st->revision) + ")");
    }
    if (r.lease != 0) {
      auto l = st->leases.find(r.lease);
      if (l == st->leases.end()) {
        return st->Bad("key attached to unknown lease " + std::to_string(r.lease));
      }
      l->second.keys.insert(m.key());
    }
  }
  r.value = std::move(*m.mutable_value());
  if (!st->data.insert_or_assign(std::move(*m.mutable_key()), std::move(r))) {
    return st->Bad("key out of order");  // a repeated key (possible only for "")
  }
  st->in_data = true;
  return Status::OK();
}

void KvStateMachine::SwapInRestored(const SnapshotMeta& meta, RestoreState* st) {
  WriterLock lock(&mu_);
  data_.swap(st->data);
  std::swap(sessions_, st->sessions);
  leases_.swap(st->leases);
  ++lease_generation_;
  revision_ = st->revision;
  int64_t history_compacted = st->history_compacted;
  if (history_compacted < 0 || history_compacted > st->revision) history_compacted = st->revision;
  history_.Reset(st->history.empty() ? st->revision : history_compacted);
  for (auto& events : st->history) history_.AppendRevision(&events);
  applied_index_ = meta.last_index;
  applied_term_ = meta.last_term;
  cluster_time_ms_ = meta.cluster_time_ms;
  PublishLocked();
}

std::optional<std::string> KvStateMachine::Get(const std::string& key) const {
  ReaderLock lock(&mu_);
  const KvRecord* r = data_.find(key);
  if (r == nullptr) return std::nullopt;
  return r->value;
}

std::optional<KvRecord> KvStateMachine::GetRecord(const std::string& key) const {
  ReaderLock lock(&mu_);
  const KvRecord* r = data_.find(key);
  if (r == nullptr) return std::nullopt;
  return *r;
}

Status KvStateMachine::RangeLocked(const RangeRequest& req, RangeResponse* resp,
                                   size_t max_bytes) const {
  RangeBuilder out(req, resp, max_bytes);
  const std::string& key = req.key();
  if (req.range_end().empty()) {
    if (const KvRecord* r = data_.find(key)) out.Add(key, *r);
    return out.Done();
  }
  for (auto it = data_.lower_bound(key); it.Valid() && InKeyRange(it.key(), key, req.range_end());
       it.Next()) {
    if (!out.Add(it.key(), it.value())) break;
  }
  return out.Done();
}

Status KvStateMachine::RangeAtLocked(const RangeRequest& req, RangeResponse* resp,
                                     size_t max_bytes) const {
  const int64_t at = req.revision();
  if (at > revision_) {
    return Status::OutOfRange("revision " + std::to_string(at) +
                              " is a future revision (the store is at " +
                              std::to_string(revision_) + ")");
  }
  if (at < history_.compacted()) {
    return Status::OutOfRange("revision " + std::to_string(at) +
                              " has been compacted; the oldest revision kept is " +
                              std::to_string(history_.compacted()));
  }
  // The keys of the range changed after `at`, with their state at `at`
  // (nullopt: absent then): the oldest change after `at` tells. Bounded by
  // the history window, not by the range.
  const std::string& end = req.range_end();
  std::map<std::string, std::optional<KvRecord>> then;
  for (size_t i = history_.size(); i > 0 && history_.at(i - 1).revision > at; --i) {
    const KvEvent& e = history_.at(i - 1);
    if (!InKeyRange(e.key, req.key(), end)) continue;
    then[e.key] = e.has_prev ? std::optional<KvRecord>(e.prev) : std::nullopt;
  }
  // The map now and those changes undone, merged in key order as the answer
  // is built (so limit and the byte bound stop the copying).
  RangeBuilder out(req, resp, max_bytes);
  auto changed = then.begin();
  auto add_changed_before = [&](const std::string* key) {
    for (; changed != then.end() && (key == nullptr || changed->first < *key); ++changed) {
      if (changed->second && !out.Add(changed->first, *changed->second)) return false;
    }
    return true;
  };
  auto add_current = [&](const std::string& k, const KvRecord& r) {
    if (!add_changed_before(&k)) return false;
    if (changed != then.end() && changed->first == k) {  // changed since: its state then
      const bool more = !changed->second || out.Add(k, *changed->second);
      ++changed;
      return more;
    }
    return out.Add(k, r);
  };
  bool more = true;
  if (end.empty()) {
    if (const KvRecord* r = data_.find(req.key())) more = add_current(req.key(), *r);
  } else {
    for (auto it = data_.lower_bound(req.key()); more && it.Valid() && InKeyRange(it.key(), req.key(), end);
         it.Next()) {
      more = add_current(it.key(), it.value());
    }
  }
  if (more) add_changed_before(nullptr);
  return out.Done();
}

Status KvStateMachine::Range(const RangeRequest& req, RangeResponse* resp, size_t max_bytes) const {
  resp->Clear();
  {
    ReaderLock lock(&mu_);
    resp->mutable_header()->set_revision(revision_);
    if (req.revision() != 0 && req.revision() != revision_) return RangeAtLocked(req, resp, max_bytes);
    if (req.range_end().empty()) return RangeLocked(req, resp, max_bytes);
  }
  // A range of the current state: walked outside the lock on an O(1)
  // copy-on-write image, so a long range does not hold up Apply().
  CowBTree<std::string, KvRecord> image;
  {
    ReaderLock lock(&mu_);
    if (resp->header().revision() != revision_) {  // moved on in between: use the new one
      resp->mutable_header()->set_revision(revision_);
    }
    image = data_;
  }
  RangeBuilder out(req, resp, max_bytes);
  for (auto it = image.lower_bound(req.key());
       it.Valid() && InKeyRange(it.key(), req.key(), req.range_end()); it.Next()) {
    if (!out.Add(it.key(), it.value())) break;
  }
  return out.Done();
}

Status KvStateMachine::ReadTxn(const TxnRequest& req, TxnResponse* resp, size_t max_bytes) const {
  resp->Clear();
  ReaderLock lock(&mu_);
  const bool succeeded = CompareAllLocked(req);
  resp->set_succeeded(succeeded);
  resp->mutable_header()->set_revision(revision_);
  size_t used = 0;
  for (const RequestOp& op : succeeded ? req.success() : req.failure()) {
    RangeResponse* r = resp->add_responses()->mutable_response_range();
    const size_t left = max_bytes == 0 ? 0 : max_bytes - std::min(max_bytes, used);
    if (max_bytes > 0 && left == 0) {
      return Status::ResourceExhausted("the transaction's answer exceeds " + std::to_string(max_bytes) +
                                       " bytes (--max_response_bytes); read less in each");
    }
    Status s = RangeLocked(op.request_range(), r, left);
    if (!s.ok()) return s;
    used += r->ByteSizeLong();
    r->mutable_header()->set_revision(revision_);
  }
  return Status::OK();
}

Status KvStateMachine::ReadEvents(const std::string& key, const std::string& end, int64_t from,
                                  size_t max_bytes, EventBatch* out) const {
  out->events.clear();
  ReaderLock lock(&mu_);
  out->revision = revision_;
  if (from <= history_.compacted()) {
    return Status::OutOfRange("revision " + std::to_string(from) +
                              " has been compacted; the oldest revision a watch may start at is " +
                              std::to_string(history_.compacted() + 1));
  }
  size_t bytes = 0;
  size_t i = history_.LowerBound(from);
  out->next_revision = std::max(from, revision_ + 1);
  while (i < history_.size()) {
    const int64_t rev = history_.at(i).revision;
    for (; i < history_.size() && history_.at(i).revision == rev; ++i) {
      const KvEvent& e = history_.at(i);
      if (!InKeyRange(e.key, key, end)) continue;
      bytes += e.Bytes();
      out->events.push_back(e);
    }
    if (bytes >= max_bytes && i < history_.size()) {
      out->next_revision = rev + 1;
      break;
    }
  }
  return Status::OK();
}

int64_t KvStateMachine::Revision() const {
  return published_revision_.load(std::memory_order_acquire);
}

int64_t KvStateMachine::CompactedRevision() const {
  ReaderLock lock(&mu_);
  return history_.compacted();
}

void KvStateMachine::SetHistoryLimits(size_t max_revisions, size_t max_bytes) {
  WriterLock lock(&mu_);
  history_.SetLimits(max_revisions, max_bytes);
}

void KvStateMachine::SetSnapshotHistory(size_t revisions) {
  WriterLock lock(&mu_);
  snapshot_history_revisions_ = revisions;
}

size_t KvStateMachine::HistoryBytes() const {
  ReaderLock lock(&mu_);
  return history_.bytes();
}

bool KvStateMachine::GetLease(int64_t id, int64_t* ttl, std::vector<std::string>* keys) const {
  ReaderLock lock(&mu_);
  auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  *ttl = it->second.ttl;
  if (keys != nullptr) keys->assign(it->second.keys.begin(), it->second.keys.end());
  return true;
}

std::vector<std::pair<int64_t, int64_t>> KvStateMachine::Leases() const {
  ReaderLock lock(&mu_);
  std::vector<std::pair<int64_t, int64_t>> out;
  out.reserve(leases_.size());
  for (const auto& [id, l] : leases_) out.emplace_back(id, l.ttl);
  return out;
}

std::vector<LeaseInfo> KvStateMachine::LeaseInfos() const {
  ReaderLock lock(&mu_);
  std::vector<LeaseInfo> out;
  out.reserve(leases_.size());
  for (const auto& [id, l] : leases_) out.push_back(LeaseInfo{id, l.ttl, l.granted_index});
  return out;
}

size_t KvStateMachine::LeaseCount() const {
  ReaderLock lock(&mu_);
  return leases_.size();
}

uint64_t KvStateMachine::LeaseGeneration() const {
  return published_lease_generation_.load(std::memory_order_acquire);
}

uint64_t KvStateMachine::AppliedTerm() const {
  return published_applied_term_.load(std::memory_order_acquire);
}

uint64_t KvStateMachine::AppliedIndex() const {
  return published_applied_index_.load(std::memory_order_acquire);
}

size_t KvStateMachine::Size() const { return published_size_.load(std::memory_order_acquire); }

size_t KvStateMachine::SessionCount() const {
  return published_sessions_.load(std::memory_order_acquire);
}

size_t KvStateMachine::SavedAnswerBytes() const {
  return published_saved_bytes_.load(std::memory_order_acquire);
}

}  // namespace raftkv
