// The input format of fuzz_raft_step, shared with the seed generator
// (make_corpus.cc). See fuzz_raft_step.cc.
#pragma once

#include <cstdint>

namespace raftkv::fuzz {

// Header: [flags:u8] [limits:u8], then operations [op:u8] [operands...].
enum RaftFlags : uint8_t {
  kSingleVoter = 1,   // voters {1}; otherwise {1, 2, 3}
  kNoPreVote = 2,
  kNoCheckQuorum = 4,
  // bits 3-4: length of the recovered log (0..3 entries); bits 5-6: how far
  // the recovered hard-state term is ahead of the log's last term.
};

enum RaftOp : uint8_t {
  kOpTick = 0,          // [count:u8] Tick() (count % 8) + 1 times
  kOpPropose,           // [data: u16 chunk]
  kOpReadIndex,         // [id:u8]
  kOpUnreachable,       // [peer:u8]
  kOpReady,             // GetReady, persist, Advance, apply
  kOpAppend,            // a structured AppendEntriesRequest (see MakeAppend)
  kOpAppendResp,        // a structured AppendEntriesResponse
  kOpVote,              // a structured RequestVoteRequest
  kOpVoteResp,          // a structured RequestVoteResponse
  kOpReply,             // [which:u8] [how:u8] a peer answers one sent request
  kOpRawProto,          // [kind:u8] [peer:u8] [proto: u16 chunk]
  kOpRestart,           // crash and recover from what was persisted
  kOpCount,
};

}  // namespace raftkv::fuzz
