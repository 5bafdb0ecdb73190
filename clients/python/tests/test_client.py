"""The raftkv Python client against a real 3-member cluster (conftest.py)."""

import threading
import time

import grpc
import pytest

import raftkv
from raftkv import Compare, Delete, Get, Put, errors
from raftkv.v1 import kv_pb2

from conftest import HISTORY_REVISIONS, wait_until


# ---------------------------------------------------------------- KV basics

def test_put_get_str_and_bytes(client, prefix):
    r1 = client.put(prefix + "a", "héllo")
    assert r1.revision > 0
    assert client.get(prefix + "a") == "héllo".encode("utf-8")
    assert client.get((prefix + "a").encode()) == "héllo".encode("utf-8")
    assert client.get(prefix + "missing") is None
    assert client.get_kv(prefix + "missing") is None

    bin_key = prefix.encode() + b"\x00\xff\x01"
    client.put(bin_key, b"\x00\x01\xfe\xff")
    assert client.get(bin_key) == b"\x00\x01\xfe\xff"

    r2 = client.put(prefix + "a", b"v2", prev_kv=True)
    assert r2.revision > r1.revision
    assert r2.prev_kv is not None and r2.prev_kv.value == "héllo".encode()
    assert r2.prev_kv.mod_revision == r1.revision
    kv = client.get_kv(prefix + "a")
    assert (kv.key, kv.value, kv.version) == ((prefix + "a").encode(), b"v2", 2)
    assert kv.create_revision == r1.revision and kv.mod_revision == r2.revision
    assert client.put(prefix + "new", "x", prev_kv=True).prev_kv is None
    # An empty value is a value.
    client.put(prefix + "empty", b"")
    assert client.get(prefix + "empty") == b""


def test_range_prefix_limit_count_keys_only(client, prefix):
    keys = [prefix + k for k in ("a", "b", "c", "d", "e")]
    for i, k in enumerate(keys):
        client.put(k, "v%d" % i)
    client.put(prefix[:-1] + "0", "outside")  # sorts right after the prefix
    r = client.get_prefix(prefix)
    assert r.keys == [k.encode() for k in keys]
    assert [kv.value for kv in r] == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    assert r.count == 5 and not r.more and len(r) == 5
    assert r.as_dict()[keys[2].encode()] == b"v2"

    lim = client.get_prefix(prefix, limit=2)
    assert lim.keys == [keys[0].encode(), keys[1].encode()]
    assert lim.more and lim.count == 5

    ko = client.get_prefix(prefix, keys_only=True)
    assert ko.keys == [k.encode() for k in keys] and all(kv.value == b"" for kv in ko)

    co = client.get_prefix(prefix, count_only=True)
    assert co.count == 5 and co.kvs == []
    assert client.count(prefix, prefix=True) == 5

    between = client.range(keys[1], keys[3])
    assert between.keys == [keys[1].encode(), keys[2].encode()]

    # range_end "\0": every key >= key (ours, then the one outside, ...).
    tail = client.range(keys[3], b"\0", limit=3)
    assert tail.keys == [keys[3].encode(), keys[4].encode(), (prefix[:-1] + "0").encode()]
    assert all(k >= keys[3].encode() for k in client.range(keys[3], b"\0", keys_only=True).keys)
    assert client.get_all(count_only=True).count >= 6


def test_range_at_past_revision(client, prefix):
    r1 = client.put(prefix + "k", "old")
    client.put(prefix + "k", "new")
    client.delete(prefix + "k")
    assert client.get(prefix + "k") is None
    assert client.get(prefix + "k", revision=r1.revision) == b"old"
    assert client.range(prefix, prefix=True, revision=r1.revision).count == 1


def test_serializable_reads_on_every_member(client, cluster, prefix):
    client.put(prefix + "s", "everywhere")
    for ep in cluster.endpoints:
        with raftkv.Client([ep]) as one:
            wait_until(lambda: one.get(prefix + "s", serializable=True) == b"everywhere",
                       what="member %s to apply the put" % ep)
            assert one.range(prefix, prefix=True, serializable=True).count == 1


