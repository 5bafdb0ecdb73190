// The file that holds the Raft hard state (raft/core/hard_state.h).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "raft/core/hard_state.h"

namespace raftkv {

// A file holding one HardState: 4-byte magic "RKHS", version u32le, term u64le,
// vote u64le, crc32c u32le over the preceding bytes. Save() writes a temporary
// file, fsyncs it, renames it over the old one and fsyncs the directory, so a
// crash leaves either the old or the new state, never a mix.
class HardStateFile {
 public:
  explicit HardStateFile(std::string path) : path_(std::move(path)) {}
  // Reads the saved state; a missing file yields {0, 0}. A damaged file is
  // Status::Corruption naming the path.
  Status Load(HardState* state) const;
  Status Save(const HardState& state);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace raftkv
