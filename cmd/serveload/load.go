package main

// The load side: the server started as a child process, the clients
// sending the mix of requests, and the report.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

type loadConfig struct {
	duration time.Duration
	clients  int
	maxBody  int64
	seed     uint64
	// serverBin is the program run as the server with -serve; empty:
	// this one.
	serverBin string
}

// kind is one kind of request of the mix.
type kind struct {
	name   string
	weight int
	// request makes one request to base (http://host:port).
	request func(r *rand.Rand, base string) *http.Request
}

// result is what one request got.
type result struct {
	kind    int
	status  int // 0: a transport error
	latency time.Duration
}

func post(url string, body []byte) *http.Request {
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return req
}

// rowsBody is a predict body of n rows of one value, in the row or the
// columnar format.
func rowsBody(r *rand.Rand, n int, columnar bool) []byte {
	var b bytes.Buffer
	if columnar {
		b.WriteString(`{"inputs": {"x": [`)
	} else {
		b.WriteString(`{"instances": [`)
	}
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "[%.4f]", r.Float64())
	}
	if columnar {
		b.WriteString("]}}")
	} else {
		b.WriteString("]}")
	}
	return b.Bytes()
}

// kinds returns the mix of requests for a server with body limit maxBody.
// The large bodies are made once.
func kinds(maxBody int64) []kind {
	// Rows of "[0.5]," up to the limit: far more rows than the default
	// MaxBatchSize, so 400, after the body is read and parsed.
	var rows bytes.Buffer
	rows.WriteString(`{"instances": [[0.5]`)
	for int64(rows.Len()) < maxBody-16 {
		rows.WriteString(",[0.5]")
	}
	rows.WriteString("]}")
	tooManyRows := rows.Bytes()
	oversized := append(bytes.Repeat([]byte(" "), int(maxBody)), `{"instances": [[1]]}`...)
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zw.Write([]byte(`{"instances": [[1]]}`))
	zw.Write(bytes.Repeat([]byte(" "), int(4*maxBody)))
	zw.Close()
	gzipBomb := bomb.Bytes()
	malformed := []string{`{"instances": [[1.0], [2.0]`, `{"instances": [[1.0]]}}`, `instances=1`, `{"instances": [[01]]}`, `{"instances": [["\x"]]}`, ``}
	wrong := []string{`{"instances": [["a"]]}`, `{"instances": [[1, 2]]}`, `{"instances": [1]}`, `{"inputs": {"y": [[1]]}}`, `{"instances": [[true]]}`}
	unknown := []string{"/v1/models/nope:predict", "/v1/models/linear/versions/7:predict", "/v1/models/linear/labels/canary:predict"}
	return []kind{
		{"valid", 50, func(r *rand.Rand, base string) *http.Request {
			return post(base+"/v1/models/linear:predict", rowsBody(r, 1+r.IntN(64), false))
		}},
		{"columnar", 10, func(r *rand.Rand, base string) *http.Request {
			return post(base+"/v1/models/linear:predict", rowsBody(r, 1+r.IntN(64), true))
		}},
		{"malformed", 10, func(r *rand.Rand, base string) *http.Request {
			return post(base+"/v1/models/linear:predict", []byte(malformed[r.IntN(len(malformed))]))
		}},
		{"wrong", 10, func(r *rand.Rand, base string) *http.Request {
			return post(base+"/v1/models/linear:predict", []byte(wrong[r.IntN(len(wrong))]))
		}},
		{"unknown", 5, func(r *rand.Rand, base string) *http.Request {
			return post(base+unknown[r.IntN(len(unknown))], []byte(`{"instances": [[1]]}`))
		}},
		{"rows", 5, func(_ *rand.Rand, base string) *http.Request {
			return post(base+"/v1/models/linear:predict", tooManyRows)
		}},
		{"oversized", 5, func(_ *rand.Rand, base string) *http.Request {
			return post(base+"/v1/models/linear:predict", oversized)
		}},
		{"gzip-bomb", 5, func(_ *rand.Rand, base string) *http.Request {
			req := post(base+"/v1/models/linear:predict", gzipBomb)
			req.Header.Set("Content-Encoding", "gzip")
			return req
		}},
	}
}

// pick chooses a kind by weight.
func pick(r *rand.Rand, ks []kind) int {
	total := 0
	for _, k := range ks {
		total += k.weight
	}
	n := r.IntN(total)
	for i, k := range ks {
		if n -= k.weight; n < 0 {
			return i
		}
	}
	return len(ks) - 1
}

// server is the server's child process.
type server struct {
	cmd  *exec.Cmd
	base string // http://host:port
	pid  int
}

