package serving

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestServe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "done")
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, l, h) }()
	got := make(chan string, 1)
	go func() {
		res, err := http.Get("http://" + l.Addr().String() + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		got <- fmt.Sprint(res.StatusCode, " ", string(b))
	}()
	<-entered
	cancel() // shuts down gracefully: the request in flight completes
	close(release)
	if g := <-got; g != "200 done" {
		t.Errorf("the request in flight got %q", g)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestListenAndServe(t *testing.T) {
	if err := ListenAndServe(context.Background(), "256.0.0.1:http", http.NotFoundHandler()); err == nil {
		t.Error("no error for a bad address")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ListenAndServe(ctx, "127.0.0.1:0", http.NotFoundHandler()); err != nil {
		t.Errorf("ListenAndServe: %v", err)
	}
	s, _ := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(1, 1))}}, Config{})
	if err := s.ListenAndServe(ctx, "127.0.0.1:0"); err != nil {
		t.Errorf("Server.ListenAndServe: %v", err)
	}
}

// bigAnswer is a request whose answer (20 MB) is larger than what the
// connection's buffers hold, so that writing it blocks until the client
// reads.
const bigAnswerFloats = 5 << 20

// TestUnreadAnswerReleasesVersion has a client that never reads its
// (large) answer: the version that computed it is closed once replaced,
// and Close does not wait for the client.
func TestUnreadAnswerReleasesVersion(t *testing.T) {
	big := newBig(1, bigAnswerFloats)
	src := &versions{next: make(chan Servable, 1)}
	src.next <- big
	s, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: src.load}}, Config{})
	rawPost(t, hs.Listener.Addr().String(), "/v1/models/m:predict", instances(1))
	await(t, "the request's Run", big.entered)

	src.next <- newFake(2, 1)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	await(t, "closing the replaced version", big.closed)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	if err := await(t, "Close", closed); err != nil {
		t.Error(err)
	}
}

// TestShutdownCutsOffClients shuts down a server whose client never reads
// its answer: once Shutdown's context is done, the connection is closed,
// Shutdown returns the context's error and the version is closed.
func TestShutdownCutsOffClients(t *testing.T) {
	big := newBig(1, bigAnswerFloats)
	// No timeout would close the connection while the test runs.
	s, err := NewServer([]ModelConfig{{Name: "m", Loader: fixed(big)}}, Config{WriteTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	closedConns := make(chan struct{}, 1)
	s.connState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closedConns <- struct{}{}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background(), l) }()
	rawPost(t, l.Addr().String(), "/v1/models/m:predict", instances(1)) // never read
	await(t, "the request's Run", big.entered)

	ctx, cancel := context.WithCancel(context.Background())
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	cancel() // before or after Shutdown began to wait: the same end
	if err := await(t, "Shutdown", shut); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown: %v, want an error wrapping context.Canceled", err)
	}
	await(t, "the server closing the connection", closedConns)
	await(t, "closing the version", big.closed)
	if err := await(t, "Serve", served); err != nil {
		t.Errorf("Serve: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after Shutdown: %v", err)
	}
	if res := httpGetStatus(s); res != http.StatusServiceUnavailable {
		t.Errorf("a request after Shutdown: status %d, want 503", res)
	}
}

// httpGetStatus answers a status request with s directly.
func httpGetStatus(s *Server) int {
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/v1/models/m", nil))
	return w.Code
}

// TestServeTimeouts has a client misbehave in each of the ways a timeout
// bounds: the server closes the connection.
func TestServeTimeouts(t *testing.T) {
	const short = 50 * time.Millisecond
	partial := "POST /v1/models/m:predict HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\n{\"instances\""
	tests := []struct {
		name   string
		cfg    Config
		client func(addr string) net.Conn
	}{
		{"a slow header", Config{ReadHeaderTimeout: short}, func(addr string) net.Conn {
			c := dial(t, addr)
			io.WriteString(c, "POST /v1/models/m:predict HTTP/1.1\r\nHost: te")
			return c
		}},
		{"a slow body", Config{ReadTimeout: short}, func(addr string) net.Conn {
			c := dial(t, addr)
			io.WriteString(c, partial)
			return c
		}},
		{"an answer not read", Config{WriteTimeout: short}, func(addr string) net.Conn {
			return rawPost(t, addr, "/v1/models/m:predict", instances(1))
		}},
		{"an idle connection", Config{IdleTimeout: short}, func(addr string) net.Conn {
			c := dial(t, addr)
			io.WriteString(c, "GET /v1/models/m HTTP/1.1\r\nHost: test\r\n\r\n")
			return c
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			big := newBig(1, bigAnswerFloats)
			s, err := NewServer([]ModelConfig{{Name: "m", Loader: fixed(big)}}, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			states := make(chan http.ConnState, 16)
			s.connState = func(_ net.Conn, st http.ConnState) { states <- st }
			t.Cleanup(func() { s.Close() }) // after serveOn's cleanup
			tc.client(serveOn(t, s))
			var seen []http.ConnState
			for st := http.ConnState(-1); st != http.StateClosed; {
				st = await(t, fmt.Sprintf("the connection closed (states so far %v)", seen), states)
				seen = append(seen, st)
			}
			if diff := cmp.Diff(http.StateNew, seen[0]); diff != "" {
				t.Errorf("states %v", seen)
			}
		})
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestServeUsesConfig checks the http.Server Serve builds against the
// configuration.
func TestServeUsesConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want [5]time.Duration // read header, read, write, idle timeouts; max header bytes
	}{
		{"defaults", Config{}, [5]time.Duration{DefaultReadHeaderTimeout, DefaultReadTimeout, DefaultWriteTimeout, DefaultIdleTimeout, DefaultMaxHeaderBytes}},
		{"set", Config{ReadHeaderTimeout: 1, ReadTimeout: 2, WriteTimeout: 3, IdleTimeout: 4, MaxHeaderBytes: 5}, [5]time.Duration{1, 2, 3, 4, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.cfg.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			hs := newHTTPServer(http.NotFoundHandler(), cfg, nil)
			got := [5]time.Duration{hs.ReadHeaderTimeout, hs.ReadTimeout, hs.WriteTimeout, hs.IdleTimeout, time.Duration(hs.MaxHeaderBytes)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("timeouts and header limit (-want +got):\n%s", diff)
			}
			if hs.ErrorLog == nil {
				t.Error("net/http's errors go to the standard logger")
			}
		})
	}
}
