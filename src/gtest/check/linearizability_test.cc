#include "check/linearizability.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/common/temp_dir.h"

namespace raftkv::check {
namespace {

using std::chrono::milliseconds;
using testing_util::TempDir;
using testing_util::WriteFileBytes;

constexpr milliseconds kBudget{10000};

// ---- building histories by hand ----

Operation Put(int client, const std::string& key, const std::string& value, int64_t invoke,
              int64_t ret) {
  Operation op;
  op.client = client;
  op.key = key;
  op.type = OpType::kPut;
  op.value = value;
  op.invoke_ns = invoke;
  op.return_ns = ret;
  return op;
}

// A Get that read `result` (nullopt: the key was absent).
Operation Get(int client, const std::string& key, const std::optional<std::string>& result,
              int64_t invoke, int64_t ret) {
  Operation op;
  op.client = client;
  op.key = key;
  op.type = OpType::kGet;
  op.found = result.has_value();
  op.result = result.value_or("");
  op.invoke_ns = invoke;
  op.return_ns = ret;
  return op;
}

Operation Delete(int client, const std::string& key, bool existed, int64_t invoke, int64_t ret) {
  Operation op;
  op.client = client;
  op.key = key;
  op.type = OpType::kDelete;
  op.existed = existed;
  op.invoke_ns = invoke;
  op.return_ns = ret;
  return op;
}

// expected nullopt: create-only. prior nullopt: the key was absent before.
Operation Cas(int client, const std::string& key, const std::optional<std::string>& expected,
              const std::string& value, bool swapped, const std::optional<std::string>& prior,
              int64_t invoke, int64_t ret) {
  Operation op;
  op.client = client;
  op.key = key;
  op.type = OpType::kCas;
  op.has_expected = expected.has_value();
  op.expected = expected.value_or("");
  op.value = value;
  op.swapped = swapped;
  op.found = prior.has_value();
  op.result = prior.value_or("");
  op.invoke_ns = invoke;
  op.return_ns = ret;
  return op;
}

Operation Unknown(Operation op) {
  op.outcome = Outcome::kUnknown;
  op.return_ns = 0;  // ignored
  op.found = op.swapped = op.existed = false;
  op.result.clear();
  return op;
}

Operation Failed(Operation op) {
  op.outcome = Outcome::kFail;
  return op;
}

CheckResult Check(const std::vector<Operation>& history) { return CheckHistory(history, kBudget); }

// Explanations go to the log of failing tests, and show what they look like.
std::string Explanations(const CheckResult& result) {
  std::string out;
  for (const KeyReport& report : result.reports) out += report.explanation;
  return out;
}

#define EXPECT_LINEARIZABLE(history)                  \
  do {                                                \
    const CheckResult r_ = Check(history);            \
    EXPECT_TRUE(r_.linearizable) << Explanations(r_); \
    EXPECT_FALSE(r_.timed_out);                       \
    EXPECT_EQ(r_.violations, 0u);                     \
  } while (0)

#define EXPECT_NOT_LINEARIZABLE(history)   \
  do {                                     \
    const CheckResult r_ = Check(history); \
    EXPECT_FALSE(r_.linearizable);         \
    EXPECT_FALSE(r_.timed_out);            \
    EXPECT_EQ(r_.violations, 1u);          \
    std::cout << Explanations(r_);         \
  } while (0)

// ---- sequential histories ----

TEST(LinearizabilityTest, EmptyHistory) {
  const CheckResult r = Check({});
  EXPECT_TRUE(r.linearizable);
  EXPECT_EQ(r.keys, 0u);
  EXPECT_EQ(r.ops, 0u);
}

TEST(LinearizabilityTest, SequentialLegal) {
  EXPECT_LINEARIZABLE((std::vector<Operation>{
      Get(1, "k", std::nullopt, 0, 1),
      Put(1, "k", "a", 2, 3),
      Get(2, "k", "a", 4, 5),
      Cas(1, "k", std::string("a"), "b", true, std::string("a"), 6, 7),
      Cas(2, "k", std::string("a"), "c", false, std::string("b"), 8, 9),
      Cas(2, "k", std::nullopt, "c", false, std::string("b"), 10, 11),
      Get(1, "k", "b", 12, 13),
      Delete(1, "k", true, 14, 15),
      Delete(2, "k", false, 16, 17),
      Cas(2, "k", std::nullopt, "d", true, std::nullopt, 18, 19),
      Cas(1, "k", std::string("x"), "e", false, std::string("d"), 20, 21),
      Get(1, "k", "d", 22, 23),
  }));
}

TEST(LinearizabilityTest, StaleReadAfterCompletedWrite) {
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 1),
      Put(1, "k", "b", 2, 3),
      Get(2, "k", "a", 4, 5),
  }));
}

