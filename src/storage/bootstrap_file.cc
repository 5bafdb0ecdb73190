#include "storage/bootstrap_file.h"

#include <cstring>

#include "storage/coding.h"
#include "storage/crc32c.h"
#include "storage/file_util.h"

namespace raftkv {
namespace {

constexpr char kMagic[4] = {'R', 'K', 'B', 'S'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 12;  // magic, version, length
constexpr size_t kMaxBytes = 16 << 20;

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
  const uint32_t version = coding::DecodeFixed32(buf.data() + 4);
  const uint32_t length = coding::DecodeFixed32(buf.data() + 8);
  if (length > kMaxBytes || buf.size() != kHeader + length + 4) {
    return Status::Corruption(path_ + ": length " + std::to_string(length) + " does not match the file's " +
                              std::to_string(buf.size()) + " bytes");
  }
  if (coding::DecodeFixed32(buf.data() + kHeader + length) != crc32c::Value(buf.data(), kHeader + length)) {
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
  coding::PutFixed32(&buf, kVersion);
  const std::string body = config.SerializeAsString();
  coding::PutFixed32(&buf, static_cast<uint32_t>(body.size()));
  buf += body;
  coding::PutFixed32(&buf, crc32c::Value(buf.data(), buf.size()));
  return file::ReplaceFileDurably(path_, buf.data(), buf.size());
}

}  // namespace raftkv
