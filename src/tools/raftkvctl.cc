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
//   raftkvctl [flags] snapshot         snapshot of --target (default: the first
//                                      endpoint) now; prints index, term, size, file
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

#include <cstdint>
#include <fstream>
#include <sstream>

#include "client/admin_client.h"
#include "client/kv_client.h"
#include "client/grpc_runtime.h"
#include "client/security.h"
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
            "endpoint) instead of a table. member list: print a JSON object (leader_id, term, "
            "commit_index, last_index, config_index, config_committed, from_leader, members "
            "[id, address, role, match_index, state, leader]).");
DEFINE_bool(absent, false,
            "cas: create-only; takes KEY NEW and swaps only if KEY is absent.");
DEFINE_string(cluster_file, "",
              "Read the endpoints from this cluster file ('<id> <host:port>' per line, as "
              "given to the servers) instead of --endpoints.");
DEFINE_string(target, "",
              "snapshot: the member (host:port) to snapshot; default the first endpoint.");
DEFINE_bool(wait_caught_up, true,
            "member promote: while the leader refuses because the learner is not caught up "
            "(or another change is pending), retry until --wait_timeout_ms, printing progress.");
DEFINE_int32(wait_timeout_ms, 60000,
             "member promote: how long to keep retrying a refused promotion.");
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
    "  raftkvctl [flags] batch put KEY VALUE|del KEY ...\n"
    "                                     all the ops as one log entry (atomic); prints OK\n"
    "  raftkvctl [flags] status [--json]  status of every endpoint (no redirect)\n"
    "  raftkvctl [flags] snapshot         take a snapshot on --target (default: first endpoint)\n"
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
    "flags (may appear anywhere; put '--' before a KEY or VALUE starting with '-'):\n"
    "  --endpoints=H:P[,H:P...]  servers (default 127.0.0.1:7001,127.0.0.1:7002,"
    "127.0.0.1:7003)\n"
    "  --timeout_ms=N            total time per operation incl. retries (default 5000)\n"
    "  --rpc_timeout_ms=N        time per attempt / per status query (default 2000)\n"
    "  --cluster_file=PATH       take the endpoints from a cluster file instead\n"
    "  --target=H:P              snapshot: the member to snapshot\n"
    "  --json                    status, member list: JSON output\n"
    "  --wait_caught_up          member promote: retry while refused (default true)\n"
    "  --wait_timeout_ms=N       member promote: how long to retry (default 60000)\n"
    "  --stale                   get: possibly stale read from any node\n"
    "  --absent                  cas: the key must be absent (create-only)\n"
    "  --tls_ca_file=PEM         TLS: the cluster CA (servers must present a certificate it signed)\n"
    "  --tls_cert_file=PEM --tls_key_file=PEM\n"
    "                            TLS: client certificate, for servers with --client_cert_required\n"
    "  --tls_server_name=NAME    TLS: name to expect in server certificates instead of the host\n"
    "  --token_file=PATH         bearer token (first line) for servers started with --token_file\n"
    "  --minloglevel=0 --v=1     client debug logging on stderr\n"
    "\n"
    "exit codes: 0 ok, 1 RPC error or refusal, key absent or CAS not swapped,\n"
    "2 usage error.\n";

int Usage(const std::string& error) {
  if (!error.empty()) std::cerr << "raftkvctl: " << error << "\n\n";
  std::cerr << "raftkvctl: " << kUsage;
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

// Prints rows as left-aligned columns separated by two spaces.
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
  std::cout << "OK: snapshot of " << target << " at index " << resp.last_index() << " (term "
            << resp.last_term() << "), " << resp.bytes() << " bytes: " << resp.path() << "\n";
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
  if (FLAGS_json) {
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
  std::cout << "OK: member " << resp.leader_id() << " is the leader (term " << resp.term()
            << ")\n";
  return kExitOk;
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
  if (raftkv::Status bad = raftkv::InitChannelSecurityFromFlags(); !bad.ok()) {
    std::cerr << "raftkvctl: " << bad.message() << std::endl;
    return 2;
  }

  if (args.empty()) return Usage("missing command");
  const std::string cmd = args[0];
  args.erase(args.begin());

  std::vector<raftkv::BatchOp> batch_ops;
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
  } else if (cmd == "batch") {
    if (!ParseBatch(args, &batch_ops, &error)) return Usage("batch: " + error);
  } else if (cmd == "status" || cmd == "snapshot") {
    if (!want_args(0, "no arguments")) return Usage(error);
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
  } else {
    return Usage("unknown command \"" + cmd + "\"");
  }
  if (FLAGS_timeout_ms <= 0) return Usage("--timeout_ms must be positive");
  if (FLAGS_rpc_timeout_ms <= 0) return Usage("--rpc_timeout_ms must be positive");
  if (FLAGS_wait_timeout_ms < 0) return Usage("--wait_timeout_ms must not be negative");

  raftkv::ClientOptions options;
  if (!FLAGS_cluster_file.empty()) {
    if (!LoadClusterEndpoints(FLAGS_cluster_file, &options.endpoints, &error)) {
      return Usage("--cluster_file: " + error);
    }
  } else if (raftkv::Status bad = raftkv::ParseEndpointList(FLAGS_endpoints, &options.endpoints); !bad.ok()) {
    return Usage("--endpoints: " + bad.message());
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

  raftkv::KvClient client(std::move(options));
  if (cmd == "status") return CmdStatus(&client, endpoints);

  if (cmd == "put") {
    grpc::Status s = client.Put(args[0], args[1]);
    if (!s.ok()) return RpcError(s);
    std::cout << "OK\n";
    return kExitOk;
  }
  if (cmd == "batch") {
    grpc::Status s = client.Batch(batch_ops);
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
