// Backups and disaster recovery (ops/backup.h): verifying a snapshot
// file, receiving a streamed one (BackupFileWriter: size, SHA-256, header
// and structure checked before the file is renamed into place), and
// building a new member's data directory from a backup with a new cluster
// configuration, which recovers (RecoverNode, as raftkv-server does) with
// the backup's keys, revisions, leases and sessions and the new membership.
// And the Admin.SnapshotSave stream of a real node, received with
// AdminClient into a BackupFileWriter.
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "client/admin_client.h"
#include "gtest/common/temp_dir.h"
#include "proto/internal.h"
#include "raft/core/membership.h"
#include "gtest/server/server_fixture.h"
#include "ops/admin_service.h"
#include "ops/backup.h"
#include "node/cluster_config.h"
#include "node/node_options.h"
#include "node/recovery.h"
#include "storage/file_util.h"
#include "storage/hard_state_file.h"
#include "kv/kv_state_machine.h"
#include "storage/snapshot_format.h"
#include "storage/checkpoint_store.h"
#include "storage/snapshot_store.h"

namespace raftkv {
namespace {

namespace fs = std::filesystem;
using testing_util::ReadFileBytes;
using testing_util::TempDir;
using testing_util::WriteFileBytes;

constexpr uint64_t kTerm = 7;
constexpr int64_t kLeaseId = 4242;

Entry CommandEntry(uint64_t index, uint64_t term, uint64_t time_ms, const Command& c) {
  Entry e;
  e.set_index(index);
  e.set_term(term);
  e.set_type(ENTRY_COMMAND);
  e.set_cluster_time_ms(time_ms);
  e.set_data(c.SerializeAsString());
  return e;
}

ClusterConfig Cluster(const std::vector<std::pair<uint64_t, std::string>>& members) {
  ClusterConfig c;
  for (const auto& [id, address] : members) c.members.push_back(Member{id, address});
  return c;
}

// The old cluster's state: keys (some overwritten, one deleted), a lease with
// keys, a session with a saved result; written as a member writes a
// snapshot, with the old cluster's configuration in its header.
class BackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    uint64_t index = 0;
    auto apply = [&](const Command& c) {
      ++index;
      ApplyResult r = original_.Apply(CommandEntry(index, kTerm, 1000 + index, c));
      ASSERT_TRUE(r.ok && !r.rejected() && r.session_error == ApplyResult::SessionError::kNone)
          << "entry " << index << ": " << r.error;
    };
    for (int i = 0; i < 300; ++i) {
      Command put;
      put.set_op(Command::PUT);
      put.set_key("key" + std::to_string(i));
      put.set_value("value" + std::to_string(i));
      apply(put);
    }
    for (int i = 0; i < 10; ++i) {  // overwritten: version 2, later mod revision
      Command put;
      put.set_op(Command::PUT);
      put.set_key("key" + std::to_string(i));
      put.set_value("second" + std::to_string(i));
      apply(put);
    }
    Command del;
    del.set_op(Command::DELETE);
    del.set_key("key299");
    apply(del);
    Command grant;
    grant.set_op(Command::LEASE_GRANT);
    grant.set_lease(kLeaseId);
    grant.set_lease_ttl(600);
    apply(grant);
    Command leased;
    leased.set_op(Command::PUT);
    leased.set_key("leased");
    leased.set_value("v");
    leased.set_lease(kLeaseId);
    apply(leased);
    Command open;
    open.set_op(Command::OPEN_SESSION);
    open.set_session_timeout_ms(60000);
    const uint64_t session = index + 1;
    apply(open);
    Command in_session;
    in_session.set_op(Command::PUT);
    in_session.set_key("session-key");
    in_session.set_value("once");
    in_session.set_client_id(session);
    in_session.set_sequence(1);
    apply(in_session);

    old_config_ = BootstrapConfig(Cluster({{1, "10.0.0.1:7001"}, {2, "10.0.0.2:7001"},
                                           {3, "10.0.0.3:7001"}}));
    SnapshotWriter writer;
    original_.Snapshot(&writer);
    writer.meta().config = old_config_.SerializeAsString();
    std::unique_ptr<SnapshotStore> store;
    ASSERT_TRUE(SnapshotStore::Open(old_.Join("snap"), &store).ok());
    SnapshotFileInfo info;
    ASSERT_TRUE(store->Write(writer, &info).ok());
    backup_ = info.path;
    last_index_ = index;

