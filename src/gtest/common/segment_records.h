// A test-side reader of the log segment format (storage/log_store.h,
// record := crc32c:u32le length:u32le payload): splits a segment file's bytes
// into records by their length fields, for tests that damage or inspect the
// files a server wrote. Checksums and payloads are not checked here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace raftkv::testing_util {

// Where one record lies in a segment file.
struct RecordSpan {
  size_t offset;  // of its header
  size_t length;  // payload bytes, after the 8-byte header
};

// The records of `bytes` from offset 0, up to an all-zero header (the
// preallocated space after the last record) or a record that does not fit
// in the file; *end is where the last of them ends.
inline std::vector<RecordSpan> SplitSegmentRecords(const std::string& bytes, size_t* end) {
  std::vector<RecordSpan> spans;
  size_t pos = 0;
  while (pos + 8 <= bytes.size() && bytes.find_first_not_of('\0', pos) < pos + 8) {
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) {
      length |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[pos + 4 + i])) << (8 * i);
    }
    if (length > bytes.size() - pos - 8) break;
    spans.push_back(RecordSpan{pos, length});
    pos += 8 + length;
  }
  *end = pos;
  return spans;
}

// Whether only zero bytes (or none) follow offset `from`.
inline bool OnlyZerosFrom(const std::string& bytes, size_t from) {
  return bytes.find_first_not_of('\0', from) == std::string::npos;
}

}  // namespace raftkv::testing_util
