// raftkvctl: command-line client of a raftkv cluster.
//
// Key-value commands, in etcdctl's syntax and with its (simple) output:
//   raftkvctl [flags] put KEY [VALUE] [--lease=HEX] [--prev-kv]
//                                      prints OK (--prev-kv: then the previous key
//                                      and value, when there was one); without VALUE
//                                      the value is standard input, as is
//   raftkvctl [flags] get KEY [RANGE_END] [--prefix] [--limit=N] [--keys-only]
//                     [--count-only] [--rev=N] [--print-value-only] [--consistency=l|s]
//                                      each key on one line, its value on the next
//                                      (--keys-only: an empty line; --print-value-only:
//                                      values only; --count-only: the count). Nothing,
//                                      and exit 0, when nothing matches. --json: one
//                                      JSON object with the revision and each key's
//                                      revisions, version and lease.
//   raftkvctl [flags] del KEY [RANGE_END] [--prefix] [--prev-kv]
//                                      prints the number of keys deleted (--prev-kv:
//                                      then each deleted key and value)
//   raftkvctl [flags] txn              reads compares, success and failure requests
//                                      from stdin (etcdctl's format, client/txn_text.h);
//                                      prints SUCCESS or FAILURE, then for each response
//                                      a blank line and the response as above; exit 0
//                                      either way
//   raftkvctl [flags] watch KEY [RANGE_END] [--prefix] [--rev=N] [--prev-kv]
//                                      each event as PUT|DELETE, key, value lines
//                                      (--prev-kv: the type, the previous key and value,
//                                      then the key and value); until interrupted or the
//                                      servers end it with an error (exit 1); moves to
//                                      another member when its member goes away
//   raftkvctl [flags] lease grant TTL  prints lease <hex id> granted with TTL(<n>s)
//   raftkvctl [flags] lease revoke ID  prints lease <hex id> revoked
//   raftkvctl [flags] lease keep-alive [--once] ID
//                                      renews every TTL/3 (--once: once), printing lease
//                                      <hex id> keepalived with TTL(<n>); exit 1 with lease
//                                      <hex id> expired or revoked. when it is gone
//   raftkvctl [flags] lease timetolive ID [--keys]
//                                      lease <hex> granted with TTL(<g>s), remaining(<r>s)
//                                      [, attached keys([k1 k2])], or lease <hex> already
//                                      expired
//   raftkvctl [flags] lease list       found N leases, then one hex id per line
// Lease ids are hexadecimal, as printed.
//
// raftkv's own commands:
//   raftkvctl [flags] cas KEY EXPECTED NEW
//                                      sets KEY to NEW iff it is EXPECTED; prints
//                                      OK, or FAILED current=<value> / FAILED (absent)
//                                      and exits 1
//   raftkvctl [flags] cas --absent KEY NEW
//                                      creates KEY with NEW iff it is absent
//   raftkvctl [flags] batch put KEY VALUE|del KEY ...
//                                      all the ops as one log entry; prints OK
//   raftkvctl [flags] endpoint health [--cluster]
//                                      "<ep> is healthy: ..." per endpoint after a
//                                      linearizable read through it; exit 1 if any is not
//   raftkvctl [flags] endpoint status [--cluster]
//                                      etcdctl's comma-separated line per endpoint
//   raftkvctl [flags] status [--json]  one row per endpoint (no redirect)
//   raftkvctl [flags] snapshot         snapshot of --target (default: the first
//                                      endpoint) now, on its disk; prints index, term,
//                                      size, file
//   raftkvctl [flags] snapshot save FILE
//                                      a backup: --target takes a snapshot and streams
//                                      it here; written to FILE.part, checked (size,
//                                      SHA-256, every checksum and record), fsynced and
//                                      renamed to FILE; prints Snapshot saved at FILE
//                                      (revision R, index I, N bytes)
//   raftkvctl snapshot restore FILE --data-dir=DIR --id=N --cluster_file=CONF
//                                      offline: verifies the backup FILE and builds in
//                                      DIR (absent or empty) the data directory of
//                                      member N of the new cluster CONF; exit 2 when
//                                      DIR holds data, FILE fails verification or N is
//                                      not in CONF (doc/operations.md)
//   raftkvctl [flags] member list [--json]
//                                      the configuration as the leader sees it
//   raftkvctl [flags] member add ID HOST:PORT
//                                      add a (new, empty, started with --join) server
//                                      as a learner
//   raftkvctl [flags] member promote ID
//                                      make learner ID a voter; waits (--wait_timeout_ms)
//                                      while the leader refuses because it lags
//   raftkvctl [flags] member remove ID remove member ID (voter or learner)
//   raftkvctl [flags] transfer-leader ID
//                                      make voter ID the leader
//
// Membership and transfer commands find the leader themselves (following
// the members' leader hints, which may name members missing from
// --endpoints).
// Every command takes -w simple|json|table (--write-out): json prints the
// API's response messages with protobuf's JSON printer, one per line.
// --endpoints defaults to $RAFTKV_ENDPOINTS when that is set.
// Flags may appear anywhere on the command line. Exit codes: 0 success,
// 1 RPC error, CAS not swapped, lease expired (or no endpoint answered
// status), 2 usage error or malformed txn input.
// Output goes to stdout; errors are "error: <gRPC code>: <message>" on stderr.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdint>
#include <fstream>
#include <sstream>

#include <chrono>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <system_error>

#include "client/admin_client.h"
#include "client/channel_args.h"
#include "client/kv_client.h"
#include "client/grpc_runtime.h"
#include "client/security.h"
#include "client/json.h"
#include "client/txn_text.h"
#include "common/version.h"
#include "tools/raftkvctl_output.h"
#include "ops/backup.h"
#include "node/cluster_config.h"

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
            "endpoint) instead of a table. member list: print a JSON object (leader_id, term, "
            "commit_index, last_index, config_index, config_committed, from_leader, members "
            "[id, address, role, match_index, state, leader]). Older than -w json, which every "
            "command takes.");
DEFINE_bool(absent, false,
            "cas: create-only; takes KEY NEW and swaps only if KEY is absent.");
DEFINE_string(cluster_file, "",
              "Read the endpoints from this cluster file ('<id> <host:port>' per line, as "
              "given to the servers) instead of --endpoints. snapshot restore: the members "
              "of the new cluster (required).");
DEFINE_string(target, "",
              "snapshot, snapshot save: the member (host:port) to snapshot; default the first "
              "endpoint.");
DEFINE_int32(snapshot_timeout_ms, 600000,
             "snapshot save: deadline of the whole call in milliseconds (the member takes a "
             "snapshot, then streams it).");
DEFINE_bool(wait_caught_up, true,
            "member promote: while the leader refuses because the learner is not caught up "
            "(or another change is pending), retry until --wait_timeout_ms, printing progress.");
DEFINE_int32(wait_timeout_ms, 60000,
             "member promote: how long to keep retrying a refused promotion.");
DEFINE_bool(stale, false,
            "get: read the local, possibly stale, state of the first reachable "
            "endpoint instead of a linearizable read through the leader "
            "(as --consistency=s).");

