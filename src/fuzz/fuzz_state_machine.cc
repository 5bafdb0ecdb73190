// Fuzz target: KvStateMachine::Apply on arbitrary committed entries.
//
// Input: a sequence of records [mode:u8] [length:u16le] [bytes]. Even mode:
// the bytes are a serialized Entry (if they do not parse, they become the data
// of a COMMAND entry); odd mode: an entry of type mode >> 1 (NOOP, COMMAND or
// unknown values) whose data is the bytes. Each entry gets the next index and
// is applied. Apply must never crash, and the result must match a simple
// model (a std::map, plus a plain re-statement of the client-session rules:
// open/close, expiry by cluster time, duplicates answered with the saved
// result, stale sequences refused) for PUT, DELETE, CAS, BATCH (of PUTs and
// DELETEs, replayed op by op), OPEN_SESSION and CLOSE_SESSION; undecodable
// commands, unknown types and ops, and batches holding anything but PUT and
// DELETE are no-ops with ok = false. Transactions, range deletes and leases
// get the session rules checked; once one of them changed the store, the
// map is no longer compared (kv_api_state_test.cc covers them). ALARM entries
// are modelled (a set of raised alarms): while a NOSPACE alarm is raised,
// PUT, CAS and a BATCH with a put must be refused with RESOURCE_EXHAUSTED.
#include <cinttypes>
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "kv/kv_state_machine.h"