TEST(LinearizabilityTest, ReadOfValueNeverWritten) {
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 10),
      Get(2, "k", "z", 5, 15),
  }));
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{Get(2, "k", "", 5, 15)}));
}

TEST(LinearizabilityTest, DeleteExistedMismatch) {
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{Delete(1, "k", true, 0, 1)}));
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 1),
      Delete(1, "k", false, 2, 3),
  }));
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 1),
      Delete(1, "k", true, 2, 3),
      Delete(2, "k", true, 4, 5),
  }));
}

TEST(LinearizabilityTest, CasSwappedWhenItShouldNot) {
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 1),
      Cas(1, "k", std::string("b"), "c", true, std::string("a"), 2, 3),
  }));
  // Create-only on a present key.
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 1),
      Cas(1, "k", std::nullopt, "c", true, std::string("a"), 2, 3),
  }));
  // And the converse: not swapped although it matched.
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 1),
      Cas(1, "k", std::string("a"), "c", false, std::string("a"), 2, 3),
  }));
}

TEST(LinearizabilityTest, CasReportingWrongPriorValue) {
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 1),
      Cas(1, "k", std::string("b"), "c", false, std::string("x"), 2, 3),
  }));
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 1),
      Cas(1, "k", std::string("b"), "c", false, std::nullopt, 2, 3),
  }));
}

TEST(LinearizabilityTest, CasEffectIsVisible) {
  const std::vector<Operation> base = {
      Put(1, "k", "a", 0, 1),
      Cas(1, "k", std::string("a"), "b", true, std::string("a"), 2, 3),
  };
  std::vector<Operation> good = base, bad = base;
  good.push_back(Get(2, "k", "b", 4, 5));
  bad.push_back(Get(2, "k", "a", 4, 5));
  EXPECT_LINEARIZABLE(good);
  EXPECT_NOT_LINEARIZABLE(bad);
}

// ---- concurrency ----

TEST(LinearizabilityTest, OverlappingWritesEitherOrder) {
  for (const char* seen : {"a", "b"}) {
    EXPECT_LINEARIZABLE((std::vector<Operation>{
        Put(1, "k", "a", 0, 10),
        Put(2, "k", "b", 5, 15),
        Get(3, "k", seen, 20, 30),
        Get(3, "k", seen, 40, 50),
    }));
  }
}

TEST(LinearizabilityTest, OrderFixedOnceBothComplete) {
  // After both writes completed, two sequential reads cannot disagree.
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 10),
      Put(2, "k", "b", 5, 15),
      Get(3, "k", "a", 20, 30),
      Get(3, "k", "b", 40, 50),
  }));
}

TEST(LinearizabilityTest, ReadInsideLongWriteSeesIt) {
  // The read is entirely inside the write: legal only with the write first.
  EXPECT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 100),
      Get(2, "k", "a", 10, 20),
      Get(2, "k", "a", 30, 40),
  }));
  // Once seen, the write cannot be unseen.
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 100),
      Get(2, "k", "a", 10, 20),
      Get(2, "k", std::nullopt, 30, 40),
  }));
}

TEST(LinearizabilityTest, ConcurrentReadsOnlyLegalInOneOrder) {
  // get->absent must come before the put and get->"x" after it.
  EXPECT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "x", 0, 10),
      Get(2, "k", "x", 1, 9),
      Get(3, "k", std::nullopt, 2, 8),
  }));
  // The same reads one after the other in the wrong order.
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "x", 0, 10),
      Get(2, "k", "x", 1, 3),
      Get(2, "k", std::nullopt, 4, 8),
  }));
}

TEST(LinearizabilityTest, TouchingIntervalsAreConcurrent) {
  // A return at the same instant as another op's invoke does not order them.
  EXPECT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 10),
      Get(2, "k", std::nullopt, 10, 12),
  }));
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 10),
      Get(2, "k", std::nullopt, 11, 12),
  }));
}

TEST(LinearizabilityTest, CasChainNeedsSpecificOrder) {
  // Three concurrent CASes; only a -> b -> c -> d is consistent with the results.
  EXPECT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 1),
      Cas(3, "k", std::string("c"), "d", true, std::string("c"), 10, 20),
      Cas(2, "k", std::string("b"), "c", true, std::string("b"), 10, 20),
      Cas(1, "k", std::string("a"), "b", true, std::string("a"), 10, 20),
      Get(1, "k", "d", 30, 31),
  }));
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 1),
      Cas(3, "k", std::string("c"), "d", true, std::string("c"), 10, 20),
      Cas(2, "k", std::string("b"), "c", true, std::string("b"), 10, 20),
      Cas(1, "k", std::string("a"), "b", true, std::string("a"), 10, 20),
      Get(1, "k", "c", 30, 31),
  }));
}

