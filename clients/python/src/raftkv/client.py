"""The raftkv client: a synchronous, thread-safe client of the raftkv.v1 API
that finds and follows the Raft leader (the behaviour of the C++ KvClient,
src/client/kv_client.h).

Writes, transactions, sessions, lease calls and linearizable reads must be
served by the leader. The client keeps one gRPC channel per address and
remembers the last leader it talked to. A call is tried there first; then:

* FAILED_PRECONDITION naming the leader (trailer ``raftkv-leader-addr``):
  retried at once at that address (which need not be among the endpoints);
  without a name, at the next endpoint (a FAILED_PRECONDITION without a
  leader from the member believed to lead, e.g. "lease already exists", is
  raised as :class:`~raftkv.errors.FailedPrecondition`);
* UNAVAILABLE or DEADLINE_EXCEEDED of one attempt: retried at the next
  endpoint after a jittered exponential back-off (50 to 400 ms);
* anything else is raised at once as a typed error (raftkv.errors);

until the call's ``timeout`` (default: the client's) has elapsed; then the
last error is raised with the endpoints tried appended to its message. Each
attempt has a deadline (``rpc_timeout``, capped by what is left of the call's
timeout); only watch streams and the keep-alive thread run without one.

Exactly-once writes (``use_session=True``, the default): before its first
write the client opens a session (KV.OpenSession) and tags every write (put,
delete, delete_range, txn) with the session id, a sequence number of its own
and the lowest sequence still outstanding. The cluster applies each sequence
once and answers a retry with the first application's result, so every write
is retried on UNAVAILABLE / DEADLINE_EXCEEDED with the same sequence until
the timeout. When the servers answer ABORTED with ``raftkv-session-expired``
the client forgets the session (the next write opens a new one). If no
earlier attempt of the failed write can have been applied, the write is sent
again once in the new session; otherwise :class:`~raftkv.errors.SessionExpired`
is raised with ``outcome_unknown=True`` and the write is NOT applied again
(kv_client.cc's rule: its outcome is unknown, read the key to find out).

Without a session (``use_session=False``) a retried put is harmless, a
retried delete may count fewer keys than its first unacknowledged attempt
removed, and a transaction with writes is retried only when nothing can have
been applied (FAILED_PRECONDITION, or UNAVAILABLE with ``raftkv-not-applied:
1``); otherwise its error is raised with ``outcome_unknown=True``.
"""

import random
import threading
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Union

import grpc

from raftkv import errors
from raftkv._retry import RetryLoop, parse_endpoint, parse_endpoints
from raftkv.errors import (LEADER_ADDR_TRAILER, NOT_APPLIED_TRAILER, InvalidArgument, RaftkvError,
                           SessionExpired, Unavailable, make_error, trailers_of)
from raftkv.types import (Compare, DeleteResult, KeyLike, KeyValue, LeaseTTL, PutResult,
                          RangeResult, TxnResult, _range_args, to_bytes)
from raftkv.v1 import (admin_pb2_grpc, kv_pb2, kv_pb2_grpc, lease_pb2, lease_pb2_grpc,
                       watch_pb2_grpc)

__all__ = ["Client", "Stubs", "CHANNEL_OPTIONS"]

#: gRPC channel arguments of every raftkv channel (src/client/channel_args.h):
#: reconnect quickly to a restarted member, give a slow handshake 2 s, re-resolve
#: soon after a failure, and no message size limit (the servers enforce theirs).
CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.min_reconnect_backoff_ms", 2000),
    ("grpc.dns_min_time_between_resolutions_ms", 100),
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
]

_UNKNOWN_OUTCOME_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


class Stubs:
    """The channel to one member and a stub of each service on it."""

    def __init__(self, address: str, channel: grpc.Channel):
        self.address = address
        self.channel = channel
        self.kv = kv_pb2_grpc.KVStub(channel)
        self.watch = watch_pb2_grpc.WatchStub(channel)
        self.lease = lease_pb2_grpc.LeaseStub(channel)
        self.admin = admin_pb2_grpc.AdminStub(channel)


def _may_have_applied(err: RaftkvError) -> bool:
    """Whether a failed write attempt may have been applied all the same."""
    if err.code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return True
    if err.code == grpc.StatusCode.UNAVAILABLE:
        return err.trailers.get(NOT_APPLIED_TRAILER) != "1"
    # FAILED_PRECONDITION (not the leader: nothing proposed), ABORTED (the
    # session was unknown when the entry applied), INVALID_ARGUMENT, ...:
    # refused, not applied. UNKNOWN/INTERNAL are not retried anyway.
    return err.code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL,
                        grpc.StatusCode.CANCELLED)



