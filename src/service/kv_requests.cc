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

grpc::Status PutCommand(PutRequest* req, const RequestLimits& limits, Command* cmd) {
  grpc::Status bad = CheckKey(req->key(), limits);
  if (bad.ok()) bad = CheckValue(req->value(), limits);
  if (!bad.ok()) return bad;
  cmd->Clear();
  cmd->set_op(Command::PUT);
  cmd->set_key(std::move(*req->mutable_key()));
  cmd->set_value(std::move(*req->mutable_value()));
  return grpc::Status::OK;
}

grpc::Status DeleteCommand(DeleteRequest* req, const RequestLimits& limits, Command* cmd) {
  grpc::Status bad = CheckKey(req->key(), limits);
  if (!bad.ok()) return bad;
  cmd->Clear();
  cmd->set_op(Command::DELETE);
  cmd->set_key(std::move(*req->mutable_key()));
  return grpc::Status::OK;
}

grpc::Status CompareAndSwapCommand(CompareAndSwapRequest* req, const RequestLimits& limits,
                                   Command* cmd) {
  grpc::Status bad = CheckKey(req->key(), limits);
  if (bad.ok()) bad = CheckValue(req->value(), limits);
  if (bad.ok()) bad = CheckValue(req->expected(), limits, "expected");
  if (!bad.ok()) return bad;
  cmd->Clear();
  cmd->set_op(Command::CAS);
  cmd->set_key(std::move(*req->mutable_key()));
  cmd->set_value(std::move(*req->mutable_value()));
  cmd->set_has_expected(req->has_expected());
  if (req->has_expected()) cmd->set_expected(std::move(*req->mutable_expected()));
  return grpc::Status::OK;
}

grpc::Status CheckGetRequest(const GetRequest& req, const RequestLimits& limits) {
  return CheckKey(req.key(), limits);
}

}  // namespace raftkv
