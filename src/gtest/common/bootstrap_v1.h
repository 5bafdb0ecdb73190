// A bootstrap file as the versions before cluster ids wrote it (version 1:
// "RKBS", the version, the configuration's length and bytes, a CRC-32C of
// all before it), for the tests that check such directories still open.
#pragma once

#include <cstdint>
#include <string>

#include "gtest/common/temp_dir.h"
#include "proto/internal.h"
#include "storage/coding.h"
#include "storage/crc32c.h"

namespace raftkv::testing_util {

inline void WriteVersionOneBootstrapFile(const std::string& path, const MembershipConfig& config) {
  std::string buf = "RKBS";
  coding::PutFixed32(&buf, 1);
  const std::string body = config.SerializeAsString();
  coding::PutFixed32(&buf, static_cast<uint32_t>(body.size()));
  buf += body;
  coding::PutFixed32(&buf, crc32c::Value(buf.data(), buf.size()));
  WriteFileBytes(path, buf);
}

}  // namespace raftkv::testing_util
