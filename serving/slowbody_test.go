package serving

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSlowUploadsLeaveBudget opens four uploads that announce a body of
// the limit each (the whole in-flight budget, together) and send one
// byte of it: a request beside them is answered, as the budget holds only
// the bytes that arrived; then the uploads end and are answered too, and
// every byte is given back.
func TestSlowUploadsLeaveBudget(t *testing.T) {
	const limit = 1000
	s, err := NewServer([]ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{MaxBodyBytes: limit, BodyReadTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	reading := make(chan struct{}, 8)
	s.readingBody = func() { reading <- struct{}{} }
	addr := serveOn(t, s)

	body := instances(1) + strings.Repeat(" ", limit-len(instances(1)))
	var uploads []net.Conn
	for range 4 {
		c := dial(t, addr)
		fmt.Fprintf(c, "POST /v1/models/m:predict HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\n\r\n%s", limit, body[:1])
		uploads = append(uploads, c)
	}
	for i := range 4 {
		await(t, fmt.Sprintf("upload %d's body read", i), reading)
	}
	s.readingBody = nil // the uploads' handlers are past it
	answered := make(chan outcome, 1)
	go func() {
		res, err := http.Post("http://"+addr+"/v1/models/m:predict", "application/json", strings.NewReader(instances(1)))
		if err != nil {
			answered <- outcome{err: err}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		ys, err := predictionsOf(response{code: res.StatusCode, body: string(b)})
		answered <- outcome{ys, err}
	}()
	wantPredictions(t, "a request beside four slow uploads", []float64{3}, await(t, "the request beside the uploads", answered))

	for i, c := range uploads {
		io.WriteString(c, body[1:])
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("upload %d: status %d, body %s", i, res.StatusCode, b)
		}
	}
	if got := s.inflight.used.Load(); got != 0 {
		t.Errorf("%d bytes in flight once every request is answered", got)
	}
}

// TestBodyStallAnswered: a body whose next bytes do not come within
// BodyReadTimeout is answered with 408, whether plain or gzipped, and
// gives back the bytes it took.
func TestBodyStallAnswered(t *testing.T) {
	s, err := NewServer([]ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{BodyReadTimeout: time.Millisecond, ReadTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	addr := serveOn(t, s)
	zipped := gzipped(t, instances(1, 2, 3))
	tests := []struct {
		name, header, sent string
	}{
		{"nothing of the body", "Content-Length: 100\r\n", ""},
		{"part of the body", "Content-Length: 100\r\n", `{"instances": [`},
		{"chunked", "Transfer-Encoding: chunked\r\n", "5\r\n{\"ins\r\n"},
		{"gzipped, header cut", "Content-Length: 100\r\nContent-Encoding: gzip\r\n", zipped[:5]},
		{"gzipped, data cut", "Content-Length: 100\r\nContent-Encoding: gzip\r\n", zipped[:len(zipped)-5]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr)
			io.WriteString(c, "POST /v1/models/m:predict HTTP/1.1\r\nHost: test\r\n"+tc.header+"\r\n"+tc.sent)
			got := make(chan string, 1)
			go func() {
				res, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					got <- err.Error()
					return
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				got <- fmt.Sprintf("%d %s", res.StatusCode, b)
			}()
			if answer := await(t, "the answer", got); !strings.HasPrefix(answer, "408 ") || !strings.Contains(answer, "the request body stopped arriving") {
				t.Errorf("answer %q, want a 408", answer)
			}
		})
	}
	if got := s.inflight.used.Load(); got != 0 {
		t.Errorf("%d bytes in flight once every request is answered", got)
	}
}
