// Checkpoint snapshots: a snapshot that is a directory holding a whole
// store (KvBackend::Checkpoint: for RocksDB hard links of the SST files, so
// taking one costs a flush, not a copy of the data), plus MANIFEST.raftkv
// (storage.proto CheckpointManifestRecord): the log position the store
// holds, and every other file with its size and CRC-32C. The directory is
// snap/ckpt-<last_index>-<last_term> (20 digits each, so names sort like
// positions).
//
// Taking one (Create): the backend writes its checkpoint into
// ckpt-new.tmp; the caller's `describe` reads the position from it (the
// apply thread went on meanwhile, so only the checkpoint can say); the CRCs
// are the engine's (RocksDB computes each SST file's as it writes it) or
// computed, except for an SST file the newest checkpoint already lists with
// the same size (SST files never change under their name). Then it is
// published: its files are linked into ckpt-<index>-<term> (created
// durably) and MANIFEST.raftkv is written there last (a temporary name,
// fsync, rename, fsync of the directory). The manifest is the commit point:
// a checkpoint directory without one is unfinished, skipped by List() and
// removed by Open(), as are the *.tmp directories a crash left behind.
//
// Sending one to a peer (CheckpointSource): one stream, the manifest first,
// then the files in manifest order. Every file is opened up front, so a
// Prune() meanwhile does not disturb it.
//
// Receiving one (CheckpointReceiver, file by file; BeginReceiveStream for
// the stream), into recv-<index>-<term>.tmp: the
// manifest is checked before anything is written (the announced position,
// plain unique names, bounded counts and sizes); each chunk must be the next
// bytes of the next file; a file's size and CRC are checked when it is done;
// Finish() checks that every file arrived, runs the caller's verification
// of the store itself (RocksDB: every block's checksum and `m state`) and
// publishes it as Create() does.
//
// The node's side (when to take one, the transfer, the install by
// directory swap) is doc/on-disk-store.md, section 3.
//
// Thread safety: a CheckpointStore is used by one thread at a time; sources
// and receivers are independent of it and of each other.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/file_util.h"
#include "storage/kv_backend.h"
#include "storage/snapshot_format.h"
#include "storage/snapshot_store.h"

namespace raftkv {

struct CheckpointInfo {
  uint64_t last_index = 0;
  uint64_t last_term = 0;
  std::string path;        // the checkpoint's directory
  uint64_t bytes = 0;      // of its files, the manifest excluded
  size_t files = 0;        // the same files
  // Create(): the bytes read to compute CRCs (SST files the previous
  // checkpoint listed are not read again).
  uint64_t crc_bytes_read = 0;
};

// A checkpoint's manifest, decoded.
struct CheckpointContents {
  struct File {
    std::string name;
    uint64_t size = 0;
    uint32_t crc32c = 0;
  };
  SnapshotMeta meta;
  std::string engine;
  std::vector<File> files;  // in name order
  uint64_t total_bytes() const;
};

namespace checkpoint {
// The manifest's file name in a checkpoint directory.
inline constexpr char kManifestName[] = "MANIFEST.raftkv";
// Bounds a received manifest must keep.
inline constexpr size_t kMaxManifestBytes = 4 << 20;
inline constexpr size_t kMaxFiles = 100000;
inline constexpr size_t kMaxNameBytes = 255;

// The manifest's bytes as sent and stored (a magic, a length, a CRC-32C,
// then the record), and back. Decode checks everything a peer could get
// wrong: the framing, the record, and every file name and size.
std::string EncodeManifest(const CheckpointContents& contents);
Status DecodeManifest(std::string_view bytes, CheckpointContents* out);
// Reads <dir>/MANIFEST.raftkv.
Status ReadManifest(const std::string& dir, CheckpointContents* out);
// Checks that `dir` holds exactly the manifest's files (and the manifest),
// with their sizes and CRCs: the whole of every file is read.
Status VerifyFiles(const std::string& dir, const CheckpointContents& contents);
}  // namespace checkpoint

// A checkpoint as one stream for a peer (SnapshotFormat::kCheckpoint): the
// manifest's bytes, then every file's in manifest order. Every file is
// opened when the source is made.
class CheckpointSource final : public SnapshotSource {
 public:
  const CheckpointContents& contents() const { return contents_; }
  SnapshotFormat format() const override { return SnapshotFormat::kCheckpoint; }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return dir_; }
  Status ReadChunk(uint64_t offset, size_t max_bytes, std::string* out, bool* last) const override;

 private:
  friend class CheckpointStore;
  std::string dir_;
  CheckpointContents contents_;
  std::string manifest_;
  std::vector<file::File> files_;
  std::vector<uint64_t> starts_;  // each file's first byte in the stream
  uint64_t size_ = 0;
};

