#include "client/admin_client.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include <glog/logging.h>

#include "client/channel_args.h"
#include "client/security.h"
#include "client/kv_client.h"
#include "client/retry_loop.h"

namespace raftkv {
namespace {

using Clock = std::chrono::steady_clock;

// Whether `resp` is the leader's own view: the leader lists itself as "self".
bool FromLeader(const ListMembersResponse& resp) {
  if (resp.leader_id() == 0) return false;
  for (const MemberStatus& m : resp.members()) {
    if (m.id() == resp.leader_id()) return m.state() == "self";
  }
  return false;
}

std::string AddressOf(const ListMembersResponse& resp, uint64_t id) {
  for (const MemberStatus& m : resp.members()) {
    if (m.id() == id) return m.address();
  }
  return "";
}

}  // namespace

AdminClient::AdminClient(AdminClientOptions options)
    : options_(std::move(options)), retry_seeds_(options_.retry_seed) {}
AdminClient::~AdminClient() = default;

Admin::Stub* AdminClient::StubFor(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& stub = stubs_[address];
  if (!stub) {
    stub = Admin::NewStub(MakeChannel(address, RaftkvChannelArguments(), options_.security));
  }
  return stub.get();
}

void AdminClient::SetLeader(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  leader_ = address;
}

std::string AdminClient::last_leader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leader_;
}

grpc::Status AdminClient::ListMembersOf(const std::string& endpoint, ListMembersResponse* out,
                                        int timeout_ms) {
  grpc::ClientContext ctx;
  SetTimeout(&ctx, std::chrono::milliseconds(std::max(1, timeout_ms)));
  *out = ListMembersResponse();
  return StubFor(endpoint)->ListMembers(&ctx, ListMembersRequest(), out);
}

grpc::Status AdminClient::ListMembers(ListMembersResponse* out, bool* from_leader,
                                      std::string* answered_by) {
  if (options_.endpoints.empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no endpoints given");
  }
  const auto rpc_timeout = std::chrono::milliseconds(std::max(1, options_.rpc_timeout_ms));
  RetryLoop loop(options_.endpoints, last_leader(), std::chrono::milliseconds(options_.timeout_ms),
                 retry_seeds_.Next());
  bool have_view = false;
  ListMembersResponse view;
  std::string view_from;
  grpc::Status last(grpc::StatusCode::DEADLINE_EXCEEDED, "no attempt made");
  while (loop.Start()) {
    const std::string target = loop.target();
    ListMembersResponse resp;
    const auto timeout = std::min<Clock::duration>(
        std::max<Clock::duration>(loop.left(), std::chrono::milliseconds(1)), rpc_timeout);
    grpc::Status s = ListMembersOf(
        target, &resp,
        static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()));
    std::string next;
    if (s.ok()) {
      if (FromLeader(resp)) {
        SetLeader(target);
        *out = std::move(resp);
        if (from_leader != nullptr) *from_leader = true;
        if (answered_by != nullptr) *answered_by = target;
        return grpc::Status::OK;
      }
      have_view = true;
      view = resp;
      view_from = target;
      next = AddressOf(resp, resp.leader_id());
      if (next == target) next.clear();  // it names itself but is not leader (yet)
    } else {
      last = s;
      VLOG(1) << "AdminClient: ListMembers at " << target << ": "
              << StatusCodeName(s.error_code()) << ": " << s.error_message();
      // A refused identity (TLS certificate, token) is not fixed by retrying.
      if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
          s.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
        return grpc::Status(s.error_code(), s.error_message() + " (ListMembers at " + target + ")");
      }
    }
    // The leader the member names, else the next configured endpoint; a
    // short back-off after each full round.
    if (!next.empty() && !loop.Redirect(next)) continue;
    loop.Advance();
    if (loop.RoundDone() && !loop.Backoff()) break;
  }
  if (have_view) {
    *out = std::move(view);
    if (from_leader != nullptr) *from_leader = false;
    if (answered_by != nullptr) *answered_by = view_from;
    return grpc::Status::OK;
  }
  return grpc::Status(last.error_code(), last.error_message() +
                                             " (ListMembers: no member answered; tried " +
                                             JoinEndpoints(loop.tried()) + ")");
}

template <typename Req, typename Resp>
grpc::Status AdminClient::CallLeader(const char* name, Method<Req, Resp> method,
                                     const Req& request, Resp* response, bool* uncertain) {
  if (options_.endpoints.empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no endpoints given");
  }
  RetryLoop loop(options_.endpoints, last_leader(), std::chrono::milliseconds(options_.timeout_ms),
                 retry_seeds_.Next());
  grpc::Status last(grpc::StatusCode::DEADLINE_EXCEEDED, "no attempt made");
  while (loop.Start()) {
    const std::string target = loop.target();
    grpc::ClientContext ctx;
    SetTimeout(&ctx, loop.left());
    *response = Resp();
    grpc::Status s = (StubFor(target)->*method)(&ctx, request, response);
    if (s.ok()) {
      SetLeader(target);
      return s;
    }
    VLOG(1) << "AdminClient: " << name << " at " << target << " failed: "
            << StatusCodeName(s.error_code()) << ": " << s.error_message();
    last = s;
    bool sleep = false;
    switch (s.error_code()) {
      case grpc::StatusCode::FAILED_PRECONDITION: {
        const std::string hint = TrailingValue(ctx, kLeaderAddrMetadataKey);
        if (hint.empty() || hint == target || !ParseEndpoint(hint).ok()) {
          // The leader itself refused: this is the answer.
          SetLeader(target);
          return s;
        }
        sleep = loop.Redirect(hint);
        break;
      }
      case grpc::StatusCode::UNAVAILABLE:
        // Possibly after the leader appended the request (leadership lost,
        // server stopped), or before (no leader, connection refused).
        if (uncertain != nullptr) *uncertain = true;
        loop.Advance();
        sleep = true;
        break;
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        if (uncertain != nullptr) *uncertain = true;
        return grpc::Status(s.error_code(), s.error_message() + " (" + name + " at " + target +
                                                ": outcome unknown)");
      default:
        return s;
    }
    if (sleep && !loop.Backoff()) break;
  }
  return loop.GaveUp(last, name);
}

