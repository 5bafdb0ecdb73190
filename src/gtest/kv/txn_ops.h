// Builders of transactions for the state machine's tests: the operations,
// a compare, a transaction of them; and applying a command.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gtest/common/temp_dir.h"
#include "kv/kv_state_machine.h"
#include "proto/internal.h"
#include "storage/file_util.h"
#include "storage/snapshot_format.h"

namespace raftkv {
namespace testing_txn {

// `c` as the committed entry at `index` (term 1).
inline Entry CommandAt(uint64_t index, const Command& c) {
  Entry e;
  e.set_term(1);
  e.set_index(index);
  e.set_type(ENTRY_COMMAND);
  e.set_data(c.SerializeAsString());
  return e;
}

// Applies `c` to `sm` as the next committed entry (*index: the last one).
inline ApplyResult ApplyNext(KvStateMachine* sm, uint64_t* index, const Command& c) {
  return sm->Apply(CommandAt(++*index, c));
}

// Restores `copy` from a snapshot file of `from`, after checking the whole
// file reads back (call it inside ASSERT_NO_FATAL_FAILURE).
// Writes a snapshot file of `from` at `path`.
// The snapshot file of `from`; its header's configuration is the one `from`
// applied last (as the node records the membership at the snapshot's index).
inline void WriteSnapshotOf(const KvStateMachine& from, const std::string& path) {
  SnapshotWriter w;
  from.Snapshot(&w);
  w.meta().config = from.AppliedConfig();
  testing_util::WriteFileBytes(path, EncodeSnapshotFile(w));
}

inline void RestoreCopy(const KvStateMachine& from, KvStateMachine* copy) {
  testing_util::TempDir dir;
  const std::string path = dir.path() + "/snap";
  WriteSnapshotOf(from, path);
  std::unique_ptr<SnapshotReader> reader;
  ASSERT_TRUE(SnapshotReader::Open(path, &reader).ok());
  ASSERT_TRUE(reader->VerifyAll().ok());
  ASSERT_TRUE(SnapshotReader::Open(path, &reader).ok());
  const Status s = copy->Restore(reader.get());
  ASSERT_TRUE(s.ok()) << s;
}

inline TxnRequest Txn(std::vector<Compare> compares, std::vector<RequestOp> success,
                      std::vector<RequestOp> failure = {}) {
  TxnRequest t;
  for (auto& c : compares) *t.add_compare() = c;
  for (auto& o : success) *t.add_success() = o;
  for (auto& o : failure) *t.add_failure() = o;
  return t;
}

// `target` of `key` compared by `result` with n (or value, for VALUE).
inline Compare Cmp(Compare::CompareTarget target, Compare::CompareResult result, const std::string& key,
                   int64_t n, const std::string& value = "") {
  Compare c;
  c.set_target(target);
  c.set_result(result);
  c.set_key(key);
  switch (target) {
    case Compare::VALUE: c.set_value(value); break;
    case Compare::VERSION: c.set_version(n); break;
    case Compare::CREATE: c.set_create_revision(n); break;
    case Compare::MOD: c.set_mod_revision(n); break;
    case Compare::LEASE: c.set_lease(n); break;
    default: break;
  }
  return c;
}

inline RequestOp PutOp(const std::string& k, const std::string& v) {
  RequestOp op;
  op.mutable_request_put()->set_key(k);
  op.mutable_request_put()->set_value(v);
  return op;
}

inline RequestOp GetOp(const std::string& k, const std::string& end = "") {
  RequestOp op;
  op.mutable_request_range()->set_key(k);
  op.mutable_request_range()->set_range_end(end);
  return op;
}

inline RequestOp DelOp(const std::string& k, const std::string& end = "") {
  RequestOp op;
  op.mutable_request_delete_range()->set_key(k);
  op.mutable_request_delete_range()->set_range_end(end);
  return op;
}

}  // namespace testing_txn
}  // namespace raftkv
