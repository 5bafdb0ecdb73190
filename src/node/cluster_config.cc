#include "node/cluster_config.h"

#include "common/endpoint.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

namespace raftkv {

const Member* ClusterConfig::Find(uint64_t id) const {
  for (const Member& m : members) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

std::vector<uint64_t> ClusterConfig::Ids() const {
  std::vector<uint64_t> ids;
  for (const Member& m : members) ids.push_back(m.id);
  return ids;
}

Status ParseClusterConfig(const std::string& text, const std::string& source, ClusterConfig* out) {
  ClusterConfig config;
  std::map<uint64_t, int> id_lines;                        // id -> the line listing it
  std::map<std::string, std::pair<int, uint64_t>> owners;  // address -> (line, id)
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  auto error = [&](const std::string& what) {
    return Status::InvalidArgument(source + ":" + std::to_string(lineno) + ": " + what);
  };
  while (std::getline(in, line)) {
    ++lineno;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string id_text, address, extra;
    if (!(fields >> id_text)) continue;  // blank or comment
    if (!(fields >> address)) return error("expected '<id> <host:port>', got only '" + id_text + "'");
    if (fields >> extra) return error("unexpected text '" + extra + "' after the address");
    char* end = nullptr;
    errno = 0;
    const unsigned long long id = std::strtoull(id_text.c_str(), &end, 10);
    if (id_text[0] == '-' || *end != '\0' || errno != 0 || id == 0) {
      return error("member id '" + id_text + "' is not a positive integer");
    }
    if (Status bad = ParseEndpoint(address); !bad.ok()) return error(bad.message());
    // Both sides of a duplicate are named: either line may be the mistake.
    if (auto [it, added] = id_lines.emplace(id, lineno); !added) {
      return error("member id " + id_text + " appears twice (also on line " +
                   std::to_string(it->second) + ")");
    }
    if (auto [it, added] = owners.emplace(address, std::make_pair(lineno, id)); !added) {
      return error("address " + address + " appears twice (also on line " +
                   std::to_string(it->second.first) + ", member " +
                   std::to_string(it->second.second) + ")");
    }
    config.members.push_back(Member{id, address});
  }
  if (config.members.empty()) {
    return Status::InvalidArgument(source + ": no members listed (expected lines '<id> <host:port>')");
  }
  *out = std::move(config);
  return Status::OK();
}

Status LoadClusterConfig(const std::string& path, ClusterConfig* out) {
  std::ifstream file(path);
  if (!file) return Status::IOError("cannot open cluster file " + path + ": " + std::strerror(errno));
  std::stringstream buffer;
  buffer << file.rdbuf();
  return ParseClusterConfig(buffer.str(), path, out);
}

}  // namespace raftkv