// ---- unknown and failed outcomes ----

TEST(LinearizabilityTest, UnknownWriteThatTookEffect) {
  EXPECT_LINEARIZABLE((std::vector<Operation>{
      Unknown(Put(1, "k", "a", 0, 0)),
      Get(2, "k", std::nullopt, 50, 60),  // not yet applied
      Get(2, "k", "a", 100, 110),         // applied long after the client gave up
      Get(3, "k", "a", 120, 130),
  }));
}

TEST(LinearizabilityTest, UnknownWriteThatNeverTookEffect) {
  EXPECT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "a", 0, 1),
      Unknown(Put(1, "k", "b", 2, 0)),
      Unknown(Delete(2, "k", false, 3, 0)),
      Get(2, "k", "a", 100, 110),
  }));
}

TEST(LinearizabilityTest, UnknownWriteReadBeforeItsInvoke) {
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Get(2, "k", "a", 0, 10),
      Unknown(Put(1, "k", "a", 20, 0)),
  }));
}

TEST(LinearizabilityTest, UnknownCasOnlyWritesIfItMatches) {
  EXPECT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "x", 0, 1),
      Unknown(Cas(2, "k", std::string("x"), "z", false, std::nullopt, 2, 0)),
      Get(1, "k", "z", 10, 11),
  }));
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "k", "x", 0, 1),
      Unknown(Cas(2, "k", std::string("y"), "z", false, std::nullopt, 2, 0)),
      Get(1, "k", "z", 10, 11),
  }));
}

TEST(LinearizabilityTest, UnknownWriteTakesEffectOnlyOnce) {
  // Seeing "a" again after "b" overwrote it needs a second write of "a".
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Unknown(Put(1, "k", "a", 0, 0)),
      Get(2, "k", "a", 10, 11),
      Put(2, "k", "b", 12, 13),
      Get(2, "k", "a", 14, 15),
  }));
}

TEST(LinearizabilityTest, FailedWriteIsNotVisible) {
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Failed(Put(1, "k", "a", 0, 10)),
      Get(2, "k", "a", 20, 30),
  }));
  EXPECT_LINEARIZABLE((std::vector<Operation>{
      Failed(Put(1, "k", "a", 0, 10)),
      Get(2, "k", std::nullopt, 20, 30),
  }));
}

TEST(LinearizabilityTest, DroppedOpsAreNotCounted) {
  const CheckResult r = Check({
      Put(1, "k", "a", 0, 1),
      Failed(Put(1, "k", "b", 2, 3)),
      Unknown(Get(2, "k", "zzz", 4, 0)),  // unknown gets constrain nothing
      Unknown(Put(2, "k", "c", 5, 0)),
      Get(1, "k", "a", 6, 7),
  });
  EXPECT_TRUE(r.linearizable) << Explanations(r);
  EXPECT_EQ(r.ops, 3u);
  ASSERT_EQ(r.reports.size(), 1u);
  EXPECT_EQ(r.reports[0].ops, 3u);
}

// ---- keys ----

TEST(LinearizabilityTest, KeysAreIndependent) {
  // Interleaved in time, but each key is its own register.
  EXPECT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "a", "1", 0, 1),
      Put(1, "b", "2", 2, 3),
      Get(2, "a", "1", 4, 5),
      Get(2, "b", "2", 6, 7),
      Get(2, "c", std::nullopt, 8, 9),
  }));
  // The value of another key is not readable here.
  EXPECT_NOT_LINEARIZABLE((std::vector<Operation>{
      Put(1, "a", "1", 0, 1),
      Get(2, "b", "1", 4, 5),
  }));
}

TEST(LinearizabilityTest, OnlyTheBadKeyIsReported) {
  const CheckResult r = Check({
      Put(1, "a", "1", 0, 1),
      Put(1, "b", "1", 2, 3),
      Put(1, "c", "1", 4, 5),
      Put(1, "b", "2", 6, 7),
      Get(2, "a", "1", 8, 9),
      Get(2, "b", "1", 10, 11),  // stale
      Get(2, "c", "1", 12, 13),
  });
  EXPECT_FALSE(r.linearizable);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.keys, 3u);
  EXPECT_EQ(r.ops, 7u);
  EXPECT_EQ(r.violations, 1u);
  ASSERT_EQ(r.reports.size(), 3u);
  EXPECT_EQ(r.reports[0].key, "a");
  EXPECT_TRUE(r.reports[0].linearizable);
  EXPECT_EQ(r.reports[1].key, "b");
  EXPECT_FALSE(r.reports[1].linearizable);
  EXPECT_EQ(r.reports[1].ops, 3u);
  EXPECT_TRUE(r.reports[2].linearizable);
  EXPECT_TRUE(r.reports[0].explanation.empty());
}

