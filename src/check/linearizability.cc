#include "check/linearizability.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace raftkv::check {
namespace {

constexpr int64_t kInfinity = std::numeric_limits<int64_t>::max();
// The register state / value id meaning "no value".
constexpr int kAbsent = -1;
constexpr uint64_t kClockCheckInterval = 4096;  // search steps between looks at the clock
constexpr size_t kPrefixOpsShown = 10;
constexpr size_t kCandidatesShown = 10;
constexpr size_t kValueBytesShown = 64;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// ---- formatting ----

const char* TypeName(OpType type) {
  switch (type) {
    case OpType::kPut:
      return "put";
    case OpType::kGet:
      return "get";
    case OpType::kDelete:
      return "delete";
    case OpType::kCas:
      return "cas";
  }
  return "?";
}

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kFail:
      return "fail";
    case Outcome::kUnknown:
      return "unknown";
  }
  return "?";
}

// `s` as a JSON string literal. Every byte outside printable ASCII becomes
// \u00XX, so the output is ASCII and any byte string round-trips.
std::string JsonQuote(const std::string& s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\u00";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  return out;
}

// A value for explanations: quoted, and cut short when long.
std::string ShowValue(const std::string& s) {
  if (s.size() <= kValueBytesShown) return JsonQuote(s);
  return JsonQuote(s.substr(0, kValueBytesShown)) + "...(" + std::to_string(s.size()) + " bytes)";
}

// ---- the register model over interned values ----

// One operation of the key being checked, with its strings interned to small
// integers (ids into KeyChecker::values_).
struct KeyOp {
  const Operation* op = nullptr;
  bool unknown = false;
  int value = kAbsent;     // kPut, kCas
  int expected = kAbsent;  // kCas with has_expected
  int result = kAbsent;    // kGet, kCas when found
  int64_t invoke = 0;
  int64_t ret = 0;  // kInfinity when unknown
  int slot = 0;     // bit index in the ok or the unknown bitset
  // An unknown Put, or create-only Cas, whose value no op ever reads (as a
  // Get or Cas result, or a Cas expected value): only the presence of a value
  // can be observed.
  bool presence_only = false;
  // An unknown Put whose value some ok op reads, and which no other op
  // writes: after it, that value must be read before it is overwritten.
  bool sole_supplier = false;
};

struct StepResult {
  bool legal;
  int next;
};

StepResult Step(const KeyOp& k, int state) {
  const Operation& op = *k.op;
  const bool present = state != kAbsent;
  switch (op.type) {
    case OpType::kPut:
      return {true, k.value};
    case OpType::kGet:
      return {k.unknown || (op.found == present && (!op.found || k.result == state)), state};
    case OpType::kDelete:
      return {k.unknown || op.existed == present, kAbsent};
    case OpType::kCas: {
      const bool matches = op.has_expected ? (present && state == k.expected) : !present;
      const bool legal = k.unknown || (op.swapped == matches && op.found == present &&
                                       (!op.found || k.result == state));
      return {legal, matches ? k.value : state};
    }
  }
  return {false, state};
}

// ---- bitsets and the configuration cache ----

void SetBit(std::vector<uint64_t>* bits, int i) { (*bits)[i >> 6] |= uint64_t{1} << (i & 63); }
void ClearBit(std::vector<uint64_t>* bits, int i) { (*bits)[i >> 6] &= ~(uint64_t{1} << (i & 63)); }

// The explored configurations (ok set, state, unknown set, whether the last
// op was an unknown one). Lookup is by a hash of (ok set, state); the entries
// sharing it are chained.
//
// A configuration is pruned if the same one was seen before (Lowe's memo), or
// if a *finished* configuration (its whole subtree searched, without success)
// with the same ok set and state had a subset of its unknown operations and no
// more restrictions (see KeyChecker::Search): that one could do everything
// this one can, and failed. Only finished entries are used for dominance,
// which keeps the pruning obviously sound (an entry still on the search path
// has not failed yet).
class ConfigCache {
 public:
  ConfigCache(size_t ok_words, size_t unknown_words)
      : ok_words_(ok_words), unknown_words_(unknown_words) {}

  // Returns the new entry's index, or -1 when the configuration is pruned.
  int64_t Insert(uint64_t ok_hash, const std::vector<uint64_t>& ok, int state, bool after_unknown,
                 const std::vector<uint64_t>& unknown) {
    const uint64_t hash = ok_hash ^ SplitMix64(static_cast<uint64_t>(state) + 0x51ed27ull);
    auto [it, inserted] = heads_.try_emplace(hash, kNone);
    for (uint32_t e = it->second; e != kNone; e = entries_[e].next) {
      const Entry& entry = entries_[e];
      if (entry.state != state) continue;
      const uint64_t* stored = &arena_[entry.offset];
      if (!std::equal(ok.begin(), ok.end(), stored)) continue;
      const uint64_t* stored_unknown = stored + ok_words_;
      bool subset = true, equal = true;
      for (size_t w = 0; w < unknown_words_; ++w) {
        subset = subset && (stored_unknown[w] & ~unknown[w]) == 0;
        equal = equal && stored_unknown[w] == unknown[w];
      }
      if (equal && entry.after_unknown == after_unknown) return -1;
      if (entry.finished && subset && entry.after_unknown <= after_unknown) return -1;
    }
    Entry entry;
    entry.state = state;
    entry.after_unknown = after_unknown;
    entry.next = it->second;
    entry.offset = arena_.size();
    arena_.insert(arena_.end(), ok.begin(), ok.end());
    arena_.insert(arena_.end(), unknown.begin(), unknown.end());
    it->second = static_cast<uint32_t>(entries_.size());
    entries_.push_back(entry);
    return static_cast<int64_t>(entries_.size()) - 1;
  }

