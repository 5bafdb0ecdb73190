// Minimal JSON output helpers for the command-line tools (raftkvctl status
// --json, the benchmark's --json_out); no JSON library is needed for these.
#pragma once

#include <string>

namespace raftkv {

// `s` as a JSON string literal, quotes included: escapes quote, backslash and
// control characters; other bytes are copied as they are.
std::string JsonString(const std::string& s);

}  // namespace raftkv
