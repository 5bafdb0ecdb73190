#include "server/grpc_server.h"

#include <glog/logging.h>
#include <grpcpp/alarm.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>

#include <algorithm>
#include <limits>
#include <mutex>

#include "server/api/client_handlers.h"
#include "server/etcd/etcd_kv.h"
#include "server/etcd/etcd_lease.h"
#include "server/etcd/etcd_maintenance.h"
#include "server/etcd/etcd_watch.h"
#include "server/api/lease_service.h"
#include "server/peer/peer_service.h"
#include "common/thread_name.h"
#include "common/tsan_handoff.h"

namespace raftkv {

size_t MaxReceiveMessageBytes(const ServerOptions& o) {
  constexpr size_t kOpFraming = 16;  // tags and lengths of one BatchOp / Command
  const size_t entry = std::max(o.max_key_bytes + 2 * o.max_value_bytes,
                                o.max_batch_bytes + kOpFraming * o.max_batch_ops);
  return 2 * std::max({entry, o.max_append_bytes, o.snapshot_chunk_bytes}) + (1 << 20);
}

namespace {

ServerOptions WithMetrics(ServerOptions options, ServerMetrics* own) {
  if (options.metrics == nullptr) options.metrics = own;
  return options;
}

}  // namespace

GrpcServer::GrpcServer(const ServerOptions& options_in, RaftNode* node)
    : own_metrics_(options_in.metrics == nullptr ? std::make_unique<ServerMetrics>() : nullptr),
      options_(WithMetrics(options_in, own_metrics_.get())),
      node_(node),
      methods_(options_.auth, &gate_, options_.count_unary_calls ? options_.metrics : nullptr),
      etcd_maintenance_service_(options_, node),
      hub_(options_.watch, &node->state_machine(), node->id()),
      keeper_(options_.lease, node),
      compactor_(options_.auto_compaction, node),
      forwarder_(options_.forward_to_leader
                     ? std::make_unique<Forwarder>(
                           node, ForwarderOptions{options_.peer_security, options_.max_request_timeout_ms})
                     : nullptr),
      lease_service_(std::make_unique<LeaseService>(options_, node, &keeper_, forwarder_.get())),
      client_handlers_(std::make_unique<ClientHandlers>(options_, node, forwarder_.get())),
      etcd_kv_(std::make_unique<EtcdKv>(options_, node, forwarder_.get())),
      etcd_lease_(std::make_unique<EtcdLease>(options_, lease_service_.get(), node, forwarder_.get())),
      etcd_watch_(std::make_unique<EtcdWatch>(
          &hub_, node, options_.Limits(), options_.auth,
          options_.metrics->Method(RpcName::Of<etcdserverpb::Watch>("Watch"), RpcMethodMetrics::Kind::kStream))),
      etcd_maintenance_(std::make_unique<EtcdMaintenance>(options_, node, forwarder_.get())),
      etcd_cluster_(std::make_unique<EtcdCluster>(options_, node, forwarder_.get())),
      peer_service_(std::make_unique<PeerService>(options_, node)) {
  // Every asynchronous method, registered once with who may call it.
  client_handlers_->Register(&kv_service_, options_.calls_per_cq, &methods_);
  // Reads that walk a range leave the apply thread, which answers them once
  // their barrier is reached: its writes do not wait behind a long read
  // (before Start, with no queue yet, they run where they are).
  auto offload = [this](std::function<void()> read) {
    Completions one;
    one.push_back(std::move(read));
    RunOnCq(std::move(one), 1);
  };
  client_handlers_->SetOffload(offload);
  // etcd's KV service, served by the same checks and state machine.
  etcd_kv_->Register(&etcd_kv_service_, options_.calls_per_cq, &methods_);
  etcd_kv_->SetOffload(offload);
  // etcd's Lease and Watch, served by raftkv.v1's lease operations and
  // watchers' hub; and the services etcd's tools call.
  etcd_lease_->Register(&methods_);
  etcd_cluster_->Register(&etcd_cluster_service_, &methods_);
  etcd_maintenance_->Register(&etcd_maintenance_service_, &etcd_auth_service_, &methods_);
  peer_service_->Register(&testing_service_, options_.calls_per_cq, &methods_);
  lease_service_->Register(&methods_);
  methods_.Add<LeaseKeepAliveRequest, LeaseKeepAliveResponse>(
      peer_service_.get(), &PeerHybridService::RequestRenewLease, RpcName::Of<Peer>("RenewLease"),
      Caller::kPeer, 4, [this](LeaseService::RenewCall* call) { lease_service_->HandleRenew(call); });
  watch_method_.service = &watch_service_;
  watch_method_.hub = &hub_;
  watch_method_.limits = options_.Limits();
  watch_method_.auth = options_.auth;
  watch_method_.gate = &gate_;
  watch_method_.metrics =
      options_.metrics->Method(RpcName::Of<Watch>("Watch"), RpcMethodMetrics::Kind::kStream);
}

GrpcServer::~GrpcServer() {
  Shutdown(0);
  Join();
}

Status GrpcServer::Start() {
  // host:port, where port 0 asks for any free port.
  const std::string& address = options_.listen_address;
  const size_t colon = address.rfind(':');
  const std::string port_text = colon == std::string::npos ? "" : address.substr(colon + 1);
  const bool digits = !port_text.empty() && port_text.size() <= 5 &&
                      port_text.find_first_not_of("0123456789") == std::string::npos;
  const int requested_port = digits ? std::stoi(port_text) : -1;
  if (colon == 0 || requested_port < 0 || requested_port > 65535) {
    return Status::InvalidArgument("listen address '" + address +
                                   "' is not host:port with a port in 0..65535");
  }
  // The standard gRPC health service (grpc.health.v1.Health: SERVING while
  // the server runs, NOT_SERVING once it shuts down), a process-wide switch
  // read when a builder is made, and server reflection of the public
  // services (reflection_service.h), so grpc_health_probe and grpcurl work.
  // The built-in health service carries no descriptor: ours
  // (protos/grpc/health/v1) is linked in by naming it here, so that
  // reflection can describe the service to grpcurl.
  static std::once_flag plugins_once;
  std::call_once(plugins_once, [] {
    (void)grpc::health::v1::HealthCheckRequest::descriptor();
    grpc::EnableDefaultHealthCheckService(true);
  });
  std::vector<std::string> public_services = {KV::service_full_name(), Watch::service_full_name(),
                                              Lease::service_full_name(), "grpc.health.v1.Health",
                                              "grpc.reflection.v1alpha.ServerReflection",
                                              etcdserverpb::KV::service_full_name(),
                                              etcdserverpb::Watch::service_full_name(),
                                              etcdserverpb::Lease::service_full_name(),
                                              etcdserverpb::Cluster::service_full_name(),
                                              etcdserverpb::Maintenance::service_full_name(),
                                              etcdserverpb::Auth::service_full_name()};
  if (options_.admin_service != nullptr) public_services.push_back(Admin::service_full_name());
  reflection_ = std::make_unique<ReflectionService>(std::move(public_services));
  grpc::ServerBuilder builder;
  // Without this gRPC sets SO_REUSEPORT, and a second server on the same
  // port would silently share its connections instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Bounds on what one connection may hold or cost (server_options.h).
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             options_.keepalive_min_time_ms);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, options_.keepalive_interval_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, options_.keepalive_timeout_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, options_.handshake_timeout_ms);
  if (options_.max_connection_idle_ms > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, options_.max_connection_idle_ms);
  }
  grpc::ResourceQuota quota("raftkv-server");
  quota.SetMaxThreads(std::max(4, options_.max_sync_threads));
  quota.Resize(options_.grpc_memory_bytes);
  builder.SetResourceQuota(quota);
  builder.AddListeningPort(options_.listen_address,
                           options_.auth != nullptr ? options_.auth->Credentials()
                                                    : grpc::InsecureServerCredentials(),
                           &bound_port_);
  builder.RegisterService(&kv_service_);
  builder.RegisterService(&etcd_kv_service_);
  builder.RegisterService(etcd_lease_.get());
  builder.RegisterService(etcd_watch_.get());
  builder.RegisterService(&etcd_cluster_service_);
  builder.RegisterService(&etcd_maintenance_service_);
  builder.RegisterService(&etcd_auth_service_);
  builder.RegisterService(&watch_service_);
  builder.RegisterService(lease_service_.get());
  builder.RegisterService(peer_service_.get());
  builder.RegisterService(reflection_.get());
  if (options_.faults != nullptr) builder.RegisterService(&testing_service_);
  if (options_.admin_service != nullptr) builder.RegisterService(options_.admin_service);
  const size_t max_receive = MaxReceiveMessageBytes(options_);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<size_t>(max_receive, std::numeric_limits<int>::max())));
  builder.SetMaxSendMessageSize(-1);
  for (int i = 0; i < std::max(1, options_.cq_num); ++i) cqs_.push_back(builder.AddCompletionQueue());
  server_ = builder.BuildAndStart();
  if (!server_ || bound_port_ == 0 || (requested_port != 0 && bound_port_ != requested_port)) {
    return Status::IOError(
        "cannot listen on " + options_.listen_address + " (address in use or not local?" +
        (options_.auth != nullptr && options_.auth->tls()
             ? " or --tls_cert_file and --tls_key_file do not belong together?)"
             : ")"));
  }
  for (auto& cq : cqs_) {
    methods_.PostAll(cq.get());
    for (int i = 0; i < 4; ++i) WatchCall::Post(&watch_method_, cq.get());
  }
  hub_.Start();
  keeper_.Start();
  compactor_.Start();
  node_->SetApplyObserver([this] { hub_.Notify(); });
  node_->SetLeaderlessObserver(
      [this](bool leaderless, int64_t ms) { hub_.SetLeaderless(leaderless, ms); });
  options_.metrics->SetWatcherCount([this] { return hub_.size(); });
  observer_set_ = true;
  for (auto& cq : cqs_) {
    for (int t = 0; t < std::max(1, options_.threads_per_cq); ++t) {
      threads_.emplace_back([this, q = cq.get()] {
        SetThreadName("raftkv-cq");
        Poll(q);
      });
    }
  }
  if (options_.finish_on_cq) {
    node_->SetCompletionDispatcher([this](Completions batch) { FinishOnCq(std::move(batch)); });
    dispatcher_set_ = true;
  }
  LOG(INFO) << "member " << node_->id() << " serving on " << options_.listen_address << " with "
            << cqs_.size() << " completion queues x " << options_.threads_per_cq << " threads";
  return Status::OK();
}

