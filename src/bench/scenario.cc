#include "bench/scenario.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <sys/resource.h>
#include <sys/types.h>

#include "bench/keyspace.h"
#include "bench/floor.h"
#include "bench/load.h"
#include "bench/process_probe.h"
#include "client/channel_args.h"
#include "client/kv_client.h"
#include "client/security.h"
#include "testing/process_cluster.h"

namespace raftkv {
namespace bench {

namespace {

using Clock = std::chrono::steady_clock;
using PutCall = UnaryBenchCall<PutRequest, PutResponse>;
using EchoCall = UnaryBenchCall<EchoRequest, EchoResponse>;
using BatchCall = UnaryBenchCall<BatchRequest, BatchResponse>;

// A linearizable Get whose answer must be `expected`; counts absent keys and
// other values into the run's counters.
class GetCall : public UnaryBenchCall<GetRequest, GetResponse> {
 public:
  GetCall(std::atomic<uint64_t>* missing, std::atomic<uint64_t>* wrong)
      : UnaryBenchCall(&KV::Stub::PrepareAsyncGet, nullptr), missing_(missing), wrong_(wrong) {}
  bool AnswerIsExpected() const override {
    if (!response.found()) {
      missing_->fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (response.value() != expected) {
      wrong_->fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    return true;
  }

 private:
  std::atomic<uint64_t>* missing_;
  std::atomic<uint64_t>* wrong_;
};

bool EchoMatches(const EchoCall& call) { return call.response.payload() == call.request.payload(); }

void Progress(const BenchConfig& config, const std::string& text) {
  static const Clock::time_point t0 = Clock::now();
  if (config.quiet) return;
  char when[32];
  std::snprintf(when, sizeof(when), "%7.3f s",
                std::chrono::duration<double>(Clock::now() - t0).count());
  std::cerr << "[ bench    ] " << when << "  " << text << std::endl;
}

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

// Deadline of the untimed calls (verification reads, the Read scenario's
// preload): a check must not fail because the benchmark's deadline is tight.
constexpr int kCheckTimeoutMs = 10000;

LoadOptions MakeLoadOptions(const BenchConfig& config, uint64_t requests, bool record,
                            int timeout_ms) {
  LoadOptions o;
  o.requests = requests;
  o.cq_num = config.client_cq_num;
  o.threads_per_cq = config.client_threads_per_cq;
  o.inflight = config.inflight;
  o.timeout_ms = timeout_ms;
  o.record_outcomes = record;
  return o;
}

std::map<std::string, uint64_t> CodeNames(const LoadResult& lr) {
  std::map<std::string, uint64_t> out;
  for (int c = 0; c < kNumStatusCodes; ++c) {
    const uint64_t n = lr.failed_by_code[static_cast<size_t>(c)];
    if (n > 0) out[StatusCodeName(static_cast<grpc::StatusCode>(c))] = n;
  }
  return out;
}

void FillFromLoad(const LoadResult& lr, ScenarioReport* r) {
  r->requests = lr.sent;
  r->acknowledged = lr.succeeded_count;
  r->failed = lr.failed();
  r->wrong_answer = lr.wrong_answer;
  r->failed_by_status = CodeNames(lr);
  r->seconds = lr.seconds;
  r->latency_ns = lr.latency_ns;
  ComputeRates(r);
}

// CPU time of this process and of the local servers.
struct CpuProbe {
  pid_t leader = -1;
  std::vector<pid_t> followers;
};

CpuSeconds SampleCpu(const CpuProbe& probe) {
  CpuSeconds c;
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  c.client = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
             static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  if (probe.leader > 0) {
    c.leader = ProcessCpuSeconds(probe.leader);
    c.leader_switches = ProcessVoluntarySwitches(probe.leader);
    c.followers = 0;
    c.followers_switches = 0;
    for (pid_t f : probe.followers) {
      c.followers += std::max(0.0, ProcessCpuSeconds(f));
      const double switches = ProcessVoluntarySwitches(f);
      if (switches < 0 || c.followers_switches < 0) {
        c.followers_switches = -1;  // not counted (not Linux, or a follower gone)
      } else {
        c.followers_switches += switches;
      }
    }
  }
  return c;
}

CpuSeconds CpuDelta(const CpuSeconds& a, const CpuSeconds& b) {
  CpuSeconds d;
  d.client = b.client - a.client;
  if (a.leader >= 0 && b.leader >= 0) {
    d.leader = b.leader - a.leader;
    d.followers = b.followers - a.followers;
  }
  if (a.leader_switches >= 0 && b.leader_switches >= 0) {
    d.leader_switches = b.leader_switches - a.leader_switches;
  }
  if (a.followers_switches >= 0 && b.followers_switches >= 0) {
    d.followers_switches = b.followers_switches - a.followers_switches;
  }
  return d;
}

// Runs the timed load and records the CPU time it took.
LoadResult TimedLoad(const Connections& conns, const LoadOptions& options,
                     const CallFactory& factory, const CpuProbe& probe, ScenarioReport* r) {
  const CpuSeconds before = SampleCpu(probe);
  LoadResult lr = RunLoad(conns, options, factory);
  r->cpu = CpuDelta(before, SampleCpu(probe));
  return lr;
}

// Finds the leader of an existing cluster through Status. Returns its
// address and the number of followers, or false with *error.
bool FindLeader(const std::vector<std::string>& endpoints, int timeout_ms, std::string* leader,
                int* followers, std::string* error) {
  const auto start = Clock::now();
  std::string last;
  for (;;) {
    for (const std::string& ep : endpoints) {
      ClientOptions options;
      options.endpoints = {ep};
      KvClient client(options);
      StatusResponse st;
      grpc::Status s = client.StatusOf(ep, &st, 1000);
      if (!s.ok()) {
        last = ep + ": " + StatusCodeName(s.error_code()) + " " + s.error_message();
        continue;
      }
      std::string candidate;
      if (st.role() == "leader") {
        candidate = ep;
      } else if (!st.leader_address().empty()) {
        StatusResponse lst;
        ClientOptions lopt;
        lopt.endpoints = {st.leader_address()};
        KvClient lclient(lopt);
        if (lclient.StatusOf(st.leader_address(), &lst, 1000).ok() && lst.role() == "leader") {
          candidate = st.leader_address();
          st = lst;
        } else {
          last = ep + " names leader " + st.leader_address() + ", which does not answer as leader";
          continue;
        }
      } else {
        last = ep + ": " + st.role() + ", no leader known";
        continue;
      }
      *leader = candidate;
      *followers = st.voters_size() > 0 ? st.voters_size() - 1 : 0;
      return true;
    }
    if (std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count() >
        timeout_ms) {
      *error = "no leader found among " + Join(endpoints, ",") + " within " +
               std::to_string(timeout_ms) + " ms; last: " + last;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Reads back `numbers` (request numbers of ks) with linearizable Gets.
Verification ReadBack(const Connections& conns, const BenchConfig& config, const KeySpace& ks,
                      const std::vector<uint64_t>& numbers) {
  Verification v;
  std::atomic<uint64_t> missing{0}, wrong{0};
  const LoadOptions options = MakeLoadOptions(config, numbers.size(), false,
                                              std::max(config.timeout_ms, kCheckTimeoutMs));
  const LoadResult lr = RunLoad(conns, options, [&](uint64_t n) {
    auto call = std::make_unique<GetCall>(&missing, &wrong);
    const uint64_t i = numbers[n];
    call->request.set_key(ks.Key(i));
    ks.FillValue(i, &call->expected);
    return call;
  });
  v.checked = lr.sent;
  v.ok = lr.succeeded_count;
  v.missing = missing.load();
  v.wrong = wrong.load();
  v.errors = lr.failed() - lr.wrong_answer;
  v.errors_by_status = CodeNames(lr);
  return v;
}

// The numbers of the requests of a recorded load that succeeded.
std::vector<uint64_t> Acknowledged(const LoadResult& lr) {
  std::vector<uint64_t> acked;
  acked.reserve(lr.succeeded_count);
  for (uint64_t n = 0; n < lr.succeeded.size(); ++n) {
    if (lr.succeeded[n]) acked.push_back(n);
  }
  return acked;
}

// Reads back all acknowledged writes (`acked`: key numbers of ks), or a
// random sample of verify_sample of them.
Verification VerifyWrites(const Connections& conns, const BenchConfig& config, const KeySpace& ks,
                          std::vector<uint64_t> acked) {
  const uint64_t population = acked.size();
  std::string mode = "all";
  if (config.verify_sample > 0 && config.verify_sample < acked.size()) {
    mode = "sample";
    std::mt19937_64 rng(Mix64(config.seed ^ 0x73616d706c65ull));
    for (uint64_t k = 0; k < config.verify_sample; ++k) {
      std::uniform_int_distribution<uint64_t> pick(k, acked.size() - 1);
      std::swap(acked[k], acked[pick(rng)]);
    }
    acked.resize(config.verify_sample);
    std::sort(acked.begin(), acked.end());
  }
  Progress(config, "verifying " + std::string(mode == "all" ? "all " : "a random sample of ") +
                       std::to_string(acked.size()) + " of " + std::to_string(population) +
                       " acknowledged writes (linearizable Gets)");
  Verification v = ReadBack(conns, config, ks, acked);
  v.mode = mode;
  v.population = population;
  return v;
}

// Exactly-once bookkeeping of a run's writes in one client session: request
// n has sequence n + 1; first_outstanding is the lowest sequence not yet
// answered (a lower bound is enough: the servers then keep a few more saved
// results than needed).
class SessionWindow {
 public:
  SessionWindow(uint64_t client_id, uint64_t requests)
      : client_id_(client_id), done_(requests) {}
  uint64_t client_id() const { return client_id_; }
  uint64_t FirstOutstanding() const { return floor_.load(std::memory_order_acquire) + 1; }
  // The session header of request n: sequence n + 1.
  void Tag(uint64_t n, Session* session) const {
    session->set_client_id(client_id_);
    session->set_sequence(n + 1);
    session->set_first_outstanding(FirstOutstanding());
  }
  void MarkDone(uint64_t n) {
    done_[n].store(1, std::memory_order_release);
    uint64_t f = floor_.load(std::memory_order_acquire);
    while (f < done_.size() && done_[f].load(std::memory_order_acquire) != 0) {
      if (floor_.compare_exchange_weak(f, f + 1, std::memory_order_acq_rel)) ++f;
    }
  }

 private:
  const uint64_t client_id_;
  std::vector<std::atomic<uint8_t>> done_;
  std::atomic<uint64_t> floor_{0};  // every request below it is answered
};

// A Put of a session: carries request n's session header and marks the
// request answered when the call is done with.
class SessionPutCall : public PutCall {
 public:
  // A null window: no session.
  SessionPutCall(SessionWindow* window, uint64_t n)
      : PutCall(&KV::Stub::PrepareAsyncPut, nullptr), window_(window), n_(n) {
    if (window != nullptr) window->Tag(n, request.mutable_session());
  }
  ~SessionPutCall() override {
    if (window_ != nullptr) window_->MarkDone(n_);
  }

 private:
  SessionWindow* window_;
  uint64_t n_;
};

// A Batch of a session: carries call n's session header and marks the call
// answered when it is done with.
class SessionBatchCall : public BatchCall {
 public:
  SessionBatchCall(SessionWindow* window, uint64_t n)
      : BatchCall(&KV::Stub::PrepareAsyncBatch, &BatchAnswered), window_(window), n_(n) {
    window->Tag(n, request.mutable_session());
  }
  ~SessionBatchCall() override { window_->MarkDone(n_); }

  // One existed flag per op: the answer of this very batch.
  static bool BatchAnswered(const BatchCall& call) {
    return call.response.existed_size() == call.request.ops_size();
  }

 private:
  SessionWindow* window_;
  uint64_t n_;
};

// Opens a session on the leader (one attempt).
bool OpenSession(KV::Stub* stub, uint64_t* client_id, std::string* error) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  OpenSessionResponse resp;
  grpc::Status s = stub->OpenSession(&ctx, OpenSessionRequest(), &resp);
  if (!s.ok()) {
    *error = std::string("OpenSession failed: ") + StatusCodeName(s.error_code()) + ": " +
             s.error_message();
    return false;
  }
  *client_id = resp.client_id();
  return true;
}

// With config.sessions: opens a session on the leader for `calls` numbered
// calls. False (with *error) if that fails.
bool MaybeOpenSession(const BenchConfig& config, const Connections& conns, uint64_t calls,
                      std::unique_ptr<SessionWindow>* window, std::string* error) {
  if (!config.sessions) return true;
  uint64_t client_id = 0;
  if (!OpenSession(conns.stub(0), &client_id, error)) return false;
  *window = std::make_unique<SessionWindow>(client_id, calls);
  return true;
}

// Puts of keys numbered by request (or by `numbers`), in `window`'s session
// when it is not null.
CallFactory PutFactory(const KeySpace& ks, const std::vector<uint64_t>* numbers,
                       SessionWindow* window = nullptr) {
  return [&ks, numbers, window](uint64_t n) {
    std::unique_ptr<PutCall> call;
    if (window != nullptr) {
      call = std::make_unique<SessionPutCall>(window, n);
    } else {
      call = std::make_unique<PutCall>(&KV::Stub::PrepareAsyncPut, nullptr);
    }
    const uint64_t i = numbers ? (*numbers)[n] : n;
    call->request.set_key(ks.Key(i));
    ks.FillValue(i, call->request.mutable_value());
    return call;
  };
}

// A Put that records when it was sent (nanoseconds of the steady clock,
// by request number) for the Watch scenario's delivery delay.
class StampedPutCall : public SessionPutCall {
 public:
  StampedPutCall(SessionWindow* window, uint64_t n, std::vector<std::atomic<int64_t>>* stamps)
      : SessionPutCall(window, n), stamps_(stamps) {}
  void Start(KV::Stub* stub, grpc::CompletionQueue* cq) override {
    (*stamps_)[number].store(start.time_since_epoch().count(), std::memory_order_relaxed);
    SessionPutCall::Start(stub, cq);
  }

 private:
  std::vector<std::atomic<int64_t>>* stamps_;
};

// A create-if-absent transaction of a session: create(key) = 0 -> put key
// value, else get key. Expected: the put ran.
class TxnCall : public UnaryBenchCall<TxnRequest, TxnResponse> {
 public:
  TxnCall(SessionWindow* window, uint64_t n)
      : UnaryBenchCall(&KV::Stub::PrepareAsyncTxn, &PutRan), window_(window), n_(n) {
    if (window != nullptr) window->Tag(n, request.mutable_session());
  }
  ~TxnCall() override {
    if (window_ != nullptr) window_->MarkDone(n_);
  }
  static bool PutRan(const UnaryBenchCall& call) {
    return call.response.succeeded() && call.response.responses_size() == 1 &&
           call.response.responses(0).has_response_put();
  }

 private:
  SessionWindow* window_;
  uint64_t n_;
};

// The keys [0, count) of ks as one range: [Key(0), Key(count - 1) + "\0").
// Keys of one KeySpace sort by number (fixed-width, zero-padded).
std::string RangeEndOf(const KeySpace& ks, uint64_t count) {
  return ks.Key(count - 1) + std::string(1, '\0');
}

// What every Range answer is checked against.
struct RangeExpectation {
  const KeySpace* ks = nullptr;
  uint64_t keys = 0;  // keys written: numbers 0..keys-1
  int limit = 0;
  std::atomic<uint64_t> returned{0};  // keys in answers found as expected
  std::atomic<uint64_t> missing{0};   // answers short of keys
  std::atomic<uint64_t> wrong{0};     // answers with other keys, values or counts
};

// A linearizable Range from key number `first`, up to limit keys.
class RangeCall : public UnaryBenchCall<RangeRequest, RangeResponse> {
 public:
  RangeCall(RangeExpectation* expect, uint64_t first)
      : UnaryBenchCall(&KV::Stub::PrepareAsyncRange, nullptr), expect_(expect), first_(first) {
    request.set_key(expect->ks->Key(first));
    request.set_range_end(RangeEndOf(*expect->ks, expect->keys));
    request.set_limit(expect->limit);
  }
  bool AnswerIsExpected() const override {
    const uint64_t in_range = expect_->keys - first_;
    const uint64_t want = std::min<uint64_t>(in_range, static_cast<uint64_t>(expect_->limit));
    const uint64_t got = static_cast<uint64_t>(response.kvs_size());
    if (got < want) {
      expect_->missing.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    bool ok = got == want && response.more() == (in_range > want) &&
              response.count() == static_cast<int64_t>(in_range);
    thread_local std::string value;
    for (uint64_t j = 0; ok && j < got; ++j) {
      const KeyValue& kv = response.kvs(static_cast<int>(j));
      expect_->ks->FillValue(first_ + j, &value);
      ok = kv.key() == expect_->ks->Key(first_ + j) && kv.value() == value;
    }
    if (!ok) {
      expect_->wrong.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    expect_->returned.fetch_add(got, std::memory_order_relaxed);
    return true;
  }

 private:
  RangeExpectation* expect_;
  uint64_t first_;
};

// Writes keys 0..count-1 of ks (not timed; failed writes are retried up to
// five rounds). False with *error if some could not be written.
bool Preload(const Connections& conns, const BenchConfig& config, const KeySpace& ks,
             uint64_t count, std::string* error) {
  std::vector<uint64_t> todo(count);
  for (uint64_t n = 0; n < count; ++n) todo[n] = n;
  for (int round = 0; round < 5 && !todo.empty(); ++round) {
    const LoadOptions options = MakeLoadOptions(config, todo.size(), true,
                                                std::max(config.timeout_ms, kCheckTimeoutMs));
    const LoadResult lr = RunLoad(conns, options, PutFactory(ks, &todo));
    std::vector<uint64_t> again;
    for (uint64_t n = 0; n < todo.size(); ++n) {
      if (!lr.succeeded[n]) again.push_back(todo[n]);
    }
    if (!again.empty()) {
      Progress(config, std::to_string(again.size()) + " writes failed, retrying them");
    }
    todo.swap(again);
  }
  if (!todo.empty()) {
    *error = std::to_string(todo.size()) + " of the " + std::to_string(count) +
             " keys to read could not be written after 5 attempts";
    return false;
  }
  return true;
}

// One watch stream of the Watch scenario, read by its own thread.
class Watcher {
 public:
  Watcher(const std::string& endpoint, const KeySpace& ks, uint64_t count,
          const std::vector<std::atomic<int64_t>>& stamps)
      : endpoint_(endpoint), ks_(ks), count_(count), stamps_(stamps), seen_(count, 0) {}

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  bool created() const { return created_.load(std::memory_order_acquire); }
  bool ended() const { return ended_.load(std::memory_order_acquire); }
  uint64_t distinct() const { return distinct_.load(std::memory_order_acquire); }
  // Ends the stream and joins the thread.
  void Stop() {
    stopping_.store(true, std::memory_order_release);
    context_.TryCancel();
    if (thread_.joinable()) thread_.join();
  }

  // After Stop.
  const std::string& endpoint() const { return endpoint_; }
  uint8_t seen(uint64_t n) const { return seen_[n]; }
  bool bad(uint64_t n) const { return bad_.count(n) != 0; }
  uint64_t events() const { return events_; }
  uint64_t foreign() const { return foreign_; }
  const Histogram& delivery_ns() const { return delivery_ns_; }
  Clock::time_point last_event() const { return last_event_; }
  // The stream's status if it ended before Stop (OK: it did not).
  const grpc::Status& early_end() const { return early_end_; }

 private:
  void Run() {
    grpc::ChannelArguments args = RaftkvChannelArguments();
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto stub = ::raftkv::Watch::NewStub(MakeChannel(endpoint_, args));
    WatchRequest request;
    request.set_key(ks_.Key(0));
    request.set_range_end(RangeEndOf(ks_, count_));
    auto reader = stub->Watch(&context_, request);
    WatchResponse response;
    std::string value;
    const std::string& tag = ks_.tag();
    while (reader->Read(&response)) {
      const Clock::time_point now = Clock::now();
      if (response.created()) {
        created_.store(true, std::memory_order_release);
        continue;
      }
      for (const Event& event : response.events()) {
        ++events_;
        last_event_ = now;
        const std::string& key = event.kv().key();
        uint64_t n = 0;
        bool parsed = key.size() > tag.size() && key.compare(0, tag.size(), tag) == 0;
        for (size_t i = tag.size(); parsed && i < key.size(); ++i) {
          parsed = key[i] >= '0' && key[i] <= '9';
          n = n * 10 + static_cast<uint64_t>(key[i] - '0');
        }
        if (!parsed || n >= count_) {
          ++foreign_;
          continue;
        }
        const int64_t revision = event.kv().mod_revision();
        ks_.FillValue(n, &value);
        if (event.type() != Event::PUT || event.kv().value() != value ||
            revision <= last_revision_) {
          bad_.insert(n);
        }
        last_revision_ = std::max(last_revision_, revision);
        if (seen_[n] < 255) ++seen_[n];
        if (seen_[n] == 1) distinct_.fetch_add(1, std::memory_order_release);
        const int64_t sent = stamps_[n].load(std::memory_order_relaxed);
        const int64_t delay = now.time_since_epoch().count() - sent;
        if (sent != 0 && delay > 0) delivery_ns_.Record(static_cast<uint64_t>(delay));
      }
    }
    const grpc::Status status = reader->Finish();
    if (!stopping_.load(std::memory_order_acquire)) {
      early_end_ = status.ok() ? grpc::Status(grpc::StatusCode::UNKNOWN,
                                              "the member ended the stream with OK")
                               : status;
    }
    ended_.store(true, std::memory_order_release);
  }

  const std::string endpoint_;
  const KeySpace& ks_;
  const uint64_t count_;
  const std::vector<std::atomic<int64_t>>& stamps_;
  grpc::ClientContext context_;
  std::thread thread_;
  std::atomic<bool> created_{false};
  std::atomic<bool> ended_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> distinct_{0};
  // Written by the stream's thread only; read after Stop.
  std::vector<uint8_t> seen_;  // times each key number was seen (up to 255)
  std::set<uint64_t> bad_;     // keys with a wrong value, type or order
  uint64_t events_ = 0;
  uint64_t foreign_ = 0;       // events of keys not written by this run
  int64_t last_revision_ = 0;
  Histogram delivery_ns_;
  Clock::time_point last_event_{};
  grpc::Status early_end_;
};

// Waits up to timeout_ms for pred(); true if it held.
template <typename Pred>
bool WaitFor(int timeout_ms, Pred pred) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// The Watch scenario: watchers on `members`, the Write load on the leader.
void RunWatch(const Connections& conns, const BenchConfig& config,
              const std::vector<std::string>& members, const CpuProbe& probe,
              ScenarioReport* r) {
  const uint64_t requests = config.requests;
  KeySpace ks(requests, config.key_len, config.value_len, config.seed);
  std::vector<std::atomic<int64_t>> stamps(requests);
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int w = 0; w < config.watchers; ++w) {
    watchers.push_back(std::make_unique<Watcher>(members[static_cast<size_t>(w) % members.size()],
                                                 ks, requests, stamps));
  }
  Progress(config, "Watch: opening " + std::to_string(config.watchers) + " watch streams on " +
                       Join(members, ","));
  for (auto& w : watchers) w->Start();
  auto stop_all = [&] {
    for (auto& w : watchers) w->Stop();
  };
  const bool created = WaitFor(10000, [&] {
    for (auto& w : watchers) {
      if (!w->created() && !w->ended()) return false;
    }
    return true;
  });
  for (auto& w : watchers) {
    if (!created || !w->created()) {
      stop_all();
      r->setup_error = "the watch on " + w->endpoint() + " was not created within 10 s" +
                       (w->early_end().ok() ? std::string()
                                            : ": " + std::string(StatusCodeName(
                                                         w->early_end().error_code())) +
                                                  " " + w->early_end().error_message());
      return;
    }
  }
  std::unique_ptr<SessionWindow> window;
  if (!MaybeOpenSession(config, conns, requests, &window, &r->setup_error)) {
    stop_all();
    return;
  }
  Progress(config, "Watch: " + std::to_string(requests) + " Puts to " + r->target + " while " +
                       std::to_string(config.watchers) + " watchers receive them");
  const Clock::time_point load_start = Clock::now();
  const LoadResult lr = TimedLoad(
      conns, MakeLoadOptions(config, requests, true, config.timeout_ms),
      [&](uint64_t n) {
        auto call = std::make_unique<StampedPutCall>(window.get(), n, &stamps);
        call->request.set_key(ks.Key(n));
        ks.FillValue(n, call->request.mutable_value());
        return call;
      },
      probe, r);
  FillFromLoad(lr, r);
  // Wait for every watcher to have seen every acknowledged write, as long as
  // events keep arriving.
  uint64_t last_total = 0;
  auto last_progress = Clock::now();
  for (;;) {
    uint64_t total = 0;
    bool done = true;
    for (auto& w : watchers) {
      total += w->distinct();
      done = done && (w->ended() || w->distinct() >= lr.succeeded_count);
    }
    if (done) break;
    if (total != last_total) {
      last_total = total;
      last_progress = Clock::now();
    } else if (Clock::now() - last_progress > std::chrono::milliseconds(kCheckTimeoutMs)) {
      Progress(config, "Watch: no event for 10 s; stopping the watchers");
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop_all();

  Verification& v = r->verified;
  v.mode = "every watcher";
  Clock::time_point last_event = load_start;
  uint64_t foreign = 0;
  for (auto& w : watchers) {
    r->items += w->events();
    r->delivery_ns.Merge(w->delivery_ns());
    last_event = std::max(last_event, w->last_event());
    for (uint64_t n = 0; n < requests; ++n) {
      if (!lr.succeeded[n]) continue;
      ++v.population;
      if (w->seen(n) == 0) {
        ++v.missing;
      } else if (w->seen(n) > 1 || w->bad(n)) {
        ++v.wrong;
      } else {
        ++v.ok;
      }
    }
    v.wrong += w->foreign();
    foreign += w->foreign();
    if (!w->early_end().ok()) {
      ++v.errors;
      ++v.errors_by_status[StatusCodeName(w->early_end().error_code())];
    }
  }
  // A foreign event or a stream that broke is one more check that failed.
  v.checked = v.population + foreign + v.errors;
  r->watchers = config.watchers;
  r->items_name = "events";
  const double seconds = std::chrono::duration<double>(last_event - load_start).count();
  r->items_per_sec = seconds > 0 ? static_cast<double>(r->items) / seconds : 0;
}

// How the progress line names the session of a run's writes (null: none).
std::string SessionSuffix(const SessionWindow* window) {
  return window ? " in session " + std::to_string(window->client_id())
                : std::string(" without a session");
}

// The verification of a load whose calls check their own answers, as
// `mode`: of its `requests`, those that got an answer were checked and the
// successful ones were right. The caller adds what was missing or wrong.
Verification& AnswersChecked(const char* mode, uint64_t requests, const LoadResult& lr,
                             ScenarioReport* r) {
  Verification& v = r->verified;
  v.mode = mode;
  v.population = requests;
  v.checked = lr.succeeded_count + lr.wrong_answer;
  v.ok = lr.succeeded_count;
  return v;
}


// Batch: the writes in Batch calls of up to batch_ops, then each acknowledged
// write read back.
void RunBatch(const Connections& conns, const BenchConfig& config, const CpuProbe& probe,
              ScenarioReport* r) {
  const uint64_t requests = config.requests;
  // requests = writes; call n carries writes [n * per_call, ...).
  const uint64_t per_call = static_cast<uint64_t>(config.batch_ops);
  const uint64_t calls = (requests + per_call - 1) / per_call;
  KeySpace ks(requests, config.key_len, config.value_len, config.seed);
  std::unique_ptr<SessionWindow> window;
  if (!MaybeOpenSession(config, conns, calls, &window, &r->setup_error)) return;
  Progress(config, "Batch: " + std::to_string(requests) + " Puts in " + std::to_string(calls) +
                       " Batch calls of up to " + std::to_string(per_call) + " to " +
                       r->target + SessionSuffix(window.get()));
  const LoadResult lr = TimedLoad(
      conns, MakeLoadOptions(config, calls, true, config.timeout_ms),
      [&](uint64_t n) {
        std::unique_ptr<BatchCall> call;
        if (window) {
          call = std::make_unique<SessionBatchCall>(window.get(), n);
        } else {
          call = std::make_unique<BatchCall>(&KV::Stub::PrepareAsyncBatch,
                                             &SessionBatchCall::BatchAnswered);
        }
        const uint64_t end = std::min(requests, (n + 1) * per_call);
        call->request.mutable_ops()->Reserve(static_cast<int>(end - n * per_call));
        for (uint64_t i = n * per_call; i < end; ++i) {
          BatchOp* op = call->request.add_ops();
          op->set_key(ks.Key(i));
          ks.FillValue(i, op->mutable_value());
        }
        return call;
      },
      probe, r);
  FillFromLoad(lr, r);
  // Count writes, not calls (latency stays per call).
  r->calls = lr.sent;
  std::vector<uint64_t> acked;
  for (uint64_t n = 0; n < calls; ++n) {
    if (!lr.succeeded[n]) continue;
    for (uint64_t i = n * per_call; i < std::min(requests, (n + 1) * per_call); ++i) {
      acked.push_back(i);
    }
  }
  r->requests = requests;
  r->acknowledged = acked.size();
  r->failed = requests - acked.size();
  ComputeRates(r);
  r->verified = VerifyWrites(conns, config, ks, std::move(acked));
}

// Read: linearizable Gets of keys written first (not timed).
void RunRead(const Connections& conns, const BenchConfig& config, const CpuProbe& probe,
             ScenarioReport* r) {
  const uint64_t requests = config.requests;
  KeySpace ks(requests, config.key_len, config.value_len, config.seed);
  Progress(config, "Read: writing " + std::to_string(requests) + " keys first (not timed)");
  if (!Preload(conns, config, ks, requests, &r->setup_error)) return;
  Progress(config,
           "Read: " + std::to_string(requests) + " linearizable Gets from " + r->target);
  std::atomic<uint64_t> missing{0}, wrong{0};
  const LoadResult lr = TimedLoad(
      conns, MakeLoadOptions(config, requests, false, config.timeout_ms),
      [&](uint64_t n) {
        auto call = std::make_unique<GetCall>(&missing, &wrong);
        call->request.set_key(ks.Key(n));
        ks.FillValue(n, &call->expected);
        return call;
      },
      probe, r);
  FillFromLoad(lr, r);
  Verification& v = AnswersChecked("every read", requests, lr, r);
  v.missing = missing.load();
  v.wrong = wrong.load();
}

// A load of one write per call (Write: Puts; Txn: create-if-absent
// transactions), in a client session unless --sessions=false; then each
// acknowledged write is read back. `what` names the calls in the progress
// line; `make` builds them for the run's keys and session (null: none).
void RunWriteLoad(const Connections& conns, const BenchConfig& config, const CpuProbe& probe,
                  const std::string& what,
                  const std::function<CallFactory(const KeySpace&, SessionWindow*)>& make,
                  ScenarioReport* r) {
  const uint64_t requests = config.requests;
  KeySpace ks(requests, config.key_len, config.value_len, config.seed);
  std::unique_ptr<SessionWindow> window;
  if (!MaybeOpenSession(config, conns, requests, &window, &r->setup_error)) return;
  Progress(config, what + " to " + r->target + SessionSuffix(window.get()));
  const LoadResult lr =
      TimedLoad(conns, MakeLoadOptions(config, requests, true, config.timeout_ms),
                make(ks, window.get()), probe, r);
  FillFromLoad(lr, r);
  r->verified = VerifyWrites(conns, config, ks, Acknowledged(lr));
}

// Write: `requests` Puts of distinct keys, then each acknowledged one read back.
void RunWrite(const Connections& conns, const BenchConfig& config, const CpuProbe& probe,
              ScenarioReport* r) {
  RunWriteLoad(
      conns, config, probe, "Write: " + std::to_string(config.requests) + " Puts",
      [](const KeySpace& ks, SessionWindow* window) { return PutFactory(ks, nullptr, window); },
      r);
}

// Transactions that create key n with its value if it is absent (else read
// it), in `window`'s session when it is not null.
CallFactory TxnFactory(const KeySpace& ks, SessionWindow* window) {
  return [&ks, window](uint64_t n) {
    auto call = std::make_unique<TxnCall>(window, n);
    Compare* cmp = call->request.add_compare();
    cmp->set_key(ks.Key(n));
    cmp->set_target(Compare::CREATE);
    cmp->set_result(Compare::EQUAL);
    cmp->set_create_revision(0);
    PutRequest* put = call->request.add_success()->mutable_request_put();
    put->set_key(ks.Key(n));
    ks.FillValue(n, put->mutable_value());
    call->request.add_failure()->mutable_request_range()->set_key(ks.Key(n));
    return call;
  };
}

// Txn: create-if-absent transactions, then each acknowledged write read back.
void RunTxn(const Connections& conns, const BenchConfig& config, const CpuProbe& probe,
            ScenarioReport* r) {
  RunWriteLoad(conns, config, probe,
               "Txn: " + std::to_string(config.requests) + " create-if-absent transactions",
               TxnFactory, r);
}

// Range: linearizable Ranges over keys written first (not timed).
void RunRange(const Connections& conns, const BenchConfig& config, const CpuProbe& probe,
              ScenarioReport* r) {
  const uint64_t requests = config.requests;
  KeySpace ks(config.range_keys, config.key_len, config.value_len, config.seed);
  Progress(config, "Range: writing " + std::to_string(config.range_keys) +
                       " keys first (not timed)");
  if (!Preload(conns, config, ks, config.range_keys, &r->setup_error)) return;
  Progress(config, "Range: " + std::to_string(requests) +
                       " linearizable Ranges of up to " + std::to_string(config.range_limit) +
                       " keys from " + r->target);
  RangeExpectation expect;
  expect.ks = &ks;
  expect.keys = config.range_keys;
  expect.limit = config.range_limit;
  const uint64_t pick_seed = Mix64(config.seed ^ 0x72616e6765ull);
  const LoadResult lr = TimedLoad(
      conns, MakeLoadOptions(config, requests, false, config.timeout_ms),
      [&](uint64_t n) {
        return std::make_unique<RangeCall>(&expect, Mix64(pick_seed + n) % expect.keys);
      },
      probe, r);
  FillFromLoad(lr, r);
  r->range_limit = config.range_limit;
  r->range_keys = config.range_keys;
  r->items_name = "keys";
  r->items = expect.returned.load();
  r->items_per_sec = r->seconds > 0 ? static_cast<double>(r->items) / r->seconds : 0;
  Verification& v = AnswersChecked("every range", requests, lr, r);
  v.missing = expect.missing.load();
  v.wrong = expect.wrong.load();
}

// Echo: Echo calls with a payload as long as a Put's key + value.
void RunEcho(const Connections& conns, const BenchConfig& config, const CpuProbe& probe,
             ScenarioReport* r) {
  const uint64_t requests = config.requests;
  // The payload is as long as a Put's key + value.
  // Only values are used; the key length is the validated --key_len.
  KeySpace ks(requests, config.key_len, config.key_len + config.value_len, config.seed);
  Progress(config, "Echo: " + std::to_string(requests) + " Echo calls to " + r->target);
  const LoadResult lr = TimedLoad(
      conns, MakeLoadOptions(config, requests, false, config.timeout_ms),
      [&](uint64_t n) {
        auto call = std::make_unique<EchoCall>(&KV::Stub::PrepareAsyncEcho, &EchoMatches);
        ks.FillValue(n, call->request.mutable_payload());
        return call;
      },
      probe, r);
  FillFromLoad(lr, r);
  AnswersChecked("every echo", requests, lr, r).wrong = lr.wrong_answer;
}

// --via_follower: picks the member (other than the leader) that receives
// the load into r->via; false (with r->setup_error) when there is none.
bool PickFollower(const BenchConfig& config, const std::vector<std::string>& members,
                  ScenarioReport* r) {
  for (const std::string& m : members) {
    if (m != r->target) {
      r->via = m;
      break;
    }
  }
  if (r->via.empty()) {
    r->setup_error = "--via_follower: the cluster has no follower";
    return false;
  }
  Progress(config, "sending the load to follower " + r->via + ", which forwards it to the leader");
  return true;
}

// After Write with one request in flight: the network's and the disk's
// share of it (bench/floor.h), on the same connections and machine.
void MeasureFloor(const Connections& conns, const BenchConfig& config, ScenarioReport* r) {
  Floor& f = r->floor;
  if (config.floor_dir.empty()) {
    f.error = "no directory for the fdatasync probe (--floor_dir)";
    return;
  }
  Progress(config, "floor: 1000 Echo calls one at a time, 200 fdatasyncs in " + config.floor_dir);
  f.write_p50_us = Summarize(r->latency_ns).p50;
  const size_t payload = static_cast<size_t>(config.key_len + config.value_len);
  f.echo_rtt_p50_us = MedianEchoMicros(conns, 1000, payload, config.timeout_ms, &f.error);
  if (f.error.empty()) {
    // A record of the log: the Put's key and value plus the entry's framing.
    f.fsync_p50_us = MedianFsyncMicros(config.floor_dir, 200, payload + 64, &f.error);
  }
  ComputeFloorRatio(&f);
}

// The part of a run that needs a leader: load + verification.
void RunOnLeader(Scenario scenario, const BenchConfig& config,
                 const std::vector<std::string>& members, const CpuProbe& probe,
                 ScenarioReport* r) {
  if (config.via_follower && !PickFollower(config, members, r)) return;
  Connections conns(r->via.empty() ? r->target : r->via, config.conns);
  std::string error;
  if (!conns.WaitConnected(10000, &error)) {
    r->setup_error = error;
    return;
  }
  switch (scenario) {
    case Scenario::kWrite:
      RunWrite(conns, config, probe, r);
      if (config.inflight == 1 && r->passed()) MeasureFloor(conns, config, r);
      break;
    case Scenario::kBatch:
      RunBatch(conns, config, probe, r);
      break;
    case Scenario::kRead:
      RunRead(conns, config, probe, r);
      break;
    case Scenario::kTxn:
      RunTxn(conns, config, probe, r);
      break;
    case Scenario::kRange:
      RunRange(conns, config, probe, r);
      break;
    case Scenario::kWatch:
      RunWatch(conns, config, members, probe, r);
      break;
    case Scenario::kEcho:
      RunEcho(conns, config, probe, r);
      break;
  }
}

}  // namespace

const char* ScenarioName(Scenario s) {
  switch (s) {
    case Scenario::kWrite: return "Write";
    case Scenario::kRead: return "Read";
    case Scenario::kEcho: return "Echo";
    case Scenario::kBatch: return "Batch";
    case Scenario::kTxn: return "Txn";
    case Scenario::kRange: return "Range";
    case Scenario::kWatch: return "Watch";
  }
  return "?";
}

std::vector<std::string> SplitFlags(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  std::string item;
  while (in >> item) out.push_back(item);
  return out;
}

std::string ValidateConfig(const BenchConfig& c) {
  if (c.requests == 0) return "--requests must be at least 1";
  if (c.key_len < 1) return "--key_len must be at least 1";
  if (c.value_len < 0) return "--value_len must not be negative";
  if (c.followers < 0) return "--followers must not be negative";
  if (c.conns < 1) return "--conns must be at least 1";
  if (c.client_cq_num < 1) return "--client_cq_num must be at least 1";
  if (c.client_threads_per_cq < 1) return "--client_threads_per_cq must be at least 1";
  if (c.inflight < 1) return "--inflight must be at least 1";
  if (c.timeout_ms < 1) return "--write_timeout_ms must be at least 1";
  if (c.batch_ops < 1) return "--batch_ops must be at least 1";
  if (c.range_keys < 1) return "--range_keys must be at least 1";
  if (c.range_limit < 1) return "--range_limit must be at least 1";
  if (c.watchers < 1) return "--watchers must be at least 1";
  if (KeySpace rks(c.range_keys, c.key_len, c.value_len, 0); !rks.error().empty()) {
    return "--range_keys: " + rks.error();
  }
  if (c.metrics_port_base < 0 || c.metrics_port_base + 1 + c.followers > 65535) {
    return "--metrics_port_base must be 0 (off) or leave room for one port per member below 65536";
  }
  KeySpace ks(c.requests, c.key_len, c.value_len, 0);
  if (!ks.error().empty()) return ks.error();
  if (!c.target.empty()) {
    std::vector<std::string> eps;
    std::string error;
    if (Status s = ParseEndpointList(c.target, &eps); !s.ok()) return "--target: " + s.message();
  }
  return "";
}

ScenarioReport RunScenario(Scenario scenario, const BenchConfig& config) {
  ScenarioReport r;
  r.scenario = ScenarioName(scenario);
  r.operation = scenario == Scenario::kWrite   ? "Put"
                : scenario == Scenario::kRead  ? "Get"
                : scenario == Scenario::kBatch ? "Put (batched)"
                : scenario == Scenario::kTxn   ? "Txn"
                : scenario == Scenario::kRange ? "Range"
                : scenario == Scenario::kWatch ? "Put (watched)"
                                               : "Echo";
  if (scenario == Scenario::kBatch) r.ops_per_call = config.batch_ops;
  r.value_len = config.value_len;
  r.key_len = config.key_len;
  r.followers = config.followers;
  r.conns = config.conns;
  r.inflight = config.inflight;
  r.client_cq_num = config.client_cq_num;
  r.client_threads_per_cq = config.client_threads_per_cq;
  r.timeout_ms = config.timeout_ms;
  r.server_flags = Join(config.server_flags, " ");
  r.seed = config.seed;
  r.requests = config.requests;
  r.setup_error = ValidateConfig(config);
  if (!r.setup_error.empty()) return r;

  if (!config.target.empty()) {
    r.cluster = "external";
    std::vector<std::string> endpoints;
    std::string error;
    (void)ParseEndpointList(config.target, &endpoints);
    if (!FindLeader(endpoints, 10000, &r.target, &r.followers, &error)) {
      r.setup_error = error;
      return r;
    }
    Progress(config, "using the existing cluster " + config.target + ": leader " + r.target +
                         ", " + std::to_string(r.followers) + " followers");
    RunOnLeader(scenario, config, endpoints, CpuProbe(), &r);
    return r;
  }

  r.cluster = "local";
  const int members = 1 + config.followers;
  Progress(config, "starting a local cluster of " + std::to_string(members) +
                       " raftkv-server processes");
  integration::ProcessCluster cluster(members, config.server_flags);
  if (config.metrics_port_base != 0) {
    cluster.EnableMetrics(config.metrics_port_base);
    std::string urls;
    for (int i = 1; i <= members; ++i) {
      urls += " http://127.0.0.1:" + std::to_string(cluster.MetricsPort(i)) + "/metrics";
    }
    Progress(config, "metrics of members 1.." + std::to_string(members) + ":" + urls);
  }
  std::string error;
  if (!cluster.StartAll(&error)) {
    r.setup_error = "cannot start the local cluster: " + error;
    cluster.KeepDir();
    return r;
  }
  const uint64_t leader = cluster.WaitForLeader(30000, &error);
  if (leader == 0) {
    r.setup_error = error;
    cluster.KeepDir();
    return r;
  }
  r.target = cluster.Endpoint(static_cast<int>(leader));
  if (config.keep_cluster_dir) cluster.KeepDir();
  Progress(config, "leader is member " + std::to_string(leader) + " at " + r.target + " (data in " +
                       cluster.dir() + ")");
  CpuProbe probe;
  probe.leader = cluster.Pid(static_cast<int>(leader));
  for (int i = 1; i <= members; ++i) {
    if (i != static_cast<int>(leader)) probe.followers.push_back(cluster.Pid(i));
  }
  std::vector<std::string> endpoints;
  for (int i = 1; i <= members; ++i) endpoints.push_back(cluster.Endpoint(i));
  BenchConfig local = config;
  if (local.floor_dir.empty()) local.floor_dir = cluster.dir();
  RunOnLeader(scenario, local, endpoints, probe, &r);
  Progress(config, "stopping the local cluster");
  if (config.keep_cluster_dir) cluster.KeepDir();
  if (!r.passed()) {
    cluster.KeepDir();
    std::cerr << "[ bench    ] keeping the cluster's logs and data for inspection:\n"
              << cluster.Describe(2000);
  }
  return r;
}

}  // namespace bench
}  // namespace raftkv