// startServer starts the server as a child process: cfg.serverBin (or
// this program) with -serve, and waits until it listens.
func startServer(cfg loadConfig) (*server, error) {
	bin := cfg.serverBin
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		bin = self
	}
	child := exec.Command(bin, "-serve", "-max-body", strconv.FormatInt(cfg.maxBody, 10)+"B")
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := child.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		child.Process.Kill()
		child.Wait()
		return nil, fmt.Errorf("the server did not start: %v", err)
	}
	return &server{cmd: child, base: "http://" + strings.TrimSpace(strings.TrimPrefix(line, "listening ")), pid: child.Process.Pid}, nil
}

// stop stops the server gracefully (SIGTERM) and returns how it exited.
func (s *server) stop() error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	return s.cmd.Wait()
}

// runLoad starts the server, sends the mix for cfg.duration, prints the
// report and stops the server.
func runLoad(ctx context.Context, cfg loadConfig) error {
	srv, err := startServer(cfg)
	if err != nil {
		return err
	}
	defer srv.cmd.Process.Kill() // if not stopped gracefully below
	base, pid := srv.base, srv.pid
	rssStart, _ := memStatus(pid, "VmRSS")

	ks := kinds(cfg.maxBody)
	results := make(chan result, 1024)
	var all []result
	collected := make(chan struct{})
	go func() {
		for r := range results {
			all = append(all, r)
		}
		close(collected)
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.clients}, Timeout: 2 * time.Minute}
	lctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range cfg.clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(cfg.seed, uint64(c)))
			for lctx.Err() == nil {
				k := pick(r, ks)
				req := ks[k].request(r, base)
				t0 := time.Now()
				status := 0
				if res, err := client.Do(req); err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					status = res.StatusCode
				}
				results <- result{kind: k, status: status, latency: time.Since(t0)}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(results)
	<-collected
	peak, peakErr := memStatus(pid, "VmHWM")

	waitErr := srv.stop()

	failures := report(os.Stdout, ks, all, elapsed, cfg)
	if peakErr != nil {
		fmt.Printf("server peak RSS: unknown (%v)\n", peakErr)
	} else {
		fmt.Printf("server peak RSS: %.0f MiB (RSS before the load: %.0f MiB)\n", float64(peak)/(1<<20), float64(rssStart)/(1<<20))
	}
	if waitErr != nil {
		fmt.Printf("server exit: %v\n", waitErr)
	}
	if failures > 0 {
		return fmt.Errorf("%d requests got a 5xx or a transport error", failures)
	}
	return nil
}

// report prints the results by kind and in all, and returns the number of
// 5xx answers and transport errors.
func report(w io.Writer, ks []kind, all []result, elapsed time.Duration, cfg loadConfig) int {
	fmt.Fprintf(w, "serveload: %v, %d clients, max body %d bytes: %d requests, %.0f/s\n",
		elapsed.Round(time.Millisecond), cfg.clients, cfg.maxBody, len(all), float64(len(all))/elapsed.Seconds())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\trequests\t2xx\t4xx\t5xx\terrors\tp50\tp99\tmax\tstatuses\t")
	failures := 0
	row := func(name string, rs []result) {
		var classes [6]int
		statuses := map[int]int{}
		lat := make([]time.Duration, len(rs))
		for i, r := range rs {
			classes[r.status/100]++
			statuses[r.status]++
			lat[i] = r.latency
		}
		slices.Sort(lat)
		var codes []string
		for _, s := range slices.Sorted(maps.Keys(statuses)) {
			codes = append(codes, fmt.Sprintf("%d:%d", s, statuses[s]))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%v\t%v\t%v\t%s\t\n", name, len(rs), classes[2], classes[4], classes[5], classes[0],
			pct(lat, 50), pct(lat, 99), pct(lat, 100), strings.Join(codes, " "))
	}
	for k := range ks {
		var rs []result
		for _, r := range all {
			if r.kind == k {
				rs = append(rs, r)
			}
		}
		row(ks[k].name, rs)
	}
	row("all", all)
	tw.Flush()
	for _, r := range all {
		if r.status == 0 || r.status >= 500 {
			failures++
		}
	}
	return failures
}

// pct returns the p-th percentile of sorted latencies, rounded.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	i = min(max(i-1, 0), len(sorted)-1)
	return sorted[i].Round(10 * time.Microsecond)
}

// memStatus reads a memory field (VmRSS, VmHWM) of process pid from
// /proc, in bytes.
func memStatus(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New(field + " not in /proc/<pid>/status")
}
