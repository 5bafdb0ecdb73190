package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// An expected watch event: type, key (under the check's prefix), value,
// mod revision, and the previous value ("" for none).
type wantEvent struct {
	typ     mvccpb.Event_EventType
	key     string
	value   string
	rev     int64
	prevVal string
}

// checkWatch: a prefix watch from a past revision with prev kvs replays the
// history in order, then sees new writes under the prefix only; a filtered
// key watch; cancelling the context closes the channels.
func checkWatch(ctx context.Context, e *env) (string, error) {
	cli, err := e.client()
	if err != nil {
		return "", err
	}
	p := e.key("w/")
	put, err := cli.Put(ctx, p+"a", "1")
	if err != nil {
		return "", wrap("put a", err)
	}
	r := put.Header.Revision
	err = do(ctx, cli, clientv3.OpPut(p+"b", "2"), clientv3.OpPut(p+"a", "3"), clientv3.OpDelete(p+"a"))
	if err != nil {
		return "", err
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wch := cli.Watch(wctx, p, clientv3.WithPrefix(), clientv3.WithRev(r), clientv3.WithPrevKV(),
		clientv3.WithCreatedNotify())
	first, ok, err := recvWithin(wch, 5*time.Second, "the watch's created notification")
	if err != nil || !ok {
		return "", errorf("watch: no created notification (%v)", err)
	}
	if !first.Created || first.Err() != nil {
		return "", errorf("watch: first response created %v err %v, expected created", first.Created, first.Err())
	}
	evPut, evDel := mvccpb.PUT, mvccpb.DELETE
	events := []wantEvent{{evPut, "a", "1", r, ""}, {evPut, "b", "2", r + 1, ""},
		{evPut, "a", "3", r + 2, "1"}, {evDel, "a", "", r + 3, "3"}}
	if len(first.Events) != 0 {
		return "", errorf("watch: the created notification carried events %v", first.Events)
	}
	if err := expectEvents(wch, p, events); err != nil {
		return "", wrap("history", err)
	}
	kch := cli.Watch(wctx, p+"k", clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	kr, ok, err := recvWithin(kch, 5*time.Second, "the key watch's created notification")
	if err != nil || !ok || !kr.Created {
		return "", errorf("key watch: no created notification (%v)", err)
	}
	// Writes after the watch was created: outside the prefix, then in it.
	if err := do(ctx, cli, clientv3.OpPut(e.key("outside"), "x"), clientv3.OpPut(p+"c", "4"),
		clientv3.OpPut(p+"k", "5"), clientv3.OpDelete(p+"k")); err != nil {
		return "", err
	}
	live := []wantEvent{{evPut, "c", "4", r + 5, ""}, {evPut, "k", "5", r + 6, ""}, {evDel, "k", "", r + 7, "5"}}
	if err := expectEvents(wch, p, live); err != nil {
		return "", wrap("new writes", err)
	}
	// The key watch filters puts out and asked for no prev kv.
	if err := expectEvents(kch, p, []wantEvent{{evDel, "k", "", r + 7, ""}}); err != nil {
		return "", wrap("key watch without puts", err)
	}
	wcancel()
	for name, ch := range map[string]clientv3.WatchChan{"prefix watch": wch, "key watch": kch} {
		if err := expectClosed(ch, name); err != nil {
			return "", err
		}
	}
	return "", nil
}

// expectEvents reads want's events from ch, in order, within 10 s.
func expectEvents(ch clientv3.WatchChan, p string, want []wantEvent) error {
	deadline := time.Now().Add(10 * time.Second)
	var got []*clientv3.Event
	for len(got) < len(want) {
		resp, ok, err := recvWithin(ch, time.Until(deadline), fmt.Sprintf("event %d of %d", len(got)+1, len(want)))
		if err != nil {
			return err
		}
		if !ok {
			return errorf("the watch closed after %d of %d events (%v)", len(got), len(want), resp.Err())
		}
		if resp.Err() != nil {
			return wrap("watch response", resp.Err())
		}
		got = append(got, resp.Events...)
	}
	if len(got) > len(want) {
		return errorf("%d events, expected %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		prev := ""
		if g.PrevKv != nil {
			prev = string(g.PrevKv.Value)
		}
		if g.Type != w.typ || string(g.Kv.Key) != p+w.key || string(g.Kv.Value) != w.value ||
			g.Kv.ModRevision != w.rev || prev != w.prevVal {
			return errorf("event %d: %s %q=%q at %d (prev %q), expected %s %q=%q at %d (prev %q)",
				i+1, g.Type, g.Kv.Key, g.Kv.Value, g.Kv.ModRevision, prev,
				w.typ, p+w.key, w.value, w.rev, w.prevVal)
		}
		if w.prevVal == "" && g.PrevKv != nil {
			return errorf("event %d: unexpected prev kv %v", i+1, g.PrevKv)
		}
	}
	return nil
}

// expectClosed: after its context is cancelled, a watch channel closes
// within 5 s (a last response may be a cancellation notice).
func expectClosed(ch clientv3.WatchChan, name string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, ok, err := recvWithin(ch, time.Until(deadline), name+" closing after cancel")
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if len(resp.Events) > 0 {
			return errorf("%s: events %v after cancel", name, resp.Events)
		}
	}
}

// checkLease: Grant, keys attached, KeepAliveOnce, the KeepAlive stream,
// TimeToLive with keys, Leases; Revoke removes the keys and ends the lease,
// and a revoked lease is refused as etcd names it.
func checkLease(ctx context.Context, e *env) (string, error) {
	cli, err := e.client()
	if err != nil {
		return "", err
	}
	p := e.key("")
	const ttl = 30
	gr, err := cli.Grant(ctx, ttl)
	if err != nil {
		return "", wrap("Grant", err)
	}
	if gr.ID == 0 || gr.TTL != ttl || gr.Error != "" {
		return "", errorf("Grant: id %x ttl %d error %q, expected an id and ttl %d", gr.ID, gr.TTL, gr.Error, ttl)
	}
	id := gr.ID
	if err := do(ctx, cli, clientv3.OpPut(p+"a", "a", clientv3.WithLease(id)),
		clientv3.OpPut(p+"b", "b", clientv3.WithLease(id)), clientv3.OpPut(p+"free", "c")); err != nil {
		return "", err
	}
	g, err := cli.Get(ctx, p+"a")
	if err != nil || len(g.Kvs) != 1 || clientv3.LeaseID(g.Kvs[0].Lease) != id {
		return "", errorf("get a: %v %v, expected a on lease %x", g, err, id)
	}
	ka, err := cli.KeepAliveOnce(ctx, id)
	if err != nil {
		return "", wrap("KeepAliveOnce", err)
	}
	if ka.ID != id || ka.TTL != ttl {
		return "", errorf("KeepAliveOnce: id %x ttl %d, expected %x %d", ka.ID, ka.TTL, id, ttl)
	}
	kctx, kcancel := context.WithCancel(ctx)
	kch, err := cli.KeepAlive(kctx, id)
	if err != nil {
		kcancel()
		return "", wrap("KeepAlive", err)
	}
	kr, ok, err := recvWithin(kch, 5*time.Second, "KeepAlive's first response")
	kcancel()
	if err != nil || !ok || kr.ID != id || kr.TTL != ttl {
		return "", errorf("KeepAlive: %v (ok %v, err %v), expected id %x ttl %d", kr, ok, err, id, ttl)
	}
	tl, err := cli.TimeToLive(ctx, id, clientv3.WithAttachedKeys())
	if err != nil {
		return "", wrap("TimeToLive", err)
	}
	var keys []string
	for _, k := range tl.Keys {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	if tl.ID != id || tl.GrantedTTL != ttl || tl.TTL <= 0 || tl.TTL > ttl ||
		len(keys) != 2 || keys[0] != p+"a" || keys[1] != p+"b" {
		return "", errorf("TimeToLive: id %x granted %d ttl %d keys %q, expected %x %d (0, %d] [a b]",
			tl.ID, tl.GrantedTTL, tl.TTL, keys, id, ttl, ttl)
	}
	ls, err := cli.Leases(ctx)
	if err != nil {
		return "", wrap("Leases", err)
	}
	found := false
	for _, l := range ls.Leases {
		found = found || l.ID == id
	}
	if !found {
		return "", errorf("Leases: %v does not list %x", ls.Leases, id)
	}
	if _, err := cli.Revoke(ctx, id); err != nil {
		return "", wrap("Revoke", err)
	}
	g, err = cli.Get(ctx, p, clientv3.WithPrefix())
	if err != nil {
		return "", wrap("get after Revoke", err)
	}
	if len(g.Kvs) != 1 || string(g.Kvs[0].Key) != p+"free" {
		return "", errorf("after Revoke: %v, expected only the key without a lease", g.Kvs)
	}
	tl, err = cli.TimeToLive(ctx, id)
	if err != nil {
		return "", wrap("TimeToLive of a revoked lease", err)
	}
	if tl.TTL != -1 {
		return "", errorf("TimeToLive of a revoked lease: ttl %d, expected -1", tl.TTL)
	}
	if _, err := cli.KeepAliveOnce(ctx, id); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return "", errorf("KeepAliveOnce of a revoked lease: %v, expected %v", err, rpctypes.ErrLeaseNotFound)
	}
	if _, err := cli.Put(ctx, p+"c", "c", clientv3.WithLease(id)); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return "", errorf("put with a revoked lease: %v, expected %v", err, rpctypes.ErrLeaseNotFound)
	}
	if _, err := cli.Revoke(ctx, id); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return "", errorf("Revoke of a revoked lease: %v, expected %v", err, rpctypes.ErrLeaseNotFound)
	}
	return "", nil
}
