// Command serveload runs a bounded loopback load against a serving.Server
// and prints what it saw: requests, answers by status, latency
// percentiles, and the server process's peak resident memory.
//
//	go run ./cmd/serveload                          # 20 s, 16 clients
//	go run ./cmd/serveload -duration 60s -clients 32 -max-body 16MiB
//
// It starts the server as a child process (itself, with -serve): the
// linear example's model (examples/linear/linreg), exported untrained to
// a temporary directory and served as model "linear" with the
// serving.Config defaults, but for -max-body. The clients then send, for
// -duration, a mix of requests (the weights are in kinds):
//
//	valid       predict of 1 to 64 rows                      200
//	columnar    predict in the columnar format, 1 to 64 rows  200
//	malformed   truncated or garbled JSON                     400
//	wrong       a string where a number belongs, bad shapes   400
//	unknown     an unknown model, version or label            404 or 400
//	rows        a body near the limit with too many rows       400 (decoded in full first)
//	oversized   a body over the limit, sent whole             413
//	gzip-bomb   a small gzip body far over the limit           413
//
// and it reports, per kind and in all, the requests sent, the answers by
// status class and the transport errors (a 5xx or an error is a failure
// of the server), the latency percentiles p50, p99 and max, and the
// server's peak RSS (VmHWM from /proc: Linux only) with its RSS before the
// load. The server is then shut down gracefully (SIGTERM).
//
// Two more modes measure valid requests beside connections that hold the
// server's resources, reporting the valid requests' answers and latency
// percentiles (each on a new connection, from -clients clients for
// -duration), what ended the attacking connections, and the server's peak
// RSS and the highest RSS sampled (every 50 ms) while the valid requests
// ran:
//
//	-mode headers   -conns connections each send -headers header lines of
//	                -header-size bytes and never end them, holding until
//	                the server answers or closes (then again after -pause)
//	-mode slow      -conns uploads announce a body of -max-body bytes and
//	                send one byte a second
//
//	go run ./cmd/serveload -mode headers -conns 1000 -pause 10s
//	go run ./cmd/serveload -mode slow -conns 4
//
// -server runs another build of serveload as the server (it is started
// with -serve -max-body), to compare two versions of the server.
//
// serveload is a measuring tool, not a test: it passes nothing and fails
// nothing, but exits 1 when any request got a 5xx or a transport error.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	var (
		serve    = flag.Bool("serve", false, "run the server (the child process) instead of the load")
		listen   = flag.String("listen", "127.0.0.1:0", "with -serve: the address to listen on")
		duration = flag.Duration("duration", 20*time.Second, "how long the clients send requests")
		clients  = flag.Int("clients", 16, "concurrent clients")
		maxBody  = flag.String("max-body", "16MiB", "the server's MaxBodyBytes (B, KiB, MiB)")
		seed     = flag.Uint64("seed", 1, "seed of the request mix")
		mode     = flag.String("mode", "mix", "mix: the request mix; headers: valid requests beside connections that hold big headers; slow: valid requests beside trickling uploads")
		conns    = flag.Int("conns", 1000, "with -mode headers or slow: the attacking connections")
		headers  = flag.Int("headers", 15, "with -mode headers: the header lines each attacking connection sends")
		hdrSize  = flag.String("header-size", "64KiB", "with -mode headers: the bytes of each header line")
		pause    = flag.Duration("pause", time.Second, "with -mode headers or slow: how long an attacking connection waits to connect again once the server answered or closed it")
		server   = flag.String("server", "", "the program run as the server with -serve -max-body (another build of serveload); empty: this one")
	)
	flag.Parse()
	limit, err := parseBytes(*maxBody)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serveload:", err)
		os.Exit(2)
	}
	headerSize, err := parseBytes(*hdrSize)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serveload: -header-size:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := loadConfig{duration: *duration, clients: *clients, maxBody: limit, seed: *seed, serverBin: *server}
	switch {
	case *serve:
		err = runServer(ctx, *listen, limit)
	case *mode == "mix":
		err = runLoad(ctx, cfg)
	case *mode == "headers" || *mode == "slow":
		err = runAttack(ctx, cfg, attackConfig{mode: *mode, conns: *conns, headers: *headers, headerSize: headerSize, pause: *pause})
	default:
		fmt.Fprintf(os.Stderr, "serveload: -mode %q: want mix, headers or slow\n", *mode)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "serveload:", err)
		os.Exit(1)
	}
}

// parseBytes reads a size such as 512, 64KiB or 16MiB.
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = rest, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number of B, KiB, MiB or GiB", s)
	}
	return n * mult, nil
}
