#include "service/kv_requests.h"

#include <utility>

namespace raftkv {

grpc::Status CheckKey(const std::string& key, const RequestLimits& limits) {
  if (key.empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "key must not be empty");
  if (key.size() > limits.max_key_bytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "key is " + std::to_string(key.size()) + " bytes; the limit is " +
                            std::to_string(limits.max_key_bytes) + " (--max_key_bytes)");
  }
  return grpc::Status::OK;
}

grpc::Status CheckValue(const std::string& value, const RequestLimits& limits, const char* what) {
  if (value.size() > limits.max_value_bytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        std::string(what) + " is " + std::to_string(value.size()) +
                            " bytes; the limit is " + std::to_string(limits.max_value_bytes) +
                            " (--max_value_bytes)");
  }
  return grpc::Status::OK;
}

grpc::Status CheckSession(bool has_session, const Session& s) {
  if (!has_session) return grpc::Status::OK;
  if (s.client_id() == 0 || s.sequence() == 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "session.client_id and session.sequence must be > 0 (open a session "
                        "with OpenSession; sequences start at 1)");
  }
  if (s.first_outstanding() > s.sequence()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "session.first_outstanding (" + std::to_string(s.first_outstanding()) +
                            ") must not exceed session.sequence (" + std::to_string(s.sequence()) +
                            ")");
  }
  return grpc::Status::OK;
}

namespace {

// Copies a request's session (if any) into the command.
void CopySession(bool has_session, const Session& session, Command* cmd) {
  if (!has_session) return;
  cmd->set_client_id(session.client_id());
  cmd->set_sequence(session.sequence());
  cmd->set_first_outstanding(session.first_outstanding());
}

}  // namespace

grpc::Status PutCommand(PutRequest* req, const RequestLimits& limits, Command* cmd) {
  grpc::Status bad = CheckKey(req->key(), limits);
  if (bad.ok()) bad = CheckValue(req->value(), limits);
  if (bad.ok()) bad = CheckSession(req->has_session(), req->session());
  if (!bad.ok()) return bad;
  cmd->Clear();
  CopySession(req->has_session(), req->session(), cmd);
  cmd->set_op(Command::PUT);
  cmd->set_key(std::move(*req->mutable_key()));
  cmd->set_value(std::move(*req->mutable_value()));
  return grpc::Status::OK;
}

grpc::Status DeleteCommand(DeleteRequest* req, const RequestLimits& limits, Command* cmd) {
  grpc::Status bad = CheckKey(req->key(), limits);
  if (bad.ok()) bad = CheckSession(req->has_session(), req->session());
  if (!bad.ok()) return bad;
  cmd->Clear();
  CopySession(req->has_session(), req->session(), cmd);
  cmd->set_op(Command::DELETE);
  cmd->set_key(std::move(*req->mutable_key()));
  return grpc::Status::OK;
}

grpc::Status CompareAndSwapCommand(CompareAndSwapRequest* req, const RequestLimits& limits,
                                   Command* cmd) {
  grpc::Status bad = CheckKey(req->key(), limits);
  if (bad.ok()) bad = CheckValue(req->value(), limits);
  if (bad.ok()) bad = CheckValue(req->expected(), limits, "expected");
  if (bad.ok()) bad = CheckSession(req->has_session(), req->session());
  if (!bad.ok()) return bad;
  cmd->Clear();
  CopySession(req->has_session(), req->session(), cmd);
  cmd->set_op(Command::CAS);
  cmd->set_key(std::move(*req->mutable_key()));
  cmd->set_value(std::move(*req->mutable_value()));
  cmd->set_has_expected(req->has_expected());
  if (req->has_expected()) cmd->set_expected(std::move(*req->mutable_expected()));
  return grpc::Status::OK;
}

grpc::Status BatchCommand(BatchRequest* req, const RequestLimits& limits, Command* cmd) {
  const size_t n = static_cast<size_t>(req->ops_size());
  if (n == 0) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "batch has no operations");
  if (n > limits.max_batch_ops) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "batch has " + std::to_string(n) + " operations; the limit is " +
                            std::to_string(limits.max_batch_ops) + " (--max_batch_ops)");
  }
  size_t bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const BatchOp& op = req->ops(static_cast<int>(i));
    auto at = [i](const grpc::Status& s) {
      return grpc::Status(s.error_code(), "ops[" + std::to_string(i) + "]: " + s.error_message());
    };
    if (op.op() != BatchOp::PUT && op.op() != BatchOp::DELETE) {
      return at(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                             "unknown op " + std::to_string(op.op())));
    }
    if (grpc::Status bad = CheckKey(op.key(), limits); !bad.ok()) return at(bad);
    if (grpc::Status bad = CheckValue(op.value(), limits); !bad.ok()) return at(bad);
    if (op.op() == BatchOp::DELETE && !op.value().empty()) {
      return at(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a DELETE carries no value"));
    }
    bytes += op.key().size() + op.value().size();
  }
  if (bytes > limits.max_batch_bytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "batch holds " + std::to_string(bytes) +
                            " bytes of keys and values; the limit is " +
                            std::to_string(limits.max_batch_bytes) + " (--max_batch_bytes)");
  }
  if (grpc::Status bad = CheckSession(req->has_session(), req->session()); !bad.ok()) return bad;
  cmd->Clear();
  CopySession(req->has_session(), req->session(), cmd);
  cmd->set_op(Command::BATCH);
  cmd->mutable_ops()->Reserve(static_cast<int>(n));
  for (BatchOp& op : *req->mutable_ops()) {
    Command* c = cmd->add_ops();
    c->set_op(op.op() == BatchOp::PUT ? Command::PUT : Command::DELETE);
    c->set_key(std::move(*op.mutable_key()));
    if (op.op() == BatchOp::PUT) c->set_value(std::move(*op.mutable_value()));
  }
  return grpc::Status::OK;
}

grpc::Status CheckGetRequest(const GetRequest& req, const RequestLimits& limits) {
  return CheckKey(req.key(), limits);
}

}  // namespace raftkv
