#include "kv/kv_requests.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

namespace raftkv {

Status CheckKey(const std::string& key, const RequestLimits& limits) {
  if (key.empty()) return Status::InvalidArgument("key must not be empty");
  if (key.size() > limits.max_key_bytes) {
    return Status::InvalidArgument("key is " + std::to_string(key.size()) + " bytes; the limit is " +
                            std::to_string(limits.max_key_bytes) + " (--max_key_bytes)");
  }
  return Status::OK();
}

Status CheckValue(const std::string& value, const RequestLimits& limits, const char* what) {
  if (value.size() > limits.max_value_bytes) {
    return Status::InvalidArgument(std::string(what) + " is " + std::to_string(value.size()) +
                            " bytes; the limit is " + std::to_string(limits.max_value_bytes) +
                            " (--max_value_bytes)");
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
  if (!bad.ok()) return bad;
  cmd->Clear();
  CopySession(req->has_session(), req->session(), limits, cmd);
  cmd->set_op(Command::PUT);
  cmd->set_key(std::move(*req->mutable_key()));
  cmd->set_value(std::move(*req->mutable_value()));
  cmd->set_lease(req->lease());
  cmd->set_prev_kv(req->prev_kv());
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
  if (key.empty()) return Invalid("key must not be empty (use key \"\\0\" with range_end \"\\0\" for every key)");
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

// Checks one list of a transaction; adds its bytes and counts its writes.
Status CheckTxnOps(const google::protobuf::RepeatedPtrField<RequestOp>& ops, const char* list,
                         const RequestLimits& limits, size_t* bytes) {
  std::vector<std::pair<std::string, std::string>> deletes;  // [key, end)
  std::vector<std::string> puts;
  for (int i = 0; i < ops.size(); ++i) {
    const RequestOp& op = ops[i];
    auto at = [&](const Status& s) {
      return Invalid(std::string(list) + "[" + std::to_string(i) + "]: " + s.message());
    };
    if (op.has_request_range()) {
      const RangeRequest& r = op.request_range();
      if (Status bad = CheckRangeRequest(r, limits); !bad.ok()) return at(bad);
      if (r.revision() != 0) {
        return at(Invalid("a range inside a transaction reads the current revision (revision must be 0)"));
      }
      *bytes += r.key().size() + r.range_end().size();
    } else if (op.has_request_put()) {
      const PutRequest& p = op.request_put();
      if (Status bad = CheckKey(p.key(), limits); !bad.ok()) return at(bad);
      if (Status bad = CheckValue(p.value(), limits); !bad.ok()) return at(bad);
      if (p.lease() < 0) return at(Invalid("lease must be >= 0"));
      *bytes += p.key().size() + p.value().size();
      puts.push_back(p.key());
    } else if (op.has_request_delete_range()) {
      const DeleteRangeRequest& d = op.request_delete_range();
      if (Status bad = CheckKeyRange(d.key(), d.range_end(), limits); !bad.ok()) return at(bad);
      *bytes += d.key().size() + d.range_end().size();
      deletes.emplace_back(d.key(), d.range_end());
    } else {
      return at(Invalid("the operation is empty (set request_range, request_put or request_delete_range)"));
    }
  }
  std::sort(puts.begin(), puts.end());
  for (size_t i = 1; i < puts.size(); ++i) {
    if (puts[i] == puts[i - 1]) {
      return Invalid(std::string(list) + ": key \"" + Printable(puts[i]) +
                     "\" is put twice (a key may be written once per transaction list)");
    }
  }
  for (const auto& [key, end] : deletes) {
    for (const std::string& p : puts) {
      const bool inside = end.empty() ? p == key : (p >= key && (IsAllKeysEnd(end) || p < end));
      if (inside) {
        return Invalid(std::string(list) + ": key \"" + Printable(p) +
                       "\" is both put and deleted (a key may be written once per transaction list)");
      }
    }
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

Status TxnCommand(TxnRequest* req, const RequestLimits& limits, Command* cmd) {
  const size_t n = static_cast<size_t>(req->compare_size() + req->success_size() + req->failure_size());
  if (n > limits.max_txn_ops) {
    return Invalid("transaction has " + std::to_string(n) +
                   " compares and operations; the limit is " + std::to_string(limits.max_txn_ops) +
                   " (--max_txn_ops)");
  }
  size_t bytes = 0;
  for (int i = 0; i < req->compare_size(); ++i) {
    const Compare& c = req->compare(i);
    auto at = [&](const Status& s) {
      return Invalid("compare[" + std::to_string(i) + "]: " + s.message());
    };
    if (Status bad = CheckKey(c.key(), limits); !bad.ok()) return at(bad);
    if (!Compare::CompareResult_IsValid(c.result())) return at(Invalid("unknown result " + std::to_string(c.result())));
    if (!Compare::CompareTarget_IsValid(c.target())) return at(Invalid("unknown target " + std::to_string(c.target())));
    if (const char* field = CompareField(c.target_union_case());
        field != nullptr && c.target_union_case() != TargetField(c.target())) {
      return at(Invalid("target " + Compare::CompareTarget_Name(c.target()) + " compares " +
                        CompareField(TargetField(c.target())) + ", but " + field +
                        " is set (set the field the target names)"));
    }
    if (c.target() == Compare::VALUE) {
      if (Status bad = CheckValue(c.value(), limits); !bad.ok()) return at(bad);
    }
    bytes += c.key().size() + c.value().size();
  }
  if (Status bad = CheckTxnOps(req->success(), "success", limits, &bytes); !bad.ok()) return bad;
  if (Status bad = CheckTxnOps(req->failure(), "failure", limits, &bytes); !bad.ok()) return bad;
  if (bytes > limits.max_batch_bytes) {
    return Invalid("transaction holds " + std::to_string(bytes) +
                   " bytes of keys and values; the limit is " +
                   std::to_string(limits.max_batch_bytes) + " (--max_batch_bytes)");
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

bool TxnIsReadOnly(const TxnRequest& req) {
  for (const auto* list : {&req.success(), &req.failure()}) {
    for (const RequestOp& op : *list) {
      if (!op.has_request_range()) return false;
    }
  }
  return true;
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

}  // namespace raftkv
