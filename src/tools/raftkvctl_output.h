// raftkvctl's output formats (-w simple|json|table, as etcdctl's
// --write-out): JSON is protobuf's JSON printer applied to the API's
// response messages (field names as in the .proto files, bytes in base64,
// 64-bit integers as strings), one object per line; tables are left-aligned
// columns.
#pragma once

#include <string>
#include <vector>

#include <google/protobuf/message.h>

namespace raftkv {
namespace ctl {

enum class OutputFormat { kSimple, kJson, kTable };

// "simple", "json" or "table"; false for anything else.
bool ParseOutputFormat(const std::string& text, OutputFormat* out);

// `message` as one line of JSON, ending in a newline.
std::string JsonLine(const google::protobuf::Message& message);

// Writes `out` to standard output as is (values may hold any bytes).
void Emit(const std::string& out);

// Rows as left-aligned columns separated by two spaces; the first row is
// the header.
void PrintRows(const std::vector<std::vector<std::string>>& rows);

}  // namespace ctl
}  // namespace raftkv
