// lanproxy: Toxiproxy's server (github.com/Shopify/toxiproxy/v2, version pinned
// in go.mod) with one added toxic, "latency_us", for scripts/lan_bench.sh.
//
// Why not the stock binary: Toxiproxy's own "latency" toxic takes whole
// milliseconds, and it waits with a Go timer, which the Go runtime serves
// through epoll_wait with millisecond resolution: on Linux any wait below
// 1 ms becomes ~1.09 ms. A LAN round trip is 0.1-1 ms, so the stock toxic
// cannot emulate it. latency_us takes microseconds and waits with
// nanosleep(2) after setting the thread's timer slack to 1 ns, which the
// kernel serves with a high-resolution timer (a few tens of microseconds of
// overshoot on a virtual machine; lan_bench.sh measures the round trip and
// corrects the latency it asks for).
//
// Everything else -- the proxies, the REST API on -host:-port, the stock
// toxics -- is Toxiproxy's own code, used as documented in its
// CREATING_TOXICS.md ("compile your own binary ... registering your toxic").
//
//	lanproxy -host 127.0.0.1 -port 8474
//	curl -X POST 127.0.0.1:8474/proxies -d '{"name":"m1","listen":"10.0.0.1:7001","upstream":"127.0.0.1:7002"}'
//	curl -X POST 127.0.0.1:8474/proxies/m1/toxics \
//	     -d '{"type":"latency_us","stream":"upstream","attributes":{"latency":250,"jitter":50}}'
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

// LatencyUsToxic delays every chunk of the stream by Latency +/- Jitter
// microseconds (uniform), counted from the moment the proxy read it. Chunks
// keep their order: one that is due earlier than its predecessor (jitter)
// leaves right after it, as on a real link.
type LatencyUsToxic struct {
	Latency int64 `json:"latency"` // microseconds
	Jitter  int64 `json:"jitter"`  // microseconds, +/-
}

// GetBufferSize lets chunks queue while earlier ones wait (as the stock
// latency toxic does), so the delay does not limit the bandwidth.
func (t *LatencyUsToxic) GetBufferSize() int { return 1024 }

func (t *LatencyUsToxic) delay() time.Duration {
	d := t.Latency
	if t.Jitter > 0 {
		d += rand.Int63n(2*t.Jitter+1) - t.Jitter // #nosec G404 -- emulation, not security
	}
	if d < 0 {
		d = 0
	}
	return time.Duration(d) * time.Microsecond
}

// Pipe passes each chunk on once it is due.
func (t *LatencyUsToxic) Pipe(stub *toxics.ToxicStub) {
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			due := c.Timestamp.Add(t.delay())
			sleepUntil(due)
			c.Timestamp = due
			stub.Output <- c
		}
	}
}

const prSetTimerslack = 29 // PR_SET_TIMERSLACK, linux/prctl.h

// sleepUntil returns at the given time, with sub-millisecond precision: the
// part beyond 2 ms is left to a Go timer (no thread blocked), the rest to
// nanosleep(2) with a 1 ns timer slack on this thread. It does not correct
// for the time the kernel takes to wake the thread, nor for the hand-off to
// the goroutine that writes the chunk: scripts/lan_bench.sh measures the
// round trip that results and lowers the latency it asks for to match.
func sleepUntil(due time.Time) {
	if d := time.Until(due) - 2*time.Millisecond; d > 0 {
		time.Sleep(d)
	}
	d := time.Until(due)
	if d <= 0 {
		return
	}
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1, 0)
	ts := syscall.NsecToTimespec(int64(d))
	for {
		// EINTR (Go's preemption signal): sleep the remainder in ts.
		if err := syscall.Nanosleep(&ts, &ts); err != syscall.EINTR {
			return
		}
	}
}

// toxiproxyVersion is the Toxiproxy module version this binary was built
// with (toxiproxy.Version is only set by Toxiproxy's own release build).
func toxiproxyVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/Shopify/toxiproxy/v2" {
				return m.Version
			}
		}
	}
	return toxiproxy.Version
}

func main() {
	host := flag.String("host", "localhost", "host of the REST API")
	port := flag.String("port", "8474", "port of the REST API")
	seed := flag.Int64("seed", time.Now().UnixNano(), "seed of the jitter")
	version := flag.Bool("version", false, "print the Toxiproxy version and exit")
	flag.Parse()
	if *version {
		fmt.Printf("lanproxy: toxiproxy %s + latency_us\n", toxiproxyVersion())
		return
	}
	rand.Seed(*seed) //nolint:staticcheck // one process-wide source is fine here
	toxics.Register("latency_us", new(LatencyUsToxic))

	logger := zerolog.New(os.Stdout).With().Timestamp().Logger().Level(zerolog.WarnLevel)
	if lvl, err := zerolog.ParseLevel(os.Getenv("LOG_LEVEL")); err == nil && lvl != zerolog.NoLevel {
		logger = logger.Level(lvl)
	}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), logger)
	go func() {
		if err := server.Listen(net.JoinHostPort(*host, *port)); err != nil {
			logger.Err(err).Msg("API server finished with an error")
			os.Exit(1)
		}
	}()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	<-signals
	if err := server.Shutdown(); err != nil {
		logger.Err(err).Msg("shutdown")
	}
}
