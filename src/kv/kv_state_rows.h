// The rows a persistent store keeps beside the versions and the history
// (mvcc_keys.h): the client sessions with their saved answers, the leases
// with their keys, the alarms, the membership of the last CONFIG entry and
// `m state` (KvMeta: the applied index, revision and counters). The state
// machine writes them through, in the batch of the entry that changed them,
// so the store is after each Write() exactly the state at one applied entry;
// reopening it reads them back (Load) instead of a snapshot.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "common/status.h"
#include "kv/apply_result.h"
#include "kv/lease_table.h"
#include "kv/session_table.h"
#include "proto/internal.h"
#include "storage/kv_backend.h"

namespace raftkv {
namespace state_rows {

// The layout version in KvMeta.format: the one written, and the oldest one
// read. Layout 2 history rows name the version each change replaced
// (kv/mvcc_store.h); a layout 1 store's rows are read as they are.
constexpr uint32_t kFormat = 2;
constexpr uint32_t kOldestFormat = 1;

// A saved answer as the snapshot file and the 'r' rows keep it.
void EncodeResult(uint64_t client_id, uint64_t sequence, const ApplyResult& r,
                  SnapshotSessionResult* out);
// Moves the fields of *m into *out; false, with *why, when malformed.
bool DecodeResult(SnapshotSessionResult* m, ApplyResult* out, std::string* why);

// The rows of what `changes` names, as `table` has it now: a row for what
// exists, a deletion for what is gone (a session's or lease's rows with it).
void AddSessionRows(const SessionTable& table, const SessionTable::Changes& changes,
                    BackendBatch* batch);
void AddLeaseRows(const LeaseTable& table, const LeaseTable::Changes& changes,
                  BackendBatch* batch);
// Every alarm raised, replacing the rows of the ones before.
void AddAlarmRows(const std::set<std::pair<uint64_t, uint32_t>>& alarms, BackendBatch* batch);
void AddMeta(const KvMeta& meta, BackendBatch* batch);
// The MembershipConfig of the last CONFIG entry applied, serialized.
void AddConfig(const std::string& config, BackendBatch* batch);

// What a store holds besides its versions and history.
struct Loaded {
  bool found = false;  // the store has an `m state` row (else it is empty)
  KvMeta meta;
  std::string config;
  SessionTable sessions;
  LeaseTable leases;
  std::set<std::pair<uint64_t, uint32_t>> alarms;
};
// Reads them from `view`; Corruption naming the row when one is malformed.
Status Load(const BackendView& view, Loaded* out);
// Only `m state`, the configuration and the alarms.
Status LoadMetaOnly(const BackendView& view, Loaded* out);

}  // namespace state_rows
}  // namespace raftkv
