package main

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// checkKV: put, get (at a past revision, prefix, limit, count, keys only,
// range), delete, txn, and the revisions each write takes: one per write
// request (a txn or a multi-key delete is one), none for a read or a delete
// of nothing.
func checkKV(ctx context.Context, e *env) (string, error) {
	cli, err := e.client()
	if err != nil {
		return "", err
	}
	p := e.key("")

	put1, err := cli.Put(ctx, p+"a", "1")
	if err != nil {
		return "", wrap("put a=1", err)
	}
	r := put1.Header.Revision
	put2, err := cli.Put(ctx, p+"a", "2")
	if err != nil {
		return "", wrap("put a=2", err)
	}
	if put2.Header.Revision != r+1 {
		return "", errorf("second put at revision %d, expected %d", put2.Header.Revision, r+1)
	}
	g, err := cli.Get(ctx, p+"a")
	if err != nil {
		return "", wrap("get a", err)
	}
	if len(g.Kvs) != 1 || string(g.Kvs[0].Value) != "2" || g.Count != 1 {
		return "", errorf("get a: %v, expected one kv a=2", g.Kvs)
	}
	kv := g.Kvs[0]
	if kv.CreateRevision != r || kv.ModRevision != r+1 || kv.Version != 2 {
		return "", errorf("get a: create %d mod %d version %d, expected %d %d 2",
			kv.CreateRevision, kv.ModRevision, kv.Version, r, r+1)
	}
	if g.Header.Revision < r+1 {
		return "", errorf("get a: header revision %d below the last write's %d", g.Header.Revision, r+1)
	}
	old, err := cli.Get(ctx, p+"a", clientv3.WithRev(r))
	if err != nil {
		return "", wrap("get a at a past revision", err)
	}
	if len(old.Kvs) != 1 || string(old.Kvs[0].Value) != "1" || old.Kvs[0].ModRevision != r {
		return "", errorf("get a --rev=%d: %v, expected a=1", r, old.Kvs)
	}
	pp, err := cli.Put(ctx, p+"a", "3", clientv3.WithPrevKV())
	if err != nil {
		return "", wrap("put with prev kv", err)
	}
	if pp.PrevKv == nil || string(pp.PrevKv.Value) != "2" || pp.Header.Revision != r+2 {
		return "", errorf("put a=3 with prev kv: prev %v at revision %d, expected a=2 at %d",
			pp.PrevKv, pp.Header.Revision, r+2)
	}
	if err := do(ctx, cli, clientv3.OpPut(p+"b", "b"), clientv3.OpPut(p+"c", "c")); err != nil {
		return "", err
	}
	if err := checkRanges(ctx, cli, p); err != nil {
		return "", err
	}

	// r+4 is the last write so far.
	del, err := cli.Delete(ctx, p+"a")
	if err != nil {
		return "", wrap("delete a", err)
	}
	if del.Deleted != 1 || del.Header.Revision != r+5 {
		return "", errorf("delete a: %d deleted at revision %d, expected 1 at %d", del.Deleted, del.Header.Revision, r+5)
	}
	del, err = cli.Delete(ctx, p+"a")
	if err != nil {
		return "", wrap("delete of an absent key", err)
	}
	if del.Deleted != 0 || del.Header.Revision != r+5 {
		return "", errorf("delete of an absent key: %d deleted at revision %d, expected 0 at %d (no new revision)",
			del.Deleted, del.Header.Revision, r+5)
	}
	del, err = cli.Delete(ctx, p, clientv3.WithPrefix(), clientv3.WithPrevKV())
	if err != nil {
		return "", wrap("delete prefix", err)
	}
	if del.Deleted != 2 || len(del.PrevKvs) != 2 || string(del.PrevKvs[0].Key) != p+"b" ||
		string(del.PrevKvs[1].Key) != p+"c" || del.Header.Revision != r+6 {
		return "", errorf("delete prefix with prev kvs: %d deleted (%v) at revision %d, expected b, c at %d",
			del.Deleted, del.PrevKvs, del.Header.Revision, r+6)
	}
	if err := checkTxn(ctx, cli, p); err != nil {
		return "", err
	}
	return "", nil
}