def test_delete_counts(client, prefix):
    for k in "abcdef":
        client.put(prefix + k, k)
    assert client.delete(prefix + "a") == 1
    assert client.delete(prefix + "a") == 0
    assert client.delete(prefix + "zz") == 0
    d = client.delete_range(prefix + "b", prefix + "d")  # b, c
    assert d == 2 and d.deleted == 2 and d.revision > 0
    d = client.delete_range(prefix + "d", prefix + "f", prev_kv=True)  # d, e
    assert d == 2 and sorted(kv.value for kv in d.prev_kvs) == [b"d", b"e"]
    assert client.get_prefix(prefix).keys == [(prefix + "f").encode()]
    for k in "xyz":
        client.put(prefix + "p/" + k, k)
    assert client.delete_prefix(prefix + "p/") == 3
    assert client.delete_prefix(prefix) == 1
    assert client.count(prefix, prefix=True) == 0


# ---------------------------------------------------------------- transactions

def test_txn_success_and_failure(client, prefix):
    k, other = prefix + "k", prefix + "other"
    client.put(k, "v1")
    client.put(other, "o")

    ok = client.txn(
        compares=[Compare.value(k) == "v1", Compare.version(k) == 1, Compare.version(k) < 2,
                  Compare.create_revision(prefix + "absent") == 0],
        success=[Put(k, "v2", prev_kv=True), Get(k), Get(prefix, prefix=True, count_only=True),
                 Delete(other)],
        failure=[Put(k, "never")],
    )
    assert ok.succeeded and bool(ok)
    put, get, count, dele = ok.responses
    assert isinstance(put, raftkv.PutResult) and put.prev_kv.value == b"v1"
    assert isinstance(get, raftkv.RangeResult) and get.kvs[0].value == b"v2"  # sees the put
    assert count.count == 2
    assert isinstance(dele, raftkv.DeleteResult) and dele == 1
    assert client.get(k) == b"v2" and client.get(other) is None
    # One transaction, one revision.
    assert put.revision == ok.revision == client.get_kv(k).mod_revision

    bad = client.txn(
        compares=[Compare.value(k) == "v1"],  # it is v2 now
        success=[Put(k, "never")],
        failure=[Put(prefix + "failed", "yes"), Get(k)],
    )
    assert not bad.succeeded and not bool(bad)
    assert bad.responses[1].kvs[0].value == b"v2"
    assert client.get(prefix + "failed") == b"yes" and client.get(k) == b"v2"

    kv = client.get_kv(k)
    assert client.txn([Compare.mod_revision(k) == kv.mod_revision], [Put(k, "v3")]).succeeded
    assert not client.txn([Compare.mod_revision(k) == kv.mod_revision], [Put(k, "v4")]).succeeded
    assert client.txn([Compare.version(k) > 2, Compare.value(k) != "zzz",
                       Compare.lease(k) == 0], [Delete(k)]).succeeded
    assert client.get(k) is None
    # A value compare on an absent key is false, whatever the operator.
    assert not client.txn([Compare.value(k) != "x"], [Put(k, "no")]).succeeded
    # A read-only transaction.
    ro = client.txn([], [Get(prefix + "failed")])
    assert ro.succeeded and ro.responses[0].kvs[0].value == b"yes"


def test_txn_invalid(client, prefix):
    with pytest.raises(errors.InvalidArgument):
        client.txn([], [Put(prefix + "twice", "1"), Put(prefix + "twice", "2")])
    with pytest.raises(errors.InvalidArgument):
        client.txn(["not a compare"], [])
    with pytest.raises(errors.InvalidArgument):
        client.txn([], ["not an op"])
    with pytest.raises(errors.InvalidArgument):
        Compare.version(prefix + "k") > "three"
    with pytest.raises(errors.NotFound):
        client.txn([], [Put(prefix + "leased", "v", lease=0x7eadbeef)])
    assert client.get(prefix + "leased") is None


# ---------------------------------------------------------------- watch

def _collect(watcher, n, timeout=10.0):
    out = []
    end = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < end:
        ev = watcher.get(timeout=max(0.0, end - time.monotonic()))
        if ev is None and watcher.done:
            break
        if ev is not None:
            out.append(ev)
    return out


def test_watch_from_revision(client, prefix):
    k = prefix + "w"
    r1 = client.put(k, "1")
    r2 = client.put(k, "2")
    client.put(prefix + "other-key", "x")
    r3 = client.delete(k)
    with client.watch(k, start_revision=r1.revision, prev_kv=True) as w:
        evs = _collect(w, 3)
        assert [(e.type, e.value, e.revision) for e in evs] == [
            ("PUT", b"1", r1.revision), ("PUT", b"2", r2.revision), ("DELETE", b"", r3.revision)]
        assert evs[0].prev_kv is None and evs[1].prev_kv.value == b"1"
        assert evs[2].prev_kv.value == b"2" and evs[2].key == k.encode()
        # The member's revision when the watch was created (it may lag the leader).
        assert w.revision >= r1.revision
        # Then live changes.
        r4 = client.put(k, "4")
        ev = w.get(timeout=5)
        assert ev is not None and (ev.type, ev.value, ev.revision) == ("PUT", b"4", r4.revision)
    assert w.done


