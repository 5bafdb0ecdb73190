#include "storage/hard_state_file.h"

#include <cstring>

#include "storage/coding.h"
#include "storage/crc32c.h"
#include "storage/file_util.h"

namespace raftkv {
namespace {

// Layout, all little-endian:
//   [0, 4)   magic "RKHS"
//   [4, 8)   version (kHardStateVersion)
//   [8, 16)  term
//   [16, 24) vote
//   [24, 28) crc32c of bytes [0, 24)
constexpr char kHardStateMagic[4] = {'R', 'K', 'H', 'S'};
constexpr uint32_t kHardStateVersion = 1;
constexpr size_t kBodySize = 24;
constexpr size_t kFileSize = kBodySize + 4;


}  // namespace

Status HardStateFile::Load(HardState* state) const {
  file::File f;
  bool missing = false;
  Status s = file::File::Open(path_, file::OpenMode::kReadOnly, &f, &missing);
  if (!s.ok()) return s;
  if (missing) {
    *state = HardState{};
    return Status::OK();
  }
  std::string buf;
  s = f.ReadAll(&buf);
  if (!s.ok()) return s;
  if (buf.size() != kFileSize) {
    return Status::Corruption(path_ + ": hard state file is " + std::to_string(buf.size()) +
                              " bytes, expected " + std::to_string(kFileSize));
  }
  if (std::memcmp(buf.data(), kHardStateMagic, sizeof(kHardStateMagic)) != 0) {
    return Status::Corruption(path_ + ": bad magic (not a raftkv hard state file)");
  }
  const uint32_t stored_crc = coding::DecodeFixed32(buf.data() + kBodySize);
  const uint32_t actual_crc = crc32c::Value(buf.data(), kBodySize);
  if (stored_crc != actual_crc) {
    return Status::Corruption(path_ + ": checksum mismatch");
  }
  const uint32_t version = coding::DecodeFixed32(buf.data() + 4);
  if (version != kHardStateVersion) {
    return Status::Corruption(path_ + ": unsupported hard state version " +
                              std::to_string(version));
  }
  state->term = coding::DecodeFixed64(buf.data() + 8);
  state->vote = coding::DecodeFixed64(buf.data() + 16);
  return Status::OK();
}

Status HardStateFile::Save(const HardState& state) {
  char buf[kFileSize];
  std::memcpy(buf, kHardStateMagic, sizeof(kHardStateMagic));
  coding::EncodeFixed32(buf + 4, kHardStateVersion);
  coding::EncodeFixed64(buf + 8, state.term);
  coding::EncodeFixed64(buf + 16, state.vote);
  coding::EncodeFixed32(buf + kBodySize, crc32c::Value(buf, kBodySize));

  return file::ReplaceFileDurably(path_, buf, sizeof(buf));
}

}  // namespace raftkv
