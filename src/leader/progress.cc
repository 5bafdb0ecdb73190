#include "leader/progress.h"

#include <algorithm>

namespace raftkv::raft {

bool Progress::IsPaused() const {
  switch (state_) {
    case State::kProbe: return probe_sent_;
    case State::kReplicate:
      return inflight_.size() >= max_inflight_ ||
             (max_inflight_bytes_ > 0 && inflight_bytes_ >= max_inflight_bytes_);
    case State::kSnapshot: return true;
  }
  return false;
}

void Progress::OnSent(uint64_t last, uint64_t bytes) {
  if (state_ == State::kProbe) {
    probe_sent_ = true;
    return;
  }
  if (last >= next_) {
    next_ = last + 1;
    inflight_.push_back(Inflight{last, bytes});
    inflight_bytes_ += bytes;
  }
}

bool Progress::OnSuccess(uint64_t match) {
  while (!inflight_.empty() && inflight_.front().last <= match) {
    inflight_bytes_ -= inflight_.front().bytes;
    inflight_.pop_front();
  }
  if (match <= match_) return false;
  stalled_intervals_ = 0;
  match_ = match;
  next_ = std::max(next_, match + 1);
  return true;
}

bool Progress::OnReject(uint64_t rejected, uint64_t next_hint) {
  if (state_ == State::kReplicate) {
    // A rejection of something at or below the known match answers an old
    // message: the follower has since accepted more.
    if (rejected <= match_) return false;
    next_ = std::max(match_ + 1, std::min(next_hint, rejected));
    BecomeProbe();
    return true;
  }
  // Probing: only the answer to the latest probe (prev = next - 1) counts.
  if (rejected != next_ - 1) return false;
  next_ = std::max(match_ + 1, std::min(next_hint, rejected));
  probe_sent_ = false;
  return true;
}

void Progress::OnRegressed(uint64_t last_index) {
  match_ = std::min(match_, last_index);
  next_ = match_ + 1;
  BecomeProbe();
}

bool Progress::CheckStalled(int limit) {
  if (state_ != State::kReplicate || inflight_.empty()) {
    stalled_intervals_ = 0;
    return false;
  }
  return ++stalled_intervals_ >= limit;
}

void Progress::BecomeProbe() {
  stalled_intervals_ = 0;
  pending_snapshot_ = 0;
  state_ = State::kProbe;
  probe_sent_ = false;
  inflight_.clear();
  inflight_bytes_ = 0;
}

void Progress::BecomeSnapshot(uint64_t snapshot_index) {
  stalled_intervals_ = 0;
  state_ = State::kSnapshot;
  pending_snapshot_ = snapshot_index;
  probe_sent_ = false;
  inflight_.clear();
  inflight_bytes_ = 0;
}

void Progress::OnSnapshotInstalled(uint64_t match) {
  match_ = std::max(match_, match);
  next_ = match_ + 1;
  BecomeProbe();
}

const char* ProgressStateName(Progress::State state) {
  switch (state) {
    case Progress::State::kProbe: return "probe";
    case Progress::State::kReplicate: return "replicate";
    case Progress::State::kSnapshot: return "snapshot";
  }
  return "?";
}

void Progress::BecomeReplicate() {
  stalled_intervals_ = 0;
  state_ = State::kReplicate;
  next_ = match_ + 1;
  probe_sent_ = false;
  inflight_.clear();
  inflight_bytes_ = 0;
}

}  // namespace raftkv::raft