def test_watch_prefix_from_now_and_cancel(client, prefix):
    client.put(prefix + "before", "x")
    # From the serving member's next change on (it may not have applied
    # "before" yet: then that comes first).
    w = client.watch_prefix(prefix)
    assert w.wait_created(5)
    client.put(prefix + "a", "1")
    client.put(prefix[:-1] + "0", "not in the prefix")
    client.put(prefix + "b", "2")
    evs = []
    while not evs or evs[-1].key != (prefix + "b").encode():
        ev = w.get(timeout=10)
        assert ev is not None, "missing events after %s" % evs
        evs.append(ev)
    assert all(e.revision > w.revision for e in evs)
    assert [(e.key, e.value) for e in evs if e.key != (prefix + "before").encode()] == [
        ((prefix + "a").encode(), b"1"), ((prefix + "b").encode(), b"2")]
    # Cancelled from another thread: the iteration ends.
    got = []

    def consume():
        for e in w:
            got.append(e)

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(0.2)
    w.cancel()
    t.join(5)
    assert not t.is_alive() and got == [] and w.done and w.error is None


def test_watch_resumes_after_serving_member_is_killed(healthy, prefix):
    cluster = healthy
    n = 60
    with raftkv.Client(cluster.endpoints, timeout=15.0) as writer, \
            raftkv.Client(cluster.endpoints, timeout=15.0) as wc:
        start = writer.put(prefix + "start", "s").revision
        w = wc.watch_prefix(prefix, start_revision=start + 1)
        assert w.wait_created(5)
        serving = w.endpoint
        acked = {}
        failures = []

        def write():
            try:
                for i in range(n):
                    acked["w%03d" % i] = writer.put(prefix + "w%03d" % i, "v%d" % i).revision
                    time.sleep(0.02)
            except Exception as e:  # pragma: no cover - reported below
                failures.append(e)

        t = threading.Thread(target=write)
        t.start()
        events = _collect(w, 15)
        assert len(events) == 15, "only %d events before the kill" % len(events)
        cluster.kill(cluster.index_of(serving))
        events += _collect(w, n - 15, timeout=30)
        t.join(30)
        assert not failures, failures
        assert len(acked) == n
        revs = [e.revision for e in events]
        assert revs == sorted(set(revs)), "events repeated or out of order: %s" % revs
        assert [e.key for e in events] == [(prefix + "w%03d" % i).encode() for i in range(n)]
        assert [e.revision for e in events] == [acked["w%03d" % i] for i in range(n)]
        assert [e.value for e in events] == [b"v%d" % i for i in range(n)]
        assert w.reconnects >= 1 and w.endpoint != serving
        # Still live after the move.
        r = writer.put(prefix + "after", "a").revision
        ev = w.get(timeout=10)
        assert ev is not None and ev.revision == r
        w.close()


# ---------------------------------------------------------------- leases

def test_lease_grant_attach_ttl_revoke(client, prefix):
    lease = client.lease_grant(60)
    assert lease > 0
    assert lease in client.lease_leases()
    client.put(prefix + "l1", "a", lease=lease)
    client.put(prefix + "l2", "b", lease=lease)
    client.put(prefix + "free", "c")
    assert client.get_kv(prefix + "l1").lease == lease
    ttl = client.lease_time_to_live(lease, keys=True)
    assert ttl.id == lease and 0 < ttl.ttl <= 60 and ttl.granted_ttl == 60
    assert sorted(ttl.keys) == [(prefix + "l1").encode(), (prefix + "l2").encode()]
    assert client.lease_time_to_live(lease).keys == []
    assert 0 < client.lease_keep_alive(lease) <= 60
    assert client.txn([Compare.lease(prefix + "l1") == lease], [Get(prefix + "l1")]).succeeded

    rev = client.lease_revoke(lease)
    assert rev > 0
    assert client.get_prefix(prefix).keys == [(prefix + "free").encode()]
    assert client.lease_time_to_live(lease).ttl == -1
    assert lease not in client.lease_leases()
    assert client.lease_keep_alive(lease) == 0
    with pytest.raises(errors.NotFound):
        client.lease_revoke(lease)
    with pytest.raises(errors.NotFound):
        client.put(prefix + "l3", "x", lease=lease)


