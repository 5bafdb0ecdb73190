#include "client/txn_text.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <utility>

namespace raftkv {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

std::string TrimSpace(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && IsSpace(s[b])) ++b;
  while (e > b && IsSpace(s[e - 1])) --e;
  return s.substr(b, e - b);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(uint32_t r, std::string* out) {
  if (r < 0x80) {
    out->push_back(static_cast<char>(r));
  } else if (r < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (r >> 6)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3f)));
  } else if (r < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (r >> 12)));
    out->push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (r >> 18)));
    out->push_back(static_cast<char>(0x80 | ((r >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3f)));
  }
}

// Scans a quoted string starting at s[*pos] (which is ", ` or '): "..." with
// Go's escapes, `...` and '...' raw. On success *pos is just past the
// closing quote.
bool ScanQuoted(const std::string& s, size_t* pos, std::string* out, std::string* error) {
  const char quote = s[*pos];
  size_t i = *pos + 1;
  out->clear();
  if (quote == '`' || quote == '\'') {
    const size_t close = s.find(quote, i);
    if (close == std::string::npos) {
      *error = std::string("unterminated ") + quote + "quoted" + quote + " string";
      return false;
    }
    *out = s.substr(i, close - i);
    *pos = close + 1;
    return true;
  }
  while (i < s.size()) {
    const char c = s[i];
    if (c == '"') {
      *pos = i + 1;
      return true;
    }
    if (c == '\n') break;
    if (c != '\\') {
      out->push_back(c);
      ++i;
      continue;
    }
    if (i + 1 >= s.size()) break;
    const char e = s[i + 1];
    i += 2;
    switch (e) {
      case 'a': out->push_back('\a'); break;
      case 'b': out->push_back('\b'); break;
      case 'f': out->push_back('\f'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case 't': out->push_back('\t'); break;
      case 'v': out->push_back('\v'); break;
      case '\\': out->push_back('\\'); break;
      case '"': out->push_back('"'); break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (size_t k = 0; k < digits; ++k) {
          const int h = i + k < s.size() ? HexValue(s[i + k]) : -1;
          if (h < 0) {
            *error = std::string("invalid escape \\") + e + ": expected " + std::to_string(digits) +
                     " hexadecimal digits";
            return false;
          }
          v = v * 16 + static_cast<uint32_t>(h);
        }
        i += digits;
        if (e == 'x') {
          out->push_back(static_cast<char>(v));
        } else {
          if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) {
            *error = std::string("invalid escape \\") + e + ": not a valid Unicode code point";
            return false;
          }
          AppendUtf8(v, out);
        }
        break;
      }
      case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
        uint32_t v = static_cast<uint32_t>(e - '0');
        for (size_t k = 0; k < 2; ++k) {
          if (i + k >= s.size() || s[i + k] < '0' || s[i + k] > '7') {
            *error = "invalid octal escape: expected 3 octal digits";
            return false;
          }
          v = v * 8 + static_cast<uint32_t>(s[i + k] - '0');
        }
        i += 2;
        if (v > 255) {
          *error = "invalid octal escape: value over \\377";
          return false;
        }
        out->push_back(static_cast<char>(v));
        break;
      }
      default:
        *error = std::string("invalid escape \\") + e + " in a double-quoted string";
        return false;
    }
  }
  *error = "unterminated \"quoted\" string";
  return false;
}

