// The pieces raftkvctl's command files share: exit codes, the output format,
// usage and RPC errors, the etcdctl-style command options, and the commands
// each file implements (raftkvctl_kv.cc, raftkvctl_cluster.cc,
// raftkvctl_snapshot.cc); raftkvctl.cc parses the command line and runs one.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gflags/gflags.h>
#include <grpcpp/grpcpp.h>

#include "client/admin_client.h"
#include "client/kv_client.h"
#include "tools/raftkvctl_output.h"

// raftkvctl.cc's flags that the command files read.
DECLARE_int32(timeout_ms);
DECLARE_int32(rpc_timeout_ms);
DECLARE_bool(json);
DECLARE_bool(absent);
DECLARE_string(cluster_file);
DECLARE_int32(snapshot_timeout_ms);
DECLARE_bool(wait_caught_up);
DECLARE_int32(wait_timeout_ms);
DECLARE_bool(stale);

namespace raftkv {
namespace ctl {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

// -w / --write-out (--json: json), set once before the command runs.
extern OutputFormat g_format;
inline bool Json() { return g_format == OutputFormat::kJson; }
inline bool Table() { return g_format == OutputFormat::kTable; }

// A usage error: one line naming it, one line of hint, exit 2.
int Usage(const std::string& error);

// An RPC error on stderr ("error: <code>: <message>", with a hint for a
// plaintext call to a TLS server); exit 1.
int RpcError(const grpc::Status& s);


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

// A member id argument: a positive decimal number.
bool ParseId(const std::string& text, uint64_t* id);

// The endpoints of a cluster file ("<id> <host:port>" per line, '#' comments).
bool LoadClusterEndpoints(const std::string& path, std::vector<std::string>* endpoints,
                          std::string* error);

// The address of every member in the configuration, from the first member
// of `endpoints` that answers (the leader's view when one answers).
bool MemberEndpoints(const std::vector<std::string>& endpoints, std::vector<std::string>* out);

// "put K V" and "del K" groups, in order.
bool ParseBatch(const std::vector<std::string>& args, std::vector<raftkv::BatchOp>* ops,
                std::string* error);

// The commands; each returns its exit code.

// raftkvctl_kv.cc
int CmdPut(raftkv::KvClient* client, const std::vector<std::string>& args,
           const CommandOptions& opts);
int CmdGet(raftkv::KvClient* client, const std::vector<std::string>& args,
           const CommandOptions& opts);
int CmdDel(raftkv::KvClient* client, const std::vector<std::string>& args,
           const CommandOptions& opts);
int CmdTxn(raftkv::KvClient* client, const CommandOptions& opts);
int CmdWatch(raftkv::KvClient* client, const std::vector<std::string>& args,
             const CommandOptions& opts);
int CmdLease(raftkv::KvClient* client, const std::vector<std::string>& args,
             const CommandOptions& opts);
int CmdBatch(raftkv::KvClient* client, const std::vector<raftkv::BatchOp>& batch_ops);
int CmdCas(raftkv::KvClient* client, const std::vector<std::string>& args);

// raftkvctl_cluster.cc
int CmdStatus(raftkv::KvClient* client, const std::vector<std::string>& endpoints);
int CmdEndpointHealth(const std::vector<std::string>& endpoints);
int CmdEndpointStatus(raftkv::KvClient* client, const std::vector<std::string>& endpoints);
int CmdMemberList(raftkv::AdminClient* admin);
int CmdMemberAdd(raftkv::AdminClient* admin, uint64_t id, const std::string& address);
int CmdMemberPromote(raftkv::AdminClient* admin, uint64_t id);
int CmdMemberRemove(raftkv::AdminClient* admin, uint64_t id);
int CmdTransferLeader(raftkv::AdminClient* admin, uint64_t id);

// raftkvctl_snapshot.cc
int CmdSnapshot(raftkv::AdminClient* admin, const std::string& target);
int CmdSnapshotSave(raftkv::AdminClient* admin, const std::string& target,
                    const std::string& path);
int CmdSnapshotRestore(const std::string& path, const CommandOptions& opts);
// snapshot status FILE (offline): etcdctl's HASH, REVISION, TOTAL KEYS,
// TOTAL SIZE of a verified backup, then its index, term and leases.
int CmdSnapshotStatus(const std::string& path);

}  // namespace ctl
}  // namespace raftkv
