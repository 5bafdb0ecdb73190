// Integration tests of crashes and leader changes in a real 3-process
// cluster: no acknowledged write is lost, restarted members catch up, and a
// deposed leader's uncommitted suffix is repaired.
#include <random>

#include "gtest/integration/integration_test_util.h"

namespace raftkv {
namespace integration {
namespace {

std::vector<std::pair<std::string, std::string>> NumberedPairs(const std::string& prefix, int count,
                                                               const std::string& tag) {
  std::vector<std::pair<std::string, std::string>> kvs;
  for (int i = 0; i < count; ++i) {
    kvs.emplace_back(prefix + std::to_string(i), tag + "-" + std::to_string(i));
  }
  return kvs;
}

// Default --tick_ms / --election_ticks: the failover requirement is stated
// for them.
TEST_F(Integration, LeaderCrashLosesNoAcknowledgedWrite) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, {}, &leader));
  const int old_leader = static_cast<int>(leader);
  auto client = cluster().NewClient(10000, 1000);

  std::vector<std::string> errors;
  const KvMap acked = PutAll(*client, NumberedPairs("crash-", 1000, "v"), 8, &errors);
  EXPECT_EQ(acked.size(), 1000u) << "writes to a healthy cluster failed:\n" << JoinLines(errors);
  ASSERT_GE(acked.size(), 900u);

  // Kill the leader; time until a write is served by the new one.
  const uint64_t old_term = MustStatus(cluster(), old_leader).term();
  cluster().Kill(old_leader);
  const auto killed_at = Steady::now();
  grpc::Status s = client->Put("after-failover", "yes");
  const int64_t failover_ms = ElapsedMs(killed_at);
  ASSERT_TRUE(s.ok()) << "no write served after the leader crash: " << Code(s);
  std::cerr << "[ info     ] leader " << old_leader << " killed; write served after " << failover_ms
            << " ms by " << client->last_leader() << "\n";
  EXPECT_LT(failover_ms, 3000) << "failover too slow with the default timeouts";
  EXPECT_NE(client->last_leader(), cluster().Endpoint(old_leader));

  std::string error;
  const uint64_t new_leader = cluster().WaitForLeader(5000, &error);
  ASSERT_NE(new_leader, 0u) << error;
  ASSERT_NE(new_leader, leader);
  EXPECT_GT(cluster().last_leader_term(), old_term);

  // Every acknowledged write survived (linearizable reads via the new leader).
  std::vector<std::string> problems = CheckAll(*client, acked, /*stale=*/false);
  EXPECT_TRUE(problems.empty()) << problems.size() << " acknowledged writes lost:\n"
                                << JoinLines(problems);

  // The old leader comes back and catches up.
  ASSERT_TRUE(cluster().Restart(old_leader));
  const uint64_t commit = MustStatus(cluster(), static_cast<int>(new_leader)).commit_index();
  StatusResponse st;
  EXPECT_TRUE(WaitForApplied(cluster(), old_leader, commit, 5000, &st))
      << "restarted member applied " << st.applied_index() << " of " << commit;
  EXPECT_EQ(st.role(), "follower");
  EXPECT_EQ(st.leader_id(), new_leader);
  KvMap expected = acked;
  expected["after-failover"] = "yes";
  auto local = cluster().NewClientFor(old_leader);
  problems = CheckAll(*local, expected, /*stale=*/true);
  EXPECT_TRUE(problems.empty()) << "stale reads on the restarted member:\n" << JoinLines(problems);
}

