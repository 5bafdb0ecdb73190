#include "raft/core/log.h"

#include <glog/logging.h>

#include <algorithm>

namespace raftkv::raft {

RaftLog::RaftLog(uint64_t member, const SnapshotRef& base, std::vector<Entry> entries, uint64_t applied)
    : member_(member), snapshot_(base), entries_(std::move(entries)) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    CHECK_EQ(entries_[i].index(), snapshot_.index + i + 1) << "recovered log is not contiguous";
    const uint64_t previous = i == 0 ? snapshot_.term : entries_[i - 1].term();
    CHECK(entries_[i].term() >= previous) << "log terms decrease at " << entries_[i].index();
  }
  TrackConfigs(0);
  CHECK_LE(applied, last_index()) << "the state machine applied entries the log does not hold";
  commit_ = std::max(snapshot_.index, applied);
  applied_sent_ = commit_;
  unstable_from_ = last_index() + 1;
  durable_index_ = last_index();
}

uint64_t RaftLog::TermAt(uint64_t index) const {
  if (index == snapshot_.index) return snapshot_.term;
  if (index < snapshot_.index || index > last_index()) return 0;
  return entries_[index - snapshot_.index - 1].term();
}

MembershipConfig RaftLog::MembershipAt(uint64_t index) const {
  for (auto it = configs_.rbegin(); it != configs_.rend(); ++it) {
    if (it->first <= index) return it->second;
  }
  return snapshot_.config;
}

void RaftLog::TrackConfigs(size_t from) {
  for (size_t i = from; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (e.type() != ENTRY_CONFIG) continue;
    MembershipConfig config;
    const Status bad =
        config.ParseFromString(e.data()) ? CheckMembership(config) : Status::InvalidArgument("does not parse");
    if (!bad.ok()) {
      // Every member sees the same entry, so every member ignores it alike.
      LOG(ERROR) << "member " << member_ << " ignores configuration entry " << e.index() << ": "
                 << bad.message();
      continue;
    }
    configs_.emplace_back(e.index(), std::move(config));
  }
}

bool RaftLog::Append(std::vector<Entry> entries) {
  if (entries.empty()) return false;
  const uint64_t first = entries.front().index();
  CHECK(first > snapshot_.index && first <= last_index() + 1)
      << "append at " << first << " outside " << first_index() << ".." << last_index() + 1;
  bool changed = false;
  if (first <= last_index()) {
    CHECK_GT(first, commit_) << "member " << member_ << " would truncate committed entry";
    LOG(INFO) << "member " << member_ << " truncates conflicting log suffix from " << first
              << " (last was " << last_index() << ")";
    entries_.resize(first - first_index());
    unstable_from_ = std::min(unstable_from_, first);
    durable_index_ = std::min(durable_index_, first - 1);
    while (!configs_.empty() && configs_.back().first >= first) {
      configs_.pop_back();
      changed = true;
    }
  }
  const size_t old_size = entries_.size();
  const size_t old_configs = configs_.size();
  for (Entry& e : entries) entries_.push_back(std::move(e));
  TrackConfigs(old_size);
  return changed || configs_.size() != old_configs;
}

bool RaftLog::Append(Entry entry) {
  CHECK_EQ(entry.index(), last_index() + 1);
  const bool config = entry.type() == ENTRY_CONFIG;
  entries_.push_back(std::move(entry));
  if (!config) return false;
  const size_t old_configs = configs_.size();
  TrackConfigs(entries_.size() - 1);
  return configs_.size() != old_configs;
}

void RaftLog::ResetToSnapshot(const SnapshotRef& base) {
  entries_.clear();
  configs_.clear();
  snapshot_ = base;
  commit_ = base.index;
  applied_sent_ = base.index;
  unstable_from_ = base.index + 1;
  durable_index_ = base.index;
}

bool RaftLog::Compact(uint64_t index) {
  if (index <= snapshot_.index || index > applied_sent_ || index >= unstable_from_) return false;
  SnapshotRef next;
  next.index = index;
  next.term = TermAt(index);
  next.config = MembershipAt(index);
  next.cluster_time_ms = EntryAt(index).cluster_time_ms();
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(index - snapshot_.index));
  while (!configs_.empty() && configs_.front().first <= index) configs_.erase(configs_.begin());
  snapshot_ = std::move(next);
  VLOG(1) << "member " << member_ << " compacted its log up to " << index;
  return true;
}

void RaftLog::CommitTo(uint64_t index) {
  CHECK_LE(index, last_index());
  commit_ = std::max(commit_, index);
}

std::vector<Entry> RaftLog::TakeUnstable() {
  std::vector<Entry> out;
  if (!HasUnstable()) return out;
  out.assign(entries_.begin() + static_cast<std::ptrdiff_t>(unstable_from_ - first_index()), entries_.end());
  unstable_from_ = last_index() + 1;
  return out;
}

std::vector<Entry> RaftLog::TakeCommitted() {
  std::vector<Entry> out;
  if (!HasCommittedToApply()) return out;
  out.assign(entries_.begin() + static_cast<std::ptrdiff_t>(applied_sent_ - snapshot_.index),
             entries_.begin() + static_cast<std::ptrdiff_t>(commit_ - snapshot_.index));
  applied_sent_ = commit_;
  return out;
}

void RaftLog::OnPersisted(const std::vector<Entry>& entries) {
  if (entries.empty()) return;
  const Entry& last = entries.back();
  // The entries may have been replaced by a conflicting suffix after
  // TakeUnstable(); only count them durable if they are still in the log.
  if (TermAt(last.index()) == last.term()) {
    durable_index_ = std::max(durable_index_, last.index());
  } else {
    durable_index_ = std::min(durable_index_, entries.front().index() - 1);
  }
}

}  // namespace raftkv::raft
