// etcdctl's habits in raftkvctl: durations, endpoint sources, "did you mean"
// and txn -i (see raftkvctl_etcd.h).
#include "tools/raftkvctl_etcd.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "client/txn_text.h"

namespace raftkv {
namespace ctl {

namespace {

// Nanoseconds per unit, longest spelling first where one is a prefix of
// another ("ms" before "m").
struct DurationUnit {
  const char* name;
  double nanos;
};
constexpr DurationUnit kDurationUnits[] = {
    {"ns", 1},        {"us", 1e3},       {"\xC2\xB5s", 1e3} /* µs */, {"\xCE\xBCs", 1e3} /* μs */,
    {"ms", 1e6},      {"s", 1e9},        {"m", 60e9},                 {"h", 3600e9},
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// One "<number><unit>" of a duration at text[*pos]: its nanoseconds.
bool DurationTerm(const std::string& text, size_t* pos, double* nanos) {
  const size_t start = *pos;
  size_t i = start;
  while (i < text.size() && IsDigit(text[i])) ++i;
  const size_t int_end = i;
  size_t frac_digits = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && IsDigit(text[i])) ++i, ++frac_digits;
  }
  if (int_end == start && frac_digits == 0) return false;  // no digits at all
  const double value = std::strtod(text.substr(start, i - start).c_str(), nullptr);
  size_t unit_end = i;
  while (unit_end < text.size() && !IsDigit(text[unit_end]) && text[unit_end] != '.') ++unit_end;
  const std::string unit = text.substr(i, unit_end - i);
  for (const DurationUnit& u : kDurationUnits) {
    if (unit == u.name) {
      *nanos = value * u.nanos;
      *pos = unit_end;
      return true;
    }
  }
  return false;
}

}  // namespace

bool ParseDurationMs(const std::string& flag, const std::string& text, int64_t* ms,
                     std::string* error) {
  const std::string bad = flag + " takes a duration such as 500ms, 5s or 1m";
  if (text == "0") {
    *ms = 0;
    return true;
  }
  if (text.empty()) {
    *error = bad + ", not an empty value";
    return false;
  }
  if (text[0] == '-') {
    *error = flag + " must not be negative, not \"" + text + "\"";
    return false;
  }
  if (std::all_of(text.begin(), text.end(), IsDigit)) {
    *error = bad + ": \"" + text + "\" has no unit";
    return false;
  }
  double nanos = 0;
  for (size_t pos = text[0] == '+' ? 1 : 0; pos < text.size();) {
    double term = 0;
    if (!DurationTerm(text, &pos, &term)) {
      *error = bad + ", not \"" + text + "\"";
      return false;
    }
    nanos += term;
  }
  constexpr double kMaxNanos = 24.0 * 24 * 3600e9;  // fits raftkvctl's int32 milliseconds
  if (nanos > kMaxNanos) {
    *error = flag + " is at most 24 days (576h), not \"" + text + "\"";
    return false;
  }
  *ms = static_cast<int64_t>(std::ceil(nanos / 1e6));
  return true;
}

EndpointChoice ChooseEndpoints(bool flag_given, const std::string& flag_value,
                               const char* raftkv_env, const char* etcdctl_env) {
  if (flag_given) return {flag_value, "--endpoints"};
  if (raftkv_env != nullptr && *raftkv_env != '\0') return {raftkv_env, "RAFTKV_ENDPOINTS"};
  if (etcdctl_env != nullptr && *etcdctl_env != '\0') return {etcdctl_env, "ETCDCTL_ENDPOINTS"};
  return {flag_value, "--endpoints"};
}

bool CheckEndpointSchemes(const std::string& list, bool tls, const std::string& source,
                          std::string* error) {
  if (tls) return true;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(start, comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    if (item.compare(0, 8, "https://") == 0) {
      *error = source + ": " + item +
               " is an https endpoint but no CA certificate was given: pass --cacert=FILE "
               "(or --tls_ca_file) to connect with TLS";
      return false;
    }
    start = comma + 1;
  }
  return true;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::string ClosestName(const std::string& name, const std::vector<std::string>& candidates) {
  const size_t allowed = name.size() <= 3 ? 1 : name.size() <= 6 ? 2 : 3;
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  std::string prefix_of;
  int prefix_matches = 0;
  for (const std::string& c : candidates) {
    if (c == name) continue;
    const size_t d = EditDistance(name, c);
    if (d <= allowed && d < best_distance) {
      best = c;
      best_distance = d;
    }
    if (name.size() >= 3 && c.compare(0, name.size(), name) == 0 && c != prefix_of) {
      if (prefix_matches == 0) prefix_of = c;
      ++prefix_matches;
    }
  }
  if (!best.empty()) return best;
  return prefix_matches == 1 ? prefix_of : "";
}

std::string DidYouMean(const std::string& name, const std::vector<std::string>& candidates,
                       const std::string& prefix, const char* quote) {
  const std::string closest = ClosestName(name, candidates);
  if (closest.empty()) return "";
  return std::string(" (did you mean ") + quote + prefix + closest + quote + "?)";
}

std::string EtcdctlOnlyCommand(const std::string& cmd) {
  // etcdctl's commands that work against raftkv's etcd API.
  static const char* const kUseEtcdctl[] = {"defrag", "alarm", "lock", "elect", "make-mirror",
                                            "check", "compaction"};
  for (const char* name : kUseEtcdctl) {
    if (cmd == name) {
      return cmd + " is an etcdctl command that raftkvctl does not have; use etcdctl: raftkv "
                   "serves etcd's API (ETCDCTL_API=3 etcdctl --endpoints=... " + cmd + ")";
    }
  }
  if (cmd == "auth" || cmd == "user" || cmd == "role") {
    return cmd + " is an etcdctl command that raftkvctl does not have: raftkv has no users or "
                 "roles; servers take bearer tokens (--token_file)";
  }
  return "";
}

const char* const kTxnPrompts[3] = {"compares:", "success requests (get, put, del):",
                                    "failure requests (get, put, del):"};

Status ReadTxnSections(std::istream& in, std::ostream* prompts, TxnRequest* txn) {
  txn->clear_compare();
  txn->clear_success();
  txn->clear_failure();
  int section = 0;  // compares, success, failure
  int number = 0;
  if (prompts != nullptr) *prompts << kTxnPrompts[0] << std::endl;
  std::string line;
  while (section < 3 && std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r\n\v\f") == std::string::npos) {
      ++section;
      if (prompts != nullptr && section < 3) *prompts << kTxnPrompts[section] << std::endl;
      continue;
    }
    Status s = section == 0   ? ParseTxnCompare(line, number, txn->add_compare())
               : section == 1 ? ParseTxnRequest(line, number, txn->add_success())
                              : ParseTxnRequest(line, number, txn->add_failure());
    if (!s.ok()) return s;
  }
  // The end of input ends whatever section it falls in; etcdctl's prompts for
  // the sections left still appear.
  while (prompts != nullptr && ++section < 3) *prompts << kTxnPrompts[section] << std::endl;
  return Status::OK();
}

std::string HumanBytes(uint64_t bytes) {
  if (bytes < 10) return std::to_string(bytes) + " B";
  static const char* const kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  const double value = static_cast<double>(bytes);
  const int e = static_cast<int>(std::floor(std::log(value) / std::log(1000.0)));
  const double scaled = std::floor(value / std::pow(1000.0, e) * 10 + 0.5) / 10;
  char text[32];
  std::snprintf(text, sizeof(text), scaled < 10 ? "%.1f %s" : "%.0f %s", scaled, kUnits[e]);
  return text;
}

}  // namespace ctl
}  // namespace raftkv