// SIGTERM on the leader (graceful shutdown): it first hands leadership to an
// up-to-date follower (--shutdown_transfer_ms, on by default), which takes
// over in the very next term without waiting for an election timeout; no
// acknowledged write is lost.
TEST_F(Integration, SigtermOnTheLeaderHandsOverLeadershipFirst) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, {}, &leader));
  const int old_leader = static_cast<int>(leader);
  auto client = cluster().NewClient(10000, 1000);
  std::vector<std::string> errors;
  const KvMap acked = PutAll(*client, NumberedPairs("term-", 200, "v"), 8, &errors);
  ASSERT_EQ(acked.size(), 200u) << JoinLines(errors);
  const uint64_t old_term = MustStatus(cluster(), old_leader).term();

  EXPECT_TRUE(cluster().Stop(old_leader)) << "SIGTERM did not make the leader exit cleanly";
  const std::string log = cluster().LastRunLogText(old_leader);
  const std::string marker = "leader shutting down: handed leadership to member ";
  const size_t at = log.find(marker);
  ASSERT_NE(at, std::string::npos) << "no handover in the old leader's log:\n"
                                   << cluster().Describe(3000);
  const uint64_t target = std::stoull(log.substr(at + marker.size()));

  std::string error;
  const uint64_t new_leader = cluster().WaitForLeader(5000, &error);
  ASSERT_NE(new_leader, 0u) << error;
  EXPECT_EQ(new_leader, target);
  EXPECT_EQ(cluster().last_leader_term(), old_term + 1)
      << "the handover target campaigns at once: one term, no failed elections";
  std::vector<std::string> problems = CheckAll(*client, acked, /*stale=*/false);
  EXPECT_TRUE(problems.empty()) << JoinLines(problems);
}

// Several writers keep writing while the leader is killed; every key's last
// acknowledged value must be what is read back (or a later value whose write
// had an unknown outcome).
TEST_F(Integration, ConcurrentWritesDuringFailover) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, FastTimeoutFlags(), &leader));
  constexpr int kWriters = 4;
  constexpr int kKeysPerWriter = 25;

  struct KeyState {
    std::string acked;                 // last acknowledged value ("" = none)
    std::vector<std::string> unknown;  // values written after it with unknown outcome
  };
  struct Writer {
    std::map<std::string, KeyState> keys;
    int acks = 0;
    std::atomic<int> acks_after_kill{0};
    int failures = 0;
    std::string last_error;
  };
  std::vector<Writer> writers(kWriters);
  std::atomic<bool> stop{false};
  std::atomic<bool> killed{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      auto client = cluster().NewClient(3000, 500);
      Writer& me = writers[static_cast<size_t>(w)];
      for (int version = 0; !stop; ++version) {
        const std::string key =
            "w" + std::to_string(w) + "-k" + std::to_string(version % kKeysPerWriter);
        const std::string value = "v" + std::to_string(version);
        const bool after_kill = killed;
        grpc::Status s = client->Put(key, value);
        KeyState& ks = me.keys[key];
        if (s.ok()) {
          ks.acked = value;
          ks.unknown.clear();
          ++me.acks;
          if (after_kill) ++me.acks_after_kill;
        } else {
          ks.unknown.push_back(value);
          ++me.failures;
          me.last_error = Code(s);
        }
      }
    });
  }
  std::this_thread::sleep_for(Millis(700));
  const int old_leader = static_cast<int>(leader);
  cluster().Kill(old_leader);
  killed = true;
  const auto killed_at = Steady::now();
  // Run until every writer got writes acknowledged by the new leader.
  const bool progressed = WaitUntil(
      [&] {
        for (const Writer& w : writers) {
          if (w.acks_after_kill < 20) return false;
        }
        return true;
      },
      10000, 20);
  std::this_thread::sleep_for(Millis(300));
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_TRUE(progressed) << "writers stalled after the leader was killed";
  std::cerr << "[ info     ] writers resumed within " << ElapsedMs(killed_at) << " ms\n";

  KvMap expected;
  std::map<std::string, std::vector<std::string>> alternatives;
  int ambiguous = 0;
  for (int w = 0; w < kWriters; ++w) {
    const Writer& me = writers[static_cast<size_t>(w)];
    EXPECT_GT(me.acks_after_kill.load(), 0)
        << "writer " << w << " (last error: " << me.last_error << ")";
    std::cerr << "[ info     ] writer " << w << ": " << me.acks << " acked ("
              << me.acks_after_kill.load() << " after the kill), " << me.failures << " failed\n";
    for (const auto& [key, ks] : me.keys) {
      if (ks.acked.empty()) continue;
      expected[key] = ks.acked;
      if (!ks.unknown.empty()) {
        alternatives[key] = ks.unknown;
        ++ambiguous;
      }
    }
  }
  ASSERT_EQ(expected.size(), static_cast<size_t>(kWriters * kKeysPerWriter));

  auto client = cluster().NewClient(10000, 1000);
  std::vector<std::string> problems;
  int later_value = 0;
  for (const auto& [key, value] : expected) {
    std::string got;
    bool found = false;
    grpc::Status s = client->Get(key, &got, &found);
    if (!s.ok()) {
      problems.push_back("Get " + key + ": " + Code(s));
      continue;
    }
    if (found && got == value) continue;
    // A write whose outcome was unknown may have committed after the client
    // gave up; an older acknowledged value (or none) is a lost write.
    const auto& alt = alternatives[key];
    if (found && std::find(alt.begin(), alt.end(), got) != alt.end()) {
      ++later_value;
      continue;
    }
    problems.push_back("Get " + key + ": " + (found ? "'" + got + "'" : "not found") +
                       ", last acknowledged '" + value + "'");
  }
  std::cerr << "[ info     ] " << expected.size() << " keys checked, " << ambiguous
            << " with a later unknown-outcome write, " << later_value
            << " of them read that later value\n";
  EXPECT_TRUE(problems.empty()) << problems.size() << " keys lost their last acknowledged value:\n"
                                << JoinLines(problems);
}

