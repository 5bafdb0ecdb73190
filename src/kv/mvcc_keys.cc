#include "kv/mvcc_keys.h"

#include <cstring>
#include <limits>

namespace raftkv {
namespace mvcc {
namespace {

constexpr char kEscape = '\x00';
constexpr char kEscapedZero = '\xff';
constexpr char kTerminator = '\x01';
// After ord(key)'s escape byte: above the terminator, below an escaped zero.
constexpr char kAfterTerminator = '\x02';

uint64_t Descending64(int64_t v) { return std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(v); }

std::string WithPrefix(char prefix) { return std::string(1, prefix); }

// The key of a well-formed ord(key) (OrderedKeyLength() == its size).
void DecodeOrderedKey(std::string_view ord, std::string* key) {
  std::string_view body = ord.substr(0, ord.size() - 2);  // without the terminator
  key->clear();
  for (size_t zero = body.find(kEscape); zero != std::string_view::npos; zero = body.find(kEscape)) {
    key->append(body.data(), zero + 1);  // through the zero byte
    body.remove_prefix(zero + 2);        // and past its escaped-zero mark
  }
  key->append(body.data(), body.size());
}

}  // namespace

void AppendOrderedKey(std::string* out, std::string_view key) {
  out->reserve(out->size() + key.size() + 2);
  for (char c : key) {
    out->push_back(c);
    if (c == kEscape) out->push_back(kEscapedZero);
  }
  out->push_back(kEscape);
  out->push_back(kTerminator);
}

// Both walk from one escape byte to the next (memchr), not byte by byte:
// every row a range reads parses its key.
size_t OrderedKeyLength(std::string_view in) {
  size_t i = 0;
  while (i < in.size()) {
    const void* escape = std::memchr(in.data() + i, kEscape, in.size() - i);
    if (escape == nullptr) return 0;
    i = static_cast<size_t>(static_cast<const char*>(escape) - in.data());
    if (i + 1 >= in.size()) return 0;
    if (in[i + 1] == kTerminator) return i + 2;
    if (in[i + 1] != kEscapedZero) return 0;
    i += 2;
  }
  return 0;
}

bool ConsumeOrderedKey(std::string_view* in, std::string* key) {
  const size_t length = OrderedKeyLength(*in);
  if (length == 0) return false;
  DecodeOrderedKey(in->substr(0, length), key);
  in->remove_prefix(length);
  return true;
}

void AppendBigEndian64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>((v >> shift) & 0xff));
}

void AppendBigEndian32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>((v >> shift) & 0xff));
}

bool ConsumeBigEndian64(std::string_view* in, uint64_t* v) {
  if (in->size() < 8) return false;
  uint64_t r = 0;
  for (int i = 0; i < 8; ++i) r = (r << 8) | static_cast<unsigned char>((*in)[i]);
  in->remove_prefix(8);
  *v = r;
  return true;
}

bool ConsumeBigEndian32(std::string_view* in, uint32_t* v) {
  if (in->size() < 4) return false;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r = (r << 8) | static_cast<unsigned char>((*in)[i]);
  in->remove_prefix(4);
  *v = r;
  return true;
}

std::string VersionKey(std::string_view key, int64_t revision, uint32_t sub) {
  std::string out = VersionSeekKey(key, revision);
  AppendBigEndian32(&out, std::numeric_limits<uint32_t>::max() - sub);
  return out;
}

std::string VersionSeekKey(std::string_view key, int64_t revision) {
  std::string out = VersionsBegin(key);
  AppendBigEndian64(&out, Descending64(revision));
  return out;
}

std::string VersionsBegin(std::string_view key) {
  std::string out = WithPrefix(kVersionPrefix);
  AppendOrderedKey(&out, key);
  return out;
}

std::string VersionsEnd(std::string_view key) {
  std::string out = VersionsBegin(key);
  out.back() = kAfterTerminator;
  return out;
}

std::string KeyBound(std::string_view key) {
  std::string out = VersionsBegin(key);
  out.resize(out.size() - 2);  // without the terminator
  return out;
}

std::string VersionsLimit() { return WithPrefix(static_cast<char>(kVersionPrefix + 1)); }

