package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

const sessionTTL = 5 // seconds

// blockedFor is how long a waiter must stay blocked to count as blocked.
const blockedFor = time.Second

// checkMutex: two sessions on two clients; B's Lock waits while A holds the
// lock and returns once A unlocks; TryLock fails with ErrLocked while held.
func checkMutex(ctx context.Context, e *env) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clis, err := e.clients(2)
	if err != nil {
		return "", err
	}
	sA, err := concurrency.NewSession(clis[0], concurrency.WithTTL(sessionTTL))
	if err != nil {
		return "", wrap("NewSession A", err)
	}
	defer sA.Close()
	sB, err := concurrency.NewSession(clis[1], concurrency.WithTTL(sessionTTL))
	if err != nil {
		return "", wrap("NewSession B", err)
	}
	defer sB.Close()
	name := e.key("lock")
	mA, mB := concurrency.NewMutex(sA, name), concurrency.NewMutex(sB, name)
	if err := mA.Lock(ctx); err != nil {
		return "", wrap("A Lock", err)
	}
	g, err := clis[1].Get(ctx, mA.Key())
	if err != nil {
		return "", wrap("get A's lock key", err)
	}
	if len(g.Kvs) != 1 || clientv3.LeaseID(g.Kvs[0].Lease) != sA.Lease() {
		return "", errorf("A's lock key %q: %v, expected one key on lease %x", mA.Key(), g.Kvs, sA.Lease())
	}
	if err := mB.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		return "", errorf("B TryLock while A holds the lock: %v, expected ErrLocked", err)
	}
	bLocked := make(chan error, 1)
	go func() { bLocked <- mB.Lock(ctx) }()
	select {
	case err := <-bLocked:
		return "", errorf("B Lock returned (%v) while A holds the lock", err)
	case <-time.After(blockedFor):
	}
	if err := mA.Unlock(ctx); err != nil {
		return "", wrap("A Unlock", err)
	}
	unlocked := time.Now()
	err, _, werr := recvWithin(bLocked, 10*time.Second, "B Lock after A's Unlock")
	if werr != nil {
		return "", werr
	}
	if err != nil {
		return "", wrap("B Lock", err)
	}
	waited := time.Since(unlocked)
	if err := concurrency.NewMutex(sA, name).TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		return "", errorf("A TryLock while B holds the lock: %v, expected ErrLocked", err)
	}
	if err := mB.Unlock(ctx); err != nil {
		return "", wrap("B Unlock", err)
	}
	mA2 := concurrency.NewMutex(sA, name)
	if err := mA2.TryLock(ctx); err != nil {
		return "", wrap("A TryLock of the free lock", err)
	}
	if err := mA2.Unlock(ctx); err != nil {
		return "", wrap("A Unlock", err)
	}
	return fmt.Sprintf("B acquired %.2f s after A unlocked", waited.Seconds()), nil
}

// checkMutexExpiry: a child process takes the lock and is SIGKILLed, so its
// session's keep-alives stop without a revoke; a waiter gets the lock once
// the lease expires: not before 2/3 of the TTL (keep-alives renew the lease
// every TTL/3, so the last one may be that old) and within TTL + 8 s.
func checkMutexExpiry(ctx context.Context, e *env) (string, error) {
	cli, err := e.client()
	if err != nil {
		return "", err
	}
	name := e.key("lock")
	holder, key, lease, err := startLockHolder(ctx, e, name)
	if err != nil {
		return "", err
	}
	defer holder.Wait()
	defer holder.Process.Kill()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(sessionTTL))
	if err != nil {
		return "", wrap("NewSession", err)
	}
	defer s.Close()
	if err := concurrency.NewMutex(s, name).TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		return "", errorf("TryLock while the child holds the lock: %v, expected ErrLocked", err)
	}
	if err := holder.Process.Kill(); err != nil {
		return "", wrap("kill the holder", err)
	}
	killed := time.Now()
	holder.Wait()
	lockCtx, cancel := context.WithTimeout(ctx, (sessionTTL+8)*time.Second)
	defer cancel()
	m := concurrency.NewMutex(s, name)
	if err := m.Lock(lockCtx); err != nil {
		return "", errorf("Lock after the holder was killed: %v (%.1f s after the kill)",
			err, time.Since(killed).Seconds())
	}
	waited := time.Since(killed)
	if min := sessionTTL * time.Second * 2 / 3; waited < min {
		return "", errorf("acquired %.1f s after the holder was killed, before its lease (TTL %d s) could expire",
			waited.Seconds(), sessionTTL)
	}
	g, err := cli.Get(ctx, key)
	if err != nil {
		return "", wrap("get the holder's key", err)
	}
	if len(g.Kvs) != 0 {
		return "", errorf("the holder's key %q still exists: %v", key, g.Kvs)
	}
	ttl, err := cli.TimeToLive(ctx, lease)
	if err != nil {
		return "", wrap("TimeToLive of the holder's lease", err)
	}
	if ttl.TTL != -1 {
		return "", errorf("the holder's lease %x: TTL %d, expected -1 (expired)", lease, ttl.TTL)
	}
	if err := m.Unlock(ctx); err != nil {
		return "", wrap("Unlock", err)
	}
	return fmt.Sprintf("acquired %.1f s after the holder was killed, TTL %d s", waited.Seconds(), sessionTTL), nil
}

