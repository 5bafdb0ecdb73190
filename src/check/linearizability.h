// A linearizability checker for key-value histories recorded by the chaos
// test: concurrent clients run Put / Get / Delete / CompareAndSwap against the
// replicated store while processes are killed, paused and partitioned, and
// every operation is logged with its invoke and return times and its outcome.
//
// Model. Each key is an independent register whose state is "absent" or a
// value (initially absent); linearizability is compositional (P-compositional
// in Porcupine's terms), so every key is checked on its own:
//   Put(v)            state = v; always legal.
//   Get -> found,r    legal iff found == present and (!found or r == state).
//   Delete -> existed legal iff existed == present; state = absent.
//   Cas(exp?, v)      matches = has_expected ? (present and state == exp)
//                                            : !present;
//                     legal iff swapped == matches and found == present and
//                     (!found or result == state); if matches, state = v.
//
// Outcomes. kFail operations are known not to have happened and are dropped.
// A kUnknown operation (a timeout, a broken connection) may or may not have
// taken effect: its return time is +infinity and its outputs are not
// constrained, so it may be linearized anywhere after its invoke, or not at
// all. kUnknown Gets constrain nothing and are dropped. An ok operation's
// return time is clamped to be no earlier than its invoke time.
//
// Algorithm: Wing & Gong's search with Lowe's memoization, as in Porcupine.
// The call and return events of the ok operations form a time-ordered doubly
// linked list (calls sort before returns at equal times: such operations are
// concurrent). The candidates for the next linearization point are the
// operations whose call precedes the first remaining return, plus the pending
// unknown operations invoked no later than that return. A depth-first search
// linearizes a legal candidate (removing its events from the list, "lifting"
// it), and backtracks through an explicit stack when no candidate is legal.
// Configurations (bitset of linearized operations, register state) already
// explored are cached (hashed) and pruned. The search succeeds as soon as
// every ok operation is linearized: the remaining unknown ones can be placed
// at the end, or never.
//
// Plain WGL is slow on these histories: concurrent writes make it backtrack a
// lot, and unknown operations, candidates from their invoke to the end of the
// history, multiply the configurations. The search therefore only looks for
// linearizations of a canonical form, one of which exists whenever any
// linearization does (each rule is justified in KeyChecker::Search):
//  * A legal op that never changes the register (a Get, a Cas that did not
//    swap, a Delete of an absent key) is linearized at once and is the only
//    move tried in that configuration.
//  * Ok candidates are tried before unknown ones.
//  * An unknown op is only linearized if it changes the register, is not
//    followed by a blind write (a Put, or an unknown Put / Delete), and leads
//    to a state in which some candidate that reads the register is legal.
//  * Interchangeable unknown ops are used in invoke order only: of the
//    unknown Deletes, the first available one; for an unknown Put that only
//    makes the key present (the next op does not read its value), the first
//    available Put whose value no op reads, if there is one. An unknown Put
//    that is the only writer of a value some op reads is only used right
//    before an op that reads that value.
//  * Dominance: a configuration (ok set O, unknown set U, state s) can do
//    everything (O, U', s) can when U is a subset of U' (the extra unknown
//    operations are still available and never have to be used). So besides
//    exact matches, a configuration is pruned when a finished one (searched
//    without success) has the same ok set and state and a subset of its
//    unknown operations.
// These rules are cross-checked against a brute-force search in the tests.
// A correct 2,000-op key with 10 clients and a few dozen unknown operations
// checks in tens of milliseconds. Proving a violation means exhausting the
// search, which can still take long when there are many unknown operations
// before the violation: hence the budget.
//
// Each key's search has a time budget; when it is exhausted the key is
// reported as timed out (inconclusive) rather than hanging the test.
//
// History files hold one JSON object per line with every Operation field;
// strings are escaped so that any byte sequence round-trips (bytes outside
// printable ASCII are written as \u00XX).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace raftkv::check {

enum class OpType { kPut, kGet, kDelete, kCas };

// kFail: known NOT applied. kUnknown: may or may not have been applied.
enum class Outcome { kOk, kFail, kUnknown };

struct Operation {
  int client = 0;  // which client process issued it (a client issues one op at a time)
  std::string key;
  OpType type = OpType::kGet;
  // Inputs.
  std::string value;          // kPut, kCas: the value written
  bool has_expected = false;  // kCas: false = create-only (key must be absent)
  std::string expected;       // kCas
  // Outputs, meaningful only when outcome == kOk.
  bool found = false;    // kGet: key present; kCas: key was present just before the op
  std::string result;    // kGet: the value read; kCas: the value just before the op (if found)
  bool swapped = false;  // kCas
  bool existed = false;  // kDelete: key was present
  Outcome outcome = Outcome::kOk;
  int64_t invoke_ns = 0;  // monotonic timestamps
  int64_t return_ns = 0;  // ignored for kUnknown (treated as +infinity)
};

struct KeyReport {
  std::string key;
  size_t ops = 0;  // operations checked for this key
  bool linearizable = true;
  bool timed_out = false;  // the search budget ran out: `linearizable` is inconclusive
  // Empty when linearizable. Otherwise names the key, shows the end of the
  // longest linearizable prefix found and the operations that could not be
  // linearized after it, with the reason for each.
  std::string explanation;
};

struct CheckResult {
  bool linearizable = true;  // false if any key is not linearizable
  bool timed_out = false;    // some key's search hit its budget (result inconclusive for that key)
  size_t keys = 0, ops = 0;  // ops checked (after dropping kFail ops and unknown Gets)
  size_t violations = 0;     // number of keys found NOT linearizable
  std::vector<KeyReport> reports;  // one per key appearing in the history, sorted by key
};

// Checks every key independently (a register per key: absent or a value;
// initial state absent). A key whose search times out counts as linearizable
// but sets timed_out in its report and in the result.
CheckResult CheckHistory(const std::vector<Operation>& history,
                         std::chrono::milliseconds budget_per_key);

// One line describing `op` for humans, e.g.
//   client 3 cas("k", expected "a" -> "b") = swapped ok [t 100 .. 250]
std::string DescribeOperation(const Operation& op);

// History files: one JSON object per line. WriteHistory writes every field;
// ReadHistory skips blank lines, ignores unknown fields, defaults missing ones
// and fails on malformed input with an error naming the line number.
Status WriteHistory(const std::string& path, const std::vector<Operation>& history);
Status ReadHistory(const std::string& path, std::vector<Operation>* history);

}  // namespace raftkv::check
