// Importing etcd's v3 state: builds the state machine's snapshot image
// (the records KvStateMachine::Restore() reads) from an etcd database, a
// bbolt file (storage/bbolt_reader.h) as `etcdctl snapshot save` writes it
// or as a member keeps it in member/snap/db.
//
// What etcd keeps there (its MVCC backend):
//  - bucket "key": every revision since the last compaction, keyed by the
//    revision (8-byte big-endian main revision, '_', 8-byte big-endian sub
//    revision, and a final 't' for a deletion), the value an
//    mvccpb.KeyValue (only the key for a deletion). Each key's newest
//    revision decides: a deletion means the key is gone.
//  - bucket "lease": 8-byte big-endian lease id -> leasepb.Lease{ID, TTL,
//    RemainingTTL}.
//  - bucket "meta": consistent_index and term (8-byte big endian), the
//    scheduled and finished compaction (a revision key).
//
// The image keeps every live key with its value, create and mod revision,
// version and lease; the leases with their TTL; the store's revision as
// etcd computes it when it opens the database (the highest main revision,
// not below a compaction); and, as history for watches and reads at a past
// revision, the newest revisions above the compaction. The keys of the
// other buckets (members, alarms, auth) belong to etcd's cluster, not to
// the key-value state, and are not imported.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "kv/kv_state_machine.h"
#include "storage/bbolt_reader.h"
#include "storage/snapshot_format.h"

namespace raftkv {

struct EtcdImportSummary {
  int64_t revision = 0;           // the store's revision
  int64_t compact_revision = 0;   // etcd's finished compaction (0: none)
  uint64_t consistent_index = 0;  // the last entry etcd applied (meta bucket)
  uint64_t term = 0;              // its term (etcd 3.5 keeps it; 0 otherwise)
  uint64_t keys = 0;              // live keys
  uint64_t leases = 0;
  uint64_t revisions = 0;         // entries of the key bucket
  int64_t history_from = 0;       // the image's history covers every revision above this
  uint64_t leaseless = 0;         // keys whose lease the database lacks: imported without one
};

// Writes the image of the etcd database `db` into `out` (records, and
// meta(): last index and term from etcd's consistent index and term, at
// least 1; the configuration is left to the caller). At most
// `history_revisions` revisions of history. Corruption naming the file and
// what is wrong when the database is damaged or not etcd's.
Status ImportEtcdDatabase(BboltReader* db, SnapshotWriter* out, EtcdImportSummary* summary,
                          size_t history_revisions = KvStateMachine::kDefaultSnapshotHistoryRevisions);

}  // namespace raftkv
