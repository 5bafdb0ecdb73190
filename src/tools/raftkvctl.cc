// raftkvctl: command-line client of a raftkv cluster.
//
//   raftkvctl [flags] put KEY VALUE    prints OK
//   raftkvctl [flags] get KEY          prints the value (exit 1 if absent)
//   raftkvctl [flags] del KEY          prints OK
//   raftkvctl [flags] cas KEY EXPECTED NEW
//                                      sets KEY to NEW iff it is EXPECTED; prints
//                                      OK, or FAILED current=<value> / FAILED (absent)
//                                      and exits 1
//   raftkvctl [flags] cas --absent KEY NEW
//                                      creates KEY with NEW iff it is absent
//   raftkvctl [flags] status [--json]  one row per endpoint (no redirect)
//
// Flags may appear anywhere on the command line. Exit codes: 0 success,
// 1 RPC error, missing key, CAS not swapped (or no endpoint answered status),
// 2 usage error.
// Output goes to stdout; errors are "error: <gRPC code>: <message>" on stderr.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "client/kv_client.h"
#include "client/grpc_runtime.h"
#include "client/json.h"

DEFINE_string(endpoints, "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003",
              "Comma-separated host:port list of the cluster's servers. Writes and "
              "reads follow the leader from there; status queries each of them.");
DEFINE_int32(timeout_ms, 5000,
             "Total time budget of put/get/del/cas in milliseconds, including retries "
             "while a leader is being found. Also caps each status query.");
DEFINE_int32(rpc_timeout_ms, 2000,
             "Deadline of a single RPC attempt in milliseconds (status: per endpoint).");
DEFINE_bool(json, false,
            "status: print a JSON array of objects with keys id, address, role, term, "
            "commit_index, applied_index, leader_id (and error for an unreachable "
            "endpoint) instead of a table.");
DEFINE_bool(absent, false,
            "cas: create-only; takes KEY NEW and swaps only if KEY is absent.");
DEFINE_bool(stale, false,
            "get: read the local, possibly stale, state of the first reachable "
            "endpoint instead of a linearizable read through the leader.");

namespace {

using raftkv::JsonString;

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

const char kUsage[] =
    "command-line client of a raftkv cluster.\n"
    "\n"
    "usage:\n"
    "  raftkvctl [flags] put KEY VALUE    set KEY to VALUE; prints OK\n"
    "  raftkvctl [flags] get KEY          print the value of KEY (exit 1 if absent)\n"
    "  raftkvctl [flags] del KEY          delete KEY; prints OK\n"
    "  raftkvctl [flags] cas KEY EXPECTED NEW\n"
    "                                     set KEY to NEW iff it is EXPECTED; prints OK,\n"
    "                                     else FAILED current=<value> or FAILED (absent), exit 1\n"
    "  raftkvctl [flags] cas --absent KEY NEW\n"
    "                                     create KEY with NEW iff it is absent (same output)\n"
    "  raftkvctl [flags] status [--json]  status of every endpoint (no redirect)\n"
    "\n"
    "flags (may appear anywhere; put '--' before a KEY or VALUE starting with '-'):\n"
    "  --endpoints=H:P[,H:P...]  servers (default 127.0.0.1:7001,127.0.0.1:7002,"
    "127.0.0.1:7003)\n"
    "  --timeout_ms=N            total time per operation incl. retries (default 5000)\n"
    "  --rpc_timeout_ms=N        time per attempt / per status query (default 2000)\n"
    "  --json                    status: JSON output\n"
    "  --stale                   get: possibly stale read from any node\n"
    "  --absent                  cas: the key must be absent (create-only)\n"
    "  --minloglevel=0 --v=1     client debug logging on stderr\n"
    "\n"
    "exit codes: 0 ok, 1 RPC error, key absent or CAS not swapped, 2 usage error.\n";

int Usage(const std::string& error) {
  if (!error.empty()) std::cerr << "raftkvctl: " << error << "\n\n";
  std::cerr << "raftkvctl: " << kUsage;
  return kExitUsage;
}

int RpcError(const grpc::Status& s) {
  std::cerr << "error: " << raftkv::StatusCodeName(s.error_code()) << ": "
            << s.error_message() << "\n";
  return kExitError;
}

// Separates flags from positional arguments. gflags accepts flags anywhere
// but reorders what follows "--" ahead of the other positional arguments, so
// the split is done here: *flags gets argv[0] and every flag (with its value
// when given as a separate argument) for gflags, *positional the rest in
// order. Unknown flags are reported here, as usage errors, rather than by
// gflags (which would exit with status 1).
bool SplitArgs(int argc, char** argv, std::vector<char*>* flags,
               std::vector<std::string>* positional, std::string* error) {
  flags->push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {  // the rest are positional
      positional->insert(positional->end(), argv + i + 1, argv + argc);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional->push_back(arg);
      continue;
    }
    const std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    const size_t eq = body.find('=');
    const std::string name = body.substr(0, eq);
    gflags::CommandLineFlagInfo info;
    if (gflags::GetCommandLineFlagInfo(name.c_str(), &info)) {
      flags->push_back(argv[i]);
      if (info.type != "bool" && eq == std::string::npos && i + 1 < argc) {
        flags->push_back(argv[++i]);  // "--flag value"
      }
      continue;
    }
    if (name.compare(0, 2, "no") == 0 && eq == std::string::npos &&
        gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) && info.type == "bool") {
      flags->push_back(argv[i]);  // --noflag
      continue;
    }
    *error = "unknown flag " + arg;
    return false;
  }
  flags->push_back(nullptr);  // argv[argc] is NULL by convention
  return true;
}