bool ParseVersionKey(std::string_view encoded, std::string* key, int64_t* revision, uint32_t* sub) {
  if (encoded.empty() || encoded[0] != kVersionPrefix) return false;
  encoded.remove_prefix(1);
  const size_t length = OrderedKeyLength(encoded);
  if (length == 0 || encoded.size() != length + 8 + 4) return false;
  std::string_view rest = encoded.substr(length);
  uint64_t rev = 0;
  uint32_t s = 0;
  ConsumeBigEndian64(&rest, &rev);
  ConsumeBigEndian32(&rest, &s);
  rev = std::numeric_limits<uint64_t>::max() - rev;
  if (rev > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  DecodeOrderedKey(encoded.substr(0, length), key);
  *revision = static_cast<int64_t>(rev);
  *sub = std::numeric_limits<uint32_t>::max() - s;
  return true;
}

std::string_view VersionRowsPrefix(std::string_view encoded) {
  constexpr size_t kSuffix = 8 + 4;  // ~revision ~sub
  return encoded.substr(0, encoded.size() >= kSuffix ? encoded.size() - kSuffix : 0);
}

std::string HistoryKey(int64_t revision, uint32_t sub) {
  std::string out = WithPrefix(kHistoryPrefix);
  AppendBigEndian64(&out, static_cast<uint64_t>(revision));
  AppendBigEndian32(&out, sub);
  return out;
}

bool ParseHistoryKey(std::string_view encoded, int64_t* revision, uint32_t* sub) {
  if (encoded.empty() || encoded[0] != kHistoryPrefix) return false;
  encoded.remove_prefix(1);
  uint64_t rev = 0;
  uint32_t s = 0;
  if (!ConsumeBigEndian64(&encoded, &rev) || !ConsumeBigEndian32(&encoded, &s) || !encoded.empty() ||
      rev > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return false;
  }
  *revision = static_cast<int64_t>(rev);
  *sub = s;
  return true;
}

std::string LeaseKey(int64_t lease) {
  std::string out = WithPrefix(kLeasePrefix);
  AppendBigEndian64(&out, static_cast<uint64_t>(lease));
  return out;
}

std::string LeaseAttachKey(int64_t lease, std::string_view key) {
  std::string out = WithPrefix(kLeaseKeyPrefix);
  AppendBigEndian64(&out, static_cast<uint64_t>(lease));
  AppendOrderedKey(&out, key);
  return out;
}

bool ParseLeaseAttachKey(std::string_view encoded, int64_t* lease, std::string* key) {
  if (encoded.empty() || encoded[0] != kLeaseKeyPrefix) return false;
  encoded.remove_prefix(1);
  uint64_t id = 0;
  std::string k;
  if (!ConsumeBigEndian64(&encoded, &id) || !ConsumeOrderedKey(&encoded, &k) || !encoded.empty()) {
    return false;
  }
  *lease = static_cast<int64_t>(id);
  *key = std::move(k);
  return true;
}

std::string SessionKey(uint64_t client_id) {
  std::string out = WithPrefix(kSessionPrefix);
  AppendBigEndian64(&out, client_id);
  return out;
}

std::string ResultKey(uint64_t client_id, uint64_t sequence) {
  std::string out = WithPrefix(kResultPrefix);
  AppendBigEndian64(&out, client_id);
  AppendBigEndian64(&out, sequence);
  return out;
}

size_t InsertGroupPrefix(std::string_view encoded) {
  if (encoded.empty()) return 0;
  switch (encoded[0]) {
    case kHistoryPrefix:
    case kMetaPrefix:
    case kSessionPrefix:
    case kResultPrefix:
      return 1;
    default:
      return 0;
  }
}

size_t LookupPrefix(std::string_view encoded) {
  if (encoded.empty() || encoded[0] != kVersionPrefix) return 0;
  const size_t length = OrderedKeyLength(encoded.substr(1));
  return length == 0 ? 0 : 1 + length;
}

std::string MetaKey(std::string_view name) {
  std::string out = WithPrefix(kMetaPrefix);
  out.append(name);
  return out;
}

}  // namespace mvcc
}  // namespace raftkv
