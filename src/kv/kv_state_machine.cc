// KvStateMachine, the apply path: decoding a committed entry, sessions,
// the MVCC writes (put, delete, delete range, batch, CAS, transaction), the
// leases' grant and revocation; and the counters published after each
// apply (kv_state_machine.h).
#include "kv/kv_state_machine.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "kv/kv_internal.h"
#include "kv/kv_requests.h"
#include "kv/kv_state_rows.h"
#include "kv/mvcc_store.h"
#include "storage/memory_backend.h"

namespace raftkv {

using kv_internal::TooLarge;

namespace {

bool IsDataOp(Command::Op op) {
  return op == Command::PUT || op == Command::DELETE || op == Command::CAS ||
         op == Command::BATCH || op == Command::TXN || op == Command::DELETE_RANGE ||
         op == Command::LEASE_GRANT || op == Command::LEASE_REVOKE || op == Command::COMPACT ||
         op == Command::ALARM;
}

std::string Hex(int64_t id) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(id));
  return buf;
}

void Reject(ApplyResult* result, Status::Code code, std::string message,
            Status::Reason reason = Status::Reason::kNone) {
  result->answer.set_reject_code(static_cast<uint32_t>(code));
  result->answer.set_reject_message(std::move(message));
  result->answer.set_reject_reason(static_cast<uint32_t>(reason));
}

void Reject(ApplyResult* result, const Status& why) {
  Reject(result, why.code(), why.message(), why.reason());
}

Status LeaseNotFound(int64_t id) {
  return Status(Status::Code::kNotFound, "lease " + Hex(id) + " not found",
                Status::Reason::kLeaseNotFound);
}

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
  Status::Code code = Status::Code::kFailedPrecondition;
  switch (static_cast<Status::Code>(answer.reject_code())) {
    case Status::Code::kOk: return Status::OK();
    case Status::Code::kNotFound:
    case Status::Code::kOutOfRange:
    case Status::Code::kInvalidArgument:
    case Status::Code::kResourceExhausted:
      code = static_cast<Status::Code>(answer.reject_code());
      break;
    default: break;
  }
  // A reason from a newer version is left out.
  const uint32_t reason = answer.reject_reason();
  return Status(code, answer.reject_message(),
                reason <= static_cast<uint32_t>(Status::kLastReason) ? static_cast<Status::Reason>(reason)
                                                                     : Status::Reason::kNone);
}

size_t ApplyResult::SavedBytes() const {
  constexpr size_t kRecord = 128;  // the result's own fields and its place in the session
  return kRecord + current.size() + error.size() + batch_existed.size() / 8 + answer.ByteSizeLong();
}

KvStateMachine::KvStateMachine() : KvStateMachine(std::make_unique<MemoryBackend>()) {}

KvStateMachine::KvStateMachine(std::unique_ptr<KvBackend> backend)
    : persistent_(backend->persistent()), backend_(std::move(backend)) {
  WriterLock lock(&mu_);
  if (persistent_) {
    sessions_.TrackChanges();
    leases_.TrackChanges();
  }
}

Status KvStateMachine::Open(std::unique_ptr<KvBackend> backend, std::unique_ptr<KvStateMachine>* out) {
  const std::shared_ptr<const BackendView> view = backend->View();
  state_rows::Loaded loaded;
  if (Status s = state_rows::Load(*view, &loaded); !s.ok()) return s;
  std::unique_ptr<KvStateMachine> sm(new KvStateMachine(std::move(backend)));
  if (loaded.found) {
    if (Status s = sm->Resume(view, &loaded); !s.ok()) return s;
  }
  *out = std::move(sm);
  return Status::OK();
}

