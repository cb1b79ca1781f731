package serving

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sendThenRead writes a whole POST request with a body of size bytes
// (its Content-Length given, or chunked) on a new connection to addr, and
// only then reads the answer, as clients like Python's urllib do. It
// returns the answer's status and error message, then those of a second
// request on the same connection ("" when the connection was closed).
func sendThenRead(t *testing.T, addr string, size int, chunked bool, header string) (first, second string) {
	t.Helper()
	c := dial(t, addr)
	body := `{"instances": [[1]]}` + strings.Repeat(" ", size-len(`{"instances": [[1]]}`))
	written := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(c)
		fmt.Fprintf(w, "POST /v1/models/m:predict HTTP/1.1\r\nHost: test\r\n%s", header)
		if chunked {
			fmt.Fprintf(w, "Transfer-Encoding: chunked\r\n\r\n")
			for rest := body; rest != ""; {
				n := min(len(rest), 32<<10)
				fmt.Fprintf(w, "%x\r\n%s\r\n", n, rest[:n])
				rest = rest[n:]
			}
			fmt.Fprintf(w, "0\r\n\r\n")
		} else {
			fmt.Fprintf(w, "Content-Length: %d\r\n\r\n%s", len(body), body)
		}
		written <- w.Flush()
	}()
	if err := await(t, "sending the request", written); err != nil {
		t.Fatalf("sending the request: %v", err)
	}
	r := bufio.NewReader(c)
	read := func() string {
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			return "read: " + err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode == http.StatusOK {
			return "200"
		}
		return fmt.Sprintf("%d %s", res.StatusCode, errorOf(t, string(b)))
	}
	first = read()
	if _, err := io.WriteString(c, "GET /v1/models/m HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		return first, ""
	}
	if second = read(); strings.HasPrefix(second, "read: ") {
		second = ""
	}
	return first, second
}

// serveOn serves s on a new listener until the test ends and returns its
// address.
func serveOn(t *testing.T, s *Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	return l.Addr().String()
}

// TestOversizedBodyAnswered sends bodies over the limit whole before
// reading: the client gets the 413, and a body at most twice the limit is
// read to its end, so the connection serves the next request.
func TestOversizedBodyAnswered(t *testing.T) {
	const limit = 1 << 20
	tooLarge := "413 the request body is larger than the limit of 1048576 bytes"
	tests := []struct {
		name          string
		size          int
		chunked       bool
		first, second string
	}{
		{"at the limit", limit, false, "200", "200"},
		{"a byte over", limit + 1, false, tooLarge, "200"},
		{"twice the limit", 2 * limit, false, tooLarge, "200"},
		{"a byte over, chunked", limit + 1, true, tooLarge, "200"},
		{"twice the limit, chunked", 2 * limit, true, tooLarge, "200"},
	}
	s, _ := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{MaxBodyBytes: limit})
	addr := serveOn(t, s)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			first, second := sendThenRead(t, addr, tc.size, tc.chunked, "")
			if diff := cmp.Diff([]string{tc.first, tc.second}, []string{first, second}); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOversizedBodyExpectContinue: a client that waits for 100 Continue
// before sending a body over the limit gets the 413 instead, and sends
// nothing.
func TestOversizedBodyExpectContinue(t *testing.T) {
	s, _ := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{MaxBodyBytes: 64})
	c := dial(t, serveOn(t, s))
	io.WriteString(c, "POST /v1/models/m:predict HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 65\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", res.StatusCode)
	}
}