namespace {

using raftkv::JsonString;
using raftkv::ctl::Emit;
using raftkv::ctl::JsonLine;
using raftkv::ctl::OutputFormat;
using raftkv::ctl::PrintRows;

// -w / --write-out (--json: json), set once before the command runs.
OutputFormat g_format = OutputFormat::kSimple;
bool Json() { return g_format == OutputFormat::kJson; }
bool Table() { return g_format == OutputFormat::kTable; }

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

const char kUsage[] =
    "command-line client of a raftkv cluster.\n"
    "\n"
    "usage (key-value commands: etcdctl's syntax and output):\n"
    "  raftkvctl [flags] put KEY [VALUE] [--lease=HEX] [--prev-kv]\n"
    "                                     set KEY to VALUE (without VALUE: standard input, as\n"
    "                                     is); prints OK (then the previous key and value\n"
    "                                     with --prev-kv)\n"
    "  raftkvctl [flags] get KEY [RANGE_END] [--prefix] [--limit=N] [--keys-only]\n"
    "                    [--count-only] [--rev=N] [--print-value-only] [--consistency=l|s]\n"
    "                                     each key then its value, one per line; nothing\n"
    "                                     (exit 0) when nothing matches\n"
    "  raftkvctl [flags] del KEY [RANGE_END] [--prefix] [--prev-kv]\n"
    "                                     delete; prints the number of keys deleted\n"
    "  raftkvctl [flags] txn              transaction read from stdin: compares, blank line,\n"
    "                                     success requests, blank line, failure requests,\n"
    "                                     e.g. value(\"k\") = \"v\" / mod(\"k\") > \"5\" and\n"
    "                                     put K V / get K --prefix / del K; prints SUCCESS or\n"
    "                                     FAILURE and the responses\n"
    "  raftkvctl [flags] watch KEY [RANGE_END] [--prefix] [--rev=N] [--prev-kv]\n"
    "                                     print each change (PUT|DELETE, key, value) until\n"
    "                                     interrupted\n"
    "  raftkvctl [flags] lease grant TTL  grant a lease of TTL seconds; prints its hex id\n"
    "  raftkvctl [flags] lease revoke ID  revoke lease ID (hex) and delete its keys\n"
    "  raftkvctl [flags] lease keep-alive [--once] ID\n"
    "                                     renew lease ID every TTL/3 (--once: once)\n"
    "  raftkvctl [flags] lease timetolive ID [--keys]\n"
    "                                     granted and remaining TTL (and attached keys)\n"
    "  raftkvctl [flags] lease list       every lease id\n"
    "\n"
    "raftkv's own commands:\n"
    "  raftkvctl [flags] cas KEY EXPECTED NEW\n"
    "                                     set KEY to NEW iff it is EXPECTED; prints OK,\n"
    "                                     else FAILED current=<value> or FAILED (absent), exit 1\n"
    "  raftkvctl [flags] cas --absent KEY NEW\n"
    "                                     create KEY with NEW iff it is absent (same output)\n"
    "  raftkvctl [flags] batch put KEY VALUE|del KEY ...\n"
    "                                     all the ops as one log entry (atomic); prints OK\n"
    "  raftkvctl [flags] endpoint health [--cluster]\n"
    "                                     a linearizable read through each endpoint (--cluster:\n"
    "                                     every member in the member list); exit 1 if any fails\n"
    "  raftkvctl [flags] endpoint status [--cluster]\n"
    "                                     id, version, leader?, term, indexes, revision of each\n"
    "  raftkvctl [flags] status [--json]  status of every endpoint, as a table (no redirect)\n"
    "  raftkvctl [flags] snapshot         take a snapshot on --target (default: first endpoint),\n"
    "                                     on its own disk\n"
    "  raftkvctl [flags] snapshot save FILE\n"
    "                                     back up: stream a fresh snapshot of --target into\n"
    "                                     FILE (verified before it is renamed into place)\n"
    "  raftkvctl snapshot restore FILE --data-dir=DIR --id=N --cluster_file=CONF\n"
    "                                     offline: build member N's data directory DIR of a\n"
    "                                     new cluster CONF from the backup FILE\n"
    "  raftkvctl [flags] member list [--json]\n"
    "                                     members as the leader sees them (role, match, state)\n"
    "  raftkvctl [flags] member add ID HOST:PORT\n"
    "                                     add a new server (started with --join) as a learner\n"
    "  raftkvctl [flags] member promote ID\n"
    "                                     make learner ID a voter once it has caught up\n"
    "  raftkvctl [flags] member remove ID remove member ID\n"
    "  raftkvctl [flags] transfer-leader ID\n"
    "                                     make voter ID the leader\n"
    "\n"
    "command options (etcdctl's; --opt=V or --opt V):\n"
    "  --prefix                  get, del, watch: every key starting with KEY\n"
    "  --limit=N                 get: at most N keys\n"
    "  --keys-only               get: keys without values\n"
    "  --count-only              get: only the number of keys\n"
    "  --print-value-only        get: values only\n"
    "  --rev=N                   get: read at revision N; watch: from revision N\n"
    "  --consistency=l|s         get: linearizable (default) or serializable (any member,\n"
    "                            possibly stale)\n"
    "  --prev-kv                 put, del, watch: also print the previous key-values\n"
    "  --lease=HEX               put: attach the key to this lease\n"
    "  --once                    lease keep-alive: renew once\n"
    "  --keys                    lease timetolive: list the attached keys\n"
    "  --cluster                 endpoint: every member of the cluster, not just --endpoints\n"
    "  -w, --write-out=FORMAT    every command: simple (default), json (the API's response\n"
    "                            messages, protobuf's JSON mapping: bytes in base64, one per\n"
    "                            line) or table (get, status, endpoint, member list, lease\n"
    "                            list, lease timetolive)\n"
    "  --data-dir=DIR            snapshot restore: the new member's data directory\n"
    "  --id=N                    snapshot restore: the new member's id (listed in\n"
    "                            --cluster_file)\n"
    "\n"
    "flags (may appear anywhere; put '--' before a KEY or VALUE starting with '-'):\n"
    "  --endpoints=H:P[,H:P...]  servers (default: $RAFTKV_ENDPOINTS, else 127.0.0.1:7001,\n"
    "                            127.0.0.1:7002,127.0.0.1:7003); any member serves any call;\n"
    "                            etcd's http://H:P and https://H:P forms are accepted\n"
    "  --timeout_ms=N            total time per operation incl. retries (default 5000);\n"
    "                            watch: to find another member after losing one\n"
    "  --rpc_timeout_ms=N        time per attempt / per status query (default 2000)\n"
    "  --cluster_file=PATH       take the endpoints from a cluster file instead (snapshot\n"
    "                            restore: the new cluster's members)\n"
    "  --target=H:P              snapshot, snapshot save: the member to snapshot\n"
    "  --snapshot_timeout_ms=N   snapshot save: deadline of the whole transfer (default 600000)\n"
    "  --json                    status, member list: their older JSON layout (see -w json)\n"
    "  --wait_caught_up          member promote: retry while refused (default true)\n"
    "  --wait_timeout_ms=N       member promote: how long to retry (default 60000)\n"
    "  --stale                   get: possibly stale read from any node (--consistency=s)\n"
    "  --absent                  cas: the key must be absent (create-only)\n"
    "  --tls_ca_file=PEM         TLS: the cluster CA (servers must present a certificate it signed)\n"
    "  --tls_cert_file=PEM --tls_key_file=PEM\n"
    "                            TLS: client certificate, for servers with --client_cert_required\n"
    "  --tls_server_name=NAME    TLS: name to expect in server certificates instead of the host\n"
    "  --token_file=PATH         bearer token (first line) for servers started with --token_file\n"
    "  --minloglevel=0 --v=1     client debug logging on stderr\n"
    "\n"
    "  raftkvctl version | --version   the version of raftkvctl and the API it speaks\n"
    "  raftkvctl help | --help | -h    this text\n"
    "\n"
    "exit codes: 0 ok, 1 RPC error or refusal, CAS not swapped or lease expired,\n"
    "2 usage error or malformed txn input.\n";

// A usage error: one line naming it, one line of hint, exit 2.
int Usage(const std::string& error) {
  std::cerr << "raftkvctl: " << error << "\n"
            << "run 'raftkvctl --help' for the commands and flags\n";
  return kExitUsage;
}

int Help() {
  std::cout << "raftkvctl: " << kUsage;
  return kExitOk;
}

int Version() {
  std::cout << "raftkvctl version: " << raftkv::Version() << "\n"
            << "git commit: " << raftkv::GitCommit() << "\n"
            << "API version: raftkv.v1\n";
  return kExitOk;
}

// --help, -h and --version are answered before gflags sees them (gflags'
// own --help lists every flag of every library and exits 1). Returns the
// exit code, or -1 to go on. Arguments after "--" are keys and values.
int EarlyFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-h" || arg == "-help") return Help();
    if (arg == "--version" || arg == "-version") return Version();
  }
  return -1;
}

int RpcError(const grpc::Status& s) {
  std::cerr << "error: " << raftkv::StatusCodeName(s.error_code()) << ": "
            << s.error_message() << "\n";
  // A server with TLS closes a plaintext connection at once.
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE && !raftkv::ProcessChannelSecurity()->tls() &&
      s.error_message().find("Socket closed") != std::string::npos) {
    std::cerr << "hint: the connection was closed at once; if the servers use TLS, pass "
                 "--tls_ca_file (doc/deployment.md#tls)\n";
  }
  return kExitError;
}

// The etcdctl-style options of the key-value commands (--prefix, --limit=N,
// --keys-only, ...). They are not gflags: gflags has no dashes in names, and
// each is only valid with some commands (checked by CommandOptions::Allow).
// "_" may stand for "-" (--keys_only).
struct CommandOptionSpec {
  const char* name;
  bool takes_value;
};
constexpr CommandOptionSpec kCommandOptions[] = {
    {"prefix", false},          {"limit", true},       {"keys-only", false},
    {"count-only", false},      {"rev", true},         {"print-value-only", false},
    {"consistency", true},      {"prev-kv", false},    {"lease", true},
    {"once", false},            {"keys", false},       {"write-out", true},
    {"cluster", false},         {"data-dir", true},    {"id", true},
};

