"""Typed errors of the raftkv client.

Every error raised for a failed call is a :class:`RaftkvError` carrying the
gRPC status code (``code``, a :class:`grpc.StatusCode`, or None for an error
found by the client itself), the server's message (``details``), the
endpoint that answered last (``endpoint``) and its trailing metadata
(``trailers``, a dict). The subclass tells what happened (doc/api.md):

==========================  ===================  ==================================
class                       gRPC status          meaning / what to do
==========================  ===================  ==================================
InvalidArgument             INVALID_ARGUMENT     malformed request; never retried
NotFound                    NOT_FOUND            unknown lease
FailedPrecondition          FAILED_PRECONDITION  e.g. a lease id already in use
NotLeader                   FAILED_PRECONDITION  the leader could not be reached
                                                 through the redirects in time
Unavailable                 UNAVAILABLE          no leader / member stopping; retried
                                                 until the call's timeout
Timeout                     DEADLINE_EXCEEDED    not served within the deadline
Aborted                     ABORTED              the call was aborted
SessionExpired              ABORTED +            the write's session expired
                            raftkv-session-expired
Compacted                   OUT_OF_RANGE         revision older than the history
                                                 window (``compact_revision``)
ResourceExhausted           RESOURCE_EXHAUSTED   too many watchers, ...
PermissionDenied            PERMISSION_DENIED    credentials not allowed this call
Unauthenticated             UNAUTHENTICATED      no or wrong credentials
Cancelled                   CANCELLED            the call (or watch) was cancelled
Internal                    INTERNAL, UNKNOWN,   server-side failure
                            DATA_LOSS
Unimplemented               UNIMPLEMENTED        the server lacks the call
==========================  ===================  ==================================

``outcome_unknown`` is True on the error of a write that may have been
applied (an attempt failed after the server may have accepted it, and the
write could not be settled by a retry in its session): read the state to
find out. ``not_applied`` is True when the server said (trailer
``raftkv-not-applied: 1``) that the write was certainly not applied.
"""

import re
from typing import Dict, Mapping, Optional

import grpc

__all__ = [
    "RaftkvError",
    "InvalidArgument",
    "NotFound",
    "AlreadyExists",
    "FailedPrecondition",
    "NotLeader",
    "Unavailable",
    "Timeout",
    "Aborted",
    "SessionExpired",
    "Compacted",
    "ResourceExhausted",
    "PermissionDenied",
    "Unauthenticated",
    "Cancelled",
    "Internal",
    "Unimplemented",
    "from_rpc_error",
    "LEADER_ADDR_TRAILER",
    "LEADER_ID_TRAILER",
    "NOT_APPLIED_TRAILER",
    "SESSION_EXPIRED_TRAILER",
    "COMPACT_REVISION_TRAILER",
]

# Trailing-metadata keys the servers set (doc/api.md).
LEADER_ADDR_TRAILER = "raftkv-leader-addr"
LEADER_ID_TRAILER = "raftkv-leader-id"
NOT_APPLIED_TRAILER = "raftkv-not-applied"
SESSION_EXPIRED_TRAILER = "raftkv-session-expired"
COMPACT_REVISION_TRAILER = "raftkv-compact-revision"


class RaftkvError(Exception):
    """Base class of every error the raftkv client raises for a failed call."""

    #: The gRPC status code this class stands for (None: decided per instance).
    default_code: Optional[grpc.StatusCode] = None

    def __init__(self, details: str = "", code: Optional[grpc.StatusCode] = None,
                 endpoint: Optional[str] = None, trailers: Optional[Mapping[str, str]] = None,
                 outcome_unknown: bool = False):
        self.code: Optional[grpc.StatusCode] = code if code is not None else self.default_code
        self.details: str = details
        self.endpoint: Optional[str] = endpoint
        self.trailers: Dict[str, str] = dict(trailers or {})
        self.outcome_unknown: bool = outcome_unknown
        super().__init__(details)

    @property
    def message(self) -> str:
        return self.details

    @property
    def not_applied(self) -> bool:
        """The server said the write was certainly not applied."""
        return self.trailers.get(NOT_APPLIED_TRAILER) == "1"

    def __str__(self) -> str:
        code = self.code.name if self.code is not None else "CLIENT"
        s = "%s: %s" % (code, self.details)
        if self.endpoint:
            s += " [at %s]" % self.endpoint
        if self.outcome_unknown:
            s += " (outcome unknown: the write may have been applied)"
        return s

    def __repr__(self) -> str:
        return "%s(%r, code=%s, endpoint=%r)" % (
            type(self).__name__, self.details, self.code, self.endpoint)


