// Helpers shared by the state machine's units (kv_state_machine.cc,
// kv_reads.cc): not part of its interface.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/status.h"
#include "kv/kv_state_machine.h"
#include "kv/mvcc_store.h"

namespace raftkv::kv_internal {

// A refusal for an answer over its budget.
inline std::string TooLarge(const char* what, size_t budget) {
  return std::string(what) + " would answer more than " + std::to_string(budget) +
         " bytes (--max_txn_result_bytes: the ranges and previous key-values of a write, "
         "counting at least " + std::to_string(KvStateMachine::kVisitCost) +
         " bytes for each key visited); read with a separate Range, or ask for less (limit, "
         "keys_only, no prev_kv)";
}

// The reads, over the current records of `src` (the state before an entry,
// or the entry being applied with its own writes). Each fails only when
// the store cannot be read.

// A range's answer, bounded by `max_bytes` (0: none; ResourceExhausted
// past it).
Status RangeOf(const KvSource& src, const RangeRequest& req, RangeResponse* resp, size_t max_bytes);
// Whether every compare of `txn` holds.
Status CompareAll(const KvSource& src, const TxnRequest& txn, bool* holds);
// The decisions of a transaction and of the nested transactions that run,
// in the order they run (its own first), all taken on `src` (as etcd: on
// the state before the transaction).
Status TxnPath(const KvSource& src, const TxnRequest& txn, std::vector<bool>* path);
// The bytes a range would visit (see KvStateMachine::kVisitCost), counting
// stopped past `budget`. Sorted by a target other than the key, the range
// is read to know which keys it carries (within the budget).
Status RangeCost(const KvSource& src, const RangeRequest& req, size_t budget, size_t* cost);
// The same for every key-value of [key, end) (previous key-values).
Status RangeCost(const KvSource& src, const std::string& key, const std::string& end, size_t budget,
                 size_t* cost);
// The bytes an answer to `ops` could carry (ranges, previous key-values),
// estimated from above; counting stops past `budget`.
Status EstimateAnswer(const KvSource& src, const std::vector<const RequestOp*>& ops, size_t budget,
                      size_t* total);

// The operations of `txn` that run, nested transactions' included (in
// their place, the transactions themselves left out), in order; `path`
// holds the decisions of TxnPath, from *at on.
void TakenOps(const TxnRequest& txn, const std::vector<bool>& path, size_t* at,
              std::vector<const RequestOp*>* ops);

}  // namespace raftkv::kv_internal