  void MarkFinished(int64_t index) {
    if (index >= 0) entries_[index].finished = true;
  }

 private:
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  struct Entry {
    int state = kAbsent;
    bool after_unknown = false;
    bool finished = false;
    uint32_t next = kNone;
    size_t offset = 0;  // ok words then unknown words in arena_
  };
  const size_t ok_words_, unknown_words_;
  std::unordered_map<uint64_t, uint32_t> heads_;
  std::vector<Entry> entries_;
  std::vector<uint64_t> arena_;
};

// ---- the search for one key ----

class KeyChecker {
 public:
  KeyChecker(const std::string& key, const std::vector<Operation>& history,
             const std::vector<size_t>& indexes)
      : key_(key) {
    for (size_t index : indexes) {
      const Operation& op = history[index];
      if (op.outcome == Outcome::kFail) continue;
      if (op.type == OpType::kGet && op.outcome == Outcome::kUnknown) continue;
      KeyOp k;
      k.op = &op;
      k.unknown = op.outcome == Outcome::kUnknown;
      if (op.type == OpType::kPut || op.type == OpType::kCas) k.value = Intern(op.value);
      if (op.type == OpType::kCas && op.has_expected) k.expected = Intern(op.expected);
      if (!k.unknown && (op.type == OpType::kGet || op.type == OpType::kCas) && op.found) {
        k.result = Intern(op.result);
      }
      k.invoke = op.invoke_ns;
      k.ret = k.unknown ? kInfinity : std::max(op.return_ns, op.invoke_ns);
      k.slot = k.unknown ? num_unknown_++ : num_ok_++;
      ops_.push_back(k);
    }
    std::vector<bool> read(values_.size(), false);    // as a result or an expected value
    std::vector<bool> result(values_.size(), false);  // as an ok op's result
    std::vector<int> writers(values_.size(), 0);
    for (const KeyOp& k : ops_) {
      if (k.result != kAbsent) read[k.result] = result[k.result] = true;
      if (k.expected != kAbsent) read[k.expected] = true;
      if (k.value != kAbsent) ++writers[k.value];
    }
    for (KeyOp& k : ops_) {
      if (!k.unknown) continue;
      const bool put = k.op->type == OpType::kPut;
      const bool create = k.op->type == OpType::kCas && !k.op->has_expected;
      k.presence_only = (put || create) && !read[k.value];
      k.sole_supplier = put && result[k.value] && writers[k.value] == 1;
    }
    BuildLists();
  }

  KeyReport Run(std::chrono::milliseconds budget) {
    KeyReport report;
    report.key = key_;
    report.ops = ops_.size();
    const Result result = Search(std::chrono::steady_clock::now() + budget);
    if (result == Result::kViolation) {
      report.linearizable = false;
      report.explanation = Explain("not linearizable");
    } else if (result == Result::kTimedOut) {
      report.timed_out = true;
      report.explanation =
          Explain("search budget of " + std::to_string(budget.count()) + " ms exhausted after " +
                  std::to_string(steps_) + " steps; inconclusive");
    }
    return report;
  }

 private:
  enum class Result { kLinearizable, kViolation, kTimedOut };

  // A node of the ok operations' event list; index 0 is the head sentinel.
  struct Node {
    int op = -1;
    bool call = false;
    int64_t time = 0;
    int prev = -1, next = -1;
    int match = -1;  // call <-> return
  };
  // A node of the pending unknown operations, by invoke time; 0 is the head.
  struct UnknownNode {
    int op = -1;
    int prev = -1, next = -1;
  };
  struct Frame {
    int op;
    int prev_state;
    int64_t min_return;  // for unknown ops: the frontier they were chosen at
    int64_t cache_entry;
    bool forced;  // a read-only op taken as the only move (see Search)
  };
  enum class Phase {
    kEnter,      // a configuration just reached: look for a legal read-only op
    kOk,         // trying the ok candidates, at `cursor`
    kUnknown,    // trying the unknown candidates, at `unknown_cursor`
    kBacktrack,  // no candidate left: undo the last op
  };
  // Where the search stands: the configuration (ops linearized, register
  // state, after_unknown), the ops linearized in order, and the candidate
  // being tried.
  struct Walk {
    Walk(int num_ok, int num_unknown)
        : ok_bits((num_ok + 63) / 64, 0),
          unknown_bits((num_unknown + 63) / 64, 0),
          cache(ok_bits.size(), unknown_bits.size()) {}

    std::vector<uint64_t> ok_bits;
    std::vector<uint64_t> unknown_bits;
    uint64_t ok_hash = 0;
    ConfigCache cache;
    std::vector<Frame> stack;
    int state = kAbsent;
    bool after_unknown = false;  // the last op linearized had an unknown outcome
    size_t done_ok = 0;
    size_t low_water = 0;  // lowest stack depth since best_prefix_ was recorded
    Phase phase = Phase::kEnter;
    int cursor = -1;
    int unknown_cursor = -1;
    int64_t min_return = 0;  // time of the first remaining return
  };

