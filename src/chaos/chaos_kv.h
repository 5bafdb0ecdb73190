// The key-value calls a chaos worker makes (src/chaos/chaos_main.cc), through
// one of the two client APIs the servers offer: raftkv.v1 (V1ChaosKv, over
// KvClient and its exactly-once session) or etcd's v3 KV service
// (EtcdChaosKv, etcd_chaos_kv.h: no sessions). Requests and answers are
// raftkv.v1's messages on both, so the worker builds its operations and
// records their outcomes in the history the same way whichever API carried
// them; only how a failed write is classified differs (NotApplied).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "check/linearizability.h"
#include "client/kv_client.h"
#include "proto/api.h"

namespace raftkv {
namespace chaos {

// How a write is recorded in the history: ok when answered; failed (the
// checker drops it) only when it is known not to have been applied
// (ChaosKv::NotApplied); otherwise unknown: it may or may not have been
// applied, and the checker may place it anywhere after its invocation, or
// nowhere. A read that failed is recorded as failed (it had no effect).
inline check::Outcome WriteOutcome(const grpc::Status& s, bool not_applied) {
  if (s.ok()) return check::Outcome::kOk;
  return not_applied ? check::Outcome::kFail : check::Outcome::kUnknown;
}

// Adds to `t` a compare that holds iff `key` holds *expected, or, with
// expected == nullptr, iff it is absent (create revision 0).
inline void AddValueCompare(TxnRequest* t, const std::string& key, const std::string* expected) {
  Compare* c = t->add_compare();
  c->set_key(key);
  c->set_result(Compare::EQUAL);
  if (expected != nullptr) {
    c->set_target(Compare::VALUE);
    c->set_value(*expected);
  } else {
    c->set_target(Compare::CREATE);
    c->set_create_revision(0);
  }
}

class ChaosKv {
 public:
  virtual ~ChaosKv() = default;

  // "v1" or "etcd": the API the calls go through (for the run's counts).
  virtual const char* api() const = 0;

  // A linearizable read of `key`, or, with `stale`, a read from the one
  // member this worker is bound to (the --stale_reads negative control).
  virtual grpc::Status Get(const std::string& key, bool stale, std::string* value,
                           bool* found) = 0;
  // request.serializable: the same member as a stale Get.
  virtual grpc::Status Range(const RangeRequest& request, RangeResponse* response) = 0;
  virtual grpc::Status Put(const std::string& key, const std::string& value,
                           PutResponse* response) = 0;
  // Sets key to value iff it holds *expected (nullptr: iff it is absent).
  // On OK: *swapped, and the key's state just before (*found, *current);
  // *revision is the swap's revision when the API tells it, else 0.
  virtual grpc::Status CompareAndSwap(const std::string& key, const std::string* expected,
                                      const std::string& value, bool* swapped, bool* found,
                                      std::string* current, int64_t* revision) = 0;
  virtual grpc::Status Txn(TxnRequest* request, TxnResponse* response) = 0;
  virtual grpc::Status Delete(const std::string& key, bool* existed) = 0;
  virtual grpc::Status DeleteRange(DeleteRangeRequest* request, DeleteRangeResponse* response) = 0;

  // True if the last call was a write that failed and is known not to have
  // been applied (the checker may then drop it): every attempt of it was
  // refused before it could be proposed. False after any other failure:
  // its outcome is unknown.
  virtual bool NotApplied() const = 0;
};

// raftkv.v1 through KvClient: `client` follows the leader with a session,
// `stale_client` is bound to one member. A failed write is never known not
// applied: with a session an earlier attempt of it may have been applied.
class V1ChaosKv : public ChaosKv {
 public:
  V1ChaosKv(std::unique_ptr<KvClient> client, std::unique_ptr<KvClient> stale_client)
      : client_(std::move(client)), stale_client_(std::move(stale_client)) {}

  // For the calls ChaosKv does not carry (leases).
  KvClient* client() { return client_.get(); }

  const char* api() const override { return "v1"; }
  grpc::Status Get(const std::string& key, bool stale, std::string* value, bool* found) override {
    return stale ? stale_client_->Get(key, value, found, /*allow_stale=*/true)
                 : client_->Get(key, value, found);
  }
  grpc::Status Range(const RangeRequest& request, RangeResponse* response) override {
    return (request.serializable() ? stale_client_ : client_)->Range(request, response);
  }
  grpc::Status Put(const std::string& key, const std::string& value,
                   PutResponse* response) override {
    return client_->Put(key, value, ClientPutOptions(), response);
  }
  grpc::Status CompareAndSwap(const std::string& key, const std::string* expected,
                              const std::string& value, bool* swapped, bool* found,
                              std::string* current, int64_t* revision) override {
    *revision = 0;  // CompareAndSwapResponse carries none
    return client_->CompareAndSwap(key, expected, value, swapped, found, current);
  }
  grpc::Status Txn(TxnRequest* request, TxnResponse* response) override {
    return client_->Txn(request, response);
  }
  grpc::Status Delete(const std::string& key, bool* existed) override {
    return client_->Delete(key, existed);
  }
  grpc::Status DeleteRange(DeleteRangeRequest* request, DeleteRangeResponse* response) override {
    return client_->DeleteRange(request, response);
  }
  bool NotApplied() const override { return false; }

 private:
  std::unique_ptr<KvClient> client_, stale_client_;
};

}  // namespace chaos
}  // namespace raftkv
