// Log compaction and InstallSnapshot: direct tests of one core (a kSnapshot
// stepped by hand into a follower whose log conflicts with the snapshot, or
// already holds it; Compact's refusals; the SnapshotRef restart constructor)
// and whole-cluster scenarios on the simulated network (lagging, restarted
// and conflicting followers caught up with the leader's snapshot, message
// loss, a snapshot file deleted while its transfer was under way, restarts
// from snapshot + log suffix). SimCluster checks after every step that state
// machines at the same applied index are equal, that no committed entry is
// lost, and that no AppendEntries names a compacted (term 0) previous entry.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/raft/core_test_util.h"
#include "gtest/raft/sim/sim_cluster.h"
#include "gtest/raft/sim/sim_test_util.h"
#include "raft/raft.h"

namespace raftkv::raft::sim {
namespace {

// ---------------------------------------------------------------------------
// One core, messages by hand
// ---------------------------------------------------------------------------

Config MemberConfigFor(uint64_t id, std::vector<uint64_t> voters = {1, 2, 3}) {
  Config c;
  c.heartbeat_ticks = 1;  // these tests count heartbeats in ticks
  c.tick_ms = 0;          // cluster time 0 unless a test sets it
  c.id = id;
  c.bootstrap = VotersConfig(voters);
  c.voters = voters;
  c.seed = 11;
  return c;
}

std::vector<Entry> Log(uint64_t first, const std::vector<uint64_t>& terms) {
  std::vector<Entry> log;
  for (size_t i = 0; i < terms.size(); ++i) {
    log.push_back(MakeEntry(first + i, terms[i], "e" + std::to_string(first + i)));
  }
  return log;
}

void Drain(Raft& r) {
  while (r.HasReady()) r.Advance(r.GetReady());
}

// Member 1 of {1,2,3} with durable term `term` and `log`, following leader 2
// with commit index `commit` (learned from an AppendEntries heartbeat); every
// Ready drained.
std::unique_ptr<Raft> FollowerWith(uint64_t term, std::vector<Entry> log, uint64_t commit) {
  HardState hs;
  hs.term = term;
  const uint64_t last = log.empty() ? 0 : log.back().index();
  const uint64_t last_term = log.empty() ? 0 : log.back().term();
  auto r = std::make_unique<Raft>(MemberConfigFor(1), hs, std::move(log));
  Drain(*r);
  r->Step(Append2To1(1, term, last, last_term, commit));
  Drain(*r);
  EXPECT_EQ(r->commit_index(), commit);
  return r;
}

// The Ready after stepping `m`, and the one response to it.
struct Answer {
  Ready ready;
  std::vector<Message> responses;
};
Answer StepAndCollect(Raft& r, const Message& m) {
  r.Step(m);
  Answer a;
  a.ready = r.GetReady();
  for (const Message& out : a.ready.messages) {
    if (out.IsResponse() && out.rpc_id == m.rpc_id) a.responses.push_back(out);
  }
  r.Advance(a.ready);
  return a;
}

// The follower's log conflicts with the snapshot (its entry at the
// snapshot's index has another term): it discards the whole log and restores
// the snapshot.
TEST(RaftSnapshotCoreTest, FollowerWhoseLogConflictsDiscardsIt) {
  auto r = FollowerWith(2, Log(1, {1, 1, 1, 2, 2, 2}), 3);
  Answer a = StepAndCollect(*r, SnapshotFrom2(7, 3, 5, 3, {1, 2, 3}));
  ASSERT_EQ(a.responses.size(), 1u) << "want exactly one response to the snapshot";
  const Message& resp = a.responses.front();
  EXPECT_EQ(resp.type, MessageType::kSnapshotResp);
  EXPECT_TRUE(resp.snapshot_resp.success());
  EXPECT_EQ(resp.snapshot_resp.match_index(), 5u);
  EXPECT_EQ(resp.snapshot_resp.term(), 3u);
  ASSERT_TRUE(a.ready.snapshot.has_value()) << "the state machine must be restored";
  EXPECT_EQ(a.ready.snapshot->index, 5u);
  EXPECT_EQ(a.ready.snapshot->term, 3u);
  EXPECT_TRUE(SameMembership(a.ready.snapshot->config, VotersConfig({1, 2, 3})));
  for (const Entry& e : a.ready.committed) {
    EXPECT_GT(e.index(), 5u) << "entry " << e.index() << " handed out to apply after the snapshot";
  }
  EXPECT_TRUE(a.ready.entries.empty());
  EXPECT_EQ(r->snapshot().index, 5u);
  EXPECT_EQ(r->snapshot().term, 3u);
  EXPECT_EQ(r->first_index(), 6u);
  EXPECT_EQ(r->last_index(), 5u) << "the conflicting entry 6/2 must be gone";
  EXPECT_EQ(r->last_term(), 3u);
  EXPECT_EQ(r->commit_index(), 5u);
  EXPECT_EQ(r->TermAt(5), 3u);
  EXPECT_EQ(r->TermAt(4), 0u) << "below the snapshot: compacted";
  EXPECT_EQ(r->TermAt(6), 0u);
  EXPECT_EQ(r->term(), 3u);
  EXPECT_EQ(r->leader_id(), 2u);
  // The leader continues from the snapshot.
  Message next = Append2To1(8, 3, 5, 3, 6);
  *next.append.add_entries() = MakeEntry(6, 3, "after");
  Answer b = StepAndCollect(*r, next);
  ASSERT_EQ(b.responses.size(), 1u);
  EXPECT_TRUE(b.responses.front().append_resp.success());
  EXPECT_EQ(b.responses.front().append_resp.match_index(), 6u);
  ASSERT_EQ(b.ready.committed.size(), 1u);
  EXPECT_EQ(b.ready.committed.front().data(), "after");
}

// The follower's log holds the snapshot's last entry (same index and term)
// and more: it keeps the entries after it.
TEST(RaftSnapshotCoreTest, FollowerThatHasTheEntriesKeepsItsSuffix) {
  auto r = FollowerWith(1, Log(1, std::vector<uint64_t>(10, 1)), 2);
  Answer a = StepAndCollect(*r, SnapshotFrom2(7, 1, 6, 1, {1, 2, 3}));
  ASSERT_EQ(a.responses.size(), 1u);
  const Message& resp = a.responses.front();
  EXPECT_EQ(resp.type, MessageType::kSnapshotResp);
  EXPECT_TRUE(resp.snapshot_resp.success());
  EXPECT_GE(resp.snapshot_resp.match_index(), 6u);
  EXPECT_EQ(r->last_index(), 10u) << "the entries after the snapshot were discarded";
  for (uint64_t i = 7; i <= 10; ++i) EXPECT_EQ(r->TermAt(i), 1u) << "index " << i;
  EXPECT_GE(r->commit_index(), 6u);
  if (a.ready.snapshot) {
    EXPECT_EQ(a.ready.snapshot->index, 6u);
    EXPECT_EQ(r->snapshot().index, 6u);
    EXPECT_EQ(r->first_index(), 7u);
    for (const Entry& e : a.ready.committed) EXPECT_GT(e.index(), 6u);
  } else {
    // Applying the entries instead of restoring is fine too.
    ASSERT_FALSE(a.ready.committed.empty());
    EXPECT_EQ(a.ready.committed.front().index(), 3u);
    EXPECT_GE(a.ready.committed.back().index(), 6u);
  }
  // Nothing of the kept suffix needs rewriting.
  for (const Entry& e : a.ready.entries) EXPECT_GT(e.index(), 10u);
}

// A snapshot the follower has already applied past must not roll its state
// machine back.
TEST(RaftSnapshotCoreTest, StaleSnapshotDoesNotRollBackTheStateMachine) {
  auto r = FollowerWith(1, Log(1, std::vector<uint64_t>(10, 1)), 8);
  Answer a = StepAndCollect(*r, SnapshotFrom2(7, 1, 6, 1, {1, 2, 3}));
  ASSERT_EQ(a.responses.size(), 1u);
  EXPECT_EQ(a.responses.front().type, MessageType::kSnapshotResp);
  EXPECT_FALSE(a.ready.snapshot.has_value())
      << "restoring snapshot 6 would undo entries 7 and 8, already applied";
  EXPECT_EQ(r->commit_index(), 8u);
  EXPECT_EQ(r->last_index(), 10u);
  EXPECT_TRUE(a.ready.committed.empty());
}

TEST(RaftSnapshotCoreTest, SnapshotOfAnOlderTermIsRefused) {
  auto r = FollowerWith(5, Log(1, {1, 5}), 1);
  Answer a = StepAndCollect(*r, SnapshotFrom2(7, 3, 10, 3, {1, 2, 3}));
  ASSERT_EQ(a.responses.size(), 1u);
  EXPECT_EQ(a.responses.front().type, MessageType::kSnapshotResp);
  EXPECT_FALSE(a.responses.front().snapshot_resp.success());
  EXPECT_EQ(a.responses.front().snapshot_resp.term(), 5u);
  EXPECT_FALSE(a.ready.snapshot.has_value());
  EXPECT_EQ(r->last_index(), 2u);
  EXPECT_EQ(r->snapshot().index, 0u);
}

// Compact(index) needs the index handed out in Ready::committed (applied by
// the caller) and above the current snapshot.
TEST(RaftSnapshotCoreTest, CompactRefusesIndexesNotApplied) {
  Config config = MemberConfigFor(1, {1});
  Raft r(config, HardState{}, std::vector<Entry>{});
  for (int i = 0; i < 50 && r.role() != Role::kLeader; ++i) {
    r.Tick();
    Drain(r);
  }
  ASSERT_EQ(r.role(), Role::kLeader);
  Drain(r);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(r.Propose("p" + std::to_string(i)).accepted);
  const uint64_t last = r.last_index();
  // (ASSERT: a core that accepted would be left in a state not worth probing.)
  ASSERT_FALSE(r.Compact(0));
  Ready rd = r.GetReady();  // entries to persist; nothing new committed yet
  ASSERT_FALSE(r.Compact(last)) << "not even durable";
  r.Advance(rd);
  EXPECT_EQ(r.commit_index(), last);
  ASSERT_FALSE(r.Compact(last)) << "committed, but not handed out to apply";
  Ready applied = r.GetReady();
  ASSERT_FALSE(applied.committed.empty());
  EXPECT_EQ(applied.committed.back().index(), last);
  r.Advance(applied);
  ASSERT_FALSE(r.Compact(last + 1)) << "beyond the log";
  ASSERT_TRUE(r.Compact(last - 2));
  EXPECT_EQ(r.snapshot().index, last - 2);
  EXPECT_EQ(r.first_index(), last - 1);
  EXPECT_EQ(r.TermAt(last - 2), r.term());
  EXPECT_EQ(r.TermAt(last - 3), 0u) << "below the snapshot";
  EXPECT_EQ(r.TermAt(1), 0u);
  ASSERT_FALSE(r.Compact(last - 2)) << "not above the current snapshot";
  ASSERT_FALSE(r.Compact(last - 3));
  EXPECT_TRUE(SameMembership(r.snapshot().config, VotersConfig({1})));
  EXPECT_TRUE(SameMembership(r.MembershipAt(last - 2), VotersConfig({1})));
  ASSERT_TRUE(r.Compact(last));
  EXPECT_EQ(r.last_index(), last);
  EXPECT_EQ(r.last_term(), r.term());
  // The log keeps working after a full compaction.
  const ProposeResult p = r.Propose("after");
  ASSERT_TRUE(p.accepted);
  EXPECT_EQ(p.index, last + 1);
  Drain(r);
  EXPECT_EQ(r.commit_index(), last + 1);
  EXPECT_EQ(r.EntryAt(last + 1).data(), "after");
}

// The restart constructor: the state machine was restored from the
// snapshot; the log holds the entries after it (here with a configuration
// entry, which is then in effect).
TEST(RaftSnapshotCoreTest, RestartFromSnapshotRef) {
  SnapshotRef base;
  base.index = 10;
  base.term = 2;
  base.config = VotersConfig({1, 2, 3});
  std::vector<Entry> log = Log(11, {2, 3});
  Entry config_entry;
  config_entry.set_index(13);
  config_entry.set_term(3);
  config_entry.set_type(ENTRY_CONFIG);
  MembershipConfig grown = VotersConfig({1, 2, 3});
  MemberConfig* learner = grown.add_members();
  learner->set_id(4);
  learner->set_address("sim-4");
  learner->set_voter(false);
  config_entry.set_data(grown.SerializeAsString());
  log.push_back(config_entry);
  HardState hs;
  hs.term = 3;
  Raft r(MemberConfigFor(1), hs, base, log);
  EXPECT_EQ(r.snapshot().index, 10u);
  EXPECT_EQ(r.first_index(), 11u);
  EXPECT_EQ(r.last_index(), 13u);
  EXPECT_EQ(r.commit_index(), 10u);
  EXPECT_EQ(r.TermAt(10), 2u);
  EXPECT_EQ(r.TermAt(9), 0u);
  EXPECT_EQ(r.TermAt(12), 3u);
  EXPECT_TRUE(SameMembership(r.membership(), grown)) << ConfigString(r.membership());
  EXPECT_EQ(r.membership_index(), 13u);
  EXPECT_TRUE(SameMembership(r.MembershipAt(12), base.config));
  EXPECT_TRUE(SameMembership(r.MembershipAt(10), base.config));
  Ready rd = r.GetReady();
  EXPECT_FALSE(rd.snapshot.has_value()) << "the caller already restored it";
  ASSERT_TRUE(rd.config.has_value());
  EXPECT_TRUE(SameMembership(*rd.config, grown));
  EXPECT_TRUE(rd.committed.empty());
  EXPECT_TRUE(rd.entries.empty());
  r.Advance(rd);
  ASSERT_FALSE(r.Compact(10));
  ASSERT_FALSE(r.Compact(11)) << "not applied";
}

// ---------------------------------------------------------------------------
// Whole clusters
// ---------------------------------------------------------------------------

SimOptions SOptions(int nodes, uint64_t seed) {
  SimOptions o;
  o.nodes = nodes;
  o.seed = seed;
  return o;
}

// A follower misses many entries (cut off, or down); the others compact
// their logs past what it has; it is caught up with the leader's snapshot.
TEST(RaftSnapshotTest, LaggingOrRestartedFollowerIsCaughtUpWithASnapshot) {
  ForEachSeed(16, [&](uint64_t seed) {
    SimCluster c(SOptions(seed % 4 < 2 ? 3 : 5, seed));
    const bool crash = seed % 2 == 1;
    const uint64_t leader = AwaitLeader(c);
    ASSERT_NE(leader, 0u) << c.Report();
    ProposeMany(c, leader, "a", 10);
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    const uint64_t lagging = leader % c.ids().size() + 1;
    // No AppendEntries reaches it until after the compaction (not even one
    // still queued, or built before the compaction and sent after).
    c.intercept = [&](const Envelope& env) {
      return env.msg.to == lagging && env.msg.type == MessageType::kAppend;
    };
    if (crash) {
      c.Crash(lagging);
    } else {
      c.Isolate(lagging);
    }
    ProposeMany(c, leader, "b", 60, 6);
    ASSERT_TRUE(c.RunUntil(
        [&] { return c.core(leader)->commit_index() == c.core(leader)->last_index() &&
                     c.applied_index(leader) == c.core(leader)->last_index(); },
        30))
        << c.Report();
    for (uint64_t id : c.ids()) {
      if (!c.alive(id) || id == lagging) continue;
      c.RunUntil([&] { return c.applied_index(id) == c.applied_index(leader); }, 20);
      ASSERT_TRUE(c.TakeSnapshot(id)) << "node " << id;
    }
    const uint64_t snap = c.core(leader)->snapshot().index;
    ASSERT_GT(snap, c.persisted_last_index(lagging));
    ProposeMany(c, leader, "c", 5);
    c.RunTicks(2);
    c.intercept = nullptr;
    if (crash) {
      c.Restart(lagging);
    } else {
      c.Heal();
    }
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    ExpectMembersAgree(c);
    EXPECT_GE(c.stats().snapshot_transfers, 1u) << c.Report();
    EXPECT_GE(c.stats().snapshots_installed, 1u) << c.Report();
    EXPECT_GE(c.durable_snapshot(lagging).index, snap);
    EXPECT_EQ(c.persisted_log_first(lagging), c.durable_snapshot(lagging).index + 1);
    ASSERT_TRUE(c.ok()) << c.Report();
  });
}

// 20-30% of all messages (snapshot streams included) are lost, nodes snapshot
// every few entries, followers fall behind (partitions, crashes): the cluster
// still converges, with the loss still on.
TEST(RaftSnapshotTest, ConvergesUnderMessageLossWithFrequentSnapshots) {
  uint64_t dropped = 0, installed = 0;
  ForEachSeed(8, [&](uint64_t seed) {
    SimOptions o = SOptions(seed % 2 ? 3 : 5, seed);
    o.drop_prob = 0.2 + 0.1 * static_cast<double>(seed % 3) / 2;
    o.reorder = true;
    o.max_delay = 5;
    o.snapshot_every = 4 + seed % 5;
    o.snapshots_kept = 1 + seed % 2;
    SimCluster c(o);
    Rng& rng = c.rng();
    int counter = 0;
    for (int tick = 0; tick < 250 && c.ok(); ++tick) {
      if (uint64_t l = c.StableLeader()) {
        for (int k = 0; k < 2; ++k) c.Propose(l, "v" + std::to_string(counter++));
      }
      if (rng.Chance(0.03)) c.Isolate(c.ids()[rng.Uniform(c.ids().size())]);
      if (rng.Chance(0.05)) c.Heal();
      if (rng.Chance(0.02)) {
        const uint64_t victim = c.ids()[rng.Uniform(c.ids().size())];
        int down = 0;
        for (uint64_t id : c.ids()) down += !c.alive(id);
        if (down == 0) c.Crash(victim);
      }
      for (uint64_t id : c.ids()) {
        if (!c.alive(id) && rng.Chance(0.1)) c.Restart(id);
      }
      c.RunTicks(1);
    }
    ASSERT_TRUE(c.ok()) << c.Report();
    c.Heal();
    for (uint64_t id : c.ids()) c.Restart(id);
    ASSERT_TRUE(AwaitConverged(c, 1000)) << c.Report();
    ExpectMembersAgree(c);
    dropped += c.stats().snapshot_messages_dropped;
    installed += c.stats().snapshots_installed;
    ASSERT_TRUE(c.ok()) << c.Report();
  });
  EXPECT_GT(dropped, 0u) << "no snapshot message was ever lost: the test lost its point";
  EXPECT_GT(installed, 0u);
}

// A deposed leader's uncommitted entries conflict with what the new leader
// committed, and the new leader compacted past them: the old leader (and its
// minority follower) get the snapshot and drop their conflicting logs.
TEST(RaftSnapshotTest, FollowerWithConflictingEntriesDiscardsThemForTheSnapshot) {
  ForEachSeed(16, [&](uint64_t seed) {
    const int nodes = seed % 2 ? 3 : 5;
    SimCluster c(SOptions(nodes, seed));
    const uint64_t old_leader = AwaitLeader(c);
    ASSERT_NE(old_leader, 0u) << c.Report();
    ProposeMany(c, old_leader, "base", 5);
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    const uint64_t old_term = c.core(old_leader)->term();
    std::vector<uint64_t> minority = {old_leader}, majority;
    for (uint64_t id : c.ids()) {
      if (id == old_leader) continue;
      if (static_cast<int>(minority.size()) < (nodes - 1) / 2) {
        minority.push_back(id);
      } else {
        majority.push_back(id);
      }
    }
    c.Partition({minority, majority});
    // No AppendEntries of the majority reaches the minority until after the
    // compaction (not even later, from the network's queue or from a Ready
    // built before it): the minority can only be repaired with the snapshot.
    // (Snapshots go to the network, where the partition drops them and the
    // sender is told.)
    c.intercept = [&](const Envelope& env) {
      const bool to_minority =
          std::find(minority.begin(), minority.end(), env.msg.to) != minority.end();
      const bool from_majority =
          std::find(majority.begin(), majority.end(), env.msg.from) != majority.end();
      return to_minority && from_majority && env.msg.type == MessageType::kAppend;
    };
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(c.Propose(old_leader, "doomed" + std::to_string(i)).accepted);
    c.RunTicks(3);
    uint64_t new_leader = 0;
    ASSERT_TRUE(c.RunUntil(
        [&] {
          for (uint64_t id : majority) {
            if (c.core(id)->role() == Role::kLeader && c.core(id)->term() > old_term) {
              new_leader = id;
              return true;
            }
          }
          return false;
        },
        200))
        << c.Report();
    ProposeMany(c, new_leader, "fresh", 30, 5);
    ASSERT_TRUE(c.RunUntil(
        [&] {
          for (uint64_t id : majority) {
            if (c.applied_index(id) != c.core(new_leader)->last_index()) return false;
          }
          return true;
        },
        50))
        << c.Report();
    for (uint64_t id : majority) ASSERT_TRUE(c.TakeSnapshot(id)) << "node " << id;
    const uint64_t snap = c.core(new_leader)->snapshot().index;
    // The old leader's log conflicts with the snapshot at its index, or ends
    // before it: it cannot be repaired with AppendEntries.
    ASSERT_NE(c.core(old_leader)->TermAt(snap), c.core(new_leader)->TermAt(snap));
    c.RunTicks(2);  // Readies built before the compaction are all sent (and swallowed)
    c.intercept = nullptr;
    c.Heal();
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    ExpectMembersAgree(c);
    for (uint64_t id : c.ids()) {
      for (const std::string& cmd : c.AppliedCommands(id)) {
        EXPECT_EQ(cmd.rfind("doomed", 0), std::string::npos) << "node " << id << " applied " << cmd;
      }
    }
    for (uint64_t id : minority) {
      EXPECT_GE(c.durable_snapshot(id).index, snap) << "node " << id << "\n" << c.Report();
    }
    ASSERT_TRUE(c.ok()) << c.Report();
  });
}

// Every node restarts from its latest snapshot and the log suffix after it;
// nodes crash at random points of their Ready cycle while snapshots are taken
// automatically.
TEST(RaftSnapshotTest, RestartFromSnapshotAndLogSuffix) {
  ForEachSeed(12, [&](uint64_t seed) {
    SimOptions o = SOptions(3, seed);
    o.snapshot_every = 5 + seed % 7;
    SimCluster c(o);
    Rng& rng = c.rng();
    const uint64_t leader = AwaitLeader(c);
    ASSERT_NE(leader, 0u) << c.Report();
    ProposeMany(c, leader, "a", 23, 4);
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    ProposeMany(c, leader, "b", 3);  // a suffix after the last snapshot, maybe uncommitted
    RunEvents(c, static_cast<int>(rng.Uniform(10)));
    std::map<uint64_t, uint64_t> last_before;
    for (uint64_t id : c.ids()) {
      ASSERT_GT(c.durable_snapshot(id).index, 0u) << "node " << id;
      c.Crash(id);
      last_before[id] = c.persisted_last_index(id);
    }
    for (uint64_t id : c.ids()) {
      c.Restart(id);
      ASSERT_TRUE(c.ok()) << c.Report();
      EXPECT_EQ(c.core(id)->snapshot().index, c.durable_snapshot(id).index);
      EXPECT_EQ(c.core(id)->last_index(), last_before[id]);
      EXPECT_GE(c.applied_index(id), c.durable_snapshot(id).index)
          << "state machine not restored from the snapshot";
    }
    // Random crash points while the cluster works and keeps snapshotting.
    int counter = 0;
    for (int tick = 0; tick < 150 && c.ok(); ++tick) {
      if (uint64_t l = c.StableLeader()) c.Propose(l, "c" + std::to_string(counter++));
      if (rng.Chance(0.05)) {
        const uint64_t victim = c.ids()[rng.Uniform(c.ids().size())];
        int down = 0;
        for (uint64_t id : c.ids()) down += !c.alive(id) || c.crash_pending(id);
        if (down == 0) {
          const CrashPoint points[] = {CrashPoint::kNow, CrashPoint::kBeforePersist,
                                       CrashPoint::kAfterPersist};
          c.Crash(victim, points[rng.Uniform(3)]);
        }
      }
      for (uint64_t id : c.ids()) {
        if (!c.alive(id) && rng.Chance(0.15)) c.Restart(id);
      }
      c.RunTicks(1);
    }
    for (uint64_t id : c.ids()) {
      if (c.crash_pending(id)) c.Crash(id);
      c.Restart(id);
    }
    ASSERT_TRUE(AwaitConverged(c, 500)) << c.Report();
    ExpectMembersAgree(c);
    ASSERT_TRUE(c.ok()) << c.Report();
  });
}

// The leader never sends an AppendEntries whose previous entry it has
// compacted (its term would be unknown: TermAt returns 0 below the
// snapshot); it sends the snapshot instead. Writes complete within their
// step here, so every message is built after the compactions before it.
TEST(RaftSnapshotTest, LeaderNeverSendsAppendEntriesWithACompactedPrevIndex) {
  ForEachSeed(12, [&](uint64_t seed) {
    SimOptions o = SOptions(seed % 2 ? 3 : 5, seed);
    o.async_persist_prob = 0;
    o.snapshot_every = 3 + seed % 4;
    o.drop_prob = 0.1;
    o.max_inflight_appends = 1 + seed % 3;
    o.max_append_entries = 2 + seed % 3;
    SimCluster c(o);
    Rng& rng = c.rng();
    std::string bad;
    c.intercept = [&](const Envelope& env) {
      const Message& m = env.msg;
      if (m.type != MessageType::kAppend || !bad.empty()) return false;
      const Raft* l = c.core(m.from);
      if (l == nullptr) return false;
      // (prev 0 always matches: a heartbeat to a follower known only below
      // the snapshot may use it.)
      if (m.append.prev_log_index() > 0 && m.append.prev_log_index() < l->snapshot().index) {
        bad = m.DebugString() + " while the sender's snapshot is at " +
              std::to_string(l->snapshot().index);
      }
      if (l->TermAt(m.append.prev_log_index()) != m.append.prev_log_term()) {
        bad = m.DebugString() + " but the sender has term " +
              std::to_string(l->TermAt(m.append.prev_log_index())) + " at the previous index";
      }
      return false;
    };
    int counter = 0;
    for (int tick = 0; tick < 200 && c.ok() && bad.empty(); ++tick) {
      if (uint64_t l = c.StableLeader()) c.Propose(l, "v" + std::to_string(counter++));
      if (rng.Chance(0.05)) c.Isolate(c.ids()[rng.Uniform(c.ids().size())]);
      if (rng.Chance(0.08)) c.Heal();
      c.RunTicks(1);
    }
    EXPECT_EQ(bad, "") << c.Report();
    c.Heal();
    c.set_drop_prob(0);
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    EXPECT_EQ(bad, "") << c.Report();
    ExpectMembersAgree(c);
    EXPECT_GT(c.stats().snapshot_messages_sent, 0u) << c.Report();
    ASSERT_TRUE(c.ok()) << c.Report();
  });
}

// The leader took a newer snapshot (deleting the old file) while the old one
// was on its way: the transfer fails, the service reports the follower
// unreachable, and the leader sends the newer snapshot.
TEST(RaftSnapshotTest, TransferOfADeletedSnapshotFailsAndTheLeaderSendsTheNewOne) {
  ForEachSeed(10, [&](uint64_t seed) {
    SimOptions o = SOptions(3, seed);
    o.snapshots_kept = 1;
    SimCluster c(o);
    const uint64_t leader = AwaitLeader(c);
    ASSERT_NE(leader, 0u) << c.Report();
    ProposeMany(c, leader, "a", 5);
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    const uint64_t lagging = leader % 3 + 1;
    c.Isolate(lagging);
    ProposeMany(c, leader, "b", 20, 5);
    ASSERT_TRUE(c.RunUntil([&] { return c.applied_index(leader) == c.core(leader)->last_index(); }, 20));
    ASSERT_TRUE(c.TakeSnapshot(leader));
    const uint64_t first_snap = c.durable_snapshot(leader).index;
    // The first transfer is held back; any retry of it before the newer
    // snapshot exists is lost silently.
    std::optional<Envelope> held;
    c.intercept = [&](const Envelope& env) {
      if (env.msg.type == MessageType::kSnapshot && env.msg.to == lagging) {
        if (!held) held = env;
        return true;
      }
      return false;
    };
    c.Heal();
    ASSERT_TRUE(c.RunUntil([&] { return held.has_value(); }, 30)) << c.Report();
    EXPECT_EQ(held->msg.snapshot.last_index(), first_snap);
    ProposeMany(c, leader, "c", 5);
    ASSERT_TRUE(c.RunUntil([&] { return c.applied_index(leader) == c.core(leader)->last_index(); }, 20));
    ASSERT_TRUE(c.TakeSnapshot(leader));
    const uint64_t second_snap = c.durable_snapshot(leader).index;
    ASSERT_GT(second_snap, first_snap);
    ASSERT_FALSE(c.HasSnapshotFile(leader, held->msg.snapshot.last_index(),
                                   held->msg.snapshot.last_term()));
    c.intercept = nullptr;
    c.Inject(*held);
    ASSERT_TRUE(c.RunUntil([&] { return c.stats().snapshot_transfer_failures >= 1; }, 5))
        << c.Report();
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    EXPECT_GE(c.durable_snapshot(lagging).index, second_snap) << c.Report();
    ExpectMembersAgree(c);
    ASSERT_TRUE(c.ok()) << c.Report();
  });
}

// Compact through the cluster: refused for unapplied indexes, accepted at
// the applied index, refused again at or below the snapshot.
TEST(RaftSnapshotTest, CompactRefusesIndexesNotAppliedOrNotAboveTheSnapshot) {
  ForEachSeed(5, [&](uint64_t seed) {
    SimCluster c(SOptions(3, seed));
    const uint64_t leader = AwaitLeader(c);
    ASSERT_NE(leader, 0u) << c.Report();
    ProposeMany(c, leader, "a", 10);
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    Raft* r = c.core(leader);
    const uint64_t last = r->last_index();
    ASSERT_FALSE(r->Compact(last + 1));
    ASSERT_FALSE(r->Compact(0));
    ASSERT_TRUE(c.TakeSnapshot(leader));
    EXPECT_EQ(r->snapshot().index, last);
    ASSERT_FALSE(r->Compact(last));
    ASSERT_FALSE(r->Compact(last - 1));
    EXPECT_EQ(r->TermAt(last - 1), 0u);
    EXPECT_EQ(r->TermAt(last), r->term());
    // A proposal not yet applied cannot be compacted away.
    const ProposeResult p = c.Propose(leader, "pending");
    ASSERT_TRUE(p.accepted) << c.Report();
    ASSERT_FALSE(r->Compact(p.index));
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    ExpectMembersAgree(c);
    ASSERT_TRUE(c.ok()) << c.Report();
  });
}

}  // namespace
}  // namespace raftkv::raft::sim