class InvalidArgument(RaftkvError, ValueError):
    """INVALID_ARGUMENT: malformed request (empty key, bad range, over a limit...)."""
    default_code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(RaftkvError):
    """NOT_FOUND: an unknown lease."""
    default_code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(RaftkvError):
    """ALREADY_EXISTS."""
    default_code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(RaftkvError):
    """FAILED_PRECONDITION that is not a redirect (e.g. a lease id already in use)."""
    default_code = grpc.StatusCode.FAILED_PRECONDITION


class NotLeader(FailedPrecondition):
    """FAILED_PRECONDITION naming the leader: the call did not reach the leader in time."""

    @property
    def leader_addr(self) -> Optional[str]:
        return self.trailers.get(LEADER_ADDR_TRAILER) or None

    @property
    def leader_id(self) -> Optional[int]:
        v = self.trailers.get(LEADER_ID_TRAILER)
        try:
            return int(v) if v else None
        except ValueError:
            return None


class Unavailable(RaftkvError):
    """UNAVAILABLE: no leader, member stopping or unreachable."""
    default_code = grpc.StatusCode.UNAVAILABLE


class Timeout(RaftkvError):
    """DEADLINE_EXCEEDED: not served within the call's deadline."""
    default_code = grpc.StatusCode.DEADLINE_EXCEEDED


class Aborted(RaftkvError):
    """ABORTED."""
    default_code = grpc.StatusCode.ABORTED


class SessionExpired(Aborted):
    """ABORTED with raftkv-session-expired: the write's session is unknown or expired.

    The client has forgotten the session (the next write opens a new one).
    With ``outcome_unknown`` an earlier attempt of this write may have been
    applied: the client does not apply it again on its own.
    """


class Compacted(RaftkvError):
    """OUT_OF_RANGE: a read or watch at a revision older than the history window."""
    default_code = grpc.StatusCode.OUT_OF_RANGE

    @property
    def compact_revision(self) -> Optional[int]:
        """The oldest revision kept (trailer raftkv-compact-revision, else the message)."""
        v = self.trailers.get(COMPACT_REVISION_TRAILER)
        if v:
            try:
                return int(v)
            except ValueError:
                pass
        m = re.search(r"oldest revision[^0-9]*?(\d+)", self.details or "")
        return int(m.group(1)) if m else None


class ResourceExhausted(RaftkvError):
    """RESOURCE_EXHAUSTED: too many watchers, or a watcher that could not keep up."""
    default_code = grpc.StatusCode.RESOURCE_EXHAUSTED


class PermissionDenied(RaftkvError):
    """PERMISSION_DENIED."""
    default_code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(RaftkvError):
    """UNAUTHENTICATED."""
    default_code = grpc.StatusCode.UNAUTHENTICATED


class Cancelled(RaftkvError):
    """CANCELLED."""
    default_code = grpc.StatusCode.CANCELLED


class Internal(RaftkvError):
    """INTERNAL, UNKNOWN or DATA_LOSS: a failure on the server."""
    default_code = grpc.StatusCode.INTERNAL


class Unimplemented(RaftkvError):
    """UNIMPLEMENTED: the server does not serve this call (an older server?)."""
    default_code = grpc.StatusCode.UNIMPLEMENTED


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: Timeout,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.OUT_OF_RANGE: Compacted,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.UNKNOWN: Internal,
    grpc.StatusCode.DATA_LOSS: Internal,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
}


def trailers_of(err: grpc.RpcError) -> Dict[str, str]:
    """The trailing metadata of a failed call, as a dict of str."""
    out: Dict[str, str] = {}
    try:
        md = err.trailing_metadata() or ()
    except Exception:
        return out
    for item in md:
        key, value = item[0], item[1]
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        out[key] = value
    return out


def error_class(code: Optional[grpc.StatusCode], trailers: Mapping[str, str]):
    """The RaftkvError subclass for a status code and its trailers."""
    if code == grpc.StatusCode.ABORTED and trailers.get(SESSION_EXPIRED_TRAILER) == "1":
        return SessionExpired
    if code == grpc.StatusCode.FAILED_PRECONDITION and trailers.get(LEADER_ADDR_TRAILER):
        return NotLeader
    return _BY_CODE.get(code, RaftkvError)


def make_error(code: Optional[grpc.StatusCode], details: str, endpoint: Optional[str] = None,
               trailers: Optional[Mapping[str, str]] = None,
               outcome_unknown: bool = False) -> RaftkvError:
    trailers = dict(trailers or {})
    cls = error_class(code, trailers)
    return cls(details, code=code, endpoint=endpoint, trailers=trailers,
               outcome_unknown=outcome_unknown)


def from_rpc_error(err: grpc.RpcError, endpoint: Optional[str] = None,
                   outcome_unknown: bool = False) -> RaftkvError:
    """The typed error of a failed gRPC call."""
    try:
        code = err.code()
        details = err.details() or ""
    except Exception:  # not a grpc.Call: should not happen
        code, details = grpc.StatusCode.UNKNOWN, str(err)
    return make_error(code, details, endpoint, trailers_of(err), outcome_unknown)
