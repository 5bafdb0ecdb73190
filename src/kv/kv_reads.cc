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

#include <glog/logging.h>

#include "kv/kv_internal.h"
#include "kv/kv_state_machine.h"
#include "kv/mvcc_store.h"

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
// keeps a copy of each and, with a limit, drops all but the best `limit`
// whenever it holds 2 * limit. So it holds at most min(2 * limit, the keys
// kept) of them; since every key answered costs the answer at least
// kVisitCost bytes, the walk stops (the answer would exceed max_bytes) once
// it holds more than max_bytes / kVisitCost of those that will be
// answered; and without a limit, once the copies exceed max_bytes.
class RangeBuilder {
 public:
  RangeBuilder(const RangeRequest& req, RangeResponse* resp, size_t max_bytes)
      : req_(req), resp_(resp), max_bytes_(max_bytes), sorted_(SortedByTarget(req)) {}
  // Adds one key (count, and the key-value unless count_only, filtered out
  // or past the limit). False once the answer would exceed max_bytes: stop.
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
  // Whether the walk needs the keys' values: for the answer's key-values
  // (not with keys_only) or to sort them by value.
  bool NeedsValues() const {
    if (req_.count_only()) return false;
    return !req_.keys_only() || (sorted_ && req_.sort_target() == RangeRequest::VALUE);
  }
  // Whether every key the answer carries has been added: the rest of the
  // range is counted (and, with filters, looked at for `more`) only, which
  // takes no value.
  bool Carried() const {
    return !sorted_ && req_.limit() > 0 && resp_->kvs_size() >= req_.limit();
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
    std::string key;
    KvRecord record;
  };

  // Whether a is answered before b: by target (descending when asked),
  // keys with equal targets (and keys, by KEY) in key order.
  bool Before(const Item& a, const Item& b) const {
    const bool descend = req_.sort_order() == RangeRequest::DESCEND;
    if (req_.sort_target() == RangeRequest::KEY) return descend ? b.key < a.key : a.key < b.key;
    const int c = CompareTargets(req_.sort_target(), a.record, b.record);
    if (c != 0) return descend ? c > 0 : c < 0;
    return a.key < b.key;
  }
  size_t Limit() const {
    return req_.limit() > 0 ? static_cast<size_t>(req_.limit()) : std::numeric_limits<size_t>::max();
  }
  bool Keep(const std::string& key, const KvRecord& r) {
    kept_.push_back(Item{key, r});
    kept_bytes_ += KeyValueBytes(key, r, req_.keys_only());
    ++passed_;
    const size_t limit = Limit();
    if (limit <= kept_.size() / 2) {  // keep the best `limit`
      auto before = [this](const Item& a, const Item& b) { return Before(a, b); };
      std::nth_element(kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(limit), kept_.end(), before);
      kept_.resize(limit);
      kept_bytes_ = 0;
      for (const Item& item : kept_) kept_bytes_ += KeyValueBytes(item.key, item.record, req_.keys_only());
    }
    if (max_bytes_ > 0 && req_.limit() <= 0 && kept_bytes_ > max_bytes_) {
      exceeded_ = true;  // every key kept is answered
      return false;
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
      bytes_ += KeyValueBytes(item.key, item.record, req_.keys_only());
      if (max_bytes_ > 0 && bytes_ > max_bytes_) {
        resp_->clear_kvs();
        exceeded_ = true;
        return;
      }
    }
    resp_->mutable_kvs()->Reserve(static_cast<int>(kept_.size()));
    for (const Item& item : kept_) ToKeyValue(item.key, item.record, req_.keys_only(), resp_->add_kvs());
  }

  const RangeRequest& req_;
  RangeResponse* const resp_;
  const size_t max_bytes_;
  const bool sorted_;
  size_t bytes_ = 0;
  bool exceeded_ = false;
  std::vector<Item> kept_;  // sorted: the keys that may be answered
  size_t kept_bytes_ = 0;   // what kept_ would add to the answer
  size_t passed_ = 0;       // sorted: the keys that passed the filters
};

}  // namespace

KvStateMachine::ReadPoint KvStateMachine::Point() const {
  ReaderLock lock(&mu_);
  return ReadPoint{MvccReader(backend_->View()), revision_, history_.read_floor(), history_.compacted()};
}

void KvStateMachine::CheckRead(const Status& s) {
  LOG_IF(FATAL, !s.ok()) << "reading the key-value store failed: " << s.ToString();
}

std::optional<std::string> KvStateMachine::Get(const std::string& key) const {
  std::optional<KvRecord> r = GetRecord(key);
  if (!r) return std::nullopt;
  return std::move(r->value);
}

std::optional<KvRecord> KvStateMachine::GetRecord(const std::string& key, int64_t* revision) const {
  const ReadPoint p = Point();
  if (revision != nullptr) *revision = p.revision;
  std::optional<KvRecord> r;
  CheckRead(p.reader.Find(key, mvcc::kLatest, &r));
  return r;
}

