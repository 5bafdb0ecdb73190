#include "raft/core/message.h"

#include "raft/core/membership.h"

#include <algorithm>
#include <limits>
#include <sstream>

namespace raftkv::raft {

const char* MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kAppend: return "Append";
    case MessageType::kAppendResp: return "AppendResp";
    case MessageType::kVote: return "Vote";
    case MessageType::kVoteResp: return "VoteResp";
    case MessageType::kSnapshot: return "Snapshot";
    case MessageType::kSnapshotResp: return "SnapshotResp";
    case MessageType::kTimeoutNow: return "TimeoutNow";
  }
  return "?";
}

uint64_t Message::Term() const {
  switch (type) {
    case MessageType::kAppend: return append.term();
    case MessageType::kAppendResp: return append_resp.term();
    case MessageType::kVote: return vote.term();
    case MessageType::kVoteResp: return vote_resp.term();
    case MessageType::kSnapshot: return snapshot.term();
    case MessageType::kSnapshotResp: return snapshot_resp.term();
    case MessageType::kTimeoutNow: return timeout_now.term();
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
    case MessageType::kSnapshot:
      out << " snap=" << snapshot.last_index() << "/" << snapshot.last_term()
          << " members=" << snapshot.config().members_size();
      break;
    case MessageType::kSnapshotResp:
      out << (snapshot_resp.success() ? " ok match=" : " refused") << snapshot_resp.match_index()
          << " last=" << snapshot_resp.last_log_index();
      break;
    case MessageType::kTimeoutNow:
      break;
  }
  return out.str();
}

Message AppendRequestMessage(AppendEntriesRequest* req) {
  Message m;
  m.type = MessageType::kAppend;
  m.from = req->leader_id();
  m.to = req->to();
  m.append.Swap(req);
  return m;
}

Message VoteRequestMessage(RequestVoteRequest* req) {
  Message m;
  m.type = MessageType::kVote;
  m.from = req->candidate_id();
  m.to = req->to();
  m.vote.Swap(req);
  return m;
}

Message SnapshotRequestMessage(const InstallSnapshotRequest& req) {
  Message m;
  m.type = MessageType::kSnapshot;
  m.from = req.leader_id();
  m.to = req.to();
  m.snapshot.set_term(req.term());
  m.snapshot.set_leader_id(req.leader_id());
  m.snapshot.set_last_index(req.last_index());
  m.snapshot.set_last_term(req.last_term());
  *m.snapshot.mutable_config() = req.config();
  m.snapshot.set_to(req.to());
  m.snapshot.set_cluster_time_ms(req.cluster_time_ms());
  return m;
}

Message TimeoutNowMessage(const TimeoutNowRequest& req) {
  Message m;
  m.type = MessageType::kTimeoutNow;
  m.from = req.leader_id();
  m.to = req.to();
  m.timeout_now = req;
  return m;
}

Message SnapshotResponseMessage(uint64_t peer, uint64_t self, const InstallSnapshotResponse& resp) {
  Message m;
  m.type = MessageType::kSnapshotResp;
  m.from = peer;
  m.to = self;
  m.snapshot_resp = resp;
  return m;
}

Message AppendResponseMessage(uint64_t peer, uint64_t self, AppendEntriesResponse* resp) {
  Message m;
  m.type = MessageType::kAppendResp;
  m.from = peer;
  m.to = self;
  m.append_resp.Swap(resp);
  return m;
}

Message VoteResponseMessage(uint64_t peer, uint64_t self, RequestVoteResponse* resp) {
  Message m;
  m.type = MessageType::kVoteResp;
  m.from = peer;
  m.to = self;
  m.vote_resp.Swap(resp);
  return m;
}

Status CheckPeerMessage(const Message& m) {
  const uint64_t term = m.Term();
  if (term > kMaxTerm) return Status::InvalidArgument("term " + std::to_string(term) + " is out of range");
  if (m.type == MessageType::kVote) {
    if (m.vote.last_log_term() > term) {
      return Status::InvalidArgument("last_log_term " + std::to_string(m.vote.last_log_term()) + " is above the term " +
             std::to_string(term));
    }
    return Status::OK();
  }
  if (m.type == MessageType::kSnapshot) {
    if (m.snapshot.last_term() > term || m.snapshot.last_index() == 0 ||
        m.snapshot.last_term() == 0) {
      return Status::InvalidArgument("snapshot " + std::to_string(m.snapshot.last_index()) + "/" +
             std::to_string(m.snapshot.last_term()) + " is invalid in term " + std::to_string(term));
    }
    if (m.snapshot.last_index() > kMaxIndex) {
      return Status::InvalidArgument("snapshot index " + std::to_string(m.snapshot.last_index()) + " is out of range");
    }
    const Status bad = CheckMembership(m.snapshot.config());
    if (!bad.ok()) return Status::InvalidArgument("snapshot configuration: " + bad.message());
    return Status::OK();
  }
  if (m.type != MessageType::kAppend) return Status::OK();
  const AppendEntriesRequest& req = m.append;
  if (req.prev_log_term() > term) {
    return Status::InvalidArgument("prev_log_term " + std::to_string(req.prev_log_term()) + " is above the term " +
           std::to_string(term));
  }
  const uint64_t n = static_cast<uint64_t>(req.entries_size());
  if (req.prev_log_index() > kMaxIndex - std::min(n, kMaxIndex)) {
    return Status::InvalidArgument("prev_log_index " + std::to_string(req.prev_log_index()) + " with " +
           std::to_string(n) + " entries overflows");
  }
  uint64_t previous_term = req.prev_log_term();
  for (uint64_t i = 0; i < n; ++i) {
    const Entry& e = req.entries(static_cast<int>(i));
    const uint64_t index = req.prev_log_index() + 1 + i;
    if (e.index() != index) {
      return Status::InvalidArgument("entry " + std::to_string(i) + " has index " + std::to_string(e.index()) +
             ", expected " + std::to_string(index));
    }
    if (e.term() == 0 || e.term() > term || e.term() < previous_term) {
      return Status::InvalidArgument("entry " + std::to_string(index) + " has term " + std::to_string(e.term()) +
             " (terms must be >= 1, non-decreasing from prev_log_term " +
             std::to_string(req.prev_log_term()) + " and at most the message's term " +
             std::to_string(term) + ")");
    }
    previous_term = e.term();
  }
  return Status::OK();
}

}  // namespace raftkv::raft
