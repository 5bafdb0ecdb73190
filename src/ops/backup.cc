#include "ops/backup.h"

#include <glog/logging.h>
#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <system_error>
#include <utility>
#include <vector>

#include "raft/core/membership.h"
#include "node/node_options.h"
#include "node/recovery.h"
#include "storage/bbolt_reader.h"
#include "storage/bootstrap_file.h"
#include "storage/hard_state_file.h"
#include "kv/kv_state_machine.h"
#include "storage/log_store.h"
#include "storage/snapshot_store.h"

namespace raftkv {

namespace fs = std::filesystem;

namespace {

constexpr char kPartSuffix[] = ".part";

// The entries of `dir` that make it "hold data". A file system's
// lost+found is not the member's.
Status DirEntries(const std::string& dir, std::vector<std::string>* names) {
  names->clear();
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return Status::IOError("cannot list " + dir + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (name != "lost+found") names->push_back(name);
  }
  if (ec) return Status::IOError("cannot list " + dir + ": " + ec.message());
  return Status::OK();
}

// An empty (or absent) directory to restore into; InvalidArgument otherwise.
Status CheckEmptyDataDir(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return Status::IOError("cannot inspect data directory " + dir + ": " + ec.message());
  }
  if (!fs::exists(st)) return Status::OK();
  if (!fs::is_directory(st)) {
    return Status::InvalidArgument("data directory " + dir + " exists and is not a directory");
  }
  std::vector<std::string> names;
  Status s = DirEntries(dir, &names);
  if (!s.ok()) return s;
  if (!names.empty()) {
    std::string some;
    for (size_t i = 0; i < names.size() && i < 3; ++i) some += (i ? ", " : "") + names[i];
    return Status::InvalidArgument(
        "data directory " + dir + " already holds data (" + std::to_string(names.size()) +
        " entries: " + some + (names.size() > 3 ? ", ..." : "") +
        "); restore into a new or empty directory (a member's data is never overwritten)");
  }
  return Status::OK();
}

std::string DescribeSummary(const SnapshotFileSummary& s) {
  return "index " + std::to_string(s.meta.last_index) + ", term " +
         std::to_string(s.meta.last_term) + ", revision " + std::to_string(s.revision) + ", " +
         std::to_string(s.keys) + " keys, " + std::to_string(s.leases) + " leases";
}

// Copies every record of the verified backup at `path` into `out`, whose
// header gets the backup's position and cluster time and `config`. The
// records are copied as they are (not rebuilt from a state machine), so the
// history and the sessions are exactly the backup's.
Status CopyRecords(const std::string& path, const std::string& config, SnapshotWriter* out) {
  std::unique_ptr<SnapshotReader> reader;
  Status s = SnapshotReader::Open(path, &reader);
  if (!s.ok()) return s;
  out->meta() = reader->meta();
  out->meta().config = config;
  for (;;) {
    SnapshotRecordType type;
    std::string_view message;
    bool done = false;
    s = reader->Next(&type, &message, &done);
    if (!s.ok()) return s;
    if (done) return Status::OK();
    out->AddRecord(type, message);
  }
}

// Writes the directory's contents (RestoreDataDir, steps 1-3).
Status WriteDataDir(const RestoreOptions& options, const SnapshotFileSummary& source,
                    const MembershipConfig& config, std::string* snapshot_path) {
  const std::string& dir = options.data_dir;
  // 1. The log: empty, its next entry the one after the snapshot (what a
  //    member has right after installing a snapshot from its leader).
  std::unique_ptr<SegmentedLog> log;
  Status s = SegmentedLog::Open(file::JoinPath(dir, "log"), SegmentedLogOptions(), &log, nullptr);
  if (s.ok()) s = log->Reset(source.meta.last_index + 1);
  log.reset();
  if (!s.ok()) return s;
  // 2. The hard state: the snapshot's term, no vote. The core's term may
  //    not be behind its log's last term (here the snapshot's).
  HardStateFile hard_state(file::JoinPath(dir, "hardstate"));
  s = hard_state.Save(HardState{source.meta.last_term, 0});
  if (!s.ok()) return s;
  // The new cluster's membership is the directory's bootstrap record too.
  BootstrapFile bootstrap(file::JoinPath(dir, "bootstrap"));
  s = bootstrap.Save(config, ClusterIdOf(config, options.initial_cluster_token));
  if (!s.ok()) return s;
  // 3. Last, the snapshot with the new configuration: until it is renamed
  //    into place, a server started on this directory refuses it (its log
  //    starts after entries it has nowhere).
  SnapshotWriter writer;
  s = CopyRecords(options.snapshot_path, config.SerializeAsString(), &writer);
  if (!s.ok()) return s;
  std::unique_ptr<SnapshotStore> store;
  s = SnapshotStore::Open(file::JoinPath(dir, "snap"), &store);
  SnapshotFileInfo written;
  if (s.ok()) s = store->Write(writer, &written);
  if (s.ok()) s = file::SyncDir(dir);
  if (s.ok()) *snapshot_path = written.path;
  return s;
}

// Opens `options.data_dir` as raftkv-server does and checks that it starts
// from the backup's state with the new configuration and nothing else.
Status CheckRestored(const RestoreOptions& options, const SnapshotFileSummary& source,
                     const MembershipConfig& config) {
  NodeOptions node;
  node.id = options.id;
  node.cluster = options.cluster;
  node.data_dir = options.data_dir;
  node.initial_cluster_token = options.initial_cluster_token;
  RecoveredState r;
  Status s = RecoverNode(node, &r);
  if (!s.ok()) return s;
  std::string problem;
  if (r.base.index != source.meta.last_index || r.base.term != source.meta.last_term) {
    problem = "it starts from snapshot index " + std::to_string(r.base.index) + " term " +
              std::to_string(r.base.term);
  } else if (r.base.config.SerializeAsString() != config.SerializeAsString()) {
    problem = "its configuration is " + raft::DescribeMembership(r.base.config);
  } else if (r.cluster_id != ClusterIdOf(config, options.initial_cluster_token)) {
    problem = "its cluster id is " + ClusterIdHex(r.cluster_id);
  } else if (!r.entries.empty()) {
    problem = "its log holds " + std::to_string(r.entries.size()) + " entries";
  } else if (r.hard_state.term != source.meta.last_term || r.hard_state.vote != 0) {
    problem = "its hard state is term " + std::to_string(r.hard_state.term) + " vote " +
              std::to_string(r.hard_state.vote);
  } else if (r.state_machine->Revision() != source.revision ||
             r.state_machine->Size() != source.keys ||
             r.state_machine->Leases().size() != source.leases) {
    problem = "its state has revision " + std::to_string(r.state_machine->Revision()) + ", " +
              std::to_string(r.state_machine->Size()) + " keys, " +
              std::to_string(r.state_machine->Leases().size()) + " leases";
  }
  if (!problem.empty()) {
    return Status::Corruption("restored data directory " + options.data_dir +
                              " does not match the backup (" + DescribeSummary(source) +
                              "): " + problem);
  }
  return Status::OK();
}

}  // namespace

