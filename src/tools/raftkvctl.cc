// raftkvctl: command-line client of a raftkv cluster.
//
// Key-value commands, in etcdctl's syntax and with its (simple) output:
//   raftkvctl [flags] put KEY [VALUE] [--lease=HEX] [--prev-kv]
//                                      prints OK (--prev-kv: then the previous key
//                                      and value, when there was one); without VALUE
//                                      the value is standard input, as is
//   raftkvctl [flags] get KEY [RANGE_END] [--prefix] [--limit=N] [--keys-only]
//                     [--count-only] [--rev=N] [--print-value-only] [--consistency=l|s]
//                     [--sort-by=KEY|VERSION|CREATE|MODIFY|VALUE] [--order=ASCEND|DESCEND]
//                                      each key on one line, its value on the next
//                                      (--keys-only: an empty line; --print-value-only:
//                                      values only; --count-only: the count). Nothing,
//                                      and exit 0, when nothing matches. --json: one
//                                      JSON object with the revision and each key's
//                                      revisions, version and lease.
//   raftkvctl [flags] del KEY [RANGE_END] [--prefix] [--prev-kv]
//                                      prints the number of keys deleted (--prev-kv:
//                                      then each deleted key and value)
//   raftkvctl [flags] txn [-i]         reads compares, success and failure requests
//                                      from stdin (etcdctl's format, client/txn_text.h;
//                                      -i: etcdctl's prompts, ends at the blank line
//                                      after the failure requests);
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
//   raftkvctl [flags] transfer-leader ID (or move-leader ID, etcdctl's name)
//                                      make voter ID the leader
//   raftkvctl snapshot status FILE     offline: verifies FILE; prints etcdctl's hash
//                                      (here the SHA-256), revision, keys and size, then
//                                      index, term and leases
//
// Membership and transfer commands find the leader themselves (following
// the members' leader hints, which may name members missing from
// --endpoints).
// Every command takes -w simple|json|table (--write-out): json prints the
// API's response messages with protobuf's JSON printer, one per line.
// --endpoints defaults to $RAFTKV_ENDPOINTS, else $ETCDCTL_ENDPOINTS, when set.
// etcdctl's spellings are taken too: --command-timeout=5s (--timeout_ms),
// --dial-timeout=2s, --cacert/--cert/--key (--tls_*), get/del --from-key;
// a mistyped command or flag is answered with the closest known one.
// Flags may appear anywhere on the command line. Exit codes: 0 success,
// 1 RPC error, CAS not swapped, lease expired (or no endpoint answered
// status), 2 usage error or malformed txn input.
// Output goes to stdout; errors are "error: <gRPC code>: <message>" on stderr.
#include "tools/raftkvctl.h"

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
#include <deque>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <system_error>

#include "client/admin_client.h"
#include "client/kv_client.h"
#include "client/channel_args.h"
#include "client/grpc_runtime.h"
#include "client/security.h"
#include "common/version.h"
#include "tools/raftkvctl_etcd.h"

DECLARE_string(tls_ca_file);
DECLARE_string(tls_cert_file);
DECLARE_string(tls_key_file);

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

// etcdctl's spellings of raftkvctl's flags (etcdctl users' habits).
DEFINE_string(command_timeout, "",
              "etcdctl's spelling of --timeout_ms, as a duration (500ms, 5s, 1m; also "
              "--command-timeout).");
DEFINE_string(dial_timeout, "",
              "How long to wait for a connection to one of the endpoints before running the "
              "command (a duration: 500ms, 2s; also --dial-timeout); none answering in time is "
              "an error (exit 1). Unset: no such wait, the command's own retries apply.");
DEFINE_string(cacert, "", "etcdctl's spelling of --tls_ca_file.");
DEFINE_string(cert, "", "etcdctl's spelling of --tls_cert_file.");
DEFINE_string(key, "", "etcdctl's spelling of --tls_key_file.");

