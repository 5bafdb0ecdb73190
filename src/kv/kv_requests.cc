#include "kv/kv_requests.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>
#include <vector>

namespace raftkv {

Status CheckKey(const std::string& key, const RequestLimits& limits) {
  if (key.empty()) return Status::InvalidArgument("key must not be empty").WithReason(Status::Reason::kEmptyKey);
  if (key.size() > limits.max_key_bytes) {
    return Status::InvalidArgument("key is " + std::to_string(key.size()) + " bytes; the limit is " +
                            std::to_string(limits.max_key_bytes) + " (--max_key_bytes)")
        .WithReason(Status::Reason::kRequestTooLarge);
  }
  return Status::OK();
}

Status CheckValue(const std::string& value, const RequestLimits& limits, const char* what) {
  if (value.size() > limits.max_value_bytes) {
    return Status::InvalidArgument(std::string(what) + " is " + std::to_string(value.size()) +
                            " bytes; the limit is " + std::to_string(limits.max_value_bytes) +
                            " (--max_value_bytes)")
        .WithReason(Status::Reason::kRequestTooLarge);
  }
  return Status::OK();
}

Status CheckSession(bool has_session, const Session& s) {
  if (!has_session) return Status::OK();
  if (s.client_id() == 0 || s.sequence() == 0) {
    return Status::InvalidArgument("session.client_id and session.sequence must be > 0 (open a session "
                        "with OpenSession; sequences start at 1)");
  }
  if (s.first_outstanding() > s.sequence()) {
    return Status::InvalidArgument("session.first_outstanding (" + std::to_string(s.first_outstanding()) +
                            ") must not exceed session.sequence (" + std::to_string(s.sequence()) +
                            ")");
  }
  return Status::OK();
}

Status CheckIgnoreFlags(const PutRequest& req) {
  if (req.ignore_value() && !req.value().empty()) {
    return Status::InvalidArgument("value must be empty with ignore_value (the key's value is kept)")
        .WithReason(Status::Reason::kValueProvided);
  }
  if (req.ignore_lease() && req.lease() != 0) {
    return Status::InvalidArgument("lease must be 0 with ignore_lease (the key's lease is kept)")
        .WithReason(Status::Reason::kLeaseProvided);
  }
  return Status::OK();
}

namespace {

// Copies a request's session (if any) into the command, with the bounds on
// what sessions keep of their answers.
void CopySession(bool has_session, const Session& session, const RequestLimits& limits, Command* cmd) {
  if (!has_session) return;
  cmd->set_client_id(session.client_id());
  cmd->set_sequence(session.sequence());
  cmd->set_first_outstanding(session.first_outstanding());
  cmd->set_session_saved_bytes(limits.session_saved_bytes);
  cmd->set_saved_bytes_total(limits.saved_bytes_total);
}

}  // namespace

Status PutCommand(PutRequest* req, const RequestLimits& limits, Command* cmd) {
  Status bad = CheckKey(req->key(), limits);
  if (bad.ok()) bad = CheckValue(req->value(), limits);
  if (bad.ok()) bad = CheckSession(req->has_session(), req->session());
  if (bad.ok() && req->lease() < 0) {
    bad = Status::InvalidArgument("lease must be >= 0 (0: none), got " + std::to_string(req->lease()));
  }
  if (bad.ok()) bad = CheckIgnoreFlags(*req);
  if (!bad.ok()) return bad;
  cmd->Clear();
  CopySession(req->has_session(), req->session(), limits, cmd);
  cmd->set_op(Command::PUT);
  cmd->set_key(std::move(*req->mutable_key()));
  cmd->set_value(std::move(*req->mutable_value()));
  cmd->set_lease(req->lease());
  cmd->set_prev_kv(req->prev_kv());
  cmd->set_ignore_value(req->ignore_value());
  cmd->set_ignore_lease(req->ignore_lease());
  return Status::OK();
}

Status DeleteCommand(DeleteRequest* req, const RequestLimits& limits, Command* cmd) {
  Status bad = CheckKey(req->key(), limits);
  if (bad.ok()) bad = CheckSession(req->has_session(), req->session());
  if (!bad.ok()) return bad;
  cmd->Clear();
  CopySession(req->has_session(), req->session(), limits, cmd);
  cmd->set_op(Command::DELETE);
  cmd->set_key(std::move(*req->mutable_key()));
  return Status::OK();
}

Status CompareAndSwapCommand(CompareAndSwapRequest* req, const RequestLimits& limits,
                                   Command* cmd) {
  Status bad = CheckKey(req->key(), limits);
  if (bad.ok()) bad = CheckValue(req->value(), limits);
  if (bad.ok()) bad = CheckValue(req->expected(), limits, "expected");
  if (bad.ok()) bad = CheckSession(req->has_session(), req->session());
  if (!bad.ok()) return bad;
  cmd->Clear();
  CopySession(req->has_session(), req->session(), limits, cmd);
  cmd->set_op(Command::CAS);
  cmd->set_key(std::move(*req->mutable_key()));
  cmd->set_value(std::move(*req->mutable_value()));
  cmd->set_has_expected(req->has_expected());
  if (req->has_expected()) cmd->set_expected(std::move(*req->mutable_expected()));
  return Status::OK();
}

Status BatchCommand(BatchRequest* req, const RequestLimits& limits, Command* cmd) {
  const size_t n = static_cast<size_t>(req->ops_size());
  if (n == 0) return Status::InvalidArgument("batch has no operations");
  if (n > limits.max_batch_ops) {
    return Status::InvalidArgument("batch has " + std::to_string(n) + " operations; the limit is " +
                            std::to_string(limits.max_batch_ops) + " (--max_batch_ops)");
  }
  size_t bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const BatchOp& op = req->ops(static_cast<int>(i));
    auto at = [i](const Status& s) {
      return Status(s.code(), "ops[" + std::to_string(i) + "]: " + s.message());
    };
    if (op.op() != BatchOp::PUT && op.op() != BatchOp::DELETE) {
      return at(Status::InvalidArgument("unknown op " + std::to_string(op.op())));
    }
    if (Status bad = CheckKey(op.key(), limits); !bad.ok()) return at(bad);
    if (Status bad = CheckValue(op.value(), limits); !bad.ok()) return at(bad);
    if (op.op() == BatchOp::DELETE && !op.value().empty()) {
      return at(Status::InvalidArgument("a DELETE carries no value"));
    }
    bytes += op.key().size() + op.value().size();
  }
  if (bytes > limits.max_batch_bytes) {
    return Status::InvalidArgument("batch holds " + std::to_string(bytes) +
                            " bytes of keys and values; the limit is " +
                            std::to_string(limits.max_batch_bytes) + " (--max_batch_bytes)");
  }
  if (Status bad = CheckSession(req->has_session(), req->session()); !bad.ok()) return bad;
  cmd->Clear();
  CopySession(req->has_session(), req->session(), limits, cmd);
  cmd->set_op(Command::BATCH);
  cmd->mutable_ops()->Reserve(static_cast<int>(n));
  for (BatchOp& op : *req->mutable_ops()) {
    Command* c = cmd->add_ops();
    c->set_op(op.op() == BatchOp::PUT ? Command::PUT : Command::DELETE);
    c->set_key(std::move(*op.mutable_key()));
    if (op.op() == BatchOp::PUT) c->set_value(std::move(*op.mutable_value()));
  }
  return Status::OK();
}

