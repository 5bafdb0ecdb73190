// A strict parser of the Prometheus text exposition format, version 0.0.4,
// for the tests of the metrics (metrics_test.cc, server_metrics_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace raftkv {
namespace testing_util {

// ---------------------------------------------------------------------------
// A strict parser of the text exposition format (what Prometheus accepts,
// and the conventions we promise: HELP and TYPE for every family before its
// samples, counters named *_total, cumulative histogram buckets ending with
// +Inf equal to _count).
// ---------------------------------------------------------------------------

struct Exposition {
  std::map<std::string, std::string> type;  // family -> type
  std::map<std::string, std::string> help;
  std::map<std::string, double> series;     // "name{a=\"b\",...}" (as written) -> value
  std::string error;                        // empty: valid
};

inline bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
inline bool IsNameChar(char c) { return IsNameStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

inline bool ParseName(const std::string& s, size_t* pos, std::string* name) {
  const size_t start = *pos;
  if (*pos >= s.size() || !IsNameStart(s[*pos])) return false;
  while (*pos < s.size() && IsNameChar(s[*pos])) ++*pos;
  *name = s.substr(start, *pos - start);
  return true;
}

inline bool ParseValue(const std::string& text, double* v) {
  if (text == "+Inf") *v = HUGE_VAL;
  else if (text == "-Inf") *v = -HUGE_VAL;
  else if (text == "NaN") *v = std::nan("");
  else {
    if (text.empty()) return false;
    char* end = nullptr;
    *v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) return false;
  }
  return true;
}

inline std::string FamilyOf(const std::string& name, const std::map<std::string, std::string>& types) {
  if (types.count(name) != 0) return name;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string sfx = suffix;
    if (name.size() > sfx.size() && name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) {
      const std::string base = name.substr(0, name.size() - sfx.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return "";
}

inline Exposition ParseExposition(const std::string& text) {
  Exposition e;
  if (text.empty() || text.back() != '\n') {
    e.error = "does not end with a newline";
    return e;
  }
  std::set<std::string> finished;  // families whose samples ended
  std::string current;             // family of the previous line
  // Histograms: (family, labels without le) -> buckets in order.
  std::map<std::string, std::vector<std::pair<double, double>>> buckets;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    const size_t eol = text.find('\n', pos);
    const std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    auto fail = [&](const std::string& why) {
      e.error = "line " + std::to_string(line_no) + " '" + line + "': " + why;
      return e;
    };
    if (line.empty()) return fail("empty line");
    if (line[0] == '#') {
      const bool is_help = line.compare(0, 7, "# HELP ") == 0;
      const bool is_type = line.compare(0, 7, "# TYPE ") == 0;
      if (!is_help && !is_type) return fail("comment that is not HELP or TYPE");
      size_t p = 7;
      std::string name;
      if (!ParseName(line, &p, &name) || p >= line.size() || line[p] != ' ') {
        return fail("bad metric name");
      }
      const std::string rest = line.substr(p + 1);
      if (current != name && current != "") finished.insert(current);
      if (finished.count(name) != 0) return fail("family declared after its samples ended");
      current = name;
      if (is_help) {
        if (e.help.count(name) != 0) return fail("second HELP");
        if (e.type.count(name) != 0) return fail("HELP after TYPE");
        for (size_t i = 0; i < rest.size(); ++i) {
          if (rest[i] == '\\' && (i + 1 >= rest.size() || (rest[i + 1] != '\\' && rest[i + 1] != 'n'))) {
            return fail("bad escape in HELP");
          }
          if (rest[i] == '\\') ++i;
        }
        e.help[name] = rest;
      } else {
        if (e.type.count(name) != 0) return fail("second TYPE");
        if (rest != "counter" && rest != "gauge" && rest != "histogram") return fail("bad type");
        if (e.help.count(name) == 0) return fail("TYPE without HELP");
        if (rest == "counter" && (name.size() < 6 || name.compare(name.size() - 6, 6, "_total") != 0)) {
          return fail("counter not named *_total");
        }
        e.type[name] = rest;
      }
      continue;
    }
    size_t p = 0;
    std::string name;
    if (!ParseName(line, &p, &name)) return fail("bad sample name");
    const std::string family = FamilyOf(name, e.type);
    if (family.empty()) return fail("sample before its family's TYPE");
    if (family != current) return fail("sample of family " + family + " outside its group");
    std::string labels_key;  // labels without le
    std::string le;
    std::set<std::string> label_names;
    if (p < line.size() && line[p] == '{') {
      ++p;
      while (p < line.size() && line[p] != '}') {
        std::string lname;
        if (!ParseName(line, &p, &lname)) return fail("bad label name");
        if (!label_names.insert(lname).second) return fail("repeated label");
        if (line.compare(p, 2, "=\"") != 0) return fail("label without =\"");
        p += 2;
        std::string value;
        for (;;) {
          if (p >= line.size()) return fail("unterminated label value");
          const char c = line[p++];
          if (c == '"') break;
          if (c == '\\') {
            if (p >= line.size()) return fail("bad escape");
            const char n = line[p++];
            if (n == 'n') value += '\n';
            else if (n == '\\' || n == '"') value += n;
            else return fail("bad escape in a label value");
          } else {
            value += c;
          }
        }
        if (lname == "le") le = value;
        else labels_key += lname + "=" + value + ",";
        if (p < line.size() && line[p] == ',') ++p;
      }
      if (p >= line.size()) return fail("unterminated labels");
      ++p;
    }
    if (p >= line.size() || line[p] != ' ') return fail("no space before the value");
    double value;
    if (!ParseValue(line.substr(p + 1), &value)) return fail("bad value");
    const std::string series = line.substr(0, p);
    if (e.series.count(series) != 0) return fail("repeated series");
    e.series[series] = value;
    if (e.type[family] == "histogram") {
      const std::string key = family + "|" + labels_key;
      if (name == family + "_bucket") {
        double bound;
        if (le.empty() || !ParseValue(le, &bound)) return fail("bucket without a valid le");
        auto& b = buckets[key];
        if (!b.empty() && (bound <= b.back().first || value < b.back().second)) {
          return fail("buckets not ascending or not cumulative");
        }
        b.emplace_back(bound, value);
      } else if (!le.empty()) {
        return fail("le on a non-bucket sample");
      } else if (name == family + "_count") {
        auto& b = buckets[key];
        if (b.empty() || !std::isinf(b.back().first) || b.back().second != value) {
          return fail("_count differs from the +Inf bucket, or no +Inf bucket");
        }
      }
    }
  }
  return e;
}

inline double Value(const Exposition& e, const std::string& series) {
  auto it = e.series.find(series);
  if (it == e.series.end()) {
    ADD_FAILURE() << "no series " << series;
    return -1;
  }
  return it->second;
}

}  // namespace testing_util
}  // namespace raftkv