// A batch of completions travelling through a completion queue: an alarm
// that is due at once, so a queue thread picks it up and runs the batch
// there. Finishing a call on the thread that polls its queue spares the
// wake-up of that thread for every call finished elsewhere.
class GrpcServer::CompletionBatch final : public Tagged {
 public:
  CompletionBatch(GrpcServer* server, Completions batch) : server_(server), batch_(std::move(batch)) {}
  void Start(grpc::ServerCompletionQueue* cq) {
    TsanReleaseTag(this);
    alarm_.Set(cq, gpr_time_0(GPR_CLOCK_MONOTONIC), this);
  }
  void Proceed(bool /*ok*/) override {
    RunAll(&batch_);  // also when the alarm was cancelled: every call is answered
    GrpcServer* server = server_;
    delete this;
    std::lock_guard<std::mutex> lock(server->batches_mu_);
    if (--server->pending_batches_ == 0) server->batches_cv_.notify_all();
  }

 private:
  GrpcServer* const server_;
  Completions batch_;
  grpc::Alarm alarm_;
};

void GrpcServer::FinishOnCq(Completions batch) {
  // A small batch (a lightly loaded server: one call in flight) is finished
  // here at once: the hop to a queue thread would add its wake-up to the
  // call's latency and save none.
  constexpr size_t kMinBatch = 4;
  RunOnCq(std::move(batch), kMinBatch);
}

