// CRC32C (Castagnoli), the checksum of every log and hard-state record.
#pragma once

#include <cstddef>
#include <cstdint>

namespace raftkv::crc32c {

// Returns the CRC32C of data[0, n) continuing from `crc` (the CRC of the bytes
// before them; 0 to start).
// Uses the processor's CRC32C instruction when it has one.
uint32_t Extend(uint32_t crc, const void* data, size_t n);
inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }

// The software implementation (slicing-by-8), and whether Extend uses the
// processor's instruction instead. For tests and benchmarks.
uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n);
bool HardwareAvailable();

}  // namespace raftkv::crc32c
