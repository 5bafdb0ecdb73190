// The bootstrap cluster membership, read from a cluster file in conf/:
//   # comment
//   <member id> <host:port>
// one member per line. The same file is given to every node, so one set of
// files deploys a leader and followers across machines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace raftkv {

struct Member {
  uint64_t id = 0;
  std::string address;  // host:port that peers and clients dial
};

struct ClusterConfig {
  std::vector<Member> members;  // in file order; ids unique and positive
  const Member* Find(uint64_t id) const;
  std::vector<uint64_t> Ids() const;
};

// Parses `text`; errors name `source` and the line: "conf/cluster.conf:3: ...".
Status ParseClusterConfig(const std::string& text, const std::string& source, ClusterConfig* out);
Status LoadClusterConfig(const std::string& path, ClusterConfig* out);

}  // namespace raftkv