  int Intern(const std::string& s) {
    auto [it, inserted] = value_ids_.try_emplace(s, static_cast<int>(values_.size()));
    if (inserted) values_.push_back(s);
    return it->second;
  }

  void BuildLists() {
    struct Event {
      int64_t time;
      int kind;  // 0 = call, 1 = return: calls first at equal times (concurrent)
      int op;
    };
    std::vector<Event> events;
    std::vector<int> unknown_ops;
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
      if (ops_[i].unknown) {
        unknown_ops.push_back(i);
      } else {
        events.push_back({ops_[i].invoke, 0, i});
        events.push_back({ops_[i].ret, 1, i});
      }
    }
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
      return std::tie(a.time, a.kind, a.op) < std::tie(b.time, b.kind, b.op);
    });
    nodes_.resize(events.size() + 1);
    call_node_.assign(ops_.size(), -1);
    std::vector<int> return_node(ops_.size(), -1);
    for (size_t i = 0; i < events.size(); ++i) {
      Node& node = nodes_[i + 1];
      node.op = events[i].op;
      node.call = events[i].kind == 0;
      node.time = events[i].time;
      (node.call ? call_node_ : return_node)[node.op] = static_cast<int>(i + 1);
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      nodes_[i].prev = static_cast<int>(i) - 1;
      nodes_[i].next = i + 1 < nodes_.size() ? static_cast<int>(i + 1) : -1;
    }
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (call_node_[i] < 0) continue;
      nodes_[call_node_[i]].match = return_node[i];
      nodes_[return_node[i]].match = call_node_[i];
    }

    std::stable_sort(unknown_ops.begin(), unknown_ops.end(),
                     [this](int a, int b) { return ops_[a].invoke < ops_[b].invoke; });
    unknown_nodes_.resize(unknown_ops.size() + 1);
    unknown_node_.assign(ops_.size(), -1);
    for (size_t i = 0; i < unknown_nodes_.size(); ++i) {
      UnknownNode& node = unknown_nodes_[i];
      if (i > 0) {
        node.op = unknown_ops[i - 1];
        unknown_node_[node.op] = static_cast<int>(i);
      }
      node.prev = static_cast<int>(i) - 1;
      node.next = i + 1 < unknown_nodes_.size() ? static_cast<int>(i + 1) : -1;
    }

    zobrist_.resize(ops_.size());
    for (size_t i = 0; i < ops_.size(); ++i) zobrist_[i] = SplitMix64(i * 2 + 1);
  }

  // Removes an ok operation's call node and its return node from the list.
  void Lift(int call) {
    Node& c = nodes_[call];
    nodes_[c.prev].next = c.next;
    nodes_[c.next].prev = c.prev;  // a call is always followed by its return
    Node& r = nodes_[c.match];
    nodes_[r.prev].next = r.next;
    if (r.next >= 0) nodes_[r.next].prev = r.prev;
  }
  void Unlift(int call) {
    Node& c = nodes_[call];
    Node& r = nodes_[c.match];
    nodes_[r.prev].next = c.match;
    if (r.next >= 0) nodes_[r.next].prev = c.match;
    nodes_[c.prev].next = call;
    nodes_[c.next].prev = call;
  }
  void LiftUnknown(int n) {
    UnknownNode& node = unknown_nodes_[n];
    unknown_nodes_[node.prev].next = node.next;
    if (node.next >= 0) unknown_nodes_[node.next].prev = node.prev;
  }
  void UnliftUnknown(int n) {
    UnknownNode& node = unknown_nodes_[n];
    unknown_nodes_[node.prev].next = n;
    if (node.next >= 0) unknown_nodes_[node.next].prev = n;
  }

  // An ok op that leaves the register as it is whenever it is legal.
  static bool ReadOnly(const Operation& op) {
    return op.type == OpType::kGet || (op.type == OpType::kCas && !op.swapped) ||
           (op.type == OpType::kDelete && !op.existed);
  }

  // The depth-first search. Besides the memo (see ConfigCache) it searches
  // only for linearizations of a canonical form. Each rule below keeps the
  // search complete: from any configuration, a valid linearization can be
  // rewritten into one that obeys it.
  //  * A read-only op (ReadOnly) that is legal in the current configuration
  //    is linearized at once, and nothing else is tried there: moving it to
  //    the front of any linearization from here keeps that one valid (it
  //    changes no state, and no pending op has to precede it, since it was
  //    invoked before every pending return).
  //  * An unknown op that changes nothing, or that is directly followed by a
  //    blind write (a Put, or an unknown Put / Delete), can be dropped: an
  //    unknown op may always be left out. So after an unknown op (the
  //    after_unknown flag, part of the configuration) the next op reads the
  //    register, and an unknown op is only tried if it leads to a state in
  //    which some candidate that reads the register is legal (Observable).
  //  * Unknown Deletes all have the same effect: only the first available
  //    one is tried (using a later one instead can be swapped with it).
  //  * A "presence use": an unknown Put or Cas followed by an op that does not
  //    read its value, only the key's presence (a Delete that found the key).
  //    If the key was present before, the unknown op can be dropped; so it
  //    must have been absent. Then the unknown op can be swapped with the
  //    first available presence_only one (whose value no op reads, so all its
  //    uses are presence uses, from an absent key, where a create-only Cas
  //    matches too); so when one is available, only it is tried for a
  //    presence use. An unknown Put that is the only writer of a value some
  //    ok op reads (sole_supplier) is never used that way: its value would be
  //    gone before that op.
  Result Search(std::chrono::steady_clock::time_point deadline) {
    Walk w(num_ok_, num_unknown_);
    w.cache.Insert(w.ok_hash, w.ok_bits, kAbsent, false, w.unknown_bits);
    uint64_t next_clock_check = 0;
    while (true) {
      if (w.done_ok == static_cast<size_t>(num_ok_)) return Result::kLinearizable;
      if (steps_ >= next_clock_check) {
        if (std::chrono::steady_clock::now() > deadline) return Result::kTimedOut;
        next_clock_check = steps_ + kClockCheckInterval;
      }
      switch (w.phase) {
        case Phase::kEnter:
          Enter(&w);
          break;
        case Phase::kOk:
          TryOk(&w);
          break;
        case Phase::kUnknown:
          TryUnknown(&w);
          break;
        case Phase::kBacktrack:
          if (!Backtrack(&w)) return Result::kViolation;
          break;
      }
    }
  }

  // kEnter: a configuration was just reached. Linearizes the first legal
  // read-only candidate as the only move, else tries the ok candidates.
  void Enter(Walk* w) {
    w->phase = Phase::kOk;
    w->cursor = nodes_[0].next;
    for (int n = w->cursor; nodes_[n].call; n = nodes_[n].next) {
      ++steps_;
      const KeyOp& k = ops_[nodes_[n].op];
      if (ReadOnly(*k.op) && Step(k, w->state).legal) {
        w->phase = PushOk(w, n, w->state, /*forced=*/true) ? Phase::kEnter : Phase::kBacktrack;
        break;
      }
    }
  }

  // kOk: tries the ok candidate at `cursor`, or moves on to the unknown ops
  // once the first remaining return is reached.
  void TryOk(Walk* w) {
    ++steps_;
    const Node& node = nodes_[w->cursor];
    if (!node.call) {
      // The first remaining return: the ok candidates are exhausted;
      // now the unknown ops invoked no later than it.
      w->min_return = node.time;
      w->unknown_cursor = unknown_nodes_[0].next;
      ComputeObservable(w->min_return);
      w->phase = Phase::kUnknown;
      return;
    }
    // Read-only candidates are all illegal here (see kEnter).
    const KeyOp& k = ops_[node.op];
    if (!ReadOnly(*k.op) && !(w->after_unknown && k.op->type == OpType::kPut)) {
      const StepResult step = Step(k, w->state);
      if (step.legal && PushOk(w, w->cursor, step.next, /*forced=*/false)) {
        w->phase = Phase::kEnter;
        return;
      }
    }
    w->cursor = node.next;
  }

  // kUnknown: tries the unknown candidate at `unknown_cursor` (see the rules
  // above Search), or backtracks when none invoked by min_return is left.
  void TryUnknown(Walk* w) {
    ++steps_;
    if (w->unknown_cursor < 0 ||
        ops_[unknown_nodes_[w->unknown_cursor].op].invoke > w->min_return) {
      w->phase = Phase::kBacktrack;
      return;
    }
    const int op = unknown_nodes_[w->unknown_cursor].op;
    const KeyOp& k = ops_[op];
    const StepResult step = Step(k, w->state);  // always legal: outputs unconstrained
    const bool blind = k.op->type != OpType::kCas;
    const bool value_seen = ValueObservable(step.next);
    const bool redundant =
        k.op->type == OpType::kDelete
            ? w->unknown_cursor != first_unknown_delete_
            : !value_seen &&
                  (w->state != kAbsent || k.sole_supplier ||
                   (first_presence_only_ >= 0 && w->unknown_cursor != first_presence_only_));
    if (!redundant && step.next != w->state && !(w->after_unknown && blind) &&
        Observable(step.next)) {
      SetBit(&w->unknown_bits, k.slot);
      const int64_t entry =
          w->cache.Insert(w->ok_hash, w->ok_bits, step.next, true, w->unknown_bits);
      if (entry >= 0) {
        w->stack.push_back({op, w->state, w->min_return, entry, false});
        w->state = step.next;
        w->after_unknown = true;
        LiftUnknown(w->unknown_cursor);
        w->phase = Phase::kEnter;
        return;
      }
      ClearBit(&w->unknown_bits, k.slot);
    }
    w->unknown_cursor = unknown_nodes_[w->unknown_cursor].next;
  }

  // kBacktrack: undoes the last op linearized and resumes after it among its
  // candidates. Returns false when there is none to undo.
  bool Backtrack(Walk* w) {
    if (w->stack.empty()) return false;
    const Frame frame = w->stack.back();
    w->stack.pop_back();
    w->low_water = std::min(w->low_water, w->stack.size());
    w->cache.MarkFinished(frame.cache_entry);
    w->state = frame.prev_state;
    w->after_unknown = !w->stack.empty() && ops_[w->stack.back().op].unknown;
    const KeyOp& k = ops_[frame.op];
    if (k.unknown) {
      const int n = unknown_node_[frame.op];
      UnliftUnknown(n);
      ClearBit(&w->unknown_bits, k.slot);
      w->unknown_cursor = unknown_nodes_[n].next;
      w->min_return = frame.min_return;
      ComputeObservable(w->min_return);
      w->phase = Phase::kUnknown;
    } else {
      const int call = call_node_[frame.op];
      Unlift(call);
      ClearBit(&w->ok_bits, k.slot);
      w->ok_hash ^= zobrist_[frame.op];
      --w->done_ok;
      w->cursor = nodes_[call].next;
      // A forced op was the only move tried: its configuration failed too.
      w->phase = frame.forced ? Phase::kBacktrack : Phase::kOk;
    }
    return true;
  }

  // Linearizes the ok op whose call node is `call`, unless the resulting
  // configuration is pruned by the cache; records a new longest prefix.
  bool PushOk(Walk* w, int call, int next_state, bool forced) {
    const int op = nodes_[call].op;
    const KeyOp& k = ops_[op];
    SetBit(&w->ok_bits, k.slot);
    w->ok_hash ^= zobrist_[op];
    const int64_t entry =
        w->cache.Insert(w->ok_hash, w->ok_bits, next_state, false, w->unknown_bits);
    if (entry < 0) {
      ClearBit(&w->ok_bits, k.slot);
      w->ok_hash ^= zobrist_[op];
      return false;
    }
    w->stack.push_back({op, w->state, 0, entry, forced});
    w->state = next_state;
    w->after_unknown = false;
    Lift(call);
    ++w->done_ok;
    if (w->done_ok > best_done_ok_) {
      best_done_ok_ = w->done_ok;
      best_prefix_.resize(w->low_water);
      for (size_t i = w->low_water; i < w->stack.size(); ++i) {
        best_prefix_.push_back(w->stack[i].op);
      }
      w->low_water = w->stack.size();
      best_state_ = w->state;
    }
    return true;
  }

  // Fills observable_ for the current candidates (min_return: the first
  // remaining return): the states in which some candidate that reads the
  // register is legal. An unknown op is only worth linearizing if it leads to
  // such a state, since only a reading op may follow it.
  void ComputeObservable(int64_t min_return) {
    observable_.clear();
    observable_present_ = false;
    for (int n = nodes_[0].next; n >= 0 && nodes_[n].call; n = nodes_[n].next) {
      const KeyOp& k = ops_[nodes_[n].op];
      switch (k.op->type) {
        case OpType::kPut:
          break;
        case OpType::kGet:
        case OpType::kCas:
          observable_.push_back(k.op->found ? k.result : kAbsent);
          break;
        case OpType::kDelete:
          if (k.op->existed) {
            observable_present_ = true;
          } else {
            observable_.push_back(kAbsent);
          }
          break;
      }
    }
    first_unknown_delete_ = -1;
    first_presence_only_ = -1;
    unknown_cas_.clear();
    for (int n = unknown_nodes_[0].next; n >= 0 && ops_[unknown_nodes_[n].op].invoke <= min_return;
         n = unknown_nodes_[n].next) {
      const KeyOp& k = ops_[unknown_nodes_[n].op];
      if (k.op->type == OpType::kCas) unknown_cas_.push_back(&k);
      if (k.op->type == OpType::kDelete && first_unknown_delete_ < 0) first_unknown_delete_ = n;
      if (k.presence_only && first_presence_only_ < 0) first_presence_only_ = n;
    }
    // An unknown Cas reads the register too, but is itself followed by a
    // reading op: its expected state is observable if the state it writes is.
    // (A fixpoint, for chains of them.)
    for (bool grew = true; grew;) {
      grew = false;
      for (const KeyOp*& k : unknown_cas_) {
        if (k == nullptr || !Observable(k->value)) continue;
        observable_.push_back(k->op->has_expected ? k->expected : kAbsent);
        k = nullptr;
        grew = true;
      }
    }
  }

  bool ValueObservable(int state) const {
    return std::find(observable_.begin(), observable_.end(), state) != observable_.end();
  }

  bool Observable(int state) const {
    return (observable_present_ && state != kAbsent) ||
           std::find(observable_.begin(), observable_.end(), state) != observable_.end();
  }

  std::string ShowState(int state) const {
    return state == kAbsent ? std::string("absent") : ShowValue(values_[state]);
  }

  // Why `k` cannot be linearized in `state` (empty if it can).
  std::string WhyIllegal(const KeyOp& k, int state) const {
    if (Step(k, state).legal) return "";
    const Operation& op = *k.op;
    const bool present = state != kAbsent;
    const std::string now = "the register holds " + ShowState(state);
    switch (op.type) {
      case OpType::kPut:
        return "";
      case OpType::kGet:
        return std::string("read ") + (op.found ? ShowValue(op.result) : "absent") + ", but " + now;
      case OpType::kDelete:
        return std::string("reported existed=") + (op.existed ? "true" : "false") + ", but " + now;
      case OpType::kCas: {
        const bool matches = op.has_expected ? (present && state == k.expected) : !present;
        if (op.swapped != matches) {
          return std::string("reported swapped=") + (op.swapped ? "true" : "false") + ", but " +
                 now;
        }
        return std::string("reported prior value ") + (op.found ? ShowValue(op.result) : "absent") +
               ", but " + now;
      }
    }
    return "";
  }

  // The explanation for a violation or a timeout, from the longest
  // linearizable prefix the search reached.
  std::string Explain(const std::string& verdict) const {
    std::ostringstream out;
    out << "key " << ShowValue(key_) << ": " << verdict << " (" << ops_.size()
        << " ops: " << num_ok_ << " ok, " << num_unknown_ << " unknown)\n";
    std::vector<bool> linearized(ops_.size(), false);
    size_t unknown_in_prefix = 0;
    for (int op : best_prefix_) {
      linearized[op] = true;
      if (ops_[op].unknown) ++unknown_in_prefix;
    }
    out << "longest linearizable prefix: " << best_done_ok_ << " of " << num_ok_ << " ok ops";
    if (unknown_in_prefix > 0) out << " (+" << unknown_in_prefix << " unknown)";
    out << ", leaving the register " << ShowState(best_state_) << "\n";
    const size_t first_shown =
        best_prefix_.size() > kPrefixOpsShown ? best_prefix_.size() - kPrefixOpsShown : 0;
    if (first_shown > 0) out << "  ... " << first_shown << " earlier ops\n";
    for (size_t i = first_shown; i < best_prefix_.size(); ++i) {
      out << "  " << DescribeOperation(*ops_[best_prefix_[i]].op) << "\n";
    }

    // The candidates after that prefix: pending ok ops invoked no later than
    // the earliest pending return.
    int64_t min_return = kInfinity;
    int blocking = -1;
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (!linearized[i] && !ops_[i].unknown && ops_[i].ret < min_return) {
        min_return = ops_[i].ret;
        blocking = static_cast<int>(i);
      }
    }
    if (blocking < 0) return out.str();
    std::vector<int> candidates;
    size_t unknown_candidates = 0;
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (linearized[i] || ops_[i].invoke > min_return) continue;
      if (ops_[i].unknown) {
        ++unknown_candidates;
      } else {
        candidates.push_back(static_cast<int>(i));
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [this](int a, int b) { return ops_[a].invoke < ops_[b].invoke; });
    out << "no way to continue from there; the pending ops that could come next:\n";
    for (size_t i = 0; i < candidates.size() && i < kCandidatesShown; ++i) {
      const KeyOp& k = ops_[candidates[i]];
      const std::string why = WhyIllegal(k, best_state_);
      out << "  " << DescribeOperation(*k.op) << "\n      -> "
          << (why.empty() ? "legal here, but no linearization continues after it" : why) << "\n";
    }
    if (candidates.size() > kCandidatesShown) {
      out << "  ... " << candidates.size() - kCandidatesShown << " more\n";
    }
    if (unknown_candidates > 0) {
      out << "  (and " << unknown_candidates << " unknown-outcome ops that may take effect here)\n";
    }
    out << "the first of them to return must take effect before anything invoked after t="
        << min_return << ": " << DescribeOperation(*ops_[blocking].op) << "\n";
    return out.str();
  }

  const std::string key_;
  std::vector<KeyOp> ops_;
  int num_ok_ = 0, num_unknown_ = 0;
  std::unordered_map<std::string, int> value_ids_;
  std::vector<std::string> values_;
  std::vector<Node> nodes_;
  std::vector<int> call_node_;  // op -> its call node (ok ops)
  std::vector<UnknownNode> unknown_nodes_;
  std::vector<int> unknown_node_;  // op -> its node (unknown ops)
  std::vector<uint64_t> zobrist_;  // per-op random bits: the ok set's hash is their xor
  // See ComputeObservable.
  std::vector<int> observable_;
  bool observable_present_ = false;
  int first_unknown_delete_ = -1;  // unknown list nodes
  int first_presence_only_ = -1;
  std::vector<const KeyOp*> unknown_cas_;  // scratch for ComputeObservable
  uint64_t steps_ = 0;
  // The deepest point the search reached (by ok ops linearized).
  size_t best_done_ok_ = 0;
  std::vector<int> best_prefix_;
  int best_state_ = kAbsent;
};

