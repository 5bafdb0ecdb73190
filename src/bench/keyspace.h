// KeySpace: the keys and values of one benchmark run, computed from the
// request number so that nothing has to be stored to verify them later.
//
//   Key(i)   = <tag><i, zero-padded decimal>, exactly key_len bytes. The tag
//              (random letters, as many as fit, at most 8) makes the keys of
//              different runs distinct on a long-lived cluster (--target).
//   Value(i) = 16 hex digits of a hash of (seed, i), then bytes from a random
//              printable pool at an offset depending on i; exactly value_len
//              bytes. Distinct for distinct i (for value_len >= 16).
#pragma once

#include <cstdint>
#include <string>

namespace raftkv {
namespace bench {

class KeySpace {
 public:
  // Keys for request numbers 0..count-1. `seed` picks the tag and values.
  KeySpace(uint64_t count, int key_len, int value_len, uint64_t seed);

  // Empty if the parameters can be served; otherwise why not (e.g. key_len
  // too short to make `count` distinct keys).
  const std::string& error() const { return error_; }

  std::string Key(uint64_t i) const;
  std::string Value(uint64_t i) const;
  // Writes Value(i) into *out (reusing its capacity).
  void FillValue(uint64_t i, std::string* out) const;

  const std::string& tag() const { return tag_; }
  int key_len() const { return key_len_; }
  int value_len() const { return value_len_; }

 private:
  int key_len_;
  int value_len_;
  uint64_t seed_;
  int digits_ = 1;  // width of the decimal index in a key
  std::string tag_;
  std::string pool_;  // random printable bytes, 2 * value_len + 4096 long
  std::string error_;
};

// splitmix64: a fast, well-mixed 64-bit hash / PRNG step.
uint64_t Mix64(uint64_t x);

}  // namespace bench
}  // namespace raftkv
