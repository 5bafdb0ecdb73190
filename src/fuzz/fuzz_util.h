// Helpers shared by the fuzz targets: an input reader and a scratch directory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

// Fails the current input (libFuzzer records a crash and keeps the input):
// for broken invariants that are not already a CHECK or a sanitizer report.
#define FUZZ_ASSERT(cond, ...)                                                           \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_ASSERT(%s) failed: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                 \
      std::fprintf(stderr, "\n");                                                        \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

namespace raftkv::fuzz {

// Reads little-endian fields from the front of the input; past the end every
// read yields zeros / empty strings.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  size_t remaining() const { return size_ - pos_; }
  uint64_t Fixed(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) {
      if (pos_ < size_) v |= static_cast<uint64_t>(data_[pos_++]) << (8 * i);
    }
    return v;
  }
  uint8_t U8() { return static_cast<uint8_t>(Fixed(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Fixed(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Fixed(4)); }
  uint64_t U64() { return Fixed(8); }
  bool Bool() { return (U8() & 1) != 0; }
  // Up to n bytes.
  std::string Bytes(size_t n) {
    if (n > remaining()) n = remaining();
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  // A u16-length-prefixed byte string.
  std::string Chunk() { return Bytes(U16()); }
  std::string Rest() { return Bytes(remaining()); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// An empty directory for this input: the same path every time (on tmpfs when
// /dev/shm exists, since the storage code fsyncs), emptied on each call and
// removed at exit.
const std::string& FreshDir();

// Writes `bytes` to `path`, replacing it.
void WriteFile(const std::string& path, const std::string& bytes);

}  // namespace raftkv::fuzz
