// KvStateMachine, the reads: Get, Range (now and at a past revision),
// ReadTxn, ReadEvents, the compares of a transaction, and the estimates of
// what an answer would carry (kv_state_machine.h).
#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "kv/kv_internal.h"
#include "kv/kv_state_machine.h"

namespace raftkv {

using kv_internal::TooLarge;

namespace {

// What a key-value adds to an answer, at most (the message's framing included).
size_t KeyValueBytes(const std::string& key, const KvRecord& r, bool keys_only) {
  return key.size() + (keys_only ? 0 : r.value.size()) + KvStateMachine::kVisitCost;
}

// A range's answer being built: the count, and the key-values up to the
// request's limit and a byte bound.
class RangeBuilder {
 public:
  RangeBuilder(const RangeRequest& req, RangeResponse* resp, size_t max_bytes)
      : req_(req), resp_(resp), max_bytes_(max_bytes) {}
  // Adds one key (count, and the key-value unless count_only or past the
  // limit). False once the answer would exceed max_bytes: stop.
  bool Add(const std::string& key, const KvRecord& r) {
    resp_->set_count(resp_->count() + 1);
    if (req_.count_only()) return true;
    if (req_.limit() > 0 && resp_->kvs_size() >= req_.limit()) {
      resp_->set_more(true);
      return true;
    }
    bytes_ += KeyValueBytes(key, r, req_.keys_only());
    if (max_bytes_ > 0 && bytes_ > max_bytes_) {
      exceeded_ = true;
      return false;
    }
    ToKeyValue(key, r, req_.keys_only(), resp_->add_kvs());
    return true;
  }
  Status Done() const {
    if (!exceeded_) return Status::OK();
    return Status::ResourceExhausted(
        "the answer exceeds " + std::to_string(max_bytes_) +
        " bytes (--max_response_bytes) after " + std::to_string(resp_->kvs_size()) +
        " keys; ask for fewer with limit (and continue from the last key), keys_only or count_only");
  }

