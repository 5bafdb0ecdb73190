// The follower side of replication: the log-matching check, truncation of a
// conflicting suffix, following the leader's commit index, and accepting
// the leader's snapshot. Every request gets exactly one response.
#pragma once

#include <optional>

#include "raft/core/core.h"
#include "raft/core/message.h"
#include "raft/core/types.h"

namespace raftkv::raft {

class Follower {
 public:
  explicit Follower(Core* core) : core_(core) {}

  // AppendEntries (or a heartbeat) from the leader of the current term.
  void HandleAppendEntries(const Message& m);
  // The leader's snapshot, already verified and installed in the snapshot
  // store by the service (see MessageType::kSnapshot).
  void HandleInstallSnapshot(const Message& m);

  // A snapshot accepted from the leader that the next Ready must restore
  // (the log was reset to start after it).
  bool has_installed_snapshot() const { return installed_.has_value(); }
  std::optional<SnapshotRef> TakeInstalledSnapshot();

 private:
  Core* core_;
  std::optional<SnapshotRef> installed_;
};

}  // namespace raftkv::raft
