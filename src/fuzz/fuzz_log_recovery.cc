// Fuzz target: SegmentedLog recovery from arbitrary segment files.
//
// Input: [max_segment_bytes:u8] [flags:u8: segment count - 1 (mod 3) in the
// low bits; bit 7: fix up checksums], then per segment [first index:u16le]
// [length:u32le] [bytes]; the last segment takes all the remaining bytes
// whatever its length field says. With bit 7 set, the harness walks each
// segment's records by their length fields and rewrites their CRCs, so that
// mutated payloads reach the Entry parsing and index checks behind the CRC. The segments are
// written as <first index>.seg files and the log is opened. Open must return
// OK or a clean error; when it recovers, the recovered entries must be the
// contiguous log first_index..LastIndex() (a log may start past 1: compaction
// removes a prefix), a second Open must see exactly the same log
// with nothing left to truncate, and appends (one extending the log, one
// replacing its last entry) must work and survive a reopen.
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "storage/crc32c.h"
#include "storage/log_store.h"

namespace raftkv::fuzz {
namespace {

std::string SegmentName(uint64_t first_index) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%020" PRIu64 ".seg", first_index);
  return buf;
}

uint32_t Load32(const std::string& s, size_t p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(s[p + i])) << (8 * i);
  return v;
}

// Rewrites the crc32c of each record (crc:u32le len:u32le payload) that fits.
void FixChecksums(std::string* bytes) {
  size_t pos = 0;
  while (bytes->size() - pos >= 8) {
    const uint32_t length = Load32(*bytes, pos + 4);
    if (length > bytes->size() - pos - 8) break;
    const uint32_t crc = crc32c::Value(bytes->data() + pos + 4, 4 + length);
    for (int i = 0; i < 4; ++i) (*bytes)[pos + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
    pos += 8 + length;
  }
}

void ExpectSameLog(const std::vector<Entry>& got, const std::vector<Entry>& want,
                   const char* when) {
  FUZZ_ASSERT(got.size() == want.size(), "%s: %zu entries, expected %zu", when, got.size(),
              want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    FUZZ_ASSERT(got[i].SerializeAsString() == want[i].SerializeAsString(),
                "%s: entry %zu differs", when, i + 1);
  }
}

std::unique_ptr<SegmentedLog> Reopen(const std::string& dir, const SegmentedLogOptions& options,
                                     uint64_t first_index, const std::vector<Entry>& want,
                                     const char* when) {
  std::unique_ptr<SegmentedLog> log;
  LogRecovery recovery;
  Status s = SegmentedLog::Open(dir, options, &log, &recovery);
  FUZZ_ASSERT(s.ok(), "%s: reopen failed: %s", when, s.ToString().c_str());
  FUZZ_ASSERT(!recovery.truncated_tail, "%s: reopen truncated again: %s", when,
              recovery.detail.c_str());
  ExpectSameLog(recovery.entries, want, when);
  FUZZ_ASSERT(recovery.first_index == first_index, "%s: first index %" PRIu64 ", expected %" PRIu64,
              when, recovery.first_index, first_index);
  FUZZ_ASSERT(log->LastIndex() == first_index + want.size() - 1,
              "%s: LastIndex %" PRIu64 ", expected %" PRIu64, when, log->LastIndex(),
              first_index + want.size() - 1);
  return log;
}

}  // namespace
}  // namespace raftkv::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace raftkv;
  using namespace raftkv::fuzz;
  Reader in(data, size);
  SegmentedLogOptions options;
  options.max_segment_bytes = 16 + 8 * static_cast<uint64_t>(in.U8());
  const uint8_t flags = in.U8();
  const int segments = 1 + (flags & 0x7F) % 3;
  const std::string& dir = FreshDir();
  for (int i = 0; i < segments; ++i) {
    const uint64_t first_index = in.U16();
    const uint32_t length = in.U32();
    std::string bytes = i + 1 == segments ? in.Rest() : in.Bytes(length);
    if (flags & 0x80) FixChecksums(&bytes);
    WriteFile(dir + "/" + SegmentName(first_index), bytes);
  }

  std::unique_ptr<SegmentedLog> log;
  LogRecovery recovery;
  Status s = SegmentedLog::Open(dir, options, &log, &recovery);
  if (!s.ok()) {
    FUZZ_ASSERT(log == nullptr, "Open failed but returned a log");
    FUZZ_ASSERT(recovery.entries.empty(), "Open failed but returned entries");
    FUZZ_ASSERT(!s.message().empty(), "error status without a message");
    return 0;
  }
  std::vector<Entry> want = recovery.entries;
  const uint64_t first = recovery.first_index;
  FUZZ_ASSERT(first >= 1, "first index 0");
  FUZZ_ASSERT(log->FirstIndex() == first, "FirstIndex %" PRIu64 ", recovery says %" PRIu64,
              log->FirstIndex(), first);
  for (size_t i = 0; i < want.size(); ++i) {
    FUZZ_ASSERT(want[i].index() == first + i, "recovered entry %zu holds index %" PRIu64, i + 1,
                want[i].index());
  }
  FUZZ_ASSERT(log->LastIndex() == first + want.size() - 1,
              "LastIndex %" PRIu64 " after recovering %zu entries from %" PRIu64, log->LastIndex(),
              want.size(), first);
  log.reset();
  log = Reopen(dir, options, first, want, "after recovery");

  // Extend the log by two entries, then replace the last one.
  std::vector<Entry> batch(2);
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].set_term(want.empty() ? 1 : want.back().term());
    batch[i].set_index(first + want.size() + i);
    batch[i].set_type(ENTRY_COMMAND);
    batch[i].set_data(std::string(1 + i * 20, 'x'));
  }
  s = log->Append(batch);
  FUZZ_ASSERT(s.ok(), "append: %s", s.ToString().c_str());
  want.insert(want.end(), batch.begin(), batch.end());
  Entry replacement = batch.back();
  replacement.set_term(replacement.term() + 1);
  replacement.set_data("replaced");
  s = log->Append({replacement});
  FUZZ_ASSERT(s.ok(), "truncating append: %s", s.ToString().c_str());
  want.back() = replacement;
  s = log->Sync();
  FUZZ_ASSERT(s.ok(), "sync: %s", s.ToString().c_str());
  log.reset();
  Reopen(dir, options, first, want, "after appending");
  return 0;
}