Status KvStateMachine::Resume(const std::shared_ptr<const BackendView>& view, state_rows::Loaded* loaded,
                              std::shared_ptr<KvBackend> replace) {
  const KvMeta& meta = loaded->meta;
  // The window: the bytes of every revision the history rows keep.
  std::vector<std::pair<int64_t, size_t>> window;
  const MvccReader reader(view);
  for (int64_t from = meta.history_compacted() + 1;;) {
    std::vector<KvEvent> events;
    int64_t next = from;
    if (Status s = reader.ReadEvents("", std::string(1, '\0'), from, 4 << 20, &events, &next); !s.ok()) {
      return s;
    }
    if (events.empty()) break;
    for (const KvEvent& e : events) {
      if (window.empty() || window.back().first != e.revision) window.emplace_back(e.revision, 0);
      window.back().second += e.Bytes();
    }
    from = next;
  }
  WriterLock lock(&mu_);
  if (replace) std::swap(backend_, replace);  // the old store is let go after the lock
  applied_index_ = meta.applied_index();
  applied_term_ = meta.applied_term();
  cluster_time_ms_ = meta.cluster_time_ms();
  revision_ = meta.revision();
  live_keys_ = meta.live_keys();
  data_bytes_ = meta.data_bytes();
  applied_config_ = std::move(loaded->config);
  std::swap(sessions_, loaded->sessions);
  leases_.Swap(&loaded->leases);
  std::swap(alarms_, loaded->alarms);
  history_.Reset(meta.history_compacted());
  history_.SetCompactRevision(meta.compact_revision());
  for (const auto& [revision, bytes] : window) history_.AppendRevision(revision, bytes);
  sessions_.TrackChanges();
  leases_.TrackChanges();
  swept_ = -1;  // the last run's sweep may have lagged behind the window
  DropTrimmedLocked();
  PublishLocked();
  return Status::OK();
}

KvStateMachine::~KvStateMachine() = default;

ApplyResult KvStateMachine::Apply(const Entry& entry) {
  ApplyResult result;
  Command command;
  const bool have_command = Decode(entry, &command, &result);
  WriterLock lock(&mu_);
  if (abandoned_) {
    result.ok = false;
    result.error = "the state machine stopped waiting for its store";
    return result;
  }
  BeginPassLocked();
  ApplyInPassLocked(entry, command, have_command, &result);
  EndPassLocked();
  return result;
}

void KvStateMachine::ApplyInPassLocked(const Entry& entry, Command& command, bool have_command,
                                       ApplyResult* result) {
  if (apply_hook_) apply_hook_(entry);
  BackendBatch batch;
  ApplyLocked(entry, command, have_command, result, &batch);
  AddToPassLocked(std::move(batch));
}

bool KvStateMachine::ApplyAll(const std::deque<Entry>& entries, std::vector<ApplyResult>* results) {
  results->clear();
  results->resize(entries.size());
  // Decoded outside the lock: readers are only blocked for the store update.
  std::vector<Command> commands(entries.size());
  std::vector<bool> have_command(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    have_command[i] = Decode(entries[i], &commands[i], &(*results)[i]);
  }
  size_t next = 0;
  while (next < entries.size()) {
    WriterLock lock(&mu_);
    if (abandoned_) return false;
    BeginPassLocked();
    const size_t first = next;
    do {
      ApplyInPassLocked(entries[next], commands[next], have_command[next], &(*results)[next]);
      ++next;
    } while (next < entries.size() && next - first < kMaxPassEntries &&
             pass_->bytes() < kMaxPassBytes);
    EndPassLocked();
    if (abandoned_) return false;
  }
  return true;
}

void KvStateMachine::BeginPassLocked() {
  DCHECK(pass_ == nullptr);
  pass_ = std::make_shared<OverlayView>(backend_->View());
}

void KvStateMachine::AddToPassLocked(BackendBatch&& batch) {
  if (OverlayView::HasDeleteRange(batch)) {
    // A range cannot be laid over the view: write it, and read on from the
    // store again.
    WritePassLocked(std::move(batch));
    pass_ = std::make_shared<OverlayView>(backend_->View());
    return;
  }
  pass_->Add(std::move(batch));
}

void KvStateMachine::EndPassLocked() {
  WritePassLocked(BackendBatch());
  PublishLocked();
}

void KvStateMachine::WritePassLocked(BackendBatch&& extra) {
  BackendBatch batch;
  pass_->Drain(&batch);
  batch.Append(std::move(extra));
  if (persistent_) AddStateRowsLocked(&batch);
  // No view of the pass is left: the write changes the store in place (one
  // a reader still holds makes it copy what it changes).
  pass_.reset();
  WriteLocked(batch);
}

