package collective_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/collective"
)

// onRanks runs fn as every rank of a Local group of n, each on its own
// goroutine, and returns their errors by rank.
func onRanks(n int, fn func(c collective.Comm) error) []error {
	comms := collective.Local(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() { errs[r] = fn(c) })
	}
	wg.Wait()
	return errs
}

func TestLocalAllReduceAndBroadcast(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			got64 := make([][]float64, n)
			got32 := make([][]float32, n)
			gotB := make([][]byte, n)
			gotV := make([][]byte, n)
			errs := onRanks(n, func(c collective.Comm) error {
				r := c.Rank()
				b64 := []float64{float64(r), float64(r * r), 1}
				b32 := []float32{float32(r) / 2, 1}
				if err := c.AllReduceFloat64(context.Background(), b64); err != nil {
					return err
				}
				if err := c.AllReduceFloat32(context.Background(), b32); err != nil {
					return err
				}
				bb := []byte{byte(r), byte(r + 10)}
				if err := c.Broadcast(context.Background(), n-1, bb); err != nil {
					return err
				}
				var mine []byte
				if r == 0 {
					mine = []byte(strings.Repeat("x", 300))
				}
				v, err := collective.BroadcastBytes(context.Background(), c, 0, mine)
				got64[r], got32[r], gotB[r], gotV[r] = b64, b32, bb, v
				return err
			})
			var s, sq float64
			var h float32
			for r := range n {
				s, sq, h = s+float64(r), sq+float64(r*r), h+float32(r)/2
			}
			for r := range n {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				want := struct {
					F64 []float64
					F32 []float32
					B   []byte
					V   string
				}{[]float64{s, sq, float64(n)}, []float32{h, float32(n)}, []byte{byte(n - 1), byte(n + 9)}, strings.Repeat("x", 300)}
				got := want
				got.F64, got.F32, got.B, got.V = got64[r], got32[r], gotB[r], string(gotV[r])
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("rank %d (-want +got):\n%s", r, d)
				}
			}
		})
	}
}

// TestLocalBreaks: ranks that disagree on a collective, or one that leaves
// (its context cancelled), break the group: every rank gets the error,
// and every later call too.
func TestLocalBreaks(t *testing.T) {
	tests := []struct {
		name string
		fn   func(c collective.Comm) error
		want string
	}{
		{"lengths differ", func(c collective.Comm) error {
			return c.AllReduceFloat64(context.Background(), make([]float64, 2+c.Rank()))
		}, "every rank must run the same collectives"},
		{"kinds differ", func(c collective.Comm) error {
			if c.Rank() == 0 {
				return c.AllReduceFloat32(context.Background(), make([]float32, 2))
			}
			return c.AllReduceFloat64(context.Background(), make([]float64, 2))
		}, "every rank must run the same collectives"},
		{"rank 1 cancelled", func(c collective.Comm) error {
			ctx := context.Background()
			if c.Rank() == 1 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				cancel()
			}
			// Rank 0 waits in a collective rank 1 never completes.
			return c.Broadcast(ctx, 0, make([]byte, 4))
		}, "rank 1 left"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			comms := collective.Local(2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for r, c := range comms {
				wg.Go(func() { errs[r] = tc.fn(c) })
			}
			wg.Wait()
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("rank %d: %v, want an error containing %q", r, err, tc.want)
				}
				if again := comms[r].AllReduceFloat64(context.Background(), []float64{1}); again == nil || again.Error() != errs[0].Error() && again.Error() != errs[1].Error() {
					t.Errorf("rank %d: a later call gave %v, want the group's first error", r, again)
				}
			}
		})
	}
}
