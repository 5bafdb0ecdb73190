// What the clients' leader-following retry loops share (KvClient::Call,
// AdminClient::CallLeader and AdminClient::ListMembers): the endpoint to try
// next (a known leader first, then the configured endpoints in turn, or a
// redirect hint), exponential back-off capped by the deadline, the list of
// endpoints tried and the final "gave up" status. Each loop keeps its own
// decisions (which status codes are retried, whether a write's outcome is
// unknown); this class only keeps the bookkeeping in one place.
#ifndef RAFTKV_CLIENT_RETRY_LOOP_H_
#define RAFTKV_CLIENT_RETRY_LOOP_H_

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace raftkv {

// The sleeps between retries: decorrelated jitter ("Exponential Backoff And
// Jitter", AWS Architecture Blog, 2015). Each sleep is drawn uniformly from
// [kMin, 3 x the previous one] and capped at kMax, so the clients that lost
// their leader at the same moment retry spread over the window instead of
// in step, and never sooner than kMin. Deterministic for a seed.
class JitteredBackoff {
 public:
  static constexpr std::chrono::milliseconds kMin{50};
  static constexpr std::chrono::milliseconds kMax{400};
  explicit JitteredBackoff(uint64_t seed);
  // The next sleep, in [kMin, kMax].
  std::chrono::milliseconds Next();

 private:
  uint64_t state_;  // splitmix64
  std::chrono::milliseconds previous_ = kMin;
};

// The seeds of one client's retry loops: one per call, from the client's own
// seed (random unless ClientOptions::retry_seed fixes it). Thread-safe.
class RetrySeeds {
 public:
  // 0: a random seed.
  explicit RetrySeeds(uint64_t client_seed = 0);
  uint64_t Next();

 private:
  uint64_t base_;
  std::atomic<uint64_t> calls_{0};
};

class RetryLoop {
 public:
  using Clock = std::chrono::steady_clock;

  // `endpoints` must not be empty and must outlive the loop. `leader`, if
  // not empty, is tried first; "next" after it is the endpoint following it
  // in the list (the first one if it is not in the list). `jitter_seed`
  // seeds the back-off (RetrySeeds::Next() of the client).
  RetryLoop(const std::vector<std::string>& endpoints, const std::string& leader,
            std::chrono::milliseconds timeout, uint64_t jitter_seed = 0);

  // Starts an attempt: false once the deadline has passed (the first attempt
  // always starts). Records the target as tried.
  bool Start();
  const std::string& target() const { return target_; }
  // Time left before the deadline (may be negative).
  Clock::duration left() const { return deadline_ - Clock::now(); }

  // The next configured endpoint.
  void Advance();
  // Follows a leader hint. Returns true if the caller should back off first:
  // more redirects in a row than there are endpoints (stale hints going in
  // circles).
  bool Redirect(const std::string& hint);
  // Counts an attempt that went on without sleeping; true once every
  // endpoint had its turn since the last back-off.
  bool RoundDone() { return ++immediate_ > endpoints_.size(); }
  // Sleeps the next jittered back-off (JitteredBackoff, at most until the
  // deadline). False if no time is left.
  bool Backoff();

  // `last` with what was tried: "<message> (<name> gave up after N ms;
  // endpoints tried: a, b)".
  grpc::Status GaveUp(const grpc::Status& last, const std::string& name) const;
  const std::vector<std::string>& tried() const { return tried_; }

 private:
  const std::vector<std::string>& endpoints_;
  const Clock::time_point start_;
  const Clock::time_point deadline_;
  size_t cursor_ = 0;
  std::string target_;
  std::vector<std::string> tried_;
  JitteredBackoff backoff_;
  size_t immediate_ = 0;
  int attempts_ = 0;
};

// The value of trailing metadata `key` of a finished call ("" if absent).
std::string TrailingValue(const grpc::ClientContext& ctx, const char* key);
// Sets a call's deadline `timeout` from now (at least 1 ms).
void SetTimeout(grpc::ClientContext* ctx, RetryLoop::Clock::duration timeout);
// "a, b, c".
std::string JoinEndpoints(const std::vector<std::string>& items);

}  // namespace raftkv

#endif  // RAFTKV_CLIENT_RETRY_LOOP_H_