// A leader that appended entries it could not commit, then crashed, must
// drop them when it rejoins a cluster that moved on.
TEST_F(Integration, DivergentFollowerIsRepaired) {
  uint64_t leader = 0;
  // A longer election timeout than FastTimeoutFlags so the isolated leader
  // accepts the doomed proposals well before check-quorum deposes it.
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, {"--tick_ms=25", "--election_ticks=20"}, &leader));
  const int old = static_cast<int>(leader);
  const int f1 = OtherThan(cluster(), old);
  const int f2 = OtherThan(cluster(), old, f1);
  auto client = cluster().NewClient(10000, 1000);
  constexpr int kKeys = 8;
  KvMap committed;
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = "div-" + std::to_string(i);
    ASSERT_TRUE(client->Put(key, "committed").ok());
    committed[key] = "committed";
  }
  // Both followers hold everything committed so far.
  const uint64_t commit_before = MustStatus(cluster(), old).commit_index();
  ASSERT_TRUE(WaitForApplied(cluster(), f1, commit_before, 3000));
  ASSERT_TRUE(WaitForApplied(cluster(), f2, commit_before, 3000));

  cluster().Kill(f1);
  cluster().Kill(f2);
  // Writes the lone leader appends but can never commit.
  std::vector<std::thread> puts;
  std::vector<grpc::Status> results(kKeys);
  auto channel = NewChannel(cluster().Endpoint(old));
  for (int i = 0; i < kKeys; ++i) {
    puts.emplace_back([&, i] {
      KV::Stub kv(channel);
      grpc::ClientContext ctx;
      SetDeadline(&ctx, 300);
      PutRequest req;
      req.set_key("div-" + std::to_string(i));
      req.set_value("uncommitted");
      PutResponse resp;
      results[static_cast<size_t>(i)] = kv.Put(&ctx, req, &resp);
    });
  }
  for (auto& t : puts) t.join();
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_FALSE(results[static_cast<size_t>(i)].ok())
        << "write " << i << " acknowledged without quorum";
  }
  StatusResponse old_st = MustStatus(cluster(), old);
  const uint64_t old_term = old_st.term();
  ASSERT_GT(old_st.last_log_index(), old_st.commit_index())
      << "the doomed writes did not reach the old leader's log (it stepped down too soon?)";
  std::cerr << "[ info     ] old leader " << old << ": last index " << old_st.last_log_index()
            << ", commit " << old_st.commit_index() << "\n";
  cluster().Kill(old);

  // The two followers form a majority, elect a leader in a higher term and
  // overwrite the same keys.
  ASSERT_TRUE(cluster().Restart(f1));
  ASSERT_TRUE(cluster().Restart(f2));
  std::string error;
  const uint64_t new_leader = cluster().WaitForLeader(10000, &error);
  ASSERT_NE(new_leader, 0u) << error;
  ASSERT_NE(new_leader, leader);
  EXPECT_GT(cluster().last_leader_term(), old_term);
  KvMap expected;
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = "div-" + std::to_string(i);
    grpc::Status s = client->Put(key, "new-" + std::to_string(i));
    ASSERT_TRUE(s.ok()) << Code(s);
    expected[key] = "new-" + std::to_string(i);
  }

  // The old leader rejoins: it must truncate its divergent suffix.
  ASSERT_TRUE(cluster().Restart(old));
  const int nl = static_cast<int>(new_leader);
  StatusResponse leader_st, old_now;
  const bool converged = WaitUntil(
      [&] {
        if (!cluster().StatusOf(nl, &leader_st, 500).ok()) return false;
        if (!cluster().StatusOf(old, &old_now, 500).ok()) return false;
        return old_now.last_log_index() == leader_st.last_log_index() &&
               old_now.commit_index() == leader_st.commit_index() &&
               old_now.applied_index() == leader_st.commit_index() &&
               old_now.term() == leader_st.term();
      },
      5000);
  EXPECT_TRUE(converged) << "old leader: last " << old_now.last_log_index() << " commit "
                         << old_now.commit_index() << " applied " << old_now.applied_index()
                         << " term " << old_now.term() << "; leader: last "
                         << leader_st.last_log_index() << " commit " << leader_st.commit_index()
                         << " term " << leader_st.term();
  auto local = cluster().NewClientFor(old);
  std::vector<std::string> problems = CheckAll(*local, expected, /*stale=*/true);
  EXPECT_TRUE(problems.empty()) << "the old leader serves divergent data:\n" << JoinLines(problems);
  problems = CheckAll(*client, expected, /*stale=*/false);
  EXPECT_TRUE(problems.empty()) << JoinLines(problems);
  const std::string log = cluster().LogText(old);
  EXPECT_NE(log.find("truncates conflicting log suffix"), std::string::npos)
      << "the old leader's log does not mention truncating its suffix";
}

