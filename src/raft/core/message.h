// Messages exchanged by consensus cores. A Message is what one core asks to be
// delivered to another; the service layer maps each kind onto a gRPC call
// (requests) or onto the reply of the call that carried the request
// (responses), using `rpc_id` to pair them.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "proto/internal.h"

namespace raftkv::raft {

enum class MessageType {
  kAppend,        // AppendEntriesRequest (also the heartbeat: no entries)
  kAppendResp,    // AppendEntriesResponse
  kVote,          // RequestVoteRequest (PreVote when vote.pre_vote())
  kVoteResp,      // RequestVoteResponse
  // InstallSnapshotRequest with the metadata only (term, leader_id,
  // last_index, last_term, config, to). From a leader's core: "send your
  // snapshot file snap-<last_index>-<last_term> to `to`"; the service streams
  // the file and delivers the follower's answer as kSnapshotResp (or calls
  // ReportUnreachable on failure). Into a follower's core: the service has
  // received, verified and installed that file in its SnapshotStore; the core
  // answers with exactly one kSnapshotResp (after the Ready that restores it).
  kSnapshot,
  kSnapshotResp,  // InstallSnapshotResponse
  // TimeoutNowRequest: one-way. The service acknowledges the RPC itself; the
  // core produces no response.
  kTimeoutNow,
};

const char* MessageTypeName(MessageType type);

struct Message {
  MessageType type = MessageType::kAppend;
  uint64_t from = 0;
  uint64_t to = 0;
  // Set by the receiving service on a request; the core copies it into the
  // one response it produces for that request, so the service can complete
  // the right RPC. Cores never interpret it.
  uint64_t rpc_id = 0;

  // Exactly one of these is meaningful, chosen by `type`.
  AppendEntriesRequest append;
  AppendEntriesResponse append_resp;
  RequestVoteRequest vote;
  RequestVoteResponse vote_resp;
  InstallSnapshotRequest snapshot;
  InstallSnapshotResponse snapshot_resp;
  TimeoutNowRequest timeout_now;

  bool IsResponse() const {
    return type == MessageType::kAppendResp || type == MessageType::kVoteResp ||
           type == MessageType::kSnapshotResp;
  }
  uint64_t Term() const;
  std::string DebugString() const;
};

// ---- the peer RPCs as Messages (service layer and fuzz targets) ----

// A request that arrived at this member over the Peer service: the sender is
// the request's leader_id / candidate_id, the recipient its `to`. The proto is
// swapped into the Message (no copy of the entries).
Message AppendRequestMessage(AppendEntriesRequest* req);
Message VoteRequestMessage(RequestVoteRequest* req);
// The metadata of a fully received snapshot (data/offset/done ignored).
Message SnapshotRequestMessage(const InstallSnapshotRequest& req);
Message TimeoutNowMessage(const TimeoutNowRequest& req);
// The reply to a call this member (`self`) made to `peer`: the sender is the
// member called, whatever the reply's own `from` field says.
Message AppendResponseMessage(uint64_t peer, uint64_t self, AppendEntriesResponse* resp);
Message VoteResponseMessage(uint64_t peer, uint64_t self, RequestVoteResponse* resp);
Message SnapshotResponseMessage(uint64_t peer, uint64_t self, const InstallSnapshotResponse& resp);

// Terms above this are refused from peers: the core increments terms, and a
// term near 2^64 would wrap around to 0.
constexpr uint64_t kMaxTerm = uint64_t{1} << 62;
// Likewise for log indexes (the core computes last index + 1).
constexpr uint64_t kMaxIndex = uint64_t{1} << 62;

// Structural checks of a message from a peer, made before it reaches
// Raft::Step(): things no correct member ever sends and that the core relies
// on (an AppendEntries' entries are numbered prev_log_index + 1, 2, ... and
// have non-decreasing terms between prev_log_term and the message's term; no
// // term beyond kMaxTerm, no index beyond kMaxIndex). OK for a well-formed
// message, otherwise InvalidArgument saying what is wrong with it. Sender and
// recipient are checked by the caller.
Status CheckPeerMessage(const Message& m);

}  // namespace raftkv::raft