void KvStateMachine::AddStateRowsLocked(BackendBatch* batch) {
  state_rows::AddSessionRows(sessions_, sessions_.TakeChanges(), batch);
  state_rows::AddLeaseRows(leases_, leases_.TakeChanges(), batch);
  if (alarms_changed_) state_rows::AddAlarmRows(alarms_, batch);
  if (config_changed_) state_rows::AddConfig(applied_config_, batch);
  alarms_changed_ = config_changed_ = false;
  KvMeta meta;
  meta.set_format(state_rows::kFormat);
  meta.set_applied_index(applied_index_);
  meta.set_applied_term(applied_term_);
  meta.set_cluster_time_ms(cluster_time_ms_);
  meta.set_revision(revision_);
  meta.set_live_keys(live_keys_);
  meta.set_data_bytes(data_bytes_);
  meta.set_history_compacted(history_.compacted());
  meta.set_compact_revision(history_.compact_revision());
  state_rows::AddMeta(meta, batch);
}

void KvStateMachine::PublishLocked() {
  published_revision_.store(revision_, std::memory_order_release);
  published_lease_generation_.store(leases_.generation(), std::memory_order_release);
  published_applied_index_.store(applied_index_, std::memory_order_release);
  published_applied_term_.store(applied_term_, std::memory_order_release);
  published_size_.store(live_keys_, std::memory_order_release);
  published_sessions_.store(sessions_.size(), std::memory_order_release);
  published_saved_bytes_.store(sessions_.saved_bytes(), std::memory_order_release);
  published_state_bytes_.store(data_bytes_ + history_.bytes() + sessions_.saved_bytes() +
                                   leases_.size() * kQuotaLeaseOverhead,
                               std::memory_order_release);
  published_nospace_.store(NoSpaceLocked(), std::memory_order_release);
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
                                 ApplyResult* result_out, BackendBatch* batch) {
  ApplyResult& result = *result_out;
  CHECK_EQ(entry.index(), applied_index_ + 1) << "entries must be applied in index order";
  applied_index_ = entry.index();
  applied_term_ = entry.term();
  // Cluster time never goes back along the committed log; max() keeps it so
  // even for a log written before entries carried a time.
  cluster_time_ms_ = std::max(cluster_time_ms_, entry.cluster_time_ms());
  sessions_.Expire(cluster_time_ms_);
  if (entry.type() == ENTRY_CONFIG) {
    applied_config_ = entry.data();
    config_changed_ = true;
  }
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
    ApplyToMap(command, &result, batch);
    return;
  }
  if (!sessions_.Begin(command, cluster_time_ms_, &result)) return;
  ApplyToMap(command, &result, batch);
  sessions_.Save(command, result);
}

void KvStateMachine::ApplyToMap(Command& command, ApplyResult* result, BackendBatch* batch) {
  {
    const MvccReader before(pass_);
    MvccWriter writer(&before, revision_ + 1);
    Changes changes{&writer};
    ApplyOps(command, result, &changes);
    CollectLocked(&changes, *before.view(), batch);
  }
  result->answer.set_revision(revision_);
}