// A decimal int64 as Go's strconv.ParseInt(s, 10, 64).
bool ParseDecimal(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  size_t i = (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (i == text.size()) return false;
  for (size_t k = i; k < text.size(); ++k) {
    if (!std::isdigit(static_cast<unsigned char>(text[k]))) return false;
  }
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || end != text.c_str() + text.size()) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

std::string Where(int line_number) {
  return line_number > 0 ? "line " + std::to_string(line_number) + ": " : "";
}

// Reads a key or value of a compare at s[*pos]: quoted, or a bare word up
// to whitespace or one of `stops`.
bool ScanOperand(const std::string& s, size_t* pos, const char* stops, std::string* out,
                 std::string* error) {
  if (*pos >= s.size()) {
    *error = "missing operand";
    return false;
  }
  const char c = s[*pos];
  if (c == '"' || c == '`' || c == '\'') return ScanQuoted(s, pos, out, error);
  size_t e = *pos;
  while (e < s.size() && !IsSpace(s[e]) && std::string(stops).find(s[e]) == std::string::npos) ++e;
  *out = s.substr(*pos, e - *pos);
  *pos = e;
  return true;
}

void SkipSpace(const std::string& s, size_t* pos) {
  while (*pos < s.size() && IsSpace(s[*pos])) ++*pos;
}

// One flag of a request line: --name or --name=value (also -name).
struct Flag {
  std::string name;
  bool has_value = false;
  std::string value;
};

bool ParseBoolValue(const std::string& v, bool* out) {
  if (v == "true" || v == "1" || v == "t" || v == "T" || v == "TRUE" || v == "True") {
    *out = true;
    return true;
  }
  if (v == "false" || v == "0" || v == "f" || v == "F" || v == "FALSE" || v == "False") {
    *out = false;
    return true;
  }
  return false;
}

}  // namespace

Status UnquoteGo(const std::string& quoted, std::string* out) {
  if (quoted.size() < 2 || quoted[0] != '"') {
    return Status::InvalidArgument("not a double-quoted string: " + quoted);
  }
  size_t pos = 0;
  std::string error;
  if (!ScanQuoted(quoted, &pos, out, &error)) return Status::InvalidArgument(error + ": " + quoted);
  if (pos != quoted.size()) {
    return Status::InvalidArgument("text after the closing quote: " + quoted);
  }
  return Status::OK();
}

Status SplitTxnArgs(const std::string& line, std::vector<std::string>* args,
                    std::vector<bool>* quoted) {
  args->clear();
  quoted->clear();
  size_t pos = 0;
  for (;;) {
    SkipSpace(line, &pos);
    if (pos >= line.size()) break;
    const char c = line[pos];
    std::string arg;
    if (c == '"' || c == '\'') {
      std::string error;
      const size_t start = pos;
      if (!ScanQuoted(line, &pos, &arg, &error)) {
        return Status::InvalidArgument(error + " at column " + std::to_string(start + 1));
      }
      if (pos < line.size() && !IsSpace(line[pos])) {
        return Status::InvalidArgument("unexpected text after the quoted argument at column " +
                                       std::to_string(start + 1) +
                                       " (separate arguments with a space)");
      }
      quoted->push_back(true);
    } else {
      const size_t start = pos;
      while (pos < line.size() && !IsSpace(line[pos])) ++pos;
      arg = line.substr(start, pos - start);
      quoted->push_back(false);
    }
    args->push_back(std::move(arg));
  }
  return Status::OK();
}

