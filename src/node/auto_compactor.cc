#include "node/auto_compactor.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "common/thread_name.h"

namespace raftkv {

namespace {

constexpr int64_t kHourMs = 3600 * 1000;

// A non-negative decimal number; false when `s` is not one or overflows.
bool ParseCount(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// Go's time.ParseDuration for whole h, m, s and ms parts ("1h30m", "90s").
bool ParseDurationMs(const std::string& s, int64_t* out) {
  int64_t total = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    int64_t n = 0;
    if (j == i || !ParseCount(s.substr(i, j - i), &n)) return false;
    size_t k = j;
    while (k < s.size() && (s[k] < '0' || s[k] > '9')) ++k;
    const std::string unit = s.substr(j, k - j);
    int64_t scale = 0;
    if (unit == "h") scale = kHourMs;
    if (unit == "m") scale = 60 * 1000;
    if (unit == "s") scale = 1000;
    if (unit == "ms") scale = 1;
    if (scale == 0 || n > (std::numeric_limits<int64_t>::max() - total) / scale) return false;
    total += n * scale;
    i = k;
  }
  *out = total;
  return !s.empty();
}

}  // namespace

Status ParseAutoCompaction(const std::string& mode, const std::string& retention,
                           AutoCompactionOptions* out) {
  *out = AutoCompactionOptions();
  if (mode != "periodic" && mode != "revision") {
    return Status::InvalidArgument("--auto_compaction_mode must be periodic or revision, got '" + mode + "'");
  }
  if (retention.empty() || retention == "0") return Status::OK();  // off
  const std::string bad = "--auto_compaction_retention '" + retention + "' ";
  if (mode == "revision") {
    int64_t n = 0;
    if (!ParseCount(retention, &n)) return Status::InvalidArgument(bad + "is not a number of revisions");
    out->mode = AutoCompactionOptions::Mode::kRevision;
    out->retention_revisions = n;
    return Status::OK();
  }
  int64_t ms = 0;
  if (ParseCount(retention, &ms)) {  // a bare number: hours, as etcd
    if (ms > std::numeric_limits<int64_t>::max() / kHourMs) return Status::InvalidArgument(bad + "is too long");
    ms *= kHourMs;
  } else if (!ParseDurationMs(retention, &ms)) {
    return Status::InvalidArgument(bad + "is not a duration (such as 72h, 30m, 1h30m or a number of hours)");
  }
  if (ms < 1000) return Status::InvalidArgument(bad + "is shorter than a second");
  out->mode = AutoCompactionOptions::Mode::kPeriodic;
  out->retention_ms = ms;
  return Status::OK();
}

AutoCompactionPolicy::AutoCompactionPolicy(const AutoCompactionOptions& options) : options_(options) {}

int64_t AutoCompactionPolicy::interval_ms() const {
  switch (options_.mode) {
    case AutoCompactionOptions::Mode::kRevision:
      return options_.revision_check_ms > 0 ? options_.revision_check_ms : kRevisionCheckMs;
    case AutoCompactionOptions::Mode::kPeriodic:
      return std::max<int64_t>(1, std::min(options_.retention_ms, kHourMs) / 10);
    case AutoCompactionOptions::Mode::kOff:
      break;
  }
  return 0;
}

void AutoCompactionPolicy::Reset() {
  samples_.clear();
  last_check_ms_ = -1;
  last_sample_ms_ = -1;
}

int64_t AutoCompactionPolicy::Tick(int64_t now_ms, int64_t revision, int64_t compacted) {
  const int64_t interval = interval_ms();
  if (options_.mode == AutoCompactionOptions::Mode::kRevision) {
    if (last_check_ms_ >= 0 && now_ms - last_check_ms_ < interval) return 0;
    last_check_ms_ = now_ms;
    const int64_t target = revision - options_.retention_revisions;
    return target > compacted && target > 0 ? target : 0;
  }
  if (options_.mode != AutoCompactionOptions::Mode::kPeriodic) return 0;
  if (last_sample_ms_ < 0 || now_ms - last_sample_ms_ >= interval) {
    samples_.emplace_back(now_ms, revision);
    last_sample_ms_ = now_ms;
  }
  if (last_check_ms_ < 0) last_check_ms_ = now_ms;  // the first compaction a whole period on
  const int64_t period = std::min(options_.retention_ms, kHourMs);
  if (now_ms - last_check_ms_ < period) return 0;
  // The newest sample at least the retention old; the older ones go.
  const int64_t cutoff = now_ms - options_.retention_ms;
  while (samples_.size() > 1 && samples_[1].first <= cutoff) samples_.pop_front();
  if (samples_.front().first > cutoff) return 0;  // not sampling for that long yet
  last_check_ms_ = now_ms;
  const int64_t target = samples_.front().second;
  return target > compacted && target > 0 ? target : 0;
}

AutoCompactor::AutoCompactor(const AutoCompactionOptions& options, RaftNode* node)
    : node_(node), policy_(options) {}

AutoCompactor::~AutoCompactor() { Stop(); }

void AutoCompactor::Start() {
  if (policy_.interval_ms() == 0) return;
  thread_ = std::thread([this] {
    SetThreadName("raftkv-compact");
    Loop();
  });
}

void AutoCompactor::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
  lifeline_.Close();  // a COMPACT still in flight answers into nothing
}

uint64_t AutoCompactor::compactions() const {
  MutexLock lock(&mu_);
  return compactions_;
}

void AutoCompactor::Loop() {
  using Steady = std::chrono::steady_clock;
  const Steady::time_point start = Steady::now();
  // Ticks at least once a second, so a new leader starts sampling soon.
  const int64_t wait_ms = std::min<int64_t>(policy_.interval_ms(), 1000);
  MutexLock lock(&mu_);
  while (!stopping_) {
    cv_.WaitFor(&mu_, std::chrono::milliseconds(wait_ms));
    if (stopping_) break;
    if (node_->GetStatus().role != raft::Role::kLeader) {
      policy_.Reset();
      continue;
    }
    const KvStateMachine& sm = node_->state_machine();
    const int64_t now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - start).count();
    const int64_t target = policy_.Tick(now_ms, sm.Revision(), sm.CompactRevision());
    if (target == 0 || proposing_) continue;
    proposing_ = true;
    lock.Unlock();
    LOG(INFO) << "auto-compaction: compacting the history through revision " << target;
    Command cmd;
    cmd.set_op(Command::COMPACT);
    cmd.set_compact_revision(target);
    node_->Propose(cmd.SerializeAsString(), Steady::now() + std::chrono::seconds(10),
                   [this, target, line = lifeline_.line()](Outcome out) {
                     const Status s = out.status.ok() ? out.apply.Rejection() : out.status;
                     LOG_IF(WARNING, !s.ok())
                         << "auto-compaction through revision " << target << ": " << s.ToString();
                     line.Run([&] {
                       MutexLock l(&mu_);
                       proposing_ = false;
                       if (s.ok()) ++compactions_;
                     });
                   });
    lock.Lock();
  }
}

}  // namespace raftkv
