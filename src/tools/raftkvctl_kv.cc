// raftkvctl's key-value commands: put, get, del, txn, watch and lease in
// etcdctl's syntax and output, and raftkv's own cas and batch.

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
#include <utility>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "client/json.h"
#include "client/kv_client.h"
#include "client/txn_text.h"
#include "tools/raftkvctl_etcd.h"

namespace raftkv {
namespace ctl {

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

// [KEY, RANGE_END) from the positional arguments, --prefix and --from-key
// (every key from KEY on; "" is the first key, as etcdctl takes it).
bool KeyRange(const std::string& cmd, const std::vector<std::string>& args,
              const CommandOptions& opts, std::string* key, std::string* range_end,
              std::string* error) {
  bool prefix = false, from_key = false;
  if (!opts.Bool("prefix", &prefix, error) || !opts.Bool("from-key", &from_key, error)) return false;
  if (prefix && from_key) {
    *error = cmd + ": --prefix and --from-key do not go together";
    return false;
  }
  if (args.empty() || args.size() > (prefix || from_key ? 1u : 2u)) {
    *error = cmd + (prefix ? " --prefix takes KEY" : from_key ? " --from-key takes KEY" : " takes KEY [RANGE_END]");
    return false;
  }
  if (from_key) {
    *key = args[0].empty() ? std::string(1, '\0') : args[0];
    *range_end = std::string(1, '\0');
  } else if (prefix) {
    raftkv::PrefixRange(args[0], key, range_end);
  } else {
    *key = args[0];
    *range_end = args.size() == 2 ? args[1] : "";
  }
  return true;
}

// --sort-by and --order, spelled as etcdctl's, into the request.
bool SortOptions(const CommandOptions& opts, raftkv::RangeRequest* req, std::string* error) {
  using R = raftkv::RangeRequest;
  static const std::pair<const char*, R::SortTarget> kTargets[] = {
      {"KEY", R::KEY}, {"VERSION", R::VERSION}, {"CREATE", R::CREATE}, {"MODIFY", R::MOD}, {"VALUE", R::VALUE}};
  if (opts.Has("sort-by")) {
    const std::string by = opts.Value("sort-by");
    auto it = std::find_if(std::begin(kTargets), std::end(kTargets), [&](const auto& t) { return by == t.first; });
    if (it == std::end(kTargets)) {
      *error = "--sort-by takes KEY, VERSION, CREATE, MODIFY or VALUE, not \"" + by + "\"";
      return false;
    }
    req->set_sort_target(it->second);
  }
  if (opts.Has("order")) {
    const std::string order = opts.Value("order");
    if (order != "ASCEND" && order != "DESCEND") {
      *error = "--order takes ASCEND or DESCEND, not \"" + order + "\"";
      return false;
    }
    req->set_sort_order(order == "ASCEND" ? R::ASCEND : R::DESCEND);
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
  if (!SortOptions(opts, &req, &error)) return Usage(error);
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

// txn: the whole of standard input in etcdctl's format; txn -i
// (--interactive): section by section after etcdctl's prompts, ending at the
// blank line after the failure requests.
int CmdTxn(raftkv::KvClient* client, const CommandOptions& opts) {
  std::string error;
  bool interactive = false;
  if (!opts.Bool("interactive", &interactive, &error)) return Usage(error);
  raftkv::TxnRequest txn;
  raftkv::Status bad;
  if (interactive) {
    bad = ReadTxnSections(std::cin, &std::cout, &txn);
  } else {
    const std::string text((std::istreambuf_iterator<char>(std::cin)),
                           std::istreambuf_iterator<char>());
    bad = raftkv::ParseTxnText(text, &txn);
  }
  if (!bad.ok()) {
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

// batch: the ops as one log entry.
int CmdBatch(raftkv::KvClient* client, const std::vector<raftkv::BatchOp>& batch_ops) {
  std::vector<bool> existed;
  grpc::Status s = client->Batch(batch_ops, &existed);
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

// cas KEY EXPECTED NEW, or cas --absent KEY NEW.
int CmdCas(raftkv::KvClient* client, const std::vector<std::string>& args) {
  const std::string& key = args[0];
  const std::string* expected = FLAGS_absent ? nullptr : &args[1];
  const std::string& value = args.back();
  bool swapped = false, found = false;
  std::string current;
  grpc::Status s = client->CompareAndSwap(key, expected, value, &swapped, &found, &current);
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

}  // namespace ctl
}  // namespace raftkv