const CommandOptionSpec* FindCommandOption(const std::string& name) {
  for (const auto& spec : kCommandOptions) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

// The command options given on the command line.
class CommandOptions {
 public:
  struct Given {
    std::string spelled;  // as written, for messages
    bool has_value = false;
    std::string value;
  };

  void Add(const std::string& name, Given given) { given_[name] = std::move(given); }

  // False (and *error) if an option outside `allowed` was given.
  bool Allow(const std::string& command, std::initializer_list<const char*> allowed,
             std::string* error) const {
    for (const auto& [name, given] : given_) {
      bool ok = false;
      for (const char* a : allowed) ok = ok || name == a;
      if (!ok) {
        *error = command + " does not take " + given.spelled;
        return false;
      }
    }
    return true;
  }

  bool Has(const char* name) const { return given_.count(name) > 0; }
  void Remove(const char* name) { given_.erase(name); }

  // A boolean option: absent false; --opt true; --opt=true|false.
  bool Bool(const char* name, bool* out, std::string* error) const {
    *out = false;
    auto it = given_.find(name);
    if (it == given_.end()) return true;
    if (!it->second.has_value) {
      *out = true;
      return true;
    }
    const std::string& v = it->second.value;
    if (v == "true" || v == "1" || v == "t") {
      *out = true;
    } else if (v != "false" && v != "0" && v != "f") {
      *error = "--" + std::string(name) + " takes true or false, not \"" + v + "\"";
      return false;
    }
    return true;
  }

  // A decimal option >= 0 (absent: 0).
  bool Count(const char* name, int64_t* out, std::string* error) const {
    *out = 0;
    auto it = given_.find(name);
    if (it == given_.end()) return true;
    const std::string& v = it->second.value;
    if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
      *error = "--" + std::string(name) + " takes a number >= 0, not \"" + v + "\"";
      return false;
    }
    *out = std::stoll(v);
    return true;
  }

  std::string Value(const char* name) const {
    auto it = given_.find(name);
    return it == given_.end() ? "" : it->second.value;
  }

 private:
  std::map<std::string, Given> given_;
};

// Separates flags from positional arguments. gflags accepts flags anywhere
// but reorders what follows "--" ahead of the other positional arguments, so
// the split is done here: *flags gets argv[0] and every flag (with its value
// when given as a separate argument) for gflags, *options the command
// options (kCommandOptions), *positional the rest in order. Unknown flags are
// reported here, as usage errors, rather than by gflags (which would exit
// with status 1).
bool SplitArgs(int argc, char** argv, std::vector<char*>* flags, CommandOptions* options,
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
    std::string dashed = name;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    if (dashed == "w") dashed = "write-out";  // etcdctl's -w json
    if (const CommandOptionSpec* spec = FindCommandOption(dashed)) {
      CommandOptions::Given given;
      given.spelled = arg;
      if (eq != std::string::npos) {
        given.has_value = true;
        given.value = body.substr(eq + 1);
      } else if (spec->takes_value) {
        if (i + 1 >= argc) {
          *error = "--" + dashed + " needs a value";
          return false;
        }
        given.has_value = true;
        given.value = argv[++i];  // "--limit 10"
      }
      options->Add(dashed, std::move(given));
      continue;
    }
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
  PrintRows(rows);
}

// "put K V" and "del K" groups, in order.
bool ParseBatch(const std::vector<std::string>& args, std::vector<raftkv::BatchOp>* ops,
                std::string* error) {
  for (size_t i = 0; i < args.size();) {
    raftkv::BatchOp op;
    if (args[i] == "put" && i + 2 < args.size()) {
      op.set_op(raftkv::BatchOp::PUT);
      op.set_key(args[i + 1]);
      op.set_value(args[i + 2]);
      i += 3;
    } else if (args[i] == "del" && i + 1 < args.size()) {
      op.set_op(raftkv::BatchOp::DELETE);
      op.set_key(args[i + 1]);
      i += 2;
    } else {
      *error = "expected \"put KEY VALUE\" or \"del KEY\" at \"" + args[i] + "\" (argument " +
               std::to_string(i + 1) + ")";
      return false;
    }
    ops->push_back(std::move(op));
  }
  if (ops->empty()) {
    *error = "takes one or more \"put KEY VALUE\" / \"del KEY\" operations";
    return false;
  }
  return true;
}

// The Status of every endpoint, asked in parallel, in the order given.
std::vector<NodeStatus> QueryStatuses(raftkv::KvClient* client, const std::vector<std::string>& endpoints) {
  std::vector<NodeStatus> nodes(endpoints.size());
  const int timeout = std::max(1, std::min(FLAGS_timeout_ms, FLAGS_rpc_timeout_ms));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    nodes[i].endpoint = endpoints[i];
    threads.emplace_back([&, i] { nodes[i].rpc = client->StatusOf(endpoints[i], &nodes[i].resp, timeout); });
  }
  for (auto& t : threads) t.join();
  return nodes;
}

int CmdStatus(raftkv::KvClient* client, const std::vector<std::string>& endpoints) {
  const std::vector<NodeStatus> nodes = QueryStatuses(client, endpoints);

  if (Json()) {
    // One StatusResponse per line; an endpoint that did not answer goes to stderr.
    for (const NodeStatus& n : nodes) {
      if (n.rpc.ok()) {
        Emit(JsonLine(n.resp));
      } else {
        std::cerr << n.endpoint << ": error: " << raftkv::StatusCodeName(n.rpc.error_code()) << ": "
                  << n.rpc.error_message() << "\n";
      }
    }
  } else if (FLAGS_json) {
    PrintStatusJson(nodes);
  } else {
    PrintStatusTable(nodes);
  }
  for (const auto& n : nodes) {
    if (n.rpc.ok()) return kExitOk;
  }
  return kExitError;  // no endpoint answered
}

// ---- endpoint health and status ----

// The address of every member in the configuration, from the first member
// of `endpoints` that answers (the leader's view when one answers).
bool MemberEndpoints(const std::vector<std::string>& endpoints, std::vector<std::string>* out) {
  raftkv::AdminClientOptions admin_options;
  admin_options.endpoints = endpoints;
  admin_options.timeout_ms = FLAGS_timeout_ms;
  admin_options.rpc_timeout_ms = FLAGS_rpc_timeout_ms;
  raftkv::AdminClient admin(admin_options);
  raftkv::ListMembersResponse list;
  grpc::Status s = admin.ListMembers(&list);
  if (!s.ok()) {
    std::cerr << "raftkvctl: --cluster: cannot read the member list: " << raftkv::StatusCodeName(s.error_code())
              << ": " << s.error_message() << "\n";
    return false;
  }
  out->clear();
  for (const auto& m : list.members()) {
    if (!m.address().empty()) out->push_back(m.address());
  }
  return !out->empty();
}

// Each endpoint is healthy if a linearizable read through it succeeds (the
// member forwards it to the leader, which confirms its leadership with a
// quorum). etcdctl's output; exit 1 if any endpoint is unhealthy.
int CmdEndpointHealth(const std::vector<std::string>& endpoints) {
  struct Result {
    grpc::Status status;
    double ms = 0;
  };
  std::vector<Result> results(endpoints.size());
  std::vector<std::thread> threads;
  const int timeout = std::max(1, std::min(FLAGS_timeout_ms, FLAGS_rpc_timeout_ms));
  for (size_t i = 0; i < endpoints.size(); ++i) {
    threads.emplace_back([&, i] {
      auto stub = raftkv::KV::NewStub(raftkv::MakeChannel(endpoints[i], raftkv::RaftkvChannelArguments()));
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout));
      raftkv::RangeRequest req;
      req.set_key("health");
      req.set_count_only(true);
      raftkv::RangeResponse resp;
      const auto start = std::chrono::steady_clock::now();
      results[i].status = stub->Range(&ctx, req, &resp);
      results[i].ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    });
  }
  for (auto& t : threads) t.join();
  bool all_healthy = true;
  std::vector<std::vector<std::string>> rows{{"ENDPOINT", "HEALTH", "TOOK", "ERROR"}};
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const Result& r = results[i];
    char took[32];
    std::snprintf(took, sizeof(took), "%.3fms", r.ms);
    const std::string error =
        r.status.ok() ? "" : std::string(raftkv::StatusCodeName(r.status.error_code())) + ": " + r.status.error_message();
    all_healthy = all_healthy && r.status.ok();
    if (Json()) {
      raftkv::EndpointHealth health;  // see admin.proto
      health.set_endpoint(endpoints[i]);
      health.set_health(r.status.ok());
      health.set_took(took);
      health.set_error(error);
      Emit(JsonLine(health));
    } else if (Table()) {
      rows.push_back({endpoints[i], r.status.ok() ? "true" : "false", took, error});
    } else if (r.status.ok()) {
      std::cout << endpoints[i] << " is healthy: linearizable read served: took = " << took << "\n";
    } else {
      std::cerr << endpoints[i] << " is unhealthy: failed to serve a linearizable read: " << error << "\n";
    }
  }
  if (Table()) PrintRows(rows);
  return all_healthy ? kExitOk : kExitError;
}