Status CheckGetRequest(const GetRequest& req, const RequestLimits& limits) {
  return CheckKey(req.key(), limits);
}

namespace {

Status Invalid(const std::string& message) {
  return Status::InvalidArgument(message);
}

bool IsAllKeysEnd(const std::string& end) { return end.size() == 1 && end[0] == '\0'; }

// "key" printed for an error message: printable bytes as they are, others escaped.
std::string Printable(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes.substr(0, 64)) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (bytes.size() > 64) out += "...";
  return out;
}

}  // namespace

Status CheckKeyRange(const std::string& key, const std::string& range_end,
                           const RequestLimits& limits) {
  if (key.empty()) {
    return Invalid("key must not be empty (use key \"\\0\" with range_end \"\\0\" for every key)")
        .WithReason(Status::Reason::kEmptyKey);
  }
  if (Status bad = CheckKey(key, limits); !bad.ok()) return bad;
  if (range_end.size() > limits.max_key_bytes) {
    return Invalid("range_end is " + std::to_string(range_end.size()) + " bytes; the limit is " +
                   std::to_string(limits.max_key_bytes) + " (--max_key_bytes)");
  }
  if (!range_end.empty() && !IsAllKeysEnd(range_end) && range_end <= key) {
    return Invalid("range_end \"" + Printable(range_end) + "\" is not after key \"" +
                   Printable(key) + "\": the range [key, range_end) is empty");
  }
  return Status::OK();
}

