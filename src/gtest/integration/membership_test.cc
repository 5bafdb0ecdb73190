// Membership change and leadership transfer with real processes, through the
// Admin service (AdminClient, as raftkvctl uses it):
//  - a new server joins a loaded, compacted cluster as a learner, catches up
//    by InstallSnapshot, is promoted and then counts in the quorum;
//  - a follower and then the leader are removed; the leader steps down, the
//    rest elect a leader and keep the committed configuration across
//    restarts (not the cluster file's);
//  - leadership moves round the cluster five times under a write load with
//    no client-visible failure;
//  - bad admin requests are refused clearly (gRPC codes, raftkvctl exit codes).
#include <filesystem>
#include <fstream>

#include "gtest/common/engines.h"
#include "gtest/integration/admin_test_util.h"

namespace raftkv {
namespace integration {
namespace {

class Membership : public Integration {};
// The same over each engine: a new member catches up from a snapshot file or
// from a checkpoint.
class MembershipByEngine : public Membership, public ::testing::WithParamInterface<std::string> {};

// ---------------------------------------------------------------------------

TEST_P(MembershipByEngine, AddedNodeCatchesUpBySnapshotAndCountsInQuorum) {
  std::vector<std::string> flags = FastTimeoutFlags();
  flags.push_back("--storage_engine=" + GetParam());
  flags.push_back("--snapshot_entries=2000");
  flags.push_back("--segment_bytes=262144");
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, flags, &leader));

  constexpr uint64_t kKeys = 50000;
  const BulkResult w = BulkWrite(cluster(), "m", 0, kKeys, 48, 3);
  std::cerr << "[ info     ] " << w.acked << " writes in " << w.ms << " ms" << std::endl;
  ASSERT_EQ(w.failures, 0u) << JoinLines(w.errors);
  std::string error;
  leader = cluster().WaitForLeader(10000, &error);
  ASSERT_NE(leader, 0u) << error;
  const int L = static_cast<int>(leader);
  // The leader has compacted: a new member cannot be sent the log from index 1.
  ASSERT_FALSE(cluster().Snapshots(L).empty()) << "the leader took no snapshot";
  ASSERT_FALSE(cluster().SegmentFirstIndexes(L).empty());
  ASSERT_GT(cluster().SegmentFirstIndexes(L).front(), 1u) << "the leader did not compact";

  // Node 4: empty, started with --join, not in the cluster file.
  const int n4 = cluster().AddNode();
  ASSERT_EQ(n4, 4);
  ASSERT_TRUE(cluster().Start(n4));
  ASSERT_TRUE(WaitAnswers(cluster(), n4, 10000)) << "the joining node does not answer";
  {
    const StatusResponse st = MustStatus(cluster(), n4);
    EXPECT_EQ(st.applied_index(), 0u);
    EXPECT_NE(st.role(), "leader");
  }
  auto admin = NewAdmin(cluster().Endpoints());
  const auto add_at = Steady::now();
  MemberChangeResponse added;
  grpc::Status s = admin->AddMember(n4, cluster().Endpoint(n4), &added);
  ASSERT_TRUE(s.ok()) << "AddMember: " << Code(s);
  std::cerr << "[ info     ] AddMember committed at index " << added.index() << " in "
            << ElapsedMs(add_at) << " ms" << std::endl;
  {
    const ListMembersResponse list = LeaderMembers(*admin);
    const MemberStatus* m4 = FindMemberStatus(list, n4);
    ASSERT_NE(m4, nullptr) << DescribeMembers(list);
    EXPECT_FALSE(m4->voter()) << "a new member must join as a learner: " << DescribeMembers(list);
    EXPECT_EQ(m4->address(), cluster().Endpoint(n4));
    EXPECT_EQ(MemberIds(list, true), (std::vector<uint64_t>{1, 2, 3})) << DescribeMembers(list);
    EXPECT_EQ(list.config_index(), added.index());
  }

