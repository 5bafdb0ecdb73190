#include "kv/kv_history.h"

#include <algorithm>
#include <utility>

namespace raftkv {

bool InKeyRange(const std::string& key, const std::string& start, const std::string& end) {
  if (end.empty()) return key == start;
  if (key < start) return false;
  if (end.size() == 1 && end[0] == '\0') return true;
  return key < end;
}

void KvHistory::SetLimits(size_t max_revisions, size_t max_bytes) {
  max_revisions_ = max_revisions;
  max_bytes_ = max_bytes;
  Trim();
}

void KvHistory::Reset(int64_t compacted) {
  events_.clear();
  bytes_ = 0;
  compacted_ = compacted;
}

void KvHistory::AppendRevision(std::deque<KvEvent>* events) {
  for (KvEvent& e : *events) {
    bytes_ += e.Bytes();
    events_.push_back(std::move(e));
  }
  events->clear();
  Trim();
}

void KvHistory::CompactThrough(int64_t revision) {
  while (!events_.empty() && events_.front().revision < revision) {
    bytes_ -= events_.front().Bytes();
    events_.pop_front();
  }
  compacted_ = std::max(compacted_, revision - 1);
  compact_revision_ = std::max(compact_revision_, revision);
}

size_t KvHistory::LowerBound(int64_t revision) const {
  auto it = std::lower_bound(events_.begin(), events_.end(), revision,
                             [](const KvEvent& e, int64_t r) { return e.revision < r; });
  return static_cast<size_t>(it - events_.begin());
}

void KvHistory::Trim() {
  while (!events_.empty() && events_.front().revision < events_.back().revision &&
         (static_cast<uint64_t>(events_.back().revision - compacted_) > max_revisions_ ||
          bytes_ > max_bytes_)) {
    const int64_t oldest = events_.front().revision;
    while (events_.front().revision == oldest) {
      bytes_ -= events_.front().Bytes();
      events_.pop_front();
    }
    compacted_ = oldest;
  }
}

}  // namespace raftkv