// startLockHolder runs this program with --hold-lock and waits for its
// "LOCKED key lease" line.
func startLockHolder(ctx context.Context, e *env, name string) (*exec.Cmd, string, clientv3.LeaseID, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", 0, wrap("os.Executable", err)
	}
	cmd := exec.Command(exe, "--endpoints="+strings.Join(e.endpoints, ","),
		"--hold-lock="+name, "--lock-ttl="+strconv.Itoa(sessionTTL))
	var stderr bytes.Buffer // read only after Wait
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", 0, wrap("start the lock holder", err)
	}
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- line
	}()
	fail := func(err error) (*exec.Cmd, string, clientv3.LeaseID, error) {
		cmd.Process.Kill()
		cmd.Wait()
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w; the holder said: %s", err, msg)
		}
		return nil, "", 0, err
	}
	line, _, err := recvWithin(lines, 20*time.Second, "the lock holder's LOCKED line")
	if err != nil {
		return fail(err)
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "LOCKED" {
		return fail(errorf("the lock holder printed %q, expected LOCKED key lease", line))
	}
	id, err := strconv.ParseInt(f[2], 16, 64)
	if err != nil {
		return fail(wrap("the lock holder's lease", err))
	}
	return cmd, f[1], clientv3.LeaseID(id), nil
}

// checkElection: A campaigns and wins, B's Campaign waits; an observer and
// Leader() see A's value and then what A proclaims; A resigns and B wins.
func checkElection(ctx context.Context, e *env) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clis, err := e.clients(3)
	if err != nil {
		return "", err
	}
	var ss []*concurrency.Session
	for i, c := range clis {
		s, err := concurrency.NewSession(c, concurrency.WithTTL(sessionTTL))
		if err != nil {
			return "", wrap(fmt.Sprintf("NewSession %d", i), err)
		}
		defer s.Close()
		ss = append(ss, s)
	}
	name := e.key("election")
	eA, eB, eO := concurrency.NewElection(ss[0], name), concurrency.NewElection(ss[1], name),
		concurrency.NewElection(ss[2], name)
	if _, err := eO.Leader(ctx); !errors.Is(err, concurrency.ErrElectionNoLeader) {
		return "", errorf("Leader before any campaign: %v, expected ErrElectionNoLeader", err)
	}
	if err := eA.Campaign(ctx, "A"); err != nil {
		return "", wrap("A Campaign", err)
	}
	bWon := make(chan error, 1)
	go func() { bWon <- eB.Campaign(ctx, "B") }()
	select {
	case err := <-bWon:
		return "", errorf("B Campaign returned (%v) while A leads", err)
	case <-time.After(blockedFor):
	}
	obs := eO.Observe(ctx)
	if err := expectObserved(obs, "A"); err != nil {
		return "", err
	}
	if err := eA.Proclaim(ctx, "A2"); err != nil {
		return "", wrap("A Proclaim", err)
	}
	if err := expectObserved(obs, "A2"); err != nil {
		return "", err
	}
	l, err := eB.Leader(ctx)
	if err != nil {
		return "", wrap("Leader", err)
	}
	if len(l.Kvs) != 1 || string(l.Kvs[0].Value) != "A2" || string(l.Kvs[0].Key) != eA.Key() {
		return "", errorf("Leader: %v, expected %s=A2", l.Kvs, eA.Key())
	}
	select {
	case err := <-bWon:
		return "", errorf("B Campaign returned (%v) while A leads", err)
	default:
	}
	if err := eA.Resign(ctx); err != nil {
		return "", wrap("A Resign", err)
	}
	err, _, werr := recvWithin(bWon, 10*time.Second, "B Campaign after A resigned")
	if werr != nil {
		return "", werr
	}
	if err != nil {
		return "", wrap("B Campaign", err)
	}
	if err := expectObserved(obs, "B"); err != nil {
		return "", err
	}
	l, err = eO.Leader(ctx)
	if err != nil || len(l.Kvs) != 1 || string(l.Kvs[0].Value) != "B" {
		return "", errorf("Leader after A resigned: %v %v, expected B", l, err)
	}
	if err := eA.Proclaim(ctx, "not leader"); !errors.Is(err, concurrency.ErrElectionNotLeader) {
		return "", errorf("Proclaim by A after resigning: %v, expected ErrElectionNotLeader", err)
	}
	if err := eB.Resign(ctx); err != nil {
		return "", wrap("B Resign", err)
	}
	return "", nil
}

