// A directory of snapshot files, snap-<last_index>-<last_term>.snap (both
// numbers zero-padded to 20 digits so names sort like positions), each a
// complete image of the state machine in the format of snapshot_format.h.
//
// Durability: a snapshot is written to <name>.tmp, fsync'ed, renamed to its
// name and the directory is fsync'ed, so after a crash a file with a
// snapshot name is complete (a .tmp left behind is removed by Open()). A
// snapshot received from a peer goes the same way through <name>.recv.tmp
// and is verified end to end before it is renamed into place.
//
// Loading: LoadNewestValid() restores the newest file that verifies and
// falls back to older ones, logging (ERROR) which file was skipped and why.
// Keeping two snapshots (Prune(2)) is what makes that fallback possible.
//
// The node's side (when snapshots are taken, InstallSnapshot, compaction)
// is node/snapshot_manager.h; the format and the procedure, doc/storage.md
// "Snapshot files".
//
// Thread safety: a SnapshotStore is used by one thread at a time. A
// SnapshotFileSource holds its file open, so on POSIX a Prune() meanwhile
// does not disturb a transfer in progress.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "storage/file_util.h"
#include "storage/snapshot_format.h"
#include "common/status.h"

namespace raftkv {

// What a snapshot image restores: the state machine (kv/kv_state_machine.h).
class SnapshotTarget {
 public:
  virtual ~SnapshotTarget() = default;
  // Replaces the whole state with the image `reader` reads; on an error the
  // state is unchanged.
  virtual Status Restore(SnapshotReader* reader) = 0;
};

struct SnapshotFileInfo {
  uint64_t last_index = 0;
  uint64_t last_term = 0;
  std::string path;
};

struct SnapshotLoadResult {
  bool found = false;    // false: no snapshot could be loaded (state untouched)
  SnapshotMeta meta;     // of the loaded snapshot
  std::string path;      // of the loaded snapshot
  // "<path>: <reason>" for every newer file that was skipped as unusable. A
  // caller that finds !found with rejected files must not assume the log
  // starts at index 1 (once the log is compacted it will not).
  std::vector<std::string> rejected;
};

// What InstallSnapshot carries (InstallSnapshotRequest.format): one
// snapshot file, or a checkpoint directory as one stream
// (storage/checkpoint_store.h).
enum class SnapshotFormat : uint32_t { kFile = 0, kCheckpoint = 1 };

// The bytes of one snapshot as sent to a peer (InstallSnapshot).
class SnapshotSource {
 public:
  virtual ~SnapshotSource() = default;
  virtual SnapshotFormat format() const = 0;
  virtual uint64_t size() const = 0;
  // The file or directory sent, for messages.
  virtual const std::string& path() const = 0;
  // Up to max_bytes from `offset` into *out; *last is true when the chunk
  // reaches the end. offset > size() is InvalidArgument.
  virtual Status ReadChunk(uint64_t offset, size_t max_bytes, std::string* out, bool* last) const = 0;
};

// Receives the bytes of a SnapshotSource from a peer, in order, and installs
// the snapshot once they are all there and verified. Destroying an
// unfinished sink removes what it wrote.
class SnapshotSink {
 public:
  virtual ~SnapshotSink() = default;
  virtual uint64_t bytes_received() const = 0;
  // Appends `data`, which must start at offset bytes_received(); anything
  // else (a gap, a repeat) is InvalidArgument and nothing is written.
  virtual Status Append(uint64_t offset, std::string_view data) = 0;
  // Verifies and installs the snapshot; *installed names it. On failure
  // nothing is installed. The sink cannot be used after Finish() either way.
  virtual Status Finish(SnapshotFileInfo* installed) = 0;
  // Drops the transfer and what it wrote.
  virtual void Abort() = 0;
};

// Reads the raw bytes of one snapshot file, for sending it to a peer
// (InstallSnapshot). The file stays open for the life of the object.
class SnapshotFileSource final : public SnapshotSource {
 public:
  SnapshotFormat format() const override { return SnapshotFormat::kFile; }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return file_.path(); }
  Status ReadChunk(uint64_t offset, size_t max_bytes, std::string* out, bool* last) const override;