// ---- JSON lines reading ----

struct JsonValue {
  enum class Kind { kString, kInteger, kBool, kNull } kind = Kind::kNull;
  std::string str;
  int64_t integer = 0;
  bool boolean = false;
};

// Parses one flat JSON object whose values are strings, integers, booleans or
// null: exactly what WriteHistory produces, plus whitespace and any escape.
class LineParser {
 public:
  explicit LineParser(const std::string& line) : s_(line) {}

  bool Parse(std::vector<std::pair<std::string, JsonValue>>* fields, std::string* error) {
    SkipSpace();
    if (!Expect('{')) return Fail("expected '{'", error);
    SkipSpace();
    if (Peek() == '}') {
      ++pos_;
    } else {
      while (true) {
        SkipSpace();
        std::string name;
        if (Peek() != '"' || !ParseString(&name)) return Fail("expected a field name", error);
        SkipSpace();
        if (!Expect(':')) return Fail("expected ':'", error);
        SkipSpace();
        JsonValue value;
        if (!ParseValue(&value)) return Fail(error_.empty() ? "bad value" : error_, error);
        fields->emplace_back(std::move(name), std::move(value));
        SkipSpace();
        if (Expect(',')) continue;
        if (Expect('}')) break;
        return Fail("expected ',' or '}'", error);
      }
    }
    SkipSpace();
    if (pos_ != s_.size()) return Fail("trailing characters after the object", error);
    return true;
  }

