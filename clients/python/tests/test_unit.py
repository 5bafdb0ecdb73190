"""The client's retry, redirect and session rules against scripted in-process
gRPC servers (no cluster needed): the cases a real cluster produces only by
chance (a write whose outcome is unknown followed by an expired session, an
attempt that times out, ...)."""

import socket
import threading
import time
from concurrent import futures

import grpc
import pytest

import raftkv
from raftkv import errors
from raftkv.v1 import kv_pb2, kv_pb2_grpc, lease_pb2, lease_pb2_grpc, watch_pb2, watch_pb2_grpc


class Fake(kv_pb2_grpc.KVServicer, lease_pb2_grpc.LeaseServicer, watch_pb2_grpc.WatchServicer):
    """A member whose answers are scripted: ``script[method]`` is a list of
    callables (request, context) -> response, used in turn (the last one again
    once the list is exhausted)."""

    def __init__(self):
        self.calls = []  # (method, request)
        self.script = {}
        self.mu = threading.Lock()
        self.sessions = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        kv_pb2_grpc.add_KVServicer_to_server(self, self.server)
        lease_pb2_grpc.add_LeaseServicer_to_server(self, self.server)
        watch_pb2_grpc.add_WatchServicer_to_server(self, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = "127.0.0.1:%d" % port
        self.server.start()

    def stop(self):
        self.server.stop(0)

    def _answer(self, method, request, context):
        with self.mu:
            self.calls.append((method, request, context.time_remaining()))
            steps = self.script.get(method)
            if not steps:
                step = None
            elif len(steps) > 1:
                step = steps.pop(0)
            else:
                step = steps[0]
        if step is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "not scripted: " + method)
        return step(request, context)

    def n(self, method):
        with self.mu:
            return sum(1 for c in self.calls if c[0] == method)

    def requests(self, method):
        with self.mu:
            return [c[1] for c in self.calls if c[0] == method]

    # KV
    def Put(self, request, context):
        return self._answer("Put", request, context)

    def Range(self, request, context):
        return self._answer("Range", request, context)

    def Txn(self, request, context):
        return self._answer("Txn", request, context)

    def DeleteRange(self, request, context):
        return self._answer("DeleteRange", request, context)

    def OpenSession(self, request, context):
        return self._answer("OpenSession", request, context)

    def CloseSession(self, request, context):
        with self.mu:
            self.calls.append(("CloseSession", request, context.time_remaining()))
        return kv_pb2.CloseSessionResponse()

    def Status(self, request, context):
        return self._answer("Status", request, context)

    # Lease
    def LeaseGrant(self, request, context):
        return self._answer("LeaseGrant", request, context)

    def LeaseKeepAlive(self, request_iterator, context):
        for req in request_iterator:
            yield self._answer("LeaseKeepAlive", req, context)

    # Watch
    def Watch(self, request, context):
        for resp in self._answer("Watch", request, context):
            yield resp


def fail(code, msg="scripted", **trailers):
    def step(request, context):
        if trailers:
            context.set_trailing_metadata(tuple((k.replace("_", "-"), v) for k, v in trailers.items()))
        context.abort(code, msg)
    return step


def ok(resp):
    return lambda request, context: resp


def sleep_then(seconds, resp):
    def step(request, context):
        time.sleep(seconds)
        return resp
    return step


def sessions_from(first):
    ids = iter(range(first, first + 1000))
    return lambda request, context: kv_pb2.OpenSessionResponse(client_id=next(ids), timeout_ms=600000)


PUT_OK = ok(kv_pb2.PutResponse(revision=7, index=7, term=1))


