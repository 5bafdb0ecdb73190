// Messages exchanged by consensus cores. A Message is what one core asks to be
// delivered to another; the service layer maps each kind onto a gRPC call
// (requests) or onto the reply of the call that carried the request
// (responses), using `rpc_id` to pair them.
#pragma once

#include <cstdint>
#include <string>

#include "raftkv.pb.h"

namespace raftkv::raft {

enum class MessageType {
  kAppend,        // AppendEntriesRequest (also the heartbeat: no entries)
  kAppendResp,    // AppendEntriesResponse
  kVote,          // RequestVoteRequest (PreVote when vote.pre_vote())
  kVoteResp,      // RequestVoteResponse
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

  bool IsResponse() const {
    return type == MessageType::kAppendResp || type == MessageType::kVoteResp;
  }
  uint64_t Term() const;
  std::string DebugString() const;
};

}  // namespace raftkv::raft
