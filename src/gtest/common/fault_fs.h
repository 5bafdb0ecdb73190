// FaultFs: a power-loss simulator under the file layer (storage/file_util.h),
// for tests. Installed as the process's file::Interposer, it watches every
// call that changes a file under its root and keeps, next to what the
// operating system's page cache holds, a model of what a disk would still
// hold after a power cut:
//  - a file's bytes and length as of its last sync (File::Sync/DataSync);
//    writes and truncations since are undone (the bytes they replaced are
//    kept, newest first, and replayed backwards);
//  - a directory's entries as of its last SyncDir: a file created, renamed
//    in or out, or removed since, and a directory created since, is undone
//    (a removed or replaced file comes back with its durable bytes; a
//    created one disappears, a subdirectory with all it holds).
// A hard link (RocksDB's checkpoints link SSTs) is modelled as a new file
// with the durable and current contents of its source: exact while neither
// name is written again, which holds for what RocksDB links (finished SSTs).
// Renames of directories are not modelled (RocksDB's checkpoint renames its
// temporary directory): they pass through, and a test that relies on one
// surviving a power cut cannot use FaultFs as it is.
// LevelDB's fault-injection environment (db/fault_injection_test.cc) and
// Jepsen's LazyFS do the same for their systems.
//
// A power cut of one machine (a directory under the root, e.g. a member's
// data directory) is Capture() -- the durable image at that instant,
// atomic with respect to every interposed call, which FaultFs serializes --
// then Restore() once the processes using the directory are gone: the
// directory then holds exactly that image, as after a reboot. To cut power
// in the middle of one storage call, CaptureBeforeOp(k) takes the image
// just before the k-th interposed call from now.
//
// Syncs are modelled, not performed (the real fsync is skipped unless
// set_real_syncs(true)): the tests are about what the code asks to be
// durable, and run at memory speed.
//
// DropSyncs() (or the environment variable RAFTKV_FAULTFS_DROP_SYNC, read at
// construction) "removes" one kind of sync the server makes: such syncs
// still return OK but make nothing durable, which is what deleting the call
// from the code would do. Kinds: log-data (the log segments' file syncs),
// log-dir (the log directory), hardstate-file, data-dir (the data
// directory: the hard state's rename, the creation of log/ and snap/),
// snapshot-file, snapshot-dir, parent-dir (the directory holding a data
// directory that was created), and RocksDB's (storage/rocksdb_fs.h):
// rocksdb-sst (its table files), rocksdb-manifest (its MANIFEST and the
// temporary file it renames to CURRENT), rocksdb-dir (the database
// directory). The PowerLoss tests fail for each
// (scripts/powerloss_mutants.sh).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "storage/file_util.h"

namespace raftkv::testing_util {

class FaultFs : public file::Interposer {
 public:
  // What survives a power cut of a directory: every durable file (path ->
  // bytes) and directory under it.
  struct Image {
    std::string root;
    // False when `root` itself would not survive: its entry (or an
    // ancestor's, below the FaultFs root) was never made durable.
    bool exists = true;
    std::map<std::string, std::string> files;
    std::set<std::string> dirs;
  };
  struct Counts {
    uint64_t writes = 0;
    uint64_t truncates = 0;
    uint64_t file_syncs = 0;
    uint64_t dir_syncs = 0;
    uint64_t creates = 0;
    uint64_t renames = 0;
    uint64_t removes = 0;
    uint64_t mkdirs = 0;
    uint64_t links = 0;
    uint64_t ops() const {
      return writes + truncates + file_syncs + dir_syncs + creates + renames + removes + mkdirs +
             links;
    }
  };

  // Watches the files under `root` (created if missing); calls on other
  // paths pass straight through. Installs itself; the destructor uninstalls.
  explicit FaultFs(const std::string& root);
  ~FaultFs() override;
  FaultFs(const FaultFs&) = delete;
  FaultFs& operator=(const FaultFs&) = delete;

  // The durable image of `dir` (the root or a directory under it) now.
  Image Capture(const std::string& dir);
  // Replaces the contents of image.root on disk by the image and forgets
  // what was tracked there. Nothing may use the directory meanwhile.
  void Restore(const Image& image);
  // Capture + Restore, for a directory nothing is using.
  void PowerCut(const std::string& dir) { Restore(Capture(dir)); }

  // Takes Capture(dir) just before the k-th interposed call (k = 0: the
  // next one) that changes anything under `dir`; TakeCaptured() returns it
  // (nullopt if fewer calls were made: then the cut falls after them all).
  void CaptureBeforeOp(const std::string& dir, uint64_t k);
  std::optional<Image> TakeCaptured();