Status CheckRangeRequest(const RangeRequest& req, const RequestLimits& limits) {
  if (Status bad = CheckKeyRange(req.key(), req.range_end(), limits); !bad.ok()) return bad;
  if (req.limit() < 0) return Invalid("limit must be >= 0 (0: no limit), got " + std::to_string(req.limit()));
  if (req.revision() < 0) return Invalid("revision must be >= 0 (0: now), got " + std::to_string(req.revision()));
  if (!RangeRequest::SortOrder_IsValid(req.sort_order())) {
    return Invalid("unknown sort_order " + std::to_string(req.sort_order()));
  }
  if (!RangeRequest::SortTarget_IsValid(req.sort_target())) {
    return Invalid("unknown sort_target " + std::to_string(req.sort_target()));
  }
  return Status::OK();
}

Status DeleteRangeCommand(DeleteRangeRequest* req, const RequestLimits& limits, Command* cmd) {
  Status bad = CheckKeyRange(req->key(), req->range_end(), limits);
  if (bad.ok()) bad = CheckSession(req->has_session(), req->session());
  if (!bad.ok()) return bad;
  cmd->Clear();
  CopySession(req->has_session(), req->session(), limits, cmd);
  cmd->set_op(Command::DELETE_RANGE);
  cmd->set_key(std::move(*req->mutable_key()));
  cmd->set_range_end(std::move(*req->mutable_range_end()));
  cmd->set_prev_kv(req->prev_kv());
  if (req->prev_kv()) cmd->set_max_result_bytes(limits.max_txn_result_bytes);
  return Status::OK();
}

