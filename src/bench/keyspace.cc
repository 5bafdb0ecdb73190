#include "bench/keyspace.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>

namespace raftkv {
namespace bench {

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

namespace {

int DecimalDigits(uint64_t v) {
  int d = 1;
  while (v >= 10) {
    v /= 10;
    ++d;
  }
  return d;
}

}  // namespace

KeySpace::KeySpace(uint64_t count, int key_len, int value_len, uint64_t seed)
    : key_len_(key_len), value_len_(value_len), seed_(seed) {
  digits_ = DecimalDigits(count == 0 ? 0 : count - 1);
  if (key_len < 1) {
    error_ = "--key_len must be at least 1";
    return;
  }
  if (value_len < 0) {
    error_ = "--value_len must not be negative";
    return;
  }
  if (key_len < digits_) {
    error_ = "--key_len=" + std::to_string(key_len) + " is too short for " +
             std::to_string(count) + " distinct keys (needs at least " + std::to_string(digits_) +
             " bytes)";
    return;
  }
  digits_ = std::max(digits_, key_len - 8);
  const int tag_len = key_len - digits_;
  uint64_t r = Mix64(seed ^ 0x6b65797370616365ull);
  for (int i = 0; i < tag_len; ++i) {
    r = Mix64(r);
    tag_ += static_cast<char>('a' + r % 26);
  }
  const size_t pool_len = 2 * static_cast<size_t>(value_len) + 4096;
  pool_.resize(pool_len);
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  uint64_t s = Mix64(seed ^ 0x76616c7565706f6full);
  for (size_t i = 0; i < pool_len; ++i) {
    if (i % 8 == 0) s = Mix64(s);
    pool_[i] = kAlphabet[(s >> (8 * (i % 8))) & 63];
  }
}

std::string KeySpace::Key(uint64_t i) const {
  std::string key = tag_;
  std::string num = std::to_string(i);
  if (static_cast<int>(num.size()) < digits_) key.append(digits_ - num.size(), '0');
  key += num;
  return key;
}

void KeySpace::FillValue(uint64_t i, std::string* out) const {
  CHECK(error_.empty()) << "KeySpace used despite: " << error_;  // pool_ is unset then
  out->resize(static_cast<size_t>(value_len_));
  char* p = out->data();
  size_t len = out->size();
  static const char kHex[] = "0123456789abcdef";
  const uint64_t h = Mix64(seed_ ^ Mix64(i));
  const size_t head = std::min<size_t>(16, len);
  for (size_t k = 0; k < head; ++k) p[k] = kHex[(h >> (60 - 4 * k)) & 15];
  if (len > head) {
    const size_t offset = static_cast<size_t>(h % 4096);
    std::memcpy(p + head, pool_.data() + offset, len - head);
  }
}

std::string KeySpace::Value(uint64_t i) const {
  std::string v;
  FillValue(i, &v);
  return v;
}

}  // namespace bench
}  // namespace raftkv
