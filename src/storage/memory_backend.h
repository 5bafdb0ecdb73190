// MemoryBackend: the KvBackend (storage/kv_backend.h) of the memory engine:
// a copy-on-write B-tree of byte strings (storage/cow_btree.h). View() is an
// O(1) image of the tree that later writes do not change; the image's nodes
// are freed when its last view or iterator drops them.
//
// Not persistent: the state lives only in memory. Checkpoint() writes it to
// one dump file, LoadCheckpoint() reads it back. The dump file, kDumpFile:
//   "RKVMEM01"                                  8 bytes
//   per key, ascending: key_len(4) value_len(4) key value crc(4)
//   trailer: 0xFFFFFFFF count(8) crc(4)
// little-endian (storage/coding.h); each crc is the crc32c of the
// bytes of its record before it, so a torn or flipped file is refused.
// The file is fsync'ed, then the directory and its parent.
//
// Thread safety: all methods may be called from any thread (one mutex guards
// the tree; a view copies the root under it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "storage/cow_btree.h"
#include "storage/kv_backend.h"

namespace raftkv {

class MemoryBackend final : public KvBackend {
 public:
  using Tree = CowBTree<std::string, std::string>;
  static constexpr const char* kDumpFile = "memory.dump";

  MemoryBackend() = default;

  // Replaces the state with the checkpoint in `dir` (written by
  // Checkpoint()); on an error the state is unchanged.
  Status LoadCheckpoint(const std::string& dir);

  Status Write(const BackendBatch& batch) override;
  std::shared_ptr<const BackendView> View() const override;
  Status Flush() override { return Status::OK(); }
  bool persistent() const override { return false; }
  Status Checkpoint(const std::string& dir, CheckpointManifest* out) override;
  BackendStats Stats() const override;
  Status BackgroundError() const override { return Status::OK(); }

 private:
  void DeleteRangeLocked(const std::string& begin, const std::string& end) REQUIRES(mu_);
  void EraseLocked(const std::string& key) REQUIRES(mu_);

  mutable Mutex mu_;
  Tree tree_ GUARDED_BY(mu_);
  uint64_t bytes_ GUARDED_BY(mu_) = 0;  // of keys and values in tree_
};

}  // namespace raftkv
