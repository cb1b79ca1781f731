package main

// The attack modes: connections that hold the server's resources (big
// headers that never end, uploads that trickle) beside clients that send
// valid requests, with the valid requests' answers and latencies and the
// server's memory.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// attackConfig configures the connections of an attack mode.
type attackConfig struct {
	mode  string // "headers" or "slow"
	conns int    // the attacking connections, held at once
	// headers: each connection sends headers header lines of headerSize
	// bytes and never ends them.
	headers    int
	headerSize int64
	// pause is how long an attacking connection waits, once the server
	// answered or closed it, before it connects again.
	pause time.Duration
}

// attackStats counts what the attacking connections saw.
type attackStats struct {
	mu       sync.Mutex
	attempts int
	outcomes map[string]int // the server's status, "closed", "reset", "dial error"
}

func (s *attackStats) add(outcome string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	s.outcomes[outcome]++
}

// runAttack starts the server, opens ac.conns attacking connections,
// waits until each has sent its headers, then sends valid predict
// requests from cfg.clients clients (each on a new connection) for
// cfg.duration while sampling the server's RSS, and reports.
func runAttack(ctx context.Context, cfg loadConfig, ac attackConfig) error {
	srv, err := startServer(cfg)
	if err != nil {
		return err
	}
	defer srv.cmd.Process.Kill() // if not stopped gracefully below
	addr := strings.TrimPrefix(srv.base, "http://")
	rssStart, _ := memStatus(srv.pid, "VmRSS")

	actx, stopAttack := context.WithCancel(ctx)
	defer stopAttack()
	stats := &attackStats{outcomes: map[string]int{}}
	var ready, attackers sync.WaitGroup
	ready.Add(ac.conns)
	pad := strings.Repeat("a", int(ac.headerSize))
	for range ac.conns {
		attackers.Go(func() {
			var once sync.Once
			signal := func() { once.Do(ready.Done) }
			defer signal()
			for actx.Err() == nil {
				var outcome string
				if ac.mode == "headers" {
					outcome = holdHeaders(actx, addr, ac, pad, signal)
				} else {
					outcome = trickle(actx, addr, cfg.maxBody, signal)
				}
				if actx.Err() != nil {
					return
				}
				stats.add(outcome)
				select {
				case <-actx.Done():
				case <-time.After(ac.pause):
				}
			}
		})
	}
	readyc := make(chan struct{})
	go func() { ready.Wait(); close(readyc) }()
	rampStart := time.Now()
	select {
	case <-readyc:
	case <-time.After(cfg.duration):
		fmt.Println("serveload: not every attacking connection got its headers out within -duration; going on")
	case <-ctx.Done():
		return ctx.Err()
	}
	ramp := time.Since(rampStart)

	var maxRSS int64
	sampled := make(chan struct{})
	sctx, stopSampling := context.WithCancel(ctx)
	go func() {
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, err := memStatus(srv.pid, "VmRSS"); err == nil {
				maxRSS = max(maxRSS, rss)
			}
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()

	all, elapsed := sendValid(ctx, cfg, srv.base)
	stopSampling()
	<-sampled
	peak, peakErr := memStatus(srv.pid, "VmHWM")
	stopAttack()
	attackers.Wait()
	waitErr := srv.stop()

	switch ac.mode {
	case "headers":
		fmt.Printf("serveload -mode headers: %d connections, each sending %d headers of %d bytes and holding (again %v after the server answers or closes it); ready in %v\n",
			ac.conns, ac.headers, ac.headerSize, ac.pause, ramp.Round(time.Millisecond))
	default:
		fmt.Printf("serveload -mode slow: %d uploads announcing %d bytes and sending one a second (again %v after the server answers or closes them)\n",
			ac.conns, cfg.maxBody, ac.pause)
	}
	stats.mu.Lock()
	var outcomes []string
	for _, o := range slices.Sorted(maps.Keys(stats.outcomes)) {
		outcomes = append(outcomes, fmt.Sprintf("%s:%d", o, stats.outcomes[o]))
	}
	fmt.Printf("attacking connections ended by the server: %d (%s)\n", stats.attempts, strings.Join(outcomes, " "))
	stats.mu.Unlock()
	failures := report(os.Stdout, []kind{{name: "valid"}}, all, elapsed, cfg)
	if peakErr != nil {
		fmt.Printf("server peak RSS: unknown (%v)\n", peakErr)
	} else {
		fmt.Printf("server peak RSS (VmHWM): %.0f MiB; highest VmRSS sampled during the valid requests: %.0f MiB; RSS before the attack: %.0f MiB\n",
			float64(peak)/(1<<20), float64(maxRSS)/(1<<20), float64(rssStart)/(1<<20))
	}
	if waitErr != nil {
		fmt.Printf("server exit: %v\n", waitErr)
	}
	if failures > 0 {
		return fmt.Errorf("%d valid requests got a 5xx or a transport error", failures)
	}
	return nil
}

// sendValid sends valid predict requests of 1 to 64 rows from cfg.clients
// clients, each request on a new connection, for cfg.duration.
func sendValid(ctx context.Context, cfg loadConfig, base string) ([]result, time.Duration) {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Minute}
	lctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	var mu sync.Mutex
	var all []result
	start := time.Now()
	var wg sync.WaitGroup
	for c := range cfg.clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(cfg.seed, uint64(c)))
			for lctx.Err() == nil {
				req := post(base+"/v1/models/linear:predict", rowsBody(r, 1+r.IntN(64), false))
				t0 := time.Now()
				status := 0
				if res, err := client.Do(req); err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					status = res.StatusCode
				}
				mu.Lock()
				all = append(all, result{status: status, latency: time.Since(t0)})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return all, time.Since(start)
}