  // Interposed calls under the root so far (the sequence CaptureBeforeOp
  // counts in): an action that records op_count() when it is acknowledged
  // was acknowledged before a cut at call k iff the count was <= k.
  uint64_t op_count() const;
  // Interposed calls under the root by kind since construction (or ResetCounts).
  Counts counts() const;
  void ResetCounts();

  // Syncs of this kind (names above; "" for none) make nothing durable.
  void DropSyncs(const std::string& kind);
  const std::string& dropped_syncs() const { return drop_kind_; }
  // Every kind DropSyncs accepts.
  static std::vector<std::string> SyncKinds();
  void set_real_syncs(bool real) { real_syncs_ = real; }

  // ---- file::Interposer ----
  Status Open(const std::string& path, file::OpenMode mode, const Op& op,
              uint64_t* file_id) override;
  Status WriteAt(uint64_t file_id, const file::File& file, uint64_t offset, size_t n,
                 const Op& op) override;
  Status Truncate(uint64_t file_id, const file::File& file, uint64_t size, const Op& op) override;
  Status Sync(uint64_t file_id, const file::File& file, const Op& op) override;
  void Closed(uint64_t file_id) override;
  Status SyncDir(const std::string& dir, const Op& op) override;
  Status CreateDirs(const std::string& dir, const Op& op) override;
  Status Rename(const std::string& from, const std::string& to, const Op& op) override;
  Status Remove(const std::string& path, const Op& op) override;
  Status Link(const std::string& from, const std::string& to, const Op& op) override;

 private:
  // A file's contents as the model knows them. Untracked files (never
  // changed since the root, or their directory, was last restored) are
  // durable as they are on disk.
  struct Inode {
    std::string path;  // current path; "" once removed or replaced
    // Bytes on disk when it lost its last name (removed or replaced by a
    // rename): its durable image may still be needed.
    std::optional<std::string> detached;
    // When dirty, the durable contents are the current bytes with `undo`
    // replayed from the back, cut to durable_size.
    bool dirty = false;
    uint64_t durable_size = 0;
    std::vector<std::pair<uint64_t, std::string>> undo;
  };
  struct DirEntry {
    bool is_dir = false;
    uint64_t inode = 0;  // files only
    bool operator==(const DirEntry& o) const { return is_dir == o.is_dir && inode == o.inode; }
  };
  struct Dir {
    std::map<std::string, DirEntry> current;
    std::map<std::string, DirEntry> durable;
  };

  static std::string Normal(const std::string& path);
  bool Under(const std::string& path, const std::string& dir) const;
  bool Watched(const std::string& path) const { return Under(path, root_); }
  // The model of directory `dir`, read from disk the first time.
  Dir& TrackDir(const std::string& dir);
  uint64_t InodeFor(const std::string& path);  // path: a file (tracked or not)
  // Before a change of [offset, end) of a file: keeps the bytes it replaces.
  void SaveRange(Inode& inode, const file::File& file, uint64_t offset, uint64_t end);
  void MarkDirty(Inode& inode, uint64_t current_size);
  // A write or truncation of a file: counts it in *counter and keeps the
  // durable bytes of range(current size) that it replaces, then runs op.
  Status Change(uint64_t file_id, const file::File& file, uint64_t* counter,
                const std::function<std::pair<uint64_t, uint64_t>(uint64_t)>& range, const Op& op);
  std::string CurrentBytes(const Inode& inode) const;
  std::string DurableBytes(const Inode& inode) const;
  void CollectDurable(const std::string& dir, Image* image);
  // Whether `dir` (under the root) has a durable entry in every directory
  // from the root down to it.
  bool DurablyLinked(const std::string& dir);
  Image CaptureLocked(const std::string& dir);
  void CountOp(const std::string& path);  // captures when the countdown ends
  bool SyncDropped(bool dir_sync, const std::string& path) const;
  Status RunSync(const Op& op) const;

  const std::string root_;
  mutable std::mutex mu_;  // serializes every interposed call and Capture
  std::map<uint64_t, Inode> inodes_;
  std::map<std::string, uint64_t> by_path_;  // current file path -> inode
  std::map<std::string, Dir> dirs_;          // tracked directories
  uint64_t next_inode_ = 1;
  uint64_t ops_ = 0;
  Counts counts_;
  std::string drop_kind_;
  bool real_syncs_ = false;
  // CaptureBeforeOp
  std::string capture_dir_;
  std::optional<uint64_t> capture_countdown_;
  std::optional<Image> captured_;
};

}  // namespace raftkv::testing_util