Status ParseTxnCompare(const std::string& raw_line, int line_number, Compare* out) {
  const std::string line = TrimSpace(raw_line);
  auto fail = [&](const std::string& why) {
    return Status::InvalidArgument(Where(line_number) + "malformed comparison: " + why + ": " +
                                   line + " (expected e.g. value(\"key\") = \"v\")");
  };
  const size_t paren = line.find('(');
  if (paren == std::string::npos) return fail("no '(' after the target");
  const std::string target = TrimSpace(line.substr(0, paren));
  *out = Compare();
  if (target == "value" || target == "val") {
    out->set_target(Compare::VALUE);
  } else if (target == "version" || target == "ver") {
    out->set_target(Compare::VERSION);
  } else if (target == "create" || target == "c") {
    out->set_target(Compare::CREATE);
  } else if (target == "mod" || target == "m") {
    out->set_target(Compare::MOD);
  } else if (target == "lease") {
    out->set_target(Compare::LEASE);
  } else {
    return fail("unknown target \"" + target + "\" (one of value, version, create, mod, lease)");
  }
  size_t pos = paren + 1;
  std::string error, key, value;
  SkipSpace(line, &pos);
  if (!ScanOperand(line, &pos, ")", &key, &error)) return fail("key: " + error);
  SkipSpace(line, &pos);
  if (pos >= line.size() || line[pos] != ')') return fail("no ')' after the key");
  ++pos;
  SkipSpace(line, &pos);
  Compare::CompareResult result;
  const size_t op_start = pos;
  auto is_op_char = [&](size_t i) {
    return i < line.size() && std::string("=!<>").find(line[i]) != std::string::npos;
  };
  if (line.compare(pos, 2, "!=") == 0) {
    result = Compare::NOT_EQUAL;
    pos += 2;
  } else if (pos < line.size() && line[pos] == '=') {
    result = Compare::EQUAL;
    pos += 1;
  } else if (pos < line.size() && line[pos] == '<') {
    result = Compare::LESS;
    pos += 1;
  } else if (pos < line.size() && line[pos] == '>') {
    result = Compare::GREATER;
    pos += 1;
  } else {
    size_t e = pos;
    while (e < line.size() && !IsSpace(line[e])) ++e;
    return fail(pos >= line.size() ? "missing operator (one of = != < >)"
                                   : "unknown operator \"" + line.substr(pos, e - pos) +
                                         "\" (one of = != < >)");
  }
  if (is_op_char(pos)) {
    size_t e = pos;
    while (is_op_char(e)) ++e;
    return fail("unknown operator \"" + line.substr(op_start, e - op_start) +
                "\" (one of = != < >)");
  }
  SkipSpace(line, &pos);
  if (pos >= line.size()) return fail("missing value after the operator");
  if (!ScanOperand(line, &pos, "", &value, &error)) return fail("value: " + error);
  SkipSpace(line, &pos);
  if (pos != line.size()) {
    return fail("unexpected text after the value: \"" + line.substr(pos) + "\"");
  }

  out->set_result(result);
  out->set_key(key);
  int64_t number = 0;
  switch (out->target()) {
    case Compare::VALUE:
      out->set_value(value);
      break;
    case Compare::LEASE:
      if (!ParseLeaseIdHex(value, &number)) {
        return fail("lease \"" + value + "\" is not a hexadecimal lease id");
      }
      out->set_lease(number);
      break;
    default:
      if (!ParseDecimal(value, &number)) {
        return fail(target + " \"" + value + "\" is not a decimal number");
      }
      if (out->target() == Compare::VERSION) out->set_version(number);
      if (out->target() == Compare::CREATE) out->set_create_revision(number);
      if (out->target() == Compare::MOD) out->set_mod_revision(number);
      break;
  }
  return Status::OK();
}