void KvStateMachine::ApplyOps(Command& command, ApplyResult* result, Changes* changes) {
  MvccWriter& writer = *changes->writer;
  SavedAnswer& answer = result->answer;
  if (NoSpaceLocked() && QuotaCost(command) > 0) {
    Reject(result, Status(Status::Code::kResourceExhausted,
                          "the store is over its space quota (a NOSPACE alarm is raised): only "
                          "reads, deletes and compaction are accepted until it is cleared",
                          Status::Reason::kNoSpace));
    return;
  }
  switch (command.op()) {
    case Command::PUT:
      ApplyPut(command, result, changes);
      break;
    case Command::DELETE:
      result->existed = DeleteKey(command.key(), changes, nullptr);
      break;
    case Command::DELETE_RANGE: {
      size_t cost = 0;
      if (command.prev_kv() && command.max_result_bytes() > 0) {
        CheckRead(kv_internal::RangeCost(writer, command.key(), command.range_end(),
                                         command.max_result_bytes(), &cost));
      }
      if (cost > command.max_result_bytes()) {
        Reject(result, Status::Code::kResourceExhausted,
               TooLarge("this delete with prev_kv", command.max_result_bytes()));
        break;
      }
      answer.set_deleted(DeleteRangeKeys(command.key(), command.range_end(), changes,
                                         command.prev_kv() ? answer.mutable_prev_kvs() : nullptr));
      break;
    }
    case Command::BATCH:
      result->batch_existed.reserve(static_cast<size_t>(command.ops_size()));
      for (Command& op : *command.mutable_ops()) {
        if (op.op() == Command::PUT) {
          result->batch_existed.push_back(PutKey(std::move(*op.mutable_key()),
                                                 std::move(*op.mutable_value()), 0, changes, nullptr));
        } else {
          result->batch_existed.push_back(DeleteKey(op.key(), changes, nullptr));
        }
      }
      break;
    case Command::CAS: {
      std::optional<KvRecord> current;
      CheckRead(writer.Find(command.key(), &current));
      result->found = current.has_value();
      if (result->found) result->current = current->value;
      result->swapped = command.has_expected() ? result->found && current->value == command.expected()
                                               : !result->found;
      if (result->swapped) {
        PutKey(std::move(*command.mutable_key()), std::move(*command.mutable_value()), 0, changes,
               nullptr);
      }
      break;
    }
    case Command::TXN:
      ApplyTxn(command, result, changes);
      break;
    case Command::LEASE_GRANT: {
      const int64_t id = command.lease() != 0 ? command.lease()
                                              : static_cast<int64_t>(result->index);
      if (id <= 0 || command.lease_ttl() <= 0) {
        Reject(result, Status::Code::kInvalidArgument,
               "lease id and TTL must be > 0 (id " + std::to_string(id) + ", TTL " +
                   std::to_string(command.lease_ttl()) + ")");
      } else if (!leases_.Grant(id, command.lease_ttl(), result->index)) {
        Reject(result, Status::Code::kFailedPrecondition, "lease " + Hex(id) + " already exists");
      } else {
        answer.set_lease_id(id);
        answer.set_lease_ttl(command.lease_ttl());
      }
      break;
    }
    case Command::LEASE_REVOKE: {
      const std::optional<uint64_t> granted = leases_.GrantedIndex(command.lease());
      if (command.lease_granted_index() != 0 && granted &&
          *granted != command.lease_granted_index()) {
        // The expiry of an earlier grant of this id: the lease it meant is gone.
        Reject(result, Status::Code::kNotFound,
               "lease " + Hex(command.lease()) + " granted at index " +
                   std::to_string(command.lease_granted_index()) + " not found");
        break;
      }
      ApplyLeaseRevoke(command.lease(), result, changes);
      break;
    }
    case Command::COMPACT:
      ApplyCompact(command.compact_revision(), result);
      break;
    case Command::ALARM:
      ApplyAlarm(command, result);
      break;
    default:
      break;
  }
}

void KvStateMachine::CollectLocked(Changes* changes, const BackendView& before, BackendBatch* batch,
                                   bool sweep_now) {
  if (changes != nullptr && changes->writer->changes() > 0) {
    revision_ = changes->writer->revision();
    changes->writer->Finish(batch);
    history_.AppendRevision(revision_, changes->bytes);
  }
  const int64_t compacted = history_.compacted();
  if (compacted > swept_ && (sweep_now || sweep_now_ || compacted - swept_ >= kSweepRevisions)) {
    // Planned on the state before the entry: its own writes are newer than
    // anything the plan deletes.
    int64_t done = 0;
    CheckRead(PlanCompaction(before, swept_ + 1, compacted + 1, 0, batch, &done));
    swept_ = compacted;
    sweep_now_ = false;
  }
}

void KvStateMachine::WriteLocked(const BackendBatch& batch) {
  if (batch.empty() || read_only_ || abandoned_) return;
  Status written = backend_->Write(batch);
  if (!written.ok()) UntilWrittenLocked(batch, std::move(written));
}