    new_cluster_ = Cluster({{1, "127.0.0.1:7101"}, {2, "127.0.0.1:7102"}, {3, "127.0.0.1:7103"}});
  }

  RestoreOptions Options(uint64_t id, const std::string& dir) const {
    RestoreOptions o;
    o.snapshot_path = backup_;
    o.data_dir = dir;
    o.id = id;
    o.cluster = new_cluster_;
    return o;
  }

  // A copy of the backup with the byte at `offset` flipped.
  std::string Damaged(size_t offset, const std::string& name = "damaged.snap") const {
    std::string bytes = ReadFileBytes(backup_);
    EXPECT_LT(offset, bytes.size());
    bytes[offset] = static_cast<char>(bytes[offset] ^ 0x20);
    const std::string path = work_.Join(name);
    WriteFileBytes(path, bytes);
    return path;
  }

  // Streams `bytes` into `path` through a BackupFileWriter, in 1000-byte
  // chunks, and finishes with `expected`.
  Status Stream(const std::string& bytes, const std::string& path, const ExpectedBackup& expected,
                SnapshotFileSummary* summary) const {
    std::unique_ptr<BackupFileWriter> w;
    Status s = BackupFileWriter::Create(path, &w);
    if (!s.ok()) return s;
    for (size_t at = 0; at < bytes.size(); at += 1000) {
      s = w->Append(std::string_view(bytes).substr(at, 1000));
      if (!s.ok()) return s;
    }
    return w->Finish(expected, summary);
  }

  ExpectedBackup Expected(const std::string& bytes) const {
    ExpectedBackup e;
    e.size = bytes.size();
    Sha256 sha;
    sha.Update(bytes);
    e.sha256 = sha.HexDigest();
    e.last_index = last_index_;
    e.last_term = kTerm;
    e.revision = original_.Revision();
    return e;
  }

  TempDir old_{"backup_old"};
  TempDir work_{"backup_work"};
  KvStateMachine original_;
  MembershipConfig old_config_;
  std::string backup_;
  uint64_t last_index_ = 0;
  ClusterConfig new_cluster_;
};