  // Catch-up.
  const uint64_t commit = MustStatus(cluster(), L).commit_index();
  StatusResponse st4;
  const bool caught_up = WaitForApplied(cluster(), n4, commit, 30000, &st4);
  const int64_t catch_up_ms = ElapsedMs(add_at);
  ASSERT_TRUE(caught_up) << "node 4 applied " << st4.applied_index() << " of " << commit;
  std::cerr << "[ info     ] node 4 applied index " << commit << " " << catch_up_ms
            << " ms after AddMember" << std::endl;
  // ... by a snapshot: it holds one, and its log does not start at index 1.
  const std::vector<std::string> snaps4 = cluster().Snapshots(n4);
  EXPECT_FALSE(snaps4.empty()) << "node 4 did not install a snapshot";
  const std::vector<uint64_t> firsts4 = cluster().SegmentFirstIndexes(n4);
  if (!firsts4.empty()) {
    EXPECT_GT(firsts4.front(), 1u) << "node 4 replayed the log from index 1";
  }
  if (!snaps4.empty()) {
    uint64_t index = 0;
    ASSERT_TRUE(ParseAnySnapshotName(std::filesystem::path(snaps4.back()).filename().string(),
                                     &index, nullptr));
    EXPECT_GT(index, 1000u) << snaps4.back();
  }

  // Promote (refused while it lags; it has caught up, but retry anyway).
  int attempts = 0;
  s = PromoteWhenCaughtUp(*admin, n4, 20000, &attempts);
  ASSERT_TRUE(s.ok()) << "PromoteMember after " << attempts << " attempts: " << Code(s);
  {
    const ListMembersResponse list = LeaderMembers(*admin);
    EXPECT_EQ(MemberIds(list, true), (std::vector<uint64_t>{1, 2, 3, 4})) << DescribeMembers(list);
    EXPECT_TRUE(list.config_committed());
  }

  // Stop an original follower: 4 voters, quorum 3, so commits need node 4.
  leader = cluster().WaitForLeader(10000, &error);
  ASSERT_NE(leader, 0u) << error;
  const int stopped = OtherThan(cluster(), static_cast<int>(leader), n4);
  ASSERT_NE(stopped, 0);
  cluster().Stop(stopped);
  const BulkResult w2 = BulkWrite(cluster(), "q", 0, 1000, 16);
  EXPECT_EQ(w2.failures, 0u) << "writes with 3 of 4 voters failed:\n" << JoinLines(w2.errors);