void KvStateMachine::UntilWrittenLocked(const BackendBatch& batch, Status error) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point first = Clock::now();
  uint64_t failures = 0;
  std::chrono::milliseconds backoff(10);
  while (!error.ok()) {
    // IOError: refused (a full disk); Unavailable: the store is resuming.
    LOG_IF(FATAL, error.code() != Status::Code::kIOError && error.code() != Status::Code::kUnavailable)
        << "writing the key-value store failed: " << error.ToString();
    store_write_errors_.fetch_add(1, std::memory_order_relaxed);
    if (failures++ == 0) {
      store_stalled_.store(true, std::memory_order_relaxed);
      LOG(ERROR) << "the key-value store refused a write: " << error.ToString()
                 << "; this member applies (and acknowledges) nothing and retries until it takes it";
    }
    if (!WaitUnlessStopping(backoff)) {
      abandoned_ = true;
      store_stalled_.store(false, std::memory_order_relaxed);
      LOG(WARNING) << "stopping with applied entries the key-value store did not take; the next "
                      "start applies them again from the log";
      return;
    }
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    error = backend_->Resume();
    if (error.ok()) error = backend_->Write(batch);
  }
  store_stalled_.store(false, std::memory_order_relaxed);
  LOG(WARNING) << "the key-value store took writes again after " << failures << " refused in "
               << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - first).count()
               << " ms";
}

bool KvStateMachine::WaitUnlessStopping(std::chrono::milliseconds d) {
  MutexLock lock(&stop_mu_);
  if (!stop_retrying_) stop_signal_.WaitFor(&stop_mu_, d);
  return !stop_retrying_;
}

void KvStateMachine::StopRetrying() {
  {
    MutexLock lock(&stop_mu_);
    stop_retrying_ = true;
  }
  stop_signal_.SignalAll();
}

void KvStateMachine::DropTrimmedLocked(bool all_rows) {
  BackendBatch batch;
  CollectLocked(nullptr, *backend_->View(), &batch, /*sweep_now=*/true);
  if (persistent_ && (all_rows || !batch.empty())) AddStateRowsLocked(&batch);
  WriteLocked(batch);
}

// As etcd: reads at `revision` and later are still served, earlier ones
// are compacted; compacting through it again is refused. Decided on the
// replicated state alone (the store's revision and the last COMPACT), never
// on this member's local window, so every member decides alike.
void KvStateMachine::ApplyCompact(int64_t revision, ApplyResult* result) {
  if (revision > revision_) {
    Reject(result, Status::OutOfRange("cannot compact through revision " + std::to_string(revision) +
                                      ": the store is at " + std::to_string(revision_))
                       .WithReason(Status::Reason::kFutureRevision));
  } else if (revision <= history_.compact_revision()) {
    Reject(result, Status::OutOfRange("revision " + std::to_string(revision) +
                                      " is compacted already; the oldest revision kept is " +
                                      std::to_string(history_.read_floor()))
                       .WithReason(Status::Reason::kCompacted));
  } else {
    history_.CompactThrough(revision);
    sweep_now_ = true;  // an operator compacts to free space: now, not in a while
  }
}

// As etcd's alarm store: raising an alarm that is raised, or clearing one
// that is not, changes nothing (existed tells which).
void KvStateMachine::ApplyAlarm(const Command& command, ApplyResult* result) {
  if (command.alarm_type() != kAlarmNoSpace) {
    Reject(result, Status::Code::kInvalidArgument,
           "unknown alarm type " + std::to_string(command.alarm_type()) + " (1: NOSPACE)");
    return;
  }
  const std::pair<uint64_t, uint32_t> alarm{command.alarm_member(), command.alarm_type()};
  result->existed = alarms_.count(alarm) != 0;
  constexpr uint32_t kActivate = 1, kDeactivate = 2;  // etcd's AlarmRequest.AlarmAction
  if (command.alarm_action() == kDeactivate) {
    alarms_.erase(alarm);
  } else if (command.alarm_action() != kActivate) {
    Reject(result, Status::Code::kInvalidArgument,
           "unknown alarm action " + std::to_string(command.alarm_action()) + " (1: ACTIVATE, 2: DEACTIVATE)");
  } else if (!result->existed && alarms_.size() >= kMaxAlarms) {
    Reject(result, Status::Code::kResourceExhausted,
           "too many alarms raised (" + std::to_string(kMaxAlarms) + ")");
  } else {
    alarms_.insert(alarm);
  }
  alarms_changed_ = true;
}

