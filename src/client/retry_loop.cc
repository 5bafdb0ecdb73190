#include "client/retry_loop.h"

#include <algorithm>
#include <random>
#include <thread>

namespace raftkv {

namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

JitteredBackoff::JitteredBackoff(uint64_t seed) : state_(seed) {}

std::chrono::milliseconds JitteredBackoff::Next() {
  const int64_t lo = kMin.count();
  const int64_t hi = std::min<int64_t>(kMax.count(), 3 * previous_.count());
  const int64_t span = hi - lo + 1;
  previous_ = std::chrono::milliseconds(lo + static_cast<int64_t>(SplitMix64(&state_) %
                                                                  static_cast<uint64_t>(span)));
  return previous_;
}

RetrySeeds::RetrySeeds(uint64_t client_seed) : base_(client_seed) {
  if (base_ == 0) {
    std::random_device rd;
    base_ = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
            static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
}

uint64_t RetrySeeds::Next() {
  uint64_t state = base_ + calls_.fetch_add(1, std::memory_order_relaxed);
  return SplitMix64(&state);
}

RetryLoop::RetryLoop(const std::vector<std::string>& endpoints, const std::string& leader,
                     std::chrono::milliseconds timeout, uint64_t jitter_seed)
    : endpoints_(endpoints),
      start_(Clock::now()),
      deadline_(start_ + std::max(timeout, std::chrono::milliseconds(0))),
      target_(endpoints.front()),
      backoff_(jitter_seed) {
  if (!leader.empty()) {
    target_ = leader;
    auto it = std::find(endpoints.begin(), endpoints.end(), leader);
    // A leader outside the list: "next" after it is the first endpoint.
    cursor_ =
        it != endpoints.end() ? static_cast<size_t>(it - endpoints.begin()) : endpoints.size() - 1;
  }
}

bool RetryLoop::Start() {
  if (attempts_++ > 0 && Clock::now() >= deadline_) return false;
  if (std::find(tried_.begin(), tried_.end(), target_) == tried_.end()) tried_.push_back(target_);
  return true;
}

void RetryLoop::Advance() {
  cursor_ = (cursor_ + 1) % endpoints_.size();
  target_ = endpoints_[cursor_];
}

bool RetryLoop::Redirect(const std::string& hint) {
  target_ = hint;
  return RoundDone();
}

bool RetryLoop::Backoff() {
  immediate_ = 0;
  const Clock::duration remaining = left();
  if (remaining <= Clock::duration::zero()) return false;
  std::this_thread::sleep_for(std::min<Clock::duration>(backoff_.Next(), remaining));
  return true;
}

grpc::Status RetryLoop::GaveUp(const grpc::Status& last, const std::string& name) const {
  const auto elapsed =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start_).count();
  return grpc::Status(last.error_code(), last.error_message() + " (" + name + " gave up after " +
                                             std::to_string(elapsed) + " ms; endpoints tried: " +
                                             JoinEndpoints(tried_) + ")");
}

std::string TrailingValue(const grpc::ClientContext& ctx, const char* key) {
  const auto& md = ctx.GetServerTrailingMetadata();
  auto it = md.find(key);
  if (it == md.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

void SetTimeout(grpc::ClientContext* ctx, RetryLoop::Clock::duration timeout) {
  timeout = std::max<RetryLoop::Clock::duration>(timeout, std::chrono::milliseconds(1));
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::duration_cast<std::chrono::system_clock::duration>(timeout));
}

std::string JoinEndpoints(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace raftkv