 private:
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool Expect(char c) {
    if (Peek() != c || pos_ >= s_.size()) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool Fail(const std::string& what, std::string* error) {
    *error = what + " at column " + std::to_string(pos_ + 1);
    return false;
  }

  bool ParseValue(JsonValue* value) {
    const char c = Peek();
    if (c == '"') {
      value->kind = JsonValue::Kind::kString;
      return ParseString(&value->str);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      value->kind = JsonValue::Kind::kInteger;
      return ParseInteger(&value->integer);
    }
    for (const char* word : {"true", "false", "null"}) {
      const size_t n = std::strlen(word);
      if (s_.compare(pos_, n, word) == 0) {
        pos_ += n;
        value->kind = word[0] == 'n' ? JsonValue::Kind::kNull : JsonValue::Kind::kBool;
        value->boolean = word[0] == 't';
        return true;
      }
    }
    error_ = "expected a string, an integer, true, false or null";
    return false;
  }

  bool ParseInteger(int64_t* out) {
    const bool negative = Expect('-');
    if (!(Peek() >= '0' && Peek() <= '9')) {
      error_ = "expected a digit";
      return false;
    }
    uint64_t magnitude = 0;
    const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    while (Peek() >= '0' && Peek() <= '9') {
      const uint64_t digit = static_cast<uint64_t>(s_[pos_] - '0');
      if (magnitude > (limit - digit) / 10) {
        error_ = "integer out of range";
        return false;
      }
      magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    if (Peek() == '.' || Peek() == 'e' || Peek() == 'E') {
      error_ = "expected an integer";
      return false;
    }
    *out = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    return true;
  }

  bool ParseHex4(uint32_t* out) {
    if (pos_ + 4 > s_.size()) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return false;
      }
    }
    *out = v;
    return true;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  // \u0000-\u00ff decode to that single byte (how WriteHistory stores binary
  // data); higher code points, which WriteHistory never writes, to UTF-8.
  bool ParseString(std::string* out) {
    if (!Expect('"')) return false;
    while (true) {
      if (pos_ >= s_.size()) {
        error_ = "unterminated string";
        return false;
      }
      const char c = s_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) {
        error_ = "raw control character in a string";
        return false;
      }
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      const char e = Peek();
      ++pos_;
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!ParseHex4(&cp)) {
            error_ = "bad \\u escape";
            return false;
          }
          if (cp <= 0xff) {
            out->push_back(static_cast<char>(cp));
          } else if (cp >= 0xd800 && cp <= 0xdbff) {
            uint32_t low = 0;
            if (!Expect('\\') || !Expect('u') || !ParseHex4(&low) || low < 0xdc00 || low > 0xdfff) {
              error_ = "bad surrogate pair";
              return false;
            }
            AppendUtf8(0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00), out);
          } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            error_ = "lone low surrogate";
            return false;
          } else {
            AppendUtf8(cp, out);
          }
          break;
        }
        default:
          error_ = "bad escape";
          return false;
      }
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