bool KvStateMachine::NoSpaceLocked() const {
  for (const auto& [member, type] : alarms_) {
    if (type == kAlarmNoSpace) return true;
  }
  return false;
}

// What an event costs the history window (as the KvEvent read back).
static size_t EventBytes(const std::string& key, size_t value_bytes, const std::optional<KvRecord>& prev) {
  return KvEvent::Cost(key.size(), value_bytes, prev ? prev->value.size() : 0);
}

bool KvStateMachine::PutKey(std::string key, std::string value, int64_t lease, Changes* changes,
                            KeyValue* prev) {
  std::optional<KvRecord> old;
  CheckRead(changes->writer->Find(key, &old));
  KvRecord r;
  if (old) {
    r.create_revision = old->create_revision;
    r.version = old->version + 1;
    data_bytes_ -= old->value.size();
    if (old->lease != lease) leases_.Detach(key, old->lease);
    if (prev != nullptr) ToKeyValue(key, *old, false, prev);
  } else {
    r.create_revision = changes->writer->revision();
    r.version = 1;
    data_bytes_ += key.size() + kKeyOverhead;
    ++live_keys_;
  }
  r.lease = lease;
  leases_.Attach(key, lease);
  r.value = std::move(value);
  data_bytes_ += r.value.size();
  changes->bytes += EventBytes(key, r.value.size(), old);
  changes->writer->Put(key, std::move(r), old ? &*old : nullptr);
  return old.has_value();
}

bool KvStateMachine::DeleteKey(const std::string& key, Changes* changes, KeyValue* prev) {
  std::optional<KvRecord> old;
  CheckRead(changes->writer->Find(key, &old));
  if (!old) return false;
  if (prev != nullptr) ToKeyValue(key, *old, false, prev);
  leases_.Detach(key, old->lease);
  data_bytes_ -= key.size() + kKeyOverhead + old->value.size();
  --live_keys_;
  changes->bytes += EventBytes(key, 0, old);
  changes->writer->Delete(key, *old);
  return true;
}

int64_t KvStateMachine::DeleteRangeKeys(const std::string& key, const std::string& end,
                                        Changes* changes,
                                        google::protobuf::RepeatedPtrField<KeyValue>* prevs) {
  if (key.empty()) return 0;
  std::vector<std::string> keys;
  CheckRead(changes->writer->Scan(
      key, end,
      [&](const std::string& k, const KvRecord&) {
        keys.push_back(k);
        return true;
      },
      ScanValues::kNoValues));
  for (const std::string& k : keys) DeleteKey(k, changes, prevs != nullptr ? prevs->Add() : nullptr);
  return static_cast<int64_t>(keys.size());
}

Status KvStateMachine::CheckPutLocked(const KvSource& src, const std::string& key, int64_t lease,
                                      bool ignore_value, bool ignore_lease) const {
  if (lease != 0 && !leases_.Contains(lease)) return LeaseNotFound(lease);
  std::optional<KvRecord> current;
  if (ignore_value || ignore_lease) CheckRead(src.Find(key, &current));
  if ((ignore_value || ignore_lease) && !current) {
    return Status(Status::Code::kInvalidArgument,
                  std::string("the key does not exist: a put with ") +
                      (ignore_value ? "ignore_value" : "ignore_lease") + " keeps its current " +
                      (ignore_value ? "value" : "lease"),
                  Status::Reason::kKeyNotFound);
  }
  return Status::OK();
}

namespace {

// What a put keeping the key's value or lease writes: the key's current
// ones in their place (the key exists: CheckPutLocked).
Status KeepCurrent(const KvSource& src, const std::string& key, bool ignore_value, bool ignore_lease,
                   std::string* value, int64_t* lease) {
  if (!ignore_value && !ignore_lease) return Status::OK();
  std::optional<KvRecord> current;
  Status s = src.Find(key, &current);
  if (!s.ok() || !current) return s;
  if (ignore_value) *value = current->value;
  if (ignore_lease) *lease = current->lease;
  return Status::OK();
}

}  // namespace