TEST_F(Integration, FollowerRestartCatchesUp) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, FastTimeoutFlags(), &leader));
  const int l = static_cast<int>(leader);
  const int f = OtherThan(cluster(), l);
  auto client = cluster().NewClient(10000, 1000);
  ASSERT_TRUE(client->Put("first", "1").ok());
  const uint64_t before = MustStatus(cluster(), f).last_log_index();
  cluster().Kill(f);

  std::vector<std::string> errors;
  KvMap acked = PutAll(*client, NumberedPairs("catchup-", 500, "c"), 4, &errors);
  ASSERT_EQ(acked.size(), 500u) << "writes with one follower down failed:\n" << JoinLines(errors);
  acked["first"] = "1";
  const uint64_t commit = MustStatus(cluster(), l).commit_index();
  ASSERT_GE(commit, before + 500);

  ASSERT_TRUE(cluster().Restart(f));
  const auto restarted_at = Steady::now();
  StatusResponse st;
  EXPECT_TRUE(WaitForApplied(cluster(), f, commit, 15000, &st))
      << "restarted follower applied " << st.applied_index() << " of " << commit;
  std::cerr << "[ info     ] restarted follower caught up after " << ElapsedMs(restarted_at)
            << " ms\n";
  EXPECT_GE(st.last_log_index(), commit);
  EXPECT_EQ(st.leader_id(), leader);
  auto local = cluster().NewClientFor(f);
  std::vector<std::string> problems = CheckAll(*local, acked, /*stale=*/true);
  EXPECT_TRUE(problems.empty()) << JoinLines(problems);
}