  // Node 4 serves: make it the leader and read through it alone.
  TransferLeaderResponse moved;
  const auto transfer_at = Steady::now();
  s = admin->TransferLeader(n4, &moved);
  ASSERT_TRUE(s.ok()) << "TransferLeader to node 4: " << Code(s);
  EXPECT_EQ(moved.leader_id(), static_cast<uint64_t>(n4));
  std::cerr << "[ info     ] leadership moved to node 4 in " << ElapsedMs(transfer_at) << " ms"
            << std::endl;
  EXPECT_EQ(cluster().WaitForLeader(10000, &error), static_cast<uint64_t>(n4)) << error;
  auto via4 = cluster().NewClientFor(n4, 10000);
  std::vector<std::string> problems = CheckBulkSample(*via4, "m", 0, kKeys, 2000, false);
  EXPECT_TRUE(problems.empty()) << "reads through node 4:\n" << JoinLines(problems);
  problems = CheckBulkSample(*via4, "q", 0, 1000, 1000, false);
  EXPECT_TRUE(problems.empty()) << "reads through node 4:\n" << JoinLines(problems);
  EXPECT_TRUE(via4->Put("written-via-4", "yes").ok());
}

INSTANTIATE_TEST_SUITE_P(Engines, MembershipByEngine, ::testing::ValuesIn(testing_util::BackendEngines()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ---------------------------------------------------------------------------

TEST_F(Membership, RemoveFollowerThenLeader) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(4, FastTimeoutFlags(), &leader));
  const BulkResult w = BulkWrite(cluster(), "r", 0, 500, 8);
  ASSERT_EQ(w.failures, 0u) << JoinLines(w.errors);
  auto admin = NewAdmin(cluster().Endpoints());
  std::string error;

  // 1. A follower.
  const int follower = OtherThan(cluster(), static_cast<int>(leader));
  MemberChangeResponse removed;
  grpc::Status s = admin->RemoveMember(follower, &removed);
  ASSERT_TRUE(s.ok()) << "RemoveMember(" << follower << "): " << Code(s);
  {
    const ListMembersResponse list = LeaderMembers(*admin);
    EXPECT_EQ(FindMemberStatus(list, follower), nullptr) << DescribeMembers(list);
    EXPECT_EQ(list.members_size(), 3) << DescribeMembers(list);
    EXPECT_EQ(list.config_index(), removed.index());
  }
  cluster().MarkRemoved(follower);
  // It is still running for a while: the others must not be disturbed.
  const BulkResult w2 = BulkWrite(cluster(), "r2", 0, 300, 8);
  EXPECT_EQ(w2.failures, 0u) << JoinLines(w2.errors);
  cluster().Stop(follower);

  // 2. The leader itself: it answers once the change is committed, then
  // steps down, and the other two elect a leader.
  const int old_leader = static_cast<int>(leader);
  const uint64_t old_term = MustStatus(cluster(), old_leader).term();
  const auto remove_at = Steady::now();
  s = admin->RemoveMember(old_leader, &removed);
  ASSERT_TRUE(s.ok()) << "RemoveMember(leader " << old_leader << "): " << Code(s);
  cluster().MarkRemoved(old_leader);
  const uint64_t new_leader = cluster().WaitForLeader(10000, &error);
  ASSERT_NE(new_leader, 0u) << error;
  const int64_t elected_ms = ElapsedMs(remove_at);
  std::cerr << "[ info     ] leader " << old_leader << " removed; member " << new_leader
            << " leads after " << elected_ms << " ms" << std::endl;
  EXPECT_NE(new_leader, static_cast<uint64_t>(old_leader));
  EXPECT_GT(cluster().last_leader_term(), old_term);
  EXPECT_LT(elected_ms, 5000);
  {
    StatusResponse st;
    ASSERT_TRUE(cluster().StatusOf(old_leader, &st).ok());
    EXPECT_NE(st.role(), "leader") << "the removed leader did not step down";
  }
  // Writes continue while the removed leader still runs, without elections.
  const uint64_t term = cluster().last_leader_term();
  const BulkResult w3 = BulkWrite(cluster(), "r3", 0, 300, 8);
  EXPECT_EQ(w3.failures, 0u) << JoinLines(w3.errors);
  std::this_thread::sleep_for(Millis(1500));
  EXPECT_EQ(cluster().WaitForLeader(5000, &error), new_leader) << error;
  EXPECT_EQ(cluster().last_leader_term(), term) << "a removed member disturbed the cluster";
  cluster().Stop(old_leader);

  std::vector<uint64_t> remaining;
  for (int i = 1; i <= 4; ++i) {
    if (!cluster().IsRemoved(i)) remaining.push_back(static_cast<uint64_t>(i));
  }
  auto admin2 = NewAdmin(cluster().Endpoints());
  uint64_t config_index = 0;
  {
    const ListMembersResponse list = LeaderMembers(*admin2);
    EXPECT_EQ(MemberIds(list), remaining) << DescribeMembers(list);
    EXPECT_EQ(MemberIds(list, true), remaining) << DescribeMembers(list);
    EXPECT_TRUE(list.config_committed());
    EXPECT_GT(list.config_index(), 0u);
    config_index = list.config_index();
  }

  // 3. Restart the two remaining members: they keep the committed
  // configuration (2 voters). With the cluster file's 4 voters they could not
  // elect a leader (quorum 3).
  for (uint64_t i : remaining) cluster().Stop(static_cast<int>(i));
  for (uint64_t i : remaining) ASSERT_TRUE(cluster().Start(static_cast<int>(i)));
  const uint64_t after_restart = cluster().WaitForLeader(15000, &error);
  ASSERT_NE(after_restart, 0u) << "no leader after restarting the remaining members: " << error;
  {
    const ListMembersResponse list = LeaderMembers(*admin2);
    EXPECT_EQ(MemberIds(list, true), remaining) << DescribeMembers(list);
    EXPECT_EQ(list.config_index(), config_index) << DescribeMembers(list);
  }
  auto client = cluster().NewClient(10000);
  EXPECT_TRUE(client->Put("after-restart", "yes").ok());
  std::vector<std::string> problems = CheckBulkSample(*client, "r", 0, 500, 500, false);
  EXPECT_TRUE(problems.empty()) << JoinLines(problems);
  problems = CheckBulkSample(*client, "r3", 0, 300, 300, false);
  EXPECT_TRUE(problems.empty()) << JoinLines(problems);
}

// ---------------------------------------------------------------------------

TEST_F(Membership, LeadershipTransferUnderLoad) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, FastTimeoutFlags(), &leader));

  // Writers: distinct keys, sessions on, each write retried for up to 5 s.
  constexpr int kWriters = 16;
  auto client = cluster().NewClient(5000, 1000);
  std::atomic<bool> stop{false};
  std::mutex mu;
  KvMap acked;
  std::vector<std::string> failures;
  std::vector<int64_t> max_latency(kWriters, 0);
  std::atomic<uint64_t> writes{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      for (uint64_t n = 0; !stop; ++n) {
        const std::string key = "t" + std::to_string(t) + "-" + std::to_string(n);
        const std::string value = "v" + std::to_string(n);
        const auto start = Steady::now();
        grpc::Status s = client->Put(key, value);
        const int64_t ms = ElapsedMs(start);
        max_latency[t] = std::max(max_latency[t], ms);
        std::lock_guard<std::mutex> lock(mu);
        if (s.ok()) {
          acked[key] = value;
          ++writes;
        } else {
          failures.push_back(key + " after " + std::to_string(ms) + " ms: " + Code(s));
        }
      }
    });
  }
  std::this_thread::sleep_for(Millis(700));

  auto admin = NewAdmin(cluster().Endpoints(), 5000);
  std::string error;
  std::vector<int64_t> transfer_ms;
  for (int round = 0; round < 5; ++round) {
    const uint64_t from = cluster().WaitForLeader(5000, &error);
    ASSERT_NE(from, 0u) << error;
    const uint64_t to = from % 3 + 1;
    const uint64_t writes_before = writes;
    TransferLeaderResponse resp;
    const auto start = Steady::now();
    grpc::Status s = admin->TransferLeader(to, &resp);
    const int64_t ms = ElapsedMs(start);
    transfer_ms.push_back(ms);
    std::cerr << "[ info     ] transfer " << round + 1 << ": " << from << " -> " << to << " in "
              << ms << " ms: " << (s.ok() ? "OK" : Code(s)) << std::endl;
    ASSERT_TRUE(s.ok()) << "TransferLeader " << from << " -> " << to << ": " << Code(s);
    EXPECT_EQ(resp.leader_id(), to);
    EXPECT_LT(ms, 2000) << "transfer " << from << " -> " << to << " too slow";
    EXPECT_EQ(cluster().WaitForLeader(5000, &error), to) << error;
    // Writes flow under the new leader before the next transfer.
    EXPECT_TRUE(WaitUntil([&] { return writes >= writes_before + 200; }, 5000))
        << "writes stalled after the transfer to " << to;
    std::this_thread::sleep_for(Millis(300));
  }
  stop = true;
  for (auto& w : writers) w.join();

  const int64_t worst = *std::max_element(max_latency.begin(), max_latency.end());
  std::cerr << "[ info     ] " << writes << " writes acknowledged, " << failures.size()
            << " failed; slowest write " << worst << " ms" << std::endl;
  EXPECT_TRUE(failures.empty()) << failures.size() << " writes failed:\n" << JoinLines(failures);
  EXPECT_LT(worst, 3000) << "a write waited too long across a transfer";
  std::vector<std::string> problems = CheckAll(*client, acked, /*stale=*/false);
  EXPECT_TRUE(problems.empty()) << problems.size() << " acknowledged writes lost:\n"
                                << JoinLines(problems);
}

