// Member and client endpoints ("host:port"): parsing and checking, shared by
// the client library, the cluster file and the command-line tools.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace raftkv {

// Splits a comma-separated list of endpoints. Surrounding whitespace is
// trimmed and empty items are dropped; the items are not validated.
std::vector<std::string> SplitEndpoints(const std::string& csv);

// Checks that `endpoint` is "host:port": host a name or IPv4 address made of
// [A-Za-z0-9.-_], or a bracketed IPv6 address ("[::1]:7001"); port a decimal
// number in 1..65535. On success fills host/port (either may be null) and
// returns OK; otherwise InvalidArgument naming the bad input.
Status ParseEndpoint(const std::string& endpoint, std::string* host = nullptr, int* port = nullptr);

// An endpoint written as etcd's URLs are ("http://10.0.0.1:2379/") as
// host:port: the scheme and trailing slashes removed (TLS is chosen by the
// security flags, not the scheme).
std::string StripEndpointScheme(const std::string& endpoint);

// SplitEndpoints, StripEndpointScheme and ParseEndpoint on every item.
// InvalidArgument on an empty list or any bad item, naming it.
Status ParseEndpointList(const std::string& csv, std::vector<std::string>* endpoints);

}  // namespace raftkv