bool ParseOpType(const std::string& s, OpType* type) {
  for (OpType t : {OpType::kPut, OpType::kGet, OpType::kDelete, OpType::kCas}) {
    if (s == TypeName(t)) {
      *type = t;
      return true;
    }
  }
  return false;
}

bool ParseOutcome(const std::string& s, Outcome* outcome) {
  for (Outcome o : {Outcome::kOk, Outcome::kFail, Outcome::kUnknown}) {
    if (s == OutcomeName(o)) {
      *outcome = o;
      return true;
    }
  }
  return false;
}

// Fills `op` from one parsed line; false with `error` set on a bad field.
bool OperationFromFields(const std::vector<std::pair<std::string, JsonValue>>& fields,
                         Operation* op, std::string* error) {
  bool has_key = false, has_type = false;
  for (const auto& field : fields) {
    // Not a structured binding: C++17 lambdas cannot capture those (clang
    // rejects `want` below; C++20 allows it).
    const std::string& name = field.first;
    const JsonValue& value = field.second;
    using Kind = JsonValue::Kind;
    auto want = [&](Kind kind, const char* what) {
      if (value.kind == kind) return true;
      *error = "field \"" + name + "\" must be " + what;
      return false;
    };
    if (name == "client") {
      if (!want(Kind::kInteger, "an integer")) return false;
      if (value.integer < std::numeric_limits<int>::min() ||
          value.integer > std::numeric_limits<int>::max()) {
        *error = "field \"client\" out of range";
        return false;
      }
      op->client = static_cast<int>(value.integer);
    } else if (name == "key") {
      if (!want(Kind::kString, "a string")) return false;
      op->key = value.str;
      has_key = true;
    } else if (name == "type") {
      if (!want(Kind::kString, "a string")) return false;
      if (!ParseOpType(value.str, &op->type)) {
        *error = "unknown type \"" + value.str + "\" (put, get, delete or cas)";
        return false;
      }
      has_type = true;
    } else if (name == "outcome") {
      if (!want(Kind::kString, "a string")) return false;
      if (!ParseOutcome(value.str, &op->outcome)) {
        *error = "unknown outcome \"" + value.str + "\" (ok, fail or unknown)";
        return false;
      }
    } else if (name == "value" || name == "expected" || name == "result") {
      if (!want(Kind::kString, "a string")) return false;
      (name == "value" ? op->value : name == "expected" ? op->expected : op->result) = value.str;
    } else if (name == "has_expected" || name == "found" || name == "swapped" ||
               name == "existed") {
      if (!want(Kind::kBool, "true or false")) return false;
      (name == "has_expected" ? op->has_expected
       : name == "found"      ? op->found
       : name == "swapped"    ? op->swapped
                              : op->existed) = value.boolean;
    } else if (name == "invoke_ns" || name == "return_ns") {
      if (!want(Kind::kInteger, "an integer")) return false;
      (name == "invoke_ns" ? op->invoke_ns : op->return_ns) = value.integer;
    }
    // Other fields are ignored, so that writers may add some.
  }
  if (!has_key || !has_type) {
    *error = std::string("missing field \"") + (has_key ? "type" : "key") + "\"";
    return false;
  }
  return true;
}

}  // namespace

