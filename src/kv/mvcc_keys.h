// The key layout of the multi-version store in an ordered byte store (one
// key space, ordered bytewise, as RocksDB's default comparator orders it).
// Each kind of record has a one-byte prefix:
//
//   'k' ord(key) ~revision(8) ~sub(4)  a version of `key`: newest first
//   'h' revision(8) sub(4)             the history, in revision order
//   'l' lease(8)                       a lease
//   'a' lease(8) ord(key)              a key attached to a lease
//   's' client(8)                      a client session
//   'r' client(8) sequence(8)          a session's saved answer
//   'm' name                           metadata (applied index, ...)
//
// Integers are big-endian, so they order as numbers; ~x is the complement,
// so larger numbers come first. ord(key) escapes every 0x00 byte of the key
// as 0x00 0xFF and ends with 0x00 0x01: ord(a) < ord(b) exactly when a < b,
// and no ord(key) is a prefix of another, so the versions of one key are
// contiguous and keys keep their order whatever follows them.
//
// Reading key K as of revision R is one seek: to VersionSeekKey(K, R), the
// first version of K at or below R. A range [a, b) of user keys is the
// range [KeyBound(a), KeyBound(b)) of encoded keys.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace raftkv {
namespace mvcc {

constexpr char kVersionPrefix = 'k';
constexpr char kHistoryPrefix = 'h';
constexpr char kLeasePrefix = 'l';
constexpr char kLeaseKeyPrefix = 'a';
constexpr char kSessionPrefix = 's';
constexpr char kResultPrefix = 'r';
constexpr char kMetaPrefix = 'm';

// ord(key), appended to *out.
void AppendOrderedKey(std::string* out, std::string_view key);
// The length of the ord(key) at the front of `in`, its terminator included;
// 0 when `in` does not start with a well-formed one.
size_t OrderedKeyLength(std::string_view in);
// Reads ord(key) from the front of *in into *key and advances *in past it;
// false (nothing consumed) when *in does not start with a well-formed one.
bool ConsumeOrderedKey(std::string_view* in, std::string* key);

void AppendBigEndian64(std::string* out, uint64_t v);
void AppendBigEndian32(std::string* out, uint32_t v);
// Reads 8 / 4 bytes from the front of *in; false when too short.
bool ConsumeBigEndian64(std::string_view* in, uint64_t* v);
bool ConsumeBigEndian32(std::string_view* in, uint32_t* v);

// The version of `key` written at (revision, sub) (revision >= 0).
std::string VersionKey(std::string_view key, int64_t revision, uint32_t sub);
// Where the versions of `key` at or below `revision` begin.
std::string VersionSeekKey(std::string_view key, int64_t revision);
// The encoded keys of every version of `key` lie in
// [VersionsBegin(key), VersionsEnd(key)).
std::string VersionsBegin(std::string_view key);
std::string VersionsEnd(std::string_view key);
// A bound of a range of user keys: the versions of keys >= `key` sort at or
// after it, those of keys < `key` before it. "" is the start of all keys;
// VersionsLimit() the end of all of them.
std::string KeyBound(std::string_view key);
std::string VersionsLimit();
// Parses a VersionKey; false when `encoded` is not one.
bool ParseVersionKey(std::string_view encoded, std::string* key, int64_t* revision, uint32_t* sub);
// The front of a VersionKey that every version of its key shares
// (VersionsBegin of that key): `encoded` must be one that parses.
std::string_view VersionRowsPrefix(std::string_view encoded);

std::string HistoryKey(int64_t revision, uint32_t sub);
bool ParseHistoryKey(std::string_view encoded, int64_t* revision, uint32_t* sub);

std::string LeaseKey(int64_t lease);
std::string LeaseAttachKey(int64_t lease, std::string_view key);
bool ParseLeaseAttachKey(std::string_view encoded, int64_t* lease, std::string* key);
std::string SessionKey(uint64_t client_id);
std::string ResultKey(uint64_t client_id, uint64_t sequence);
std::string MetaKey(std::string_view name);

// How the rows are written, for a store that can keep an insert position per
// group of keys (RocksDB's memtable hints): the length of the prefix of
// `encoded` that names its group, or 0 for a key written at no predictable
// place. History rows are written in revision order, metadata rows over and
// over, session rows and saved answers near the last ones written (the
// clients' are few and close together): one group each, by the first byte.
// Versions are not grouped: they go where the client's keys put them.
size_t InsertGroupPrefix(std::string_view encoded);

// What one read of a key stays within (BackendView::NewLookupIterator): the
// length of the prefix of a version row that names its key ('k' ord(key)),
// so that a store can keep a filter of these prefixes and skip the files
// that hold no version of the key sought. 0 for every other row, and for a
// malformed one.
size_t LookupPrefix(std::string_view encoded);

}  // namespace mvcc
}  // namespace raftkv
