// CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the SSE4.2 crc32
// instruction on x86-64 processors that have it (checked once at run time),
// otherwise software slicing-by-8.
//
// The eight 256-entry tables are computed at compile time. Table k maps a byte
// to the CRC contribution of that byte followed by k zero bytes, which lets the
// main loop fold eight input bytes per iteration with eight independent
// lookups. Input words are assembled byte by byte, so the code is independent
// of host endianness and alignment.
#include "storage/crc32c.h"

#include <array>
#include <cstring>

namespace raftkv::crc32c {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // CRC32C, bit-reflected

using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 1) ? (crc >> 1) ^ kPolynomial : crc >> 1;
    }
    t[0][i] = crc;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (size_t k = 1; k < 8; ++k) {
      t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
    }
  }
  return t;
}

constexpr Tables kTables = MakeTables();

inline uint32_t LoadLE32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RAFTKV_CRC32C_SSE42 1
__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = ~crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, sizeof(word));  // x86 is little-endian, as CRC32C reads
    c = __builtin_ia32_crc32di(c, word);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n > 0) {
    c32 = __builtin_ia32_crc32qi(c32, *p);
    ++p;
    --n;
  }
  return ~c32;
}

bool DetectHardware() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}
#endif

}  // namespace

bool HardwareAvailable() {
#ifdef RAFTKV_CRC32C_SSE42
  static const bool available = DetectHardware();
  return available;
#else
  return false;
#endif
}

uint32_t Extend(uint32_t crc, const void* data, size_t n) {
#ifdef RAFTKV_CRC32C_SSE42
  if (HardwareAvailable()) return ExtendSse42(crc, static_cast<const uint8_t*>(data), n);
#endif
  return ExtendPortable(crc, data, n);
}

uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (n >= 8) {
    const uint32_t lo = c ^ LoadLE32(p);
    const uint32_t hi = LoadLE32(p + 4);
    c = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^
        kTables[5][(lo >> 16) & 0xFF] ^ kTables[4][lo >> 24] ^
        kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
        kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = kTables[0][(c ^ *p) & 0xFF] ^ (c >> 8);
    ++p;
    --n;
  }
  return ~c;
}

}  // namespace raftkv::crc32c