namespace {

// The flags a txn request takes, and whether they take a value.
struct KnownFlag {
  const char* name;
  bool takes_value;
};

// The flag values of one txn request (defaults when absent).
struct RequestFlags {
  bool prefix = false, prev_kv = false, keys_only = false, count_only = false;
  int64_t lease = 0, limit = 0;
};

// Splits the arguments of request `cmd` (tokens[1..]) into positional ones
// and flags (those of `cmd` only; "--" ends the flags). The error says why
// (without the line).
Status SplitRequestArgs(const std::string& cmd, const std::vector<std::string>& tokens,
                        const std::vector<bool>& quoted, std::vector<std::string>* positional,
                        std::vector<Flag>* flags) {
  static const KnownFlag kPut[] = {{"lease", true}, {"prev-kv", false}};
  static const KnownFlag kGet[] = {
      {"prefix", false}, {"limit", true}, {"keys-only", false}, {"count-only", false}};
  static const KnownFlag kDel[] = {{"prefix", false}, {"prev-kv", false}};
  const KnownFlag* known = cmd == "put" ? kPut : cmd == "get" ? kGet : kDel;
  const size_t known_count = cmd == "put" ? 2 : cmd == "get" ? 4 : 2;

  bool flags_done = false;
  for (size_t i = 1; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (flags_done || quoted[i] || t.size() < 2 || t[0] != '-') {
      positional->push_back(t);
      continue;
    }
    if (t == "--") {
      flags_done = true;
      continue;
    }
    Flag f;
    const std::string body = t.substr(t[1] == '-' ? 2 : 1);
    const size_t eq = body.find('=');
    f.name = body.substr(0, eq);
    for (char& c : f.name) {
      if (c == '_') c = '-';
    }
    const KnownFlag* k = nullptr;
    for (size_t j = 0; j < known_count; ++j) {
      if (f.name == known[j].name) k = &known[j];
    }
    if (k == nullptr) return Status::InvalidArgument(cmd + " does not take the flag " + t);
    if (eq != std::string::npos) {
      f.has_value = true;
      f.value = body.substr(eq + 1);
    } else if (k->takes_value) {
      if (i + 1 >= tokens.size()) return Status::InvalidArgument("--" + f.name + " needs a value");
      f.has_value = true;
      f.value = tokens[++i];
    }
    flags->push_back(std::move(f));
  }
  return Status::OK();
}

// The values of `flags` (names already checked). The error says why.
Status ReadRequestFlags(const std::vector<Flag>& flags, RequestFlags* out) {
  for (const Flag& f : flags) {
    if (f.name == "lease") {
      if (!ParseLeaseIdHex(f.value, &out->lease)) {
        return Status::InvalidArgument("--lease \"" + f.value + "\" is not a hexadecimal lease id");
      }
    } else if (f.name == "limit") {
      if (!ParseDecimal(f.value, &out->limit) || out->limit < 0) {
        return Status::InvalidArgument("--limit \"" + f.value + "\" is not a number >= 0");
      }
    } else {
      bool v = true;
      if (f.has_value && !ParseBoolValue(f.value, &v)) {
        return Status::InvalidArgument("--" + f.name + " takes true or false, not \"" + f.value +
                                       "\"");
      }
      if (f.name == "prefix") out->prefix = v;
      if (f.name == "prev-kv") out->prev_kv = v;
      if (f.name == "keys-only") out->keys_only = v;
      if (f.name == "count-only") out->count_only = v;
    }
  }
  return Status::OK();
}

// The request `cmd` of `positional` arguments and `flags` into `out`
// (cleared first). The error says why.
Status BuildRequestOp(const std::string& cmd, const std::vector<std::string>& positional,
                      const RequestFlags& flags, RequestOp* out) {
  *out = RequestOp();
  if (cmd == "put") {
    if (positional.size() != 2) {
      return Status::InvalidArgument("put takes KEY VALUE, got " +
                                     std::to_string(positional.size()) + " argument" +
                                     (positional.size() == 1 ? "" : "s"));
    }
    PutRequest* put = out->mutable_request_put();
    put->set_key(positional[0]);
    put->set_value(positional[1]);
    put->set_lease(flags.lease);
    put->set_prev_kv(flags.prev_kv);
    return Status::OK();
  }
  if (positional.empty() || positional.size() > 2) {
    return Status::InvalidArgument(cmd + " takes KEY [RANGE_END], got " +
                                   std::to_string(positional.size()) + " arguments");
  }
  if (flags.prefix && positional.size() == 2) {
    return Status::InvalidArgument(cmd + " takes no RANGE_END with --prefix");
  }
  std::string key = positional[0], range_end = positional.size() == 2 ? positional[1] : "";
  if (flags.prefix) PrefixRange(positional[0], &key, &range_end);
  if (cmd == "get") {
    RangeRequest* get = out->mutable_request_range();
    get->set_key(key);
    get->set_range_end(range_end);
    get->set_limit(flags.limit);
    get->set_keys_only(flags.keys_only);
    get->set_count_only(flags.count_only);
  } else {
    DeleteRangeRequest* del = out->mutable_request_delete_range();
    del->set_key(key);
    del->set_range_end(range_end);
    del->set_prev_kv(flags.prev_kv);
  }
  return Status::OK();
}

}  // namespace

