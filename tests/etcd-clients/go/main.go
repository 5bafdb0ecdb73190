// etcd-client-check runs etcd's own Go client (clientv3 and its concurrency
// package) against an etcd v3 API endpoint: real etcd or raftkv. Each named
// check prints "PASS name" or "FAIL name: why"; the exit status is 1 if any
// check failed, 2 on a usage error.
//
//	etcd-client-check --endpoints=127.0.0.1:2379,... [--checks=all|kv,watch,...]
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

type check struct {
	name string
	run  func(ctx context.Context, e *env) (string, error)
}

// The checks, in the order "all" runs them.
var checks = []check{
	{"kv", checkKV},
	{"mutex", checkMutex},
	{"mutex-expiry", checkMutexExpiry},
	{"election", checkElection},
	{"stm", checkSTM},
	{"watch", checkWatch},
	{"lease", checkLease},
}

// env is what every check gets: the endpoints and a key prefix of its own.
// The clients a check opens are closed after it, once its keys are deleted.
type env struct {
	endpoints []string
	prefix    string // unique to this run and check
	verbose   bool
	opened    []*clientv3.Client
}

func (e *env) client() (*clientv3.Client, error) { return e.clientOf(e.endpoints) }

// clientOf is a client of these endpoints only.
func (e *env) clientOf(endpoints []string) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	}
	if e.verbose {
		cfg.Logger = nil // clientv3's default logger, on stderr
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("clientv3.New(%v): %w", endpoints, err)
	}
	e.opened = append(e.opened, cli)
	return cli, nil
}

// clients opens n clients of all the endpoints.
func (e *env) clients(n int) ([]*clientv3.Client, error) {
	var clis []*clientv3.Client
	for i := 0; i < n; i++ {
		c, err := e.client()
		if err != nil {
			return nil, err
		}
		clis = append(clis, c)
	}
	return clis, nil
}

// closeAll deletes the check's keys (best effort, 5 s at most) and closes
// its clients.
func (e *env) closeAll() {
	if len(e.opened) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		e.opened[0].Delete(ctx, e.prefix, clientv3.WithPrefix())
		cancel()
	}
	for _, c := range e.opened {
		c.Close()
	}
	e.opened = nil
}

func (e *env) key(s string) string { return e.prefix + s }

func main() {
	endpoints := flag.String("endpoints", "127.0.0.1:2379", "comma-separated client endpoints")
	which := flag.String("checks", "all", "\"all\" or a comma-separated list of: "+checkNames())
	timeout := flag.Duration("timeout", 60*time.Second, "time limit of each check")
	prefix := flag.String("prefix", "", "key prefix (default: unique to this run)")
	verbose := flag.Bool("verbose", false, "clientv3's own log on stderr")
	holdLock := flag.String("hold-lock", "", "") // internal: mutex-expiry's holder
	lockTTL := flag.Int("lock-ttl", 5, "")       // internal: its session TTL
	flag.Parse()

	e := &env{endpoints: strings.Split(*endpoints, ","), verbose: *verbose}
	if *holdLock != "" {
		os.Exit(holdLockMode(e, *holdLock, *lockTTL))
	}
	selected, err := selectChecks(*which)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd-client-check:", err)
		os.Exit(2)
	}
	base := *prefix
	if base == "" {
		base = fmt.Sprintf("etcd-client-check/%d-%d/", time.Now().UnixNano(), os.Getpid())
	}
	passed, failed := 0, 0
	for _, c := range selected {
		ce := *e
		ce.prefix = base + c.name + "/"
		start := time.Now()
		detail, err := runOne(c, &ce, *timeout)
		took := time.Since(start).Seconds()
		if err != nil {
			failed++
			fmt.Printf("FAIL %s: %s (%.1f s)\n", c.name, oneLine(err.Error()), took)
			continue
		}
		passed++
		if detail != "" {
			detail = "; " + detail
		}
		fmt.Printf("PASS %s (%.1f s%s)\n", c.name, took, detail)
	}
	fmt.Printf("etcd-client-check: %d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

func checkNames() string {
	var names []string
	for _, c := range checks {
		names = append(names, c.name)
	}
	return strings.Join(names, ",")
}

func selectChecks(which string) ([]check, error) {
	if which == "all" {
		return checks, nil
	}
	var out []check
	for _, name := range strings.Split(which, ",") {
		found := false
		for _, c := range checks {
			if c.name == name {
				out = append(out, c)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown check %q (known: %s)", name, checkNames())
		}
	}
	return out, nil
}

// runOne runs a check under a context that ends after timeout; a check that
// does not return 10 s after that is reported as hung and left behind.
func runOne(c check, e *env, timeout time.Duration) (detail string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	type result struct {
		detail string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		func() {
			defer e.closeAll()
			defer func() {
				if p := recover(); p != nil {
					r = result{"", fmt.Errorf("panic: %v", p)}
				}
			}()
			r.detail, r.err = c.run(ctx, e)
		}()
		if r.err != nil && ctx.Err() != nil {
			r.err = fmt.Errorf("%w (check timed out after %v)", r.err, timeout)
		}
		done <- r
	}()
	select {
	case r := <-done:
		return r.detail, r.err
	case <-time.After(timeout + 10*time.Second):
		return "", fmt.Errorf("hung: no result %v after its %v time limit", 10*time.Second, timeout)
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// holdLockMode takes the lock NAME in a session of TTL seconds, prints
// "LOCKED key lease-id-hex" and then holds it until killed (60 s at most;
// it then exits without unlocking, as a crashed client would).
func holdLockMode(e *env, name string, ttl int) int {
	cli, err := e.client()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hold-lock:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl))
	if err != nil {
		fmt.Fprintln(os.Stderr, "hold-lock: NewSession:", err)
		return 1
	}
	m := concurrency.NewMutex(s, name)
	if err := m.Lock(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "hold-lock: Lock:", err)
		return 1
	}
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "LOCKED %s %x\n", m.Key(), int64(s.Lease()))
	w.Flush()
	time.Sleep(60 * time.Second)
	return 0
}

// Helpers that turn a mismatch into an error.

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// recvWithin waits for one value from ch; ok is false if ch was closed, and
// err is set if nothing came within d.
func recvWithin[T any](ch <-chan T, d time.Duration, what string) (v T, ok bool, err error) {
	select {
	case v, ok = <-ch:
		return v, ok, nil
	case <-time.After(d):
		return v, false, errorf("%s: nothing within %v", what, d)
	}
}

// do sends the puts and deletes one request at a time, each a revision of
// its own.
func do(ctx context.Context, cli *clientv3.Client, ops ...clientv3.Op) error {
	for _, op := range ops {
		if _, err := cli.Do(ctx, op); err != nil {
			what := "put"
			if op.IsDelete() {
				what = "delete"
			}
			return fmt.Errorf("%s %q: %w", what, op.KeyBytes(), err)
		}
	}
	return nil
}