// TestOversizedBodyPython posts a body over the limit with Python's
// urllib, which sends the whole body before it reads the answer.
func TestOversizedBodyPython(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	s, _ := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{MaxBodyBytes: 1 << 20})
	addr := serveOn(t, s)
	const script = `
import sys, urllib.request, urllib.error
body = b'{"instances": [[1]]}' + b' ' * (int(sys.argv[2]) - 20)
req = urllib.request.Request(sys.argv[1], data=body, headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=60) as res:
        print(res.status)
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
except Exception as e:
    print("failed:", repr(e))
`
	for _, size := range []int{1 << 20, 1<<20 + 1, 2 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			out, err := exec.Command(python, "-c", script, "http://"+addr+"/v1/models/m:predict", fmt.Sprint(size)).CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			want := "413 "
			if size <= 1<<20 {
				want = "200"
			}
			if got := string(out); !strings.HasPrefix(got, want) {
				t.Errorf("urllib got %q, want %q...", got, want)
			}
		})
	}
}

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := io.WriteString(zw, s); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestGzipBody posts bodies with a Content-Encoding: gzip ones are
// decompressed, and the decompressed body counts against the limit (a
// gzip bomb gets 413).
func TestGzipBody(t *testing.T) {
	const limit = 64 << 10
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{MaxBodyBytes: limit})
	ok := instances(1, 2)
	bomb := gzipped(t, `{"instances": [[1]]}`+strings.Repeat(" ", 10<<20)) // 10 KB, 10 MB decompressed
	if len(bomb) > limit {
		t.Fatalf("the bomb is %d bytes compressed, more than the limit", len(bomb))
	}
	noise := make([]byte, 2*limit)
	rand.NewChaCha8([32]byte{1}).Read(noise)
	incompressible := gzipped(t, `{"instances": [[1]], "noise": "`+base64.StdEncoding.EncodeToString(noise)+`"}`)
	tests := []struct {
		name, encoding, body string
		want                 string // status and part of the error message
	}{
		{"gzip", "gzip", gzipped(t, ok), "200"},
		{"x-gzip", "x-gzip", gzipped(t, ok), "200"},
		{"case-insensitive", "GZip", gzipped(t, ok), "200"},
		{"identity", "identity", ok, "200"},
		{"decompressed at the limit", "gzip", gzipped(t, ok+strings.Repeat(" ", limit-len(ok))), "200"},
		{"decompressed a byte over the limit", "gzip", gzipped(t, ok+strings.Repeat(" ", limit-len(ok)+1)), "413 larger than the limit of 65536 bytes"},
		{"a gzip bomb", "gzip", bomb, "413 larger than the limit of 65536 bytes"},
		{"compressed over the limit", "gzip", incompressible, "413 larger than the limit of 65536 bytes"},
		{"not gzip", "gzip", ok, "400 decompressing the gzip request body: gzip: invalid header"},
		{"truncated", "gzip", gzipped(t, ok)[:20], "400 decompressing the gzip request body: unexpected EOF"},
		{"empty", "gzip", "", "400 decompressing the gzip request body: EOF"},
		{"another encoding", "br", ok, `415 unsupported Content-Encoding "br"`},
		{"two encodings", "gzip, gzip", gzipped(t, gzipped(t, ok)), `415 unsupported Content-Encoding "gzip, gzip"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", hs.URL+"/v1/models/m:predict", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Encoding", tc.encoding)
			res, err := hs.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			got := fmt.Sprint(res.StatusCode)
			if res.StatusCode != http.StatusOK {
				got += " " + errorOf(t, string(b))
			} else if diff := cmp.Diff(`{"predictions":[[3.0],[5.0]]}`, string(b)); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(got, tc.want[:3]) || !strings.Contains(got, tc.want[3:]) {
				t.Errorf("answer %q, want %q", got, tc.want)
			}
		})
	}
}

// TestInflightBudget holds one request in its Run while others arrive:
// those whose bodies would take the bodies in flight over
// MaxInflightBytes get 429 at once; the budget is given back by every
// request, answered or refused.
func TestInflightBudget(t *testing.T) {
	const limit = 1000
	f := newFake(3, 1)
	f.entered, f.gate = make(chan struct{}, 16), make(chan struct{})
	s, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(f)}}, Config{MaxBodyBytes: limit, MaxInflightBytes: limit})
	var release sync.Once
	open := func() { release.Do(func() { close(f.gate) }) }
	t.Cleanup(open)                 // before the server's: a failed test leaves no Run waiting
	body := func(size int) string { // a predict of x=1 in size bytes
		b := instances(1)
		return b + strings.Repeat(" ", size-len(b))
	}
	held := predictAsync(hs, "/v1/models/m:predict", body(600))
	await(t, "the first request's Run", f.entered)

	busy := "429 the server is busy: the request bodies in flight would exceed the limit of 1000 bytes; retry later"
	tests := []struct {
		name, body, want string
	}{
		{"over what is left", body(401), busy},
		{"over what is left, bad JSON", strings.Repeat("x", 401), busy},
		{"within what is left, bad JSON", "x", "400 JSON Parse error: Invalid value at offset: 0"},
		{"gzipped, decompressed over what is left", "gzip:" + body(500), busy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", hs.URL+"/v1/models/m:predict", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if b, ok := strings.CutPrefix(tc.body, "gzip:"); ok {
				req, _ = http.NewRequest("POST", hs.URL+"/v1/models/m:predict", strings.NewReader(gzipped(t, b)))
				req.Header.Set("Content-Encoding", "gzip")
			}
			answered := make(chan string, 1)
			go func() {
				res, err := hs.Client().Do(req)
				if err != nil {
					answered <- err.Error()
					return
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				answered <- fmt.Sprintf("%d %s", res.StatusCode, b)
			}()
			if got := await(t, "the answer", answered); !strings.HasPrefix(got, tc.want[:4]) || !strings.Contains(got, tc.want[4:]) {
				t.Errorf("answer %q, want %q", got, tc.want)
			}
		})
	}
	// A body whose declared size is over what is left is refused before
	// any of it is read: a client waiting for 100 Continue gets the 429.
	c := dial(t, hs.Listener.Addr().String())
	io.WriteString(c, "POST /v1/models/m:predict HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 401\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a declared body over what is left: status %d, want 429", res.StatusCode)
	}
	if got := s.inflight.used.Load(); got != 600 {
		t.Errorf("%d bytes in flight, want the held request's 600", got)
	}
	open()
	wantPredictions(t, "the held request", []float64{3}, await(t, "the held request", held))
	wantPredictions(t, "a request of the limit after", []float64{3}, await(t, "a request of the limit after", predictAsync(hs, "/v1/models/m:predict", body(limit))))
	if got := s.inflight.used.Load(); got != 0 {
		t.Errorf("%d bytes in flight once every request is answered", got)
	}
}