// checkRanges reads the three keys a=3, b, c under p.
func checkRanges(ctx context.Context, cli *clientv3.Client, p string) error {
	keys := func(r *clientv3.GetResponse) []string {
		var ks []string
		for _, kv := range r.Kvs {
			ks = append(ks, string(kv.Key)[len(p):])
		}
		return ks
	}
	g, err := cli.Get(ctx, p, clientv3.WithPrefix())
	if err != nil {
		return wrap("get prefix", err)
	}
	if ks := keys(g); len(ks) != 3 || ks[0] != "a" || ks[1] != "b" || ks[2] != "c" || g.Count != 3 || g.More {
		return errorf("get prefix: keys %v count %d more %v, expected [a b c] 3 false", ks, g.Count, g.More)
	}
	if string(g.Kvs[0].Value) != "3" {
		return errorf("get prefix: a=%q, expected 3", g.Kvs[0].Value)
	}
	g, err = cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithLimit(2))
	if err != nil {
		return wrap("get prefix with limit", err)
	}
	if ks := keys(g); len(ks) != 2 || ks[0] != "a" || ks[1] != "b" || g.Count != 3 || !g.More {
		return errorf("get prefix limit 2: keys %v count %d more %v, expected [a b] 3 true", ks, g.Count, g.More)
	}
	g, err = cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return wrap("get prefix count only", err)
	}
	if len(g.Kvs) != 0 || g.Count != 3 {
		return errorf("get prefix count only: %d kvs count %d, expected 0 and 3", len(g.Kvs), g.Count)
	}
	g, err = cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return wrap("get prefix keys only", err)
	}
	if len(g.Kvs) != 3 || len(g.Kvs[0].Value) != 0 {
		return errorf("get prefix keys only: %v, expected 3 keys without values", g.Kvs)
	}
	g, err = cli.Get(ctx, p+"a", clientv3.WithRange(p+"c"))
	if err != nil {
		return wrap("get range [a, c)", err)
	}
	if ks := keys(g); len(ks) != 2 || ks[0] != "a" || ks[1] != "b" {
		return errorf("get range [a, c): keys %v, expected [a b]", ks)
	}
	g, err = cli.Get(ctx, p+"zz")
	if err != nil {
		return wrap("get of an absent key", err)
	}
	if len(g.Kvs) != 0 || g.Count != 0 {
		return errorf("get of an absent key: %v count %d", g.Kvs, g.Count)
	}
	return nil
}

// checkTxn: compares on value, mod and create revision, both branches, a
// read in a txn that sees the txn's own write, one revision per txn.
func checkTxn(ctx context.Context, cli *clientv3.Client, p string) error {
	put, err := cli.Put(ctx, p+"t", "x")
	if err != nil {
		return wrap("put t", err)
	}
	rt := put.Header.Revision
	tx, err := cli.Txn(ctx).If(
		clientv3.Compare(clientv3.Value(p+"t"), "=", "x"),
		clientv3.Compare(clientv3.ModRevision(p+"t"), "=", rt),
		clientv3.Compare(clientv3.CreateRevision(p+"absent"), "=", 0),
	).Then(
		clientv3.OpPut(p+"t", "y"), clientv3.OpPut(p+"u", "1"), clientv3.OpGet(p+"t"),
	).Else(clientv3.OpPut(p+"t", "z")).Commit()
	if err != nil {
		return wrap("txn", err)
	}
	if !tx.Succeeded || len(tx.Responses) != 3 || tx.Header.Revision != rt+1 {
		return errorf("txn: succeeded %v, %d responses at revision %d, expected true, 3 at %d",
			tx.Succeeded, len(tx.Responses), tx.Header.Revision, rt+1)
	}
	rr := tx.Responses[2].GetResponseRange()
	if rr == nil || len(rr.Kvs) != 1 || string(rr.Kvs[0].Value) != "y" || rr.Kvs[0].ModRevision != rt+1 {
		return errorf("txn: its get saw %v, expected t=y at mod revision %d", rr, rt+1)
	}
	tx, err = cli.Txn(ctx).If(
		clientv3.Compare(clientv3.Version(p+"t"), "=", 1),
	).Then(clientv3.OpPut(p+"t", "no")).Else(
		clientv3.OpGet(p+"u"), clientv3.OpDelete(p+"u"),
	).Commit()
	if err != nil {
		return wrap("txn (else branch)", err)
	}
	if tx.Succeeded || len(tx.Responses) != 2 || tx.Header.Revision != rt+2 {
		return errorf("txn (else branch): succeeded %v, %d responses at revision %d, expected false, 2 at %d",
			tx.Succeeded, len(tx.Responses), tx.Header.Revision, rt+2)
	}
	gr, dr := tx.Responses[0].GetResponseRange(), tx.Responses[1].GetResponseDeleteRange()
	if gr == nil || len(gr.Kvs) != 1 || string(gr.Kvs[0].Value) != "1" || dr == nil || dr.Deleted != 1 {
		return errorf("txn (else branch): get %v, delete %v, expected u=1 and 1 deleted", gr, dr)
	}
	tx, err = cli.Txn(ctx).If(
		clientv3.Compare(clientv3.Value(p+"t"), "=", "y"),
	).Then(clientv3.OpGet(p + "t")).Commit()
	if err != nil {
		return wrap("read-only txn", err)
	}
	if !tx.Succeeded || tx.Header.Revision != rt+2 {
		return errorf("read-only txn: succeeded %v at revision %d, expected true at %d (no new revision)",
			tx.Succeeded, tx.Header.Revision, rt+2)
	}
	return nil
}