namespace {

bool InRange(const std::string& k, const std::string& key, const std::string& end) {
  return end.empty() ? k == key : (k >= key && (IsAllKeysEnd(end) || k < end));
}

// What the operations of a list write: the keys put and the ranges deleted.
struct TxnWrites {
  std::set<std::string> puts;
  std::vector<std::pair<std::string, std::string>> deletes;  // [key, end)
};

// What a transaction's checks add up, nested transactions included.
struct TxnTally {
  size_t ops = 0;    // compares and operations
  size_t bytes = 0;  // of keys and values
  bool read_only = false;  // the whole transaction writes nothing
};

Status WrittenTwice(const std::string& list, const std::string& key, const char* how) {
  return Invalid(list + ": key \"" + Printable(key) + "\" is " + how +
                 " (a key may be written once by the operations that run)")
      .WithReason(Status::Reason::kDuplicateKey);
}

// Adds the writes of one operation of `list` to those of the operations
// before it: INVALID_ARGUMENT when a key would be written twice.
Status AddWrites(TxnWrites op, const std::string& list, TxnWrites* all) {
  for (const std::string& p : op.puts) {
    if (all->puts.count(p) != 0) return WrittenTwice(list, p, "put twice");
    for (const auto& [key, end] : all->deletes) {
      if (InRange(p, key, end)) return WrittenTwice(list, p, "both put and deleted");
    }
  }
  for (const auto& [key, end] : op.deletes) {
    for (auto it = all->puts.lower_bound(key); it != all->puts.end() && InRange(*it, key, end); ++it) {
      return WrittenTwice(list, *it, "both put and deleted");
    }
  }
  all->puts.merge(op.puts);
  all->deletes.insert(all->deletes.end(), op.deletes.begin(), op.deletes.end());
  return Status::OK();
}

Status CheckTxn(const TxnRequest& txn, const RequestLimits& limits, int depth,
                const std::string& where, TxnTally* tally, TxnWrites* writes);

// Checks one operation of a transaction's list, `what` naming it; *writes
// gets what it writes.
Status CheckTxnOp(const RequestOp& op, const RequestLimits& limits, int depth, const std::string& what,
                  TxnTally* tally, TxnWrites* writes) {
  auto at = [&](const Status& s) { return Status(s.code(), what + ": " + s.message(), s.reason()); };
  if (op.has_request_range()) {
    const RangeRequest& r = op.request_range();
    if (Status bad = CheckRangeRequest(r, limits); !bad.ok()) return at(bad);
    // A past revision is read from this member's history window, which is
    // its own (not replicated): a transaction that writes must not depend
    // on it, or the members could apply it differently. One without writes
    // is served by one member, like a range (etcd's STM reads that way).
    if (r.revision() != 0 && !tally->read_only) {
      return at(Invalid("a range at a past revision is served only in a transaction without writes "
                        "(revision must be 0 here)"));
    }
    tally->bytes += r.key().size() + r.range_end().size();
  } else if (op.has_request_put()) {
    const PutRequest& p = op.request_put();
    if (Status bad = CheckKey(p.key(), limits); !bad.ok()) return at(bad);
    if (Status bad = CheckValue(p.value(), limits); !bad.ok()) return at(bad);
    if (p.lease() < 0) return at(Invalid("lease must be >= 0"));
    if (Status bad = CheckIgnoreFlags(p); !bad.ok()) return at(bad);
    tally->bytes += p.key().size() + p.value().size();
    writes->puts.insert(p.key());
  } else if (op.has_request_delete_range()) {
    const DeleteRangeRequest& d = op.request_delete_range();
    if (Status bad = CheckKeyRange(d.key(), d.range_end(), limits); !bad.ok()) return at(bad);
    tally->bytes += d.key().size() + d.range_end().size();
    writes->deletes.emplace_back(d.key(), d.range_end());
  } else if (op.has_request_txn()) {
    if (depth >= kMaxTxnDepth) {
      return at(Invalid("transactions nest at most " + std::to_string(kMaxTxnDepth) +
                        " deep (a request_txn inside " + std::to_string(kMaxTxnDepth) +
                        " levels of request_txn)"));
    }
    return CheckTxn(op.request_txn(), limits, depth + 1, what + ".request_txn.", tally, writes);
  } else {
    // etcd answers an empty operation as a key not found.
    return at(Invalid("the operation is empty (set request_range, request_put, request_delete_range "
                      "or request_txn)")
                  .WithReason(Status::Reason::kKeyNotFound));
  }
  return Status::OK();
}

// Checks one list of a transaction; *writes gets what it writes.
Status CheckTxnOps(const google::protobuf::RepeatedPtrField<RequestOp>& ops, const std::string& list,
                   const RequestLimits& limits, int depth, TxnTally* tally, TxnWrites* writes) {
  tally->ops += static_cast<size_t>(ops.size());
  for (int i = 0; i < ops.size() && tally->ops <= limits.max_txn_ops; ++i) {
    TxnWrites op_writes;
    const std::string what = list + "[" + std::to_string(i) + "]";
    if (Status bad = CheckTxnOp(ops[i], limits, depth, what, tally, &op_writes); !bad.ok()) return bad;
    if (Status bad = AddWrites(std::move(op_writes), list, writes); !bad.ok()) return bad;
  }
  return Status::OK();
}

}  // namespace