TEST(Sha256Test, KnownVectors) {
  Sha256 empty;
  EXPECT_EQ(empty.HexDigest(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 abc;
  abc.Update("a");
  abc.Update("bc");
  EXPECT_EQ(abc.HexDigest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(BackupTest, VerifySummarizesTheFile) {
  SnapshotFileSummary summary;
  ASSERT_TRUE(VerifySnapshotFile(backup_, &summary).ok());
  EXPECT_EQ(summary.meta.last_index, last_index_);
  EXPECT_EQ(summary.meta.last_term, kTerm);
  EXPECT_EQ(summary.revision, original_.Revision());
  EXPECT_EQ(summary.keys, 301u);  // 300 - 1 deleted + leased + session-key
  EXPECT_EQ(summary.leases, 1u);
  EXPECT_EQ(summary.sessions, 1u);
  EXPECT_EQ(summary.bytes, fs::file_size(backup_));
  int64_t revision = -1;
  ASSERT_TRUE(ReadSnapshotRevision(backup_, &revision).ok());
  EXPECT_EQ(revision, original_.Revision());
}

TEST_F(BackupTest, VerifyRefusesDamagedAndTruncatedFiles) {
  const std::string bytes = ReadFileBytes(backup_);
  SnapshotFileSummary summary;
  for (size_t offset : {size_t{0}, size_t{10}, bytes.size() / 2, bytes.size() - 3}) {
    Status s = VerifySnapshotFile(Damaged(offset), &summary);
    EXPECT_TRUE(s.IsCorruption()) << "byte " << offset << ": " << s.ToString();
  }
  const std::string cut = work_.Join("cut.snap");
  WriteFileBytes(cut, bytes.substr(0, bytes.size() - 100));
  EXPECT_TRUE(VerifySnapshotFile(cut, &summary).IsCorruption());
  EXPECT_FALSE(VerifySnapshotFile(work_.Join("missing.snap"), &summary).ok());
}

TEST_F(BackupTest, StreamedFileIsVerifiedBeforeItIsRenamedIntoPlace) {
  const std::string bytes = ReadFileBytes(backup_);
  const std::string target = work_.Join("backup.snap");
  SnapshotFileSummary summary;
  ASSERT_TRUE(Stream(bytes, target, Expected(bytes), &summary).ok());
  EXPECT_EQ(ReadFileBytes(target), bytes);
  EXPECT_FALSE(fs::exists(target + ".part"));
  EXPECT_EQ(summary.revision, original_.Revision());
  EXPECT_EQ(summary.keys, 301u);

  // Each failure leaves the previous (good) file in place and no .part.
  auto refused = [&](const std::string& stream, const ExpectedBackup& expected,
                     const char* why) {
    SnapshotFileSummary s;
    Status st = Stream(stream, target, expected, &s);
    EXPECT_TRUE(st.IsCorruption()) << why << ": " << st.ToString();
    EXPECT_EQ(ReadFileBytes(target), bytes) << why;
    EXPECT_FALSE(fs::exists(target + ".part")) << why;
  };
  ExpectedBackup wrong_sha = Expected(bytes);
  wrong_sha.sha256[0] = wrong_sha.sha256[0] == '0' ? '1' : '0';
  refused(bytes, wrong_sha, "wrong checksum");
  ExpectedBackup no_sha = Expected(bytes);
  no_sha.sha256.clear();
  refused(bytes, no_sha, "no checksum (stream cut short)");
  refused(bytes.substr(0, bytes.size() - 1000), Expected(bytes), "short stream");
  // Damaged on the member's disk: the checksum of the damaged bytes matches,
  // the file's own checksums do not.
  std::string damaged = bytes;
  damaged[bytes.size() / 2] ^= 1;
  refused(damaged, Expected(damaged), "damaged file, matching SHA-256");
  ExpectedBackup other_index = Expected(bytes);
  other_index.last_index += 1;
  refused(bytes, other_index, "announced another index");
  ExpectedBackup other_revision = Expected(bytes);
  other_revision.revision += 1;
  refused(bytes, other_revision, "announced another revision");
}

TEST_F(BackupTest, RestoredMembersRecoverTheStateWithTheNewConfiguration) {
  const MembershipConfig want = BootstrapConfig(new_cluster_);
  for (uint64_t id : {1, 2, 3}) {
    SCOPED_TRACE("member " + std::to_string(id));
    const std::string dir = work_.Join("member" + std::to_string(id));
    RestoreResult result;
    Status s = RestoreDataDir(Options(id, dir), &result);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(result.source.revision, original_.Revision());
    EXPECT_EQ(raft::DescribeMembership(result.config), "1v,2v,3v");

    // Opened as raftkv-server opens it.
    NodeOptions node;
    node.id = id;
    node.cluster = new_cluster_;
    node.data_dir = dir;
    RecoveredState r;
    s = RecoverNode(node, &r);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(r.base.index, last_index_);
    EXPECT_EQ(r.base.term, kTerm);
    EXPECT_EQ(r.base.config.SerializeAsString(), want.SerializeAsString());
    EXPECT_EQ(r.base.config.members(1).address(), "127.0.0.1:7102");
    EXPECT_TRUE(r.entries.empty());
    EXPECT_EQ(r.hard_state, (HardState{kTerm, 0}));
    EXPECT_EQ(r.log->LastIndex(), last_index_);  // the next entry follows the snapshot
    const KvStateMachine& sm = *r.state_machine;
    EXPECT_EQ(sm.AppliedIndex(), last_index_);
    EXPECT_EQ(sm.AppliedTerm(), kTerm);
    EXPECT_EQ(sm.Revision(), original_.Revision());
    EXPECT_EQ(sm.Size(), original_.Size());
    EXPECT_EQ(sm.SessionCount(), 1u);
    EXPECT_EQ(sm.Leases(), original_.Leases());
    for (int i = 0; i < 300; ++i) {
      const std::string key = "key" + std::to_string(i);
      std::optional<KvRecord> got = sm.GetRecord(key);
      std::optional<KvRecord> was = original_.GetRecord(key);
      ASSERT_EQ(got.has_value(), was.has_value()) << key;
      if (!was) continue;
      EXPECT_EQ(got->value, was->value) << key;
      EXPECT_EQ(got->create_revision, was->create_revision) << key;
      EXPECT_EQ(got->mod_revision, was->mod_revision) << key;
      EXPECT_EQ(got->version, was->version) << key;
    }
    EXPECT_FALSE(sm.GetRecord("key299").has_value());
    ASSERT_TRUE(sm.GetRecord("leased").has_value());
    EXPECT_EQ(sm.GetRecord("leased")->lease, kLeaseId);
    // The old cluster's configuration is gone from the directory.
    std::vector<SnapshotFileInfo> files;
    ASSERT_TRUE(r.snapshots->List(&files).ok());
    ASSERT_EQ(files.size(), 1u);
    std::unique_ptr<SnapshotReader> reader;
    ASSERT_TRUE(SnapshotReader::Open(files[0].path, &reader).ok());
    EXPECT_EQ(reader->meta().config, want.SerializeAsString());
    EXPECT_EQ(reader->meta().cluster_time_ms, original_.AppliedIndex() + 1000);
  }
}

TEST_F(BackupTest, RestoreIntoAnEmptyExistingDirectory) {
  const std::string dir = work_.Join("empty");
  fs::create_directories(dir);
  RestoreResult result;
  Status s = RestoreDataDir(Options(2, dir), &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(fs::exists(dir + "/hardstate"));
}

TEST_F(BackupTest, RefusesADirectoryWithData) {
  const std::string dir = work_.Join("used");
  fs::create_directories(dir);
  WriteFileBytes(dir + "/hardstate", "not mine");
  RestoreResult result;
  Status s = RestoreDataDir(Options(1, dir), &result);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("already holds data"), std::string::npos) << s.ToString();
  EXPECT_EQ(ReadFileBytes(dir + "/hardstate"), "not mine");
  EXPECT_FALSE(fs::exists(dir + "/snap"));
  // A file where the directory should be.
  s = RestoreDataDir(Options(1, dir + "/hardstate"), &result);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
}

TEST_F(BackupTest, RefusesAnIdOutsideTheNewCluster) {
  const std::string dir = work_.Join("stranger");
  RestoreResult result;
  Status s = RestoreDataDir(Options(4, dir), &result);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("not listed"), std::string::npos) << s.ToString();
  s = RestoreDataDir(Options(0, dir), &result);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_FALSE(fs::exists(dir));
}

TEST_F(BackupTest, RefusesADamagedBackupAndWritesNothing) {
  const std::string bytes = ReadFileBytes(backup_);
  for (size_t offset : {size_t{20}, bytes.size() / 3, bytes.size() - 10}) {
    SCOPED_TRACE("byte " + std::to_string(offset));
    RestoreOptions o = Options(1, work_.Join("from-damaged"));
    o.snapshot_path = Damaged(offset);
    RestoreResult result;
    Status s = RestoreDataDir(o, &result);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.message().find("fails verification"), std::string::npos) << s.ToString();
    EXPECT_FALSE(fs::exists(o.data_dir));
  }
}

// The file etcdctl snapshot save writes from a raftkv member: the snapshot
// in etcd's frame, whose size etcdctl checks; restored as the file inside,
// and refused when a byte of it changed.
TEST_F(BackupTest, RestoresASnapshotInEtcdsFrame) {
  const std::string bytes = ReadFileBytes(backup_);
  EtcdSnapshotFrame frame(bytes.size());
  frame.Update(bytes);
  const std::string framed = bytes + frame.Trailer();
  EXPECT_EQ(framed.size() % EtcdSnapshotFrame::kAlign, EtcdSnapshotFrame::kDigestBytes);
  const std::string path = work_.Join("etcdctl.db");
  WriteFileBytes(path, framed);
  RestoreOptions o = Options(1, work_.Join("from-etcdctl"));
  o.snapshot_path = path;
  RestoreResult result;
  Status s = RestoreDataDir(o, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(result.source.bytes, bytes.size());

  std::string damaged = framed;
  damaged[bytes.size() / 2] ^= 0x01;
  WriteFileBytes(path, damaged);
  o.data_dir = work_.Join("from-damaged-etcdctl");
  s = RestoreDataDir(o, &result);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_FALSE(fs::exists(o.data_dir));
}

// One node behind a real server (ServerTest), and its Admin service on a
// server of its own (the fixture's GrpcServer is built without one).
class SnapshotSaveTest : public ServerTest {
 protected:
  void StartAdmin(const CallAuthorizer* auth = nullptr, ServerMetrics* metrics = nullptr) {
    admin_ = std::make_unique<AdminServiceImpl>(node_.get(), 10000, auth, metrics);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(admin_.get());
    admin_server_ = builder.BuildAndStart();
    ASSERT_NE(admin_server_, nullptr);
    ASSERT_GT(port, 0);
    admin_address_ = "127.0.0.1:" + std::to_string(port);
    AdminClientOptions options;
    options.endpoints = {admin_address_};
    client_ = std::make_unique<AdminClient>(options);
  }
  void TearDown() override {
    client_.reset();
    if (admin_server_) admin_server_->Shutdown(std::chrono::system_clock::now() + 1s);
    admin_server_.reset();
    ServerTest::TearDown();
  }

  // Streams a backup into `path`; *messages counts the stream's messages.
  Status Save(const std::string& path, SnapshotFileSummary* summary, SnapshotSaveInfo* info,
              int* messages) {
    std::unique_ptr<BackupFileWriter> out;
    Status s = BackupFileWriter::Create(path, &out);
    if (!s.ok()) return s;
    ExpectedBackup expected;
    *messages = 0;
    grpc::Status rpc = client_->SnapshotSave(
        admin_address_, 20000, [&](const SnapshotSaveResponse& msg) {
          if (++*messages == 1) {
            EXPECT_TRUE(msg.has_info());
            *info = msg.info();
            expected.size = info->size();
            expected.last_index = info->last_index();
            expected.last_term = info->last_term();
            expected.revision = info->revision();
          } else {
            EXPECT_FALSE(msg.has_info()) << "message " << *messages;
          }
          EXPECT_TRUE(expected.sha256.empty()) << "a message after the checksum";
          expected.sha256 = msg.sha256();
          return out->Append(msg.chunk()).ok();
        });
    if (!rpc.ok()) return Status::IOError("SnapshotSave: " + StatusText(rpc));
    return out->Finish(expected, summary);
  }

  std::unique_ptr<AdminServiceImpl> admin_;
  std::unique_ptr<grpc::Server> admin_server_;
  std::unique_ptr<AdminClient> client_;
  std::string admin_address_;
};

TEST_F(SnapshotSaveTest, StreamsAFreshVerifiedSnapshot) {
  StartSingleLeader();
  StartAdmin();
  // Over 1 MiB of state: more than one chunk.
  const std::string value(1000, 'v');
  constexpr int kKeys = 1100;
  for (int i = 0; i < kKeys; ++i) {
    grpc::Status s = Put("key" + std::to_string(i), value);
    ASSERT_TRUE(s.ok()) << StatusText(s);
  }
  SnapshotFileSummary summary;
  SnapshotSaveInfo info;
  int messages = 0;
  const std::string path = dir_.Join("backup.snap");
  Status s = Save(path, &summary, &info, &messages);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(messages, 2);
  EXPECT_EQ(info.member_id(), 1u);
  EXPECT_EQ(summary.keys, static_cast<uint64_t>(kKeys));
  EXPECT_EQ(summary.revision, kKeys);  // one revision per put
  EXPECT_EQ(info.revision(), kKeys);
  // The snapshot was taken for this call: it covers every applied write.
  EXPECT_EQ(info.last_index(), node_->GetStatus().applied_index);
  EXPECT_GT(info.size(), 1u << 20);
  // Byte for byte the member's own file.
  const std::string own = dir_.Join("snap/" + SnapshotStore::FileName(info.last_index(),
                                                                        info.last_term()));
  EXPECT_EQ(ReadFileBytes(path), ReadFileBytes(own));

  // Later writes: the next backup is newer, and replaces the file.
  ASSERT_TRUE(Put("later", "x").ok());
  SnapshotSaveInfo next;
  s = Save(path, &summary, &next, &messages);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GT(next.last_index(), info.last_index());
  EXPECT_EQ(summary.keys, static_cast<uint64_t>(kKeys + 1));
  EXPECT_EQ(summary.revision, kKeys + 1);
}

#ifdef RAFTKV_HAVE_ROCKSDB
// The on-disk engine's snapshots are checkpoints: a backup writes the one
// taken for it out as a snapshot file, which reads like any other.
TEST_F(SnapshotSaveTest, AnOnDiskMemberStreamsItsCheckpointAsASnapshotFile) {
  Setup setup;
  setup.storage_engine = NodeOptions::StorageEngine::kRocksDb;
  StartSingleLeader(setup);
  StartAdmin();
  const std::string value(1000, 'v');
  constexpr int kKeys = 1100;
  for (int i = 0; i < kKeys; ++i) {
    grpc::Status s = Put("key" + std::to_string(i), value);
    ASSERT_TRUE(s.ok()) << StatusText(s);
  }
  DeleteResponse deleted;
  ASSERT_TRUE(Delete("key7", &deleted).ok());
  SnapshotFileSummary summary;
  SnapshotSaveInfo info;
  int messages = 0;
  const std::string path = dir_.Join("backup.snap");
  Status s = Save(path, &summary, &info, &messages);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.keys, static_cast<uint64_t>(kKeys - 1));
  EXPECT_EQ(summary.revision, kKeys + 1);
  EXPECT_EQ(info.last_index(), node_->GetStatus().applied_index);
  EXPECT_TRUE(std::filesystem::is_directory(
      dir_.Join("snap/" + CheckpointStore::DirName(info.last_index(), info.last_term()))));
  EXPECT_FALSE(std::filesystem::exists(
      dir_.Join("snap/" + SnapshotStore::FileName(info.last_index(), info.last_term()))))
      << "the member itself keeps checkpoints only";
  EXPECT_EQ(ReadFileBytes(path),
            ReadFileBytes(dir_.Join("snap/export/" + SnapshotStore::FileName(info.last_index(), info.last_term()))));

  // Another backup of the same state streams the same export, not a new
  // one; the checkpoint's pinned copy is gone.
  const std::string exported =
      dir_.Join("snap/export/" + SnapshotStore::FileName(info.last_index(), info.last_term()));
  const auto written = std::filesystem::last_write_time(exported);
  SnapshotSaveInfo again;
  s = Save(path, &summary, &again, &messages);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(again.last_index(), info.last_index());
  EXPECT_EQ(std::filesystem::last_write_time(exported), written) << "the export was written again";
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("snap/ckpt-export.tmp")));

  // The next backup replaces the export.
  ASSERT_TRUE(Put("later", "x").ok());
  SnapshotSaveInfo next;
  s = Save(path, &summary, &next, &messages);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.keys, static_cast<uint64_t>(kKeys));
  size_t exports = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.Join("snap/export"))) exports += e.is_regular_file();
  EXPECT_EQ(exports, 1u);
}
#endif

}  // namespace


