package towers_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/towers"
)

// TestSumSlices: SumSlices equals ConcatSlices then Deduplicate to the
// bit, for parts in ascending order (merged) and out of order, with
// weights of 1 and others, float32 and float64, parts with no rows, and
// its errors are ConcatSlices'.
func TestSumSlices(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	part := func(n, vocab int, sorted, distinct, f32 bool) towers.IndexedSlices {
		ids := make([]int, n)
		for i := range ids {
			ids[i] = rng.IntN(vocab)
		}
		if sorted {
			slices.Sort(ids)
		}
		if distinct {
			ids = slices.Compact(ids)
			n = len(ids)
		}
		s := towers.IndexedSlices{Indices: ids, DenseShape: []int{vocab, 2}}
		if n == 0 {
			return s
		}
		v64 := make([]float64, 2*n)
		for i := range v64 {
			v64[i] = rng.NormFloat64()
		}
		if f32 {
			v32 := make([]float32, len(v64))
			for i, x := range v64 {
				v32[i] = float32(x)
			}
			s.Values = v32
		} else {
			s.Values = v64
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		sizes    []int
		weights  []float64
		sorted   bool
		distinct bool // ids once each (sorted)
	}{
		{"one part", []int{50}, []float64{1}, true, false},
		{"one part weighted", []int{50}, []float64{0.3}, true, false},
		{"one part distinct", []int{50}, []float64{1}, true, true},
		{"one part distinct weighted", []int{50}, []float64{0.7}, true, true},
		{"two parts distinct", []int{50, 50}, []float64{0.5, 0.5}, true, true},
		{"two towers", []int{40, 60}, []float64{1, 1}, true, false},
		{"weighted", []int{40, 60, 0, 7}, []float64{0.3, 1, 2, 1.0 / 3}, true, false},
		{"no rows", []int{0, 0}, []float64{1, 1}, true, false},
		{"out of order", []int{30, 30}, []float64{0.5, 0.7}, false, false},
	} {
		for _, f32 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/f32=%v", tc.name, f32), func(t *testing.T) {
				var parts []towers.IndexedSlices
				for _, n := range tc.sizes {
					parts = append(parts, part(n, 20, tc.sorted, tc.distinct, f32))
				}
				cat, err := towers.ConcatSlices(parts, tc.weights)
				if err != nil {
					t.Fatal(err)
				}
				want := cat.Deduplicate()
				got, err := towers.SumSlices(parts, tc.weights)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("SumSlices (-ConcatSlices.Deduplicate +got):\n%s", diff)
				}
				if len(parts[0].Indices) > 0 {
					got.Indices[0] = -1
					if parts[0].Indices[0] == -1 {
						t.Errorf("SumSlices shares its indices with part 0")
					}
				}
			})
		}
	}
	good := towers.IndexedSlices{Indices: []int{1}, Values: []float32{1, 2}, DenseShape: []int{3, 2}}
	for _, tc := range []struct {
		name    string
		parts   []towers.IndexedSlices
		weights []float64
	}{
		{"no parts", nil, nil},
		{"weights", []towers.IndexedSlices{good}, []float64{1, 1}},
		{"shape", []towers.IndexedSlices{good, {DenseShape: []int{4, 2}}}, []float64{1, 1}},
		{"dtype", []towers.IndexedSlices{good, {Indices: []int{2}, Values: []float64{1, 2}, DenseShape: []int{3, 2}}}, []float64{1, 1}},
		{"invalid", []towers.IndexedSlices{good, {Indices: []int{3}, Values: []float32{1, 2}, DenseShape: []int{3, 2}}}, []float64{1, 1}},
	} {
		_, want := towers.ConcatSlices(tc.parts, tc.weights)
		_, got := towers.SumSlices(tc.parts, tc.weights)
		if want == nil || got == nil || !strings.Contains(got.Error(), want.Error()) {
			t.Errorf("%s: SumSlices error %v, want ConcatSlices' %v", tc.name, got, want)
		}
	}
}

// TestDeduplicateAscending: slices whose indices already ascend come back
// equal and copied (sharing no memory); indices that ascend with a repeat
// are still summed.
func TestDeduplicateAscending(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, want towers.IndexedSlices
	}{
		{"ascending", towers.IndexedSlices{Indices: []int{0, 2, 3}, Values: []float32{1, 2, 3}, DenseShape: []int{4}},
			towers.IndexedSlices{Indices: []int{0, 2, 3}, Values: []float32{1, 2, 3}, DenseShape: []int{4}}},
		{"repeat", towers.IndexedSlices{Indices: []int{0, 2, 2}, Values: []float32{1, 2, 3}, DenseShape: []int{4}},
			towers.IndexedSlices{Indices: []int{0, 2}, Values: []float32{1, 5}, DenseShape: []int{4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.Deduplicate()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Deduplicate (-want +got):\n%s", diff)
			}
			got.Indices[0], got.Values.([]float32)[0] = 9, 9
			if tc.in.Indices[0] == 9 || tc.in.Values.([]float32)[0] == 9 {
				t.Errorf("Deduplicate's result shares memory with its input")
			}
		})
	}
}