void KvStateMachine::ApplyPut(Command& command, ApplyResult* result, Changes* changes) {
  Status refused = CheckPutLocked(*changes->writer, command.key(), command.lease(),
                                  command.ignore_value(), command.ignore_lease());
  if (!refused.ok()) return Reject(result, refused);
  int64_t lease = command.lease();
  CheckRead(KeepCurrent(*changes->writer, command.key(), command.ignore_value(),
                        command.ignore_lease(), command.mutable_value(), &lease));
  SavedAnswer& answer = result->answer;
  result->existed = PutKey(std::move(*command.mutable_key()), std::move(*command.mutable_value()),
                           lease, changes, command.prev_kv() ? answer.mutable_prev_kv() : nullptr);
  if (!result->existed) answer.clear_prev_kv();
}

void KvStateMachine::ApplyTxn(Command& command, ApplyResult* result, Changes* changes) {
  TxnRequest& txn = *command.mutable_txn();
  // Every compare that decides, nested ones included, on the state before
  // any change (as etcd).
  const MvccWriter& state = *changes->writer;
  std::vector<bool> path;
  CheckRead(kv_internal::TxnPath(state, txn, &path));
  std::vector<const RequestOp*> ops;
  size_t at = 0;
  kv_internal::TakenOps(txn, path, &at, &ops);
  // Refused whole before any change: an answer over the entry's budget.
  const size_t budget = command.max_result_bytes();
  size_t cost = 0;
  if (budget > 0) CheckRead(kv_internal::EstimateAnswer(state, ops, budget, &cost));
  if (cost > budget) {
    Reject(result, Status::Code::kResourceExhausted, TooLarge("this transaction", budget));
    return;
  }
  // Refused whole before any change: a put on a lease that does not exist,
  // or keeping the value or lease of a key that does not.
  for (const RequestOp* op : ops) {
    if (!op->has_request_put()) continue;
    const PutRequest& put = op->request_put();
    Status refused = CheckPutLocked(state, put.key(), put.lease(), put.ignore_value(), put.ignore_lease());
    if (!refused.ok()) return Reject(result, refused);
  }
  TxnResponse* resp = result->answer.mutable_txn();
  at = 0;
  ApplyTxnOps(txn, path, &at, resp, changes);
  const int64_t revision = changes->writer->changes() == 0 ? revision_ : changes->writer->revision();
  // The nested transactions' answers carry the revision after the whole.
  std::vector<TxnResponse*> answers{resp};
  while (!answers.empty()) {
    TxnResponse* a = answers.back();
    answers.pop_back();
    a->mutable_header()->set_revision(revision);
    for (ResponseOp& r : *a->mutable_responses()) {
      if (r.has_response_txn()) answers.push_back(r.mutable_response_txn());
    }
  }
}

