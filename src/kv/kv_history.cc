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
  revisions_.clear();
  bytes_ = 0;
  compacted_ = compacted;
}

void KvHistory::AppendRevision(int64_t revision, size_t bytes) {
  revisions_.push_back(Revision{revision, bytes});
  bytes_ += bytes;
  Trim();
}

void KvHistory::CompactThrough(int64_t revision) {
  while (!revisions_.empty() && revisions_.front().revision < revision) {
    bytes_ -= revisions_.front().bytes;
    revisions_.pop_front();
  }
  compacted_ = std::max(compacted_, revision - 1);
  compact_revision_ = std::max(compact_revision_, revision);
}

void KvHistory::Trim() {
  while (revisions_.size() > 1 &&
         (static_cast<uint64_t>(revisions_.back().revision - compacted_) > max_revisions_ ||
          bytes_ > max_bytes_)) {
    compacted_ = revisions_.front().revision;
    bytes_ -= revisions_.front().bytes;
    revisions_.pop_front();
  }
}

}  // namespace raftkv
