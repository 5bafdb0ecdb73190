// Helpers shared by the state machine's units (kv_state_machine.cc,
// kv_reads.cc): not part of its interface.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kv/kv_state_machine.h"

namespace raftkv::kv_internal {

// A refusal for an answer over its budget.
inline std::string TooLarge(const char* what, size_t budget) {
  return std::string(what) + " would answer more than " + std::to_string(budget) +
         " bytes (--max_txn_result_bytes: the ranges and previous key-values of a write, "
         "counting at least " + std::to_string(KvStateMachine::kVisitCost) +
         " bytes for each key visited); read with a separate Range, or ask for less (limit, "
         "keys_only, no prev_kv)";
}

// The operations of `txn` that run, nested transactions' included (in
// their place, the transactions themselves left out), in order; `path`
// holds the decisions of KvStateMachine::TxnPathLocked, from *at on.
void TakenOps(const TxnRequest& txn, const std::vector<bool>& path, size_t* at,
              std::vector<const RequestOp*>* ops);

}  // namespace raftkv::kv_internal