std::string DescribeOperation(const Operation& op) {
  std::ostringstream out;
  out << "client " << op.client << " " << TypeName(op.type) << "(" << ShowValue(op.key);
  switch (op.type) {
    case OpType::kPut:
      out << ", " << ShowValue(op.value);
      break;
    case OpType::kGet:
    case OpType::kDelete:
      break;
    case OpType::kCas:
      out << ", " << (op.has_expected ? "expected " + ShowValue(op.expected) : "create-only")
          << " -> " << ShowValue(op.value);
      break;
  }
  out << ")";
  if (op.outcome == Outcome::kOk) {
    switch (op.type) {
      case OpType::kPut:
        break;
      case OpType::kGet:
        out << " = " << (op.found ? ShowValue(op.result) : "absent");
        break;
      case OpType::kDelete:
        out << " = " << (op.existed ? "existed" : "not found");
        break;
      case OpType::kCas:
        out << " = " << (op.swapped ? "swapped" : "not swapped") << ", prior "
            << (op.found ? ShowValue(op.result) : "absent");
        break;
    }
  }
  out << " " << OutcomeName(op.outcome) << " [t " << op.invoke_ns << " .. ";
  if (op.outcome == Outcome::kUnknown) {
    out << "?";
  } else {
    out << op.return_ns;
  }
  out << "]";
  return out.str();
}