bool AdminClient::AlreadyDone(uint64_t id, Want want, MemberChangeResponse* out) {
  ListMembersResponse list;
  bool from_leader = false;
  if (!ListMembers(&list, &from_leader).ok() || !from_leader) return false;
  const MemberStatus* member = nullptr;
  for (const MemberStatus& m : list.members()) {
    if (m.id() == id) member = &m;
  }
  bool done = false;
  switch (want) {
    case Want::kLearner: done = member != nullptr; break;  // promoted meanwhile counts too
    case Want::kVoter: done = member != nullptr && member->voter(); break;
    case Want::kAbsent: done = member == nullptr; break;
  }
  if (!done) return false;
  out->set_index(list.config_index());
  MembershipConfig* config = out->mutable_config();
  config->Clear();
  for (const MemberStatus& m : list.members()) {
    MemberConfig* c = config->add_members();
    c->set_id(m.id());
    c->set_address(m.address());
    c->set_voter(m.voter());
  }
  return true;
}

grpc::Status AdminClient::Change(
    const char* name, uint64_t id, Want want,
    const std::function<grpc::Status(bool*, MemberChangeResponse*)>& call,
    MemberChangeResponse* out) {
  bool uncertain = false;
  grpc::Status s = call(&uncertain, out);
  if (s.ok() || !uncertain) return s;
  if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION && AlreadyDone(id, want, out)) {
    VLOG(1) << "AdminClient: " << name << " " << id
            << ": refused on retry, but an earlier attempt took effect";
    return grpc::Status::OK;
  }
  return s;
}

grpc::Status AdminClient::AddMember(uint64_t id, const std::string& address,
                                    MemberChangeResponse* out) {
  AddMemberRequest req;
  req.set_id(id);
  req.set_address(address);
  return Change("AddMember", id, Want::kLearner,
                [&](bool* uncertain, MemberChangeResponse* resp) {
                  return CallLeader("AddMember", &Admin::Stub::AddMember, req, resp, uncertain);
                },
                out);
}

grpc::Status AdminClient::PromoteMember(uint64_t id, MemberChangeResponse* out) {
  PromoteMemberRequest req;
  req.set_id(id);
  return Change("PromoteMember", id, Want::kVoter,
                [&](bool* uncertain, MemberChangeResponse* resp) {
                  return CallLeader("PromoteMember", &Admin::Stub::PromoteMember, req, resp,
                                    uncertain);
                },
                out);
}

grpc::Status AdminClient::RemoveMember(uint64_t id, MemberChangeResponse* out) {
  RemoveMemberRequest req;
  req.set_id(id);
  return Change("RemoveMember", id, Want::kAbsent,
                [&](bool* uncertain, MemberChangeResponse* resp) {
                  return CallLeader("RemoveMember", &Admin::Stub::RemoveMember, req, resp,
                                    uncertain);
                },
                out);
}

grpc::Status AdminClient::TransferLeader(uint64_t id, TransferLeaderResponse* out) {
  TransferLeaderRequest req;
  req.set_id(id);
  bool uncertain = false;
  grpc::Status s =
      CallLeader("TransferLeader", &Admin::Stub::TransferLeader, req, out, &uncertain);
  if (s.ok() || !uncertain || s.error_code() != grpc::StatusCode::FAILED_PRECONDITION) return s;
  // Refused on a retry: maybe because an earlier attempt already made `id`
  // the leader (a member refuses a transfer to itself when not leader).
  ListMembersResponse list;
  bool from_leader = false;
  if (ListMembers(&list, &from_leader).ok() && from_leader && list.leader_id() == id) {
    out->set_leader_id(id);
    out->set_term(list.term());
    return grpc::Status::OK;
  }
  return s;
}

grpc::Status AdminClient::TakeSnapshot(const std::string& endpoint, TakeSnapshotResponse* out,
                                       int timeout_ms) {
  grpc::ClientContext ctx;
  SetTimeout(&ctx, std::chrono::milliseconds(std::max(1, timeout_ms)));
  *out = TakeSnapshotResponse();
  return StubFor(endpoint)->TakeSnapshot(&ctx, TakeSnapshotRequest(), out);
}

grpc::Status AdminClient::SnapshotSave(
    const std::string& endpoint, int timeout_ms,
    const std::function<bool(const SnapshotSaveResponse&)>& on_message) {
  grpc::ClientContext ctx;
  SetTimeout(&ctx, std::chrono::milliseconds(std::max(1, timeout_ms)));
  std::unique_ptr<grpc::ClientReader<SnapshotSaveResponse>> reader =
      StubFor(endpoint)->SnapshotSave(&ctx, SnapshotSaveRequest());
  SnapshotSaveResponse msg;
  bool stopped = false;
  while (reader->Read(&msg)) {
    if (!on_message(msg)) {
      stopped = true;
      ctx.TryCancel();
      while (reader->Read(&msg)) {
      }
      break;
    }
  }
  grpc::Status s = reader->Finish();
  if (stopped) return grpc::Status(grpc::StatusCode::CANCELLED, "transfer stopped by the receiver");
  return s;
}

}  // namespace raftkv