namespace {

// The value field a compare target is compared with.
Compare::TargetUnionCase TargetField(Compare::CompareTarget target) {
  switch (target) {
    case Compare::VERSION: return Compare::kVersion;
    case Compare::CREATE: return Compare::kCreateRevision;
    case Compare::MOD: return Compare::kModRevision;
    case Compare::VALUE: return Compare::kValue;
    case Compare::LEASE: return Compare::kLease;
    default: return Compare::TARGET_UNION_NOT_SET;
  }
}

// The name of a value field, or null when none is set.
const char* CompareField(Compare::TargetUnionCase field) {
  switch (field) {
    case Compare::kVersion: return "version";
    case Compare::kCreateRevision: return "create_revision";
    case Compare::kModRevision: return "mod_revision";
    case Compare::kValue: return "value";
    case Compare::kLease: return "lease";
    default: return nullptr;
  }
}

}  // namespace

namespace {

Status TooManyOps(size_t n, const RequestLimits& limits) {
  return Invalid("transaction has " + std::to_string(n) +
                 " compares and operations (nested transactions included); the limit is " +
                 std::to_string(limits.max_txn_ops) + " (--max_txn_ops)")
      .WithReason(Status::Reason::kTooManyOps);
}

Status CheckCompare(const Compare& c, const RequestLimits& limits) {
  if (Status bad = CheckKeyRange(c.key(), c.range_end(), limits); !bad.ok()) return bad;
  if (!Compare::CompareResult_IsValid(c.result())) return Invalid("unknown result " + std::to_string(c.result()));
  if (!Compare::CompareTarget_IsValid(c.target())) return Invalid("unknown target " + std::to_string(c.target()));
  if (const char* field = CompareField(c.target_union_case());
      field != nullptr && c.target_union_case() != TargetField(c.target())) {
    return Invalid("target " + Compare::CompareTarget_Name(c.target()) + " compares " +
                   CompareField(TargetField(c.target())) + ", but " + field +
                   " is set (set the field the target names)");
  }
  if (c.target() == Compare::VALUE) return CheckValue(c.value(), limits);
  return Status::OK();
}

// Checks a transaction `depth` levels down (`where` prefixes the names of
// its parts): its compares and both lists, each list writing a key at most
// once; *writes gets what either list writes (only one of them runs).
Status CheckTxn(const TxnRequest& txn, const RequestLimits& limits, int depth,
                const std::string& where, TxnTally* tally, TxnWrites* writes) {
  tally->ops += static_cast<size_t>(txn.compare_size());
  for (int i = 0; i < txn.compare_size(); ++i) {
    const Compare& c = txn.compare(i);
    if (Status bad = CheckCompare(c, limits); !bad.ok()) {
      return Status(bad.code(), where + "compare[" + std::to_string(i) + "]: " + bad.message(),
                    bad.reason());
    }
    tally->bytes += c.key().size() + c.range_end().size() + c.value().size();
  }
  TxnWrites success;
  TxnWrites failure;
  if (Status bad = CheckTxnOps(txn.success(), where + "success", limits, depth, tally, &success); !bad.ok()) {
    return bad;
  }
  if (Status bad = CheckTxnOps(txn.failure(), where + "failure", limits, depth, tally, &failure); !bad.ok()) {
    return bad;
  }
  writes->puts.merge(success.puts);
  writes->puts.merge(failure.puts);
  for (auto* list : {&success.deletes, &failure.deletes}) {
    writes->deletes.insert(writes->deletes.end(), list->begin(), list->end());
  }
  return Status::OK();
}

}  // namespace

