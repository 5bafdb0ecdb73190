#include "common/endpoint.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace raftkv {
namespace {

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool IsHostChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

}  // namespace

std::vector<std::string> SplitEndpoints(const std::string& csv) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= csv.size()) {
    size_t comma = csv.find(',', start);
    if (comma == std::string::npos) comma = csv.size();
    std::string item = Trim(csv.substr(start, comma - start));
    if (!item.empty()) out.push_back(std::move(item));
    start = comma + 1;
  }
  return out;
}

Status ParseEndpoint(const std::string& endpoint, std::string* host, int* port) {
  auto fail = [&](const std::string& why) {
    return Status::InvalidArgument("bad endpoint \"" + endpoint + "\": " + why +
                                   " (expected host:port, e.g. 127.0.0.1:7001)");
  };
  size_t colon;
  std::string h;
  if (!endpoint.empty() && endpoint[0] == '[') {  // [IPv6]:port or [IPv6%zone]:port
    size_t close = endpoint.find(']');
    if (close == std::string::npos) return fail("unbalanced '[' (no closing ']')");
    h = endpoint.substr(1, close - 1);
    if (h.empty()) return fail("empty host");
    for (char c : h) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != ':' && c != '.' && c != '%') {
        return fail("invalid character in IPv6 address");
      }
    }
    if (close + 1 >= endpoint.size() || endpoint[close + 1] != ':') {
      return fail("missing ':port'");
    }
    colon = close + 1;
  } else {
    colon = endpoint.rfind(':');
    if (colon == std::string::npos) return fail("missing ':port'");
    h = endpoint.substr(0, colon);
    if (h.empty()) return fail("empty host");
    for (char c : h) {
      if (!IsHostChar(c)) {
        return fail(c == ':' ? "IPv6 addresses must be bracketed, e.g. [::1]:7001"
                             : "invalid character in host");
      }
    }
  }
  const std::string p = endpoint.substr(colon + 1);
  if (p.empty()) return fail("empty port");
  if (!std::all_of(p.begin(), p.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return fail("port '" + p + "' is not a number");
  }
  const int n = p.size() > 5 ? 0 : std::stoi(p);
  if (n < 1 || n > 65535) return fail("port " + p + " is out of range 1..65535");
  if (host != nullptr) *host = h;
  if (port != nullptr) *port = n;
  return Status::OK();
}

std::string StripEndpointScheme(const std::string& endpoint) {
  std::string e = endpoint;
  for (const char* scheme : {"http://", "https://"}) {
    const std::string prefix(scheme);
    if (e.size() > prefix.size() && e.compare(0, prefix.size(), prefix) == 0) {
      e = e.substr(prefix.size());
      break;
    }
  }
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

Status ParseEndpointList(const std::string& csv, std::vector<std::string>* endpoints) {
  std::vector<std::string> list = SplitEndpoints(csv);
  if (list.empty()) return Status::InvalidArgument("no endpoints given (expected host:port[,host:port...])");
  for (auto& e : list) {
    e = StripEndpointScheme(e);
    if (Status s = ParseEndpoint(e); !s.ok()) return s;
  }
  *endpoints = std::move(list);
  return Status::OK();
}

}  // namespace raftkv
