// Messages built by hand for the single-core tests (raft_core_test.cc,
// raft_snapshot_test.cc): member 2, the leader, writing to member 1.
#ifndef RAFTKV_GTEST_RAFT_CORE_TEST_UTIL_H_
#define RAFTKV_GTEST_RAFT_CORE_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "raft/core/membership.h"
#include "raft/core/message.h"

namespace raftkv::raft {

inline Entry MakeEntry(uint64_t index, uint64_t term, const std::string& data = "x") {
  Entry e;
  e.set_index(index);
  e.set_term(term);
  e.set_type(ENTRY_COMMAND);
  e.set_data(data);
  return e;
}

// An AppendEntries from leader 2 to member 1.
inline Message Append2To1(uint64_t rpc_id, uint64_t term, uint64_t prev_index, uint64_t prev_term,
                          uint64_t commit, std::vector<Entry> entries = {}) {
  Message m;
  m.type = MessageType::kAppend;
  m.from = 2;
  m.to = 1;
  m.rpc_id = rpc_id;
  m.append.set_term(term);
  m.append.set_leader_id(2);
  m.append.set_prev_log_index(prev_index);
  m.append.set_prev_log_term(prev_term);
  m.append.set_leader_commit(commit);
  m.append.set_to(1);
  for (Entry& e : entries) *m.append.add_entries() = std::move(e);
  return m;
}

// An InstallSnapshot (metadata: the core never sees the data) from leader 2
// to member 1 of a snapshot at index/snap_term whose configuration has
// `voters`.
inline Message SnapshotFrom2(uint64_t rpc_id, uint64_t term, uint64_t index, uint64_t snap_term,
                             const std::vector<uint64_t>& voters) {
  InstallSnapshotRequest req;
  req.set_term(term);
  req.set_leader_id(2);
  req.set_last_index(index);
  req.set_last_term(snap_term);
  req.set_to(1);
  *req.mutable_config() = VotersConfig(voters);
  Message m = SnapshotRequestMessage(req);
  m.rpc_id = rpc_id;
  return m;
}

}  // namespace raftkv::raft

#endif  // RAFTKV_GTEST_RAFT_CORE_TEST_UTIL_H_
