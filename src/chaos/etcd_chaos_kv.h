// A chaos worker's calls through etcd's v3 KV service (etcdserverpb.KV:
// Range, Put, DeleteRange, Txn) on the members' client port, as an etcd
// client would make them: no exactly-once session, so a write that may have
// been applied is never retried.
//
// Members are chosen as KvClient chooses them (client/retry_loop.h): the
// leader last seen first (a follower forwards the call to the leader and
// names it in the trailers, raftkv-leader-addr), then the endpoints in turn,
// or the member a FAILED_PRECONDITION names. Each attempt's answer is
// classified by ClassifyEtcdAttempt:
//   OK                                   answered;
//   FAILED_PRECONDITION naming a leader  not proposed: redirected there;
//   UNAVAILABLE with "raftkv-not-applied: 1" (etcd_errors.cc keeps raftkv's
//     trailers: no leader, the entry overwritten, a forwarder that could not
//     reach the leader)                  not applied: tried at the next member;
//   UNAVAILABLE without it, DEADLINE_EXCEEDED
//                                        a read is tried again; a write ends
//                                        here, its outcome unknown;
//   anything else                        ends the call.
// A write is also not sent to a member whose channel does not connect within
// the attempt's time (nothing sent, nothing applied: the next member). A
// write that ran out of time with every attempt refused like that is known
// not applied (NotApplied()); the worker records it as failed, which the
// checker drops. Reads: linearizable (serializable = false) unless stale.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "chaos/chaos_kv.h"
#include "client/retry_loop.h"
#include "proto/etcd.h"

namespace raftkv {
namespace chaos {

struct EtcdChaosOptions {
  std::vector<std::string> endpoints;  // the members' client addresses
  std::string stale_endpoint;          // the member stale reads go to
  int timeout_ms = 8000;               // a call's budget, retries included
  int rpc_timeout_ms = 1000;           // one read attempt's (a write's: what is left)
  uint64_t retry_seed = 0;             // the back-off's (0: random)
};

// What one attempt's answer means for its call.
enum class EtcdAttempt {
  kAnswered,       // OK
  kRedirect,       // refused by a follower naming the leader: nothing was proposed
  kRetry,          // tried at the next member: a read, or a write known not applied
  kIndeterminate,  // a write that may have been applied: ends the call, outcome unknown
  kFinal,          // another error: ends the call (a write's outcome is unknown)
};
// `not_applied`: the answer's raftkv-not-applied trailer was "1";
// `redirect`: its raftkv-leader-addr names a member other than the one asked.
EtcdAttempt ClassifyEtcdAttempt(const grpc::Status& status, bool write, bool not_applied,
                                bool redirect);

// raftkv.v1's requests as etcd's (the fields the chaos workers use:
// compares, put, range and delete-range operations; INVALID_ARGUMENT for a
// nested transaction) and etcd's answers as raftkv.v1's.
grpc::Status ToEtcd(const TxnRequest& in, etcdserverpb::TxnRequest* out);
void FromEtcd(const etcdserverpb::ResponseHeader& in, ResponseHeader* out);
void FromEtcd(const mvccpb::KeyValue& in, KeyValue* out);
void FromEtcd(const etcdserverpb::RangeResponse& in, RangeResponse* out);
void FromEtcd(const etcdserverpb::DeleteRangeResponse& in, DeleteRangeResponse* out);
void FromEtcd(const etcdserverpb::TxnResponse& in, TxnResponse* out);

class EtcdChaosKv : public ChaosKv {
 public:
  explicit EtcdChaosKv(EtcdChaosOptions options);

  const char* api() const override { return "etcd"; }
  grpc::Status Get(const std::string& key, bool stale, std::string* value, bool* found) override;
  grpc::Status Range(const RangeRequest& request, RangeResponse* response) override;
  grpc::Status Put(const std::string& key, const std::string& value,
                   PutResponse* response) override;
  // A Txn: compare the key's value (or create revision 0), put, else range.
  grpc::Status CompareAndSwap(const std::string& key, const std::string* expected,
                              const std::string& value, bool* swapped, bool* found,
                              std::string* current, int64_t* revision) override;
  grpc::Status Txn(TxnRequest* request, TxnResponse* response) override;
  // A DeleteRange of the one key: existed iff it deleted one.
  grpc::Status Delete(const std::string& key, bool* existed) override;
  grpc::Status DeleteRange(DeleteRangeRequest* request, DeleteRangeResponse* response) override;
  bool NotApplied() const override { return not_applied_; }

 private:
  using Stub = etcdserverpb::KV::Stub;
  template <typename Req, typename Resp>
  using Method = grpc::Status (Stub::*)(grpc::ClientContext*, const Req&, Resp*);

  // One call with the policy at the top of this file. `stale`: only to
  // options_.stale_endpoint, not following the leader.
  template <typename Req, typename Resp>
  grpc::Status Call(const char* name, Method<Req, Resp> method, const Req& request,
                    Resp* response, bool write, bool stale = false);
  // The end of a call whose attempts were all refused before being proposed
  // (or never sent): a write among them is known not applied.
  grpc::Status Finish(grpc::Status gave_up, bool write);
  grpc::Status RangeEtcd(const etcdserverpb::RangeRequest& request,
                         etcdserverpb::RangeResponse* out);

  struct Member {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<Stub> stub;
  };
  Member* MemberAt(const std::string& address);

  const EtcdChaosOptions options_;
  const std::vector<std::string> stale_endpoints_;
  std::map<std::string, Member> members_;
  std::string leader_;  // last member that answered a leader-only call, or was named leader
  RetrySeeds seeds_;     // one back-off seed per call
  bool not_applied_ = false;
};

}  // namespace chaos
}  // namespace raftkv
