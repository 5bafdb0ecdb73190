#include "tools/raftkvctl_output.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdio>

namespace raftkv {
namespace ctl {

bool ParseOutputFormat(const std::string& text, OutputFormat* out) {
  if (text == "simple") {
    *out = OutputFormat::kSimple;
  } else if (text == "json") {
    *out = OutputFormat::kJson;
  } else if (text == "table") {
    *out = OutputFormat::kTable;
  } else {
    return false;
  }
  return true;
}

std::string JsonLine(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;  // create_revision, as in the .proto and etcdctl
  std::string out;
  const auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) {  // not expected for the API's messages; say so rather than print half
    out = "{\"error\": \"cannot print " + message.GetTypeName() + " as JSON\"}";
  }
  out += '\n';
  return out;
}

void Emit(const std::string& out) { std::fwrite(out.data(), 1, out.size(), stdout); }

void PrintRows(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  Emit(out);
}

}  // namespace ctl
}  // namespace raftkv
