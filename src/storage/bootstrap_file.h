// The configuration a data directory was bootstrapped with: the membership
// in effect at log index 0, before any configuration entry. It is written
// once, when a member starts on an empty data directory, and read on every
// start after that, so the membership of an existing directory comes from
// the directory (this file, then the snapshot and the log) and never again
// from the cluster file.
//
// It also holds the cluster id: chosen by the founding members from their
// bootstrap configuration (ClusterIdOf), adopted by a member that joins from
// the first leader that reaches it, and never changed after that.
//
// Layout, little-endian: magic "RKBS", version u32 (2), length u32, a
// serialized MembershipConfig of that length, the cluster id u64, crc32c u32
// over everything before it. Version 1 files (no cluster id) still load,
// with cluster id 0 (not known). Written like the hard state: a temporary
// file, fsync, rename, fsync of the directory.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "proto/internal.h"

namespace raftkv {

class BootstrapFile {
 public:
  explicit BootstrapFile(std::string path) : path_(std::move(path)) {}
  // *found = false when there is no file (config left empty, cluster id
  // 0); a damaged file is Status::Corruption naming the path.
  Status Load(MembershipConfig* config, uint64_t* cluster_id, bool* found) const;
  Status Save(const MembershipConfig& config, uint64_t cluster_id);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The id of a cluster founded with `config` and `token` (etcd's
// --initial-cluster-token: clusters founded from the same members and
// addresses differ by it): a 64-bit hash of the token and the members'
// ids and addresses in id order, never 0.
uint64_t ClusterIdOf(const MembershipConfig& config, const std::string& token);
// An id as etcd prints one: lower-case hex, no prefix.
std::string ClusterIdHex(uint64_t id);

}  // namespace raftkv