// ---------------------------------------------------------------------------

// The outcome of one raw Admin call at a chosen member.
struct RawResult {
  grpc::Status status;
  std::string leader_addr;  // trailing metadata, "<absent>" if none
};

template <typename Req, typename Resp>
RawResult RawAdmin(const std::string& endpoint,
                   grpc::Status (Admin::Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
                   const Req& req, Resp* resp) {
  auto stub = Admin::NewStub(NewChannel(endpoint));
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 5000);
  RawResult r;
  r.status = (stub.get()->*method)(&ctx, req, resp);
  r.leader_addr = Trailer(ctx, "raftkv-leader-addr");
  return r;
}

TEST_F(Membership, BadRequestsAreRefusedClearly) {
  std::vector<std::string> flags = FastTimeoutFlags();
  flags.push_back("--promote_max_lag=5");
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, flags, &leader));
  const int L = static_cast<int>(leader);
  const int follower = OtherThan(cluster(), L);
  MemberChangeResponse change;

  // Arguments checked before anything is proposed.
  AddMemberRequest add;
  add.set_id(0);
  add.set_address("127.0.0.1:1");
  RawResult r = RawAdmin(cluster().Endpoint(L), &Admin::Stub::AddMember, add, &change);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Code(r.status);
  add.set_id(9);
  add.set_address("no-port");
  r = RawAdmin(cluster().Endpoint(L), &Admin::Stub::AddMember, add, &change);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Code(r.status);
  EXPECT_NE(r.status.error_message().find("no-port"), std::string::npos) << Code(r.status);

  // A follower names the leader (message and metadata).
  add.set_address("127.0.0.1:1");
  r = RawAdmin(cluster().Endpoint(follower), &Admin::Stub::AddMember, add, &change);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Code(r.status);
  EXPECT_EQ(r.leader_addr, cluster().Endpoint(L));
  EXPECT_NE(r.status.error_message().find(cluster().Endpoint(L)), std::string::npos)
      << Code(r.status);
  TransferLeaderRequest transfer;
  TransferLeaderResponse transferred;
  transfer.set_id(static_cast<uint64_t>(follower));
  r = RawAdmin(cluster().Endpoint(follower), &Admin::Stub::TransferLeader, transfer, &transferred);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Code(r.status);
  EXPECT_EQ(r.leader_addr, cluster().Endpoint(L));

  // Refusals by the leader: no leader hint (clients must not loop).
  PromoteMemberRequest promote;
  promote.set_id(7);  // not a member
  r = RawAdmin(cluster().Endpoint(L), &Admin::Stub::PromoteMember, promote, &change);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Code(r.status);
  EXPECT_EQ(r.leader_addr, "<absent>");
  promote.set_id(static_cast<uint64_t>(follower));  // already a voter
  r = RawAdmin(cluster().Endpoint(L), &Admin::Stub::PromoteMember, promote, &change);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Code(r.status);
  RemoveMemberRequest remove;
  remove.set_id(7);
  r = RawAdmin(cluster().Endpoint(L), &Admin::Stub::RemoveMember, remove, &change);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Code(r.status);
  add.set_id(static_cast<uint64_t>(follower));  // already a member
  add.set_address("127.0.0.1:1");
  r = RawAdmin(cluster().Endpoint(L), &Admin::Stub::AddMember, add, &change);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Code(r.status);
  transfer.set_id(7);
  r = RawAdmin(cluster().Endpoint(L), &Admin::Stub::TransferLeader, transfer, &transferred);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Code(r.status);
  // Transfer to the leader itself is a no-op.
  transfer.set_id(leader);
  r = RawAdmin(cluster().Endpoint(L), &Admin::Stub::TransferLeader, transfer, &transferred);
  EXPECT_TRUE(r.status.ok()) << Code(r.status);
  EXPECT_EQ(transferred.leader_id(), leader);

  // Nothing changed.
  auto admin = NewAdmin(cluster().Endpoints());
  ListMembersResponse list = LeaderMembers(*admin);
  EXPECT_EQ(MemberIds(list, true), (std::vector<uint64_t>{1, 2, 3})) << DescribeMembers(list);
  EXPECT_EQ(list.config_index(), 0u) << "bootstrap configuration expected: "
                                     << DescribeMembers(list);

  // A learner that cannot catch up (nothing listens at its address) is not
  // promoted; raftkvctl reports the refusal and the learner's progress while
  // it waits; it can be removed again.
  const BulkResult w = BulkWrite(cluster(), "b", 0, 20, 4);  // more than the allowed lag
  ASSERT_EQ(w.failures, 0u) << JoinLines(w.errors);
  const std::vector<int> nowhere = PickFreePorts(1);
  ASSERT_EQ(nowhere.size(), 1u);
  const std::string nowhere_addr = "127.0.0.1:" + std::to_string(nowhere[0]);
  ASSERT_TRUE(admin->AddMember(9, nowhere_addr, &change).ok());
  list = LeaderMembers(*admin);
  ASSERT_NE(FindMemberStatus(list, 9), nullptr) << DescribeMembers(list);
  EXPECT_FALSE(FindMemberStatus(list, 9)->voter());
  promote.set_id(9);
  r = RawAdmin(cluster().Endpoint(L), &Admin::Stub::PromoteMember, promote, &change);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Code(r.status);
  EXPECT_NE(r.status.error_message().find("behind"), std::string::npos) << Code(r.status);
  RunResult run = RunToCompletion(CtlBinary(),
                                  {"--endpoints=" + cluster().Endpoint(follower), "member",
                                   "promote", "9", "--wait_timeout_ms=1500"},
                                  cluster().dir(), 10000);
  EXPECT_TRUE(run.exited && run.exit_code == 1) << run.output;
  EXPECT_NE(run.output.find("waiting to promote member 9"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("match 0 of"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("error: FAILED_PRECONDITION"), std::string::npos) << run.output;
  ASSERT_TRUE(admin->RemoveMember(9, &change).ok());
  list = LeaderMembers(*admin);
  EXPECT_EQ(MemberIds(list), (std::vector<uint64_t>{1, 2, 3})) << DescribeMembers(list);

  // raftkvctl: member list from a follower's endpoint finds the leader; its
  // table marks the leader; errors exit 1, usage errors 2.
  const std::string eps = "--endpoints=" + cluster().Endpoint(follower);
  run = RunToCompletion(CtlBinary(), {eps, "member", "list"}, cluster().dir(), 10000);
  EXPECT_TRUE(run.exited && run.exit_code == 0) << run.output;
  EXPECT_NE(run.output.find("ID  ADDRESS"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find(cluster().Endpoint(L) + "  voter"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("self"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("configuration at index " + std::to_string(change.index()) +
                            " (committed); leader " + std::to_string(leader)),
            std::string::npos)
      << run.output;
  run = RunToCompletion(CtlBinary(), {eps, "--json", "member", "list"}, cluster().dir(), 10000);
  EXPECT_TRUE(run.exited && run.exit_code == 0) << run.output;
  EXPECT_NE(run.output.find("\"from_leader\": true"), std::string::npos) << run.output;
  run = RunToCompletion(CtlBinary(),
                        {"--cluster_file=" + cluster().cluster_file(), "member", "promote", "7",
                         "--wait_timeout_ms=500"},
                        cluster().dir(), 10000);
  EXPECT_TRUE(run.exited && run.exit_code == 1) << run.output;
  EXPECT_NE(run.output.find("not in the configuration"), std::string::npos) << run.output;
  run = RunToCompletion(CtlBinary(), {eps, "member", "add", "9", "nohostport"}, cluster().dir(),
                        10000);
  EXPECT_TRUE(run.exited && run.exit_code == 2) << run.output;
  run = RunToCompletion(CtlBinary(), {eps, "member", "remove", "0"}, cluster().dir(), 10000);
  EXPECT_TRUE(run.exited && run.exit_code == 2) << run.output;
  run = RunToCompletion(CtlBinary(), {eps, "transfer-leader", "7"}, cluster().dir(), 10000);
  EXPECT_TRUE(run.exited && run.exit_code == 1) << run.output;
  EXPECT_NE(run.output.find("error: FAILED_PRECONDITION"), std::string::npos) << run.output;
  // raftkvctl transfer-leader through a follower's endpoint.
  run = RunToCompletion(CtlBinary(), {eps, "transfer-leader", std::to_string(follower)},
                        cluster().dir(), 10000);
  EXPECT_TRUE(run.exited && run.exit_code == 0) << run.output;
  EXPECT_NE(run.output.find("OK: member " + std::to_string(follower) + " is the leader"),
            std::string::npos)
      << run.output;
  std::string error;
  EXPECT_EQ(cluster().WaitForLeader(5000, &error), static_cast<uint64_t>(follower)) << error;
}

// etcd's way of adding a member: `member add`, then the new member started
// with a cluster file that lists it and --initial_cluster_state=existing. It
// records a bootstrap configuration without a vote of its own, never
// campaigns, catches up as a learner, is promoted, and keeps what it learned
// across a restart (the flag is ignored from then on). A member whose data
// was lost is not brought back this way under its old id: it may have voted
// in a term it no longer remembers (remove it and add a new one).
TEST_F(Membership, ANewMemberListedInItsClusterFileJoinsAsExisting) {
  cluster_ = std::make_unique<ProcessCluster>(4, FastTimeoutFlags());
  // Members 1-3 bootstrap without member 4; its own file lists all four.
  const std::string three = cluster().dir() + "/three.conf";
  {
    std::ofstream f(three);
    for (int i = 1; i <= 3; ++i) f << i << " " << cluster().Endpoint(i) << "\n";
  }
  for (int i = 1; i <= 3; ++i) {
    cluster().SetNodeFlags(i, {"--cluster_file=" + three});
    ASSERT_TRUE(cluster().Start(i));
  }
  std::string error;
  ASSERT_NE(cluster().WaitForLeader(20000, &error), 0u) << error;
  auto client = cluster().NewClient(10000);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(client->Put("e" + std::to_string(i), std::to_string(i)).ok());
  auto admin = NewAdmin({cluster().Endpoint(1), cluster().Endpoint(2), cluster().Endpoint(3)});
  MemberChangeResponse added;
  grpc::Status s = admin->AddMember(4, cluster().Endpoint(4), &added);
  ASSERT_TRUE(s.ok()) << "AddMember: " << Code(s);
  ASSERT_TRUE(cluster().Start(4, {"--initial_cluster_state=existing"}));
  s = PromoteWhenCaughtUp(*admin, 4, 20000);
  ASSERT_TRUE(s.ok()) << "PromoteMember: " << Code(s);
  auto local = cluster().NewClientFor(4);
  std::string value;
  bool found = false;
  ASSERT_TRUE(WaitUntil([&] { return local->Get("e42", &value, &found, /*allow_stale=*/true).ok() && found; },
                        10000));
  EXPECT_EQ(value, "42");
  const std::string log = cluster().LastRunLogText(4);
  EXPECT_NE(log.find("joining an existing cluster"), std::string::npos) << log;
  EXPECT_EQ(log.find("starts pre-vote"), std::string::npos) << "the new member campaigned";
  // A restart keeps the recorded configuration (now with member 4 a voter).
  ASSERT_TRUE(cluster().Stop(4));
  ASSERT_TRUE(cluster().Start(4));
  EXPECT_EQ(cluster().LastRunLogText(4).find("bootstrapping a new cluster"), std::string::npos);
  ASSERT_TRUE(client->Put("after-restart", "1").ok());
  ASSERT_TRUE(WaitAnswers(cluster(), 4, 10000));
  StatusResponse st;
  ASSERT_TRUE(cluster().StatusOf(4, &st).ok());
  EXPECT_EQ(st.voters_size(), 4);
}

}  // namespace
}  // namespace integration
}  // namespace raftkv