class _Answer:
    """A unary answer with its trailing metadata (for the leader's address)."""

    __slots__ = ("value", "trailers")

    def __init__(self, value, trailers):
        self.value = value
        self.trailers = trailers

class Client:
    """A client of a raftkv cluster.

    :param endpoints: the members' addresses, ``["127.0.0.1:7001", ...]`` or
        ``"127.0.0.1:7001,127.0.0.1:7002"``; tried in this order when no
        leader is known. Checked here (:class:`~raftkv.errors.InvalidArgument`).
    :param timeout: seconds one call may take, all retries and back-offs
        included (each method also takes ``timeout=``).
    :param rpc_timeout: deadline of a single attempt (capped by what is left).
    :param use_session: exactly-once writes through a client session.
    :param open_session: open the session now rather than before the first write.
    :param credentials: ``grpc.ssl_channel_credentials(...)`` for TLS (None: plaintext).
    :param token: sent as ``authorization: Bearer <token>`` on every call.
    :param retry_seed: seeds the jittered back-off (None: random).
    :param channel_options: extra gRPC channel arguments.

    Usable as a context manager; :meth:`close` closes the session (best
    effort), stops the keep-alive threads and watches it started, and closes
    the channels.
    """

    def __init__(self, endpoints: Union[str, Sequence[str]] = ("127.0.0.1:7001",),
                 timeout: float = 5.0, rpc_timeout: float = 2.0, use_session: bool = True,
                 open_session: bool = False,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 token: Optional[str] = None, retry_seed: Optional[int] = None,
                 channel_options: Optional[Sequence] = None):
        self._endpoints: List[str] = parse_endpoints(endpoints)
        if not timeout or timeout <= 0:
            raise InvalidArgument("timeout must be > 0 seconds, got %r" % (timeout,))
        if not rpc_timeout or rpc_timeout <= 0:
            raise InvalidArgument("rpc_timeout must be > 0 seconds, got %r" % (rpc_timeout,))
        self.timeout = float(timeout)
        self.rpc_timeout = float(rpc_timeout)
        self.use_session = use_session
        self._credentials = credentials
        self._metadata = (("authorization", "Bearer " + token),) if token else None
        self._channel_options = list(CHANNEL_OPTIONS) + list(channel_options or [])
        self._rng = random.Random(retry_seed)
        self._rng_mu = threading.Lock()

        self._mu = threading.Lock()
        self._leader: Optional[str] = None         # guarded by _mu
        self._stubs: Dict[str, Stubs] = {}         # guarded by _mu
        self._closing = False                      # guarded by _mu
        self._closed = False                       # guarded by _mu
        self._children: List[object] = []          # watches and keep-alives; guarded by _mu

        self._open_mu = threading.Lock()  # one OpenSession at a time; taken before _session_mu
        self._session_mu = threading.Lock()
        self._client_id = 0               # guarded by _session_mu; 0: none open
        self._session_timeout_ms = 0      # guarded by _session_mu
        self._next_sequence = 1           # guarded by _session_mu
        self._outstanding: set = set()    # guarded by _session_mu

        if open_session and use_session:
            self.open_session()

    # ------------------------------------------------------------------ basics

    @property
    def endpoints(self) -> List[str]:
        return list(self._endpoints)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Closes the session (one attempt), the client's watches and keep-alives, the channels."""
        with self._mu:
            if self._closing:
                return
            self._closing = True
            children = list(self._children)
            self._children.clear()
        for c in children:
            try:
                c.close()  # type: ignore[attr-defined]
            except Exception:
                pass
        try:
            self.close_session()
        except Exception:
            pass
        with self._mu:
            self._closed = True
            stubs = list(self._stubs.values())
            self._stubs.clear()
        for s in stubs:
            s.channel.close()

    def stubs(self, address: str) -> Stubs:
        """The stubs of the channel to ``address`` (created on first use): low-level access."""
        with self._mu:
            if self._closed:
                raise errors.Cancelled("the client is closed", endpoint=address)
            s = self._stubs.get(address)
            if s is None:
                if self._credentials is not None:
                    ch = grpc.secure_channel(address, self._credentials, self._channel_options)
                else:
                    ch = grpc.insecure_channel(address, self._channel_options)
                s = self._stubs[address] = Stubs(address, ch)
            return s

    @property
    def leader_hint(self) -> Optional[str]:
        """The address of the last member that served a leader-only call (or was named leader)."""
        with self._mu:
            return self._leader

    def _set_leader(self, address: str) -> None:
        with self._mu:
            self._leader = address

    def _forget_leader(self, address: str) -> None:
        with self._mu:
            if self._leader == address:
                self._leader = None

    def _seed(self) -> int:
        with self._rng_mu:
            return self._rng.getrandbits(64)

    def _adopt(self, child) -> None:
        with self._mu:
            self._children.append(child)

    def _release(self, child) -> None:
        with self._mu:
            try:
                self._children.remove(child)
            except ValueError:
                pass

    # ------------------------------------------------------------ retry policy

    def _retry(self, name: str, attempt: Callable[[Stubs, float], object], *,
               follow_leader: bool = True, idempotent: bool = True,
               timeout: Optional[float] = None,
               on_error: Optional[Callable[[RaftkvError], None]] = None):
        """Runs ``attempt(stubs, attempt_timeout)`` with the retry policy of this module."""
        loop = RetryLoop(self._endpoints, self.leader_hint if follow_leader else None,
                         self.timeout if timeout is None else timeout,
                         random.Random(self._seed()))
        last: Optional[RaftkvError] = None
        named_leader: Optional[str] = loop.target if follow_leader and self.leader_hint else None
        while loop.start():
            target = loop.target
            attempt_timeout = max(0.001, min(loop.left(), self.rpc_timeout))
            try:
                response = attempt(self.stubs(target), attempt_timeout)
            except grpc.RpcError as e:
                code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
                details = (e.details() if hasattr(e, "details") else None) or ""
                err = make_error(code, details, target, trailers_of(e))
            else:
                leader = target
                if isinstance(response, _Answer):
                    # A follower that forwarded the call names the leader in
                    # its trailers: the next calls go there directly.
                    hint = response.trailers.get(LEADER_ADDR_TRAILER, "")
                    response = response.value
                    if hint:
                        try:
                            parse_endpoint(hint)
                            leader = hint
                        except InvalidArgument:
                            pass
                if follow_leader:
                    self._set_leader(leader)
                return response
            if on_error is not None:
                on_error(err)
            last = err
            sleep = False
            if err.code == grpc.StatusCode.FAILED_PRECONDITION:
                if not follow_leader:
                    raise err
                self._forget_leader(target)
                hint = err.trailers.get(LEADER_ADDR_TRAILER, "")
                valid = False
                if hint:
                    try:
                        parse_endpoint(hint)
                        valid = True
                    except InvalidArgument:
                        valid = False
                if hint and valid and hint != target:
                    self._set_leader(hint)
                    named_leader = hint
                    sleep = loop.redirect(hint)
                elif not hint and target == named_leader:
                    # The member believed to lead refused without naming
                    # another: a real precondition failure, not a redirect.
                    raise err
                else:
                    loop.advance()
                    sleep = loop.round_done()
            elif err.code in _UNKNOWN_OUTCOME_CODES:
                if follow_leader:
                    self._forget_leader(target)
                if not idempotent and _may_have_applied(err):
                    err.outcome_unknown = True
                    err.details += " (%s at %s: outcome unknown, not retried)" % (name, target)
                    err.args = (err.details,)
                    raise err
                loop.advance()
                sleep = True
            else:
                raise err
            if sleep and not loop.backoff():
                break
        assert last is not None
        last.details += loop.gave_up_suffix(name)
        last.args = (last.details,)
        raise last

    def _unary(self, service: str, method: str, request, **kw):
        """A unary call of ``service``.``method`` with the retry policy."""
        def attempt(stubs: Stubs, t: float):
            fn = getattr(getattr(stubs, service), method)
            response, call = fn.with_call(request, timeout=t, metadata=self._metadata)
            return _Answer(response, dict(call.trailing_metadata() or ()))
        return self._retry(method, attempt, **kw)

    def invoke(self, service: str, method: str, request, *, follow_leader: bool = True,
               idempotent: bool = True, timeout: Optional[float] = None):
        """Low-level: one unary RPC with leader following and retries, request as given.

        ``service`` is "kv", "lease", "watch" or "admin" (or "KV", "Lease",
        ...); ``method`` the RPC's name, e.g. ``invoke("KV", "Put", req)``.
        The request is sent unchanged (no session is added).
        """
        svc = service.lower()
        if svc not in ("kv", "lease", "admin"):
            raise InvalidArgument("invoke: unknown unary service %r" % service)
        return self._unary(svc, method, request, follow_leader=follow_leader,
                           idempotent=idempotent, timeout=timeout)

    # ---------------------------------------------------------------- sessions

    @property
    def session_id(self) -> int:
        """The open session's id (0: none open yet, or sessions off)."""
        with self._session_mu:
            return self._client_id

    def open_session(self, timeout: Optional[float] = None) -> int:
        """Opens the client's session now if none is open; returns its id."""
        with self._open_mu:
            with self._session_mu:
                if self._client_id:
                    return self._client_id
            # A duplicate OpenSession only leaves an unused session that expires.
            resp = self._unary("kv", "OpenSession", kv_pb2.OpenSessionRequest(), timeout=timeout)
            with self._session_mu:
                self._client_id = resp.client_id
                self._session_timeout_ms = resp.timeout_ms
                self._next_sequence = 1
                self._outstanding.clear()
                return self._client_id

    def close_session(self) -> None:
        """Closes the session, if one is open (one attempt, bounded wait; best effort)."""
        with self._session_mu:
            cid = self._client_id
            self._client_id = 0
            self._outstanding.clear()
        if not cid:
            return
        target = self.leader_hint or self._endpoints[0]
        try:
            self.stubs(target).kv.CloseSession(kv_pb2.CloseSessionRequest(client_id=cid),
                                               timeout=min(0.5, self.rpc_timeout),
                                               metadata=self._metadata)
        except (grpc.RpcError, RaftkvError):
            pass  # an unclosed session only costs memory until it expires

    def _begin_write(self, timeout: float) -> kv_pb2.Session:
        self.open_session(timeout=timeout)
        with self._session_mu:
            if not self._client_id:  # closed meanwhile by another thread
                raise Unavailable("the session was closed while a write started")
            seq = self._next_sequence
            self._next_sequence += 1
            self._outstanding.add(seq)
            return kv_pb2.Session(client_id=self._client_id, sequence=seq,
                                  first_outstanding=min(self._outstanding))

    def _end_write(self, session: kv_pb2.Session, expired: bool) -> None:
        with self._session_mu:
            if self._client_id != session.client_id:
                return
            # Retired even when the outcome is unknown: a late copy of the
            # request then arrives below first_outstanding and is refused.
            self._outstanding.discard(session.sequence)
            if expired:
                self._client_id = 0
                self._outstanding.clear()

    def _write(self, method: str, request, *, idempotent: bool = True,
               timeout: Optional[float] = None, service: str = "kv"):
        """A write through the leader, exactly-once in the client's session."""
        total = self.timeout if timeout is None else timeout
        if not self.use_session:
            request.ClearField("session")
            return self._unary(service, method, request, idempotent=idempotent, timeout=total)
        deadline = time.monotonic() + total
        resent = False
        while True:
            session = self._begin_write(max(0.001, deadline - time.monotonic()))
            request.session.CopyFrom(session)
            maybe_applied = []

            def note(err: RaftkvError):
                if _may_have_applied(err):
                    maybe_applied.append(err)

            try:
                resp = self._unary(service, method, request,
                                   timeout=max(0.001, deadline - time.monotonic()), on_error=note)
            except SessionExpired as e:
                self._end_write(session, expired=True)
                if not maybe_applied and not resent and time.monotonic() < deadline:
                    # No attempt of this write can have been applied: send it
                    # again, once, in a new session.
                    resent = True
                    continue
                e.outcome_unknown = bool(maybe_applied)
                raise
            except RaftkvError as e:
                self._end_write(session, expired=False)
                if e.code in _UNKNOWN_OUTCOME_CODES and (maybe_applied or _may_have_applied(e)):
                    e.outcome_unknown = True
                raise
            self._end_write(session, expired=False)
            return resp

    # -------------------------------------------------------------------- KV

    def put(self, key: KeyLike, value: KeyLike, lease: int = 0, prev_kv: bool = False, *,
            timeout: Optional[float] = None) -> PutResult:
        """Sets key to value (attached to ``lease``, 0: none). Returns the revision
        after the put, and with ``prev_kv`` the key-value before it (None if absent)."""
        req = kv_pb2.PutRequest(key=to_bytes(key), value=to_bytes(value, "value"),
                                lease=_int(lease, "lease"), prev_kv=bool(prev_kv))
        return PutResult.from_pb(self._write("Put", req, timeout=timeout))

    def range(self, key: KeyLike, range_end: Optional[KeyLike] = None, *, prefix: bool = False,
              limit: int = 0, keys_only: bool = False, count_only: bool = False,
              revision: int = 0, serializable: bool = False,
              timeout: Optional[float] = None) -> RangeResult:
        """Reads [key, range_end) (range_end None: the key alone; b"\\0": every key
        >= key), or the keys starting with ``key`` when ``prefix=True``.

        ``limit`` caps the keys returned (``more`` tells that some were left
        out; ``count`` is the whole range's size); ``revision`` reads the
        store as it was then (:class:`~raftkv.errors.Compacted` if older than
        the history window); ``serializable`` reads a member's applied state
        (any member, possibly stale) instead of a linearizable read through
        the leader.
        """
        k, end = _range_args(key, range_end, prefix)
        req = kv_pb2.RangeRequest(key=k, range_end=end, limit=_int(limit, "limit"),
                                  revision=_int(revision, "revision"),
                                  serializable=bool(serializable), keys_only=bool(keys_only),
                                  count_only=bool(count_only))
        resp = self._unary("kv", "Range", req, follow_leader=not serializable, timeout=timeout)
        return RangeResult.from_pb(resp)

    def get_prefix(self, prefix: KeyLike, **kw) -> RangeResult:
        """Every key starting with ``prefix`` (range's keyword arguments)."""
        return self.range(prefix, prefix=True, **kw)

    def get_all(self, **kw) -> RangeResult:
        """Every key (range's keyword arguments)."""
        return self.range(b"\0", b"\0", **kw)

    def count(self, key: KeyLike, range_end: Optional[KeyLike] = None, *, prefix: bool = False,
              **kw) -> int:
        """How many keys [key, range_end) (or the prefix) holds."""
        return self.range(key, range_end, prefix=prefix, count_only=True, **kw).count

    def get_kv(self, key: KeyLike, *, serializable: bool = False, revision: int = 0,
               timeout: Optional[float] = None) -> Optional[KeyValue]:
        """The key's KeyValue (value and revisions), or None if absent."""
        r = self.range(key, serializable=serializable, revision=revision, timeout=timeout)
        return r.kvs[0] if r.kvs else None

    def get(self, key: KeyLike, serializable: bool = False, *, revision: int = 0,
            timeout: Optional[float] = None) -> Optional[bytes]:
        """The key's value (bytes), or None if absent."""
        kv = self.get_kv(key, serializable=serializable, revision=revision, timeout=timeout)
        return kv.value if kv is not None else None

    def delete_range(self, key: KeyLike, range_end: Optional[KeyLike] = None, *,
                     prefix: bool = False, prev_kv: bool = False,
                     timeout: Optional[float] = None) -> DeleteResult:
        """Deletes [key, range_end) (or the prefix) at one revision.

        Returns a :class:`~raftkv.types.DeleteResult`: an int, the number of
        keys deleted, with ``revision`` and (``prev_kv``) ``prev_kvs``.
        """
        k, end = _range_args(key, range_end, prefix)
        req = kv_pb2.DeleteRangeRequest(key=k, range_end=end, prev_kv=bool(prev_kv))
        return DeleteResult.from_pb(self._write("DeleteRange", req, timeout=timeout))

    def delete(self, key: KeyLike, *, prev_kv: bool = False,
               timeout: Optional[float] = None) -> DeleteResult:
        """Deletes one key; the result is 1 if it existed, else 0."""
        return self.delete_range(key, prev_kv=prev_kv, timeout=timeout)

    def delete_prefix(self, prefix: KeyLike, *, prev_kv: bool = False,
                      timeout: Optional[float] = None) -> DeleteResult:
        """Deletes every key starting with ``prefix``; returns how many."""
        return self.delete_range(prefix, prefix=True, prev_kv=prev_kv, timeout=timeout)

    def txn(self, compares: Iterable[Compare] = (), success: Iterable = (),
            failure: Iterable = (), *, timeout: Optional[float] = None) -> TxnResult:
        """A transaction: if every compare holds, the ``success`` ops run, else
        the ``failure`` ones, atomically at one revision.

        Compares come from :class:`~raftkv.Compare` (``Compare.value("k") ==
        b"v"``); ops are :class:`~raftkv.Put`, :class:`~raftkv.Get` and
        :class:`~raftkv.Delete`. The result is truthy when the compares held
        and has one result per op of the list that ran (RangeResult,
        PutResult or DeleteResult).
        """
        compares = list(compares)
        success = list(success)
        failure = list(failure)
        req = kv_pb2.TxnRequest()
        for c in compares:
            if not isinstance(c, Compare):
                raise InvalidArgument("txn compares must be raftkv.Compare (e.g. "
                                      "Compare.value(k) == v), got %s" % type(c).__name__)
            req.compare.append(c.to_pb())
        writes = False
        for ops, dest in ((success, req.success), (failure, req.failure)):
            for op in ops:
                if not hasattr(op, "to_pb") or not hasattr(op, "has_writes"):
                    raise InvalidArgument("txn operations must be raftkv.Put, raftkv.Get or "
                                          "raftkv.Delete, got %s" % type(op).__name__)
                writes = writes or op.has_writes
                dest.append(op.to_pb())
        # Without a session a Txn with writes is retried only when nothing can
        # have been applied; a read-only one always.
        resp = self._write("Txn", req, idempotent=self.use_session or not writes, timeout=timeout)
        return TxnResult.from_pb(resp)

    # ----------------------------------------------------------------- leases

    def lease_grant(self, ttl: int, id: int = 0, *, timeout: Optional[float] = None) -> int:
        """Grants a lease of ``ttl`` seconds (raised to the server's minimum);
        returns its id. ``id`` 0: the server picks one; a chosen id in use is
        FailedPrecondition. With a session (the default) the grant is
        exactly-once like a put: a retry answers with the first attempt's
        lease. Without one it is retried only when nothing can have been
        applied (a retry could grant a second lease)."""
        req = lease_pb2.LeaseGrantRequest(ttl=_int(ttl, "ttl"), id=_int(id, "id"))
        resp = self._write("LeaseGrant", req, idempotent=self.use_session, timeout=timeout,
                           service="lease")
        return resp.id

    def lease_revoke(self, id: int, *, timeout: Optional[float] = None) -> int:
        """Revokes a lease and deletes its keys; returns the revision after it.
        An unknown lease is NotFound (also for a retry whose first attempt revoked it)."""
        resp = self._unary("lease", "LeaseRevoke", lease_pb2.LeaseRevokeRequest(id=_int(id, "id")),
                           timeout=timeout)
        return resp.header.revision

    def lease_time_to_live(self, id: int, keys: bool = False, *,
                           timeout: Optional[float] = None) -> LeaseTTL:
        """The seconds the lease has left (``ttl`` -1: it does not exist), its granted
        TTL and, with ``keys``, the keys attached to it."""
        resp = self._unary("lease", "LeaseTimeToLive",
                           lease_pb2.LeaseTimeToLiveRequest(id=_int(id, "id"), keys=bool(keys)),
                           timeout=timeout)
        return LeaseTTL(id=resp.id, ttl=resp.ttl, granted_ttl=resp.granted_ttl,
                        keys=list(resp.keys))

    def lease_leases(self, *, timeout: Optional[float] = None) -> List[int]:
        """The ids of every lease."""
        resp = self._unary("lease", "LeaseLeases", lease_pb2.LeaseLeasesRequest(), timeout=timeout)
        return [s.id for s in resp.leases]

    def lease_keep_alive(self, id: int, *, timeout: Optional[float] = None) -> int:
        """Renews the lease once; returns its renewed TTL in seconds (0: the lease is gone)."""
        req = lease_pb2.LeaseKeepAliveRequest(id=_int(id, "id"))

        def attempt(stubs: Stubs, t: float):
            call = stubs.lease.LeaseKeepAlive(iter([req]), timeout=t, metadata=self._metadata)
            try:
                for resp in call:
                    return resp
            finally:
                call.cancel()
            raise errors.Unavailable("the keep-alive stream ended without an answer",
                                     endpoint=stubs.address)

        return self._retry("LeaseKeepAlive", attempt, timeout=timeout).ttl

    def keep_alive(self, id: int, interval: Optional[float] = None,
                   on_lost: Optional[Callable[[int], None]] = None) -> "KeepAlive":
        """Starts a thread that renews lease ``id`` every TTL/3 (or every
        ``interval`` seconds) until stopped; see :class:`~raftkv.lease.KeepAlive`.
        Use as a context manager, or call ``.stop()``."""
        from raftkv.lease import KeepAlive
        return KeepAlive(self, id, interval=interval, on_lost=on_lost)

    # ----------------------------------------------------------------- watch

    def watch(self, key: KeyLike, range_end: Optional[KeyLike] = None, *, prefix: bool = False,
              start_revision: int = 0, prev_kv: bool = False,
              timeout: Optional[float] = None) -> "Watcher":
        """Watches [key, range_end) (or the prefix) from ``start_revision``
        (0: from the next change on). Returns a :class:`~raftkv.watch.Watcher`:
        an iterator of :class:`~raftkv.types.Event` that moves to another
        member when its member goes away, from the last revision delivered + 1
        (no event lost or repeated). ``timeout``: how long it may take to find
        a member again (default: the client's timeout). Close it (or use it as
        a context manager) to stop."""
        from raftkv.watch import Watcher
        k, end = _range_args(key, range_end, prefix)
        return Watcher(self, k, end, start_revision=_int(start_revision, "start_revision"),
                       prev_kv=bool(prev_kv), timeout=self.timeout if timeout is None else timeout)

    def watch_prefix(self, prefix: KeyLike, **kw) -> "Watcher":
        """Watches every key starting with ``prefix`` (watch's keyword arguments)."""
        return self.watch(prefix, prefix=True, **kw)

    # ---------------------------------------------------------------- status

    def status(self, endpoint: Optional[str] = None, timeout: float = 1.0) -> kv_pb2.StatusResponse:
        """The StatusResponse of one member: ``endpoint``, or else the first of
        the endpoints that answers. A single attempt per member, no redirect."""
        targets = [endpoint] if endpoint is not None else list(self._endpoints)
        last: Optional[RaftkvError] = None
        for t in targets:
            parse_endpoint(t)
            try:
                return self.stubs(t).kv.Status(kv_pb2.StatusRequest(), timeout=timeout,
                                               metadata=self._metadata)
            except grpc.RpcError as e:
                last = errors.from_rpc_error(e, t)
        assert last is not None
        raise last

    def statuses(self, timeout: float = 1.0) -> Dict[str, Union[kv_pb2.StatusResponse, RaftkvError]]:
        """Every endpoint's StatusResponse, or the error it answered with."""
        out: Dict[str, Union[kv_pb2.StatusResponse, RaftkvError]] = {}
        for e in self._endpoints:
            try:
                out[e] = self.status(e, timeout=timeout)
            except RaftkvError as err:
                out[e] = err
        return out

    def leader(self, timeout: Optional[float] = None) -> str:
        """The leader's address, as the members' Status tell (Unavailable if none is known)."""
        loop = RetryLoop(self._endpoints, None, self.timeout if timeout is None else timeout,
                         random.Random(self._seed()))
        last: Optional[RaftkvError] = None
        while loop.start():
            try:
                st = self.status(loop.target, timeout=max(0.001, min(loop.left(), self.rpc_timeout)))
                if st.role == "leader":
                    return st.address or loop.target
                if st.leader_address:
                    return st.leader_address
                last = Unavailable("member %d knows no leader" % st.id, endpoint=loop.target)
            except RaftkvError as e:
                last = e
            loop.advance()
            if loop.round_done() and not loop.backoff():
                break
        assert last is not None
        raise last

    def echo(self, payload: bytes = b"", endpoint: Optional[str] = None,
             timeout: float = 1.0) -> bytes:
        """KV.Echo at ``endpoint`` (default: the first endpoint): a transport round trip."""
        t = endpoint or self._endpoints[0]
        try:
            return self.stubs(t).kv.Echo(kv_pb2.EchoRequest(payload=payload), timeout=timeout,
                                         metadata=self._metadata).payload
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e, t)


def _int(v, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidArgument("%s must be an int, not %s" % (what, type(v).__name__))
    return v


# For type annotations above.
from raftkv.watch import Watcher  # noqa: E402
from raftkv.lease import KeepAlive  # noqa: E402