namespace raftkv {
namespace ctl {

OutputFormat g_format = OutputFormat::kSimple;

// A usage error: one line naming it, one line of hint, exit 2.
int Usage(const std::string& error) {
  std::cerr << "raftkvctl: " << error << "\n"
            << "run 'raftkvctl --help' for the commands and flags\n";
  return kExitUsage;
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

namespace {

const char kUsage[] =
    "command-line client of a raftkv cluster.\n"
    "\n"
    "usage (key-value commands: etcdctl's syntax and output):\n"
    "  raftkvctl [flags] put KEY [VALUE] [--lease=HEX] [--prev-kv]\n"
    "                                     set KEY to VALUE (without VALUE: standard input, as\n"
    "                                     is); prints OK (then the previous key and value\n"
    "                                     with --prev-kv)\n"
    "  raftkvctl [flags] get KEY [RANGE_END] [--prefix|--from-key] [--limit=N] [--keys-only]\n"
    "                    [--count-only] [--rev=N] [--print-value-only] [--consistency=l|s]\n"
    "                    [--sort-by=KEY|VERSION|CREATE|MODIFY|VALUE] [--order=ASCEND|DESCEND]\n"
    "                                     each key then its value, one per line; nothing\n"
    "                                     (exit 0) when nothing matches\n"
    "  raftkvctl [flags] del KEY [RANGE_END] [--prefix|--from-key] [--prev-kv]\n"
    "                                     delete; prints the number of keys deleted\n"
    "  raftkvctl [flags] txn [-i]         transaction read from stdin: compares, blank line,\n"
    "                                     success requests, blank line, failure requests,\n"
    "                                     e.g. value(\"k\") = \"v\" / mod(\"k\") > \"5\" and\n"
    "                                     put K V / get K --prefix / del K; prints SUCCESS or\n"
    "                                     FAILURE and the responses; -i (--interactive):\n"
    "                                     etcdctl's prompts, ends at the blank line after the\n"
    "                                     failure requests\n"
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
    "  raftkvctl snapshot status FILE     offline: verify the backup FILE; prints its SHA-256,\n"
    "                                     revision, keys, size, index, term and leases\n"
    "  raftkvctl [flags] member list [--json]\n"
    "                                     members as the leader sees them (role, match, state)\n"
    "  raftkvctl [flags] member add ID HOST:PORT\n"
    "                                     add a new server (started with --join) as a learner\n"
    "  raftkvctl [flags] member promote ID\n"
    "                                     make learner ID a voter once it has caught up\n"
    "  raftkvctl [flags] member remove ID remove member ID\n"
    "  raftkvctl [flags] transfer-leader ID | move-leader ID\n"
    "                                     make voter ID the leader\n"
    "\n"
    "command options (etcdctl's; --opt=V or --opt V):\n"
    "  --prefix                  get, del, watch: every key starting with KEY\n"
    "  --from-key                get, del: every key from KEY on\n"
    "  -i, --interactive         txn: etcdctl's prompts before each section\n"
    "  --limit=N                 get: at most N keys\n"
    "  --keys-only               get: keys without values\n"
    "  --count-only              get: only the number of keys\n"
    "  --print-value-only        get: values only\n"
    "  --rev=N                   get: read at revision N; watch: from revision N\n"
    "  --consistency=l|s         get: linearizable (default) or serializable (any member,\n"
    "                            possibly stale)\n"
    "  --sort-by=TARGET          get: sort by KEY, VERSION, CREATE, MODIFY or VALUE\n"
    "  --order=ASCEND|DESCEND    get: the order of the sort (default: ascending)\n"
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
    "  --initial-cluster-token=T snapshot restore: mixed into the new cluster's id; give\n"
    "                            every member the same (default raftkv-cluster, as the\n"
    "                            servers' --initial_cluster_token)\n"
    "\n"
    "flags (may appear anywhere; put '--' before a KEY or VALUE starting with '-'):\n"
    "  --endpoints=H:P[,H:P...]  servers (default: $RAFTKV_ENDPOINTS, else $ETCDCTL_ENDPOINTS,\n"
    "                            else 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003); any\n"
    "                            member serves any call; etcd's http://H:P and https://H:P\n"
    "                            forms are accepted (https needs --cacert)\n"
    "  --timeout_ms=N            total time per operation incl. retries (default 5000);\n"
    "                            watch: to find another member after losing one\n"
    "  --command-timeout=DUR     etcdctl's spelling of --timeout_ms (500ms, 5s, 1m)\n"
    "  --rpc_timeout_ms=N        time per attempt / per status query (default 2000)\n"
    "  --dial-timeout=DUR        wait at most DUR for a connection to an endpoint (exit 1\n"
    "                            if none connects); unset: no such wait\n"
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
    "  --cacert, --cert, --key   etcdctl's spellings of --tls_ca_file, --tls_cert_file,\n"
    "                            --tls_key_file\n"
    "  --tls_server_name=NAME    TLS: name to expect in server certificates instead of the host\n"
    "  --token_file=PATH         bearer token (first line) for servers started with --token_file\n"
    "  --minloglevel=0 --v=1     client debug logging on stderr\n"
    "\n"
    "  raftkvctl version | --version   the version of raftkvctl and the API it speaks\n"
    "  raftkvctl help | --help | -h    this text\n"
    "\n"
    "exit codes: 0 ok, 1 RPC error or refusal, CAS not swapped or lease expired,\n"
    "2 usage error or malformed txn input.\n";

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
    {"sort-by", true},          {"order", true},       {"from-key", false},
    {"interactive", false},     {"initial-cluster-token", true},
};

const CommandOptionSpec* FindCommandOption(const std::string& name) {
  for (const auto& spec : kCommandOptions) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

// raftkvctl's own gflags (not glog's or the server library's): the names
// "did you mean" proposes, etcdctl's dashed spelling where it has one.
std::vector<std::string> FlagCandidates() {
  std::vector<std::string> names;
  for (const auto& spec : kCommandOptions) names.push_back(spec.name);
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  for (const auto& info : all) {
    if (info.filename.find("raftkvctl") == std::string::npos &&
        info.filename.find("client/security") == std::string::npos) {
      continue;
    }
    std::string name = info.name;
    if (name == "command_timeout" || name == "dial_timeout") {
      std::replace(name.begin(), name.end(), '_', '-');
    }
    names.push_back(name);
  }
  return names;
}

// A gflag at argv[*i] (`name` as written, maybe with etcdctl's dashes:
// --dial-timeout for --dial_timeout) into *flags, with its value when that
// is the next argument. Rewritten spellings are kept in *storage. False if
// `name` is no gflag.
bool TakeGflag(int argc, char** argv, int* i, const std::string& name, bool has_value,
               std::vector<char*>* flags, std::deque<std::string>* storage) {
  std::string underscored = name;
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  gflags::CommandLineFlagInfo info;
  if (!gflags::GetCommandLineFlagInfo(underscored.c_str(), &info)) {
    if (underscored.compare(0, 2, "no") != 0 || has_value ||
        !gflags::GetCommandLineFlagInfo(underscored.substr(2).c_str(), &info) ||
        info.type != "bool") {
      return false;
    }
  }
  if (underscored == name) {
    flags->push_back(argv[*i]);  // also --noflag
  } else {
    const std::string arg = argv[*i];
    const size_t eq = arg.find('=');
    storage->push_back("--" + underscored + (eq == std::string::npos ? "" : arg.substr(eq)));
    flags->push_back(storage->back().data());
  }
  if (info.type != "bool" && !has_value && *i + 1 < argc) {
    flags->push_back(argv[++*i]);  // "--flag value"
  }
  return true;
}

// Separates flags from positional arguments. gflags accepts flags anywhere
// but reorders what follows "--" ahead of the other positional arguments, so
// the split is done here: *flags gets argv[0] and every flag (with its value
// when given as a separate argument) for gflags, *options the command
// options (kCommandOptions), *positional the rest in order. Unknown flags are
// reported here, as usage errors naming the closest known flag, rather than
// by gflags (which would exit with status 1).
bool SplitArgs(int argc, char** argv, std::vector<char*>* flags, CommandOptions* options,
               std::vector<std::string>* positional, std::deque<std::string>* storage,
               std::string* error) {
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
    if (dashed == "w") dashed = "write-out";    // etcdctl's -w json
    if (dashed == "i") dashed = "interactive";  // etcdctl's txn -i
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
    if (TakeGflag(argc, argv, &i, name, eq != std::string::npos, flags, storage)) continue;
    *error = "unknown flag " + arg + DidYouMean(name, FlagCandidates(), "--", "");
    return false;
  }
  flags->push_back(nullptr);  // argv[argc] is NULL by convention
  return true;
}

// A command line once the flags are parsed: the command, its positional
// arguments and its command options.
struct CommandLine {
  std::string cmd;
  std::vector<std::string> args;
  CommandOptions options;
};

// Separates the flags (parsed by gflags) from the command and its options.
// Returns the exit code of a usage error, or -1 to go on.
int ParseCommandLine(int argc, char** argv, CommandLine* line) {
  std::string error;
  std::vector<char*> flag_argv;
  std::deque<std::string> storage;  // rewritten flags, until gflags has read them
  if (!SplitArgs(argc, argv, &flag_argv, &line->options, &line->args, &storage, &error)) {
    return Usage(error);
  }
  int flag_argc = static_cast<int>(flag_argv.size()) - 1;
  char** flag_argv_ptr = flag_argv.data();
  gflags::ParseCommandLineFlags(&flag_argc, &flag_argv_ptr, /*remove_flags=*/true);
  if (flag_argc > 1) return Usage(std::string("unexpected argument ") + flag_argv_ptr[1]);
  return -1;
}

// -w / --write-out applies to every command; --json is the older spelling
// kept for status and member list (its own JSON layout). Sets g_format;
// returns the exit code of a usage error, or -1 to go on.
int SetWriteOut(CommandLine* line) {
  const std::string& cmd = line->cmd;
  if (line->options.Has("write-out")) {
    const std::string w = line->options.Value("write-out");
    if (!ParseOutputFormat(w, &g_format)) {
      return Usage("-w/--write-out takes simple, json or table, not \"" + w + "\"");
    }
    line->options.Remove("write-out");
  }
  const std::string sub0 = line->args.empty() ? "" : line->args[0];
  const bool table_ok = cmd == "get" || cmd == "status" || cmd == "endpoint" ||
                        (cmd == "member" && sub0 == "list") ||
                        (cmd == "snapshot" && sub0 == "status") ||
                        (cmd == "lease" && (sub0 == "list" || sub0 == "timetolive"));
  if (Table() && !table_ok) {
    return Usage("-w table is not available for " + cmd + (sub0.empty() || cmd == "get" ? "" : " " + sub0) +
                 " (simple or json)");
  }
  return -1;
}

// The arguments and options of `lease SUB ...`: the exit code of a usage
// error, or -1.
int CheckLeaseArgs(const CommandLine& line, std::string* error) {
  const std::vector<std::string>& args = line.args;
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
                     : "unknown lease subcommand \"" + sub + "\"" +
                           DidYouMean(sub, {"grant", "revoke", "keep-alive", "timetolive", "list"}));
  }
  const bool ok = sub == "keep-alive"   ? line.options.Allow("lease keep-alive", {"once"}, error)
                  : sub == "timetolive" ? line.options.Allow("lease timetolive", {"keys"}, error)
                                        : line.options.Allow("lease " + sub, {}, error);
  if (!ok) return Usage(*error);
  return -1;
}

// The arguments and options of `snapshot [SUB ...]`: the exit code of a
// usage error, or -1.
int CheckSnapshotArgs(const CommandLine& line, std::string* error) {
  const std::vector<std::string>& args = line.args;
  const std::string sub = args.empty() ? "" : args[0];
  if (sub == "save" || sub == "status") {
    if (args.size() != 2) return Usage("snapshot " + sub + " takes FILE");
  } else if (sub == "restore") {
    if (args.size() != 2) {
      return Usage("snapshot restore takes FILE --data-dir=DIR --id=N --cluster_file=CONF");
    }
    if (!line.options.Allow("snapshot restore", {"data-dir", "id", "initial-cluster-token"}, error)) {
      return Usage(*error);
    }
  } else if (!sub.empty()) {
    return Usage("unknown snapshot subcommand \"" + sub + "\"" +
                 DidYouMean(sub, {"save", "restore", "status"}) +
                 " (snapshot takes no argument, or save FILE, restore FILE or status FILE)");
  }
  return -1;
}

// The arguments of `member SUB ...` and of `endpoint SUB` (with its
// options): the exit code of a usage error, or -1.
int CheckMemberArgs(const CommandLine& line) {
  const std::vector<std::string>& args = line.args;
  const std::string sub = args.empty() ? "" : args[0];
  if (sub == "list") {
    if (args.size() != 1) return Usage("member list takes no arguments");
  } else if (sub == "add") {
    if (args.size() != 3) return Usage("member add takes ID HOST:PORT");
  } else if (sub == "promote" || sub == "remove") {
    if (args.size() != 2) return Usage("member " + sub + " takes ID");
  } else {
    if (sub == "update") {
      return Usage("member update is not in raftkvctl: a member's address changes by member "
                   "remove, then member add");
    }
    return Usage(sub.empty() ? "member needs a subcommand: list, add, promote or remove"
                             : "unknown member subcommand \"" + sub + "\"" +
                                   DidYouMean(sub, {"list", "add", "promote", "remove"}));
  }
  return -1;
}

int CheckEndpointArgs(const CommandLine& line, std::string* error) {
  const std::string sub0 = line.args.empty() ? "" : line.args[0];
  if (line.args.size() != 1 || (sub0 != "health" && sub0 != "status")) {
    if (sub0 == "hashkv") {
      return Usage("endpoint hashkv is not in raftkvctl; use etcdctl: raftkv serves etcd's API");
    }
    return Usage(sub0.empty() ? "endpoint needs a subcommand: health or status"
                 : line.args.size() == 1 ? "unknown endpoint subcommand \"" + sub0 + "\"" +
                                               DidYouMean(sub0, {"health", "status"})
                                         : "endpoint " + sub0 + " takes no arguments");
  }
  if (!line.options.Allow("endpoint " + sub0, {"cluster"}, error)) return Usage(*error);
  return -1;
}

// Every command, for "did you mean".
const std::vector<std::string> kCommands = {
    "put",    "get",      "del",    "txn",      "watch",           "lease",       "cas",
    "batch",  "endpoint", "status", "snapshot", "member",          "transfer-leader",
    "move-leader", "help", "version"};

// The arguments and options of the command (batch: parsed into *batch_ops),
// before any connection: the exit code of a usage error, or -1 to go on.
int CheckArguments(const CommandLine& line, std::vector<raftkv::BatchOp>* batch_ops) {
  const std::string& cmd = line.cmd;
  const std::vector<std::string>& args = line.args;
  std::string error;
  auto want_args = [&](size_t n, const char* names) -> bool {
    if (args.size() == n) return true;
    error = cmd + " takes " + names;
    return false;
  };
  auto allow = [&](std::initializer_list<const char*> allowed) {
    return line.options.Allow(cmd, allowed, &error);
  };
  if (cmd == "put") {
    // VALUE omitted: read from standard input.
    if (args.size() != 1 && !want_args(2, "KEY [VALUE] (without VALUE: standard input)")) return Usage(error);
    if (!allow({"lease", "prev-kv"})) return Usage(error);
  } else if (cmd == "get") {
    // KEY [RANGE_END]: checked with --prefix in CmdGet.
    if (!allow({"prefix", "from-key", "limit", "keys-only", "count-only", "rev",
                "print-value-only", "consistency", "sort-by", "order"})) {
      return Usage(error);
    }
  } else if (cmd == "del") {
    if (!allow({"prefix", "from-key", "prev-kv"})) return Usage(error);
  } else if (cmd == "watch") {
    if (!allow({"prefix", "rev", "prev-kv"})) return Usage(error);
  } else if (cmd == "txn") {
    if (!want_args(0, "no arguments (it reads standard input)") || !allow({"interactive"})) {
      return Usage(error);
    }
  } else if (cmd == "lease") {
    if (const int done = CheckLeaseArgs(line, &error); done >= 0) return done;
  } else if (cmd == "cas") {
    if (FLAGS_absent ? !want_args(2, "--absent KEY NEW") : !want_args(3, "KEY EXPECTED NEW")) {
      return Usage(error);
    }
  } else if (cmd == "batch") {
    if (!ParseBatch(args, batch_ops, &error)) return Usage("batch: " + error);
  } else if (cmd == "status") {
    if (!want_args(0, "no arguments")) return Usage(error);
  } else if (cmd == "snapshot") {
    if (const int done = CheckSnapshotArgs(line, &error); done >= 0) return done;
  } else if (cmd == "member") {
    if (const int done = CheckMemberArgs(line); done >= 0) return done;
  } else if (cmd == "transfer-leader" || cmd == "move-leader") {
    if (!want_args(1, "ID")) return Usage(error);
  } else if (cmd == "endpoint") {
    if (const int done = CheckEndpointArgs(line, &error); done >= 0) return done;
  } else {
    const std::string etcdctl_only = EtcdctlOnlyCommand(cmd);
    return Usage(!etcdctl_only.empty() ? etcdctl_only
                                       : "unknown command \"" + cmd + "\"" + DidYouMean(cmd, kCommands));
  }
  return -1;
}

// The flags every networked command uses: the exit code of a usage error,
// or -1 to go on.
int CheckTimeoutFlags() {
  if (FLAGS_timeout_ms <= 0) return Usage("--timeout_ms must be positive");
  if (FLAGS_rpc_timeout_ms <= 0) return Usage("--rpc_timeout_ms must be positive");
  if (FLAGS_wait_timeout_ms < 0) return Usage("--wait_timeout_ms must not be negative");
  if (FLAGS_snapshot_timeout_ms <= 0) return Usage("--snapshot_timeout_ms must be positive");
  return -1;
}

// The client options from --cluster_file, --endpoints or $RAFTKV_ENDPOINTS
// and the timeouts: the exit code of a usage error, or -1 to go on.
int ClientOptionsFromFlags(raftkv::ClientOptions* options) {
  if (!FLAGS_cluster_file.empty()) {
    std::string error;
    if (!LoadClusterEndpoints(FLAGS_cluster_file, &options->endpoints, &error)) {
      return Usage("--cluster_file: " + error);
    }
  } else {
    // --endpoints, else $RAFTKV_ENDPOINTS, else $ETCDCTL_ENDPOINTS, else the
    // default of --endpoints.
    const EndpointChoice choice =
        ChooseEndpoints(!gflags::GetCommandLineFlagInfoOrDie("endpoints").is_default, FLAGS_endpoints,
                        std::getenv("RAFTKV_ENDPOINTS"), std::getenv("ETCDCTL_ENDPOINTS"));
    std::string error;
    if (!CheckEndpointSchemes(choice.list, raftkv::ProcessChannelSecurity()->tls(), choice.source,
                              &error)) {
      return Usage(error);
    }
    if (raftkv::Status bad = raftkv::ParseEndpointList(choice.list, &options->endpoints); !bad.ok()) {
      return Usage(choice.source + ": " + bad.message());
    }
  }
  options->timeout_ms = FLAGS_timeout_ms;
  options->rpc_timeout_ms = FLAGS_rpc_timeout_ms;
  return -1;
}

// etcdctl's names of the TLS file flags.
constexpr std::pair<const char*, const char*> kTlsAliases[] = {
    {"cacert", "tls_ca_file"}, {"cert", "tls_cert_file"}, {"key", "tls_key_file"}};

// A message about a TLS file flag that the user gave as etcdctl's spelling,
// with that spelling: "--cacert (--tls_ca_file): cannot read ...".
std::string AsSpelled(std::string message) {
  for (const auto& [etcd, own] : kTlsAliases) {
    const std::string flag = std::string("--") + own + ":";
    if (!gflags::GetCommandLineFlagInfoOrDie(etcd).is_default && message.compare(0, flag.size(), flag) == 0) {
      message = std::string("--") + etcd + " (--" + own + "):" + message.substr(flag.size());
    }
  }
  return message;
}

// etcdctl's spellings (--cacert, --cert, --key, --command-timeout) onto
// raftkvctl's flags, and --dial-timeout checked: the exit code of a usage
// error, or -1 to go on. Both spellings of one flag must agree.
int ApplyEtcdctlFlags(int64_t* dial_timeout_ms) {
  for (const auto& [etcd, own] : kTlsAliases) {
    const gflags::CommandLineFlagInfo alias = gflags::GetCommandLineFlagInfoOrDie(etcd);
    if (alias.is_default) continue;
    const gflags::CommandLineFlagInfo flag = gflags::GetCommandLineFlagInfoOrDie(own);
    if (!flag.is_default && flag.current_value != alias.current_value) {
      return Usage(std::string("--") + etcd + " and --" + own + " name different files; give one");
    }
    gflags::SetCommandLineOption(own, alias.current_value.c_str());
  }
  std::string error;
  if (!FLAGS_command_timeout.empty()) {
    int64_t ms = 0;
    if (!ParseDurationMs("--command-timeout", FLAGS_command_timeout, &ms, &error)) return Usage(error);
    if (ms <= 0) return Usage("--command-timeout must be positive");
    if (!gflags::GetCommandLineFlagInfoOrDie("timeout_ms").is_default && ms != FLAGS_timeout_ms) {
      return Usage("--command-timeout and --timeout_ms disagree; give one");
    }
    FLAGS_timeout_ms = static_cast<int32_t>(ms);
  }
  *dial_timeout_ms = 0;
  if (!FLAGS_dial_timeout.empty()) {
    if (!ParseDurationMs("--dial-timeout", FLAGS_dial_timeout, dial_timeout_ms, &error)) return Usage(error);
    if (*dial_timeout_ms <= 0) return Usage("--dial-timeout must be positive");
  }
  return -1;
}

// --dial-timeout: waits until a connection to one of `endpoints` is up (TLS
// handshake included), as etcdctl waits before running a command. Exit 1
// naming each endpoint's state when none is up in time, or -1 to go on.
int DialEndpoints(const std::vector<std::string>& endpoints, int64_t timeout_ms) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const std::string& e : endpoints) {
    channels.push_back(raftkv::MakeChannel(e, raftkv::RaftkvChannelArguments()));
  }
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<grpc_connectivity_state> states(channels.size(), GRPC_CHANNEL_IDLE);
  for (;;) {
    for (size_t i = 0; i < channels.size(); ++i) {
      states[i] = channels[i]->GetState(/*try_to_connect=*/true);
      if (states[i] == GRPC_CHANNEL_READY) return -1;
    }
    const auto now = std::chrono::system_clock::now();
    if (now >= deadline) break;
    // Watching the channels through a completion queue is what moves their
    // connections on; a short slice, fully drained, then a look at them all.
    const auto slice_end = std::min(deadline, now + std::chrono::milliseconds(20));
    grpc::CompletionQueue cq;
    for (size_t i = 0; i < channels.size(); ++i) {
      channels[i]->NotifyOnStateChange(states[i], slice_end, &cq, nullptr);
    }
    void* tag = nullptr;
    bool ok = false;
    for (size_t i = 0; i < channels.size(); ++i) cq.Next(&tag, &ok);
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
  }
  std::cerr << "error: DEADLINE_EXCEEDED: no endpoint connected within --dial-timeout="
            << FLAGS_dial_timeout << ":";
  for (size_t i = 0; i < channels.size(); ++i) {
    std::cerr << (i == 0 ? " " : ", ") << endpoints[i]
              << (states[i] == GRPC_CHANNEL_TRANSIENT_FAILURE ? " (connection failing)"
                                                              : " (still connecting)");
  }
  std::cerr << "\n";
  return kExitError;
}