TEST(LinearizabilityTest, ExplanationNamesKeyAndBadOp) {
  const CheckResult r = Check({
      Put(1, "the-key", "v1", 0, 10),
      Put(4, "the-key", "v2", 20, 30),
      Get(7, "the-key", "v1", 40, 50),
  });
  ASSERT_EQ(r.reports.size(), 1u);
  const std::string& e = r.reports[0].explanation;
  std::cout << e;
  EXPECT_NE(e.find("\"the-key\""), std::string::npos);
  EXPECT_NE(e.find("2 of 3 ok ops"), std::string::npos);
  EXPECT_NE(e.find("client 7 get(\"the-key\") = \"v1\" ok [t 40 .. 50]"), std::string::npos);
  EXPECT_NE(e.find("the register holds \"v2\""), std::string::npos);
}

// ---- randomized: histories of a correct register ----

struct SimOptions {
  int clients = 5;
  int ops = 300;
  int keys = 1;
  double unknown_rate = 0.0;  // of writes: outcome unknown (applied or not, maybe late)
  double fail_rate = 0.0;     // of writes: known failed (not applied)
  uint64_t seed = 1;
};

// A deterministic simulation of clients using a correct atomic register per
// key: every op gets a random interval, takes effect at a random instant in
// it (unknown writes: at a random instant after their invoke, or never), and
// its outputs come from applying the ops in the order of those instants.
std::vector<Operation> SimulateRegister(const SimOptions& options) {
  std::mt19937_64 rng(options.seed);
  auto uniform = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto chance = [&rng](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };

  std::vector<Operation> history;
  std::vector<int64_t> effect_at;  // -1: never takes effect
  std::vector<int64_t> client_free(options.clients);
  for (auto& t : client_free) t = uniform(0, 50);
  std::map<std::string, std::vector<std::string>> written;
  for (int i = 0; i < options.ops; ++i) {
    const int client = static_cast<int>(std::min_element(client_free.begin(), client_free.end()) -
                                        client_free.begin());
    Operation op;
    op.client = client;
    op.key = "key" + std::to_string(uniform(0, options.keys - 1));
    const int64_t kind = uniform(0, 99);
    op.type = kind < 35   ? OpType::kPut
              : kind < 70 ? OpType::kGet
              : kind < 80 ? OpType::kDelete
                          : OpType::kCas;
    op.value = "c" + std::to_string(client) + "-" + std::to_string(i);
    if (op.type == OpType::kCas) {
      const auto& values = written[op.key];
      op.has_expected = !values.empty() && !chance(0.2);
      if (op.has_expected) {
        const int64_t back = std::min<int64_t>(uniform(0, 3), values.size() - 1);
        op.expected = values[values.size() - 1 - back];
      }
    }
    if (op.type == OpType::kPut || op.type == OpType::kCas) written[op.key].push_back(op.value);
    op.invoke_ns = client_free[client] + uniform(0, 20);
    op.return_ns = op.invoke_ns + uniform(1, 100);
    int64_t effect = uniform(op.invoke_ns, op.return_ns);
    if (op.type != OpType::kGet && chance(options.unknown_rate)) {
      op.outcome = Outcome::kUnknown;
      effect = chance(0.5) ? op.invoke_ns + uniform(0, 2000) : -1;
    } else if (op.type != OpType::kGet && chance(options.fail_rate)) {
      op.outcome = Outcome::kFail;
      effect = -1;
    }
    client_free[client] = op.return_ns + 1;
    history.push_back(op);
    effect_at.push_back(effect);
  }

  std::vector<size_t> order;
  for (size_t i = 0; i < history.size(); ++i) {
    if (effect_at[i] >= 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return effect_at[a] < effect_at[b]; });
  std::map<std::string, std::optional<std::string>> state;
  for (size_t i : order) {
    Operation& op = history[i];
    std::optional<std::string>& s = state[op.key];
    switch (op.type) {
      case OpType::kPut:
        s = op.value;
        break;
      case OpType::kGet:
        op.found = s.has_value();
        op.result = s.value_or("");
        break;
      case OpType::kDelete:
        op.existed = s.has_value();
        s.reset();
        break;
      case OpType::kCas: {
        const bool matches = op.has_expected ? (s && *s == op.expected) : !s;
        op.found = s.has_value();
        op.result = s.value_or("");
        op.swapped = matches;
        if (matches) s = op.value;
        break;
      }
    }
  }
  return history;
}

