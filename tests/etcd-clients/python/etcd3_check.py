"""python-etcd3 (PyPI etcd3) against an etcd v3 API endpoint: real etcd or
raftkv. Each named check prints "PASS name" or "FAIL name: why"; the exit
status is 1 if any check failed, 2 on a usage error.

    etcd3_check.py --endpoints=127.0.0.1:2379,... [--checks=all|py-kv,...]

python-etcd3 talks to one endpoint: the first of --endpoints, unless
--endpoint-index picks another.
"""

import argparse
import os
import queue
import sys
import threading
import time
import traceback

import etcd3
import grpc
from etcd3 import events

CALL_TIMEOUT_S = 10  # every gRPC call, and the creation of a watch


class CheckFailed(Exception):
    pass


def expect(cond, what, *args):
    if not cond:
        raise CheckFailed(what % args if args else what)


def check_kv(cli, p):
    """put, get, get_prefix, delete, transactions and the helpers built on
    them (replace, put_if_not_exists)."""
    cli.put(p + "a", "1")
    value, meta = cli.get(p + "a")
    expect(value == b"1", "get a: %r, expected b'1'", value)
    expect(meta.version == 1 and meta.create_revision == meta.mod_revision,
           "get a: version %d create %d mod %d, expected version 1 created at its mod revision",
           meta.version, meta.create_revision, meta.mod_revision)
    r = meta.mod_revision
    resp = cli.put(p + "a", "2", prev_kv=True)
    expect(resp.prev_kv.value == b"1", "put a=2 with prev_kv: prev %r, expected b'1'", resp.prev_kv.value)
    expect(resp.header.revision == r + 1, "put a=2 at revision %d, expected %d", resp.header.revision, r + 1)
    cli.put(p + "b", "3")
    got = [(m.key, v) for v, m in cli.get_prefix(p)]
    want = [((p + "a").encode(), b"2"), ((p + "b").encode(), b"3")]
    expect(got == want, "get_prefix: %r, expected %r", got, want)
    got = [m.key for _, m in cli.get_range(p + "a", p + "b")]
    expect(got == [(p + "a").encode()], "get_range [a, b): %r, expected only a", got)
    ok, responses = cli.transaction(
        compare=[cli.transactions.value(p + "a") == "2",
                 cli.transactions.version(p + "b") > 0],
        success=[cli.transactions.put(p + "c", "4"), cli.transactions.get(p + "c")],
        failure=[cli.transactions.put(p + "c", "no")])
    expect(ok, "transaction: compare failed, expected success")
    seen = [(m.key, v) for v, m in responses[1]]
    expect(seen == [((p + "c").encode(), b"4")], "transaction: its get saw %r, expected c=4", seen)
    ok, _ = cli.transaction(compare=[cli.transactions.mod(p + "c") < 1],
                            success=[cli.transactions.delete(p + "c")], failure=[])
    expect(not ok, "transaction on mod(c) < 1 succeeded")
    expect(cli.replace(p + "a", "2", "5"), "replace a 2 -> 5 failed")
    expect(not cli.replace(p + "a", "2", "6"), "replace a 2 -> 6 succeeded while a is 5")
    expect(not cli.put_if_not_exists(p + "a", "7"), "put_if_not_exists of an existing key succeeded")
    expect(cli.put_if_not_exists(p + "d", "8"), "put_if_not_exists of a new key failed")
    expect(cli.delete(p + "a"), "delete a returned False")
    expect(not cli.delete(p + "a"), "delete of an absent key returned True")
    value, meta = cli.get(p + "a")
    expect(value is None and meta is None, "get a after delete: %r", value)
    resp = cli.delete_prefix(p)
    expect(resp.deleted == 3, "delete_prefix: %d deleted, expected 3 (b, c, d)", resp.deleted)


