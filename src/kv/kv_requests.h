// Validation of the client requests and their translation into state-machine
// Commands: pure functions, used by the KV handlers (server/api/client_handlers.cc) and by
// the fuzz target src/fuzz/fuzz_kv_requests.cc.
#pragma once

#include <cstddef>
#include <string>


#include "common/status.h"
#include "proto/internal.h"

namespace raftkv {

struct RequestLimits {
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = 1 << 20;
  // KV.Batch: most operations, and most key + value bytes, in one call (the
  // bytes also bound a transaction's keys and values).
  size_t max_batch_ops = 10000;
  size_t max_batch_bytes = 4 << 20;
  // KV.Txn: most compares + operations (both lists) in one call.
  size_t max_txn_ops = 128;
  // Stamped in the commands (raft.proto, Command): the most bytes a write's
  // answer may carry, and what sessions may keep of their answers.
  size_t max_txn_result_bytes = 4 << 20;
  size_t session_saved_bytes = 8 << 20;
  size_t saved_bytes_total = 128 << 20;
};

// INVALID_ARGUMENT for keys the service does not accept (empty, too long).
Status CheckKey(const std::string& key, const RequestLimits& limits);
// INVALID_ARGUMENT for a value over the limit; `what` names the field
// ("value", "expected").
Status CheckValue(const std::string& value, const RequestLimits& limits,
                        const char* what = "value");

// How deep transactions nest (RequestOp.request_txn): a transaction's
// operations may hold transactions this many levels down, no more. Small,
// so that no recursion over a transaction (checks, compares, apply) runs
// deep, and far below protobuf's parsing depth (a Command carrying the
// deepest transaction still parses).
inline constexpr int kMaxTxnDepth = 8;

// INVALID_ARGUMENT for a put keeping the key's value (ignore_value) that
// carries a value, or keeping its lease (ignore_lease) that names one.
Status CheckIgnoreFlags(const PutRequest& req);

// INVALID_ARGUMENT for a malformed session header (ids and sequences start at
// 1; first_outstanding <= sequence). OK when the request has none.
Status CheckSession(bool has_session, const Session& session);

// Each checks a request (key, values, session) and, when it is acceptable, fills *cmd with the
// Command to propose, moving the request's bytes into it, with the bounds of
// `limits` the command is to be applied under.
Status PutCommand(PutRequest* req, const RequestLimits& limits, Command* cmd);
Status DeleteCommand(DeleteRequest* req, const RequestLimits& limits, Command* cmd);
Status CompareAndSwapCommand(CompareAndSwapRequest* req, const RequestLimits& limits,
                                   Command* cmd);
// A BATCH command (Command.ops) from a Batch request: at least one op and at
// most max_batch_ops, max_batch_bytes of keys + values, every key and value
// within its limit, no value on a DELETE. The error names the offending op.
Status BatchCommand(BatchRequest* req, const RequestLimits& limits, Command* cmd);
Status CheckGetRequest(const GetRequest& req, const RequestLimits& limits);

// A key range (RangeRequest's rules): a valid key; range_end empty, "\0", or
// after the key. `what` names the request in the message.
Status CheckKeyRange(const std::string& key, const std::string& range_end,
                           const RequestLimits& limits);
Status CheckRangeRequest(const RangeRequest& req, const RequestLimits& limits);
Status DeleteRangeCommand(DeleteRangeRequest* req, const RequestLimits& limits, Command* cmd);
// A TXN command: at most max_txn_ops compares + operations (nested
// transactions' included) and max_batch_bytes of keys and values;
// transactions nested at most kMaxTxnDepth deep; each compare (its value
// field the one its target names, its key range valid), range, put and
// delete valid; ranges at the current revision only (revision 0: every
// replica must read alike); no key written twice by the operations of a
// list, nested transactions included, where a nested transaction writes
// what either of its lists writes (as etcd).
Status TxnCommand(TxnRequest* req, const RequestLimits& limits, Command* cmd);
// True when neither list of the transaction writes, nested transactions
// included: it can be served as a read (ReadIndex) rather than through the
// log.
bool TxnIsReadOnly(const TxnRequest& req);
// A LEASE_GRANT command of `ttl` seconds (already checked against the TTL
// bounds) for the request's id, through its session when it has one.
Status LeaseGrantCommand(const LeaseGrantRequest& req, int64_t ttl, const RequestLimits& limits,
                               Command* cmd);

// The backend quota (etcd's --quota-backend-bytes): what applying `cmd`
// adds to the state, estimated as etcd does (a put's key and value plus
// kQuotaKvOverhead for its record and history, kQuotaLeaseOverhead for a
// lease; a transaction's costlier list, nested ones included). 0 for the
// commands that add nothing (deletes, compaction, sessions, alarms, reads):
// those go on whatever the quota.
inline constexpr size_t kQuotaKvOverhead = 256;
inline constexpr size_t kQuotaLeaseOverhead = 64;
size_t QuotaCost(const Command& cmd);

}  // namespace raftkv
