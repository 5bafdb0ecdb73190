// lanproxy: Toxiproxy's server (github.com/Shopify/toxiproxy/v2, version pinned
// in go.mod) with one added toxic, "latency_us", for scripts/lan_bench.sh.
//
// Why not the stock binary: Toxiproxy's own "latency" toxic takes whole
// milliseconds, and it waits with a Go timer, which the Go runtime serves
// through epoll_wait with millisecond resolution: on Linux any wait below
// 1 ms becomes ~1.09 ms. A LAN round trip is 0.1-1 ms, so the stock toxic
// cannot emulate it. latency_us takes microseconds and waits on a timerfd
// (a kernel high-resolution timer) through the runtime's poller (see
// timer). The wake-up and the hand-off of the chunk to the goroutine that
// writes it still add tens of microseconds on a virtual machine:
// lan_bench.sh measures the round trip and corrects the latency it asks for.
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
	"errors"
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
	"golang.org/x/sys/unix"
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
	timer, err := newTimer()
	if err != nil {
		panic("latency_us: timerfd_create: " + err.Error())
	}
	defer timer.close()
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
			timer.sleep(time.Until(due))
			c.Timestamp = due
			stub.Output <- c
		}
	}
}

// timer waits with microsecond precision without holding a thread: a
// timerfd (a kernel high-resolution timer, no timer slack) read through
// the Go runtime's network poller, so the goroutine parks like one waiting
// for a socket. (time.Sleep and time.After are served by epoll_wait's
// millisecond timeout: ~1.09 ms for any wait below 1 ms. nanosleep(2) with
// a 1 ns timer slack, tried first, is as precise, but blocks a thread and
// its P for every delayed chunk; in one lan_bench.sh run each the two gave
// the same write rate.)
type timer struct {
	fd int      // the timerfd, for timerfd_settime
	f  *os.File // the same fd, registered with the poller
}

func newTimer() (*timer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &timer{fd: fd, f: os.NewFile(uintptr(fd), "latency_us timerfd")}, nil
}

// sleep returns after d (at once if d <= 0).
func (t *timer) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(t.fd, 0, &spec, nil); err != nil {
		time.Sleep(d) // cannot happen with a valid fd; coarse but correct
		return
	}
	var expirations [8]byte
	for {
		if _, err := t.f.Read(expirations[:]); err == nil || !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

func (t *timer) close() { t.f.Close() }

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