@pytest.fixture
def fakes():
    made = []

    def make():
        f = Fake()
        made.append(f)
        return f

    yield make
    for f in made:
        f.stop()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_follows_the_leader_named_by_a_follower(fakes):
    follower, leader = fakes(), fakes()
    follower.script["Put"] = [fail(grpc.StatusCode.FAILED_PRECONDITION, "not leader",
                                   raftkv_leader_addr=leader.address, raftkv_leader_id="2")]
    follower.script["OpenSession"] = follower.script["Put"]
    leader.script["OpenSession"] = [sessions_from(100)]
    leader.script["Put"] = [PUT_OK]
    with raftkv.Client([follower.address], timeout=3) as c:
        assert c.put("k", "v").revision == 7
        assert c.leader_hint == leader.address
        c.put("k", "v2")
    assert follower.n("OpenSession") == 1 and follower.n("Put") == 0  # the leader is remembered
    assert leader.n("Put") == 2
    seqs = [(r.session.client_id, r.session.sequence, r.session.first_outstanding)
            for r in leader.requests("Put")]
    assert seqs == [(100, 1, 1), (100, 2, 2)]
    # close() closed the session, at the leader.
    assert [r.client_id for r in leader.requests("CloseSession")] == [100]
    # Every attempt had a deadline.
    assert all(c[2] is not None and c[2] <= 2.5 for c in leader.calls)


def test_retries_unavailable_with_the_same_sequence(fakes):
    a, b = fakes(), fakes()
    for f in (a, b):
        f.script["OpenSession"] = [sessions_from(5)]
        f.script["Put"] = [fail(grpc.StatusCode.UNAVAILABLE, "leadership lost"), PUT_OK]
    with raftkv.Client([a.address, b.address], timeout=5) as c:
        c.put("k", "v")
    sent = a.requests("Put") + b.requests("Put")
    assert len(sent) >= 2
    assert len({(r.session.client_id, r.session.sequence) for r in sent}) == 1


def test_gives_up_after_the_timeout(fakes):
    a = fakes()
    a.script["Range"] = [fail(grpc.StatusCode.UNAVAILABLE, "no leader yet", raftkv_not_applied="1")]
    dead = "127.0.0.1:%d" % free_port()
    with raftkv.Client([a.address, dead], timeout=1.0) as c:
        t0 = time.monotonic()
        with pytest.raises(errors.Unavailable) as ei:
            c.get("k")
        took = time.monotonic() - t0
    assert 0.9 <= took < 2.0
    assert "gave up" in str(ei.value) and a.address in str(ei.value) and dead in str(ei.value)
    assert a.n("Range") >= 2


def test_attempt_deadline_is_retried(fakes):
    a = fakes()
    a.script["Range"] = [sleep_then(1.0, kv_pb2.RangeResponse()),
                         ok(kv_pb2.RangeResponse(count=1, kvs=[kv_pb2.KeyValue(key=b"k", value=b"v")]))]
    with raftkv.Client([a.address], timeout=5, rpc_timeout=0.3) as c:
        assert c.get("k") == b"v"
    assert a.n("Range") == 2


def test_expired_session_is_reopened_when_nothing_was_applied(fakes):
    a = fakes()
    a.script["OpenSession"] = [sessions_from(10)]
    a.script["Put"] = [fail(grpc.StatusCode.ABORTED, "session 10 is unknown or expired",
                            raftkv_session_expired="1"), PUT_OK]
    with raftkv.Client([a.address]) as c:
        assert c.put("k", "v").revision == 7
        assert c.session_id == 11
    sent = a.requests("Put")
    assert [(r.session.client_id, r.session.sequence) for r in sent] == [(10, 1), (11, 1)]


def test_expired_session_after_an_unknown_outcome_is_raised_not_reapplied(fakes):
    a = fakes()
    a.script["OpenSession"] = [sessions_from(20)]
    a.script["Put"] = [fail(grpc.StatusCode.UNAVAILABLE, "leadership lost before commit"),
                       fail(grpc.StatusCode.ABORTED, "session 20 expired", raftkv_session_expired="1"),
                       PUT_OK]
    with raftkv.Client([a.address]) as c:
        with pytest.raises(errors.SessionExpired) as ei:
            c.put("k", "v")
        assert ei.value.outcome_unknown
        assert c.session_id == 0  # forgotten; the next write opens a new one
        assert a.n("Put") == 2    # not sent a third time
        c.put("k2", "v")
        assert c.session_id == 21
    assert [(r.session.client_id, r.session.sequence) for r in a.requests("Put")] == [
        (20, 1), (20, 1), (21, 1)]