// Makes one ok read of `key` (or of any key) return a value nobody wrote.
bool CorruptOneRead(std::vector<Operation>* history, uint64_t seed, const std::string& key = "") {
  std::vector<size_t> reads;
  for (size_t i = 0; i < history->size(); ++i) {
    const Operation& op = (*history)[i];
    if (op.type == OpType::kGet && op.outcome == Outcome::kOk && (key.empty() || op.key == key)) {
      reads.push_back(i);
    }
  }
  if (reads.empty()) return false;
  Operation& op = (*history)[reads[std::mt19937_64(seed)() % reads.size()]];
  op.found = true;
  op.result = "never-written";
  return true;
}

TEST(LinearizabilityTest, RandomCorrectRegisterHistories) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SimOptions options;
    options.seed = seed;
    options.clients = 2 + static_cast<int>(seed % 7);
    options.keys = 1 + static_cast<int>(seed % 3);
    options.unknown_rate = seed % 2 == 0 ? 0.05 : 0.0;
    options.fail_rate = seed % 4 == 0 ? 0.05 : 0.0;
    std::vector<Operation> history = SimulateRegister(options);
    const CheckResult good = Check(history);
    EXPECT_TRUE(good.linearizable) << "seed " << seed << "\n" << Explanations(good);
    EXPECT_FALSE(good.timed_out) << "seed " << seed;
    EXPECT_EQ(good.keys, static_cast<size_t>(options.keys)) << "seed " << seed;

    ASSERT_TRUE(CorruptOneRead(&history, seed));
    const CheckResult bad = Check(history);
    EXPECT_FALSE(bad.linearizable) << "seed " << seed;
    EXPECT_FALSE(bad.timed_out) << "seed " << seed;
    EXPECT_EQ(bad.violations, 1u) << "seed " << seed;
    size_t explained = 0;
    for (const KeyReport& report : bad.reports) {
      if (report.linearizable) continue;
      EXPECT_NE(report.explanation.find("never-written"), std::string::npos) << report.explanation;
      ++explained;
    }
    EXPECT_EQ(explained, 1u);
  }
}

// ---- randomized: small arbitrary histories against a brute-force checker ----

// Tries every order of the ops (each unknown op either placed somewhere after
// its invoke or left out), with no pruning at all.
class BruteForce {
 public:
  explicit BruteForce(const std::vector<Operation>& history) {
    for (const Operation& op : history) {
      if (op.outcome == Outcome::kFail) continue;
      if (op.type == OpType::kGet && op.outcome == Outcome::kUnknown) continue;
      ops_.push_back(op);
    }
    used_.assign(ops_.size(), false);
  }

  bool Linearizable() { return Search(std::nullopt); }

 private:
  bool Search(const std::optional<std::string>& state) {
    bool all_ok_done = true;
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (!used_[i] && ops_[i].outcome == Outcome::kOk) all_ok_done = false;
    }
    if (all_ok_done) return true;
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (used_[i] || !Minimal(i)) continue;
      std::optional<std::string> next = state;
      if (!Apply(ops_[i], &next)) continue;
      used_[i] = true;
      const bool ok = Search(next);
      used_[i] = false;
      if (ok) return true;
    }
    return false;
  }

  // No unplaced ok op returned before ops_[i] was invoked.
  bool Minimal(size_t i) const {
    for (size_t j = 0; j < ops_.size(); ++j) {
      if (!used_[j] && ops_[j].outcome == Outcome::kOk &&
          std::max(ops_[j].return_ns, ops_[j].invoke_ns) < ops_[i].invoke_ns) {
        return false;
      }
    }
    return true;
  }

  static bool Apply(const Operation& op, std::optional<std::string>* state) {
    const bool unknown = op.outcome == Outcome::kUnknown;
    const bool present = state->has_value();
    switch (op.type) {
      case OpType::kPut:
        *state = op.value;
        return true;
      case OpType::kGet:
        return op.found == present && (!op.found || op.result == **state);
      case OpType::kDelete: {
        const bool legal = unknown || op.existed == present;
        state->reset();
        return legal;
      }
      case OpType::kCas: {
        const bool matches = op.has_expected ? (present && **state == op.expected) : !present;
        const bool legal = unknown || (op.swapped == matches && op.found == present &&
                                       (!op.found || op.result == **state));
        if (matches) *state = op.value;
        return legal;
      }
    }
    return false;
  }

  std::vector<Operation> ops_;
  std::vector<bool> used_;
};