// snapshot, member and transfer-leader: the Admin service's commands.
int RunAdminCommand(const CommandLine& line, const std::vector<std::string>& endpoints) {
  const std::string& cmd = line.cmd;
  const std::vector<std::string>& args = line.args;
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
  if (cmd == "transfer-leader" || cmd == "move-leader") return CmdTransferLeader(&admin, id);
  if (sub == "add") {
    if (raftkv::Status bad = raftkv::ParseEndpoint(args[2]); !bad.ok()) return Usage("member add: " + bad.message());
    return CmdMemberAdd(&admin, id, args[2]);
  }
  if (sub == "promote") return CmdMemberPromote(&admin, id);
  return CmdMemberRemove(&admin, id);
}

// endpoint health|status [--cluster].
int RunEndpointCommand(const CommandLine& line, raftkv::ClientOptions options,
                       const std::vector<std::string>& endpoints) {
  std::string error;
  bool cluster = false;
  if (!line.options.Bool("cluster", &cluster, &error)) return Usage(error);
  std::vector<std::string> targets = endpoints;
  if (cluster && !MemberEndpoints(endpoints, &targets)) return kExitError;
  raftkv::KvClient client(std::move(options));
  return line.args[0] == "health" ? CmdEndpointHealth(targets) : CmdEndpointStatus(&client, targets);
}