// ---- verification ----

Status VerifySnapshotFile(const std::string& path, SnapshotFileSummary* out) {
  *out = SnapshotFileSummary();
  std::unique_ptr<SnapshotReader> reader;
  Status s = SnapshotReader::Open(path, &reader);
  if (!s.ok()) return s;
  // Restore() checks every checksum (through the reader) and the structure a
  // member relies on; the state is built aside and dropped here.
  KvStateMachine sm;
  s = sm.Restore(reader.get());
  if (!s.ok()) return s;
  const SnapshotMeta& meta = reader->meta();
  if (sm.AppliedIndex() != meta.last_index) {
    return Status::Corruption(path + ": restores the state at index " +
                              std::to_string(sm.AppliedIndex()) + " but its header says " +
                              std::to_string(meta.last_index));
  }
  if (!meta.config.empty()) {
    MembershipConfig config;
    if (!config.ParseFromString(meta.config)) {
      return Status::Corruption(path + ": the configuration in the header does not parse");
    }
  }
  out->meta = meta;
  out->bytes = reader->file_size();
  out->revision = sm.Revision();
  out->keys = sm.Size();
  out->leases = sm.Leases().size();
  out->sessions = sm.SessionCount();
  return Status::OK();
}

Status ReadSnapshotRevision(const std::string& path, int64_t* revision) {
  *revision = 0;
  std::unique_ptr<SnapshotReader> reader;
  Status s = SnapshotReader::Open(path, &reader);
  if (!s.ok()) return s;
  for (;;) {
    SnapshotRecordType type;
    std::string_view message;
    bool done = false;
    s = reader->Next(&type, &message, &done);
    if (!s.ok() || done) return s;
    if (type == SnapshotRecordType::kStore) {
      SnapshotStoreState store;
      if (!store.ParseFromArray(message.data(), static_cast<int>(message.size()))) {
        return Status::Corruption(path + ": the store record does not parse");
      }
      *revision = store.revision();
      return Status::OK();
    }
    // Sessions come before the store record; keys and history after it.
    if (type != SnapshotRecordType::kSession && type != SnapshotRecordType::kSessionResult) {
      return Status::OK();
    }
  }
}

