// Backups and disaster recovery (doc/operations.md).
//
// A backup is one snapshot file, byte for byte as a member wrote it
// (storage/snapshot_format.h): one consistent image of the state machine at
// one applied log index, with the keys, their revisions, the leases, the
// client sessions and the recent history.
//
//  - Saving (raftkvctl snapshot save): the member streams the file with a
//    SHA-256 of it (Admin.SnapshotSave); BackupFileWriter writes the stream to
//    FILE.part and renames it to FILE only once the size and the SHA-256
//    match and the file verifies end to end (VerifySnapshotFile).
//  - Restoring (raftkvctl snapshot restore): RestoreDataDir builds a new
//    member's data directory from the file for a NEW cluster (the members of
//    a cluster file): a snapshot file whose header carries the new membership
//    at the backup's index and term, a hard state at that term with no vote,
//    and an empty log that continues the snapshot. Every member of the new
//    cluster is restored from the same file, so all of them start with the
//    same log position and configuration and elect a leader among
//    themselves; nothing of the old cluster's membership survives. It then
//    opens the directory exactly as raftkv-server does (RecoverNode) and
//    checks what it finds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "kv/etcd_import.h"
#include "proto/internal.h"
#include "node/cluster_config.h"
#include "storage/file_util.h"
#include "storage/snapshot_format.h"

namespace raftkv {

// What a snapshot file holds.
struct SnapshotFileSummary {
  SnapshotMeta meta;      // the header: last index and term, cluster time, configuration
  uint64_t bytes = 0;     // the file's size
  int64_t revision = 0;   // the store's revision
  uint64_t keys = 0;
  uint64_t leases = 0;
  uint64_t sessions = 0;
};

// Checks the snapshot file at `path` as a member checks one before loading
// it: every frame checksum, the trailer's counts and whole-file checksum, and
// the structure (every record parses, keys in order, revisions and leases
// consistent), by restoring it into a scratch state machine. Corruption
// naming the file and what is wrong; IOError when it cannot be read. Memory:
// about the size of the state.
Status VerifySnapshotFile(const std::string& path, SnapshotFileSummary* out);

// The store's revision recorded in a snapshot file, read from its first
// records only (the store record comes before the keys): cheap, and not a
// verification of the file. 0 for a file without a store record.
Status ReadSnapshotRevision(const std::string& path, int64_t* revision);

// SHA-256 (OpenSSL), for the checksum of a streamed snapshot.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(std::string_view bytes);
  // 64 lowercase hex digits; the object cannot be updated afterwards.
  std::string HexDigest();

 private:
  void* ctx_;  // EVP_MD_CTX
};

// The frame etcd's Maintenance.Snapshot stream has, which `etcdctl
// snapshot save` checks (a bbolt database is whole 512-byte pages, and
// etcd's server appends a SHA-256 to it): raftkv sends its snapshot file,
// then zeros and the file's length (8 bytes, little endian) up to a
// multiple of 512 bytes, then the SHA-256 of everything before it.
class EtcdSnapshotFrame {
 public:
  static constexpr uint64_t kAlign = 512;
  static constexpr uint64_t kDigestBytes = 32;
  explicit EtcdSnapshotFrame(uint64_t file_bytes);
  // The bytes after the file.
  uint64_t trailer_bytes() const { return pad_ + kDigestBytes; }
  // The file's next bytes.
  void Update(std::string_view bytes);
  // After the whole file: the trailer. The frame cannot be used afterwards.
  std::string Trailer();

 private:
  uint64_t file_bytes_;
  uint64_t pad_;  // zeros and the length
  Sha256 sha_;
};

// What the member announced for a streamed snapshot (SnapshotSaveInfo and
// the final checksum).
struct ExpectedBackup {
  uint64_t size = 0;
  std::string sha256;
  uint64_t last_index = 0;
  uint64_t last_term = 0;
  int64_t revision = 0;
};

// Writes a streamed snapshot to `path`, through `path`.part so that `path`
// only ever names a complete, verified file (a previous backup there is
// replaced only by a good one). Destroying an unfinished writer removes the
// .part file.
class BackupFileWriter {
 public:
  static Status Create(const std::string& path, std::unique_ptr<BackupFileWriter>* out);
  ~BackupFileWriter();
  BackupFileWriter(const BackupFileWriter&) = delete;
  BackupFileWriter& operator=(const BackupFileWriter&) = delete;

  const std::string& part_path() const { return part_path_; }
  uint64_t bytes_written() const { return written_; }
  // Appends the next bytes of the file.
  Status Append(std::string_view bytes);
  // Checks the size and the SHA-256 of what was appended against `expected`,
  // fsyncs, verifies the file (VerifySnapshotFile) and that its header and
  // store record match `expected`, then renames it to `path` and fsyncs the
  // directory. On any failure the .part file is removed and `path` is left
  // as it was. The writer cannot be used afterwards.
  Status Finish(const ExpectedBackup& expected, SnapshotFileSummary* summary);

 private:
  BackupFileWriter() = default;
  void Abandon();

  std::string path_;
  std::string part_path_;
  file::File file_;
  Sha256 sha_;
  uint64_t written_ = 0;
  bool closed_ = false;
};

struct RestoreOptions {
  std::string snapshot_path;  // the backup
  std::string data_dir;       // the new member's data directory: absent or empty
  uint64_t id = 0;            // the new member's id: must be listed in `cluster`
  ClusterConfig cluster;      // the new cluster (every member a voter)
  // Mixed into the new cluster's id (NodeOptions::initial_cluster_token):
  // every member of the new cluster is restored with the same token.
  std::string initial_cluster_token = "raftkv-cluster";
};

struct RestoreResult {
  SnapshotFileSummary source;  // the backup's contents (for etcd's file: as imported)
  bool from_etcd = false;      // the backup was etcd's database
  EtcdImportSummary etcd;      // then what was imported from it
  std::string snapshot_path;   // the snapshot file written into data_dir
  MembershipConfig config;     // the new cluster's configuration
  uint64_t cluster_id = 0;     // and its id
};

// Builds the data directory of member `options.id` of a new cluster from a
// backup (see the top of this file): a snapshot file, or one saved by
// `etcdctl snapshot save` from a raftkv member (EtcdSnapshotFrame; its
// checksum is verified and the frame removed), or etcd's own database (a
// bbolt file, told by its content: `etcdctl snapshot save` from an etcd
// member, whose appended SHA-256 is verified, or a member's member/snap/db),
// whose keys, revisions and leases are imported (kv/etcd_import.h) into a
// snapshot file at etcd's consistent index. Refuses, changing nothing, with
// InvalidArgument when the id is 0 or not in the cluster or the data
// directory already holds anything, and with Corruption when the backup
// fails verification. After a failure part way (IOError), what it wrote is
// removed.
Status RestoreDataDir(const RestoreOptions& options, RestoreResult* result);

}  // namespace raftkv
