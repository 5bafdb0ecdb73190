// etcdctl's habits in raftkvctl: the pieces of its command line that need
// parsing of their own, kept free of flags and connections so that they are
// tested alone (src/gtest/tools):
//  - durations as Go writes them (--command-timeout=5s, --dial-timeout=500ms);
//  - which of --endpoints, $RAFTKV_ENDPOINTS and $ETCDCTL_ENDPOINTS names the
//    servers, and https:// endpoints without a CA;
//  - "did you mean" for a mistyped command or flag, and a pointer to etcdctl
//    for etcdctl's commands raftkvctl does not have;
//  - `txn -i`: etcdctl's interactive transaction, section by section with its
//    prompts;
//  - sizes printed as etcdctl prints them (snapshot status).
#pragma once

#include <cstdint>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/api.h"

namespace raftkv {
namespace ctl {

// A duration in Go's syntax (time.ParseDuration, as etcdctl's flags take
// them): one or more decimal numbers, each with an optional fraction and a
// unit (ns, us, µs, ms, s, m, h), e.g. 500ms, 5s, 1m30s, 1.5s; "0" alone.
// Rounded up to whole milliseconds. False and *error (naming `flag`) on
// anything else, a negative value or more than 24 days.
bool ParseDurationMs(const std::string& flag, const std::string& text, int64_t* ms,
                     std::string* error);

// Where the endpoints come from when --cluster_file is not given: --endpoints
// when it was given, else $RAFTKV_ENDPOINTS, else $ETCDCTL_ENDPOINTS, else
// --endpoints' default. An environment variable that is unset or empty does
// not count.
struct EndpointChoice {
  std::string list;    // comma-separated, as given
  std::string source;  // "--endpoints", "RAFTKV_ENDPOINTS" or "ETCDCTL_ENDPOINTS"
};
EndpointChoice ChooseEndpoints(bool flag_given, const std::string& flag_value,
                               const char* raftkv_env, const char* etcdctl_env);

// An https:// endpoint means the servers expect TLS; without a CA
// (--cacert / --tls_ca_file) raftkvctl would dial them in plaintext. False
// and *error naming the endpoint in that case.
bool CheckEndpointSchemes(const std::string& list, bool tls, const std::string& source,
                          std::string* error);

// Optimal string alignment distance (insertions, deletions, substitutions
// and transpositions of neighbours each count 1).
size_t EditDistance(const std::string& a, const std::string& b);

// The candidate closest to `name`, or "" when none is close enough to be
// what was meant: at most 1 edit for names of up to 3 characters, 2 up to 6,
// 3 beyond; or `name` (3 characters or more) is the start of exactly one
// candidate. Ties go to the earlier candidate.
std::string ClosestName(const std::string& name, const std::vector<std::string>& candidates);

// " (did you mean X?)" with `quote` around the closest candidate, or "".
std::string DidYouMean(const std::string& name, const std::vector<std::string>& candidates,
                       const std::string& prefix = "", const char* quote = "\"");

// For an etcdctl command that raftkvctl does not have (compaction, defrag,
// alarm, lock, elect, ...): the usage error that says to use etcdctl
// instead. "" for any other word.
std::string EtcdctlOnlyCommand(const std::string& cmd);

// etcdctl's interactive txn prompts, printed before each section.
extern const char* const kTxnPrompts[3];

// Reads a transaction in etcdctl's txn format (client/txn_text.h) line by
// line: compares, blank line, success requests, blank line, failure
// requests, then a blank line or the end of input, which ends it (input
// after it is left unread). With `prompts` (txn -i) etcdctl's prompt is
// written there before each section. A malformed line stops the reading at
// once: InvalidArgument "line N: ...".
Status ReadTxnSections(std::istream& in, std::ostream* prompts, TxnRequest* txn);

// A byte count as etcdctl prints sizes (Go's humanize.Bytes: SI units,
// "123 B", "8.2 kB", "21 MB").
std::string HumanBytes(uint64_t bytes);

}  // namespace ctl
}  // namespace raftkv