// Every Admin method passes through one frame that authorizes and counts it:
// an allowed call and a refused one are both counted, by their status.
TEST_F(SnapshotSaveTest, EveryCallIsAuthorizedAndCounted) {
  StartSingleLeader();
  ServerSecurityOptions security;
  security.admin_token = "admin-secret";
  security.files.peer_token = "peer-secret";  // tokens without TLS need one
  std::unique_ptr<CallAuthorizer> auth;
  ASSERT_TRUE(CallAuthorizer::Create(security, &auth).ok());
  ServerMetrics metrics;
  StartAdmin(auth.get(), &metrics);
  auto stub = Admin::NewStub(grpc::CreateChannel(admin_address_, grpc::InsecureChannelCredentials()));

  grpc::ClientContext list_context;
  ListMembersRequest list_request;
  ListMembersResponse members;
  ASSERT_TRUE(stub->ListMembers(&list_context, list_request, &members).ok());
  grpc::ClientContext snapshot_context;  // no admin token
  TakeSnapshotRequest snapshot_request;
  TakeSnapshotResponse snapshot;
  const grpc::Status refused = stub->TakeSnapshot(&snapshot_context, snapshot_request, &snapshot);
  ASSERT_FALSE(refused.ok());

  RpcMethodMetrics* list = metrics.Method(RpcName::Of<Admin>("ListMembers"), RpcMethodMetrics::Kind::kUnary);
  RpcMethodMetrics* take =
      metrics.Method(RpcName::Of<Admin>("TakeSnapshot"), RpcMethodMetrics::Kind::kUnary);
  EXPECT_EQ(list->finished(grpc::StatusCode::OK), 1u);
  EXPECT_EQ(take->finished(refused.error_code()), 1u);
  EXPECT_EQ(take->finished(grpc::StatusCode::OK), 0u);
  EXPECT_EQ(node_->GetStatus().snapshot_index, 0u) << "a refused call must not take a snapshot";
}

}  // namespace raftkv
