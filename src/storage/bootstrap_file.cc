#include "storage/bootstrap_file.h"

#include <cstring>

#include "storage/crc32c.h"
#include "storage/file_util.h"

namespace raftkv {
namespace {

constexpr char kMagic[4] = {'R', 'K', 'B', 'S'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 12;  // magic, version, length
constexpr size_t kMaxBytes = 16 << 20;

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

}  // namespace

Status BootstrapFile::Load(MembershipConfig* config, bool* found) const {
  config->Clear();
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
  const uint32_t version = GetU32(buf.data() + 4);
  const uint32_t length = GetU32(buf.data() + 8);
  if (length > kMaxBytes || buf.size() != kHeader + length + 4) {
    return Status::Corruption(path_ + ": length " + std::to_string(length) + " does not match the file's " +
                              std::to_string(buf.size()) + " bytes");
  }
  if (GetU32(buf.data() + kHeader + length) != crc32c::Value(buf.data(), kHeader + length)) {
    return Status::Corruption(path_ + ": checksum mismatch");
  }
  if (version != kVersion) {
    return Status::Corruption(path_ + ": unsupported version " + std::to_string(version));
  }
  if (!config->ParseFromArray(buf.data() + kHeader, static_cast<int>(length))) {
    return Status::Corruption(path_ + ": the configuration does not parse");
  }
  *found = true;
  return Status::OK();
}

Status BootstrapFile::Save(const MembershipConfig& config) {
  std::string buf(kMagic, sizeof(kMagic));
  PutU32(&buf, kVersion);
  const std::string body = config.SerializeAsString();
  PutU32(&buf, static_cast<uint32_t>(body.size()));
  buf += body;
  PutU32(&buf, crc32c::Value(buf.data(), buf.size()));
  return file::ReplaceFileDurably(path_, buf.data(), buf.size());
}

}  // namespace raftkv