Status KvStateMachine::RangeAt(const ReadPoint& p, const RangeRequest& req, RangeResponse* resp,
                               size_t max_bytes) {
  const int64_t at = req.revision() == 0 ? p.revision : req.revision();
  if (at > p.revision) {
    return Status::OutOfRange("revision " + std::to_string(at) + " is a future revision (the store is at " +
                              std::to_string(p.revision) + ")")
        .WithReason(Status::Reason::kFutureRevision);
  }
  if (at < p.read_floor) {
    return Status::OutOfRange("revision " + std::to_string(at) +
                              " has been compacted; the oldest revision kept is " +
                              std::to_string(p.read_floor))
        .WithReason(Status::Reason::kCompacted);
  }
  return kv_internal::RangeOf(MvccAt(&p.reader, at == p.revision ? mvcc::kLatest : at), req, resp,
                              max_bytes);
}

// Every read below works on the view of one apply, taken under the lock and
// read without it: a long read does not hold up Apply().
Status KvStateMachine::Range(const RangeRequest& req, RangeResponse* resp, size_t max_bytes) const {
  resp->Clear();
  const ReadPoint p = Point();
  resp->mutable_header()->set_revision(p.revision);
  return RangeAt(p, req, resp, max_bytes);
}

Status KvStateMachine::ReadTxn(const TxnRequest& req, TxnResponse* resp, size_t max_bytes) const {
  resp->Clear();
  size_t used = 0;
  return ReadTxnAt(Point(), req, resp, max_bytes, &used);
}

