// Fuzz target: KvStateMachine::Apply on arbitrary committed entries.
//
// Input: a sequence of records [mode:u8] [length:u16le] [bytes]. Even mode:
// the bytes are a serialized Entry (if they do not parse, they become the data
// of a COMMAND entry); odd mode: an entry of type mode >> 1 (NOOP, COMMAND or
// unknown values) whose data is the bytes. Each entry gets the next index and
// is applied. Apply must never crash, and the result must match a simple
// model (a std::map) for PUT, DELETE and CAS; undecodable commands and unknown
// types and ops are no-ops with ok = false.
#include <cinttypes>
#include <map>
#include <string>

#include "fuzz/fuzz_util.h"
#include "storage/kv_state_machine.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace raftkv;
  using namespace raftkv::fuzz;
  Reader in(data, size);
  KvStateMachine sm;
  std::map<std::string, std::string> model;
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
    FUZZ_ASSERT(r.ok == r.error.empty(), "ok=%d with error '%s'", r.ok, r.error.c_str());

    Command cmd;
    const bool command = entry.type() == ENTRY_COMMAND && cmd.ParseFromString(entry.data());
    const bool known = command && (cmd.op() == Command::PUT || cmd.op() == Command::DELETE ||
                                   cmd.op() == Command::CAS);
    if (entry.type() == ENTRY_NOOP) {
      FUZZ_ASSERT(r.ok, "NOOP failed: %s", r.error.c_str());
      continue;
    }
    if (!known) {
      // Undecodable or unknown: must be refused, unless the state machine
      // learnt a new op the model does not know (then stop comparing).
      if (r.ok) tracked = false;
      FUZZ_ASSERT(r.ok || !r.error.empty(), "refused without a reason");
      continue;
    }
    FUZZ_ASSERT(r.ok, "valid command refused: %s", r.error.c_str());
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