// ---- Sha256 ----

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  CHECK(ctx_ != nullptr) << "EVP_MD_CTX_new failed";
  CHECK_EQ(EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr), 1);
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::Update(std::string_view bytes) {
  CHECK_EQ(EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), bytes.data(), bytes.size()), 1);
}

EtcdSnapshotFrame::EtcdSnapshotFrame(uint64_t file_bytes) : file_bytes_(file_bytes) {
  const uint64_t at_least = file_bytes + 8;
  pad_ = (at_least + kAlign - 1) / kAlign * kAlign - file_bytes;
}

void EtcdSnapshotFrame::Update(std::string_view bytes) { sha_.Update(bytes); }

std::string EtcdSnapshotFrame::Trailer() {
  std::string out(pad_, '\0');
  for (int i = 0; i < 8; ++i) out[pad_ - 8 + i] = static_cast<char>((file_bytes_ >> (8 * i)) & 0xFF);
  sha_.Update(out);
  const std::string hex = sha_.HexDigest();
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  CHECK_EQ(EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &length), 1);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xF]);
  }
  return out;
}

// ---- BackupFileWriter ----

Status BackupFileWriter::Create(const std::string& path, std::unique_ptr<BackupFileWriter>* out) {
  if (path.empty()) return Status::InvalidArgument("no file name given for the snapshot");
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return Status::InvalidArgument(path + " is a directory; give the snapshot's file name");
  }
  std::unique_ptr<BackupFileWriter> w(new BackupFileWriter());
  w->path_ = path;
  w->part_path_ = path + kPartSuffix;
  Status s = file::File::Open(w->part_path_, file::OpenMode::kCreateTruncate, &w->file_);
  if (!s.ok()) {
    w->closed_ = true;  // nothing to remove
    return s;
  }
  *out = std::move(w);
  return Status::OK();
}

BackupFileWriter::~BackupFileWriter() { Abandon(); }

void BackupFileWriter::Abandon() {
  if (closed_) return;
  closed_ = true;
  file_.Close();
  file::Remove(part_path_);
}

Status BackupFileWriter::Append(std::string_view bytes) {
  if (closed_) return Status::InvalidArgument(part_path_ + ": the transfer is already finished");
  Status s = file_.WriteAt(bytes.data(), bytes.size(), written_);
  if (!s.ok()) {
    Abandon();
    return s;
  }
  sha_.Update(bytes);
  written_ += bytes.size();
  return Status::OK();
}