def test_lease_expiry_and_keep_alive(client, prefix):
    # Without renewals a 2 s lease goes, with its key, at one revision.
    short = client.lease_grant(2)
    client.put(prefix + "short", "x", lease=short)
    # Renewed every TTL/3, another one outlives several TTLs.
    kept = client.lease_grant(2)
    client.put(prefix + "kept", "y", lease=kept)
    lost = []
    t0 = time.monotonic()
    with client.keep_alive(kept, on_lost=lost.append) as ka:
        assert ka.wait_first(5) and ka.ttl >= 2
        time.sleep(0.8)
        assert client.get(prefix + "short") == b"x"  # not before its TTL
        wait_until(lambda: client.get(prefix + "short") is None, timeout=10,
                   what="the short lease to expire")
        assert time.monotonic() - t0 >= 1.5
        assert client.lease_time_to_live(short).ttl == -1
        time.sleep(max(0.0, 5.0 - (time.monotonic() - t0)))
        assert client.get(prefix + "kept") == b"y"
        assert ka.renewals >= 3 and not lost
    assert not ka.running
    wait_until(lambda: client.get(prefix + "kept") is None, timeout=10,
               what="the kept lease to expire once its keep-alive stopped")
    # Keeping a lease that is gone: the helper reports it lost.
    with client.keep_alive(kept, on_lost=lost.append) as ka2:
        wait_until(lambda: ka2.lost, timeout=10, what="the keep-alive to notice the lease is gone")
    assert lost == [kept]


# ---------------------------------------------------------------- sessions

def _leader_stub(client):
    leader = client.leader()
    return leader, client.stubs(leader).kv


def test_session_retry_is_applied_once(client, prefix):
    leader, kv = _leader_stub(client)
    cid = kv.OpenSession(kv_pb2.OpenSessionRequest(), timeout=5).client_id
    assert cid > 0
    k = (prefix + "once").encode()
    s1 = kv_pb2.Session(client_id=cid, sequence=1, first_outstanding=1)
    first = kv.Put(kv_pb2.PutRequest(key=k, value=b"first", session=s1), timeout=5)
    # The same sequence again (a retry): the saved answer, not a second put.
    again = kv.Put(kv_pb2.PutRequest(key=k, value=b"first", session=s1), timeout=5)
    assert again == first
    # Even with another value: the sequence, not the content, identifies it.
    changed = kv.Put(kv_pb2.PutRequest(key=k, value=b"second", session=s1), timeout=5)
    assert changed == first
    kv_now = client.get_kv(k)
    assert kv_now.value == b"first" and kv_now.version == 1
    assert kv_now.mod_revision == first.revision

    # The same through the client's low-level path, with a delete that must count.
    s2 = kv_pb2.Session(client_id=cid, sequence=2, first_outstanding=1)
    dreq = kv_pb2.DeleteRangeRequest(key=k, session=s2)
    d1 = client.invoke("KV", "DeleteRange", dreq)
    d2 = client.invoke("KV", "DeleteRange", dreq)
    assert d1.deleted == 1 and d2.deleted == 1 and d1.header.revision == d2.header.revision

    # Answers below first_outstanding are dropped: such a sequence is refused.
    s4 = kv_pb2.Session(client_id=cid, sequence=4, first_outstanding=4)
    kv.Put(kv_pb2.PutRequest(key=k, value=b"4", session=s4), timeout=5)
    with pytest.raises(grpc.RpcError) as ei:
        kv.Put(kv_pb2.PutRequest(key=k, value=b"late", session=s1), timeout=5)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(errors.InvalidArgument):
        client.invoke("KV", "Put", kv_pb2.PutRequest(key=k, value=b"late", session=s2))
    assert client.get(k) == b"4"
    kv.CloseSession(kv_pb2.CloseSessionRequest(client_id=cid), timeout=5)