std::vector<Operation> RandomSmallHistory(std::mt19937_64& rng) {
  auto uniform = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  // Either a few values shared by all writes, or a fresh value per write
  // (reads then return one of the values written so far, or a stray one).
  const bool unique = uniform(0, 1) == 1;
  std::vector<std::string> values = {"a", "b", "c"};
  auto value = [&] { return values[uniform(0, static_cast<int64_t>(values.size()) - 1)]; };
  std::vector<Operation> history;
  const int clients = static_cast<int>(uniform(1, 4));
  const int ops = static_cast<int>(uniform(1, 8));
  // Unknown outcomes are what the search's pruning rules are about: half of
  // the histories have many.
  const int64_t ok_cut = uniform(0, 1) == 1 ? 7 : 4;
  if (unique) values = {"stray"};
  std::vector<int64_t> client_free(clients, 0);
  for (int i = 0; i < ops; ++i) {
    const int client = static_cast<int>(uniform(0, clients - 1));
    Operation op;
    op.client = client;
    op.key = "k";
    op.type = static_cast<OpType>(uniform(0, 3));
    op.value = unique ? "w" + std::to_string(i) : value();
    if (unique && (op.type == OpType::kPut || op.type == OpType::kCas)) values.push_back(op.value);
    op.has_expected = uniform(0, 3) > 0;
    op.expected = op.has_expected ? value() : "";
    op.found = uniform(0, 3) > 0;
    op.result = op.found ? value() : "";
    op.swapped = uniform(0, 1) == 1;
    op.existed = uniform(0, 1) == 1;
    const int64_t outcome = uniform(0, 9);
    op.outcome = outcome < ok_cut ? Outcome::kOk : outcome < 9 ? Outcome::kUnknown : Outcome::kFail;
    op.invoke_ns = client_free[client] + uniform(0, 5);
    op.return_ns = op.invoke_ns + uniform(0, 8);
    client_free[client] = op.return_ns + 1;
    history.push_back(op);
  }
  return history;
}

TEST(LinearizabilityTest, AgreesWithBruteForceOnSmallHistories) {
  std::mt19937_64 rng(12345);
  int linearizable = 0, not_linearizable = 0;
  for (int i = 0; i < 50000; ++i) {
    const std::vector<Operation> history = RandomSmallHistory(rng);
    const bool expected = BruteForce(history).Linearizable();
    const CheckResult r = Check(history);
    ASSERT_FALSE(r.timed_out);
    if (r.linearizable != expected) {
      std::string ops;
      for (const Operation& op : history) ops += "  " + DescribeOperation(op) + "\n";
      FAIL() << "history " << i << ": brute force says " << expected << "\n"
             << ops << Explanations(r);
    }
    (expected ? linearizable : not_linearizable)++;
  }
  // Both verdicts are well represented.
  EXPECT_GT(linearizable, 5000);
  EXPECT_GT(not_linearizable, 5000);
  std::cout << linearizable << " linearizable, " << not_linearizable << " not\n";
}

// ---- performance ----

// "Well under a second" in an optimized build; sanitizer and unoptimized
// builds only have to stay within the budget.
#if defined(__OPTIMIZE__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
constexpr double kFastMs = 1000;
#else
constexpr double kFastMs = 10000;
#endif

// One key, 2,000 ops from 10 clients, a few dozen unknown writes: the size of
// one key's history in a chaos run. Correct, and with one corrupted read.
TEST(LinearizabilityTest, PerformanceTwoThousandOpsTenClients) {
  SimOptions options;
  options.clients = 10;
  options.ops = 2000;
  options.unknown_rate = 0.03;
  options.fail_rate = 0.01;
  options.seed = 2024;
  std::vector<Operation> history = SimulateRegister(options);
  size_t unknown = 0;
  for (const Operation& op : history) unknown += op.outcome == Outcome::kUnknown;
  EXPECT_GE(unknown, 20u);

  auto start = std::chrono::steady_clock::now();
  const CheckResult good = CheckHistory(history, kBudget);
  const auto good_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(good.linearizable) << Explanations(good);
  EXPECT_FALSE(good.timed_out);

  // A corrupted read late in the history: the search must exhaust every
  // alternative before it can say no.
  ASSERT_TRUE(CorruptOneRead(&history, 7));
  start = std::chrono::steady_clock::now();
  const CheckResult bad = CheckHistory(history, kBudget);
  const auto bad_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(bad.linearizable);
  EXPECT_FALSE(bad.timed_out);

  std::cout << "2000 ops, 10 clients, " << unknown << " unknown: linearizable in " << good_ms
            << " ms, violation found in " << bad_ms << " ms\n";
  RecordProperty("linearizable_ms", static_cast<int>(good_ms));
  RecordProperty("violation_ms", static_cast<int>(bad_ms));
  EXPECT_LT(good_ms, kFastMs);
  EXPECT_LT(bad_ms, kFastMs);
}

