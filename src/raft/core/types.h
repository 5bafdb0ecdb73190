// The vocabulary of the consensus module: its configuration, the roles, and
// what a Ready hands to the caller. Shared by the core (src/raft/), the
// leader and follower units and the Raft node that drives them
// (src/raft/raft.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "raft/core/membership.h"
#include "raft/core/message.h"
#include "proto/internal.h"
#include "raft/core/hard_state.h"

namespace raftkv::raft {

enum class Role { kFollower, kPreCandidate, kCandidate, kLeader };
const char* RoleName(Role role);

// The core's configuration. These defaults are the server's (raftkv-server's
// flags and NodeOptions::core take them from here).
struct Config {
  uint64_t id = 0;                 // this member's id (> 0)
  // The bootstrap configuration: in effect at log index 0, until the first
  // ENTRY_CONFIG in the log (or a snapshot's configuration) replaces it. If
  // `bootstrap` has no members, `voters` (addresses empty) is used. A member
  // that is not in it (a joining server) starts without a vote and waits for
  // a leader to replicate a configuration that includes it.
  MembershipConfig bootstrap;
  std::vector<uint64_t> voters;
  // Election timeout is drawn uniformly from [election_ticks, 2*election_ticks).
  int election_ticks = 10;
  // Ticks between a leader's heartbeats (< election_ticks).
  int heartbeat_ticks = 2;
  bool pre_vote = true;
  // A leader that has not heard from a majority within an election timeout
  // steps down (needed so that PreVote cannot be blocked by a stale leader).
  bool check_quorum = true;
  // Replication flow control per follower.
  size_t max_inflight_appends = 64;
  // Entry bytes in flight per follower (0 = no limit; one message always
  // may be). Bounds the burst a far-behind follower (a new member, one back
  // from a restart) draws from the leader in one pass, which otherwise
  // delays the heartbeats to the others (64 messages of max_append_bytes).
  uint64_t max_inflight_bytes = 8 << 20;
  size_t max_append_entries = 4096;
  size_t max_append_bytes = 1 << 20;
  uint64_t seed = 1;  // for the randomized election timeout
  // A learner is promoted only when its match index is within this many
  // entries of the leader's last index.
  uint64_t promote_max_lag = 1000;
  // The length of a tick in milliseconds (the service ticks the core that
  // often). Cluster time: a leader stamps every entry it creates with
  // Entry.cluster_time_ms = (its last entry's time when elected) + tick_ms *
  // (ticks since). 0 (tests of the core only) leaves every entry at time 0.
  int tick_ms = 50;
  // The index the state machine has applied already (etcd raft's
  // Config.Applied): a store that keeps its state across restarts resumes
  // there, and the core hands out only the committed entries after it. It is
  // committed, so the core starts with commit = max(base index, applied);
  // it must be within the log (<= its last index).
  uint64_t applied = 0;
};

// A linearizable read that may be served once the state machine has applied
// `index`.
struct ReadState {
  uint64_t id = 0;
  uint64_t index = 0;
};

// A snapshot the core is based on: the log holds entries after `index`.
struct SnapshotRef {
  uint64_t index = 0;
  uint64_t term = 0;
  MembershipConfig config;  // configuration at `index`
  uint64_t cluster_time_ms = 0;  // Entry::cluster_time_ms of entry `index`
};

struct Ready {
  // Follower: a snapshot from the leader replaces this member's state. The
  // file snap-<index>-<term> is already installed in the snapshot store (the
  // service did that before stepping the kSnapshot message). Before anything
  // else in this Ready, the caller restores its state machine from that file
  // and resets its LogStore to hold nothing up to snapshot->index (entries
  // start at index + 1), durably.
  std::optional<SnapshotRef> snapshot;
  // Set when the configuration in effect changed (an ENTRY_CONFIG appended or
  // truncated away, or a snapshot installed): the service updates the peer
  // addresses it dials. Never removes addresses the messages of this Ready
  // still need.
  std::optional<MembershipConfig> config;
  // Set when term or vote changed since the last Ready: persist it before
  // sending any message in `messages`.
  std::optional<HardState> hard_state;
  // Entries to write to the LogStore. If entries.front().index is <= the
  // store's last index, the store truncates its suffix from there first.
  std::vector<Entry> entries;
  std::vector<Message> messages;
  // Newly committed entries, in order, to apply to the state machine.
  std::vector<Entry> committed;
  std::vector<ReadState> reads;
  // Reads that can never be served by this node (it lost leadership before
  // confirming them): fail them with UNAVAILABLE.
  std::vector<uint64_t> failed_reads;

  bool empty() const {
    return !snapshot && !config && !hard_state && entries.empty() && messages.empty() && committed.empty() &&
           reads.empty() && failed_reads.empty();
  }

  // True for the messages of this Ready that may be sent before its entries
  // and hard state are durable: a leader's AppendEntries (Raft thesis
  // 10.2.1: a leader writes to its disk in parallel with replicating), and
  // only when this Ready does not change the hard state. The rule behind it:
  // no message may carry a term (or a vote, or an acknowledgement) before
  // that state is durable. A leader elected inside one step (a single voter
  // counts its own vote) would otherwise send entries of a term it forgets
  // if it crashes now, win that term again after the restart and write
  // other entries at the same indexes and term. Every other message
  // (responses, vote requests) reflects state that must be durable first.
  bool SendBeforePersist(const Message& m) const {
    return m.type == MessageType::kAppend && !hard_state.has_value();
  }
};

struct ProposeResult {
  bool accepted = false;  // false: not leader, or `error` says why
  uint64_t index = 0;
  uint64_t term = 0;
  // When refused although leader: why (FailedPrecondition: a leadership
  // transfer in progress, a membership change not possible now;
  // InvalidArgument: a malformed change). OK when accepted or not leader.
  Status error;
};

}  // namespace raftkv::raft