Status ParseTxnRequest(const std::string& raw_line, int line_number, RequestOp* out) {
  const std::string line = TrimSpace(raw_line);
  auto fail = [&](const std::string& why) {
    return Status::InvalidArgument(Where(line_number) + "invalid txn request: " + why + ": " +
                                   line);
  };
  std::vector<std::string> tokens;
  std::vector<bool> quoted;
  if (Status s = SplitTxnArgs(line, &tokens, &quoted); !s.ok()) return fail(s.message());
  if (tokens.empty()) return fail("empty request");
  const std::string cmd = tokens[0];
  if (quoted[0] || (cmd != "put" && cmd != "get" && cmd != "del")) {
    return fail("unknown request \"" + cmd + "\" (one of put, get, del)");
  }
  std::vector<std::string> positional;
  std::vector<Flag> flags;
  if (Status s = SplitRequestArgs(cmd, tokens, quoted, &positional, &flags); !s.ok()) {
    return fail(s.message());
  }
  RequestFlags values;
  if (Status s = ReadRequestFlags(flags, &values); !s.ok()) return fail(s.message());
  if (Status s = BuildRequestOp(cmd, positional, values, out); !s.ok()) return fail(s.message());
  return Status::OK();
}

Status ParseTxnText(const std::string& text, TxnRequest* txn) {
  txn->clear_compare();
  txn->clear_success();
  txn->clear_failure();
  enum Section { kCompares, kSuccess, kFailure, kDone } section = kCompares;
  size_t start = 0;
  int number = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(start, nl - start);
    start = nl + 1;
    ++number;
    if (TrimSpace(line).empty()) {
      if (section != kDone) section = static_cast<Section>(section + 1);
      continue;
    }
    switch (section) {
      case kCompares:
        if (Status s = ParseTxnCompare(line, number, txn->add_compare()); !s.ok()) return s;
        break;
      case kSuccess:
        if (Status s = ParseTxnRequest(line, number, txn->add_success()); !s.ok()) return s;
        break;
      case kFailure:
        if (Status s = ParseTxnRequest(line, number, txn->add_failure()); !s.ok()) return s;
        break;
      case kDone:
        return Status::InvalidArgument(
            "line " + std::to_string(number) +
            ": unexpected text after the failure requests (compares, blank line, success "
            "requests, blank line, failure requests, blank line): " + TrimSpace(line));
    }
  }
  return Status::OK();
}

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    const unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

void PrefixRange(const std::string& prefix, std::string* key, std::string* range_end) {
  if (prefix.empty()) {
    *key = std::string(1, '\0');
    *range_end = std::string(1, '\0');
    return;
  }
  *key = prefix;
  *range_end = PrefixEnd(prefix);
}

std::string LeaseIdHex(int64_t id) {
  static const char kDigits[] = "0123456789abcdef";
  uint64_t v = static_cast<uint64_t>(id);
  std::string out;
  do {
    out.insert(out.begin(), kDigits[v & 0xf]);
    v >>= 4;
  } while (v != 0);
  return out;
}

bool ParseLeaseIdHex(const std::string& text, int64_t* id) {
  if (text.empty() || text.size() > 16) return false;
  uint64_t v = 0;
  for (char c : text) {
    const int h = HexValue(c);
    if (h < 0) return false;
    v = v * 16 + static_cast<uint64_t>(h);
  }
  *id = static_cast<int64_t>(v);
  return true;
}

}  // namespace raftkv