// The outcome of querying one endpoint.
struct NodeStatus {
  std::string endpoint;
  grpc::Status rpc;
  raftkv::StatusResponse resp;
};

void PrintStatusJson(const std::vector<NodeStatus>& nodes) {
  std::string out = "[";
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeStatus& n = nodes[i];
    const bool ok = n.rpc.ok();
    out += i == 0 ? "\n  {" : ",\n  {";
    out += "\"id\": " + std::to_string(ok ? n.resp.id() : 0);
    out += ", \"address\": " + JsonString(n.endpoint);
    out += ", \"role\": " + JsonString(ok ? n.resp.role() : "unreachable");
    out += ", \"term\": " + std::to_string(ok ? n.resp.term() : 0);
    out += ", \"commit_index\": " + std::to_string(ok ? n.resp.commit_index() : 0);
    out += ", \"applied_index\": " + std::to_string(ok ? n.resp.applied_index() : 0);
    out += ", \"leader_id\": " + std::to_string(ok ? n.resp.leader_id() : 0);
    if (!ok) {
      out += ", \"error\": " + JsonString(std::string(raftkv::StatusCodeName(n.rpc.error_code())) +
                                          ": " + n.rpc.error_message());
    }
    out += "}";
  }
  out += nodes.empty() ? "]\n" : "\n]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void PrintStatusTable(const std::vector<NodeStatus>& nodes) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"ID", "ADDRESS", "ROLE", "TERM", "COMMIT_INDEX", "APPLIED_INDEX", "LEADER_ID"});
  bool any_error = false;
  for (const NodeStatus& n : nodes) {
    if (n.rpc.ok()) {
      const auto& r = n.resp;
      rows.push_back({std::to_string(r.id()), n.endpoint, r.role(), std::to_string(r.term()),
                      std::to_string(r.commit_index()), std::to_string(r.applied_index()),
                      r.leader_id() == 0 ? "-" : std::to_string(r.leader_id())});
    } else {
      any_error = true;
      rows.push_back({"-", n.endpoint, "unreachable", "-", "-", "-", "-",
                      std::string(raftkv::StatusCodeName(n.rpc.error_code())) + ": " +
                          n.rpc.error_message()});
    }
  }
  if (any_error) rows[0].push_back("ERROR");
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    out += line + "\n";
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

int CmdStatus(raftkv::KvClient* client, const std::vector<std::string>& endpoints) {
  std::vector<NodeStatus> nodes(endpoints.size());
  const int timeout = std::max(1, std::min(FLAGS_timeout_ms, FLAGS_rpc_timeout_ms));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    nodes[i].endpoint = endpoints[i];
    threads.emplace_back([&, i] {
      nodes[i].rpc = client->StatusOf(endpoints[i], &nodes[i].resp, timeout);
    });
  }
  for (auto& t : threads) t.join();

  if (FLAGS_json) {
    PrintStatusJson(nodes);
  } else {
    PrintStatusTable(nodes);
  }
  for (const auto& n : nodes) {
    if (n.rpc.ok()) return kExitOk;
  }
  return kExitError;  // no endpoint answered
}

}  // namespace

