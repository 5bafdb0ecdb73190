// The configuration a data directory was bootstrapped with: the membership
// in effect at log index 0, before any configuration entry. It is written
// once, when a member starts on an empty data directory, and read on every
// start after that, so the membership of an existing directory comes from
// the directory (this file, then the snapshot and the log) and never again
// from the cluster file.
//
// Layout, little-endian: magic "RKBS", version u32 (1), length u32, a
// serialized MembershipConfig of that length, crc32c u32 over everything
// before it. Written like the hard state: a temporary file, fsync, rename,
// fsync of the directory.
#pragma once

#include <string>

#include "common/status.h"
#include "proto/internal.h"

namespace raftkv {

class BootstrapFile {
 public:
  explicit BootstrapFile(std::string path) : path_(std::move(path)) {}
  // *found = false when there is no file (config left empty); a damaged
  // file is Status::Corruption naming the path.
  Status Load(MembershipConfig* config, bool* found) const;
  Status Save(const MembershipConfig& config);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace raftkv