 private:
  const RangeRequest& req_;
  RangeResponse* const resp_;
  const size_t max_bytes_;
  size_t bytes_ = 0;
  bool exceeded_ = false;
};

}  // namespace

std::optional<std::string> KvStateMachine::Get(const std::string& key) const {
  ReaderLock lock(&mu_);
  const KvRecord* r = data_.find(key);
  if (r == nullptr) return std::nullopt;
  return r->value;
}

std::optional<KvRecord> KvStateMachine::GetRecord(const std::string& key, int64_t* revision) const {
  ReaderLock lock(&mu_);
  if (revision != nullptr) *revision = revision_;
  const KvRecord* r = data_.find(key);
  if (r == nullptr) return std::nullopt;
  return *r;
}

Status KvStateMachine::RangeLocked(const RangeRequest& req, RangeResponse* resp,
                                   size_t max_bytes) const {
  RangeBuilder out(req, resp, max_bytes);
  const std::string& key = req.key();
  if (req.range_end().empty()) {
    if (const KvRecord* r = data_.find(key)) out.Add(key, *r);
    return out.Done();
  }
  for (auto it = data_.lower_bound(key); it.Valid() && InKeyRange(it.key(), key, req.range_end());
       it.Next()) {
    if (!out.Add(it.key(), it.value())) break;
  }
  return out.Done();
}

Status KvStateMachine::RangeAtLocked(const RangeRequest& req, RangeResponse* resp,
                                     size_t max_bytes) const {
  const int64_t at = req.revision();
  if (at > revision_) {
    return Status::OutOfRange("revision " + std::to_string(at) +
                              " is a future revision (the store is at " +
                              std::to_string(revision_) + ")");
  }
  if (at < history_.compacted()) {
    return Status::OutOfRange("revision " + std::to_string(at) +
                              " has been compacted; the oldest revision kept is " +
                              std::to_string(history_.compacted()));
  }
  // The keys of the range changed after `at`, with their state at `at`
  // (nullopt: absent then): the oldest change after `at` tells. Bounded by
  // the history window, not by the range.
  const std::string& end = req.range_end();
  std::map<std::string, std::optional<KvRecord>> then;
  for (size_t i = history_.size(); i > 0 && history_.at(i - 1).revision > at; --i) {
    const KvEvent& e = history_.at(i - 1);
    if (!InKeyRange(e.key, req.key(), end)) continue;
    then[e.key] = e.has_prev ? std::optional<KvRecord>(e.prev) : std::nullopt;
  }
  // The map now and those changes undone, merged in key order as the answer
  // is built (so limit and the byte bound stop the copying).
  RangeBuilder out(req, resp, max_bytes);
  auto changed = then.begin();
  auto add_changed_before = [&](const std::string* key) {
    for (; changed != then.end() && (key == nullptr || changed->first < *key); ++changed) {
      if (changed->second && !out.Add(changed->first, *changed->second)) return false;
    }
    return true;
  };
  auto add_current = [&](const std::string& k, const KvRecord& r) {
    if (!add_changed_before(&k)) return false;
    if (changed != then.end() && changed->first == k) {  // changed since: its state then
      const bool more = !changed->second || out.Add(k, *changed->second);
      ++changed;
      return more;
    }
    return out.Add(k, r);
  };
  bool more = true;
  if (end.empty()) {
    if (const KvRecord* r = data_.find(req.key())) more = add_current(req.key(), *r);
  } else {
    for (auto it = data_.lower_bound(req.key()); more && it.Valid() && InKeyRange(it.key(), req.key(), end);
         it.Next()) {
      more = add_current(it.key(), it.value());
    }
  }
  if (more) add_changed_before(nullptr);
  return out.Done();
}

Status KvStateMachine::Range(const RangeRequest& req, RangeResponse* resp, size_t max_bytes) const {
  resp->Clear();
  {
    ReaderLock lock(&mu_);
    resp->mutable_header()->set_revision(revision_);
    if (req.revision() != 0 && req.revision() != revision_) return RangeAtLocked(req, resp, max_bytes);
    if (req.range_end().empty()) return RangeLocked(req, resp, max_bytes);
  }
  // A range of the current state: walked outside the lock on an O(1)
  // copy-on-write image, so a long range does not hold up Apply().
  CowBTree<std::string, KvRecord> image;
  {
    ReaderLock lock(&mu_);
    if (resp->header().revision() != revision_) {  // moved on in between: use the new one
      resp->mutable_header()->set_revision(revision_);
    }
    image = data_;
  }
  RangeBuilder out(req, resp, max_bytes);
  for (auto it = image.lower_bound(req.key());
       it.Valid() && InKeyRange(it.key(), req.key(), req.range_end()); it.Next()) {
    if (!out.Add(it.key(), it.value())) break;
  }
  return out.Done();
}

Status KvStateMachine::ReadTxn(const TxnRequest& req, TxnResponse* resp, size_t max_bytes) const {
  resp->Clear();
  ReaderLock lock(&mu_);
  const bool succeeded = CompareAllLocked(req);
  resp->set_succeeded(succeeded);
  resp->mutable_header()->set_revision(revision_);
  size_t used = 0;
  for (const RequestOp& op : succeeded ? req.success() : req.failure()) {
    RangeResponse* r = resp->add_responses()->mutable_response_range();
    const size_t left = max_bytes == 0 ? 0 : max_bytes - std::min(max_bytes, used);
    if (max_bytes > 0 && left == 0) {
      return Status::ResourceExhausted("the transaction's answer exceeds " + std::to_string(max_bytes) +
                                       " bytes (--max_response_bytes); read less in each");
    }
    Status s = RangeLocked(op.request_range(), r, left);
    if (!s.ok()) return s;
    used += r->ByteSizeLong();
    r->mutable_header()->set_revision(revision_);
  }
  return Status::OK();
}

Status KvStateMachine::ReadEvents(const std::string& key, const std::string& end, int64_t from,
                                  size_t max_bytes, EventBatch* out) const {
  out->events.clear();
  ReaderLock lock(&mu_);
  out->revision = revision_;
  if (from <= history_.compacted()) {
    return Status::OutOfRange("revision " + std::to_string(from) +
                              " has been compacted; the oldest revision a watch may start at is " +
                              std::to_string(history_.compacted() + 1));
  }
  size_t bytes = 0;
  size_t i = history_.LowerBound(from);
  out->next_revision = std::max(from, revision_ + 1);
  while (i < history_.size()) {
    const int64_t rev = history_.at(i).revision;
    for (; i < history_.size() && history_.at(i).revision == rev; ++i) {
      const KvEvent& e = history_.at(i);
      if (!InKeyRange(e.key, key, end)) continue;
      bytes += e.Bytes();
      out->events.push_back(e);
    }
    if (bytes >= max_bytes && i < history_.size()) {
      out->next_revision = rev + 1;
      break;
    }
  }
  return Status::OK();
}

bool KvStateMachine::CompareHolds(const Compare& c) const {
  const KvRecord* r = data_.find(c.key());
  int cmp = 0;
  auto three_way = [](int64_t a, int64_t b) { return a < b ? -1 : (a > b ? 1 : 0); };
  switch (c.target()) {
    case Compare::VALUE:
      if (r == nullptr) return false;  // as etcd: no value to compare
      cmp = r->value.compare(c.value());
      cmp = cmp < 0 ? -1 : (cmp > 0 ? 1 : 0);
      break;
    case Compare::VERSION: cmp = three_way(r ? r->version : 0, c.version()); break;
    case Compare::CREATE: cmp = three_way(r ? r->create_revision : 0, c.create_revision()); break;
    case Compare::MOD: cmp = three_way(r ? r->mod_revision : 0, c.mod_revision()); break;
    case Compare::LEASE: cmp = three_way(r ? r->lease : 0, c.lease()); break;
    default: return false;
  }
  switch (c.result()) {
    case Compare::EQUAL: return cmp == 0;
    case Compare::NOT_EQUAL: return cmp != 0;
    case Compare::GREATER: return cmp > 0;
    case Compare::LESS: return cmp < 0;
    default: return false;
  }
}

bool KvStateMachine::CompareAllLocked(const TxnRequest& txn) const {
  for (const Compare& c : txn.compare()) {
    if (!CompareHolds(c)) return false;
  }
  return true;
}

size_t KvStateMachine::RangeCostLocked(const std::string& key, const std::string& end,
                                       bool keys_only, bool count_only, int64_t limit,
                                       size_t budget) const {
  size_t cost = 0;
  int64_t carried = 0;
  auto visit = [&](const std::string& k, const KvRecord& r) {
    const bool carries = !count_only && (limit <= 0 || carried < limit);
    if (carries) ++carried;
    cost += carries ? KeyValueBytes(k, r, keys_only) : kVisitCost;
    return cost <= budget;
  };
  if (end.empty()) {
    if (const KvRecord* r = data_.find(key)) visit(key, *r);
    return cost;
  }
  for (auto it = data_.lower_bound(key); it.Valid() && InKeyRange(it.key(), key, end); it.Next()) {
    if (!visit(it.key(), it.value())) break;
  }
  return cost;
}

size_t KvStateMachine::EstimateAnswerLocked(const google::protobuf::RepeatedPtrField<RequestOp>& ops,
                                            size_t budget) const {
  size_t total = 0;
  for (const RequestOp& op : ops) {
    if (total > budget) break;
    const size_t left = budget - total;
    if (op.has_request_range()) {
      const RangeRequest& r = op.request_range();
      total += RangeCostLocked(r.key(), r.range_end(), r.keys_only(), r.count_only(), r.limit(), left);
      // A key this list puts may show up in the range as well (from above:
      // whether the put comes before the range or not).
      for (const RequestOp& other : ops) {
        if (!other.has_request_put() || !InKeyRange(other.request_put().key(), r.key(), r.range_end())) continue;
        total += other.request_put().key().size() + kVisitCost +
                 (r.keys_only() || r.count_only() ? 0 : other.request_put().value().size());
      }
    } else if (op.has_request_delete_range()) {
      const DeleteRangeRequest& d = op.request_delete_range();
      if (d.prev_kv()) total += RangeCostLocked(d.key(), d.range_end(), false, false, 0, left);
    } else if (op.has_request_put() && op.request_put().prev_kv()) {
      total += RangeCostLocked(op.request_put().key(), "", false, false, 0, left);
    }
  }
  return total;
}

Status KvStateMachine::CheckTxnAnswer(const TxnRequest& req, size_t max_bytes) const {
  if (max_bytes == 0) return Status::OK();
  ReaderLock lock(&mu_);
  const auto& ops = CompareAllLocked(req) ? req.success() : req.failure();
  if (EstimateAnswerLocked(ops, max_bytes) > max_bytes) {
    return Status::ResourceExhausted(TooLarge("this transaction", max_bytes));
  }
  return Status::OK();
}

Status KvStateMachine::CheckDeleteAnswer(const std::string& key, const std::string& end,
                                         size_t max_bytes) const {
  if (max_bytes == 0) return Status::OK();
  ReaderLock lock(&mu_);
  if (RangeCostLocked(key, end, false, false, 0, max_bytes) > max_bytes) {
    return Status::ResourceExhausted(TooLarge("this delete with prev_kv", max_bytes));
  }
  return Status::OK();
}

}  // namespace raftkv
