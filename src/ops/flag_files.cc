#include "ops/flag_files.h"

#include <gflags/gflags.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>

namespace raftkv {

namespace {

bool ParsesAs(const std::string& type, const std::string& value) {
  if (type == "string") return true;
  if (type == "bool") {
    for (const char* ok : {"true", "false", "1", "0", "yes", "no", "t", "f", "y", "n"}) {
      if (value == ok) return true;
    }
    return false;
  }
  if (value.empty()) return false;
  char* end = nullptr;
  errno = 0;
  if (type == "double") {
    std::strtod(value.c_str(), &end);
    return errno == 0 && *end == '\0';
  }
  const bool is_unsigned = type == "uint32" || type == "uint64";
  if (is_unsigned && value[0] == '-') return false;
  if (is_unsigned) {
    const unsigned long long v = std::strtoull(value.c_str(), &end, 0);
    if (errno != 0 || *end != '\0') return false;
    return type == "uint64" || v <= std::numeric_limits<uint32_t>::max();
  }
  const long long v = std::strtoll(value.c_str(), &end, 0);
  if (errno != 0 || *end != '\0') return false;
  return type == "int64" || (v >= std::numeric_limits<int32_t>::min() &&
                             v <= std::numeric_limits<int32_t>::max());
}

// `from` is the "FILE:LINE" of the --flagfile line naming `path` (empty for
// the command line), so a missing nested file names the line to fix.
Status CheckFile(const std::string& path, const std::string& from, int depth,
                 std::map<std::string, std::string>* origin) {
  if (depth > 8) return Status::InvalidArgument(path + ": --flagfile nested too deeply");
  std::ifstream in(path);
  if (!in) {
    return Status::IOError((from.empty() ? "" : from + ": ") + "cannot open flag file " + path +
                           ": " + std::strerror(errno));
  }
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    const std::string where = path + ":" + std::to_string(lineno);
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const size_t last = line.find_last_not_of(" \t\r");
    std::string text = line.substr(first, last - first + 1);
    if (text[0] != '-') {
      return Status::InvalidArgument(where + ": expected --name=value, got '" + text + "'");
    }
    text.erase(0, text.compare(0, 2, "--") == 0 ? 2 : 1);
    const size_t eq = text.find('=');
    std::string name = text.substr(0, eq);
    const bool has_value = eq != std::string::npos;
    std::string value = has_value ? text.substr(eq + 1) : "";
    gflags::CommandLineFlagInfo info;
    bool found = gflags::GetCommandLineFlagInfo(name.c_str(), &info);
    if (!found && !has_value && name.compare(0, 2, "no") == 0 &&
        gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) && info.type == "bool") {
      name = name.substr(2);
      value = "false";
      found = true;
    }
    if (!found) return Status::InvalidArgument(where + ": unknown flag --" + name);
    if (!has_value && info.type == "bool") value = "true";
    if (!has_value && info.type != "bool" && value.empty()) {
      return Status::InvalidArgument(where + ": --" + name + " needs a value (--" + name +
                                     "=...)");
    }
    if (!ParsesAs(info.type, value)) {
      return Status::InvalidArgument(where + ": --" + name + "=" + value + ": not a valid " +
                                     info.type);
    }
    if (name == "flagfile") {
      Status s = CheckFile(value, where, depth + 1, origin);
      if (!s.ok()) return s;
    }
    if (origin != nullptr) (*origin)[name] = where;
  }
  return Status::OK();
}

}  // namespace

Status CheckFlagFiles(int argc, char** argv, std::map<std::string, std::string>* origin) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string path;
    for (const char* prefix : {"--flagfile=", "-flagfile="}) {
      if (arg.compare(0, std::char_traits<char>::length(prefix), prefix) == 0) {
        path = arg.substr(std::char_traits<char>::length(prefix));
      }
    }
    if ((arg == "--flagfile" || arg == "-flagfile") && i + 1 < argc) path = argv[++i];
    if (path.empty()) {
      // A flag on the command line after a flag file overrides the file's.
      if (origin != nullptr && arg.size() > 1 && arg[0] == '-') {
        const size_t start = arg.compare(0, 2, "--") == 0 ? 2 : 1;
        const std::string name = arg.substr(start, arg.find('=') - start);
        origin->erase(name);
        if (name.compare(0, 2, "no") == 0) origin->erase(name.substr(2));
      }
      continue;
    }
    Status s = CheckFile(path, "", 0, origin);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

}  // namespace raftkv