CheckResult CheckHistory(const std::vector<Operation>& history,
                         std::chrono::milliseconds budget_per_key) {
  std::map<std::string, std::vector<size_t>> by_key;
  for (size_t i = 0; i < history.size(); ++i) by_key[history[i].key].push_back(i);
  CheckResult result;
  for (const auto& [key, indexes] : by_key) {
    KeyReport report = KeyChecker(key, history, indexes).Run(budget_per_key);
    ++result.keys;
    result.ops += report.ops;
    if (!report.linearizable) {
      result.linearizable = false;
      ++result.violations;
    }
    if (report.timed_out) result.timed_out = true;
    result.reports.push_back(std::move(report));
  }
  return result;
}

Status WriteHistory(const std::string& path, const std::vector<Operation>& history) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return Status::IOError("cannot open " + path + " for writing: " + std::strerror(errno));
  }
  auto flag = [](bool b) { return b ? "true" : "false"; };
  for (const Operation& op : history) {
    out << "{\"client\":" << op.client << ",\"key\":" << JsonQuote(op.key) << ",\"type\":\""
        << TypeName(op.type) << "\",\"value\":" << JsonQuote(op.value)
        << ",\"has_expected\":" << flag(op.has_expected)
        << ",\"expected\":" << JsonQuote(op.expected) << ",\"found\":" << flag(op.found)
        << ",\"result\":" << JsonQuote(op.result) << ",\"swapped\":" << flag(op.swapped)
        << ",\"existed\":" << flag(op.existed) << ",\"outcome\":\"" << OutcomeName(op.outcome)
        << "\",\"invoke_ns\":" << op.invoke_ns << ",\"return_ns\":" << op.return_ns << "}\n";
  }
  out.close();
  if (!out) {
    return Status::IOError("error writing " + path + ": " + std::strerror(errno));
  }
  return Status::OK();
}

Status ReadHistory(const std::string& path, std::vector<Operation>* history) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  }
  history->clear();
  std::string line;
  size_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::vector<std::pair<std::string, JsonValue>> fields;
    std::string what;
    Operation op;
    if (!LineParser(line).Parse(&fields, &what) || !OperationFromFields(fields, &op, &what)) {
      return Status::InvalidArgument(path + ":" + std::to_string(line_number) + ": " + what);
    }
    history->push_back(std::move(op));
  }
  if (in.bad()) {
    return Status::IOError("error reading " + path + ": " + std::strerror(errno));
  }
  return Status::OK();
}

}  // namespace raftkv::check
