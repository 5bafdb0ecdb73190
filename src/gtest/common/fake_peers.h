// FakePeers: a PeerSender that plays the other members of a cluster without
// any network, for tests of RaftNode and of the server around it.
#pragma once

#include <atomic>
#include <mutex>
#include <vector>

#include "raft/core/message.h"
#include "node/node.h"

namespace raftkv::testing_util {

// A PeerSender standing in for the other members. It records every message
// and, when told to, answers like live followers would: granting (pre)votes
// and acknowledging AppendEntries (echoing the read round). Answers are
// delivered synchronously through RaftNode::StepResponse from the sending
// thread (the node's I/O loop, which holds no lock while sending).
class FakePeers : public PeerSender {
 public:
  void set_node(RaftNode* node) { node_ = node; }
  void set_grant_votes(bool v) { grant_votes_ = v; }
  void set_ack_appends(bool v) { ack_appends_ = v; }

  void Send(raft::Message m) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      sent_.push_back(m);
    }
    RaftNode* node = node_.load();
    if (node == nullptr) return;
    raft::Message r;
    r.from = m.to;
    r.to = m.type == raft::MessageType::kAppend ? m.append.leader_id() : m.vote.candidate_id();
    if (m.type == raft::MessageType::kVote && grant_votes_) {
      r.type = raft::MessageType::kVoteResp;
      r.vote_resp.set_term(m.vote.term());
      r.vote_resp.set_from(m.to);
      r.vote_resp.set_granted(true);
      r.vote_resp.set_pre_vote(m.vote.pre_vote());
      node->StepResponse(r);
    } else if (m.type == raft::MessageType::kAppend && ack_appends_) {
      r.type = raft::MessageType::kAppendResp;
      const uint64_t last = m.append.prev_log_index() + m.append.entries_size();
      r.append_resp.set_term(m.append.term());
      r.append_resp.set_from(m.to);
      r.append_resp.set_success(true);
      r.append_resp.set_match_index(last);
      r.append_resp.set_last_log_index(last);
      r.append_resp.set_read_round(m.append.read_round());
      node->StepResponse(r);
    }
  }

  std::vector<raft::Message> sent() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  size_t sent_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_.size();
  }

 private:
  std::atomic<RaftNode*> node_{nullptr};
  std::atomic<bool> grant_votes_{false};
  std::atomic<bool> ack_appends_{false};
  mutable std::mutex mu_;
  std::vector<raft::Message> sent_;
};

}  // namespace raftkv::testing_util
