#include "bench/load.h"

#include "client/channel_args.h"
#include "client/security.h"
#include "common/tsan_handoff.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace raftkv {
namespace bench {

namespace {

using Clock = std::chrono::steady_clock;

// What one polling thread saw; merged when the run is over.
struct ThreadStats {
  Histogram latency_ns;
  uint64_t succeeded = 0;
  uint64_t wrong = 0;
  std::array<uint64_t, kNumStatusCodes> failed_by_code{};
};

}  // namespace

Connections::Connections(const std::string& target, int n) : target_(target) {
  n = std::max(1, n);
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args = RaftkvChannelArguments();
    // Own subchannel pool + a distinct argument: never shares a TCP
    // connection with the other channels.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("raftkv.bench.connection", i);
    auto channel = MakeChannel(target, args);
    stubs_.push_back(KV::NewStub(channel));
    channels_.push_back(std::move(channel));
  }
}

bool Connections::WaitConnected(int timeout_ms, std::string* error) {
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (size_t i = 0; i < channels_.size(); ++i) {
    if (!channels_[i]->WaitForConnected(deadline)) {
      if (error) {
        *error = "connection " + std::to_string(i) + " to " + target_ + " not ready within " +
                 std::to_string(timeout_ms) + " ms";
      }
      return false;
    }
  }
  return true;
}

uint64_t LoadResult::failed() const { return sent - succeeded_count; }

LoadResult RunLoad(const Connections& connections, const LoadOptions& options,
                   const CallFactory& factory) {
  LoadResult result;
  const uint64_t requests = options.requests;
  const int cq_num = std::max(1, options.cq_num);
  const int threads_per_cq = std::max(1, options.threads_per_cq);
  const uint64_t inflight = static_cast<uint64_t>(std::max(1, options.inflight));
  if (options.record_outcomes) result.succeeded.assign(requests, 0);
  if (requests == 0) return result;

  std::vector<std::unique_ptr<grpc::CompletionQueue>> cqs;
  for (int i = 0; i < cq_num; ++i) cqs.push_back(std::make_unique<grpc::CompletionQueue>());

  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> completed{0};
  std::mutex mu;
  std::condition_variable all_done;
  bool finished = false;
  Clock::time_point end_time;

  auto issue = [&](uint64_t n) {
    std::unique_ptr<BenchCall> call = factory(n);
    call->number = n;
    call->context.set_deadline(std::chrono::system_clock::now() +
                               std::chrono::milliseconds(options.timeout_ms));
    call->start = Clock::now();
    TsanReleaseTag(call.get());  // its construction (handoff_mu included)
    call->Start(connections.stub(n), cqs[n % cqs.size()].get());
    call.release();  // owned by the completion queue until its tag comes back
  };

  std::vector<ThreadStats> stats(static_cast<size_t>(cq_num * threads_per_cq));
  std::vector<std::thread> threads;
  for (int q = 0; q < cq_num; ++q) {
    for (int t = 0; t < threads_per_cq; ++t) {
      ThreadStats* mine = &stats[static_cast<size_t>(q * threads_per_cq + t)];
      grpc::CompletionQueue* cq = cqs[static_cast<size_t>(q)].get();
      threads.emplace_back([&, mine, cq] {
        void* tag = nullptr;
        bool ok = false;
        while (cq->Next(&tag, &ok)) {
          TsanAcquireTag(tag);
          const Clock::time_point now = Clock::now();
          std::unique_ptr<BenchCall> call(static_cast<BenchCall*>(tag));
          { std::lock_guard<std::mutex> handoff(call->handoff_mu); }
          // Keep the pipe full first, then book-keep.
          const uint64_t n = next.fetch_add(1, std::memory_order_relaxed);
          if (n < requests) issue(n);
          if (call->status.ok()) {
            if (call->AnswerIsExpected()) {
              ++mine->succeeded;
              mine->latency_ns.Record(static_cast<uint64_t>(
                  std::chrono::duration_cast<std::chrono::nanoseconds>(now - call->start).count()));
              if (options.record_outcomes) result.succeeded[call->number] = 1;
            } else {
              ++mine->wrong;
            }
          } else {
            const int code = static_cast<int>(call->status.error_code());
            ++mine->failed_by_code[static_cast<size_t>(
                code >= 0 && code < kNumStatusCodes ? code : 2 /* UNKNOWN */)];
          }
          call.reset();
          if (completed.fetch_add(1, std::memory_order_acq_rel) + 1 == requests) {
            std::lock_guard<std::mutex> lock(mu);
            end_time = Clock::now();
            finished = true;
            all_done.notify_all();
          }
        }
      });
    }
  }

  const Clock::time_point start_time = Clock::now();
  for (uint64_t k = 0; k < inflight; ++k) {
    const uint64_t n = next.fetch_add(1, std::memory_order_relaxed);
    if (n >= requests) break;
    issue(n);
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    all_done.wait(lock, [&] { return finished; });
  }
  for (auto& cq : cqs) cq->Shutdown();
  for (auto& t : threads) t.join();

  result.sent = requests;
  for (const ThreadStats& s : stats) {
    result.latency_ns.Merge(s.latency_ns);
    result.succeeded_count += s.succeeded;
    result.wrong_answer += s.wrong;
    for (int c = 0; c < kNumStatusCodes; ++c) result.failed_by_code[c] += s.failed_by_code[c];
  }
  result.seconds = std::chrono::duration<double>(end_time - start_time).count();
  return result;
}

}  // namespace bench
}  // namespace raftkv
