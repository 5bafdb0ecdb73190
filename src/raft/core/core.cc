#include "raft/core/core.h"

#include <glog/logging.h>

#include <algorithm>

namespace raftkv::raft {

namespace {

SnapshotRef InitialBase(const Config& config, const SnapshotRef& base) {
  if (base.index != 0) return base;
  SnapshotRef initial = base;
  initial.term = 0;
  initial.config = config.bootstrap.members_size() > 0 ? config.bootstrap : VotersConfig(config.voters);
  return initial;
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kFollower: return "follower";
    case Role::kPreCandidate: return "precandidate";
    case Role::kCandidate: return "candidate";
    case Role::kLeader: return "leader";
  }
  return "?";
}

Core::Core(const Config& config_in, const HardState& hard_state, const SnapshotRef& base,
           std::vector<Entry> entries)
    : config(config_in),
      term(hard_state.term),
      vote(hard_state.vote),
      persisted_hard_state(hard_state),
      log(config_in.id, InitialBase(config_in, base), std::move(entries), config_in.applied),
      rng(config_in.seed * 0x9E3779B97F4A7C15ull + config_in.id) {
  CHECK_GT(config.id, 0u) << "member id must be positive";
  CHECK_GE(config.election_ticks, 1);
  CHECK_GE(config.heartbeat_ticks, 1);
  const Status bad = CheckMembership(log.snapshot().config);
  CHECK(bad.ok()) << "invalid initial configuration: " << bad.message();
  CHECK_GE(term, log.last_term()) << "hard state term is behind the log";
  config_changed = true;  // the first Ready tells the service the configuration
}

bool Core::IsVoter(uint64_t member) const {
  const MemberConfig* m = FindMember(log.membership(), member);
  return m != nullptr && m->voter();
}

void Core::Send(Message m) {
  m.from = config.id;
  msgs.push_back(std::move(m));
}

Message Core::ReplyTo(const Message& request, MessageType type) const {
  Message resp;
  resp.type = type;
  resp.from = config.id;
  resp.to = request.from;
  resp.rpc_id = request.rpc_id;
  switch (type) {
    case MessageType::kAppendResp:
      resp.append_resp.set_term(term);
      resp.append_resp.set_from(config.id);
      break;
    case MessageType::kSnapshotResp:
      resp.snapshot_resp.set_term(term);
      resp.snapshot_resp.set_from(config.id);
      break;
    case MessageType::kVoteResp:
      resp.vote_resp.set_term(term);
      resp.vote_resp.set_from(config.id);
      break;
    default:
      LOG(FATAL) << "not a response type: " << static_cast<int>(type);
  }
  return resp;
}

void Core::RejectAppend(const Message& m) {
  Message resp = ReplyTo(m, MessageType::kAppendResp);
  resp.append_resp.set_success(false);
  resp.append_resp.set_rejected_index(m.append.prev_log_index());
  resp.append_resp.set_last_log_index(log.last_index());
  Send(std::move(resp));
}

void Core::RejectSnapshot(const Message& m) {
  Message resp = ReplyTo(m, MessageType::kSnapshotResp);
  resp.snapshot_resp.set_success(false);
  resp.snapshot_resp.set_last_log_index(log.last_index());
  Send(std::move(resp));
}

void Core::RejectVote(const Message& m) {
  Message resp = ReplyTo(m, MessageType::kVoteResp);
  resp.vote_resp.set_granted(false);
  resp.vote_resp.set_pre_vote(m.vote.pre_vote());
  Send(std::move(resp));
}

void Core::ResetElectionTimer() {
  election_elapsed = 0;
  randomized_election_timeout =
      config.election_ticks + static_cast<int>(rng() % static_cast<uint64_t>(config.election_ticks));
}

void Core::BecomeFollower(uint64_t new_term, uint64_t leader) {
  if (new_term > term) {
    term = new_term;
    vote = 0;
  }
  if (role != Role::kFollower || leader_id != leader) {
    VLOG(1) << "member " << config.id << " follower in term " << term << ", leader " << leader;
  }
  role = Role::kFollower;
  leader_id = leader;
  ResetElectionTimer();
}

void Core::OnMembershipChanged() {
  config_changed = true;
  LOG(INFO) << "member " << config.id << " configuration now " << DescribeMembership(log.membership())
            << " (entry " << log.membership_index() << ")";
  // Requests queued for a server that is no longer a member are dropped:
  // the service dials the members of the configuration a Ready reports
  // (responses travel back on the call they answer and are kept).
  msgs.erase(std::remove_if(msgs.begin(), msgs.end(),
                            [this](const Message& m) {
                              return !m.IsResponse() && FindMember(log.membership(), m.to) == nullptr;
                            }),
             msgs.end());
}

bool Core::AppendToLog(std::vector<Entry> entries) {
  const bool changed = log.Append(std::move(entries));
  if (changed) OnMembershipChanged();
  return changed;
}

bool Core::AppendToLog(Entry entry) {
  const bool changed = log.Append(std::move(entry));
  if (changed) OnMembershipChanged();
  return changed;
}

}  // namespace raftkv::raft
