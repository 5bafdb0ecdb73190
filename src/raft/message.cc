#include "raft/message.h"

#include <sstream>

namespace raftkv::raft {

const char* MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kAppend: return "Append";
    case MessageType::kAppendResp: return "AppendResp";
    case MessageType::kVote: return "Vote";
    case MessageType::kVoteResp: return "VoteResp";
  }
  return "?";
}

uint64_t Message::Term() const {
  switch (type) {
    case MessageType::kAppend: return append.term();
    case MessageType::kAppendResp: return append_resp.term();
    case MessageType::kVote: return vote.term();
    case MessageType::kVoteResp: return vote_resp.term();
  }
  return 0;
}

std::string Message::DebugString() const {
  std::ostringstream out;
  out << MessageTypeName(type) << " " << from << "->" << to << " term=" << Term();
  switch (type) {
    case MessageType::kAppend:
      out << " prev=" << append.prev_log_index() << "/" << append.prev_log_term()
          << " n=" << append.entries_size() << " commit=" << append.leader_commit()
          << " round=" << append.read_round();
      break;
    case MessageType::kAppendResp:
      out << (append_resp.success() ? " ok match=" : " reject prev=")
          << (append_resp.success() ? append_resp.match_index() : append_resp.rejected_index())
          << " last=" << append_resp.last_log_index() << " round=" << append_resp.read_round();
      if (!append_resp.success()) {
        out << " conflict=" << append_resp.conflict_term() << "@" << append_resp.conflict_index();
      }
      break;
    case MessageType::kVote:
      out << (vote.pre_vote() ? " pre" : "") << " last=" << vote.last_log_index() << "/"
          << vote.last_log_term();
      break;
    case MessageType::kVoteResp:
      out << (vote_resp.pre_vote() ? " pre" : "") << (vote_resp.granted() ? " granted" : " denied");
      break;
  }
  return out.str();
}

}  // namespace raftkv::raft