// Makes the first ok read at or after `from` return a stale value: one written
// (only) by an ok Put that returned before another ok Put was invoked, which
// returned before the read was invoked. Values in simulated histories are
// unique, so this is never linearizable.
bool MakeStaleRead(std::vector<Operation>* history, size_t from) {
  std::vector<Operation>& h = *history;
  for (size_t r = from; r < h.size(); ++r) {
    if (h[r].type != OpType::kGet || h[r].outcome != Outcome::kOk) continue;
    int newer = -1;
    for (int i = static_cast<int>(r) - 1; i >= 0; --i) {
      if (h[i].type != OpType::kPut || h[i].outcome != Outcome::kOk) continue;
      if (newer < 0) {
        if (h[i].return_ns < h[r].invoke_ns) newer = i;
      } else if (h[i].return_ns < h[newer].invoke_ns) {
        h[r].found = true;
        h[r].result = h[i].value;
        return true;
      }
    }
  }
  return false;
}

// A stale read three quarters into a 2,000-op history: proving it wrong means
// exhausting every linearization of the ops before it.
TEST(LinearizabilityTest, PerformanceStaleReadInLongHistory) {
  SimOptions options;
  options.clients = 10;
  options.ops = 2000;
  options.seed = 99;
  std::vector<Operation> history = SimulateRegister(options);
  ASSERT_TRUE(MakeStaleRead(&history, 1500));
  const auto start = std::chrono::steady_clock::now();
  const CheckResult r = CheckHistory(history, kBudget);
  const auto ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(r.linearizable);
  EXPECT_FALSE(r.timed_out);
  std::cout << "stale read at op 1500 of 2000: found in " << ms << " ms\n";
  RecordProperty("stale_read_ms", static_cast<int>(ms));
  EXPECT_LT(ms, kFastMs);
}

TEST(LinearizabilityTest, TimesOutInsteadOfHanging) {
  // A search needing far more steps than one clock check interval, with no
  // time at all: it must stop and say so, not claim a verdict.
  SimOptions options;
  options.clients = 10;
  options.ops = 2000;
  options.unknown_rate = 0.03;
  std::vector<Operation> history = SimulateRegister(options);
  ASSERT_TRUE(CorruptOneRead(&history, 3));
  const CheckResult r = CheckHistory(history, milliseconds(0));
  EXPECT_TRUE(r.timed_out);
  EXPECT_TRUE(r.linearizable);  // inconclusive, not a violation
  EXPECT_EQ(r.violations, 0u);
  ASSERT_EQ(r.reports.size(), 1u);
  EXPECT_TRUE(r.reports[0].timed_out);
  EXPECT_NE(r.reports[0].explanation.find("budget of 0 ms exhausted"), std::string::npos)
      << r.reports[0].explanation;
}

// ---- history files ----

void ExpectSameOperation(const Operation& a, const Operation& b, size_t i) {
  EXPECT_EQ(a.client, b.client) << i;
  EXPECT_EQ(a.key, b.key) << i;
  EXPECT_EQ(a.type, b.type) << i;
  EXPECT_EQ(a.value, b.value) << i;
  EXPECT_EQ(a.has_expected, b.has_expected) << i;
  EXPECT_EQ(a.expected, b.expected) << i;
  EXPECT_EQ(a.found, b.found) << i;
  EXPECT_EQ(a.result, b.result) << i;
  EXPECT_EQ(a.swapped, b.swapped) << i;
  EXPECT_EQ(a.existed, b.existed) << i;
  EXPECT_EQ(a.outcome, b.outcome) << i;
  EXPECT_EQ(a.invoke_ns, b.invoke_ns) << i;
  EXPECT_EQ(a.return_ns, b.return_ns) << i;
}

