// Fuzz target: the client request checks and their translation into Commands
// (kv/kv_requests.h, the functions the KV handlers in server/api/client_handlers.cc use).
//
// Input: [max_key_bytes:u8] [max_value_bytes:u8], then records [kind:u8]
// [length:u16le] [serialized request]: kind % 8 picks Put, Get, Delete,
// CompareAndSwap, Batch, Range, DeleteRange or Txn (batch limits: 1 +
// max_value_bytes % 16 ops, 4 * (max_key_bytes + max_value_bytes) bytes).
// Bytes that do not parse as the request are skipped. A
// request must be refused (INVALID_ARGUMENT) exactly when its key is empty or
// over the limit, a value is over the limit, its range is empty, or its
// session header is malformed; an accepted one must yield the Command the
// handler proposes (session fields included), and applying it (without the
// session, whose semantics fuzz_state_machine covers) to a KvStateMachine
// must have the request's effect (checked through Get, against a model of
// every key written). Ranges are checked against that model; a transaction
// is refused with a message or applies without failing, and a read-only one
// (TxnIsReadOnly) changes nothing.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "kv/kv_requests.h"
#include "kv/kv_state_machine.h"

namespace {

using raftkv::RequestLimits;
using raftkv::Status;

bool KeyOk(const std::string& key, const RequestLimits& limits) {
  return !key.empty() && key.size() <= limits.max_key_bytes;
}
bool ValueOk(const std::string& value, const RequestLimits& limits) {
  return value.size() <= limits.max_value_bytes;
}
bool AllKeysEnd(const std::string& end) { return end.size() == 1 && end[0] == '\0'; }
// [key, end) is a usable range: a key, an end within the key limit that is
// empty (the key alone), "\0" (every key >= key) or after the key.
bool RangeOk(const std::string& key, const std::string& end, const RequestLimits& limits) {
  return KeyOk(key, limits) && end.size() <= limits.max_key_bytes &&
         (end.empty() || AllKeysEnd(end) || end > key);
}
bool InRange(const std::string& k, const std::string& key, const std::string& end) {
  if (end.empty()) return k == key;
  if (AllKeysEnd(end)) return k >= key;
  return k >= key && k < end;
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

void ExpectVerdict(const Status& s, bool acceptable, const char* what) {
  FUZZ_ASSERT(s.ok() == acceptable, "%s: got '%s', acceptable=%d", what,
              s.message().c_str(), acceptable);
  if (!s.ok()) {
    FUZZ_ASSERT(s.code() == Status::Code::kInvalidArgument, "%s: code %d", what,
                static_cast<int>(s.code()));
    FUZZ_ASSERT(!s.message().empty(), "%s: refusal without a message", what);
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
  std::set<std::string> written;  // every key a command may have written
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
    switch (kind % 8) {
      case 0: {
        PutRequest req;
        if (!req.ParseFromString(bytes)) break;
        const PutRequest orig = req;
        Status s = PutCommand(&req, limits, &cmd);
        ExpectVerdict(s, KeyOk(orig.key(), limits) && ValueOk(orig.value(), limits) && SessionOk(orig) &&
                             orig.lease() >= 0 && !(orig.ignore_value() && !orig.value().empty()) &&
                             !(orig.ignore_lease() && orig.lease() != 0),
                      "Put");
        if (!s.ok()) break;
        CheckAndDropSession(orig, &cmd);
        written.insert(orig.key());
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
        // Keeping the value or lease: kv_tests check it; the key is refused
        // or keeps what it had.
        if (orig.ignore_value() || orig.ignore_lease()) break;
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
        Status s = DeleteCommand(&req, limits, &cmd);
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
        Status s = CompareAndSwapCommand(&req, limits, &cmd);
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
        written.insert(orig.key());
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
        Status s = BatchCommand(&req, limits, &cmd);
        ExpectVerdict(s, acceptable, "Batch");
        if (!s.ok()) break;
        CheckAndDropSession(orig, &cmd);
        FUZZ_ASSERT(cmd.op() == Command::BATCH && cmd.ops_size() == orig.ops_size(),
                    "Batch command has %d ops, the request %d", cmd.ops_size(), orig.ops_size());
        // The model: the ops replayed in order over the keys they touch.
        std::map<std::string, std::optional<std::string>> model;
        std::vector<bool> existed;
        for (const BatchOp& op : orig.ops()) {
          written.insert(op.key());
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
      case 5: {
        RangeRequest req;
        if (!req.ParseFromString(bytes)) break;
        ExpectVerdict(CheckRangeRequest(req, limits),
                      RangeOk(req.key(), req.range_end(), limits) && req.limit() >= 0 &&
                          req.revision() >= 0 && RangeRequest::SortOrder_IsValid(req.sort_order()) &&
                          RangeRequest::SortTarget_IsValid(req.sort_target()),
                      "Range");
        if (!CheckRangeRequest(req, limits).ok()) break;
        RangeResponse resp;
        const Status s = sm.Range(req, &resp);
        if (req.revision() > 0) {
          // Past revisions: answered from the history, or refused by code.
          FUZZ_ASSERT(s.ok() || s.code() == Status::Code::kOutOfRange ||
                          s.code() == Status::Code::kInvalidArgument,
                      "Range at revision %lld: %s", static_cast<long long>(req.revision()),
                      s.message().c_str());
          break;
        }
        FUZZ_ASSERT(s.ok(), "Range refused: %s", s.message().c_str());
        std::vector<std::string> want;
        for (const std::string& k : written) {
          if (InRange(k, req.key(), req.range_end()) && sm.Get(k).has_value()) want.push_back(k);
        }
        FUZZ_ASSERT(resp.count() == static_cast<int64_t>(want.size()),
                    "Range count %lld, the model %zu", static_cast<long long>(resp.count()),
                    want.size());
        if (req.count_only()) {
          FUZZ_ASSERT(resp.kvs_size() == 0, "count_only Range returned keys");
          break;
        }
        // Sorted by a target or filtered by revisions: at most the keys of
        // the range (the order and filters are kv_tests' to check).
        const bool key_order = req.sort_target() == RangeRequest::KEY && req.sort_order() != RangeRequest::DESCEND;
        if (!key_order || req.min_mod_revision() != 0 || req.max_mod_revision() != 0 ||
            req.min_create_revision() != 0 || req.max_create_revision() != 0) {
          FUZZ_ASSERT(static_cast<size_t>(resp.kvs_size()) <= want.size(), "a sorted Range returned extra keys");
          break;
        }
        const size_t shown = req.limit() > 0
                                 ? std::min(want.size(), static_cast<size_t>(req.limit()))
                                 : want.size();
        FUZZ_ASSERT(static_cast<size_t>(resp.kvs_size()) == shown && resp.more() == (shown < want.size()),
                    "Range returned %d keys (more=%d), the model %zu of %zu", resp.kvs_size(),
                    resp.more(), shown, want.size());
        for (size_t i = 0; i < shown; ++i) {
          const KeyValue& kv = resp.kvs(static_cast<int>(i));
          FUZZ_ASSERT(kv.key() == want[i], "Range key %zu differs from the model", i);
          FUZZ_ASSERT(req.keys_only() ? kv.value().empty() : kv.value() == *sm.Get(want[i]),
                      "Range value of key %zu differs", i);
        }
        break;
      }
      case 6: {
        DeleteRangeRequest req;
        if (!req.ParseFromString(bytes)) break;
        const DeleteRangeRequest orig = req;
        Status s = DeleteRangeCommand(&req, limits, &cmd);
        ExpectVerdict(s, RangeOk(orig.key(), orig.range_end(), limits) && SessionOk(orig),
                      "DeleteRange");
        if (!s.ok()) break;
        CheckAndDropSession(orig, &cmd);
        FUZZ_ASSERT(cmd.op() == Command::DELETE_RANGE && cmd.key() == orig.key() &&
                        cmd.range_end() == orig.range_end() && cmd.prev_kv() == orig.prev_kv(),
                    "DeleteRange command differs from the request");
        int64_t present = 0;
        for (const std::string& k : written) {
          if (InRange(k, orig.key(), orig.range_end()) && sm.Get(k).has_value()) ++present;
        }
        const ApplyResult r = apply(cmd);
        FUZZ_ASSERT(r.answer.deleted() == present, "DeleteRange deleted %lld, the model %lld",
                    static_cast<long long>(r.answer.deleted()), static_cast<long long>(present));
        FUZZ_ASSERT(r.answer.prev_kvs_size() == (orig.prev_kv() ? present : 0),
                    "DeleteRange prev_kvs count");
        for (const std::string& k : written) {
          if (InRange(k, orig.key(), orig.range_end())) {
            FUZZ_ASSERT(!sm.Get(k).has_value(), "a key of the deleted range is still present");
          }
        }
        break;
      }
      case 7: {
        TxnRequest req;
        if (!req.ParseFromString(bytes)) break;
        const TxnRequest orig = req;
        Status s = TxnCommand(&req, limits, &cmd);
        ExpectVerdict(s, s.ok(), "Txn");  // a refusal: INVALID_ARGUMENT with a message
        if (!s.ok()) break;
        FUZZ_ASSERT(SessionOk(orig), "Txn with a malformed session accepted");
        CheckAndDropSession(orig, &cmd);
        FUZZ_ASSERT(cmd.op() == Command::TXN, "Txn command has op %d", static_cast<int>(cmd.op()));
        std::map<std::string, std::optional<std::string>> before;
        for (const std::string& k : written) before[k] = sm.Get(k);
        const int64_t revision = sm.Revision();
        auto note_writes = [&](const google::protobuf::RepeatedPtrField<RequestOp>& ops) {
          for (const RequestOp& op : ops) {
            if (op.has_request_put()) written.insert(op.request_put().key());
          }
        };
        note_writes(orig.success());
        note_writes(orig.failure());
        const ApplyResult r = apply(cmd);
        if (TxnIsReadOnly(orig)) {
          FUZZ_ASSERT(sm.Revision() == revision, "a read-only Txn changed the revision");
          for (const auto& [k, v] : before) {
            FUZZ_ASSERT(sm.Get(k) == v, "a read-only Txn changed a key");
          }
        }
        (void)r;
        break;
      }
    }
  }
  return 0;
}
