// A leader's view of one follower's replication (as etcd's raft Progress).
//
// kProbe: the leader does not know where the follower's log matches its own;
// it sends one AppendEntries at a time and waits for the answer (or the next
// heartbeat) before sending another. kReplicate: the logs are known to match
// up to `match`; the leader streams entries optimistically from `next`,
// keeping at most max_inflight AppendEntries outstanding (pipelining).
// kSnapshot: the entries the follower needs were compacted away; the service
// is streaming it the leader's snapshot (pending_snapshot) and nothing else
// is sent until that ends (kSnapshotResp, or the transfer fails).
//
// Invariant, in every state: match < next. The entries up to `match` are on
// the follower (durable, acknowledged); `next` is the first one the leader
// will send. kProbe: the logs may differ anywhere in (match, next); a
// rejection moves `next` down (never to match or below), an acceptance
// moves `match` up. kReplicate: the entries in [match + 1, next) have been
// sent and are in flight (inflight_ holds the last index of each message);
// entering it sets next = match + 1. kSnapshot: no entries are sent;
// pending_snapshot is the snapshot's index, and once it is installed the
// follower probes from match + 1 (match = at least that index). `match`
// drops only when the follower reports that its log lost entries it had
// acknowledged (OnRegressed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

namespace raftkv::raft {

class Progress {
 public:
  enum class State { kProbe, kReplicate, kSnapshot };

  Progress() = default;
  // `max_inflight`: messages in flight in kReplicate; `max_inflight_bytes`:
  // their entry bytes (0 = no limit). One message may always be in flight,
  // however large.
  Progress(uint64_t next, size_t max_inflight, uint64_t max_inflight_bytes = 0)
      : next_(next), max_inflight_(max_inflight), max_inflight_bytes_(max_inflight_bytes) {}

  State state() const { return state_; }
  // Highest index known to be replicated (durable) on the follower.
  uint64_t match() const { return match_; }
  // Index of the next entry to send.
  uint64_t next() const { return next_; }
  // True when the leader should not send more entries now.
  bool IsPaused() const;
  // Whether the follower answered anything since the last CheckQuorum.
  bool recent_active() const { return recent_active_; }
  void set_recent_active(bool v) { recent_active_ = v; }
  // Called at each CheckQuorum (once per election timeout): starts a new
  // window of recent_active().
  void EndActivityWindow() {
    active_last_window_ = recent_active_;
    recent_active_ = false;
  }
  // The follower answered in this election timeout's window or the last one
  // (a whole window, whatever the moment of asking).
  bool RecentlyActive() const { return recent_active_ || active_last_window_; }

  // An AppendEntries carrying entries up to `last`, `bytes` of them, was sent.
  void OnSent(uint64_t last, uint64_t bytes = 0);
  // A success response says the follower matches up to `match`. Returns true
  // if that is news (match advanced).
  bool OnSuccess(uint64_t match);
  // A rejection of an AppendEntries whose prev_log_index was `rejected`.
  // `next_hint` is where the leader should retry from (computed from the
  // follower's conflict hints). Returns false if the rejection is stale
  // (answers an older message) and was ignored.
  bool OnReject(uint64_t rejected, uint64_t next_hint);
  // The follower's log ends at `last_index`, below match(): it no longer holds
  // entries it acknowledged (its recovery cut a damaged final record, which
  // it cannot tell from a torn write). Forgets the match and probes from
  // last_index + 1. Never lowers the commit index (the leader's), only what
  // this follower counts for.
  void OnRegressed(uint64_t last_index);
  // The follower could not be reached or a probe is due: allow one more probe.
  void ResumeProbe() { probe_sent_ = false; }
  void BecomeProbe();
  void BecomeReplicate();
  void BecomeSnapshot(uint64_t snapshot_index);
  // kSnapshot: the index of the snapshot being sent.
  uint64_t pending_snapshot() const { return pending_snapshot_; }
  // The follower now holds everything up to `match` (its snapshot
  // installed): probe from match + 1.
  void OnSnapshotInstalled(uint64_t match);
  // The leader's last AppendEntries seq when it last learnt this follower's
  // match: a rejection of a later message that shows a shorter log means
  // lost entries (OnRegressed); of an earlier one, a stale answer.
  uint64_t match_known_at_seq() const { return match_known_at_seq_; }
  void set_match_known_at_seq(uint64_t seq) { match_known_at_seq_ = seq; }
  size_t inflight() const { return inflight_.size(); }
  uint64_t inflight_bytes() const { return inflight_bytes_; }
  // Called once per heartbeat interval. Returns true when messages have been
  // in flight for `limit` intervals without the match advancing: one was
  // lost, and the caller should fall back to probing. (The transport reports
  // failed calls, but the core does not rely on every loss being reported.)
  bool CheckStalled(int limit);

 private:
  State state_ = State::kProbe;
  uint64_t match_ = 0;
  uint64_t next_ = 1;
  size_t max_inflight_ = 64;
  uint64_t max_inflight_bytes_ = 0;
  uint64_t match_known_at_seq_ = 0;
  bool probe_sent_ = false;        // kProbe: one message outstanding
  bool recent_active_ = false;
  bool active_last_window_ = false;
  // kReplicate: the last index and the entry bytes of each message in
  // flight, and the sum of those bytes.
  struct Inflight {
    uint64_t last = 0;
    uint64_t bytes = 0;
  };
  std::deque<Inflight> inflight_;
  uint64_t inflight_bytes_ = 0;
  int stalled_intervals_ = 0;      // heartbeat intervals with inflight_ stuck
  uint64_t pending_snapshot_ = 0;  // kSnapshot
};

const char* ProgressStateName(Progress::State state);

}  // namespace raftkv::raft