TEST(HistoryFileTest, RoundTrip) {
  std::string all_bytes;
  for (int c = 0; c < 256; ++c) all_bytes.push_back(static_cast<char>(c));
  std::vector<Operation> history = {
      Put(0, "", "", 0, 0),
      Put(1, all_bytes, all_bytes + all_bytes, -5, INT64_MAX),
      Get(2, "k\"\\/\n", std::string("\0\x01\xff", 3), INT64_MIN, 1),
      Get(3, "k", std::nullopt, 1, 2),
      Delete(-4, "k", true, 3, 4),
      Cas(5, "k", std::string("\xc3\xa9t\xc3\xa9"), "x", true, std::string("\t"), 5, 6),
      Cas(6, "k", std::nullopt, "", false, std::string(""), 7, 8),
      Unknown(Put(7, "k", "u", 9, 0)),
      Failed(Delete(8, "k", false, 10, 11)),
  };
  TempDir dir("history");
  const std::string path = dir.Join("history.jsonl");
  std::string error;
  ASSERT_TRUE((error = WriteHistory(path, history).message()).empty()) << error;
  std::vector<Operation> read_back = {Put(9, "stale", "x", 1, 2)};
  ASSERT_TRUE((error = ReadHistory(path, &read_back).message()).empty()) << error;
  ASSERT_EQ(read_back.size(), history.size());
  for (size_t i = 0; i < history.size(); ++i) ExpectSameOperation(history[i], read_back[i], i);

  // One line per op, printable ASCII only.
  const std::string text = testing_util::ReadFileBytes(path);
  EXPECT_EQ(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')), history.size());
  for (char c : text) {
    EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << static_cast<int>(c);
  }

  // A correct random history also round-trips, and checks the same.
  SimOptions options;
  options.unknown_rate = 0.05;
  const std::vector<Operation> simulated = SimulateRegister(options);
  ASSERT_TRUE((error = WriteHistory(path, simulated).message()).empty()) << error;
  ASSERT_TRUE((error = ReadHistory(path, &read_back).message()).empty()) << error;
  ASSERT_EQ(read_back.size(), simulated.size());
  for (size_t i = 0; i < simulated.size(); ++i) ExpectSameOperation(simulated[i], read_back[i], i);
  EXPECT_TRUE(Check(read_back).linearizable);
}

TEST(HistoryFileTest, ReadsHandWrittenLines) {
  TempDir dir("history");
  const std::string path = dir.Join("h.jsonl");
  WriteFileBytes(path,
                 "{\"key\":\"k\",\"type\":\"put\",\"value\":\"a\\u00e9\\u20ac\",\"invoke_ns\":1,"
                 "\"return_ns\":2,\"extra\":null}\r\n"
                 "\n"
                 "  { \"type\" : \"get\" , \"key\" : \"k\", \"found\": true, \"result\": \"x\","
                 " \"outcome\": \"unknown\" }  \n");
  std::vector<Operation> history;
  std::string error;
  ASSERT_TRUE((error = ReadHistory(path, &history).message()).empty()) << error;
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].value, "a\xe9\xe2\x82\xac");
  EXPECT_EQ(history[0].return_ns, 2);
  EXPECT_EQ(history[1].type, OpType::kGet);
  EXPECT_EQ(history[1].outcome, Outcome::kUnknown);
  EXPECT_TRUE(history[1].found);
}

TEST(HistoryFileTest, MalformedLineNamesLineNumber) {
  const std::string good = "{\"key\":\"k\",\"type\":\"put\",\"value\":\"a\"}\n";
  const std::vector<std::string> bad_lines = {
      "{\"key\":\"k\",\"type\":\"put\"",                     // unterminated object
      "{\"key\":\"k\",\"type\":\"append\"}",                 // unknown type
      "{\"key\":\"k\",\"type\":\"put\",\"invoke_ns\":1.5}",  // not an integer
      "{\"key\":\"k\",\"type\":\"put\",\"invoke_ns\":99999999999999999999}",
      "{\"key\":\"k\",\"type\":\"put\",\"value\":\"\\x41\"}",  // bad escape
      "{\"key\":\"k\",\"type\":\"put\",\"found\":\"yes\"}",    // wrong type
      "{\"type\":\"put\"}",                                    // no key
      "{\"key\":\"k\",\"type\":\"put\"} trailing",
      "not json",
  };
  TempDir dir("history");
  const std::string path = dir.Join("bad.jsonl");
  for (const std::string& bad : bad_lines) {
    WriteFileBytes(path, good + "\n" + good + bad + "\n" + good);
    std::vector<Operation> history;
    std::string error;
    EXPECT_FALSE((error = ReadHistory(path, &history).message()).empty()) << bad;
    EXPECT_NE(error.find("bad.jsonl:4: "), std::string::npos) << bad << " -> " << error;
    std::cout << error << "\n";
  }
  std::vector<Operation> history;
  std::string error;
  EXPECT_FALSE((error = ReadHistory(dir.Join("missing.jsonl"), &history).message()).empty());
  EXPECT_NE(error.find("missing.jsonl"), std::string::npos);
}

}  // namespace
}  // namespace raftkv::check