Status BackupFileWriter::Finish(const ExpectedBackup& expected, SnapshotFileSummary* summary) {
  if (closed_) return Status::InvalidArgument(part_path_ + ": the transfer is already finished");
  Status s;
  const std::string digest = sha_.HexDigest();
  if (written_ != expected.size) {
    s = Status::Corruption("received " + std::to_string(written_) + " bytes, the member announced " +
                           std::to_string(expected.size));
  } else if (expected.sha256.empty()) {
    s = Status::Corruption("the member sent no checksum: the transfer is incomplete");
  } else if (digest != expected.sha256) {
    s = Status::Corruption("SHA-256 of the received bytes is " + digest + ", the member sent " +
                           expected.sha256);
  }
  if (s.ok()) s = file_.Sync();
  if (s.ok()) s = file_.Close();
  if (s.ok()) s = VerifySnapshotFile(part_path_, summary);
  if (s.ok() && (summary->meta.last_index != expected.last_index ||
                 summary->meta.last_term != expected.last_term ||
                 summary->revision != expected.revision)) {
    s = Status::Corruption(part_path_ + ": holds " + DescribeSummary(*summary) +
                           ", the member announced index " + std::to_string(expected.last_index) +
                           ", term " + std::to_string(expected.last_term) + ", revision " +
                           std::to_string(expected.revision));
  }
  if (s.ok()) s = file::Rename(part_path_, path_);
  if (s.ok()) s = file::SyncDir(file::DirName(path_));
  if (!s.ok()) {
    Abandon();
    return s;
  }
  closed_ = true;
  return Status::OK();
}

// ---- RestoreDataDir ----

namespace {

// When `path` holds a snapshot in etcd's frame (the size and the SHA-256
// agree; a plain snapshot file whose size happens to fit fails the
// checksum), copies the file inside to `*unwrapped` (a new file) and sets
// *framed.
Status UnwrapEtcdFrame(const std::string& path, const std::string& unwrapped, bool* framed) {
  *framed = false;
  constexpr uint64_t kDigest = EtcdSnapshotFrame::kDigestBytes;
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return Status::IOError("cannot read " + path + ": " + ec.message());
  if (size < kDigest + 8 || size % EtcdSnapshotFrame::kAlign != kDigest) return Status::OK();
  std::ifstream in(path, std::ios::binary);
  char tail[8];
  in.seekg(static_cast<std::streamoff>(size - kDigest - 8));
  if (!in.read(tail, sizeof(tail))) return Status::IOError("cannot read " + path);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(static_cast<unsigned char>(tail[i])) << (8 * i);
  if (length > size - kDigest - 8) return Status::OK();
  EtcdSnapshotFrame frame(length);
  if (frame.trailer_bytes() != size - length) return Status::OK();
  // The file inside, copied and hashed a chunk at a time.
  std::ofstream out(unwrapped, std::ios::binary | std::ios::trunc);
  in.seekg(0);
  std::string chunk;
  for (uint64_t done = 0; done < length;) {
    chunk.resize(static_cast<size_t>(std::min<uint64_t>(1 << 20, length - done)));
    if (!in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()))) {
      return Status::IOError("cannot read " + path);
    }
    frame.Update(chunk);
    out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    done += chunk.size();
  }
  out.close();
  std::string trailer(static_cast<size_t>(size - length), '\0');
  if (!in.read(trailer.data(), static_cast<std::streamsize>(trailer.size()))) {
    return Status::IOError("cannot read " + path);
  }
  if (!out || frame.Trailer() != trailer) {
    fs::remove(unwrapped, ec);
    return out ? Status::OK() : Status::IOError("cannot write " + unwrapped);
  }
  *framed = true;
  return Status::OK();
}