// Runs one command; every gRPC object it made is destroyed when it returns.
int RunCommand(int argc, char** argv) {
  // Quiet by default: raftkvctl prints only its output. --minloglevel=0
  // (with --v=N for VLOGs) shows the client's logs on stderr.
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = google::GLOG_FATAL;

  gflags::SetUsageMessage(kUsage);
  gflags::SetVersionString(raftkv::VersionString());
  if (const int done = EarlyFlags(argc, argv); done >= 0) return done;
  CommandLine line;
  if (const int done = ParseCommandLine(argc, argv, &line); done >= 0) return done;
  google::InitGoogleLogging(argv[0]);
  raftkv::InitGrpcRuntime();
  int64_t dial_timeout_ms = 0;
  if (const int done = ApplyEtcdctlFlags(&dial_timeout_ms); done >= 0) return done;
  if (raftkv::Status bad = raftkv::InitChannelSecurityFromFlags(); !bad.ok()) {
    std::cerr << "raftkvctl: " << AsSpelled(bad.message()) << std::endl;
    return 2;
  }

  if (line.args.empty()) return Usage("missing command");
  line.cmd = line.args[0];
  line.args.erase(line.args.begin());
  const std::string& cmd = line.cmd;
  const std::vector<std::string>& args = line.args;
  if (cmd == "help" && args.empty()) return Help();
  if (cmd == "version" && args.empty()) return Version();
  if (const int done = SetWriteOut(&line); done >= 0) return done;

  std::vector<raftkv::BatchOp> batch_ops;
  if (const int done = CheckArguments(line, &batch_ops); done >= 0) return done;
  const bool restore = cmd == "snapshot" && !args.empty() && args[0] == "restore";
  const bool file_status = cmd == "snapshot" && !args.empty() && args[0] == "status";
  std::string error;
  if (cmd != "put" && cmd != "get" && cmd != "del" && cmd != "watch" && cmd != "txn" &&
      cmd != "lease" && cmd != "endpoint" && !restore && !line.options.Allow(cmd, {}, &error)) {
    return Usage(error);
  }
  // Offline: no server is involved.
  if (restore) return CmdSnapshotRestore(args[1], line.options);
  if (file_status) return CmdSnapshotStatus(args[1]);
  if (const int done = CheckTimeoutFlags(); done >= 0) return done;

  raftkv::ClientOptions options;
  if (const int done = ClientOptionsFromFlags(&options); done >= 0) return done;
  const std::vector<std::string> endpoints = options.endpoints;
  if (dial_timeout_ms > 0) {
    if (const int done = DialEndpoints(endpoints, dial_timeout_ms); done >= 0) return done;
  }
  if (cmd == "snapshot" || cmd == "member" || cmd == "transfer-leader" || cmd == "move-leader") {
    return RunAdminCommand(line, endpoints);
  }
  if (cmd == "endpoint") return RunEndpointCommand(line, std::move(options), endpoints);

  raftkv::KvClient client(std::move(options));
  if (cmd == "status") return CmdStatus(&client, endpoints);

  if (cmd == "put") return CmdPut(&client, args, line.options);
  if (cmd == "get") return CmdGet(&client, args, line.options);
  if (cmd == "del") return CmdDel(&client, args, line.options);
  if (cmd == "txn") return CmdTxn(&client, line.options);
  if (cmd == "watch") return CmdWatch(&client, args, line.options);
  if (cmd == "lease") return CmdLease(&client, args, line.options);
  if (cmd == "batch") return CmdBatch(&client, batch_ops);
  if (cmd == "cas") return CmdCas(&client, args);
  return Usage("unknown command \"" + cmd + "\"");  // not reached: checked above
}

}  // namespace
}  // namespace ctl
}  // namespace raftkv

int main(int argc, char** argv) {
  const int code = raftkv::ctl::RunCommand(argc, argv);
  // A channel to an endpoint that did not answer can outlive its objects for a
  // moment; exit handlers must not run under gRPC's threads.
  if (!raftkv::WaitForGrpcShutdown(std::chrono::seconds(2))) std::_Exit(code);
  return code;
}