Status TxnCommand(TxnRequest* req, const RequestLimits& limits, Command* cmd) {
  const size_t n = static_cast<size_t>(req->compare_size() + req->success_size() + req->failure_size());
  if (n > limits.max_txn_ops) return TooManyOps(n, limits);
  TxnTally tally;
  tally.read_only = TxnIsReadOnly(*req);
  TxnWrites unused;
  if (Status bad = CheckTxn(*req, limits, 0, "", &tally, &unused); !bad.ok()) return bad;
  if (tally.ops > limits.max_txn_ops) return TooManyOps(tally.ops, limits);
  if (tally.bytes > limits.max_batch_bytes) {
    return Invalid("transaction holds " + std::to_string(tally.bytes) +
                   " bytes of keys and values; the limit is " +
                   std::to_string(limits.max_batch_bytes) + " (--max_batch_bytes)")
        .WithReason(Status::Reason::kRequestTooLarge);
  }
  if (Status bad = CheckSession(req->has_session(), req->session()); !bad.ok()) return bad;
  cmd->Clear();
  CopySession(req->has_session(), req->session(), limits, cmd);
  cmd->set_op(Command::TXN);
  cmd->set_max_result_bytes(limits.max_txn_result_bytes);
  TxnRequest* txn = cmd->mutable_txn();
  txn->mutable_compare()->Swap(req->mutable_compare());
  txn->mutable_success()->Swap(req->mutable_success());
  txn->mutable_failure()->Swap(req->mutable_failure());
  return Status::OK();
}

namespace {

bool ListIsReadOnly(const google::protobuf::RepeatedPtrField<RequestOp>& ops, int depth) {
  for (const RequestOp& op : ops) {
    if (op.has_request_range()) continue;
    // Deeper than allowed: not read-only, so TxnCommand refuses it.
    if (!op.has_request_txn() || depth >= kMaxTxnDepth) return false;
    const TxnRequest& txn = op.request_txn();
    if (!ListIsReadOnly(txn.success(), depth + 1) || !ListIsReadOnly(txn.failure(), depth + 1)) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool TxnIsReadOnly(const TxnRequest& req) {
  return ListIsReadOnly(req.success(), 0) && ListIsReadOnly(req.failure(), 0);
}

Status LeaseGrantCommand(const LeaseGrantRequest& req, int64_t ttl, const RequestLimits& limits,
                               Command* cmd) {
  if (req.id() < 0) return Invalid("lease ID must be >= 0 (0: the server picks one)");
  if (Status bad = CheckSession(req.has_session(), req.session()); !bad.ok()) return bad;
  cmd->Clear();
  CopySession(req.has_session(), req.session(), limits, cmd);
  cmd->set_op(Command::LEASE_GRANT);
  cmd->set_lease(req.id());
  cmd->set_lease_ttl(ttl);
  return Status::OK();
}

namespace {

size_t PutCost(const std::string& key, const std::string& value) {
  return kQuotaKvOverhead + key.size() + value.size();
}

size_t TxnCost(const TxnRequest& txn);

size_t ListCost(const google::protobuf::RepeatedPtrField<RequestOp>& ops) {
  size_t cost = 0;
  for (const RequestOp& op : ops) {
    if (op.has_request_put()) cost += PutCost(op.request_put().key(), op.request_put().value());
    if (op.has_request_txn()) cost += TxnCost(op.request_txn());
  }
  return cost;
}

size_t TxnCost(const TxnRequest& txn) { return std::max(ListCost(txn.success()), ListCost(txn.failure())); }

}  // namespace

size_t QuotaCost(const Command& cmd) {
  switch (cmd.op()) {
    case Command::PUT:
    case Command::CAS:
      return PutCost(cmd.key(), cmd.value());
    case Command::BATCH: {
      size_t cost = 0;
      for (const Command& op : cmd.ops()) {
        if (op.op() == Command::PUT) cost += PutCost(op.key(), op.value());
      }
      return cost;
    }
    case Command::TXN:
      return TxnCost(cmd.txn());
    case Command::LEASE_GRANT:
      return kQuotaLeaseOverhead;
    default:
      return 0;
  }
}

}  // namespace raftkv