def next_events(q, n, what):
    """n events from the watch callback's queue, within 10 s."""
    got = []
    deadline = time.monotonic() + 10
    while len(got) < n:
        try:
            item = q.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise CheckFailed("%s: %d of %d events within 10 s" % (what, len(got), n))
        if isinstance(item, Exception):
            raise CheckFailed("%s: the watch failed: %r" % (what, item))
        got.extend(item.events)
    expect(len(got) == n, "%s: %d events, expected %d", what, len(got), n)
    return got


def check_watch(cli, p):
    """watch_once from a past revision; a prefix watch (callback) sees puts
    and deletes in order, with prev kvs; cancel stops it."""
    r = cli.put(p + "k", "1").header.revision
    ev = cli.watch_once(p + "k", timeout=5, start_revision=r)
    expect(isinstance(ev, events.PutEvent) and ev.value == b"1" and ev.mod_revision == r,
           "watch_once from revision %d: %s at %d", r, ev, ev.mod_revision)
    q = queue.Queue()
    watch_id = cli.add_watch_prefix_callback(p + "w/", q.put, prev_kv=True)
    cli.put(p + "outside", "x")
    cli.put(p + "w/a", "1")
    cli.put(p + "w/a", "2")
    cli.delete(p + "w/a")
    got = next_events(q, 3, "prefix watch")
    kinds = [(type(e).__name__, e.key, e.value, e.prev_value) for e in got]
    a = (p + "w/a").encode()
    want = [("PutEvent", a, b"1", b""), ("PutEvent", a, b"2", b"1"), ("DeleteEvent", a, b"", b"2")]
    expect(kinds == want, "prefix watch: %r, expected %r", kinds, want)
    revs = [e.mod_revision for e in got]
    expect(revs == sorted(revs) and len(set(revs)) == 3, "prefix watch: revisions %r not increasing", revs)
    cli.cancel_watch(watch_id)
    cli.put(p + "w/b", "after cancel")
    time.sleep(0.5)
    expect(q.empty(), "an event arrived after cancel_watch: %r", None if q.empty() else q.queue[0])
    cli.delete_prefix(p)


def check_lock(cli, cli2, p):
    """a lock is acquired and released; a second lock of the same name is
    not acquired while it is held, and is once it is released."""
    name = p.replace("/", "-") + "lock"
    lock1, lock2 = cli.lock(name, ttl=10), cli2.lock(name, ttl=10)
    expect(lock1.acquire(timeout=5), "lock 1 not acquired")
    expect(lock1.is_acquired(), "lock 1 is_acquired() is False after acquire")
    start = time.monotonic()
    expect(not lock2.acquire(timeout=1), "lock 2 acquired while lock 1 is held")
    expect(time.monotonic() - start >= 0.9, "lock 2 gave up before its 1 s timeout")
    expect(not lock2.is_acquired(), "lock 2 is_acquired() while lock 1 is held")
    expect(lock1.release(), "lock 1 release returned False")
    expect(lock2.acquire(timeout=5), "lock 2 not acquired after lock 1 was released")
    expect(not lock1.is_acquired(), "lock 1 is_acquired() after release")
    lock2.refresh()
    expect(lock2.release(), "lock 2 release returned False")
    expect(not lock2.release(), "a second release of lock 2 returned True")


def check_lease(cli, p):
    """grant, a key attached, remaining/granted TTL and keys, refresh,
    revoke removes the key."""
    lease = cli.lease(30)
    expect(lease.id != 0 and lease.ttl == 30, "lease: id %d ttl %d, expected an id and 30", lease.id, lease.ttl)
    cli.put(p + "leased", "x", lease=lease)
    cli.put(p + "free", "y")
    _, meta = cli.get(p + "leased")
    expect(meta.lease_id == lease.id, "the key's lease is %d, expected %d", meta.lease_id, lease.id)
    remaining = lease.remaining_ttl
    expect(0 < remaining <= 30, "remaining_ttl %d, expected (0, 30]", remaining)
    expect(lease.granted_ttl == 30, "granted_ttl %d, expected 30", lease.granted_ttl)
    keys = list(lease.keys)
    expect(keys == [(p + "leased").encode()], "lease keys %r, expected the leased key", keys)
    refreshed = lease.refresh()
    expect(len(refreshed) == 1 and refreshed[0].ID == lease.id and refreshed[0].TTL == 30,
           "refresh: %r, expected one response with ttl 30", refreshed)
    lease.revoke()
    value, _ = cli.get(p + "leased")
    expect(value is None, "the leased key is still there after revoke: %r", value)
    value, _ = cli.get(p + "free")
    expect(value == b"y", "the key without a lease is gone after revoke: %r", value)
    expect(lease.remaining_ttl == -1, "remaining_ttl after revoke: %d, expected -1", lease.remaining_ttl)
    cli.delete_prefix(p)