class CheckpointReceiver {
 public:
  ~CheckpointReceiver();
  CheckpointReceiver(const CheckpointReceiver&) = delete;
  CheckpointReceiver& operator=(const CheckpointReceiver&) = delete;

  const CheckpointContents& contents() const { return contents_; }
  // The bytes of files received so far.
  uint64_t bytes_received() const { return received_total_; }
  // The next bytes of the file being received: `file` must be the next
  // file of the manifest not yet done and `offset` the bytes of it received
  // so far; anything else is InvalidArgument and nothing is written. With
  // file_done the file must then be complete, with its CRC.
  Status Append(std::string_view file, uint64_t offset, std::string_view data, bool file_done);
  // Checks that every file arrived, syncs the directory, runs `verify` on
  // it and publishes it (see the top of this file). On failure the
  // directories are removed and nothing is installed. Usable once.
  Status Finish(const std::function<Status(const std::string& dir)>& verify, CheckpointInfo* installed);
  // Drops the transfer and its directory.
  void Abort();

 private:
  friend class CheckpointStore;
  CheckpointReceiver() = default;
  Status FinishFile();

  std::string dir_;         // the snapshot directory
  std::string tmp_dir_;     // recv-<index>-<term>.tmp
  std::string final_dir_;   // ckpt-<index>-<term>
  std::string manifest_;
  CheckpointContents contents_;
  size_t file_ = 0;           // the file being received
  file::File open_;           // it, once its first chunk came
  uint64_t offset_ = 0;       // its bytes received
  uint32_t crc_ = 0;          // their CRC
  uint64_t received_total_ = 0;
  bool closed_ = false;       // finished or aborted
};

class CheckpointStore {
 public:
  // Reads the position of the store checkpointed in `dir`.
  using Describe = std::function<Status(const std::string& dir, SnapshotMeta* meta)>;

  // Opens (creating it if needed) the snapshot directory and removes the
  // *.tmp directories a crash left behind.
  static Status Open(const std::string& dir, std::unique_ptr<CheckpointStore>* out);

  const std::string& dir() const { return dir_; }

  // Takes a checkpoint of `backend` (see the top of this file). `engine`
  // names the backend's engine in the manifest. If a checkpoint of the same
  // position exists already, the new one is dropped and *out describes the
  // existing one.
  Status Create(KvBackend* backend, const std::string& engine, const Describe& describe,
                CheckpointInfo* out);
  // The checkpoints, oldest first (by index, then term). Names that are not
  // checkpoint names, and directories without a manifest, are ignored; the
  // manifest is not read.
  Status List(std::vector<CheckpointInfo>* out) const;
  // Removes all but the newest `keep` (>= 1) checkpoints.
  Status Prune(size_t keep);

  Status OpenSource(uint64_t last_index, uint64_t last_term,
                    std::unique_ptr<CheckpointSource>* out) const;
  // Links the files of the checkpoint (last_index, last_term) into the
  // directory `to` (replaced if it exists): a copy that Prune leaves alone,
  // to read at leisure. Under dir() and named ckpt-*.tmp, Open removes it
  // after a crash; Unpin removes it.
  Status Pin(uint64_t last_index, uint64_t last_term, const std::string& to) const;
  static Status Unpin(const std::string& pinned);
  // Starts receiving the checkpoint (last_index, last_term) whose manifest
  // is `manifest`: InvalidArgument when it does not decode or names another
  // position.
  Status BeginReceive(uint64_t last_index, uint64_t last_term, std::string_view manifest,
                      std::unique_ptr<CheckpointReceiver>* out);
  // The same for the stream of a CheckpointSource, whose manifest comes
  // first; `verify` is CheckpointReceiver::Finish's.
  std::unique_ptr<SnapshotSink> BeginReceiveStream(uint64_t last_index, uint64_t last_term,
                                                   std::function<Status(const std::string& dir)> verify);

  static std::string DirName(uint64_t last_index, uint64_t last_term);
  // Parses a checkpoint directory name; false for any other name.
  static bool ParseDirName(const std::string& name, uint64_t* last_index, uint64_t* last_term);

 private:
  explicit CheckpointStore(std::string dir) : dir_(std::move(dir)) {}
  // The files' CRCs into *contents, but for the `known_crcs` (the engine
  // gave them), reusing `previous`'s for SST files of the same name and size.
  Status ComputeCrcs(const std::string& dir, const CheckpointContents& previous,
                     const std::set<std::string>& known_crcs, CheckpointContents* contents,
                     uint64_t* bytes_read) const;
  std::string dir_;
};

}  // namespace raftkv