// When `path` is etcd's database (a bbolt file): *db_size gets the
// database's size, without the SHA-256 `etcdctl snapshot save` appends
// (when the size is 32 more than a multiple of 512, as etcd checks it),
// which must match. *is_etcd stays false for any other file.
Status DetectEtcdDatabase(const std::string& path, bool* is_etcd, uint64_t* db_size) {
  *is_etcd = false;
  file::File f;
  std::string head;
  uint64_t size = 0;
  Status s = file::File::Open(path, file::OpenMode::kReadOnly, &f);
  if (s.ok()) s = f.Size(&size);
  if (s.ok()) s = f.ReadAt(0, BboltReader::kDetectBytes, &head);
  if (!s.ok() || !BboltReader::LooksLikeBbolt(head)) return s;
  *is_etcd = true;
  *db_size = size;
  constexpr uint64_t kDigest = EtcdSnapshotFrame::kDigestBytes;
  if (size % EtcdSnapshotFrame::kAlign != kDigest) {
    LOG(INFO) << path << " is a bbolt database without a SHA-256 appended (a member's "
              << "member/snap/db): nothing to check it against but its structure";
    return Status::OK();
  }
  *db_size = size - kDigest;
  Sha256 sha;
  std::string chunk;
  for (uint64_t done = 0; done < *db_size; done += chunk.size()) {
    s = f.ReadAt(done, static_cast<size_t>(std::min<uint64_t>(1 << 20, *db_size - done)), &chunk);
    if (s.ok() && chunk.empty()) s = Status::IOError(path + ": the file shrank while read");
    if (!s.ok()) return s;
    sha.Update(chunk);
  }
  std::string digest;
  s = f.ReadAt(*db_size, kDigest, &digest);
  if (!s.ok()) return s;
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : digest) hex += std::string{kHex[c >> 4], kHex[c & 0xF]};
  const std::string computed = sha.HexDigest();
  if (hex != computed) {
    return Status::Corruption(path + ": etcd snapshot whose SHA-256 (" + computed +
                              ") does not match the one saved after the database (" + hex +
                              "): the file is damaged or truncated");
  }
  LOG(INFO) << path << " is an etcd snapshot: its SHA-256 holds";
  return Status::OK();
}

// Imports the etcd database in the first `db_size` bytes of `path` into a
// new snapshot file at `out_path`.
Status ConvertEtcdDatabase(const std::string& path, uint64_t db_size, const std::string& out_path,
                           EtcdImportSummary* summary) {
  std::unique_ptr<BboltReader> db;
  Status s = BboltReader::OpenFile(path, db_size, &db);
  SnapshotWriter writer;
  if (s.ok()) s = ImportEtcdDatabase(db.get(), &writer, summary);
  if (!s.ok()) return s;
  db.reset();
  file::File out;
  s = file::File::Open(out_path, file::OpenMode::kCreateTruncate, &out);
  uint64_t offset = 0;
  if (s.ok()) {
    s = ForEachSnapshotFilePiece(writer, [&](std::string_view piece) {
      Status w = out.WriteAt(piece.data(), piece.size(), offset);
      offset += piece.size();
      return w;
    });
  }
  if (s.ok()) s = out.Close();
  return s;
}

Status CheckRestoreOptions(const RestoreOptions& options, MembershipConfig* config);
Status RestoreFromFile(const RestoreOptions& options, RestoreResult* result);

}  // namespace

Status RestoreDataDir(const RestoreOptions& options, RestoreResult* result) {
  *result = RestoreResult();
  MembershipConfig config;
  if (Status bad = CheckRestoreOptions(options, &config); !bad.ok()) return bad;
  const std::string scratch =
      (fs::temp_directory_path() / ("raftkv-restore-" + std::to_string(std::random_device()()) + ".snap")).string();
  bool from_etcd = false;
  uint64_t db_size = 0;
  Status s = DetectEtcdDatabase(options.snapshot_path, &from_etcd, &db_size);
  bool framed = false;
  EtcdImportSummary etcd;
  if (s.ok() && from_etcd) {
    s = ConvertEtcdDatabase(options.snapshot_path, db_size, scratch, &etcd);
  } else if (s.ok()) {
    s = UnwrapEtcdFrame(options.snapshot_path, scratch, &framed);
  }
  if (s.ok() && !from_etcd && !framed) return RestoreFromFile(options, result);
  if (s.ok()) {
    if (framed) LOG(INFO) << options.snapshot_path << " is a snapshot saved by etcdctl: its checksum holds";
    RestoreOptions inner = options;
    inner.snapshot_path = scratch;
    s = RestoreFromFile(inner, result);
    result->from_etcd = from_etcd;
    result->etcd = etcd;
    if (s.IsCorruption()) {  // the file named is the scratch copy
      s = Status::Corruption(options.snapshot_path +
                             (from_etcd ? " (as imported)" : " (inside etcdctl's frame)") + ": " +
                             s.message());
    }
  }
  std::error_code ec;
  fs::remove(scratch, ec);
  return s;
}