void KvStateMachine::ApplyTxnOps(TxnRequest& txn, const std::vector<bool>& path, size_t* at,
                                 TxnResponse* resp, Changes* changes) {
  const bool succeeded = *at < path.size() && path[*at];
  ++*at;
  resp->set_succeeded(succeeded);
  for (RequestOp& op : succeeded ? *txn.mutable_success() : *txn.mutable_failure()) {
    ResponseOp* r = resp->add_responses();
    if (op.has_request_range()) {
      RangeRequest& range = *op.mutable_request_range();
      range.set_revision(0);  // the current state: every replica reads alike
      // Bounded by the estimate.
      CheckRead(kv_internal::RangeOf(*changes->writer, range, r->mutable_response_range(), 0));
      r->mutable_response_range()->mutable_header()->set_revision(
          changes->writer->changes() == 0 ? revision_ : changes->writer->revision());
    } else if (op.has_request_put()) {
      PutRequest& put = *op.mutable_request_put();
      PutResponse* pr = r->mutable_response_put();
      int64_t lease = put.lease();
      CheckRead(KeepCurrent(*changes->writer, put.key(), put.ignore_value(), put.ignore_lease(),
                            put.mutable_value(), &lease));
      KeyValue prev;
      const bool existed = PutKey(std::move(*put.mutable_key()), std::move(*put.mutable_value()),
                                  lease, changes, put.prev_kv() ? &prev : nullptr);
      if (put.prev_kv() && existed) *pr->mutable_prev_kv() = std::move(prev);
      pr->set_revision(changes->writer->revision());
    } else if (op.has_request_delete_range()) {
      const DeleteRangeRequest& del = op.request_delete_range();
      DeleteRangeResponse* dr = r->mutable_response_delete_range();
      dr->set_deleted(DeleteRangeKeys(del.key(), del.range_end(), changes,
                                      del.prev_kv() ? dr->mutable_prev_kvs() : nullptr));
    } else if (op.has_request_txn()) {
      ApplyTxnOps(*op.mutable_request_txn(), path, at, r->mutable_response_txn(), changes);
    }
  }
}

void KvStateMachine::ApplyLeaseRevoke(int64_t id, ApplyResult* result, Changes* changes) {
  std::set<std::string> keys;
  if (!leases_.Revoke(id, &keys)) {
    Reject(result, LeaseNotFound(id));
    return;
  }
  for (const std::string& k : keys) DeleteKey(k, changes, nullptr);
  result->answer.set_deleted(static_cast<int64_t>(keys.size()));
}

int64_t KvStateMachine::Revision() const {
  return published_revision_.load(std::memory_order_acquire);
}

int64_t KvStateMachine::CompactedRevision() const {
  ReaderLock lock(&mu_);
  return history_.compacted();
}

int64_t KvStateMachine::CompactRevision() const {
  ReaderLock lock(&mu_);
  return history_.compact_revision();
}

void KvStateMachine::SetHistoryLimits(size_t max_revisions, size_t max_bytes) {
  WriterLock lock(&mu_);
  history_.SetLimits(max_revisions, max_bytes);
  DropTrimmedLocked();
  PublishLocked();
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
  return leases_.Get(id, ttl, keys);
}

std::vector<std::pair<int64_t, int64_t>> KvStateMachine::Leases() const {
  ReaderLock lock(&mu_);
  return leases_.List();
}

std::vector<LeaseInfo> KvStateMachine::LeaseInfos() const {
  ReaderLock lock(&mu_);
  return leases_.Infos();
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

std::string KvStateMachine::AppliedConfig() const {
  ReaderLock lock(&mu_);
  return applied_config_;
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

size_t KvStateMachine::StateBytes() const {
  return published_state_bytes_.load(std::memory_order_acquire);
}

void KvStateMachine::SetBackendFactory(KvBackendFactory* factory) {
  WriterLock lock(&mu_);
  factory_ = factory;
}

Status KvStateMachine::FlushStore() {
  std::shared_ptr<KvBackend> backend;
  KvBackendFactory* factory = nullptr;
  {
    ReaderLock lock(&mu_);
    backend = backend_;
    factory = factory_;
  }
  Status s = backend->Flush();
  if (factory != nullptr) factory->RemoveStale();
  return s;
}

Status KvStateMachine::CompactStore() const {
  std::shared_ptr<KvBackend> backend;
  {
    ReaderLock lock(&mu_);
    backend = backend_;
  }
  return backend->CompactAll();
}

size_t KvStateMachine::StoredBytes() const {
  return static_cast<size_t>(StoreStats().StoredBytes());
}

BackendStats KvStateMachine::StoreStats() const {
  ReaderLock lock(&mu_);
  return backend_->Stats();
}

bool KvStateMachine::NoSpaceAlarm() const { return published_nospace_.load(std::memory_order_acquire); }

std::vector<KvStateMachine::Alarm> KvStateMachine::Alarms() const {
  ReaderLock lock(&mu_);
  std::vector<Alarm> out;
  out.reserve(alarms_.size());
  for (const auto& [member, type] : alarms_) out.push_back(Alarm{member, type});
  return out;
}

}  // namespace raftkv