 private:
  friend class SnapshotStore;
  file::File file_;
  uint64_t size_ = 0;
};

// Receives a snapshot file from a peer as raw chunks (the bytes of the
// sender's SnapshotFileSource), into a temporary file. Finish() verifies the
// whole file (every frame checksum, the trailer, the whole-file checksum,
// every record, and that its header names the expected index and term)
// before installing it under its snapshot name.
class SnapshotReceiver final : public SnapshotSink {
 public:
  ~SnapshotReceiver() override;
  SnapshotReceiver(const SnapshotReceiver&) = delete;
  SnapshotReceiver& operator=(const SnapshotReceiver&) = delete;

  uint64_t bytes_received() const override { return received_; }
  Status Append(uint64_t offset, std::string_view data) override;
  Status Finish(SnapshotFileInfo* installed) override;
  void Abort() override;

 private:
  friend class SnapshotStore;
  SnapshotReceiver() = default;

  std::string dir_;
  std::string tmp_path_;
  std::string final_path_;
  uint64_t last_index_ = 0;
  uint64_t last_term_ = 0;
  file::File file_;
  uint64_t received_ = 0;
  bool closed_ = false;  // finished or aborted
};

class SnapshotStore {
 public:
  // Opens (creating it if needed) the snapshot directory and removes
  // temporary files a crash left behind.
  static Status Open(const std::string& dir, std::unique_ptr<SnapshotStore>* out);

  const std::string& dir() const { return dir_; }

  // The snapshot files, oldest first (by last_index, then last_term). Names
  // that are not snapshot names are ignored.
  Status List(std::vector<SnapshotFileInfo>* files) const;

  // Writes `image` (captured by KvStateMachine::Snapshot(); meta().config
  // filled in by the caller) durably as snap-<last_index>-<last_term>.snap,
  // replacing a file of that name. No lock of the state machine is needed.
  Status Write(const SnapshotWriter& image, SnapshotFileInfo* written);
  // The same for a snapshot `encode` writes into a writer as the file is
  // written (the chunks are not kept: memory of one chunk); `meta` is the
  // header's and must match what `encode` captured.
  Status WriteStreamed(const SnapshotMeta& meta, const std::function<void(SnapshotWriter*)>& encode,
                       SnapshotFileInfo* written);

  // Restores `target` from the newest snapshot that is intact, trying older
  // ones when a newer one is not (each skip is logged at ERROR with the file
  // and the reason, and listed in result->rejected). No snapshot at all, or
  // none intact, is OK with result->found == false and `target` untouched.
  Status LoadNewestValid(SnapshotTarget* target, SnapshotLoadResult* result) const;

  // Deletes all but the newest `keep` (>= 1) snapshot files.
  Status Prune(size_t keep = 2);

  // Opens a snapshot file for sending.
  Status OpenSource(const SnapshotFileInfo& file, std::unique_ptr<SnapshotFileSource>* out) const;

  // Starts receiving the snapshot (last_index, last_term) from a peer.
  Status BeginReceive(uint64_t last_index, uint64_t last_term,
                      std::unique_ptr<SnapshotReceiver>* out);

  static std::string FileName(uint64_t last_index, uint64_t last_term);
  // Parses a snapshot file name; false for any other name.
  static bool ParseFileName(const std::string& name, uint64_t* last_index, uint64_t* last_term);

 private:
  explicit SnapshotStore(std::string dir) : dir_(std::move(dir)) {}
  // `write` writes the file at `tmp`; then it is renamed into place durably
  // (removed on any error).
  Status WriteDurably(const SnapshotMeta& meta, const std::function<Status(const std::string& tmp)>& write,
                      SnapshotFileInfo* written);
  std::string dir_;
};

}  // namespace raftkv