Status KvStateMachine::ReadTxnAt(const ReadPoint& p, const TxnRequest& req, TxnResponse* resp,
                                 size_t max_bytes, size_t* used) {
  bool succeeded = false;
  Status s = kv_internal::CompareAll(MvccAt(&p.reader, mvcc::kLatest), req, &succeeded);
  if (!s.ok()) return s;
  resp->set_succeeded(succeeded);
  resp->mutable_header()->set_revision(p.revision);
  for (const RequestOp& op : succeeded ? req.success() : req.failure()) {
    ResponseOp* out = resp->add_responses();
    if (op.has_request_txn()) {
      s = ReadTxnAt(p, op.request_txn(), out->mutable_response_txn(), max_bytes, used);
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
    s = RangeAt(p, op.request_range(), r, left);
    if (!s.ok()) return s;
    *used += r->ByteSizeLong();
    r->mutable_header()->set_revision(p.revision);
  }
  return Status::OK();
}

Status KvStateMachine::ReadEvents(const std::string& key, const std::string& end, int64_t from,
                                  size_t max_bytes, EventBatch* out) const {
  out->events.clear();
  const ReadPoint p = Point();
  out->revision = p.revision;
  if (from <= p.compacted) {
    return Status::OutOfRange("revision " + std::to_string(from) +
                              " has been compacted; the oldest revision a watch may start at is " +
                              std::to_string(p.compacted + 1))
        .WithReason(Status::Reason::kCompacted);
  }
  // Read whole, the events end at p.revision (it always has some), so
  // *next is then past it.
  int64_t next = 0;
  Status s = p.reader.ReadEvents(key, end, from, max_bytes, &out->events, &next);
  out->next_revision = std::max(next, from);
  return s;
}

Status KvStateMachine::CheckTxnAnswer(const TxnRequest& req, size_t max_bytes) const {
  if (max_bytes == 0) return Status::OK();
  const ReadPoint p = Point();
  const MvccAt now(&p.reader, mvcc::kLatest);
  std::vector<bool> path;
  Status s = kv_internal::TxnPath(now, req, &path);
  if (!s.ok()) return s;
  std::vector<const RequestOp*> ops;
  size_t at = 0;
  kv_internal::TakenOps(req, path, &at, &ops);
  size_t cost = 0;
  s = kv_internal::EstimateAnswer(now, ops, max_bytes, &cost);
  if (!s.ok()) return s;
  if (cost > max_bytes) return Status::ResourceExhausted(TooLarge("this transaction", max_bytes));
  return Status::OK();
}

Status KvStateMachine::CheckDeleteAnswer(const std::string& key, const std::string& end,
                                         size_t max_bytes) const {
  if (max_bytes == 0) return Status::OK();
  const ReadPoint p = Point();
  size_t cost = 0;
  Status s = kv_internal::RangeCost(MvccAt(&p.reader, mvcc::kLatest), key, end, max_bytes, &cost);
  if (!s.ok()) return s;
  if (cost > max_bytes) return Status::ResourceExhausted(TooLarge("this delete with prev_kv", max_bytes));
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

// Over a range, as etcd: the compare must hold for every key of it, and a
// range without keys compares as one absent key (false for VALUE). The walk
// stops at the first key it fails for.
Status CompareHolds(const KvSource& src, const Compare& c, bool* holds) {
  if (c.range_end().empty()) {
    std::optional<KvRecord> r;
    Status s = src.Find(c.key(), &r);
    *holds = CompareRecord(c, r ? &*r : nullptr);
    return s;
  }
  bool any = false;
  bool all = true;
  Status s = src.Scan(
      c.key(), c.range_end(),
      [&](const std::string&, const KvRecord& r) {
        any = true;
        all = CompareRecord(c, &r);
        return all;
      },
      c.target() == Compare::VALUE ? ScanValues::kWith : ScanValues::kNoValues);
  *holds = all && (any || CompareRecord(c, nullptr));
  return s;
}

}  // namespace

namespace kv_internal {

// A range counts every key of it (as etcd's count). Once the answer holds
// its `limit` keys, the walk starts again after the last of them without
// values: the rest is counted, and no value read or copied.
Status RangeOf(const KvSource& src, const RangeRequest& req, RangeResponse* resp, size_t max_bytes) {
  RangeBuilder out(req, resp, max_bytes);
  std::optional<std::string> last;  // the last key carried, once the rest is only counted
  Status s = src.Scan(
      req.key(), req.range_end(),
      [&](const std::string& k, const KvRecord& r) {
        if (!out.Add(k, r)) return false;
        if (!out.Carried() || req.range_end().empty()) return true;
        last = k;
        return false;
      },
      out.NeedsValues() ? ScanValues::kWith : ScanValues::kNoValues);
  if (s.ok() && last) {
    s = src.Scan(
        *last + '\0', req.range_end(), [&](const std::string& k, const KvRecord& r) { return out.Add(k, r); },
        ScanValues::kNoValues);
  }
  if (!s.ok()) return s;
  return out.Done();
}

Status CompareAll(const KvSource& src, const TxnRequest& txn, bool* holds) {
  *holds = true;
  for (const Compare& c : txn.compare()) {
    Status s = CompareHolds(src, c, holds);
    if (!s.ok() || !*holds) return s;
  }
  return Status::OK();
}

Status TxnPath(const KvSource& src, const TxnRequest& txn, std::vector<bool>* path) {
  bool succeeded = false;
  Status s = CompareAll(src, txn, &succeeded);
  if (!s.ok()) return s;
  path->push_back(succeeded);
  for (const RequestOp& op : succeeded ? txn.success() : txn.failure()) {
    if (!op.has_request_txn()) continue;
    s = TxnPath(src, op.request_txn(), path);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status RangeCost(const KvSource& src, const std::string& key, const std::string& end, size_t budget,
                 size_t* cost) {
  RangeRequest whole;
  whole.set_key(key);
  whole.set_range_end(end);
  return RangeCost(src, whole, budget, cost);
}

Status RangeCost(const KvSource& src, const RangeRequest& req, size_t budget, size_t* cost) {
  *cost = 0;
  if (SortedByTarget(req) && !req.count_only()) {
    // Which keys it carries is known once sorted: read it (its visits
    // counted first, so that the read is within the budget too).
    RangeRequest visits = req;
    visits.set_count_only(true);
    Status s = RangeCost(src, visits, budget, cost);
    if (!s.ok() || *cost > budget) return s;
    RangeResponse answer;
    s = RangeOf(src, req, &answer, budget);
    if (s.code() == Status::Code::kResourceExhausted) {
      *cost = budget + 1;
      return Status::OK();
    }
    if (!s.ok()) return s;
    *cost = static_cast<size_t>(answer.count() - answer.kvs_size()) * KvStateMachine::kVisitCost;
    for (const KeyValue& kv : answer.kvs()) {
      *cost += kv.key().size() + kv.value().size() + KvStateMachine::kVisitCost;
    }
    return Status::OK();
  }
  int64_t carried = 0;
  return src.Scan(
      req.key(), req.range_end(),
      [&](const std::string& k, const KvRecord& r) {
        const bool carries = !req.count_only() && PassesFilters(req, r) &&
                             (req.limit() <= 0 || carried < req.limit());
        if (carries) ++carried;
        *cost += carries ? KeyValueBytes(k, r, req.keys_only()) : KvStateMachine::kVisitCost;
        return *cost <= budget;
      },
      req.count_only() || req.keys_only() ? ScanValues::kNoValues : ScanValues::kWith);
}

Status EstimateAnswer(const KvSource& src, const std::vector<const RequestOp*>& ops, size_t budget,
                      size_t* total) {
  *total = 0;
  for (const RequestOp* op : ops) {
    if (*total > budget) break;
    const size_t left = budget - *total;
    size_t cost = 0;
    Status s;
    if (op->has_request_range()) {
      const RangeRequest& r = op->request_range();
      s = RangeCost(src, r, left, &cost);
      // A key these operations put may show up in the range as well (from
      // above: whether the put comes before the range or not).
      for (const RequestOp* other : ops) {
        if (!other->has_request_put() || !InKeyRange(other->request_put().key(), r.key(), r.range_end())) {
          continue;
        }
        cost += other->request_put().key().size() + KvStateMachine::kVisitCost +
                (r.keys_only() || r.count_only() ? 0 : other->request_put().value().size());
      }
    } else if (op->has_request_delete_range()) {
      const DeleteRangeRequest& d = op->request_delete_range();
      if (d.prev_kv()) s = RangeCost(src, d.key(), d.range_end(), left, &cost);
    } else if (op->has_request_put() && op->request_put().prev_kv()) {
      s = RangeCost(src, op->request_put().key(), "", left, &cost);
    }
    if (!s.ok()) return s;
    *total += cost;
  }
  return Status::OK();
}

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
