// The Raft state that must survive a crash besides the log: the current term
// and the vote cast in it. The core hands it out in Ready::hard_state; the
// node saves it (raft/core/hard_state.h) before any vote is granted or
// any message of a new term is sent.
#pragma once

#include <cstdint>

namespace raftkv {

struct HardState {
  uint64_t term = 0;
  uint64_t vote = 0;  // member id voted for in `term`; 0 for none
  bool operator==(const HardState& o) const { return term == o.term && vote == o.vote; }
  bool operator!=(const HardState& o) const { return !(*this == o); }
};

}  // namespace raftkv