// Status of each endpoint: etcdctl's comma-separated line (simple), a table,
// or one StatusResponse per line (json). Exit 1 if any endpoint fails.
int CmdEndpointStatus(raftkv::KvClient* client, const std::vector<std::string>& endpoints) {
  const std::vector<NodeStatus> nodes = QueryStatuses(client, endpoints);
  bool all_ok = true;
  std::vector<std::vector<std::string>> rows{
      {"ENDPOINT", "ID", "VERSION", "IS_LEADER", "RAFT_TERM", "RAFT_INDEX", "RAFT_APPLIED_INDEX", "REVISION",
       "LEADER"}};
  for (const NodeStatus& n : nodes) {
    if (!n.rpc.ok()) {
      all_ok = false;
      std::cerr << n.endpoint << ": error: " << raftkv::StatusCodeName(n.rpc.error_code()) << ": "
                << n.rpc.error_message() << "\n";
      continue;
    }
    const auto& r = n.resp;
    std::vector<std::string> row{n.endpoint,
                                 std::to_string(r.id()),
                                 r.version(),
                                 r.role() == "leader" ? "true" : "false",
                                 std::to_string(r.term()),
                                 std::to_string(r.commit_index()),
                                 std::to_string(r.applied_index()),
                                 std::to_string(r.revision()),
                                 r.leader_id() == 0 ? "-" : std::to_string(r.leader_id())};
    if (Json()) {
      Emit(JsonLine(r));
    } else if (Table()) {
      rows.push_back(std::move(row));
    } else {
      std::string line;
      for (const std::string& f : row) line += (line.empty() ? "" : ", ") + f;
      std::cout << line << "\n";
    }
  }
  if (Table()) PrintRows(rows);
  return all_ok ? kExitOk : kExitError;
}

// ---- administration: snapshot, membership, leadership transfer ----

// A member id argument: a positive decimal number.
bool ParseId(const std::string& text, uint64_t* id) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  *id = std::stoull(text);
  return *id > 0;
}

// The endpoints of a cluster file ("<id> <host:port>" per line, '#' comments).
bool LoadClusterEndpoints(const std::string& path, std::vector<std::string>* endpoints,
                          std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = path + ": cannot open";
    return false;
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string id_text, address, extra;
    if (!(fields >> id_text)) continue;  // blank or comment
    const std::string where = path + ":" + std::to_string(number) + ": ";
    uint64_t id = 0;
    if (!ParseId(id_text, &id)) {
      *error = where + "member id '" + id_text + "' is not a positive number";
      return false;
    }
    if (!(fields >> address) || (fields >> extra)) {
      *error = where + "expected '<id> <host:port>'";
      return false;
    }
    if (raftkv::Status bad = raftkv::ParseEndpoint(address); !bad.ok()) {
      *error = where + bad.message();
      return false;
    }
    endpoints->push_back(address);
  }
  if (endpoints->empty()) {
    *error = path + ": no members listed";
    return false;
  }
  return true;
}

// "1v,2v,3v,4l": the members of a configuration, v = voter, l = learner.
std::string DescribeConfig(const raftkv::MembershipConfig& config) {
  std::string out;
  for (const auto& m : config.members()) {
    out += (out.empty() ? "" : ",") + std::to_string(m.id()) + (m.voter() ? "v" : "l");
  }
  return out.empty() ? "(empty)" : out;
}

const raftkv::MemberStatus* FindMember(const raftkv::ListMembersResponse& list, uint64_t id) {
  for (const auto& m : list.members()) {
    if (m.id() == id) return &m;
  }
  return nullptr;
}

int CmdSnapshot(raftkv::AdminClient* admin, const std::string& target) {
  raftkv::TakeSnapshotResponse resp;
  grpc::Status s = admin->TakeSnapshot(target, &resp, FLAGS_timeout_ms);
  if (!s.ok()) return RpcError(s);
  if (Json()) {
    Emit(JsonLine(resp));
    return kExitOk;
  }
  std::cout << "OK: snapshot of " << target << " at index " << resp.last_index() << " (term "
            << resp.last_term() << "), " << resp.bytes() << " bytes: " << resp.path() << "\n";
  return kExitOk;
}

// snapshot save FILE: the member's stream goes to FILE.part, which becomes
// FILE only once it matches the announced size and SHA-256 and verifies
// (raftkv::BackupFileWriter).
int CmdSnapshotSave(raftkv::AdminClient* admin, const std::string& target,
                    const std::string& path) {
  std::unique_ptr<raftkv::BackupFileWriter> out;
  if (raftkv::Status s = raftkv::BackupFileWriter::Create(path, &out); !s.ok()) {
    std::cerr << "error: snapshot save: " << s.ToString() << "\n";
    return s.code() == raftkv::Status::Code::kInvalidArgument ? kExitUsage : kExitError;
  }
  bool have_info = false;
  uint64_t member = 0;
  raftkv::ExpectedBackup expected;
  raftkv::Status local;  // a failure on this side, which ends the stream
  grpc::Status s = admin->SnapshotSave(
      target, FLAGS_snapshot_timeout_ms, [&](const raftkv::SnapshotSaveResponse& msg) {
        if (!have_info) {
          if (!msg.has_info()) {
            local = raftkv::Status::Corruption("the first message of the stream has no metadata");
            return false;
          }
          have_info = true;
          member = msg.info().member_id();
          expected.size = msg.info().size();
          expected.last_index = msg.info().last_index();
          expected.last_term = msg.info().last_term();
          expected.revision = msg.info().revision();
        } else if (!expected.sha256.empty()) {
          local = raftkv::Status::Corruption("the stream goes on after its checksum");
          return false;
        }
        if (out->bytes_written() + msg.chunk().size() > expected.size) {
          local = raftkv::Status::Corruption(
              "the member sends more than the " + std::to_string(expected.size) +
              " bytes it announced");
          return false;
        }
        local = out->Append(msg.chunk());
        if (!local.ok()) return false;
        expected.sha256 = msg.sha256();
        return true;
      });
  if (!local.ok()) {
    std::cerr << "error: snapshot save from " << target << ": " << local.ToString() << "\n";
    return kExitError;
  }
  if (!s.ok()) return RpcError(s);
  if (!have_info) {
    std::cerr << "error: snapshot save from " << target << ": the stream was empty\n";
    return kExitError;
  }
  raftkv::SnapshotFileSummary summary;
  if (raftkv::Status bad = out->Finish(expected, &summary); !bad.ok()) {
    std::cerr << "error: snapshot save from " << target << ": " << bad.ToString()
              << " (nothing was written to " << path << ")\n";
    return kExitError;
  }
  if (Json()) {  // what the member announced, once the file checked out against it
    raftkv::SnapshotSaveInfo info;
    info.set_member_id(member);
    info.set_last_index(summary.meta.last_index);
    info.set_last_term(summary.meta.last_term);
    info.set_revision(summary.revision);
    info.set_size(summary.bytes);
    Emit(JsonLine(info));
    return kExitOk;
  }
  std::cout << "Snapshot saved at " << path << " (revision " << summary.revision << ", index "
            << summary.meta.last_index << ", " << summary.bytes << " bytes)\n"
            << "member " << member << ", term " << summary.meta.last_term << ", "
            << summary.keys << " keys, " << summary.leases << " leases, sha256 "
            << expected.sha256 << "\n";
  return kExitOk;
}

// snapshot restore FILE --data-dir=DIR --id=N --cluster_file=CONF (offline).
int CmdSnapshotRestore(const std::string& path, const CommandOptions& opts) {
  const std::string data_dir = opts.Value("data-dir");
  const std::string id_text = opts.Value("id");
  if (data_dir.empty()) return Usage("snapshot restore needs --data-dir=DIR (the new member's)");
  if (id_text.empty()) return Usage("snapshot restore needs --id=N (the new member's id)");
  if (FLAGS_cluster_file.empty()) {
    return Usage("snapshot restore needs --cluster_file=CONF (the new cluster's members)");
  }
  raftkv::RestoreOptions options;
  options.snapshot_path = path;
  options.data_dir = data_dir;
  if (!ParseId(id_text, &options.id)) {
    return Usage("--id: member id '" + id_text + "' is not a positive number");
  }
  if (raftkv::Status bad = raftkv::LoadClusterConfig(FLAGS_cluster_file, &options.cluster);
      !bad.ok()) {
    return Usage("--cluster_file: " + bad.message());
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    std::cerr << "error: snapshot restore: " << path
              << (std::filesystem::exists(path, ec) ? " is not a regular file" : " does not exist")
              << "\n";
    return kExitUsage;
  }
  raftkv::RestoreResult result;
  raftkv::Status s = raftkv::RestoreDataDir(options, &result);
  if (!s.ok()) {
    std::cerr << "error: snapshot restore: " << s.ToString() << "\n";
    // Refusals of the input (a directory with data, a damaged file, an id
    // not in the cluster) are usage errors; an I/O failure is not.
    const bool refused = s.code() == raftkv::Status::Code::kInvalidArgument ||
                         s.code() == raftkv::Status::Code::kCorruption;
    return refused ? kExitUsage : kExitError;
  }
  std::string members;
  for (const auto& m : result.config.members()) {
    members += (members.empty() ? "" : ", ") + std::to_string(m.id()) + "=" + m.address();
  }
  std::cout << "Restored " << path << " (revision " << result.source.revision << ", index "
            << result.source.meta.last_index << ", term " << result.source.meta.last_term << ", "
            << result.source.keys << " keys, " << result.source.leases << " leases) into "
            << data_dir << " as member " << options.id << " of the new cluster " << members
            << "\n"
            << "start it with: raftkv-server --id=" << options.id
            << " --cluster_file=" << FLAGS_cluster_file << " --data_dir=" << data_dir << "\n";
  return kExitOk;
}

