package towers_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/towers"
)

func TestIndexedSlicesValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    towers.IndexedSlices
		want string // "" for valid
	}{
		{"rows", towers.IndexedSlices{Indices: []int{2, 0}, Values: []float32{1, 2, 3, 4}, DenseShape: []int{3, 2}}, ""},
		{"empty", towers.IndexedSlices{DenseShape: []int{3, 2}}, ""},
		{"rank 1", towers.IndexedSlices{Indices: []int{1}, Values: []float64{5}, DenseShape: []int{2}}, ""},
		{"rank 0", towers.IndexedSlices{}, "rank 0"},
		{"negative dim", towers.IndexedSlices{DenseShape: []int{3, -1}}, "negative dimension 1"},
		{"values type", towers.IndexedSlices{Indices: []int{0}, Values: []int{1}, DenseShape: []int{1}}, "[]int"},
		{"values length", towers.IndexedSlices{Indices: []int{0}, Values: []float32{1}, DenseShape: []int{3, 2}}, "1 values for 1 rows of 2 elements"},
		{"index high", towers.IndexedSlices{Indices: []int{0, 3}, Values: []float32{1, 2}, DenseShape: []int{3}}, "index 3 at position 1 is out of range [0, 3)"},
		{"index negative", towers.IndexedSlices{Indices: []int{-1}, Values: []float32{1}, DenseShape: []int{3}}, "index -1 at position 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// dense densifies s through AddTo on zeros.
func dense(t *testing.T, s towers.IndexedSlices) []float64 {
	t.Helper()
	d := make([]float64, s.DenseShape[0]*s.RowSize())
	if err := s.AddTo(d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestIndexedSlicesDeduplicate(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   towers.IndexedSlices
		want towers.IndexedSlices
	}{
		{
			name: "repeats summed in order, ids ascending",
			in:   towers.IndexedSlices{Indices: []int{3, 1, 3, 0, 1}, Values: []float64{1, 2, 10, 20, 100, 200, 5, 6, 7, 8}, DenseShape: []int{4, 2}},
			want: towers.IndexedSlices{Indices: []int{0, 1, 3}, Values: []float64{5, 6, 17, 28, 101, 202}, DenseShape: []int{4, 2}},
		},
		{
			name: "no repeats",
			in:   towers.IndexedSlices{Indices: []int{2, 0}, Values: []float64{1, 2}, DenseShape: []int{3}},
			want: towers.IndexedSlices{Indices: []int{0, 2}, Values: []float64{2, 1}, DenseShape: []int{3}},
		},
		{
			name: "empty",
			in:   towers.IndexedSlices{Indices: []int{}, Values: []float64{}, DenseShape: []int{3}},
			want: towers.IndexedSlices{Indices: []int{}, Values: []float64{}, DenseShape: []int{3}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.Deduplicate()
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Deduplicate() mismatch (-want +got):\n%s", d)
			}
			if d := cmp.Diff(dense(t, tc.in), dense(t, got)); d != "" {
				t.Errorf("Deduplicate changed the dense gradient (-in +out):\n%s", d)
			}
		})
	}
}

func TestIndexedSlicesDeduplicateFloat32Order(t *testing.T) {
	// 1e8 + 1 - 1e8 in float32 is 0 in order of appearance; any other order
	// of the three rows for id 0 gives another value.
	in := towers.IndexedSlices{Indices: []int{0, 0, 0}, Values: []float32{1e8, 1, -1e8}, DenseShape: []int{1}}
	got := in.Deduplicate().Values.([]float32)
	if want := (float32(1e8) + 1) - 1e8; got[0] != want {
		t.Fatalf("Deduplicate summed %v, want %v (the rows in their order)", got[0], want)
	}
}

// TestIndexedSlicesDeduplicateManyOrder: with thousands of rows over a few
// ids, in an order sorting would disturb, each id's rows are still summed
// in their order in s (float32 sums that depend on it), and the ids come
// out sorted.
func TestIndexedSlicesDeduplicateManyOrder(t *testing.T) {
	const n, vocab, rs = 5000, 7, 2
	// base 0: ids that Deduplicate packs with their positions into one
	// integer to sort; base 1<<40: ids too large for that, sorted as pairs.
	for _, base := range []int{0, 1 << 40} {
		in := towers.IndexedSlices{Indices: make([]int, n), DenseShape: []int{base + vocab, rs}}
		vals := make([]float32, n*rs)
		for i := range n {
			in.Indices[i] = base + (i*5+i/3)%vocab
			for j := range rs {
				// Large and small magnitudes alternate, so that float32's
				// rounding makes the sum depend on the order.
				vals[i*rs+j] = float32((i*31+j*17)%97-48) * []float32{1e7, 1, 1e-3}[(i+j)%3]
			}
		}
		in.Values = vals
		wantIDs := make([]int, vocab)
		want := make([]float32, vocab*rs)
		for id := range vocab {
			wantIDs[id] = base + id
		}
		for i, id := range in.Indices {
			for j := range rs {
				want[(id-base)*rs+j] += vals[i*rs+j]
			}
		}
		got := in.Deduplicate()
		if diff := cmp.Diff(wantIDs, got.Indices); diff != "" {
			t.Errorf("base %d: indices (-want +got):\n%s", base, diff)
		}
		if diff := cmp.Diff(want, got.Values); diff != "" {
			t.Errorf("base %d: values, rows summed in their order (-want +got):\n%s", base, diff)
		}
	}
}

func TestConcatSlices(t *testing.T) {
	shape := []int{5, 2}
	for _, tc := range []struct {
		name    string
		parts   []towers.IndexedSlices
		weights []float64
		want    towers.IndexedSlices
		err     string
	}{
		{
			name: "weighted, in part order",
			parts: []towers.IndexedSlices{
				{Indices: []int{4, 1}, Values: []float64{1, 2, 3, 4}, DenseShape: shape},
				{Indices: []int{1}, Values: []float64{10, 20}, DenseShape: shape},
			},
			weights: []float64{0.5, 2},
			want:    towers.IndexedSlices{Indices: []int{4, 1, 1}, Values: []float64{0.5, 1, 1.5, 2, 20, 40}, DenseShape: shape},
		},
		{
			name: "a tower without rows",
			parts: []towers.IndexedSlices{
				{DenseShape: shape},
				{Indices: []int{0}, Values: []float64{1, 2}, DenseShape: shape},
			},
			weights: []float64{1, 1},
			want:    towers.IndexedSlices{Indices: []int{0}, Values: []float64{1, 2}, DenseShape: shape},
		},
		{
			name:    "no rows anywhere",
			parts:   []towers.IndexedSlices{{DenseShape: shape}, {DenseShape: shape}},
			weights: []float64{1, 1},
			want:    towers.IndexedSlices{Indices: []int{}, DenseShape: shape},
		},
		{
			name:    "weights count",
			parts:   []towers.IndexedSlices{{DenseShape: shape}},
			weights: []float64{1, 1},
			err:     "1 parts, 2 weights",
		},
		{
			name: "shapes differ",
			parts: []towers.IndexedSlices{
				{DenseShape: shape},
				{DenseShape: []int{5, 3}},
			},
			weights: []float64{1, 1},
			err:     "part 1 has dense shape [5 3]",
		},
		{
			name: "types differ",
			parts: []towers.IndexedSlices{
				{Indices: []int{0}, Values: []float64{1, 2}, DenseShape: shape},
				{Indices: []int{0}, Values: []float32{1, 2}, DenseShape: shape},
			},
			weights: []float64{1, 1},
			err:     "part 1 has []float32 values",
		},
		{
			name: "invalid part",
			parts: []towers.IndexedSlices{
				{Indices: []int{9}, Values: []float64{1, 2}, DenseShape: shape},
			},
			weights: []float64{1},
			err:     "part 0: indexed slices: index 9",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := towers.ConcatSlices(tc.parts, tc.weights)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ConcatSlices() error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("ConcatSlices() mismatch (-want +got):\n%s", d)
			}
		})
	}
}

func TestIndexedSlicesAddTo(t *testing.T) {
	s := towers.IndexedSlices{Indices: []int{2, 0, 2}, Values: []float32{1, 2, 3, 4, 5, 6}, DenseShape: []int{3, 2}}
	got := []float32{1, 1, 1, 1, 1, 1}
	if err := s.AddTo(got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]float32{4, 5, 1, 1, 7, 9}, got); d != "" {
		t.Errorf("AddTo mismatch (-want +got):\n%s", d)
	}
	for _, bad := range []any{make([]float64, 6), make([]float32, 5)} {
		if err := s.AddTo(bad); err == nil {
			t.Errorf("AddTo(%T of %d) = nil, want an error", bad, 5)
		}
	}
}