def test_unknown_session_is_session_expired(client, prefix):
    bogus = kv_pb2.Session(client_id=987654321987, sequence=1, first_outstanding=1)
    with pytest.raises(errors.SessionExpired) as ei:
        client.invoke("KV", "Put", kv_pb2.PutRequest(key=(prefix + "x").encode(), value=b"v",
                                                     session=bogus))
    e = ei.value
    assert e.code == grpc.StatusCode.ABORTED and isinstance(e, errors.Aborted)
    assert e.trailers.get("raftkv-session-expired") == "1"
    assert client.get(prefix + "x") is None


def test_client_session_tags_writes_and_survives_expiry(client, prefix):
    client.put(prefix + "a", "1")
    sid = client.session_id
    assert sid > 0
    st = client.status(client.leader())
    assert st.sessions >= 1
    # The session vanishes on the servers (as after --session_timeout_ms
    # idle): the first attempt of the next write is refused with ABORTED, so
    # nothing of it was applied and the client sends it again in a new session.
    with client._session_mu:
        client._client_id = 987654321000
    r = client.put(prefix + "b", "2")
    assert client.session_id not in (0, 987654321000, sid)
    assert client.get_kv(prefix + "b").mod_revision == r.revision
    assert client.delete(prefix + "b") == 1
    assert client.txn([Compare.value(prefix + "a") == "1"], [Put(prefix + "a", "3")]).succeeded
    assert client.get(prefix + "a") == b"3"


def test_without_session(cluster, prefix):
    with raftkv.Client(cluster.endpoints, use_session=False) as c:
        c.put(prefix + "n", "1")
        assert c.session_id == 0
        assert c.txn([Compare.value(prefix + "n") == "1"], [Put(prefix + "n", "2")]).succeeded
        assert c.delete(prefix + "n") == 1
        assert c.session_id == 0


# ---------------------------------------------------------------- leader following

def test_follower_endpoint_only(cluster, prefix):
    with raftkv.Client(cluster.endpoints) as probe:
        leader = probe.leader()
        follower = [e for e in cluster.endpoints if e != leader][0]
        assert probe.status(follower).role == "follower"
    with raftkv.Client([follower], timeout=10.0) as c:
        r = c.put(prefix + "f", "via follower")
        assert c.leader_hint == leader
        assert c.get(prefix + "f") == b"via follower"
        assert c.txn([Compare.version(prefix + "f") == 1], [Put(prefix + "f", "2")]).succeeded
        assert c.delete_prefix(prefix) == 1
        lease = c.lease_grant(30)
        assert c.lease_time_to_live(lease).granted_ttl == 30
        assert c.lease_keep_alive(lease) > 0
        c.lease_revoke(lease)
        # A serializable read is served by the follower itself.
        c.put(prefix + "g", "g")
        wait_until(lambda: c.get(prefix + "g", serializable=True) == b"g")
        assert c.status().address == follower
        # Watches are served by the follower too.
        with c.watch(prefix + "g", start_revision=r.revision) as w:
            ev = w.get(timeout=5)
            assert ev is not None and ev.value == b"g" and w.endpoint == follower


def test_writes_continue_after_leader_is_killed(healthy, prefix):
    cluster = healthy
    with raftkv.Client(cluster.endpoints, timeout=15.0) as c:
        c.put(prefix + "before", "1")
        old = c.leader()
        cluster.kill(cluster.index_of(old))
        t0 = time.monotonic()
        c.put(prefix + "after", "2")
        assert time.monotonic() - t0 < 10
        assert c.leader_hint != old and c.leader() != old
        assert c.get(prefix + "before") == b"1" and c.get(prefix + "after") == b"2"
        assert c.delete_prefix(prefix) == 2


def test_status(client, cluster):
    statuses = [client.status(e) for e in cluster.endpoints]
    assert sorted(s.id for s in statuses) == [1, 2, 3]
    assert [s.address for s in statuses] == cluster.endpoints
    assert sum(s.role == "leader" for s in statuses) == 1
    leader = [s for s in statuses if s.role == "leader"][0]
    assert client.leader() == leader.address
    assert all(s.role in ("leader", "follower") for s in statuses)
    assert sorted(leader.voters) == [1, 2, 3]
    assert isinstance(client.statuses()[cluster.endpoints[0]], kv_pb2.StatusResponse)
    assert client.echo(b"ping") == b"ping"


# ---------------------------------------------------------------- typed errors, bad input