int main(int argc, char** argv) {
  // Quiet by default: raftkvctl prints only its output. --minloglevel=0
  // (with --v=N for VLOGs) shows the client's logs on stderr.
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = google::GLOG_FATAL;

  gflags::SetUsageMessage(kUsage);
  std::string error;
  std::vector<char*> flag_argv;
  std::vector<std::string> args;
  if (!SplitArgs(argc, argv, &flag_argv, &args, &error)) return Usage(error);
  int flag_argc = static_cast<int>(flag_argv.size()) - 1;
  char** flag_argv_ptr = flag_argv.data();
  gflags::ParseCommandLineFlags(&flag_argc, &flag_argv_ptr, /*remove_flags=*/true);
  if (flag_argc > 1) return Usage(std::string("unexpected argument ") + flag_argv_ptr[1]);
  google::InitGoogleLogging(argv[0]);
  raftkv::InitGrpcRuntime();

  if (args.empty()) return Usage("missing command");
  const std::string cmd = args[0];
  args.erase(args.begin());

  auto want_args = [&](size_t n, const char* names) -> bool {
    if (args.size() == n) return true;
    error = cmd + " takes " + names;
    return false;
  };
  if (cmd == "put") {
    if (!want_args(2, "KEY VALUE")) return Usage(error);
  } else if (cmd == "get" || cmd == "del") {
    if (!want_args(1, "KEY")) return Usage(error);
  } else if (cmd == "cas") {
    if (FLAGS_absent ? !want_args(2, "--absent KEY NEW") : !want_args(3, "KEY EXPECTED NEW")) {
      return Usage(error);
    }
  } else if (cmd == "status") {
    if (!want_args(0, "no arguments")) return Usage(error);
  } else {
    return Usage("unknown command \"" + cmd + "\"");
  }
  if (FLAGS_timeout_ms <= 0) return Usage("--timeout_ms must be positive");
  if (FLAGS_rpc_timeout_ms <= 0) return Usage("--rpc_timeout_ms must be positive");

  raftkv::ClientOptions options;
  if (!raftkv::ParseEndpointList(FLAGS_endpoints, &options.endpoints, &error)) {
    return Usage("--endpoints: " + error);
  }
  options.timeout_ms = FLAGS_timeout_ms;
  options.rpc_timeout_ms = FLAGS_rpc_timeout_ms;
  const std::vector<std::string> endpoints = options.endpoints;
  raftkv::KvClient client(std::move(options));

  if (cmd == "status") return CmdStatus(&client, endpoints);

  if (cmd == "put") {
    grpc::Status s = client.Put(args[0], args[1]);
    if (!s.ok()) return RpcError(s);
    std::cout << "OK\n";
    return kExitOk;
  }
  if (cmd == "cas") {
    const std::string& key = args[0];
    const std::string* expected = FLAGS_absent ? nullptr : &args[1];
    const std::string& value = args.back();
    bool swapped = false, found = false;
    std::string current;
    grpc::Status s = client.CompareAndSwap(key, expected, value, &swapped, &found, &current);
    if (!s.ok()) return RpcError(s);
    if (swapped) {
      std::cout << "OK\n";
      return kExitOk;
    }
    const std::string out = found ? "FAILED current=" + current + "\n" : "FAILED (absent)\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    return kExitError;
  }
  if (cmd == "get") {
    std::string value;
    bool found = false;
    grpc::Status s = client.Get(args[0], &value, &found, FLAGS_stale);
    if (!s.ok()) return RpcError(s);
    if (!found) {
      std::cerr << "error: key \"" << args[0] << "\" not found\n";
      return kExitError;
    }
    value += '\n';
    std::fwrite(value.data(), 1, value.size(), stdout);
    return kExitOk;
  }
  // del
  bool existed = false;
  grpc::Status s = client.Delete(args[0], &existed);
  if (!s.ok()) return RpcError(s);
  std::cout << "OK\n";
  if (!existed) std::cerr << "(key was absent)\n";
  return kExitOk;
}