def test_txn_without_session_is_not_retried_when_outcome_unknown(fakes):
    a = fakes()
    a.script["Txn"] = [fail(grpc.StatusCode.UNAVAILABLE, "leadership lost"),
                       ok(kv_pb2.TxnResponse(succeeded=True))]
    with raftkv.Client([a.address], use_session=False) as c:
        with pytest.raises(errors.Unavailable) as ei:
            c.txn([], [raftkv.Put("k", "v")])
        assert ei.value.outcome_unknown and "not retried" in str(ei.value)
        assert a.n("Txn") == 1
        assert not a.requests("Txn")[0].HasField("session")
        # Certainly not applied: retried.
        a.script["Txn"] = [fail(grpc.StatusCode.UNAVAILABLE, "no leader", raftkv_not_applied="1"),
                           ok(kv_pb2.TxnResponse(succeeded=True))]
        assert c.txn([], [raftkv.Put("k", "v")]).succeeded
        # A read-only one always.
        a.script["Txn"] = [fail(grpc.StatusCode.UNAVAILABLE, "leadership lost"),
                           ok(kv_pb2.TxnResponse(succeeded=True))]
        assert c.txn([], [raftkv.Get("k")]).succeeded


def test_failed_precondition_from_the_leader_is_raised(fakes):
    a, b = fakes(), fakes()
    b.script["LeaseGrant"] = [fail(grpc.StatusCode.FAILED_PRECONDITION, "not leader",
                                   raftkv_leader_addr=a.address, raftkv_leader_id="1")]
    a.script["LeaseGrant"] = [fail(grpc.StatusCode.FAILED_PRECONDITION, "lease 0x5 already exists")]
    with raftkv.Client([b.address, a.address], timeout=5, use_session=False) as c:
        t0 = time.monotonic()
        with pytest.raises(errors.FailedPrecondition) as ei:
            c.lease_grant(10, id=5)
        assert time.monotonic() - t0 < 1
        assert not isinstance(ei.value, errors.NotLeader)
        assert "already exists" in ei.value.details
    assert a.n("LeaseGrant") == 1


def test_typed_errors_carry_code_and_trailers(fakes):
    a = fakes()
    a.script["Range"] = [fail(grpc.StatusCode.OUT_OF_RANGE,
                              "revision 3 has been compacted; the oldest revision kept is 42")]
    a.script["LeaseGrant"] = [fail(grpc.StatusCode.PERMISSION_DENIED, "no")]
    with raftkv.Client([a.address], use_session=False) as c:
        with pytest.raises(errors.Compacted) as ei:
            c.get("k", revision=3)
        assert ei.value.compact_revision == 42 and ei.value.endpoint == a.address
        with pytest.raises(errors.PermissionDenied):
            c.lease_grant(5)
    e = errors.make_error(grpc.StatusCode.FAILED_PRECONDITION, "not leader",
                          trailers={"raftkv-leader-addr": "h:1", "raftkv-leader-id": "3"})
    assert isinstance(e, errors.NotLeader) and e.leader_addr == "h:1" and e.leader_id == 3
    assert isinstance(errors.make_error(grpc.StatusCode.ABORTED, "x"), errors.Aborted)
    assert not isinstance(errors.make_error(grpc.StatusCode.ABORTED, "x"), errors.SessionExpired)