void PrintMembersJson(const raftkv::ListMembersResponse& list, bool from_leader) {
  std::string out = "{\"leader_id\": " + std::to_string(list.leader_id()) +
                    ", \"term\": " + std::to_string(list.term()) +
                    ", \"commit_index\": " + std::to_string(list.commit_index()) +
                    ", \"last_index\": " + std::to_string(list.last_index()) +
                    ", \"config_index\": " + std::to_string(list.config_index()) +
                    ", \"config_committed\": " + (list.config_committed() ? "true" : "false") +
                    ", \"from_leader\": " + (from_leader ? "true" : "false") + ", \"members\": [";
  for (int i = 0; i < list.members_size(); ++i) {
    const auto& m = list.members(i);
    out += i == 0 ? "\n  {" : ",\n  {";
    out += "\"id\": " + std::to_string(m.id());
    out += ", \"address\": " + JsonString(m.address());
    out += ", \"role\": " + JsonString(m.voter() ? "voter" : "learner");
    out += ", \"match_index\": " + std::to_string(m.match_index());
    out += ", \"state\": " + JsonString(m.state());
    out += ", \"leader\": " + std::string(m.id() == list.leader_id() ? "true" : "false");
    out += "}";
  }
  out += list.members_size() == 0 ? "]}\n" : "\n]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

int CmdMemberList(raftkv::AdminClient* admin) {
  raftkv::ListMembersResponse list;
  bool from_leader = false;
  std::string answered_by;
  grpc::Status s = admin->ListMembers(&list, &from_leader, &answered_by);
  if (!s.ok()) return RpcError(s);
  if (Json()) {
    Emit(JsonLine(list));
  } else if (FLAGS_json) {
    PrintMembersJson(list, from_leader);
  } else {
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"ID", "ADDRESS", "ROLE", "MATCH", "STATE", "LEADER"});
    for (const auto& m : list.members()) {
      rows.push_back({std::to_string(m.id()), m.address(), m.voter() ? "voter" : "learner",
                      from_leader ? std::to_string(m.match_index()) : "-",
                      m.state().empty() ? "-" : m.state(),
                      m.id() == list.leader_id() ? "*" : ""});
    }
    PrintRows(rows);
    std::cout << "configuration at index " << list.config_index()
              << (list.config_committed() ? " (committed)" : " (not committed yet)")
              << "; leader " << (list.leader_id() == 0 ? "unknown" : std::to_string(list.leader_id()))
              << ", term " << list.term() << ", commit index " << list.commit_index()
              << ", last index " << list.last_index() << "\n";
  }
  if (!from_leader) {
    std::cerr << "note: no leader answered within --timeout_ms; this is the view of "
              << answered_by << " (match and state are known only to the leader)\n";
  }
  return kExitOk;
}

int ChangeDone(const std::string& what, const raftkv::MemberChangeResponse& resp) {
  if (Json()) {
    Emit(JsonLine(resp));
    return kExitOk;
  }
  std::cout << "OK: " << what << "; configuration at index " << resp.index() << ": "
            << DescribeConfig(resp.config()) << "\n";
  return kExitOk;
}

int CmdMemberAdd(raftkv::AdminClient* admin, uint64_t id, const std::string& address) {
  raftkv::MemberChangeResponse resp;
  grpc::Status s = admin->AddMember(id, address, &resp);
  if (!s.ok()) return RpcError(s);
  return ChangeDone("member " + std::to_string(id) + " (" + address + ") added as a learner",
                    resp);
}

int CmdMemberRemove(raftkv::AdminClient* admin, uint64_t id) {
  raftkv::MemberChangeResponse resp;
  grpc::Status s = admin->RemoveMember(id, &resp);
  if (!s.ok()) return RpcError(s);
  return ChangeDone("member " + std::to_string(id) + " removed", resp);
}

