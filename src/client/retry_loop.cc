#include "client/retry_loop.h"

#include <algorithm>
#include <thread>

namespace raftkv {

RetryLoop::RetryLoop(const std::vector<std::string>& endpoints, const std::string& leader,
                     std::chrono::milliseconds timeout)
    : endpoints_(endpoints),
      start_(Clock::now()),
      deadline_(start_ + std::max(timeout, std::chrono::milliseconds(0))),
      target_(endpoints.front()) {
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
  std::this_thread::sleep_for(std::min<Clock::duration>(backoff_, remaining));
  backoff_ = std::min(backoff_ * 2, kMaxBackoff);
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