def test_typed_errors(client, prefix):
    with pytest.raises(errors.InvalidArgument) as ei:
        client.put("", "v")
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT and "empty" in ei.value.details
    with pytest.raises(errors.InvalidArgument):
        client.get("")
    with pytest.raises(errors.InvalidArgument):
        client.delete(b"")
    with pytest.raises(errors.InvalidArgument):  # range_end before the key
        client.range(prefix + "b", prefix + "a")
    with pytest.raises(errors.InvalidArgument):
        client.range(prefix, prefix=True, limit=-1)
    with pytest.raises(errors.InvalidArgument):
        client.put(prefix + "neg", "v", lease=-1)
    with pytest.raises(errors.InvalidArgument):
        client.put("k" * 5000, "too long a key")
    with pytest.raises(errors.InvalidArgument):
        client.lease_grant(0)
    with pytest.raises(errors.NotFound) as nf:
        client.lease_revoke(0x5eed1234)
    assert nf.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(errors.NotFound):
        client.put(prefix + "k", "v", lease=0x5eed1234)
    assert client.lease_time_to_live(0x5eed1234).ttl == -1
    # A lease id in use: FailedPrecondition from the leader, not a redirect.
    lid = client.lease_grant(30)
    t0 = time.monotonic()
    with pytest.raises(errors.FailedPrecondition) as fp:
        client.lease_grant(30, id=lid)
    assert not isinstance(fp.value, errors.NotLeader)
    assert time.monotonic() - t0 < 3
    client.lease_revoke(lid)


def test_compacted(client, cluster, prefix):
    first = client.put(prefix + "c", "0").revision
    # Outrun the members' history window (conftest: --history_revisions).
    writers = []

    def burst(j):
        with raftkv.Client(client.endpoints) as c:
            for i in range(HISTORY_REVISIONS // 4 + 5):
                c.put(prefix + "c%d" % j, str(i))

    for j in range(4):
        writers.append(threading.Thread(target=burst, args=(j,)))
        writers[-1].start()
    for t in writers:
        t.join(60)
    with pytest.raises(errors.Compacted) as ei:
        client.get(prefix + "c", revision=first)
    assert ei.value.code == grpc.StatusCode.OUT_OF_RANGE
    assert ei.value.compact_revision is not None and ei.value.compact_revision > first
    # Each member keeps its own history window: one that has not yet applied
    # the bursts still holds `first`, and a watch it accepts streams on.
    for ep in cluster.endpoints:
        with raftkv.Client([ep]) as one:
            def gone():
                try:
                    one.get(prefix + "c", serializable=True, revision=first)
                    return False
                except errors.Compacted:
                    return True
            wait_until(gone, what="member %s to drop revision %d" % (ep, first))
    w = client.watch(prefix + "c", start_revision=first)
    with pytest.raises(errors.Compacted) as wi:
        for _ in w:
            pass
    assert wi.value.compact_revision is not None and wi.value.compact_revision > first
    assert w.done
    # From the oldest revision kept on, the watch works.
    with client.watch(prefix, prefix=True, start_revision=wi.value.compact_revision) as ok:
        assert ok.get(timeout=5) is not None


def test_bad_input(cluster):
    for bad in ([], "", "no-port", "host:", ":7001", "host:port", "host:70000", "::1:7001",
                "[::1", "a b:1", ["127.0.0.1:1", "bad"]):
        with pytest.raises(errors.InvalidArgument):
            raftkv.Client(bad)
    with pytest.raises(errors.InvalidArgument):
        raftkv.Client(cluster.endpoints, timeout=0)
    with raftkv.Client(",".join(cluster.endpoints)) as c:  # a comma-separated str
        assert c.endpoints == cluster.endpoints
        for bad_key in (None, 1, 2.5, ["k"], object()):
            with pytest.raises(errors.InvalidArgument):
                c.put(bad_key, "v")
            with pytest.raises(errors.InvalidArgument):
                c.get(bad_key)
        with pytest.raises(errors.InvalidArgument):
            c.put("k", None)
        with pytest.raises(errors.InvalidArgument):
            c.put("k", "v", lease="1")
        with pytest.raises(errors.InvalidArgument):
            c.range("a", "b", prefix=True)
        with pytest.raises(errors.InvalidArgument):
            c.lease_grant("10")
        with pytest.raises(errors.InvalidArgument):
            Compare.value("k") >= "v"
        with pytest.raises(errors.InvalidArgument):
            c.invoke("nope", "Put", kv_pb2.PutRequest())
    closed = raftkv.Client(cluster.endpoints)
    closed.close()
    with pytest.raises(errors.RaftkvError):
        closed.put("k", "v")
