#include "storage/position_name.h"

namespace raftkv::position_name {
namespace {

bool ParseDigits(std::string_view s, uint64_t* out) {
  uint64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

void AppendPadded(uint64_t v, std::string* out) {
  const std::string digits = std::to_string(v);
  out->append(kDigits - digits.size(), '0');
  out->append(digits);
}

}  // namespace

std::string Format(std::string_view prefix, uint64_t index, uint64_t term, std::string_view suffix) {
  std::string name;
  name.reserve(prefix.size() + 2 * kDigits + 1 + suffix.size());
  name.append(prefix);
  AppendPadded(index, &name);
  name.push_back('-');
  AppendPadded(term, &name);
  name.append(suffix);
  return name;
}

bool Parse(std::string_view name, std::string_view prefix, std::string_view suffix, uint64_t* index,
           uint64_t* term) {
  if (name.size() != prefix.size() + 2 * kDigits + 1 + suffix.size()) return false;
  if (name.substr(0, prefix.size()) != prefix || !EndsWith(name, suffix)) return false;
  if (name[prefix.size() + kDigits] != '-') return false;
  uint64_t i = 0;
  uint64_t t = 0;
  if (!ParseDigits(name.substr(prefix.size(), kDigits), &i) ||
      !ParseDigits(name.substr(prefix.size() + kDigits + 1, kDigits), &t)) {
    return false;
  }
  *index = i;
  *term = t;
  return true;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool IsTableFile(std::string_view name) { return EndsWith(name, ".sst"); }

}  // namespace raftkv::position_name