def describe(e):
    """An exception as one line; python-etcd3 replaces some gRPC errors by
    its own exception classes without their details, so name those too."""
    if isinstance(e, grpc.RpcError) and hasattr(e, "code"):
        return "gRPC %s: %r" % (e.code().name, e.details())
    why = "%s: %s" % (type(e).__name__, e)
    cause = e.__context__
    if isinstance(cause, grpc.RpcError) and hasattr(cause, "code"):
        why += " (gRPC %s: %r)" % (cause.code().name, cause.details())
    return why


CHECKS = ["py-kv", "py-watch", "py-lock", "py-lease"]


def run(name, endpoint, prefix):
    host, port = endpoint.rsplit(":", 1)
    clients = [etcd3.client(host=host, port=int(port), timeout=CALL_TIMEOUT_S) for _ in range(2)]
    cli = clients[0]
    p = prefix + name + "/"
    try:
        if name == "py-kv":
            check_kv(cli, p)
        elif name == "py-watch":
            check_watch(cli, p)
        elif name == "py-lock":
            check_lock(cli, clients[1], p)
        elif name == "py-lease":
            check_lease(cli, p)
    finally:
        for c in clients:
            try:
                c.delete_prefix(p)
            except Exception:  # best effort: the check's result is what counts
                pass
            c.close()


def quiet_closed_watch_threads():
    """python-etcd3's watch thread restarts its stream after the client is
    closed and dies on "Channel closed"; that is the end of a closed client,
    not a failure, so its traceback is not printed."""
    default = threading.excepthook

    def hook(args):
        if (args.thread is not None and args.thread.name.startswith("etcd3_watch_")
                and args.exc_type is ValueError and "Channel closed" in str(args.exc_value)):
            return
        default(args)
    threading.excepthook = hook


def main():
    quiet_closed_watch_threads()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoints", default="127.0.0.1:2379")
    ap.add_argument("--endpoint-index", type=int, default=0)
    ap.add_argument("--checks", default="all", help="all, or a comma-separated list of: " + ",".join(CHECKS))
    ap.add_argument("--prefix", default="etcd3-check/%d-%d/" % (time.time_ns(), os.getpid()))
    args = ap.parse_args()
    names = CHECKS if args.checks == "all" else args.checks.split(",")
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        print("etcd3_check: unknown checks %s (known: %s)" % (",".join(unknown), ",".join(CHECKS)), file=sys.stderr)
        return 2
    endpoint = args.endpoints.split(",")[args.endpoint_index]
    passed = failed = 0
    for name in names:
        start = time.monotonic()
        try:
            run(name, endpoint, args.prefix)
        except CheckFailed as e:
            why = str(e)
        except Exception as e:  # a client error is a failed check too
            why = describe(e)
            if os.environ.get("ETCD3_CHECK_TRACEBACK"):
                traceback.print_exc()
        else:
            why = None
        took = time.monotonic() - start
        if why is None:
            passed += 1
            print("PASS %s (%.1f s)" % (name, took), flush=True)
        else:
            failed += 1
            print("FAIL %s: %s (%.1f s)" % (name, " ".join(why.split()), took), flush=True)
    print("etcd3_check: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
