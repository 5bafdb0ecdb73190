// The result type of the whole code base: OK, or an error code with a
// message that names what failed (file and offset, member, field, the value
// refused and why). Nothing throws across a module boundary; functions that
// can fail return a Status (or take a Status* beside their result). The
// service turns it into a gRPC status at the edge (server/rpc/grpc_status.h).
#pragma once

#include <ostream>
#include <string>
#include <utility>

namespace raftkv {

class Status {
 public:
  enum class Code {
    kOk,
    kInvalidArgument,     // the input is malformed or out of range
    kFailedPrecondition,  // well-formed, but not possible in the current state
    kUnavailable,         // not now: retry (not leader, shutting down)
    kIOError,             // the operating system refused (open, write, fsync)
    kCorruption,          // stored data fails its checks
    kNotFound,            // the named thing (a lease) does not exist
    kOutOfRange,          // a revision outside the history kept (compacted, or future)
    kResourceExhausted,   // a bound was reached (answer size, saved answers, sessions)
    kAborted,             // the operation was cut short (its session expired); retry anew
    kDeadlineExceeded,    // the caller's deadline passed first; the outcome may be unknown
    kInternal,            // an invariant of ours broke (a bug), not the caller's fault
    kUnimplemented,       // a well-formed request for something not built (yet)
  };

  // Why, for the refusals a client tells apart by more than the code (etcd's
  // clients match etcd's messages: server/etcd/etcd_errors.h). Set where the
  // error is made; kNone for every other error.
  enum class Reason {
    kNone,
    kEmptyKey,         // a request's key is empty
    kKeyNotFound,      // a put keeping the value or lease of a key that does not exist
    kValueProvided,    // a put keeping the value carries one
    kLeaseProvided,    // a put keeping the lease carries one
    kTooManyOps,       // a transaction over --max_txn_ops
    kDuplicateKey,     // a transaction writing a key twice
    kCompacted,        // a revision older than the history kept
    kFutureRevision,   // a revision after the store's
    kRequestTooLarge,  // a key, value or request over its size bound
    kLeaseNotFound,    // the lease named does not exist
    kNotLeader,        // this member does not lead and does not forward
    kNoLeader,         // no leader is known
    kLeaderChanged,    // leadership changed before the request completed
    kTimeout,          // not completed before the deadline
    kStopped,          // the server is shutting down
    kMemberExists,     // a membership change adds an id already in the configuration
    kAddressInUse,     // a membership change gives a member another member's address
    kMemberNotFound,   // a membership change names an id not in the configuration
    kNotLearner,       // a promotion of a voter
    kLearnerNotReady,  // a promotion of a learner behind the leader's log
    kNotEnoughStarted, // a voter added while too few voters answer the leader
    kNoSpace,          // a write refused while the state is over its quota (NOSPACE alarm)
  };
  // The last reason (a saved answer's reason above it is from a newer version).
  static constexpr Reason kLastReason = Reason::kNoSpace;

  Status() = default;
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Status(Code code, std::string msg, Reason reason)
      : code_(code), reason_(reason), message_(std::move(msg)) {}
  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status FailedPrecondition(std::string msg) {
    return Status(Code::kFailedPrecondition, std::move(msg));
  }
  static Status Unavailable(std::string msg) { return Status(Code::kUnavailable, std::move(msg)); }
  static Status IOError(std::string msg) { return Status(Code::kIOError, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status OutOfRange(std::string msg) { return Status(Code::kOutOfRange, std::move(msg)); }
  static Status ResourceExhausted(std::string msg) {
    return Status(Code::kResourceExhausted, std::move(msg));
  }
  static Status Aborted(std::string msg) { return Status(Code::kAborted, std::move(msg)); }
  static Status DeadlineExceeded(std::string msg) {
    return Status(Code::kDeadlineExceeded, std::move(msg));
  }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  Reason reason() const { return reason_; }
  // This status with `reason` set.
  Status WithReason(Reason reason) && {
    reason_ = reason;
    return std::move(*this);
  }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  // The message alone ("" when OK).
  const std::string& message() const { return message_; }
  // "OK", or the code's name and the message.
  std::string ToString() const {
    switch (code_) {
      case Code::kOk: return "OK";
      case Code::kInvalidArgument: return "Invalid argument: " + message_;
      case Code::kFailedPrecondition: return "Failed precondition: " + message_;
      case Code::kUnavailable: return "Unavailable: " + message_;
      case Code::kIOError: return "IO error: " + message_;
      case Code::kCorruption: return "Corruption: " + message_;
      case Code::kNotFound: return "Not found: " + message_;
      case Code::kOutOfRange: return "Out of range: " + message_;
      case Code::kResourceExhausted: return "Resource exhausted: " + message_;
      case Code::kAborted: return "Aborted: " + message_;
      case Code::kDeadlineExceeded: return "Deadline exceeded: " + message_;
      case Code::kInternal: return "Internal: " + message_;
      case Code::kUnimplemented: return "Unimplemented: " + message_;
    }
    return message_;
  }

 private:
  Code code_ = Code::kOk;
  Reason reason_ = Reason::kNone;
  std::string message_;
};

inline std::ostream& operator<<(std::ostream& os, const Status& status) { return os << status.ToString(); }

}  // namespace raftkv
