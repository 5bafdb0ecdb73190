// etcdctl's `txn` text format, parsed into a TxnRequest (raftkvctl txn), and
// the small conversions the etcdctl-style commands share: a prefix's
// range_end and lease ids in hexadecimal.
//
// The format (read from standard input by `etcdctl txn` and `raftkvctl txn`):
//
//   compares, one per line           value("k") = "v"
//                                    mod("k") > "5"
//   <blank line>
//   success requests, one per line   put k v --lease=1a2b --prev-kv
//                                    get k [RANGE_END] --prefix --limit=10
//   <blank line>
//   failure requests, one per line   del k [RANGE_END] --prefix --prev-kv
//   <blank line or end of input>
//
// Compares: TARGET("KEY") OP "VALUE" with TARGET one of value (val), version
// (ver), create (c), mod (m) or lease, and OP one of = != < >. VALUE is a
// decimal number for version/create/mod, a hexadecimal lease id (as etcdctl
// prints them) for lease. KEY and VALUE are Go double-quoted strings (the
// escapes of Go's strconv.Unquote: \n \t \\ \" \x41 \101 \u00e9 ...) or
// `raw` strings; a bare word without spaces is accepted as well.
//
// Requests: put KEY VALUE [--lease=HEX] [--prev-kv]
//           get KEY [RANGE_END] [--prefix] [--limit=N] [--keys-only] [--count-only]
//           del KEY [RANGE_END] [--prefix] [--prev-kv]
// Arguments are split at whitespace; "double quoted" (Go escapes) and
// 'single quoted' (raw) arguments may contain spaces and are never taken for
// flags. A flag's value may follow as the next argument (--limit 10); "--"
// ends the flags. Whitespace-only lines count as blank; the end of input
// ends whatever section it falls in (the later lists are then empty).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/api.h"

namespace raftkv {

// Parses the whole input into *txn (its session is left alone). On error
// InvalidArgument "line N: <what is wrong>: <the line>", and *txn is
// unspecified.
Status ParseTxnText(const std::string& text, TxnRequest* txn);

// One compare or one request line. line_number > 0 prefixes messages with
// "line N: ".
Status ParseTxnCompare(const std::string& line, int line_number, Compare* out);
Status ParseTxnRequest(const std::string& line, int line_number, RequestOp* out);

// Go's strconv.Unquote of a double-quoted string literal, quotes included
// ("\"a\\tb\"" -> "a<TAB>b"). Bytes that are not valid UTF-8 are kept as
// they are.
Status UnquoteGo(const std::string& quoted, std::string* out);

// Splits a request line into arguments as described above. (*quoted)[i]
// tells whether argument i was quoted (quoted arguments are never flags).
Status SplitTxnArgs(const std::string& line, std::vector<std::string>* args,
                    std::vector<bool>* quoted);

// The range_end that makes [prefix, range_end) the keys starting with
// `prefix`: its last byte below 0xff incremented, the 0xff bytes after it
// dropped; "\0" (every key from prefix on) when there is none (prefix empty
// or all 0xff bytes).
std::string PrefixEnd(const std::string& prefix);

// The range of a prefix as etcdctl's --prefix sets it: [prefix,
// PrefixEnd(prefix)), and every key ("\0", "\0") for the empty prefix.
void PrefixRange(const std::string& prefix, std::string* key, std::string* range_end);

// A lease id in lowercase hexadecimal without 0x ("1a2b"); negative ids as
// their 64-bit two's complement.
std::string LeaseIdHex(int64_t id);
// Parses 1 to 16 hexadecimal digits (either case, no 0x) into *id.
bool ParseLeaseIdHex(const std::string& text, int64_t* id);

}  // namespace raftkv
