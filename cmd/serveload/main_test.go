package main

import (
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{"512", 512, false},
		{"512B", 512, false},
		{"64KiB", 64 << 10, false},
		{"16MiB", 16 << 20, false},
		{"1GiB", 1 << 30, false},
		{"0", 0, true},
		{"-1MiB", 0, true},
		{"16MB", 0, true},
		{"", 0, true},
	}
	for _, tc := range tests {
		got, err := parseBytes(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestPct(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	sorted := ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	got := []time.Duration{pct(sorted, 50), pct(sorted, 99), pct(sorted, 100), pct(nil, 50)}
	if diff := cmp.Diff(ms(5, 10, 10, 0), got); diff != "" {
		t.Errorf("percentiles (-want +got):\n%s", diff)
	}
}

// TestKindsMix checks the mix: every kind is picked, about as often as
// its weight says.
func TestKindsMix(t *testing.T) {
	ks := kinds(1 << 10)
	r := rand.New(rand.NewPCG(1, 2))
	counts := make([]int, len(ks))
	const n = 100_000
	for range n {
		counts[pick(r, ks)]++
	}
	total := 0
	for _, k := range ks {
		total += k.weight
	}
	for i, k := range ks {
		want := n * k.weight / total
		if d := counts[i] - want; d < -want/10 || d > want/10 {
			t.Errorf("kind %s picked %d times in %d, want about %d", k.name, counts[i], n, want)
		}
	}
}

// TestAnswer checks what an attacking connection reports of the server's
// answer.
func TestAnswer(t *testing.T) {
	tests := []struct {
		name, server, want string
	}{
		{"a status", "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n", "431"},
		{"closed", "", "closed"},
		{"not HTTP", "SSH-2.0\r\n\r\n", "unreadable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client, server := net.Pipe()
			go func() {
				io.WriteString(server, tc.server)
				server.Close()
			}()
			if got := answer(client); got != tc.want {
				t.Errorf("answer %q, want %q", got, tc.want)
			}
		})
	}
}
