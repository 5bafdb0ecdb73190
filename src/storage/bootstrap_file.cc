#include "storage/bootstrap_file.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "storage/coding.h"
#include "storage/crc32c.h"
#include "storage/file_util.h"

namespace raftkv {
namespace {

constexpr char kMagic[4] = {'R', 'K', 'B', 'S'};
constexpr uint32_t kVersion = 2;  // 1: no cluster id
constexpr size_t kHeader = 12;  // magic, version, length
constexpr size_t kMaxBytes = 16 << 20;

}  // namespace

Status BootstrapFile::Load(MembershipConfig* config, uint64_t* cluster_id, bool* found) const {
  config->Clear();
  *cluster_id = 0;
  *found = false;
  file::File f;
  bool missing = false;
  Status s = file::File::Open(path_, file::OpenMode::kReadOnly, &f, &missing);
  if (!s.ok() || missing) return s;
  std::string buf;
  s = f.ReadAll(&buf);
  if (!s.ok()) return s;
  if (buf.size() < kHeader + 4 || std::memcmp(buf.data(), kMagic, sizeof(kMagic)) != 0) {
    return Status::Corruption(path_ + ": not a raftkv bootstrap configuration file (" +
                              std::to_string(buf.size()) + " bytes, bad magic or too short)");
  }
  const uint32_t version = coding::DecodeFixed32(buf.data() + 4);
  const uint32_t length = coding::DecodeFixed32(buf.data() + 8);
  const size_t trailer = version >= 2 ? 8 : 0;  // the cluster id
  if (length > kMaxBytes || buf.size() != kHeader + length + trailer + 4) {
    return Status::Corruption(path_ + ": length " + std::to_string(length) + " does not match the file's " +
                              std::to_string(buf.size()) + " bytes");
  }
  const size_t body_end = kHeader + length + trailer;
  if (coding::DecodeFixed32(buf.data() + body_end) != crc32c::Value(buf.data(), body_end)) {
    return Status::Corruption(path_ + ": checksum mismatch");
  }
  if (version != 1 && version != kVersion) {
    return Status::Corruption(path_ + ": unsupported version " + std::to_string(version));
  }
  if (!config->ParseFromArray(buf.data() + kHeader, static_cast<int>(length))) {
    return Status::Corruption(path_ + ": the configuration does not parse");
  }
  if (trailer != 0) *cluster_id = coding::DecodeFixed64(buf.data() + kHeader + length);
  *found = true;
  return Status::OK();
}

Status BootstrapFile::Save(const MembershipConfig& config, uint64_t cluster_id) {
  std::string buf(kMagic, sizeof(kMagic));
  coding::PutFixed32(&buf, kVersion);
  const std::string body = config.SerializeAsString();
  coding::PutFixed32(&buf, static_cast<uint32_t>(body.size()));
  buf += body;
  coding::PutFixed64(&buf, cluster_id);
  coding::PutFixed32(&buf, crc32c::Value(buf.data(), buf.size()));
  return file::ReplaceFileDurably(path_, buf.data(), buf.size());
}

uint64_t ClusterIdOf(const MembershipConfig& config, const std::string& token) {
  std::vector<const MemberConfig*> members;
  for (const MemberConfig& m : config.members()) members.push_back(&m);
  std::sort(members.begin(), members.end(),
            [](const MemberConfig* a, const MemberConfig* b) { return a->id() < b->id(); });
  // FNV-1a over length-prefixed fields: no two inputs share an encoding.
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](const std::string& bytes) {
    std::string field;
    coding::PutFixed32(&field, static_cast<uint32_t>(bytes.size()));
    field += bytes;
    for (unsigned char c : field) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  mix(token);
  for (const MemberConfig* m : members) {
    std::string id;
    coding::PutFixed64(&id, m->id());
    mix(id);
    mix(m->address());
  }
  return h != 0 ? h : 1;
}

std::string ClusterIdHex(uint64_t id) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(id));
  return buf;
}

}  // namespace raftkv