void GrpcServer::RunOnCq(Completions batch, size_t min_batch) {
  std::shared_lock<std::shared_mutex> lock(gate_.mu);
  if (batch.size() < min_batch || gate_.draining || cqs_.empty()) {
    lock.unlock();
    RunAll(&batch);
    return;
  }
  {
    std::lock_guard<std::mutex> count(batches_mu_);
    ++pending_batches_;
  }
  auto* tag = new CompletionBatch(this, std::move(batch));
  tag->Start(cqs_[next_cq_.fetch_add(1, std::memory_order_relaxed) % cqs_.size()].get());
}

void GrpcServer::Poll(grpc::ServerCompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (TsanUncheckedNext(cq, &tag, &ok)) {
    TsanAcquireTag(tag);
    static_cast<Tagged*>(tag)->Proceed(ok);
  }
}

void GrpcServer::Shutdown(int grace_ms) {
  if (shut_down_ || !server_) return;
  shut_down_ = true;
  hub_.Stop();  // watch streams never end by themselves
  keeper_.Stop();
  compactor_.Stop();
  if (auto* health = server_->GetHealthCheckService()) health->Shutdown();
  if (forwarder_) forwarder_->BeginStop();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
}

void GrpcServer::Join() {
  // Only the first Join touches the node: the destructor joins again, and
  // the node may be gone by then.
  if (dispatcher_set_) {
    node_->SetCompletionDispatcher(nullptr);
    dispatcher_set_ = false;
  }
  if (observer_set_) {
    node_->SetApplyObserver(nullptr);
    node_->SetLeaderlessObserver(nullptr);
    options_.metrics->SetWatcherCount(nullptr);
    observer_set_ = false;
  }
  // Forwarded calls are answered (cancelled if still waiting) while the
  // queues their calls finish on still run.
  if (forwarder_) forwarder_->Stop();
  {
    std::unique_lock<std::shared_mutex> lock(gate_.mu);
    gate_.draining = true;
  }
  {
    // Batches already on the queues run before the queues shut down.
    std::unique_lock<std::mutex> lock(batches_mu_);
    batches_cv_.wait(lock, [this] { return pending_batches_ == 0; });
  }
  for (auto& cq : cqs_) cq->Shutdown();
  for (auto& t : threads_) t.join();
  threads_.clear();
  cqs_.clear();
}

}  // namespace raftkv