// expectObserved reads Observe's channel until it shows want (values in
// between are allowed: Observe reports each change of the leader key).
func expectObserved(obs <-chan clientv3.GetResponse, want string) error {
	deadline := time.Now().Add(10 * time.Second)
	var seen []string
	for {
		r, ok, err := recvWithin(obs, time.Until(deadline), "Observe waiting for "+want)
		if err != nil {
			return fmt.Errorf("%w (saw %v)", err, seen)
		}
		if !ok {
			return errorf("Observe's channel closed waiting for %s (saw %v)", want, seen)
		}
		if len(r.Kvs) == 0 {
			return errorf("Observe sent a response without kvs waiting for %s", want)
		}
		v := string(r.Kvs[0].Value)
		if v == want {
			return nil
		}
		seen = append(seen, v)
	}
}

// checkSTM: 4 goroutines x 20 transfers between two keys through
// concurrency.NewSTM, each goroutine at its own isolation level (all of
// which keep a read-modify-write atomic) and through its own member; the
// final balances are exactly what the transfers add up to.
func checkSTM(ctx context.Context, e *env) (string, error) {
	const goroutines, transfers, start = 4, 20, 1000
	// A client per member: a serializable STM reads at the revision of its
	// first read, which only the member that served it is sure to have.
	var clis []*clientv3.Client
	for _, ep := range e.endpoints {
		c, err := e.clientOf([]string{ep})
		if err != nil {
			return "", err
		}
		clis = append(clis, c)
	}
	ka, kb := e.key("a"), e.key("b")
	for _, k := range []string{ka, kb} {
		if _, err := clis[0].Put(ctx, k, strconv.Itoa(start)); err != nil {
			return "", wrap("put "+k, err)
		}
	}
	levels := []concurrency.Isolation{concurrency.SerializableSnapshot, concurrency.Serializable,
		concurrency.RepeatableReads, concurrency.SerializableSnapshot}
	rng := rand.New(rand.NewSource(1))
	amounts := make([][]int, goroutines)
	net := 0 // moved from a to b in all
	for g := range amounts {
		for i := 0; i < transfers; i++ {
			amt := rng.Intn(21) - 10
			amounts[g] = append(amounts[g], amt)
			net += amt
		}
	}
	var runs atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			cli := clis[g%len(clis)]
			for _, amt := range amounts[g] {
				_, err := concurrency.NewSTM(cli, func(s concurrency.STM) error {
					runs.Add(1)
					a, err1 := balance(s.Get(ka))
					b, err2 := balance(s.Get(kb))
					if err1 != nil || err2 != nil {
						return errorf("balances %q %q are not numbers", s.Get(ka), s.Get(kb))
					}
					s.Put(ka, strconv.Itoa(a-amt))
					s.Put(kb, strconv.Itoa(b+amt))
					return nil
				}, concurrency.WithIsolation(levels[g]), concurrency.WithAbortContext(ctx))
				if err != nil {
					errs <- wrap(fmt.Sprintf("goroutine %d NewSTM", g), err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return "", err
	}
	g, err := clis[0].Get(ctx, e.key(""), clientv3.WithPrefix())
	if err != nil {
		return "", wrap("get the balances", err)
	}
	if len(g.Kvs) != 2 {
		return "", errorf("balances: %v, expected a and b", g.Kvs)
	}
	a, _ := strconv.Atoi(string(g.Kvs[0].Value))
	b, _ := strconv.Atoi(string(g.Kvs[1].Value))
	if a != start-net || b != start+net {
		return "", errorf("balances a=%d b=%d (total %d), expected a=%d b=%d (total %d)",
			a, b, a+b, start-net, start+net, 2*start)
	}
	n := goroutines * transfers
	return fmt.Sprintf("%d transfers, %d retries", n, runs.Load()-int64(n)), nil
}

// balance parses a balance read in an STM. An absent key reads as 0: a
// serializable read on a lagging member may not see the first puts yet; the
// STM's commit then fails its compare on the key's revision and retries.
func balance(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	return strconv.Atoi(v)
}
