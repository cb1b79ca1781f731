package serving

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestMaxHeaderBytes: a request whose headers are over MaxHeaderBytes
// (and the 4 KiB net/http reads beyond it) is answered with 431 and its
// connection closed; one within is served.
func TestMaxHeaderBytes(t *testing.T) {
	s, err := NewServer([]ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{MaxHeaderBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	addr := serveOn(t, s)
	tests := []struct {
		name  string
		bytes int // of the X-Pad header
		want  int
	}{
		{"within", 512, http.StatusOK},
		{"over", 16 << 10, http.StatusRequestHeaderFieldsTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr)
			// Written in the background: the server may answer and close
			// before the whole header is sent.
			go fmt.Fprintf(c, "GET /v1/models/m HTTP/1.1\r\nHost: test\r\nX-Pad: %s\r\n\r\n", strings.Repeat("a", tc.bytes))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Errorf("status %d, want %d", res.StatusCode, tc.want)
			}
		})
	}
}

// TestMaxConnections: with one connection open at the cap, a second is
// not served (it waits in the listen backlog) until the first closes;
// the server never has more than the cap open.
func TestMaxConnections(t *testing.T) {
	s, err := NewServer([]ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{MaxConnections: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var mu sync.Mutex
	open, most := 0, 0
	accepted := make(chan struct{}, 4)
	s.connState = func(_ net.Conn, st http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch st {
		case http.StateNew:
			open++
			most = max(most, open)
			accepted <- struct{}{}
		case http.StateClosed, http.StateHijacked:
			open--
		}
	}
	addr := serveOn(t, s)
	get := "GET /v1/models/m HTTP/1.1\r\nHost: test\r\n\r\n"
	readStatus := func(c net.Conn, r *bufio.Reader) string {
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			return err.Error()
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.Status
	}

	first := dial(t, addr)
	await(t, "the first connection accepted", accepted)
	second := dial(t, addr)
	io.WriteString(second, get)
	answered := make(chan string, 1)
	go func() { answered <- readStatus(second, bufio.NewReader(second)) }()
	// A request on the first connection, answered: the second, sent
	// before, is still waiting.
	io.WriteString(first, get)
	if got := readStatus(first, bufio.NewReader(first)); got != "200 OK" {
		t.Fatalf("the first connection: %s", got)
	}
	select {
	case got := <-answered:
		t.Fatalf("the second connection was served (%s) while the first was open", got)
	default:
	}
	first.Close()
	if got := await(t, "the second connection's answer", answered); got != "200 OK" {
		t.Errorf("the second connection: %s", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 1 {
		t.Errorf("%d connections open at once, want at most 1", most)
	}
}

// fakeListener hands out the connections sent on conns.
type fakeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *fakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *fakeListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *fakeListener) Addr() net.Addr { return &net.TCPAddr{} }

// TestLimitListener: a connection closed twice gives back one slot, and
// Close ends an Accept waiting for a slot.
func TestLimitListener(t *testing.T) {
	inner := &fakeListener{conns: make(chan net.Conn, 4), closed: make(chan struct{})}
	l := newLimitListener(inner, 2)
	for range 3 {
		a, _ := net.Pipe()
		inner.conns <- a
	}
	var got []net.Conn
	for range 2 {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
	}
	got[0].Close()
	got[0].Close() // a second Close gives nothing back
	if n := len(l.slots); n != 1 {
		t.Errorf("%d slots taken after one of two connections closed twice, want 1", n)
	}
	c, err := l.Accept() // the slot given back
	if err != nil {
		t.Fatal(err)
	}
	if n := len(l.slots); n != 2 {
		t.Errorf("%d slots taken, want 2", n)
	}
	waiting := make(chan error, 1)
	go func() {
		_, err := l.Accept() // no slot: waits
		waiting <- err
	}()
	l.Close()
	if err := await(t, "the waiting Accept", waiting); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
	c.Close()
	got[1].Close()
	if n := len(l.slots); n != 0 {
		t.Errorf("%d slots taken once every connection is closed", n)
	}
}
