package estimator

import (
	"context"
	"iter"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"
)

// countingSource yields n batches whose feature "i" is their index, and
// sends on pulled each index as the producer starts reading that batch.
func countingSource(n int, pulled chan<- int) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		for i := range n {
			pulled <- i
			b := Batch{Features: map[string]*tensor.Dense{"i": tensor.New(tensor.WithShape(1), tensor.WithBacking([]int{i}))}}
			if !yield(b, nil) {
				return
			}
		}
	}
}

// TestPrefetch: the producer reads ahead while the consumer holds a batch —
// at once without a gate, after start with one — and with a gate that is
// never opened every batch still arrives, in order (the consumer asking
// for the next batch opens it).
func TestPrefetch(t *testing.T) {
	for _, c := range []struct {
		name       string
		gate, open bool
	}{
		{name: "no gate", gate: false},
		{name: "gate opened by start", gate: true, open: true},
		{name: "gate never opened", gate: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 4
			pulled := make(chan int, n)
			seq, start := prefetch(context.Background(), countingSource(n, pulled), c.gate)
			var got []int
			read := -1 // the highest index the producer has started reading
			for b, err := range seq {
				if err != nil {
					t.Fatal(err)
				}
				i := b.Features["i"].Data().([]int)[0]
				got = append(got, i)
				if c.open {
					start()
					start() // twice in one step opens it once
				}
				if (!c.gate || c.open) && i+1 < n {
					// Blocks (and the test times out) unless the producer
					// reads the next batch while this one is held.
					for read < i+1 {
						read = <-pulled
					}
				}
			}
			if diff := cmp.Diff([]int{0, 1, 2, 3}, got); diff != "" {
				t.Errorf("batches (-want +got):\n%s", diff)
			}
		})
	}
}
