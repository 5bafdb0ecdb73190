// Fuzz target: the client request checks and their translation into Commands
// (service/kv_requests.h, the functions the KV handlers in grpc_server.cc use).
//
// Input: [max_key_bytes:u8] [max_value_bytes:u8], then records [kind:u8]
// [length:u16le] [serialized request]: kind % 5 picks Put, Get, Delete,
// CompareAndSwap or Batch (batch limits: 1 + max_value_bytes % 16 ops,
// 4 * (max_key_bytes + max_value_bytes) bytes). Bytes that do not parse as
// the request are skipped. A
// request must be refused (INVALID_ARGUMENT) exactly when its key is empty or
// over the limit, a value is over the limit, or its session header is
// malformed; an accepted one must yield the Command the handler proposes
// (session fields included), and applying it (without the session, whose
// semantics fuzz_state_machine covers) to a KvStateMachine must have the
// request's effect (checked through Get).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "service/kv_requests.h"
#include "storage/kv_state_machine.h"

namespace {

using raftkv::RequestLimits;

bool KeyOk(const std::string& key, const RequestLimits& limits) {
  return !key.empty() && key.size() <= limits.max_key_bytes;
}
bool ValueOk(const std::string& value, const RequestLimits& limits) {
  return value.size() <= limits.max_value_bytes;
}
template <class Req>
bool SessionOk(const Req& req) {
  if (!req.has_session()) return true;
  const raftkv::Session& s = req.session();
  return s.client_id() > 0 && s.sequence() > 0 && s.first_outstanding() <= s.sequence();
}
// The command carries the request's session; then drops it for applying.
template <class Req>
void CheckAndDropSession(const Req& orig, raftkv::Command* cmd) {
  const raftkv::Session& s = orig.session();  // all zero when absent
  FUZZ_ASSERT(cmd->client_id() == s.client_id() && cmd->sequence() == s.sequence() &&
                  cmd->first_outstanding() == s.first_outstanding(),
              "command's session differs from the request's");
  cmd->clear_client_id();
  cmd->clear_sequence();
  cmd->clear_first_outstanding();
}

void ExpectVerdict(const grpc::Status& s, bool acceptable, const char* what) {
  FUZZ_ASSERT(s.ok() == acceptable, "%s: got '%s', acceptable=%d", what,
              s.error_message().c_str(), acceptable);
  if (!s.ok()) {
    FUZZ_ASSERT(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT, "%s: code %d", what,
                static_cast<int>(s.error_code()));
    FUZZ_ASSERT(!s.error_message().empty(), "%s: refusal without a message", what);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace raftkv;
  using namespace raftkv::fuzz;
  Reader in(data, size);
  RequestLimits limits;
  limits.max_key_bytes = in.U8();
  limits.max_value_bytes = in.U8();
  limits.max_batch_ops = 1 + limits.max_value_bytes % 16;
  limits.max_batch_bytes = 4 * (limits.max_key_bytes + limits.max_value_bytes);
  KvStateMachine sm;
  uint64_t index = 0;
  auto apply = [&](const Command& cmd) {
    Entry e;
    e.set_index(++index);
    e.set_term(1);
    e.set_type(ENTRY_COMMAND);
    e.set_data(cmd.SerializeAsString());
    ApplyResult r = sm.Apply(e);
    FUZZ_ASSERT(r.ok, "an accepted request's command failed to apply: %s", r.error.c_str());
    return r;
  };
  while (!in.empty()) {
    const uint8_t kind = in.U8();
    const std::string bytes = in.Chunk();
    Command cmd;
    switch (kind % 5) {
      case 0: {
        PutRequest req;
        if (!req.ParseFromString(bytes)) break;
        const PutRequest orig = req;
        grpc::Status s = PutCommand(&req, limits, &cmd);
        ExpectVerdict(s, KeyOk(orig.key(), limits) && ValueOk(orig.value(), limits) && SessionOk(orig) &&
                             orig.lease() >= 0,
                      "Put");
        if (!s.ok()) break;
        CheckAndDropSession(orig, &cmd);
        FUZZ_ASSERT(cmd.op() == Command::PUT && cmd.key() == orig.key() &&
                        cmd.value() == orig.value(), "Put command differs from the request");
        FUZZ_ASSERT(cmd.lease() == orig.lease(), "Put lease differs from the request");
        {
          const ApplyResult r = apply(cmd);
          // No lease is ever granted here: a put on one is refused.
          if (orig.lease() != 0) {
            FUZZ_ASSERT(r.Rejection().code() == Status::Code::kNotFound, "Put on a missing lease accepted");
            break;
          }
        }
        FUZZ_ASSERT(sm.Get(orig.key()) == orig.value(), "Put not visible");
        break;
      }
      case 1: {
        GetRequest req;
        if (!req.ParseFromString(bytes)) break;
        ExpectVerdict(CheckGetRequest(req, limits), KeyOk(req.key(), limits), "Get");
        break;
      }
      case 2: {
        DeleteRequest req;
        if (!req.ParseFromString(bytes)) break;
        const DeleteRequest orig = req;
        grpc::Status s = DeleteCommand(&req, limits, &cmd);
        ExpectVerdict(s, KeyOk(orig.key(), limits) && SessionOk(orig), "Delete");
        if (!s.ok()) break;
        CheckAndDropSession(orig, &cmd);
        FUZZ_ASSERT(cmd.op() == Command::DELETE && cmd.key() == orig.key(),
                    "Delete command differs from the request");
        const bool existed = sm.Get(orig.key()).has_value();
        ApplyResult r = apply(cmd);
        FUZZ_ASSERT(r.existed == existed, "Delete existed=%d, expected %d", r.existed, existed);
        FUZZ_ASSERT(!sm.Get(orig.key()).has_value(), "Deleted key still present");
        break;
      }
      case 3: {
        CompareAndSwapRequest req;
        if (!req.ParseFromString(bytes)) break;
        const CompareAndSwapRequest orig = req;
        grpc::Status s = CompareAndSwapCommand(&req, limits, &cmd);
        ExpectVerdict(s,
                      KeyOk(orig.key(), limits) && ValueOk(orig.value(), limits) &&
                          ValueOk(orig.expected(), limits) && SessionOk(orig),
                      "CompareAndSwap");
        if (!s.ok()) break;
        CheckAndDropSession(orig, &cmd);
        FUZZ_ASSERT(cmd.op() == Command::CAS && cmd.key() == orig.key() &&
                        cmd.value() == orig.value() && cmd.has_expected() == orig.has_expected() &&
                        cmd.expected() == (orig.has_expected() ? orig.expected() : ""),
                    "CompareAndSwap command differs from the request");
        const auto before = sm.Get(orig.key());
        const bool swap = orig.has_expected() ? before && *before == orig.expected() : !before;
        ApplyResult r = apply(cmd);
        FUZZ_ASSERT(r.swapped == swap && r.found == before.has_value(),
                    "CompareAndSwap swapped=%d found=%d, expected %d %d", r.swapped, r.found,
                    swap, before.has_value());
        FUZZ_ASSERT(sm.Get(orig.key()) == (swap ? std::optional<std::string>(orig.value()) : before),
                    "CompareAndSwap left the wrong value");
        break;
      }
      case 4: {
        BatchRequest req;
        if (!req.ParseFromString(bytes)) break;
        const BatchRequest orig = req;
        bool acceptable = orig.ops_size() > 0 &&
                          static_cast<size_t>(orig.ops_size()) <= limits.max_batch_ops &&
                          SessionOk(orig);
        size_t total = 0;
        for (const BatchOp& op : orig.ops()) {
          acceptable = acceptable && (op.op() == BatchOp::PUT || op.op() == BatchOp::DELETE) &&
                       KeyOk(op.key(), limits) && ValueOk(op.value(), limits) &&
                       (op.op() == BatchOp::PUT || op.value().empty());
          total += op.key().size() + op.value().size();
        }
        acceptable = acceptable && total <= limits.max_batch_bytes;
        grpc::Status s = BatchCommand(&req, limits, &cmd);
        ExpectVerdict(s, acceptable, "Batch");
        if (!s.ok()) break;
        CheckAndDropSession(orig, &cmd);
        FUZZ_ASSERT(cmd.op() == Command::BATCH && cmd.ops_size() == orig.ops_size(),
                    "Batch command has %d ops, the request %d", cmd.ops_size(), orig.ops_size());
        // The model: the ops replayed in order over the keys they touch.
        std::map<std::string, std::optional<std::string>> model;
        std::vector<bool> existed;
        for (const BatchOp& op : orig.ops()) {
          if (!model.count(op.key())) model[op.key()] = sm.Get(op.key());
          existed.push_back(model[op.key()].has_value());
          model[op.key()] = op.op() == BatchOp::PUT ? std::optional<std::string>(op.value())
                                                    : std::nullopt;
        }
        ApplyResult r = apply(cmd);
        FUZZ_ASSERT(r.batch_existed == existed, "Batch existed flags differ from the model");
        for (const auto& [key, value] : model) {
          FUZZ_ASSERT(sm.Get(key) == value, "Batch left the wrong value for a key");
        }
        break;
      }
    }
  }
  return 0;
}