// Promotion is refused while the learner lags (and while another change is
// uncommitted); with --wait_caught_up it is retried until --wait_timeout_ms,
// with the learner's progress on stderr about once a second.
int CmdMemberPromote(raftkv::AdminClient* admin, uint64_t id) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto give_up =
      start + std::chrono::milliseconds(FLAGS_wait_caught_up ? FLAGS_wait_timeout_ms : 0);
  auto last_progress = start - std::chrono::seconds(10);
  for (;;) {
    raftkv::ListMembersResponse list;
    bool from_leader = false;
    std::string lag = "";
    if (admin->ListMembers(&list, &from_leader).ok() && from_leader) {
      const raftkv::MemberStatus* m = FindMember(list, id);
      if (m == nullptr) {
        std::cerr << "error: member " << id << " is not in the configuration ("
                  << "add it first: raftkvctl member add " << id << " HOST:PORT)\n";
        return kExitError;
      }
      if (m->voter()) {
        if (Json()) {
          raftkv::MemberChangeResponse already;
          already.set_index(list.config_index());
          Emit(JsonLine(already));
          return kExitOk;
        }
        std::cout << "OK: member " << id << " is a voter; configuration at index "
                  << list.config_index() << "\n";
        return kExitOk;
      }
      const uint64_t behind =
          list.last_index() > m->match_index() ? list.last_index() - m->match_index() : 0;
      lag = "match " + std::to_string(m->match_index()) + " of " +
            std::to_string(list.last_index()) + " (" + std::to_string(behind) + " behind, " +
            (m->state().empty() ? "?" : m->state()) + ")";
    }
    raftkv::MemberChangeResponse resp;
    grpc::Status s = admin->PromoteMember(id, &resp);
    if (s.ok()) return ChangeDone("member " + std::to_string(id) + " promoted to voter", resp);
    const bool retryable = s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
                           s.error_code() == grpc::StatusCode::UNAVAILABLE;
    if (!retryable || Clock::now() >= give_up) {
      if (!lag.empty()) std::cerr << "member " << id << ": " << lag << "\n";
      return RpcError(s);
    }
    if (Clock::now() - last_progress >= std::chrono::seconds(1)) {
      last_progress = Clock::now();
      const auto waited =
          std::chrono::duration_cast<std::chrono::milliseconds>(last_progress - start).count();
      std::cerr << "waiting to promote member " << id << " (" << waited / 1000 << "."
                << (waited % 1000) / 100 << " s): " << (lag.empty() ? "" : lag + ": ")
                << s.error_message() << "\n";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int CmdTransferLeader(raftkv::AdminClient* admin, uint64_t id) {
  raftkv::TransferLeaderResponse resp;
  grpc::Status s = admin->TransferLeader(id, &resp);
  if (!s.ok()) return RpcError(s);
  if (Json()) {
    Emit(JsonLine(resp));
    return kExitOk;
  }
  std::cout << "OK: member " << resp.leader_id() << " is the leader (term " << resp.term()
            << ")\n";
  return kExitOk;
}

// ---- key-value commands in etcdctl's syntax and output ----

// etcdctl's simple printer: the key on one line (unless value_only), the
// value on the next.
void AppendKv(const raftkv::KeyValue& kv, bool value_only, std::string* out) {
  if (!value_only) {
    *out += kv.key();
    *out += '\n';
  }
  *out += kv.value();
  *out += '\n';
}

void AppendRange(const raftkv::RangeResponse& resp, bool count_only, bool value_only,
                 std::string* out) {
  if (count_only) {
    *out += std::to_string(resp.count()) + "\n";
    return;
  }
  for (const auto& kv : resp.kvs()) AppendKv(kv, value_only, out);
}

void AppendPut(const raftkv::PutResponse& resp, std::string* out) {
  *out += "OK\n";
  if (resp.has_prev_kv()) AppendKv(resp.prev_kv(), false, out);
}

void AppendDelete(const raftkv::DeleteRangeResponse& resp, std::string* out) {
  *out += std::to_string(resp.deleted()) + "\n";
  for (const auto& kv : resp.prev_kvs()) AppendKv(kv, false, out);
}

// [KEY, RANGE_END) from the positional arguments and --prefix.
bool KeyRange(const std::string& cmd, const std::vector<std::string>& args,
              const CommandOptions& opts, std::string* key, std::string* range_end,
              std::string* error) {
  bool prefix = false;
  if (!opts.Bool("prefix", &prefix, error)) return false;
  if (args.empty() || args.size() > (prefix ? 1u : 2u)) {
    *error = cmd + (prefix ? " --prefix takes KEY" : " takes KEY [RANGE_END]");
    return false;
  }
  if (prefix) {
    raftkv::PrefixRange(args[0], key, range_end);
  } else {
    *key = args[0];
    *range_end = args.size() == 2 ? args[1] : "";
  }
  return true;
}

int CmdGet(raftkv::KvClient* client, const std::vector<std::string>& args,
           const CommandOptions& opts) {
  std::string error, key, range_end;
  bool keys_only = false, count_only = false, value_only = false;
  int64_t limit = 0, rev = 0;
  if (!KeyRange("get", args, opts, &key, &range_end, &error) ||
      !opts.Bool("keys-only", &keys_only, &error) ||
      !opts.Bool("count-only", &count_only, &error) ||
      !opts.Bool("print-value-only", &value_only, &error) ||
      !opts.Count("limit", &limit, &error) || !opts.Count("rev", &rev, &error)) {
    return Usage(error);
  }
  const std::string consistency = opts.Has("consistency") ? opts.Value("consistency") : "l";
  if (consistency != "l" && consistency != "s") {
    return Usage("--consistency takes l (linearizable) or s (serializable), not \"" +
                 consistency + "\"");
  }
  if (FLAGS_stale && opts.Has("consistency") && consistency == "l") {
    return Usage("--stale and --consistency=l contradict each other");
  }
  if (count_only && (keys_only || value_only)) {
    return Usage("--count-only does not go with --keys-only or --print-value-only");
  }
  raftkv::RangeRequest req;
  req.set_key(key);
  req.set_range_end(range_end);
  req.set_limit(limit);
  req.set_revision(rev);
  req.set_serializable(FLAGS_stale || consistency == "s");
  req.set_keys_only(keys_only);
  req.set_count_only(count_only);
  raftkv::RangeResponse resp;
  grpc::Status s = client->Range(req, &resp);
  if (!s.ok()) return RpcError(s);
  if (Json()) {
    Emit(JsonLine(resp));
    return kExitOk;
  }
  if (Table()) {
    std::vector<std::vector<std::string>> rows;
    if (count_only) {
      rows = {{"COUNT", "REVISION"}, {std::to_string(resp.count()), std::to_string(resp.header().revision())}};
    } else {
      rows.push_back({"KEY", "VALUE", "CREATE_REVISION", "MOD_REVISION", "VERSION", "LEASE"});
      for (const auto& kv : resp.kvs()) {
        rows.push_back({kv.key(), kv.value(), std::to_string(kv.create_revision()),
                        std::to_string(kv.mod_revision()), std::to_string(kv.version()),
                        kv.lease() == 0 ? "-" : raftkv::LeaseIdHex(kv.lease())});
      }
    }
    PrintRows(rows);
    return kExitOk;
  }
  std::string out;
  AppendRange(resp, count_only, value_only, &out);
  Emit(out);
  return kExitOk;
}

int CmdDel(raftkv::KvClient* client, const std::vector<std::string>& args,
           const CommandOptions& opts) {
  std::string error, key, range_end;
  bool prev_kv = false;
  if (!KeyRange("del", args, opts, &key, &range_end, &error) ||
      !opts.Bool("prev-kv", &prev_kv, &error)) {
    return Usage(error);
  }
  raftkv::DeleteRangeRequest req;
  req.set_key(key);
  req.set_range_end(range_end);
  req.set_prev_kv(prev_kv);
  raftkv::DeleteRangeResponse resp;
  grpc::Status s = client->DeleteRange(&req, &resp);
  if (!s.ok()) return RpcError(s);
  if (Json()) {
    Emit(JsonLine(resp));
    return kExitOk;
  }
  std::string out;
  AppendDelete(resp, &out);
  Emit(out);
  return kExitOk;
}

int CmdPut(raftkv::KvClient* client, const std::vector<std::string>& args,
           const CommandOptions& opts) {
  std::string error;
  raftkv::ClientPutOptions put;
  if (!opts.Bool("prev-kv", &put.prev_kv, &error)) return Usage(error);
  if (opts.Has("lease") && !raftkv::ParseLeaseIdHex(opts.Value("lease"), &put.lease)) {
    return Usage("--lease takes a hexadecimal lease id, not \"" + opts.Value("lease") + "\"");
  }
  // etcdctl: without a VALUE argument the value is standard input, as is
  // (any bytes, up to the server's --max_value_bytes).
  std::string value;
  if (args.size() == 2) {
    value = args[1];
  } else {
    value.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    if (std::cin.bad()) {
      std::cerr << "raftkvctl: put: cannot read the value from standard input\n";
      return kExitError;
    }
  }
  raftkv::PutResponse resp;
  grpc::Status s = client->Put(args[0], value, put, &resp);
  if (!s.ok()) return RpcError(s);
  if (Json()) {
    Emit(JsonLine(resp));
    return kExitOk;
  }
  std::string out;
  AppendPut(resp, &out);
  Emit(out);
  return kExitOk;
}

int CmdTxn(raftkv::KvClient* client) {
  const std::string text((std::istreambuf_iterator<char>(std::cin)),
                         std::istreambuf_iterator<char>());
  raftkv::TxnRequest txn;
  if (raftkv::Status bad = raftkv::ParseTxnText(text, &txn); !bad.ok()) {
    std::cerr << "raftkvctl: txn: " << bad.message() << "\n";
    return kExitUsage;
  }
  raftkv::TxnResponse resp;
  grpc::Status s = client->Txn(&txn, &resp);
  if (!s.ok()) return RpcError(s);
  if (Json()) {
    Emit(JsonLine(resp));
    return kExitOk;
  }
  const auto& ops = resp.succeeded() ? txn.success() : txn.failure();
  std::string out = resp.succeeded() ? "SUCCESS\n" : "FAILURE\n";
  for (int i = 0; i < resp.responses_size(); ++i) {
    const raftkv::ResponseOp& r = resp.responses(i);
    out += "\n";
    if (r.has_response_range()) {
      const bool count_only = i < ops.size() && ops[i].has_request_range() &&
                              ops[i].request_range().count_only();
      AppendRange(r.response_range(), count_only, false, &out);
    } else if (r.has_response_put()) {
      AppendPut(r.response_put(), &out);
    } else if (r.has_response_delete_range()) {
      AppendDelete(r.response_delete_range(), &out);
    } else {
      out += "unexpected response " + r.ShortDebugString() + "\n";
    }
  }
  Emit(out);
  return kExitOk;
}

int CmdWatch(raftkv::KvClient* client, const std::vector<std::string>& args,
             const CommandOptions& opts) {
  std::string error, key, range_end;
  bool prev_kv = false;
  int64_t rev = 0;
  if (!KeyRange("watch", args, opts, &key, &range_end, &error) ||
      !opts.Bool("prev-kv", &prev_kv, &error) || !opts.Count("rev", &rev, &error)) {
    return Usage(error);
  }
  raftkv::WatchRequest req;
  req.set_key(key);
  req.set_range_end(range_end);
  req.set_start_revision(rev);
  req.set_prev_kv(prev_kv);
  grpc::Status s = client->Watch(req, [](const raftkv::WatchResponse& resp) {
    if (Json()) {
      if (resp.events_size() > 0) {
        Emit(JsonLine(resp));
        std::fflush(stdout);
      }
      return true;
    }
    std::string out;
    for (const raftkv::Event& e : resp.events()) {
      out += e.type() == raftkv::Event::DELETE ? "DELETE\n" : "PUT\n";
      if (e.has_prev_kv()) AppendKv(e.prev_kv(), false, &out);
      AppendKv(e.kv(), false, &out);
    }
    if (!out.empty()) {
      Emit(out);
      std::fflush(stdout);
    }
    return true;
  });
  if (!s.ok()) return RpcError(s);
  return kExitOk;
}

// ---- leases ----

bool ParseLeaseArg(const std::string& text, int64_t* id, std::string* error) {
  if (!raftkv::ParseLeaseIdHex(text, id)) {
    *error = "lease id '" + text + "' is not hexadecimal (as printed by lease grant)";
    return false;
  }
  return true;
}

int CmdLease(raftkv::KvClient* client, const std::vector<std::string>& args,
             const CommandOptions& opts) {
  const std::string& sub = args[0];
  std::string error;
  int64_t id = 0;
  if (sub == "grant") {
    const std::string& ttl_text = args[1];
    if (ttl_text.empty() || ttl_text.size() > 18 ||
        ttl_text.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(ttl_text) <= 0) {
      return Usage("lease grant: TTL '" + ttl_text + "' is not a positive number of seconds");
    }
    raftkv::LeaseGrantResponse resp;
    grpc::Status s = client->LeaseGrant(std::stoll(ttl_text), 0, &resp);
    if (!s.ok()) return RpcError(s);
    if (Json()) {
      Emit(JsonLine(resp));
      return kExitOk;
    }
    std::cout << "lease " << raftkv::LeaseIdHex(resp.id()) << " granted with TTL(" << resp.ttl()
              << "s)\n";
    return kExitOk;
  }
  if (sub == "list") {
    raftkv::LeaseLeasesResponse resp;
    grpc::Status s = client->LeaseLeases(&resp);
    if (!s.ok()) return RpcError(s);
    if (Json()) {
      Emit(JsonLine(resp));
      return kExitOk;
    }
    if (Table()) {
      std::vector<std::vector<std::string>> rows{{"ID"}};
      for (const auto& l : resp.leases()) rows.push_back({raftkv::LeaseIdHex(l.id())});
      PrintRows(rows);
      return kExitOk;
    }
    std::string out = "found " + std::to_string(resp.leases_size()) + " leases\n";
    for (const auto& l : resp.leases()) out += raftkv::LeaseIdHex(l.id()) + "\n";
    Emit(out);
    return kExitOk;
  }
  if (!ParseLeaseArg(args[1], &id, &error)) return Usage("lease " + sub + ": " + error);
  const std::string hex = raftkv::LeaseIdHex(id);
  if (sub == "revoke") {
    raftkv::LeaseRevokeResponse resp;
    grpc::Status s = client->LeaseRevoke(id, &resp);
    if (!s.ok()) return RpcError(s);
    if (Json()) {
      Emit(JsonLine(resp));
      return kExitOk;
    }
    std::cout << "lease " << hex << " revoked\n";
    return kExitOk;
  }
  if (sub == "timetolive") {
    bool keys = false;
    if (!opts.Bool("keys", &keys, &error)) return Usage(error);
    raftkv::LeaseTimeToLiveResponse resp;
    grpc::Status s = client->LeaseTimeToLive(id, keys, &resp);
    if (!s.ok()) return RpcError(s);
    if (Json()) {
      Emit(JsonLine(resp));
      return kExitOk;
    }
    if (Table()) {
      std::string key_list;
      for (int i = 0; i < resp.keys_size(); ++i) key_list += (i == 0 ? "" : " ") + resp.keys(i);
      PrintRows({{"ID", "GRANTED_TTL", "REMAINING_TTL", "KEYS"},
                 {hex, std::to_string(resp.granted_ttl()), std::to_string(resp.ttl()), key_list}});
      return kExitOk;
    }
    std::string out;
    if (resp.ttl() == -1) {
      out = "lease " + hex + " already expired\n";
    } else {
      out = "lease " + hex + " granted with TTL(" + std::to_string(resp.granted_ttl()) +
            "s), remaining(" + std::to_string(resp.ttl()) + "s)";
      if (keys) {
        out += ", attached keys([";
        for (int i = 0; i < resp.keys_size(); ++i) out += (i == 0 ? "" : " ") + resp.keys(i);
        out += "])";
      }
      out += "\n";
    }
    Emit(out);
    return kExitOk;
  }
  // keep-alive
  bool once = false;
  if (!opts.Bool("once", &once, &error)) return Usage(error);
  for (;;) {
    raftkv::LeaseKeepAliveResponse resp;
    grpc::Status s = client->LeaseKeepAliveOnce(id, &resp);
    if (!s.ok()) return RpcError(s);
    if (Json()) {
      Emit(JsonLine(resp));
      std::fflush(stdout);
      if (resp.ttl() <= 0) return kExitError;
      if (once) return kExitOk;
      std::this_thread::sleep_for(std::chrono::milliseconds(resp.ttl() * 1000 / 3));
      continue;
    }
    if (resp.ttl() <= 0) {
      std::cout << "lease " << hex << " expired or revoked.\n";
      return kExitError;
    }
    std::cout << "lease " << hex << " keepalived with TTL(" << resp.ttl() << ")" << std::endl;
    if (once) return kExitOk;
    std::this_thread::sleep_for(std::chrono::milliseconds(resp.ttl() * 1000 / 3));
  }
}

}  // namespace

// Runs one command; every gRPC object it made is destroyed when it returns.
static int RunCommand(int argc, char** argv) {
  // Quiet by default: raftkvctl prints only its output. --minloglevel=0
  // (with --v=N for VLOGs) shows the client's logs on stderr.
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = google::GLOG_FATAL;

  gflags::SetUsageMessage(kUsage);
  gflags::SetVersionString(raftkv::VersionString());
  if (const int done = EarlyFlags(argc, argv); done >= 0) return done;
  std::string error;
  std::vector<char*> flag_argv;
  std::vector<std::string> args;
  CommandOptions cmd_options;
  if (!SplitArgs(argc, argv, &flag_argv, &cmd_options, &args, &error)) return Usage(error);
  int flag_argc = static_cast<int>(flag_argv.size()) - 1;
  char** flag_argv_ptr = flag_argv.data();
  gflags::ParseCommandLineFlags(&flag_argc, &flag_argv_ptr, /*remove_flags=*/true);
  if (flag_argc > 1) return Usage(std::string("unexpected argument ") + flag_argv_ptr[1]);
  google::InitGoogleLogging(argv[0]);
  raftkv::InitGrpcRuntime();
  if (raftkv::Status bad = raftkv::InitChannelSecurityFromFlags(); !bad.ok()) {
    std::cerr << "raftkvctl: " << bad.message() << std::endl;
    return 2;
  }

  if (args.empty()) return Usage("missing command");
  const std::string cmd = args[0];
  args.erase(args.begin());
  if (cmd == "help" && args.empty()) return Help();
  if (cmd == "version" && args.empty()) return Version();

  // -w / --write-out applies to every command; --json is the older
  // spelling kept for status and member list (its own JSON layout).
  if (cmd_options.Has("write-out")) {
    const std::string w = cmd_options.Value("write-out");
    if (!raftkv::ctl::ParseOutputFormat(w, &g_format)) {
      return Usage("-w/--write-out takes simple, json or table, not \"" + w + "\"");
    }
    cmd_options.Remove("write-out");
  }
  const std::string sub0 = args.empty() ? "" : args[0];
  const bool table_ok = cmd == "get" || cmd == "status" || cmd == "endpoint" ||
                        (cmd == "member" && sub0 == "list") ||
                        (cmd == "lease" && (sub0 == "list" || sub0 == "timetolive"));
  if (Table() && !table_ok) {
    return Usage("-w table is not available for " + cmd + (sub0.empty() || cmd == "get" ? "" : " " + sub0) +
                 " (simple or json)");
  }

  std::vector<raftkv::BatchOp> batch_ops;
  auto want_args = [&](size_t n, const char* names) -> bool {
    if (args.size() == n) return true;
    error = cmd + " takes " + names;
    return false;
  };
  auto allow = [&](std::initializer_list<const char*> allowed) {
    return cmd_options.Allow(cmd, allowed, &error);
  };
  if (cmd == "put") {
    // VALUE omitted: read from standard input.
    if (args.size() != 1 && !want_args(2, "KEY [VALUE] (without VALUE: standard input)")) return Usage(error);
    if (!allow({"lease", "prev-kv"})) return Usage(error);
  } else if (cmd == "get") {
    // KEY [RANGE_END]: checked with --prefix in CmdGet.
    if (!allow({"prefix", "limit", "keys-only", "count-only", "rev", "print-value-only",
                "consistency"})) {
      return Usage(error);
    }
  } else if (cmd == "del") {
    if (!allow({"prefix", "prev-kv"})) return Usage(error);
  } else if (cmd == "watch") {
    if (!allow({"prefix", "rev", "prev-kv"})) return Usage(error);
  } else if (cmd == "txn") {
    if (!want_args(0, "no arguments (it reads standard input)") || !allow({})) {
      return Usage(error);
    }
  } else if (cmd == "lease") {
    const std::string sub = args.empty() ? "" : args[0];
    if (sub == "grant") {
      if (args.size() != 2) return Usage("lease grant takes TTL");
    } else if (sub == "revoke") {
      if (args.size() != 2) return Usage("lease revoke takes ID");
    } else if (sub == "keep-alive") {
      if (args.size() != 2) return Usage("lease keep-alive takes [--once] ID");
    } else if (sub == "timetolive") {
      if (args.size() != 2) return Usage("lease timetolive takes ID [--keys]");
    } else if (sub == "list") {
      if (args.size() != 1) return Usage("lease list takes no arguments");
    } else {
      return Usage(sub.empty()
                       ? "lease needs a subcommand: grant, revoke, keep-alive, timetolive or list"
                       : "unknown lease subcommand \"" + sub + "\"");
    }
    const bool ok = sub == "keep-alive"   ? cmd_options.Allow("lease keep-alive", {"once"}, &error)
                    : sub == "timetolive" ? cmd_options.Allow("lease timetolive", {"keys"}, &error)
                                          : cmd_options.Allow("lease " + sub, {}, &error);
    if (!ok) return Usage(error);
  } else if (cmd == "cas") {
    if (FLAGS_absent ? !want_args(2, "--absent KEY NEW") : !want_args(3, "KEY EXPECTED NEW")) {
      return Usage(error);
    }
  } else if (cmd == "batch") {
    if (!ParseBatch(args, &batch_ops, &error)) return Usage("batch: " + error);
  } else if (cmd == "status") {
    if (!want_args(0, "no arguments")) return Usage(error);
  } else if (cmd == "snapshot") {
    const std::string sub = args.empty() ? "" : args[0];
    if (sub == "save") {
      if (args.size() != 2) return Usage("snapshot save takes FILE");
    } else if (sub == "restore") {
      if (args.size() != 2) {
        return Usage("snapshot restore takes FILE --data-dir=DIR --id=N --cluster_file=CONF");
      }
      if (!cmd_options.Allow("snapshot restore", {"data-dir", "id"}, &error)) return Usage(error);
    } else if (!sub.empty()) {
      return Usage("unknown snapshot subcommand \"" + sub +
                   "\" (snapshot takes no argument, or save FILE, or restore FILE)");
    }
  } else if (cmd == "member") {
    const std::string sub = args.empty() ? "" : args[0];
    if (sub == "list") {
      if (args.size() != 1) return Usage("member list takes no arguments");
    } else if (sub == "add") {
      if (args.size() != 3) return Usage("member add takes ID HOST:PORT");
    } else if (sub == "promote" || sub == "remove") {
      if (args.size() != 2) return Usage("member " + sub + " takes ID");
    } else {
      return Usage(sub.empty() ? "member needs a subcommand: list, add, promote or remove"
                               : "unknown member subcommand \"" + sub + "\"");
    }
  } else if (cmd == "transfer-leader") {
    if (!want_args(1, "ID")) return Usage(error);
  } else if (cmd == "endpoint") {
    if (args.size() != 1 || (sub0 != "health" && sub0 != "status")) {
      return Usage(sub0.empty() ? "endpoint needs a subcommand: health or status"
                   : args.size() == 1 ? "unknown endpoint subcommand \"" + sub0 + "\""
                                      : "endpoint " + sub0 + " takes no arguments");
    }
    if (!cmd_options.Allow("endpoint " + sub0, {"cluster"}, &error)) return Usage(error);
  } else {
    return Usage("unknown command \"" + cmd + "\"");
  }
  const bool restore = cmd == "snapshot" && !args.empty() && args[0] == "restore";
  if (cmd != "put" && cmd != "get" && cmd != "del" && cmd != "watch" && cmd != "txn" &&
      cmd != "lease" && cmd != "endpoint" && !restore && !cmd_options.Allow(cmd, {}, &error)) {
    return Usage(error);
  }
  // Offline: no server is involved.
  if (restore) return CmdSnapshotRestore(args[1], cmd_options);
  if (FLAGS_timeout_ms <= 0) return Usage("--timeout_ms must be positive");
  if (FLAGS_rpc_timeout_ms <= 0) return Usage("--rpc_timeout_ms must be positive");
  if (FLAGS_wait_timeout_ms < 0) return Usage("--wait_timeout_ms must not be negative");
  if (FLAGS_snapshot_timeout_ms <= 0) return Usage("--snapshot_timeout_ms must be positive");

  raftkv::ClientOptions options;
  if (!FLAGS_cluster_file.empty()) {
    if (!LoadClusterEndpoints(FLAGS_cluster_file, &options.endpoints, &error)) {
      return Usage("--cluster_file: " + error);
    }
  } else {
    // --endpoints, else $RAFTKV_ENDPOINTS, else the default of --endpoints.
    const char* env = std::getenv("RAFTKV_ENDPOINTS");
    const bool from_env = gflags::GetCommandLineFlagInfoOrDie("endpoints").is_default && env != nullptr;
    const std::string list = from_env ? env : FLAGS_endpoints;
    if (raftkv::Status bad = raftkv::ParseEndpointList(list, &options.endpoints); !bad.ok()) {
      return Usage(std::string(from_env ? "RAFTKV_ENDPOINTS" : "--endpoints") + ": " + bad.message());
    }
  }
  options.timeout_ms = FLAGS_timeout_ms;
  options.rpc_timeout_ms = FLAGS_rpc_timeout_ms;
  const std::vector<std::string> endpoints = options.endpoints;

  if (cmd == "snapshot" || cmd == "member" || cmd == "transfer-leader") {
    raftkv::AdminClientOptions admin_options;
    admin_options.endpoints = endpoints;
    admin_options.timeout_ms = FLAGS_timeout_ms;
    admin_options.rpc_timeout_ms = FLAGS_rpc_timeout_ms;
    raftkv::AdminClient admin(admin_options);
    if (cmd == "snapshot") {
      const std::string target = FLAGS_target.empty() ? endpoints[0] : FLAGS_target;
      if (raftkv::Status bad = raftkv::ParseEndpoint(target); !bad.ok()) return Usage("--target: " + bad.message());
      if (!args.empty()) return CmdSnapshotSave(&admin, target, args[1]);  // save FILE
      return CmdSnapshot(&admin, target);
    }
    const std::string sub = cmd == "member" ? args[0] : "";
    if (sub == "list") return CmdMemberList(&admin);
    uint64_t id = 0;
    const std::string& id_text = cmd == "member" ? args[1] : args[0];
    if (!ParseId(id_text, &id)) {
      return Usage("member id '" + id_text + "' is not a positive number");
    }
    if (cmd == "transfer-leader") return CmdTransferLeader(&admin, id);
    if (sub == "add") {
      if (raftkv::Status bad = raftkv::ParseEndpoint(args[2]); !bad.ok()) return Usage("member add: " + bad.message());
      return CmdMemberAdd(&admin, id, args[2]);
    }
    if (sub == "promote") return CmdMemberPromote(&admin, id);
    return CmdMemberRemove(&admin, id);
  }

  if (cmd == "endpoint") {
    bool cluster = false;
    if (!cmd_options.Bool("cluster", &cluster, &error)) return Usage(error);
    std::vector<std::string> targets = endpoints;
    if (cluster && !MemberEndpoints(endpoints, &targets)) return kExitError;
    raftkv::KvClient client(std::move(options));
    return sub0 == "health" ? CmdEndpointHealth(targets) : CmdEndpointStatus(&client, targets);
  }

  raftkv::KvClient client(std::move(options));
  if (cmd == "status") return CmdStatus(&client, endpoints);

  if (cmd == "put") return CmdPut(&client, args, cmd_options);
  if (cmd == "get") return CmdGet(&client, args, cmd_options);
  if (cmd == "del") return CmdDel(&client, args, cmd_options);
  if (cmd == "txn") return CmdTxn(&client);
  if (cmd == "watch") return CmdWatch(&client, args, cmd_options);
  if (cmd == "lease") return CmdLease(&client, args, cmd_options);
  if (cmd == "batch") {
    std::vector<bool> existed;
    grpc::Status s = client.Batch(batch_ops, &existed);
    if (!s.ok()) return RpcError(s);
    if (Json()) {
      raftkv::BatchResponse resp;
      for (bool e : existed) resp.add_existed(e);
      Emit(JsonLine(resp));
      return kExitOk;
    }
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
    if (Json()) {
      raftkv::CompareAndSwapResponse resp;
      resp.set_swapped(swapped);
      resp.set_found(found);
      resp.set_current(current);
      Emit(JsonLine(resp));
      return swapped ? kExitOk : kExitError;
    }
    if (swapped) {
      std::cout << "OK\n";
      return kExitOk;
    }
    const std::string out = found ? "FAILED current=" + current + "\n" : "FAILED (absent)\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    return kExitError;
  }
  return Usage("unknown command \"" + cmd + "\"");  // not reached: checked above
}

int main(int argc, char** argv) {
  const int code = RunCommand(argc, argv);
  // A channel to an endpoint that did not answer can outlive its objects for a
  // moment; exit handlers must not run under gRPC's threads.
  if (!raftkv::WaitForGrpcShutdown(std::chrono::seconds(2))) std::_Exit(code);
  return code;
}
