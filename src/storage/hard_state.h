// The Raft state that must survive a crash besides the log: the current term
// and the vote cast in it. Saved before any vote is granted or any message of
// a new term is sent.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace raftkv {

struct HardState {
  uint64_t term = 0;
  uint64_t vote = 0;  // member id voted for in `term`; 0 for none
  bool operator==(const HardState& o) const { return term == o.term && vote == o.vote; }
  bool operator!=(const HardState& o) const { return !(*this == o); }
};

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
