// KvStateMachine, the reads: Get, Range (now and at a past revision),
// ReadTxn, ReadEvents, the compares of a transaction, and the estimates of
// what an answer would carry (kv_state_machine.h).
#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kv/kv_internal.h"
#include "kv/kv_state_machine.h"

namespace raftkv {

using kv_internal::TooLarge;

namespace {

// What a key-value adds to an answer, at most (the message's framing included).
size_t KeyValueBytes(const std::string& key, const KvRecord& r, bool keys_only) {
  return key.size() + (keys_only ? 0 : r.value.size()) + KvStateMachine::kVisitCost;
}

// Whether a range's answer is sorted other than ascending by key (as etcd:
// NONE with a target other than KEY is ascending by that target).
bool SortedByTarget(const RangeRequest& req) {
  if (req.sort_target() == RangeRequest::KEY) return req.sort_order() == RangeRequest::DESCEND;
  return true;
}

// Whether the record passes the request's revision filters (0: no bound).
bool PassesFilters(const RangeRequest& req, const KvRecord& r) {
  return (req.min_mod_revision() == 0 || r.mod_revision >= req.min_mod_revision()) &&
         (req.max_mod_revision() == 0 || r.mod_revision <= req.max_mod_revision()) &&
         (req.min_create_revision() == 0 || r.create_revision >= req.min_create_revision()) &&
         (req.max_create_revision() == 0 || r.create_revision <= req.max_create_revision());
}

// The sort target of `r` compared with that of `o` (<0, 0, >0).
int CompareTargets(RangeRequest::SortTarget target, const KvRecord& r, const KvRecord& o) {
  auto three_way = [](int64_t a, int64_t b) { return a < b ? -1 : (a > b ? 1 : 0); };
  switch (target) {
    case RangeRequest::VERSION: return three_way(r.version, o.version);
    case RangeRequest::CREATE: return three_way(r.create_revision, o.create_revision);
    case RangeRequest::MOD: return three_way(r.mod_revision, o.mod_revision);
    case RangeRequest::VALUE: return r.value.compare(o.value);
    default: return 0;
  }
}

// A range's answer being built: the count (every key of the range), and
// the key-values that pass the revision filters, up to the request's limit
// and a byte bound.
//
// In key order the key-values are copied as the range is walked, and the
// walk stops at the byte bound. Sorted by a target, every key that passes
// the filters must be seen before the first one is known: the builder
// keeps a pointer to each (to the walked map's or image's own key and
// record, which outlive the builder) and, with a limit, drops all but the
// best `limit` whenever it holds 2 * limit. So it holds at most
// min(2 * limit, the keys kept) pointers; and since every key answered
// costs the answer at least kVisitCost bytes, the walk stops (the answer
// would exceed max_bytes) once it holds more than max_bytes / kVisitCost of
// those that will be answered: with a byte bound, the pointers take at most
// half of it.
class RangeBuilder {
 public:
  RangeBuilder(const RangeRequest& req, RangeResponse* resp, size_t max_bytes)
      : req_(req), resp_(resp), max_bytes_(max_bytes), sorted_(SortedByTarget(req)) {}
  // Adds one key (count, and the key-value unless count_only, filtered out
  // or past the limit). False once the answer would exceed max_bytes: stop.
  // Sorted, `key` and `r` must live until Done().
  bool Add(const std::string& key, const KvRecord& r) {
    resp_->set_count(resp_->count() + 1);
    if (req_.count_only() || !PassesFilters(req_, r)) return true;
    if (sorted_) return Keep(key, r);
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
  // The answer complete (sorted, cut to the limit), or why not.
  Status Done() {
    if (sorted_ && !exceeded_) Answer();
    if (!exceeded_) return Status::OK();
    return Status::ResourceExhausted(
        "the answer exceeds " + std::to_string(max_bytes_) +
        " bytes (--max_response_bytes) after " + std::to_string(sorted_ ? kept_.size() : resp_->kvs_size()) +
        " keys; ask for fewer with limit (and continue from the last key), keys_only or count_only");
  }

 private:
  struct Item {
    const std::string* key;
    const KvRecord* record;
  };

  // Whether a is answered before b: by target (descending when asked),
  // keys with equal targets (and keys, by KEY) in key order.
  bool Before(const Item& a, const Item& b) const {
    const bool descend = req_.sort_order() == RangeRequest::DESCEND;
    if (req_.sort_target() == RangeRequest::KEY) return descend ? *b.key < *a.key : *a.key < *b.key;
    const int c = CompareTargets(req_.sort_target(), *a.record, *b.record);
    if (c != 0) return descend ? c > 0 : c < 0;
    return *a.key < *b.key;
  }
  size_t Limit() const {
    return req_.limit() > 0 ? static_cast<size_t>(req_.limit()) : std::numeric_limits<size_t>::max();
  }
  bool Keep(const std::string& key, const KvRecord& r) {
    kept_.push_back(Item{&key, &r});
    ++passed_;
    const size_t limit = Limit();
    if (limit <= kept_.size() / 2) {  // keep the best `limit`
      auto before = [this](const Item& a, const Item& b) { return Before(a, b); };
      std::nth_element(kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(limit), kept_.end(), before);
      kept_.resize(limit);
    }
    if (max_bytes_ > 0 && std::min(kept_.size(), limit) > max_bytes_ / KvStateMachine::kVisitCost) {
      exceeded_ = true;  // at least this many keys answered, at kVisitCost bytes or more each
      return false;
    }
    return true;
  }
  void Answer() {
    auto before = [this](const Item& a, const Item& b) { return Before(a, b); };
    std::sort(kept_.begin(), kept_.end(), before);
    const size_t limit = Limit();
    if (kept_.size() > limit) kept_.resize(limit);
    resp_->set_more(passed_ > limit);
    for (const Item& item : kept_) {
      bytes_ += KeyValueBytes(*item.key, *item.record, req_.keys_only());
      if (max_bytes_ > 0 && bytes_ > max_bytes_) {
        resp_->clear_kvs();
        exceeded_ = true;
        return;
      }
    }
    resp_->mutable_kvs()->Reserve(static_cast<int>(kept_.size()));
    for (const Item& item : kept_) ToKeyValue(*item.key, *item.record, req_.keys_only(), resp_->add_kvs());
  }

  const RangeRequest& req_;
  RangeResponse* const resp_;
  const size_t max_bytes_;
  const bool sorted_;
  size_t bytes_ = 0;
  bool exceeded_ = false;
  std::vector<Item> kept_;  // sorted: the keys that may be answered
  size_t passed_ = 0;       // sorted: the keys that passed the filters
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
    return Status::OutOfRange("revision " + std::to_string(at) + " is a future revision (the store is at " +
                              std::to_string(revision_) + ")")
        .WithReason(Status::Reason::kFutureRevision);
  }
  if (at < history_.read_floor()) {
    return Status::OutOfRange("revision " + std::to_string(at) +
                              " has been compacted; the oldest revision kept is " +
                              std::to_string(history_.read_floor()))
        .WithReason(Status::Reason::kCompacted);
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
  size_t used = 0;
  return ReadTxnLocked(req, resp, max_bytes, &used);
}

Status KvStateMachine::ReadTxnLocked(const TxnRequest& req, TxnResponse* resp, size_t max_bytes,
                                     size_t* used) const {
  const bool succeeded = CompareAllLocked(req);
  resp->set_succeeded(succeeded);
  resp->mutable_header()->set_revision(revision_);
  for (const RequestOp& op : succeeded ? req.success() : req.failure()) {
    ResponseOp* out = resp->add_responses();
    if (op.has_request_txn()) {
      Status s = ReadTxnLocked(op.request_txn(), out->mutable_response_txn(), max_bytes, used);
      if (!s.ok()) return s;
      continue;
    }
    RangeResponse* r = out->mutable_response_range();
    const size_t left = max_bytes == 0 ? 0 : max_bytes - std::min(max_bytes, *used);
    if (max_bytes > 0 && left == 0) {
      return Status::ResourceExhausted("the transaction's answer exceeds " + std::to_string(max_bytes) +
                                       " bytes (--max_response_bytes); read less in each");
    }
    // A range at a past revision (only here: the checks refuse one in a
    // transaction that writes).
    const RangeRequest& range = op.request_range();
    Status s = range.revision() != 0 && range.revision() != revision_ ? RangeAtLocked(range, r, left)
                                                                      : RangeLocked(range, r, left);
    if (!s.ok()) return s;
    *used += r->ByteSizeLong();
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
                              std::to_string(history_.compacted() + 1))
        .WithReason(Status::Reason::kCompacted);
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

namespace {

// Whether compare `c` holds for one record (null: an absent key).
bool CompareRecord(const Compare& c, const KvRecord* r) {
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

}  // namespace

// Over a range, as etcd: the compare must hold for every key of it, and a
// range without keys compares as one absent key (false for VALUE). The walk
// copies nothing and stops at the first key it fails for.
bool KvStateMachine::CompareHolds(const Compare& c) const {
  if (c.range_end().empty()) return CompareRecord(c, data_.find(c.key()));
  bool any = false;
  for (auto it = data_.lower_bound(c.key()); it.Valid() && InKeyRange(it.key(), c.key(), c.range_end());
       it.Next()) {
    if (!CompareRecord(c, &it.value())) return false;
    any = true;
  }
  return any || CompareRecord(c, nullptr);
}

bool KvStateMachine::CompareAllLocked(const TxnRequest& txn) const {
  for (const Compare& c : txn.compare()) {
    if (!CompareHolds(c)) return false;
  }
  return true;
}

void KvStateMachine::TxnPathLocked(const TxnRequest& txn, std::vector<bool>* path) const {
  const bool succeeded = CompareAllLocked(txn);
  path->push_back(succeeded);
  for (const RequestOp& op : succeeded ? txn.success() : txn.failure()) {
    if (op.has_request_txn()) TxnPathLocked(op.request_txn(), path);
  }
}

size_t KvStateMachine::RangeCostLocked(const std::string& key, const std::string& end,
                                       size_t budget) const {
  RangeRequest whole;
  whole.set_key(key);
  whole.set_range_end(end);
  return RangeCostLocked(whole, budget);
}

size_t KvStateMachine::RangeCostLocked(const RangeRequest& req, size_t budget) const {
  const std::string& key = req.key();
  const std::string& end = req.range_end();
  if (SortedByTarget(req) && !req.count_only()) {
    // Which keys it carries is known once sorted: read it (its visits
    // counted first, so that the read is within the budget too).
    RangeRequest visits = req;
    visits.set_count_only(true);
    if (const size_t cost = RangeCostLocked(visits, budget); cost > budget) return cost;
    RangeResponse answer;
    if (!RangeLocked(req, &answer, budget).ok()) return budget + 1;
    size_t cost = static_cast<size_t>(answer.count() - answer.kvs_size()) * kVisitCost;
    for (const KeyValue& kv : answer.kvs()) cost += kv.key().size() + kv.value().size() + kVisitCost;
    return cost;
  }
  size_t cost = 0;
  int64_t carried = 0;
  auto visit = [&](const std::string& k, const KvRecord& r) {
    const bool carries = !req.count_only() && PassesFilters(req, r) &&
                         (req.limit() <= 0 || carried < req.limit());
    if (carries) ++carried;
    cost += carries ? KeyValueBytes(k, r, req.keys_only()) : kVisitCost;
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

size_t KvStateMachine::EstimateAnswerLocked(const std::vector<const RequestOp*>& ops,
                                            size_t budget) const {
  size_t total = 0;
  for (const RequestOp* op : ops) {
    if (total > budget) break;
    const size_t left = budget - total;
    if (op->has_request_range()) {
      const RangeRequest& r = op->request_range();
      total += RangeCostLocked(r, left);
      // A key these operations put may show up in the range as well (from
      // above: whether the put comes before the range or not).
      for (const RequestOp* other : ops) {
        if (!other->has_request_put() || !InKeyRange(other->request_put().key(), r.key(), r.range_end())) {
          continue;
        }
        total += other->request_put().key().size() + kVisitCost +
                 (r.keys_only() || r.count_only() ? 0 : other->request_put().value().size());
      }
    } else if (op->has_request_delete_range()) {
      const DeleteRangeRequest& d = op->request_delete_range();
      if (d.prev_kv()) total += RangeCostLocked(d.key(), d.range_end(), left);
    } else if (op->has_request_put() && op->request_put().prev_kv()) {
      total += RangeCostLocked(op->request_put().key(), "", left);
    }
  }
  return total;
}

Status KvStateMachine::CheckTxnAnswer(const TxnRequest& req, size_t max_bytes) const {
  if (max_bytes == 0) return Status::OK();
  ReaderLock lock(&mu_);
  std::vector<bool> path;
  TxnPathLocked(req, &path);
  std::vector<const RequestOp*> ops;
  size_t at = 0;
  kv_internal::TakenOps(req, path, &at, &ops);
  if (EstimateAnswerLocked(ops, max_bytes) > max_bytes) {
    return Status::ResourceExhausted(TooLarge("this transaction", max_bytes));
  }
  return Status::OK();
}

Status KvStateMachine::CheckDeleteAnswer(const std::string& key, const std::string& end,
                                         size_t max_bytes) const {
  if (max_bytes == 0) return Status::OK();
  ReaderLock lock(&mu_);
  if (RangeCostLocked(key, end, max_bytes) > max_bytes) {
    return Status::ResourceExhausted(TooLarge("this delete with prev_kv", max_bytes));
  }
  return Status::OK();
}

namespace kv_internal {

void TakenOps(const TxnRequest& txn, const std::vector<bool>& path, size_t* at,
              std::vector<const RequestOp*>* ops) {
  const bool succeeded = *at < path.size() && path[*at];
  ++*at;
  for (const RequestOp& op : succeeded ? txn.success() : txn.failure()) {
    if (op.has_request_txn()) {
      TakenOps(op.request_txn(), path, at, ops);
    } else {
      ops->push_back(&op);
    }
  }
}

}  // namespace kv_internal

}  // namespace raftkv