// Random crashes of any member while a client writes; at the end every
// acknowledged write reads back.
TEST_F(Integration, CrashRecoveryLoop) {
  const uint64_t seed = TestSeed();
  std::cerr << "[ info     ] CrashRecoveryLoop seed " << seed
            << " (replay with RAFTKV_TEST_SEED=" << seed << ")\n";
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, FastTimeoutFlags(), &leader));

  constexpr int kWriters = 2;
  std::vector<KvMap> acked(kWriters);
  std::vector<int> failures(kWriters, 0);
  std::vector<std::string> last_errors(kWriters);
  std::atomic<int> total_acks{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      auto client = cluster().NewClient(3000, 500);
      for (int n = 0; !stop; ++n) {
        const std::string key = "loop-" + std::to_string(w) + "-" + std::to_string(n);
        const std::string value = "value-" + std::to_string(n) + "-" + std::to_string(w);
        grpc::Status s = client->Put(key, value);
        if (s.ok()) {
          acked[static_cast<size_t>(w)][key] = value;
          ++total_acks;
        } else {
          ++failures[static_cast<size_t>(w)];
          last_errors[static_cast<size_t>(w)] = Code(s);
        }
      }
    });
  }

  for (int round = 1; round <= 5 && !HasFatalFailure(); ++round) {
    const int acks_before = total_acks;
    std::this_thread::sleep_for(Millis(100 + static_cast<int>(rng() % 500)));
    std::string error;
    const uint64_t current = cluster().WaitForLeader(10000, &error);
    if (current == 0) {
      ADD_FAILURE() << "round " << round << ": " << error;
      break;
    }
    // Half the time the leader, otherwise a random member (maybe the leader).
    const int victim =
        (rng() % 2 == 0) ? static_cast<int>(current) : 1 + static_cast<int>(rng() % 3);
    const int down_ms = static_cast<int>(rng() % 800);
    std::cerr << "[ info     ] round " << round << ": kill member " << victim
              << (static_cast<uint64_t>(victim) == current ? " (leader)" : " (follower)")
              << ", restart after " << down_ms << " ms\n";
    cluster().Kill(victim);
    std::this_thread::sleep_for(Millis(down_ms));
    if (!cluster().Restart(victim)) {
      ADD_FAILURE() << "round " << round << ": cannot restart member " << victim;
      break;
    }
    if (cluster().WaitForLeader(10000, &error) == 0) {
      ADD_FAILURE() << "round " << round << ": no leader after restart: " << error;
      break;
    }
    // The writers make progress again before the next crash.
    EXPECT_TRUE(WaitUntil([&] { return total_acks > acks_before + 20; }, 10000))
        << "round " << round << ": writes stalled (" << total_acks - acks_before << " acks)";
  }
  stop = true;
  for (auto& t : threads) t.join();

  KvMap all;
  for (int w = 0; w < kWriters; ++w) {
    std::cerr << "[ info     ] writer " << w << ": " << acked[static_cast<size_t>(w)].size()
              << " acked, " << failures[static_cast<size_t>(w)]
              << " failed (last: " << last_errors[static_cast<size_t>(w)] << ")\n";
    all.insert(acked[static_cast<size_t>(w)].begin(), acked[static_cast<size_t>(w)].end());
  }
  ASSERT_GT(all.size(), 100u);
  auto client = cluster().NewClient(10000, 1000);
  std::vector<std::string> problems = CheckAll(*client, all, /*stale=*/false);
  EXPECT_TRUE(problems.empty()) << problems.size() << " of " << all.size()
                                << " acknowledged writes lost (seed " << seed << "):\n"
                                << JoinLines(problems);
  // Every member converges to the same state.
  std::string error;
  const uint64_t final_leader = cluster().WaitForLeader(10000, &error);
  ASSERT_NE(final_leader, 0u) << error;
  const uint64_t commit = MustStatus(cluster(), static_cast<int>(final_leader)).commit_index();
  for (int i = 1; i <= 3; ++i) {
    StatusResponse st;
    EXPECT_TRUE(WaitForApplied(cluster(), i, commit, 5000, &st))
        << "member " << i << " applied " << st.applied_index() << " of " << commit;
  }
  const int sample = 1 + static_cast<int>(rng() % 3);
  auto local = cluster().NewClientFor(sample);
  problems = CheckAll(*local, all, /*stale=*/true);
  EXPECT_TRUE(problems.empty()) << "stale reads on member " << sample << ":\n"
                                << JoinLines(problems);
}

}  // namespace
}  // namespace integration
}  // namespace raftkv