// dialUntil connects to addr with a connection that ctx's end closes, so
// that an attacker blocked on it returns when the run is over; done closes
// it and lets go of ctx.
func dialUntil(ctx context.Context, addr string) (c net.Conn, done func(), err error) {
	var d net.Dialer
	if c, err = d.DialContext(ctx, "tcp", addr); err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	return c, func() { stop(); c.Close() }, nil
}

// holdHeaders connects, sends a request line and ac.headers header lines
// of ac.headerSize bytes, never the blank line that ends them, and waits
// for the server to answer or close; it returns what the server did.
func holdHeaders(ctx context.Context, addr string, ac attackConfig, pad string, sent func()) string {
	c, done, err := dialUntil(ctx, addr)
	if err != nil {
		sent()
		return "dial error"
	}
	defer done()
	w := bufio.NewWriterSize(c, 64<<10)
	fmt.Fprintf(w, "POST /v1/models/linear:predict HTTP/1.1\r\nHost: serveload\r\nContent-Type: application/json\r\n")
	for i := range ac.headers {
		fmt.Fprintf(w, "X-Pad-%d: %s\r\n", i, pad)
	}
	w.Flush() // an error: the server answered or closed already
	sent()
	return answer(c)
}

// trickle connects, announces a body of size bytes and sends one byte a
// second until the server answers or closes; it returns what the server
// did.
func trickle(ctx context.Context, addr string, size int64, sent func()) string {
	c, done, err := dialUntil(ctx, addr)
	if err != nil {
		sent()
		return "dial error"
	}
	defer done()
	fmt.Fprintf(c, "POST /v1/models/linear:predict HTTP/1.1\r\nHost: serveload\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n ", size)
	sent()
	answered := make(chan string, 1)
	go func() { answered <- answer(c) }()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case a := <-answered:
			return a
		case <-t.C:
			c.Write([]byte(" ")) // an error: the answer follows
		}
	}
}

// answer reads the server's answer on c: its status code, or "closed" or
// "reset" when the connection ended without one, or "unreadable".
func answer(c net.Conn) string {
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	switch {
	case err == nil:
		res.Body.Close()
		return fmt.Sprint(res.StatusCode)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed):
		return "closed"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	}
	return "unreadable"
}