namespace {

Status CheckRestoreOptions(const RestoreOptions& options, MembershipConfig* config) {
  if (options.id == 0) return Status::InvalidArgument("member id must be positive");
  if (options.cluster.members.empty()) {
    return Status::InvalidArgument("the new cluster has no members");
  }
  if (options.cluster.Find(options.id) == nullptr) {
    std::string ids;
    for (uint64_t id : options.cluster.Ids()) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
    return Status::InvalidArgument("member id " + std::to_string(options.id) +
                                   " is not listed in the new cluster's members (" + ids + ")");
  }
  if (options.data_dir.empty()) return Status::InvalidArgument("no data directory given");
  *config = BootstrapConfig(options.cluster);
  if (Status bad = raft::CheckMembership(*config); !bad.ok()) {
    return Status::InvalidArgument("the new cluster's configuration is invalid: " + bad.message());
  }
  return CheckEmptyDataDir(options.data_dir);
}

Status RestoreFromFile(const RestoreOptions& options, RestoreResult* result) {
  *result = RestoreResult();
  MembershipConfig config;
  Status s = CheckRestoreOptions(options, &config);
  if (!s.ok()) return s;
  s = VerifySnapshotFile(options.snapshot_path, &result->source);
  if (!s.ok()) {
    if (s.IsCorruption()) {
      return Status::Corruption("snapshot file " + options.snapshot_path +
                                " fails verification: " + s.message());
    }
    return s;
  }
  result->config = config;
  result->cluster_id = ClusterIdOf(config, options.initial_cluster_token);

  std::error_code ec;
  const bool existed = fs::exists(options.data_dir, ec);
  s = file::CreateDirsDurably(options.data_dir);
  if (!s.ok()) return s;
  // The directory was empty: on a failure, everything in it is ours to remove.
  auto undo = [&]() {
    std::vector<std::string> names;
    if (DirEntries(options.data_dir, &names).ok()) {
      for (const std::string& name : names) fs::remove_all(file::JoinPath(options.data_dir, name), ec);
    }
    if (!existed) fs::remove(options.data_dir, ec);
  };
  {
    // Held while writing, as a server holds it: a server started on the
    // directory meanwhile refuses to run.
    file::FileLock lock;
    bool held_elsewhere = false;
    s = file::FileLock::Acquire(file::JoinPath(options.data_dir, "LOCK"), &lock, &held_elsewhere);
    if (s.ok() && held_elsewhere) {
      return Status::InvalidArgument("data directory " + options.data_dir +
                                     " is in use by another process (its LOCK is held)");
    }
    if (s.ok()) s = WriteDataDir(options, result->source, config, &result->snapshot_path);
  }
  // The check opens the directory as the server will (taking the lock).
  if (s.ok()) s = CheckRestored(options, result->source, config);
  if (!s.ok()) {
    LOG(ERROR) << "restore into " << options.data_dir << " failed, removing what it wrote: "
               << s.ToString();
    undo();
    return s;
  }
  LOG(INFO) << "restored " << options.snapshot_path << " (" << DescribeSummary(result->source)
            << ") into " << options.data_dir << " as member " << options.id
            << " of the configuration " << raft::DescribeMembership(config);
  return Status::OK();
}

}  // namespace

}  // namespace raftkv
