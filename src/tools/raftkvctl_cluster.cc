// raftkvctl's cluster commands: status, endpoint health|status, member
// list|add|promote|remove and transfer-leader, and the endpoint lists they
// start from.

#include "tools/raftkvctl.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "client/admin_client.h"
#include "client/channel_args.h"
#include "client/json.h"
#include "client/kv_client.h"
#include "node/cluster_config.h"

namespace raftkv {
namespace ctl {

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

}  // namespace ctl
}  // namespace raftkv