namespace {

struct ModelSession {
  uint64_t timeout = 0;
  uint64_t expires = 0;
  uint64_t first_outstanding = 0;
  std::map<uint64_t, raftkv::ApplyResult> results;
};

uint64_t Expiry(uint64_t now, uint64_t timeout) {
  return now > UINT64_MAX - timeout ? UINT64_MAX : now + timeout;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace raftkv;
  using namespace raftkv::fuzz;
  using SessionError = ApplyResult::SessionError;
  Reader in(data, size);
  KvStateMachine sm;
  std::map<std::string, std::string> model;
  std::map<uint64_t, ModelSession> sessions;
  std::set<std::pair<uint64_t, uint32_t>> alarms;  // (member, type) raised
  uint64_t now = 0;  // cluster time
  bool tracked = true;  // false once an op the model does not know succeeded
  uint64_t index = 0;
  while (!in.empty()) {
    const uint8_t mode = in.U8();
    const std::string bytes = in.Chunk();
    Entry entry;
    if ((mode & 1) == 0) {
      if (!entry.ParseFromString(bytes)) {
        entry.Clear();
        entry.set_type(ENTRY_COMMAND);
        entry.set_data(bytes);
      }
    } else {
      entry.set_type(static_cast<EntryType>(mode >> 1));
      entry.set_data(bytes);
    }
    entry.set_index(++index);
    const ApplyResult r = sm.Apply(entry);
    FUZZ_ASSERT(sm.AppliedIndex() == index, "applied index %" PRIu64 " after applying %" PRIu64,
                sm.AppliedIndex(), index);
    FUZZ_ASSERT(r.ok ? r.error.empty() == (r.session_error == SessionError::kNone)
                     : !r.error.empty(),
                "ok=%d session_error=%d with error '%s'", r.ok, static_cast<int>(r.session_error),
                r.error.c_str());
    FUZZ_ASSERT(r.duplicate || r.index == index, "result index %" PRIu64, r.index);

    // Cluster time and expiry, for every entry (the model of ExpireSessions).
    now = std::max(now, entry.cluster_time_ms());
    for (auto it = sessions.begin(); it != sessions.end();) {
      it = it->second.expires < now ? sessions.erase(it) : std::next(it);
    }

    Command cmd;
    const bool command = entry.type() == ENTRY_COMMAND && cmd.ParseFromString(entry.data());
    if (command && r.ok && cmd.op() == Command::OPEN_SESSION) {
      FUZZ_ASSERT(r.client_id == index, "session id %" PRIu64 " at index %" PRIu64, r.client_id, index);
      ModelSession& ms = sessions[index];
      ms.timeout = cmd.session_timeout_ms();
      ms.expires = Expiry(now, ms.timeout);
      FUZZ_ASSERT(sm.SessionCount() == sessions.size(), "sessions %zu, model %zu", sm.SessionCount(),
                  sessions.size());
      continue;
    }
    if (command && r.ok && cmd.op() == Command::CLOSE_SESSION) {
      sessions.erase(cmd.client_id());
      FUZZ_ASSERT(sm.SessionCount() == sessions.size(), "sessions %zu, model %zu", sm.SessionCount(),
                  sessions.size());
      continue;
    }
    const bool batchable = std::all_of(cmd.ops().begin(), cmd.ops().end(), [](const Command& op) {
      return op.op() == Command::PUT || op.op() == Command::DELETE;
    });
    const bool known = command && (cmd.op() == Command::PUT || cmd.op() == Command::DELETE ||
                                   cmd.op() == Command::CAS ||
                                   (cmd.op() == Command::BATCH && batchable));
    // The ops of the KV API the model does not replay (transactions, range
    // deletes, leases, compaction): their session bookkeeping is the same; their effect
    // on the map ends the comparison, unless they were refused.
    // COMPACT changes no key: the comparison goes on after it.
    // ALARM changes no key either: the model keeps the set of raised alarms.
    const bool compact = command && cmd.op() == Command::COMPACT;
    const bool alarm = command && cmd.op() == Command::ALARM;
    const bool api_op = command && (cmd.op() == Command::TXN || cmd.op() == Command::DELETE_RANGE ||
                                    cmd.op() == Command::LEASE_GRANT ||
                                    cmd.op() == Command::LEASE_REVOKE || compact || alarm);
    ModelSession* session = nullptr;
    if ((known || api_op) && cmd.client_id() != 0) {
      auto sit = sessions.find(cmd.client_id());
      if (sit == sessions.end()) {
        FUZZ_ASSERT(r.session_error == SessionError::kSessionExpired, "unknown session accepted");
        continue;
      }
      session = &sit->second;
      session->expires = Expiry(now, session->timeout);
      if (cmd.first_outstanding() > session->first_outstanding) {
        session->first_outstanding = cmd.first_outstanding();
        session->results.erase(session->results.begin(),
                               session->results.lower_bound(session->first_outstanding));
      }
      if (cmd.sequence() < session->first_outstanding) {
        FUZZ_ASSERT(r.session_error == SessionError::kStaleSequence, "stale sequence accepted");
        continue;
      }
      auto saved = session->results.find(cmd.sequence());
      if (saved != session->results.end()) {
        const ApplyResult& f = saved->second;
        FUZZ_ASSERT(r.duplicate && r.index == f.index && r.existed == f.existed &&
                        r.swapped == f.swapped && r.found == f.found && r.current == f.current &&
                        r.batch_existed == f.batch_existed,
                    "duplicate not answered with the saved result");
        continue;
      }
      FUZZ_ASSERT(r.session_error == SessionError::kNone && !r.duplicate,
                  "new sequence refused or taken for a duplicate");
    }
    if (entry.type() == ENTRY_NOOP) {
      FUZZ_ASSERT(r.ok, "NOOP failed: %s", r.error.c_str());
      continue;
    }
    if (api_op) {
      FUZZ_ASSERT(r.ok, "valid command refused: %s", r.error.c_str());
      if (session != nullptr) session->results.emplace(cmd.sequence(), r);
      if (alarm) {
        const std::pair<uint64_t, uint32_t> key{cmd.alarm_member(), cmd.alarm_type()};
        const bool valid = cmd.alarm_type() == 1 &&
                           (cmd.alarm_action() == 2 ||
                            (cmd.alarm_action() == 1 &&
                             (alarms.count(key) != 0 || alarms.size() < KvStateMachine::kMaxAlarms)));
        FUZZ_ASSERT(r.rejected() != valid, "ALARM type %u action %u: rejected=%d", cmd.alarm_type(),
                    cmd.alarm_action(), r.rejected());
        if (valid && cmd.alarm_action() == 1) alarms.insert(key);
        if (valid && cmd.alarm_action() == 2) alarms.erase(key);
        FUZZ_ASSERT(sm.NoSpaceAlarm() == !alarms.empty(), "NOSPACE alarm %d, model %zu raised",
                    sm.NoSpaceAlarm(), alarms.size());
        continue;
      }
      if (!r.rejected() && !compact) tracked = false;
      continue;
    }
    if (!known) {
      // Undecodable or unknown: must be refused, unless the state machine
      // learnt a new op the model does not know (then stop comparing).
      if (r.ok) {
        tracked = false;
        // Applied in its session all the same: its sequence is taken.
        if (session != nullptr) session->results.emplace(cmd.sequence(), r);
      }
      FUZZ_ASSERT(r.ok || !r.error.empty(), "refused without a reason");
      continue;
    }
    FUZZ_ASSERT(r.ok, "valid command refused: %s", r.error.c_str());
    if (session != nullptr) session->results.emplace(cmd.sequence(), r);
    // A batch's ops are its only ones: other commands' `ops` are not applied.
    const bool adds_data =
        cmd.op() == Command::PUT || cmd.op() == Command::CAS ||
        (cmd.op() == Command::BATCH &&
         std::any_of(cmd.ops().begin(), cmd.ops().end(),
                     [](const Command& op) { return op.op() == Command::PUT; }));
    if (!alarms.empty() && adds_data) {
      FUZZ_ASSERT(r.rejected() && r.Rejection().code() == Status::Code::kResourceExhausted,
                  "a write that adds data accepted under a NOSPACE alarm");
      continue;
    }
    if (cmd.op() == Command::PUT && cmd.lease() != 0) {
      // No lease exists while the model is tracked (a grant stops it).
      FUZZ_ASSERT(!tracked || r.Rejection().code() == Status::Code::kNotFound,
                  "PUT on a lease that does not exist accepted");
      if (r.rejected()) continue;
    }
    if (cmd.op() == Command::PUT && (cmd.ignore_value() || cmd.ignore_lease())) {
      // Keeps the value or lease of a key that exists; refused on one that does not.
      const bool present = model.count(cmd.key()) != 0;
      FUZZ_ASSERT(!tracked || r.rejected() != present, "PUT keeping the value or lease: rejected=%d, model has the key %d",
                  r.rejected(), present);
      if (tracked && !r.rejected() && !cmd.ignore_value()) model[cmd.key()] = cmd.value();
      continue;
    }
    if (!tracked) continue;
    auto it = model.find(cmd.key());
    const bool found = it != model.end();
    switch (cmd.op()) {
      case Command::PUT:
        model[cmd.key()] = cmd.value();
        break;
      case Command::DELETE:
        FUZZ_ASSERT(r.existed == found, "DELETE existed=%d, model %d", r.existed, found);
        model.erase(cmd.key());
        break;
      case Command::CAS: {
        FUZZ_ASSERT(r.found == found, "CAS found=%d, model %d", r.found, found);
        FUZZ_ASSERT(r.current == (found ? it->second : std::string()), "CAS current differs");
        const bool swap = cmd.has_expected() ? found && it->second == cmd.expected() : !found;
        FUZZ_ASSERT(r.swapped == swap, "CAS swapped=%d, model %d", r.swapped, swap);
        if (swap) model[cmd.key()] = cmd.value();
        break;
      }
      case Command::BATCH: {
        std::vector<bool> existed;
        for (const Command& op : cmd.ops()) {
          existed.push_back(model.count(op.key()) > 0);
          if (op.op() == Command::PUT) {
            model[op.key()] = op.value();
          } else {
            model.erase(op.key());
          }
        }
        FUZZ_ASSERT(r.batch_existed == existed, "BATCH existed flags differ from the model");
        for (const Command& op : cmd.ops()) {
          const auto got = sm.Get(op.key());
          auto want = model.find(op.key());
          FUZZ_ASSERT(got.has_value() == (want != model.end()) && (!got || *got == want->second),
                      "BATCH left a key different from the model");
        }
        break;
      }
      default:
        break;
    }
    const auto value = sm.Get(cmd.key());
    auto now = model.find(cmd.key());
    FUZZ_ASSERT(value.has_value() == (now != model.end()), "Get presence differs from the model");
    if (value) FUZZ_ASSERT(*value == now->second, "Get value differs from the model");
    FUZZ_ASSERT(sm.Size() == model.size(), "Size %zu, model %zu", sm.Size(), model.size());
  }
  return 0;
}