def test_watch_moves_on_and_drops_repeats(fakes):
    a, b = fakes(), fakes()

    def ev(rev, key=b"k"):
        return watch_pb2.Event(type=watch_pb2.Event.PUT,
                               kv=kv_pb2.KeyValue(key=key, value=b"%d" % rev, mod_revision=rev))

    def stream_a(request, context):
        assert request.start_revision == 0
        yield watch_pb2.WatchResponse(created=True, header=kv_pb2.ResponseHeader(revision=10))
        yield watch_pb2.WatchResponse(events=[ev(11)])
        yield watch_pb2.WatchResponse(events=[ev(12), ev(12, b"k2")])
        context.abort(grpc.StatusCode.UNAVAILABLE, "member stopping")

    starts = []

    def stream_b(request, context):
        starts.append(request.start_revision)
        yield watch_pb2.WatchResponse(created=True, header=kv_pb2.ResponseHeader(revision=14))
        # A member that sends again what was delivered: dropped.
        yield watch_pb2.WatchResponse(events=[ev(12)])
        yield watch_pb2.WatchResponse(events=[ev(13)])
        yield watch_pb2.WatchResponse(events=[ev(14)])
        time.sleep(5)

    a.script["Watch"] = [stream_a]
    b.script["Watch"] = [stream_b]
    with raftkv.Client([a.address, b.address]) as c:
        with c.watch("k") as w:
            got = [w.get(timeout=5) for _ in range(5)]
            assert [(e.revision, e.key) for e in got] == [
                (11, b"k"), (12, b"k"), (12, b"k2"), (13, b"k"), (14, b"k")]
            assert w.revision == 10 and w.reconnects == 1 and w.endpoint == b.address
            assert starts == [13]
        assert w.done


def test_watch_out_of_range_everywhere_is_raised(fakes):
    a, b = fakes(), fakes()

    def compacted(request, context):
        yield watch_pb2.WatchResponse(created=True, header=kv_pb2.ResponseHeader(revision=500))
        context.set_trailing_metadata((("raftkv-compact-revision", "401"),))
        context.abort(grpc.StatusCode.OUT_OF_RANGE, "start revision 5 has been compacted")

    a.script["Watch"] = [compacted]
    b.script["Watch"] = [compacted]
    with raftkv.Client([a.address, b.address]) as c:
        w = c.watch("k", start_revision=5)
        with pytest.raises(errors.Compacted) as ei:
            list(w)
        assert ei.value.compact_revision == 401
        assert a.n("Watch") == 1 and b.n("Watch") == 1


def test_keep_alive_helper(fakes):
    a = fakes()
    ttl = {"v": 3}
    a.script["LeaseKeepAlive"] = [lambda req, ctx: lease_pb2.LeaseKeepAliveResponse(id=req.id, ttl=ttl["v"])]
    lost = []
    with raftkv.Client([a.address]) as c:
        with c.keep_alive(9, interval=0.1, on_lost=lost.append) as ka:
            assert ka.wait_first(5) and ka.ttl == 3
            time.sleep(0.5)
            assert ka.renewals >= 3
            ttl["v"] = 0
            deadline = time.monotonic() + 5
            while not ka.lost and time.monotonic() < deadline:
                time.sleep(0.05)
            assert ka.lost and lost == [9]
        assert c.lease_keep_alive(9) == 0


def test_endpoint_parsing():
    from raftkv._retry import parse_endpoint
    assert parse_endpoint("127.0.0.1:7001") == ("127.0.0.1", 7001)
    assert parse_endpoint("[::1]:7001") == ("::1", 7001)
    assert parse_endpoint("node-1.example:1") == ("node-1.example", 1)
    for bad in ("", "x", "x:", ":1", "x:0", "x:65536", "x:1a", "::1:7001", "[::1]", "[::1]7001",
                "a/b:1"):
        with pytest.raises(errors.InvalidArgument):
            parse_endpoint(bad)


def test_prefix_range_end():
    assert raftkv.prefix_range_end("a") == b"b"
    assert raftkv.prefix_range_end(b"a\xff") == b"b"
    assert raftkv.prefix_range_end(b"\xff\xff") == b"\0"
    assert raftkv.prefix_range_end(b"") == b"\0"
    assert raftkv.Get("", prefix=True).request.key == b"\0"
