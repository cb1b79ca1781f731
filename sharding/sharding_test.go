package sharding_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/sharding"
)

// ---------------------------------------------------------------- helpers

// snap is a comparable snapshot of a dense tensor.
type snap struct {
	Shape []int
	Data  any
}

// dataOf returns t's backing slice; tensor's Data panics on empty tensors,
// so those get an empty slice of the right element type.
func dataOf(t *tensor.Dense) any {
	if t.Shape().TotalSize() == 0 {
		return reflect.MakeSlice(reflect.SliceOf(t.Dtype().Type), 0, 0).Interface()
	}
	if t.RequiresIterator() {
		t = t.Materialize().(*tensor.Dense)
	}
	return t.Data()
}

func snapOf(t *tensor.Dense) snap {
	return snap{Shape: append([]int(nil), t.Shape()...), Data: dataOf(t)}
}

// seq returns a []T of n distinct-ish values for dtype name.
func seq(dtype string, n int) any {
	switch dtype {
	case "float32":
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(i) + 0.5
		}
		return s
	case "float64":
		s := make([]float64, n)
		for i := range s {
			s[i] = float64(i) * 1.25
		}
		return s
	case "int64":
		s := make([]int64, n)
		for i := range s {
			s[i] = int64(i) * 10
		}
		return s
	case "bool":
		s := make([]bool, n)
		for i := range s {
			s[i] = i%3 == 0
		}
		return s
	case "string":
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprintf("s%d", i)
		}
		return s
	}
	panic("unknown dtype " + dtype)
}

func product(shape []int) int {
	p := 1
	for _, d := range shape {
		p *= d
	}
	return p
}

func newTensor(dtype string, shape ...int) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(seq(dtype, product(shape))))
}

// flip changes element i of the slice s to a different value.
func flip(s any, i int) {
	v := reflect.ValueOf(s).Index(i)
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Float32, reflect.Float64:
		v.SetFloat(-v.Float() - 1000)
	case reflect.Int64:
		v.SetInt(-v.Int() - 1000)
	case reflect.String:
		v.SetString(v.String() + "!")
	default:
		panic("flip: unsupported kind")
	}
}

// sliceOf returns s[lo:hi] for any slice.
func sliceOf(s any, lo, hi int) any { return reflect.ValueOf(s).Slice(lo, hi).Interface() }

func errContains(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want one containing %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

// ---------------------------------------------------------------- Sizes

func TestSizes(t *testing.T) {
	tests := []struct {
		rows, n int
		want    []int
	}{
		{rows: 8, n: 4, want: []int{2, 2, 2, 2}},
		{rows: 8, n: 1, want: []int{8}},
		{rows: 4, n: 4, want: []int{1, 1, 1, 1}},
		{rows: 10, n: 4, want: []int{3, 3, 2, 2}},
		{rows: 7, n: 3, want: []int{3, 2, 2}},
		{rows: 5, n: 2, want: []int{3, 2}},
		{rows: 9, n: 5, want: []int{2, 2, 2, 2, 1}},
		{rows: 1, n: 1, want: []int{1}},
	}
	for _, tc := range tests {
		got, err := sharding.Sizes(tc.rows, tc.n)
		if err != nil {
			t.Errorf("Sizes(%d, %d): %v", tc.rows, tc.n, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Sizes(%d, %d) mismatch (-want +got):\n%s", tc.rows, tc.n, diff)
		}
	}
}

func TestSizesErrors(t *testing.T) {
	tests := []struct {
		rows, n    int
		want       string
		tooFewRows bool
	}{
		{rows: 3, n: 4, want: "batch of 3 rows cannot be split into 4 shards", tooFewRows: true},
		{rows: 1, n: 2, want: "batch of 1 row cannot be split into 2 shards", tooFewRows: true},
		{rows: 0, n: 1, want: "batch of 0 rows cannot be split into 1 shard", tooFewRows: true},
		{rows: 5, n: 0, want: "number of shards must be at least 1, got 0"},
		{rows: 5, n: -2, want: "number of shards must be at least 1, got -2"},
		{rows: -1, n: 1, want: "negative row count -1"},
	}
	for _, tc := range tests {
		got, err := sharding.Sizes(tc.rows, tc.n)
		if err == nil {
			t.Errorf("Sizes(%d, %d) = %v, want error", tc.rows, tc.n, got)
			continue
		}
		if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
			t.Errorf("Sizes(%d, %d) error mismatch (-want +got):\n%s", tc.rows, tc.n, diff)
		}
		if got := errors.Is(err, sharding.ErrTooFewRows); got != tc.tooFewRows {
			t.Errorf("Sizes(%d, %d): errors.Is(err, ErrTooFewRows) = %v, want %v", tc.rows, tc.n, got, tc.tooFewRows)
		}
	}
}

func TestSizesProperties(t *testing.T) {
	for rows := 1; rows <= 40; rows++ {
		for n := 1; n <= rows; n++ {
			sizes, err := sharding.Sizes(rows, n)
			if err != nil {
				t.Fatalf("Sizes(%d, %d): %v", rows, n, err)
			}
			if len(sizes) != n {
				t.Fatalf("Sizes(%d, %d) has %d entries", rows, n, len(sizes))
			}
			sum := 0
			for i, s := range sizes {
				sum += s
				if s < 1 {
					t.Errorf("Sizes(%d, %d)[%d] = %d < 1", rows, n, i, s)
				}
				if i > 0 && s > sizes[i-1] {
					t.Errorf("Sizes(%d, %d) = %v: later shard larger than earlier", rows, n, sizes)
				}
			}
			if sum != rows {
				t.Errorf("Sizes(%d, %d) = %v sums to %d", rows, n, sizes, sum)
			}
			if sizes[0]-sizes[n-1] > 1 {
				t.Errorf("Sizes(%d, %d) = %v differ by more than one", rows, n, sizes)
			}
		}
	}
}

// ---------------------------------------------------------------- Split

func TestSplit(t *testing.T) {
	tests := []struct {
		shape      []int
		n          int
		wantShapes [][]int
	}{
		{shape: []int{6}, n: 3, wantShapes: [][]int{{2}, {2}, {2}}},
		{shape: []int{5}, n: 2, wantShapes: [][]int{{3}, {2}}},
		{shape: []int{5}, n: 5, wantShapes: [][]int{{1}, {1}, {1}, {1}, {1}}},
		{shape: []int{4}, n: 1, wantShapes: [][]int{{4}}},
		{shape: []int{4, 3}, n: 2, wantShapes: [][]int{{2, 3}, {2, 3}}},
		{shape: []int{5, 3}, n: 3, wantShapes: [][]int{{2, 3}, {2, 3}, {1, 3}}},
		{shape: []int{7, 1}, n: 4, wantShapes: [][]int{{2, 1}, {2, 1}, {2, 1}, {1, 1}}},
		{shape: []int{4, 2, 3}, n: 2, wantShapes: [][]int{{2, 2, 3}, {2, 2, 3}}},
		{shape: []int{5, 2, 3}, n: 3, wantShapes: [][]int{{2, 2, 3}, {2, 2, 3}, {1, 2, 3}}},
		{shape: []int{3, 1, 1}, n: 2, wantShapes: [][]int{{2, 1, 1}, {1, 1, 1}}},
		{shape: []int{4, 0}, n: 2, wantShapes: [][]int{{2, 0}, {2, 0}}},
	}
	for _, dtype := range []string{"float32", "float64", "int64", "bool", "string"} {
		for _, tc := range tests {
			name := fmt.Sprintf("%s/%v/n=%d", dtype, tc.shape, tc.n)
			t.Run(name, func(t *testing.T) {
				orig := newTensor(dtype, tc.shape...)
				flat := seq(dtype, product(tc.shape)) // an independent copy of orig's data
				shards, err := sharding.Split(orig, tc.n)
				if err != nil {
					t.Fatalf("Split: %v", err)
				}
				var want, got []snap
				off := 0
				for _, ws := range tc.wantShapes {
					size := product(ws)
					want = append(want, snap{Shape: ws, Data: sliceOf(flat, off, off+size)})
					off += size
				}
				for _, s := range shards {
					got = append(got, snapOf(s))
					if s.Dtype() != orig.Dtype() {
						t.Errorf("shard dtype %v, want %v", s.Dtype(), orig.Dtype())
					}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("shards mismatch (-want +got):\n%s", diff)
				}

				// Shards are views: a write through a shard shows in the
				// original, at the shard's offset.
				if product(tc.shape) == 0 {
					return
				}
				off = 0
				for i, s := range shards {
					last := s.Shape().TotalSize() - 1
					flip(s.Data(), last)
					flip(flat, off+last)
					if diff := cmp.Diff(flat, orig.Data()); diff != "" {
						t.Fatalf("after writing shard %d, original mismatch (-want +got):\n%s", i, diff)
					}
					off += s.Shape().TotalSize()
				}
				// And a write to the original shows in the shard.
				flip(orig.Data(), 0)
				flip(flat, 0)
				if diff := cmp.Diff(sliceOf(flat, 0, shards[0].Shape().TotalSize()), shards[0].Data()); diff != "" {
					t.Fatalf("after writing original, shard 0 mismatch (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestSplitAppendDoesNotClobber(t *testing.T) {
	orig := newTensor("float64", 4)
	shards, err := sharding.Split(orig, 2)
	if err != nil {
		t.Fatal(err)
	}
	s0 := shards[0].Data().([]float64)
	_ = append(s0, 999) // must reallocate: capacity is clipped
	if diff := cmp.Diff([]float64{0, 1.25, 2.5, 3.75}, orig.Data()); diff != "" {
		t.Errorf("append to shard 0 clobbered the original (-want +got):\n%s", diff)
	}
}

func TestSplitNonContiguous(t *testing.T) {
	t.Run("transposed is copied", func(t *testing.T) {
		orig := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]int64{0, 1, 2, 3, 4, 5}))
		if err := orig.T(); err != nil {
			t.Fatal(err)
		}
		shards, err := sharding.Split(orig, 2) // logical shape (3, 2)
		if err != nil {
			t.Fatal(err)
		}
		want := []snap{
			{Shape: []int{2, 2}, Data: []int64{0, 3, 1, 4}},
			{Shape: []int{1, 2}, Data: []int64{2, 5}},
		}
		got := []snap{snapOf(shards[0]), snapOf(shards[1])}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("shards mismatch (-want +got):\n%s", diff)
		}
		shards[0].Data().([]int64)[0] = 100
		if diff := cmp.Diff([]int64{0, 1, 2, 3, 4, 5}, orig.Data()); diff != "" {
			t.Errorf("writing a shard of a materialized tensor changed the original (-want +got):\n%s", diff)
		}
	})
	t.Run("column slice is copied", func(t *testing.T) {
		base := tensor.New(tensor.WithShape(3, 3), tensor.WithBacking([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8}))
		v, err := base.Slice(nil, tensor.S(1)) // column 1: [1 4 7]
		if err != nil {
			t.Fatal(err)
		}
		shards, err := sharding.Split(v.(*tensor.Dense), 2)
		if err != nil {
			t.Fatal(err)
		}
		want := []snap{{Shape: []int{2}, Data: []float32{1, 4}}, {Shape: []int{1}, Data: []float32{7}}}
		got := []snap{snapOf(shards[0]), snapOf(shards[1])}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("shards mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("row range view is shared", func(t *testing.T) {
		base := tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]float64{0, 1, 2, 3, 4, 5, 6, 7}))
		v, err := base.Slice(tensor.S(1, 4)) // rows 1..3
		if err != nil {
			t.Fatal(err)
		}
		shards, err := sharding.Split(v.(*tensor.Dense), 2)
		if err != nil {
			t.Fatal(err)
		}
		want := []snap{{Shape: []int{2, 2}, Data: []float64{2, 3, 4, 5}}, {Shape: []int{1, 2}, Data: []float64{6, 7}}}
		got := []snap{snapOf(shards[0]), snapOf(shards[1])}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("shards mismatch (-want +got):\n%s", diff)
		}
		shards[1].Data().([]float64)[1] = -7
		if diff := cmp.Diff([]float64{0, 1, 2, 3, 4, 5, 6, -7}, base.Data()); diff != "" {
			t.Errorf("shard of a contiguous view does not share memory (-want +got):\n%s", diff)
		}
	})
}

func TestSplitMasked(t *testing.T) {
	orig := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking(
		[]float64{0, 1, 2, 3, 4, 5}, []bool{false, true, false, false, true, true}))
	shards, err := sharding.Split(orig, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := [][]bool{shards[0].Mask(), shards[1].Mask()}
	want := [][]bool{{false, true, false, false}, {true, true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("shard masks mismatch (-want +got):\n%s", diff)
	}
	joined, err := sharding.Concat(shards)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(orig.Mask(), joined.Mask()); diff != "" {
		t.Errorf("Concat mask mismatch (-want +got):\n%s", diff)
	}
}

func TestSplitErrors(t *testing.T) {
	tests := []struct {
		name string
		t    *tensor.Dense
		n    int
		want []string
	}{
		{name: "nil", t: nil, n: 2, want: []string{"nil tensor"}},
		{name: "rank 0", t: tensor.New(tensor.FromScalar(float32(1))), n: 1,
			want: []string{"rank-0 tensor (shape ()) cannot be split along dim 0"}},
		{name: "too few rows", t: newTensor("float32", 3, 2), n: 4,
			want: []string{"batch of 3 rows cannot be split into 4 shards"}},
		{name: "zero rows", t: tensor.New(tensor.WithShape(0, 2), tensor.WithBacking([]float32{})), n: 1,
			want: []string{"batch of 0 rows cannot be split into 1 shard"}},
		{name: "n=0", t: newTensor("int64", 3), n: 0, want: []string{"at least 1, got 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sharding.Split(tc.t, tc.n)
			if err == nil {
				t.Fatalf("Split = %d shards, want error", len(got))
			}
			errContains(t, err, tc.want...)
		})
	}
}

// ---------------------------------------------------------------- SplitMap

func TestSplitMap(t *testing.T) {
	m := map[string]*tensor.Dense{
		"x":   newTensor("float32", 5, 2),
		"id":  newTensor("int64", 5),
		"ok":  newTensor("bool", 5, 1, 2),
		"txt": newTensor("string", 5),
	}
	shards, err := sharding.SplitMap(m, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]map[string]snap, len(shards))
	for i, s := range shards {
		got[i] = map[string]snap{}
		for k, v := range s {
			got[i][k] = snapOf(v)
		}
	}
	want := []map[string]snap{
		{
			"x":   {Shape: []int{3, 2}, Data: []float32{0.5, 1.5, 2.5, 3.5, 4.5, 5.5}},
			"id":  {Shape: []int{3}, Data: []int64{0, 10, 20}},
			"ok":  {Shape: []int{3, 1, 2}, Data: []bool{true, false, false, true, false, false}},
			"txt": {Shape: []int{3}, Data: []string{"s0", "s1", "s2"}},
		},
		{
			"x":   {Shape: []int{2, 2}, Data: []float32{6.5, 7.5, 8.5, 9.5}},
			"id":  {Shape: []int{2}, Data: []int64{30, 40}},
			"ok":  {Shape: []int{2, 1, 2}, Data: []bool{true, false, false, true}},
			"txt": {Shape: []int{2}, Data: []string{"s3", "s4"}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SplitMap mismatch (-want +got):\n%s", diff)
	}
	// Views, as with Split.
	shards[1]["id"].Data().([]int64)[0] = -1
	if diff := cmp.Diff([]int64{0, 10, 20, -1, 40}, m["id"].Data()); diff != "" {
		t.Errorf("SplitMap shard is not a view (-want +got):\n%s", diff)
	}
}

func TestSplitMapAbsent(t *testing.T) {
	for _, m := range []map[string]*tensor.Dense{nil, {}} {
		got, err := sharding.SplitMap(m, 3)
		if err != nil {
			t.Fatalf("SplitMap(%v, 3): %v", m, err)
		}
		want := []map[string]*tensor.Dense{nil, nil, nil}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("SplitMap(%v, 3) mismatch (-want +got):\n%s", m, diff)
		}
	}
}

func TestSplitMapErrors(t *testing.T) {
	scalar := tensor.New(tensor.FromScalar(int64(3)))
	tests := []struct {
		name string
		m    map[string]*tensor.Dense
		n    int
		want []string
	}{
		{
			name: "rank 0",
			m:    map[string]*tensor.Dense{"a": newTensor("float32", 4), "x": scalar},
			n:    2,
			want: []string{`feature "x": rank-0 tensor (shape ()) cannot be split along dim 0`},
		},
		{
			name: "nil tensor",
			m:    map[string]*tensor.Dense{"a": newTensor("float32", 4), "b": nil},
			n:    2,
			want: []string{`feature "b"`, "nil tensor"},
		},
		{
			name: "dim 0 disagreement",
			m:    map[string]*tensor.Dense{"a": newTensor("float32", 4, 2), "b": newTensor("int64", 3)},
			n:    2,
			want: []string{`"a"`, "(4, 2)", `"b"`, "(3)", "dim 0"},
		},
		{
			name: "disagreement names first sorted pair",
			m: map[string]*tensor.Dense{
				"c": newTensor("float32", 2, 2), "a": newTensor("float32", 4), "b": newTensor("bool", 3, 1),
				"d": newTensor("float32", 4),
			},
			n:    2,
			want: []string{`feature "a" has shape (4) but feature "b" has shape (3, 1)`},
		},
		{
			name: "too few rows",
			m:    map[string]*tensor.Dense{"x": newTensor("float64", 3, 2), "y": newTensor("int64", 3)},
			n:    4,
			want: []string{`feature "x"`, "batch of 3 rows cannot be split into 4 shards"},
		},
		{
			name: "n=0",
			m:    map[string]*tensor.Dense{"x": newTensor("float64", 3)},
			n:    0,
			want: []string{"at least 1, got 0"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Repeat: map iteration order must not change the error.
			first := ""
			for i := 0; i < 20; i++ {
				got, err := sharding.SplitMap(tc.m, tc.n)
				if err == nil {
					t.Fatalf("SplitMap = %v, want error", got)
				}
				errContains(t, err, tc.want...)
				if i == 0 {
					first = err.Error()
				} else if err.Error() != first {
					t.Fatalf("nondeterministic error: %q then %q", first, err)
				}
			}
		})
	}
}

// ---------------------------------------------------------------- SplitSizes

func TestSplitSizes(t *testing.T) {
	masked := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking(
		[]float64{0, 1, 2, 3, 4, 5}, []bool{false, true, false, false, true, true}))
	type shard struct {
		Shape []int
		Data  any
		Mask  []bool
	}
	tests := []struct {
		name  string
		t     *tensor.Dense
		sizes []int
		want  []shard
	}{
		{"one shard", newTensor("int64", 3), []int{3}, []shard{{[]int{3}, []int64{0, 10, 20}, nil}}},
		{"rows of requests", newTensor("float32", 5, 2), []int{1, 3, 1}, []shard{
			{[]int{1, 2}, []float32{0.5, 1.5}, nil},
			{[]int{3, 2}, []float32{2.5, 3.5, 4.5, 5.5, 6.5, 7.5}, nil},
			{[]int{1, 2}, []float32{8.5, 9.5}, nil},
		}},
		{"uneven, larger last", newTensor("string", 4), []int{1, 3}, []shard{
			{[]int{1}, []string{"s0"}, nil},
			{[]int{3}, []string{"s1", "s2", "s3"}, nil},
		}},
		{"an empty shard", newTensor("bool", 2, 1, 2), []int{2, 0}, []shard{
			{[]int{2, 1, 2}, []bool{true, false, false, true}, nil},
			{[]int{0, 1, 2}, []bool{}, nil},
		}},
		{"masked", masked, []int{1, 2}, []shard{
			{[]int{1, 2}, []float64{0, 1}, []bool{false, true}},
			{[]int{2, 2}, []float64{2, 3, 4, 5}, []bool{false, false, true, true}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			shards, err := sharding.SplitSizes(tc.t, tc.sizes)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]shard, len(shards))
			for i, s := range shards {
				var mask []bool
				if s.IsMasked() && s.Shape().TotalSize() > 0 {
					mask = s.Mask()
				}
				got[i] = shard{append([]int(nil), s.Shape()...), dataOf(s), mask}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SplitSizes(%v, %v) (-want +got):\n%s", tc.t.Shape(), tc.sizes, diff)
			}
		})
	}
}

// TestSplitSizesViews checks that SplitSizes's shards share the input's
// memory, and that appending to one does not clobber the next.
func TestSplitSizesViews(t *testing.T) {
	orig := newTensor("float64", 4)
	shards, err := sharding.SplitSizes(orig, []int{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	shards[1].Data().([]float64)[0] = -1
	_ = append(shards[0].Data().([]float64), 999) // must reallocate: capacity is clipped
	if diff := cmp.Diff([]float64{0, -1, 2.5, 3.75}, orig.Data()); diff != "" {
		t.Errorf("original after writing shard 1 and appending to shard 0 (-want +got):\n%s", diff)
	}
}

func TestSplitSizesErrors(t *testing.T) {
	tests := []struct {
		name  string
		t     *tensor.Dense
		sizes []int
		want  []string
	}{
		{"nil", nil, []int{1}, []string{"nil tensor"}},
		{"rank 0", tensor.New(tensor.FromScalar(float32(1))), []int{1}, []string{"rank-0 tensor (shape ()) cannot be split along dim 0"}},
		{"no sizes", newTensor("int64", 3), nil, []string{"no shard sizes"}},
		{"negative size", newTensor("int64", 3), []int{4, -1}, []string{"shard 1 has negative size -1"}},
		{"too few rows", newTensor("int64", 3, 2), []int{2, 2}, []string{"shard sizes [2 2] sum to 4, but the batch has 3 rows"}},
		{"too many rows", newTensor("int64", 1), []int{0}, []string{"sum to 0, but the batch has 1 row"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sharding.SplitSizes(tc.t, tc.sizes)
			if err == nil {
				t.Fatalf("SplitSizes = %d shards, want error", len(got))
			}
			errContains(t, err, tc.want...)
		})
	}
}

func TestSplitMapSizes(t *testing.T) {
	tests := []struct {
		name  string
		m     map[string]*tensor.Dense
		sizes []int
		want  []map[string]snap
	}{
		{"two keys", map[string]*tensor.Dense{"x": newTensor("float32", 3, 2), "id": newTensor("int64", 3)}, []int{2, 1},
			[]map[string]snap{
				{"x": {Shape: []int{2, 2}, Data: []float32{0.5, 1.5, 2.5, 3.5}}, "id": {Shape: []int{2}, Data: []int64{0, 10}}},
				{"x": {Shape: []int{1, 2}, Data: []float32{4.5, 5.5}}, "id": {Shape: []int{1}, Data: []int64{20}}},
			}},
		{"absent", nil, []int{2, 1}, []map[string]snap{nil, nil}},
		{"empty", map[string]*tensor.Dense{}, []int{4}, []map[string]snap{nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			shards, err := sharding.SplitMapSizes(tc.m, tc.sizes)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]map[string]snap, len(shards))
			for i, s := range shards {
				if s == nil {
					continue
				}
				got[i] = map[string]snap{}
				for k, v := range s {
					got[i][k] = snapOf(v)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SplitMapSizes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitMapSizesErrors(t *testing.T) {
	tests := []struct {
		name  string
		m     map[string]*tensor.Dense
		sizes []int
		want  []string
	}{
		{"no sizes", map[string]*tensor.Dense{"x": newTensor("float64", 3)}, nil, []string{"no shard sizes"}},
		{"sizes do not sum to the rows", map[string]*tensor.Dense{"x": newTensor("float64", 3), "y": newTensor("int64", 3)}, []int{1, 1},
			[]string{`feature "x": shard sizes [1 1] sum to 2, but the batch has 3 rows`}},
		{"dim 0 disagreement", map[string]*tensor.Dense{"a": newTensor("float32", 4, 2), "b": newTensor("int64", 3)}, []int{4},
			[]string{`feature "a" has shape (4, 2) but feature "b" has shape (3)`}},
		{"nil tensor", map[string]*tensor.Dense{"a": newTensor("float32", 4), "b": nil}, []int{4}, []string{`feature "b": cannot split a nil tensor`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sharding.SplitMapSizes(tc.m, tc.sizes)
			if err == nil {
				t.Fatalf("SplitMapSizes = %v, want error", got)
			}
			errContains(t, err, tc.want...)
		})
	}
}

// ---------------------------------------------------------------- Concat

func TestConcatSplitRoundTrip(t *testing.T) {
	shapes := [][]int{
		{1}, {2}, {7}, {16},
		{1, 3}, {3, 1}, {5, 4}, {9, 2},
		{2, 3, 4}, {7, 1, 5}, {6, 2, 2},
		{3, 2, 1, 2},
		{4, 0},
	}
	for _, dtype := range []string{"float32", "float64", "int64", "bool", "string"} {
		for _, shape := range shapes {
			for n := 1; n <= shape[0]; n++ {
				orig := newTensor(dtype, shape...)
				shards, err := sharding.Split(orig, n)
				if err != nil {
					t.Fatalf("%s %v n=%d: Split: %v", dtype, shape, n, err)
				}
				got, err := sharding.Concat(shards)
				if err != nil {
					t.Fatalf("%s %v n=%d: Concat: %v", dtype, shape, n, err)
				}
				if diff := cmp.Diff(snapOf(orig), snapOf(got)); diff != "" {
					t.Fatalf("%s %v n=%d: Concat(Split(t)) mismatch (-want +got):\n%s", dtype, shape, n, diff)
				}
				if got.Dtype() != orig.Dtype() {
					t.Fatalf("%s %v n=%d: Concat dtype %v", dtype, shape, n, got.Dtype())
				}
				// The result is a copy.
				if product(shape) > 0 {
					flip(got.Data(), 0)
					if diff := cmp.Diff(seq(dtype, product(shape)), orig.Data()); diff != "" {
						t.Fatalf("%s %v n=%d: writing Concat result changed the input (-want +got):\n%s", dtype, shape, n, diff)
					}
				}
			}
		}
	}
}

func TestConcatZeroRowShard(t *testing.T) {
	shards := []*tensor.Dense{
		tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int64{1, 2, 3, 4})),
		tensor.New(tensor.WithShape(0, 2), tensor.WithBacking([]int64{})),
		tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]int64{5, 6})),
	}
	got, err := sharding.Concat(shards)
	if err != nil {
		t.Fatal(err)
	}
	want := snap{Shape: []int{3, 2}, Data: []int64{1, 2, 3, 4, 5, 6}}
	if diff := cmp.Diff(want, snapOf(got)); diff != "" {
		t.Errorf("Concat mismatch (-want +got):\n%s", diff)
	}

	empty, err := sharding.Concat(shards[1:2])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snap{Shape: []int{0, 2}, Data: []int64{}}, snapOf(empty)); diff != "" {
		t.Errorf("Concat of one empty shard mismatch (-want +got):\n%s", diff)
	}
}

func TestConcatNonContiguousShard(t *testing.T) {
	a := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{0, 1, 2, 3, 4, 5}))
	if err := a.T(); err != nil { // logical (3, 2): [[0 3] [1 4] [2 5]]
		t.Fatal(err)
	}
	b := tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float64{6, 7}))
	got, err := sharding.Concat([]*tensor.Dense{a, b})
	if err != nil {
		t.Fatal(err)
	}
	want := snap{Shape: []int{4, 2}, Data: []float64{0, 3, 1, 4, 2, 5, 6, 7}}
	if diff := cmp.Diff(want, snapOf(got)); diff != "" {
		t.Errorf("Concat mismatch (-want +got):\n%s", diff)
	}
}

func TestConcatErrors(t *testing.T) {
	f := func(shape ...int) *tensor.Dense { return newTensor("float32", shape...) }
	tests := []struct {
		name   string
		shards []*tensor.Dense
		want   []string
	}{
		{name: "zero shards", shards: nil, want: []string{"zero shards"}},
		{name: "nil shard", shards: []*tensor.Dense{f(2), nil}, want: []string{"shard 1 is nil"}},
		{name: "rank 0", shards: []*tensor.Dense{f(2), tensor.New(tensor.FromScalar(float32(1)))},
			want: []string{"shard 1", "shape ()"}},
		{name: "dtype", shards: []*tensor.Dense{f(2, 2), newTensor("float64", 2, 2)},
			want: []string{"shard 1", "float64", "float32"}},
		{name: "trailing dims", shards: []*tensor.Dense{f(2, 3), f(1, 3), f(2, 4)},
			want: []string{"shard 2", "(2, 4)", "(2, 3)"}},
		{name: "rank", shards: []*tensor.Dense{f(2, 3), f(2, 3, 1)},
			want: []string{"shard 1", "(2, 3, 1)", "(2, 3)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sharding.Concat(tc.shards)
			if err == nil {
				t.Fatalf("Concat = %v, want error", got)
			}
			errContains(t, err, tc.want...)
		})
	}
}

// ---------------------------------------------------------------- ConcatMap

func TestConcatMapRoundTrip(t *testing.T) {
	m := map[string]*tensor.Dense{
		"x": newTensor("float64", 7, 3),
		"y": newTensor("int64", 7),
		"b": newTensor("bool", 7, 2, 1),
	}
	for n := 1; n <= 7; n++ {
		shards, err := sharding.SplitMap(m, n)
		if err != nil {
			t.Fatalf("n=%d: SplitMap: %v", n, err)
		}
		got, err := sharding.ConcatMap(shards)
		if err != nil {
			t.Fatalf("n=%d: ConcatMap: %v", n, err)
		}
		wantS, gotS := map[string]snap{}, map[string]snap{}
		for k, v := range m {
			wantS[k] = snapOf(v)
		}
		for k, v := range got {
			gotS[k] = snapOf(v)
		}
		if diff := cmp.Diff(wantS, gotS); diff != "" {
			t.Fatalf("n=%d: ConcatMap(SplitMap(m)) mismatch (-want +got):\n%s", n, diff)
		}
	}
}

func TestConcatMapAbsent(t *testing.T) {
	shards, err := sharding.SplitMap(nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sharding.ConcatMap(shards)
	if err != nil {
		t.Fatal(err)
	}
	if got != nil {
		t.Errorf("ConcatMap of absent maps = %v, want nil", got)
	}
}

func TestConcatMapErrors(t *testing.T) {
	f := func(shape ...int) *tensor.Dense { return newTensor("float32", shape...) }
	tests := []struct {
		name   string
		shards []map[string]*tensor.Dense
		want   []string
	}{
		{name: "zero shards", shards: nil, want: []string{"zero shards"}},
		{
			name: "missing in later shard",
			shards: []map[string]*tensor.Dense{
				{"x": f(2), "y": f(2)}, {"x": f(1), "y": f(1)}, {"x": f(1)},
			},
			want: []string{`feature "y" is missing from shard 2`},
		},
		{
			name: "extra in later shard",
			shards: []map[string]*tensor.Dense{
				{"x": f(2)}, {"x": f(1), "z": f(1)},
			},
			want: []string{`feature "z" is missing from shard 0`, "shard 1"},
		},
		{
			name: "absent in one shard only",
			shards: []map[string]*tensor.Dense{
				nil, {"x": f(1)},
			},
			want: []string{`feature "x" is missing from shard 0`},
		},
		{
			name: "shape mismatch names key",
			shards: []map[string]*tensor.Dense{
				{"x": f(2, 2)}, {"x": f(1, 3)},
			},
			want: []string{`feature "x"`, "shard 1", "(1, 3)", "(2, 2)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sharding.ConcatMap(tc.shards)
			if err == nil {
				t.Fatalf("ConcatMap = %v, want error", got)
			}
			errContains(t, err, tc.want...)
		})
	}
}

// ---------------------------------------------------------------- sparse

// sparseSnap is a comparable snapshot of a SparseCOO.
type sparseSnap struct {
	Indices    [][]int
	Values     any
	DenseShape []int
}

func sparseSnapOf(s sharding.SparseCOO) sparseSnap {
	return sparseSnap{Indices: s.Indices, Values: dataOf(s.Values), DenseShape: s.DenseShape}
}

func TestSplitSparse(t *testing.T) {
	// Dense shape [5, 3] split 3 ways: rows {0,1} {2,3} {4}. Rows 2 and 3
	// hold no entries, so shard 1 comes out empty. Entries are deliberately
	// not in row-major order.
	s := sharding.SparseCOO{
		Indices:    [][]int{{4, 2}, {0, 1}, {1, 0}, {0, 0}, {4, 0}},
		Values:     tensor.New(tensor.WithShape(5), tensor.WithBacking([]float32{1, 2, 3, 4, 5})),
		DenseShape: []int{5, 3},
	}
	shards, err := sharding.SplitSparse(s, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []sparseSnap{
		{Indices: [][]int{{0, 1}, {1, 0}, {0, 0}}, Values: []float32{2, 3, 4}, DenseShape: []int{2, 3}},
		{Indices: [][]int{}, Values: []float32{}, DenseShape: []int{2, 3}},
		{Indices: [][]int{{0, 2}, {0, 0}}, Values: []float32{1, 5}, DenseShape: []int{1, 3}},
	}
	var got []sparseSnap
	for i, sh := range shards {
		got = append(got, sparseSnapOf(sh))
		if err := sh.Validate(); err != nil {
			t.Errorf("shard %d invalid: %v", i, err)
		}
		if diff := cmp.Diff([]int{len(sh.Indices)}, []int(sh.Values.Shape())); diff != "" {
			t.Errorf("shard %d Values shape mismatch (-want +got):\n%s", i, diff)
		}
		if sh.Values.Dtype() != tensor.Float32 {
			t.Errorf("shard %d Values dtype %v, want float32", i, sh.Values.Dtype())
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SplitSparse mismatch (-want +got):\n%s", diff)
	}
	// The input is untouched (indices were re-based in copies).
	if diff := cmp.Diff([][]int{{4, 2}, {0, 1}, {1, 0}, {0, 0}, {4, 0}}, s.Indices); diff != "" {
		t.Errorf("SplitSparse modified the input indices (-want +got):\n%s", diff)
	}
}

func TestSplitSparseRank1AndRank3(t *testing.T) {
	t.Run("rank 1", func(t *testing.T) {
		s := sharding.SparseCOO{
			Indices:    [][]int{{6}, {1}, {3}, {2}},
			Values:     tensor.New(tensor.WithShape(4), tensor.WithBacking([]int64{60, 10, 30, 20})),
			DenseShape: []int{7},
		}
		shards, err := sharding.SplitSparse(s, 2) // rows {0..3} {4..6}
		if err != nil {
			t.Fatal(err)
		}
		want := []sparseSnap{
			{Indices: [][]int{{1}, {3}, {2}}, Values: []int64{10, 30, 20}, DenseShape: []int{4}},
			{Indices: [][]int{{2}}, Values: []int64{60}, DenseShape: []int{3}},
		}
		got := []sparseSnap{sparseSnapOf(shards[0]), sparseSnapOf(shards[1])}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("SplitSparse mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("rank 3", func(t *testing.T) {
		s := sharding.SparseCOO{
			Indices:    [][]int{{0, 1, 1}, {2, 0, 3}, {3, 1, 0}, {1, 0, 0}},
			Values:     tensor.New(tensor.WithShape(4), tensor.WithBacking([]bool{true, true, false, true})),
			DenseShape: []int{4, 2, 4},
		}
		shards, err := sharding.SplitSparse(s, 4)
		if err != nil {
			t.Fatal(err)
		}
		want := []sparseSnap{
			{Indices: [][]int{{0, 1, 1}}, Values: []bool{true}, DenseShape: []int{1, 2, 4}},
			{Indices: [][]int{{0, 0, 0}}, Values: []bool{true}, DenseShape: []int{1, 2, 4}},
			{Indices: [][]int{{0, 0, 3}}, Values: []bool{true}, DenseShape: []int{1, 2, 4}},
			{Indices: [][]int{{0, 1, 0}}, Values: []bool{false}, DenseShape: []int{1, 2, 4}},
		}
		var got []sparseSnap
		for _, sh := range shards {
			got = append(got, sparseSnapOf(sh))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("SplitSparse mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestSplitSparseErrors(t *testing.T) {
	vals := func(n int) *tensor.Dense {
		return tensor.New(tensor.WithShape(n), tensor.WithBacking(seq("float64", n)))
	}
	tests := []struct {
		name string
		s    sharding.SparseCOO
		n    int
		want []string
	}{
		{name: "too few rows", s: sharding.SparseCOO{Indices: [][]int{{0, 0}}, Values: vals(1), DenseShape: []int{2, 2}},
			n: 3, want: []string{"batch of 2 rows cannot be split into 3 shards"}},
		{name: "invalid", s: sharding.SparseCOO{Indices: [][]int{{2, 0}}, Values: vals(1), DenseShape: []int{2, 2}},
			n: 1, want: []string{"out of range"}},
		{name: "n=0", s: sharding.SparseCOO{Indices: [][]int{}, Values: vals(0), DenseShape: []int{2}},
			n: 0, want: []string{"at least 1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sharding.SplitSparse(tc.s, tc.n)
			if err == nil {
				t.Fatalf("SplitSparse = %v, want error", got)
			}
			errContains(t, err, tc.want...)
		})
	}
}

func TestValidate(t *testing.T) {
	vals := func(n int) *tensor.Dense { return tensor.New(tensor.WithShape(n), tensor.WithBacking(seq("int64", n))) }
	tests := []struct {
		name string
		s    sharding.SparseCOO
		want string // "" means valid
	}{
		{name: "valid", s: sharding.SparseCOO{Indices: [][]int{{1, 2}, {0, 0}}, Values: vals(2), DenseShape: []int{2, 3}}},
		{name: "valid empty", s: sharding.SparseCOO{Indices: nil, Values: vals(0), DenseShape: []int{4, 3}}},
		{name: "rank 0", s: sharding.SparseCOO{Values: vals(0)}, want: "rank 0"},
		{name: "negative dim", s: sharding.SparseCOO{Values: vals(0), DenseShape: []int{2, -1}}, want: "negative dim 1"},
		{name: "nil values", s: sharding.SparseCOO{DenseShape: []int{2}}, want: "nil Values"},
		{name: "values rank 2", s: sharding.SparseCOO{Indices: [][]int{{0}, {1}},
			Values: tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]int64{1, 2})), DenseShape: []int{2}},
			want: "rank 1, got shape (2, 1)"},
		{name: "count mismatch", s: sharding.SparseCOO{Indices: [][]int{{0}}, Values: vals(2), DenseShape: []int{2}},
			want: "1 indices but 2 values"},
		{name: "index rank", s: sharding.SparseCOO{Indices: [][]int{{0}}, Values: vals(1), DenseShape: []int{2, 2}},
			want: "entry 0 has index [0] of rank 1"},
		{name: "out of range", s: sharding.SparseCOO{Indices: [][]int{{0, 0}, {1, 3}}, Values: vals(2), DenseShape: []int{2, 3}},
			want: "entry 1 has index [1 3] out of range for dense shape [2 3]"},
		{name: "negative index", s: sharding.SparseCOO{Indices: [][]int{{-1, 0}}, Values: vals(1), DenseShape: []int{2, 3}},
			want: "out of range"},
		{name: "elements overflow", s: sharding.SparseCOO{Values: vals(0), DenseShape: []int{1 << 32, 1 << 32}},
			want: "dense shape: shape [4294967296 4294967296] is too large"},
		{name: "elements overflow far", s: sharding.SparseCOO{Values: vals(0), DenseShape: []int{3, 1 << 62}},
			want: "dense shape: shape [3 4611686018427387904] is too large"},
		{name: "bytes overflow", s: sharding.SparseCOO{Values: vals(0), DenseShape: []int{3, 1 << 45}},
			want: "elements of 8 bytes need more than"},
		{name: "zero-sized and huge", s: sharding.SparseCOO{Values: vals(0), DenseShape: []int{0, 1 << 62}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			errContains(t, err, tc.want)
		})
	}
}

func TestDense(t *testing.T) {
	tests := []struct {
		name string
		s    sharding.SparseCOO
		want snap
	}{
		{
			name: "duplicates summed",
			s: sharding.SparseCOO{
				Indices:    [][]int{{0, 1}, {1, 2}, {0, 1}},
				Values:     tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{1.5, 2, 3})),
				DenseShape: []int{2, 3},
			},
			want: snap{Shape: []int{2, 3}, Data: []float64{0, 4.5, 0, 0, 0, 2}},
		},
		{
			name: "int64 duplicates summed",
			s: sharding.SparseCOO{
				Indices:    [][]int{{2}, {2}, {0}},
				Values:     tensor.New(tensor.WithShape(3), tensor.WithBacking([]int64{5, -2, 7})),
				DenseShape: []int{3},
			},
			want: snap{Shape: []int{3}, Data: []int64{7, 0, 3}},
		},
		{
			name: "bool duplicates ORed",
			s: sharding.SparseCOO{
				Indices:    [][]int{{1}, {1}, {0}},
				Values:     tensor.New(tensor.WithShape(3), tensor.WithBacking([]bool{true, false, false})),
				DenseShape: []int{2},
			},
			want: snap{Shape: []int{2}, Data: []bool{false, true}},
		},
		{
			name: "strings",
			s: sharding.SparseCOO{
				Indices:    [][]int{{1, 0}, {0, 1}},
				Values:     tensor.New(tensor.WithShape(2), tensor.WithBacking([]string{"a", "b"})),
				DenseShape: []int{2, 2},
			},
			want: snap{Shape: []int{2, 2}, Data: []string{"", "b", "a", ""}},
		},
		{
			name: "no entries",
			s: sharding.SparseCOO{
				Values:     tensor.New(tensor.WithShape(0), tensor.WithBacking([]float32{})),
				DenseShape: []int{2, 1, 2},
			},
			want: snap{Shape: []int{2, 1, 2}, Data: []float32{0, 0, 0, 0}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.s.Dense()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, snapOf(got)); diff != "" {
				t.Errorf("Dense mismatch (-want +got):\n%s", diff)
			}
		})
	}

	dup := sharding.SparseCOO{
		Indices:    [][]int{{1}, {1}},
		Values:     tensor.New(tensor.WithShape(2), tensor.WithBacking([]string{"a", "b"})),
		DenseShape: []int{2},
	}
	_, err := dup.Dense()
	errContains(t, err, "entry 1 repeats index [1]", "string")
}

// randomSparse builds a random valid sparse tensor (duplicates allowed,
// entries in random order) with at least n rows.
func randomSparse(r *rand.Rand, n int, dtype string) sharding.SparseCOO {
	rank := 1 + r.IntN(3)
	shape := make([]int, rank)
	shape[0] = n + r.IntN(10)
	for d := 1; d < rank; d++ {
		shape[d] = 1 + r.IntN(4)
	}
	nnz := r.IntN(2 * product(shape))
	indices := make([][]int, nnz)
	for i := range indices {
		idx := make([]int, rank)
		for d := range idx {
			idx[d] = r.IntN(shape[d])
		}
		indices[i] = idx
	}
	var vals any
	switch dtype {
	case "float64":
		v := make([]float64, nnz)
		for i := range v {
			v[i] = float64(r.IntN(1000)) / 8 // exact in binary: sums are order-independent
		}
		vals = v
	case "int64":
		v := make([]int64, nnz)
		for i := range v {
			v[i] = r.Int64N(2000) - 1000
		}
		vals = v
	case "bool":
		v := make([]bool, nnz)
		for i := range v {
			v[i] = r.IntN(2) == 0
		}
		vals = v
	}
	return sharding.SparseCOO{
		Indices:    indices,
		Values:     tensor.New(tensor.WithShape(nnz), tensor.WithBacking(vals)),
		DenseShape: shape,
	}
}

func TestSplitSparseProperty(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 42))
		dtype := []string{"float64", "int64", "bool"}[seed%3]
		n := 1 + r.IntN(5)
		s := randomSparse(r, n, dtype)
		shards, err := sharding.SplitSparse(s, n)
		if err != nil {
			t.Fatalf("seed %d: SplitSparse: %v", seed, err)
		}
		sizes, err := sharding.Sizes(s.DenseShape[0], n)
		if err != nil {
			t.Fatalf("seed %d: Sizes: %v", seed, err)
		}
		dense := make([]*tensor.Dense, n)
		nnz := 0
		for i, sh := range shards {
			if err := sh.Validate(); err != nil {
				t.Fatalf("seed %d: shard %d invalid: %v", seed, i, err)
			}
			wantShape := append([]int{sizes[i]}, s.DenseShape[1:]...)
			if diff := cmp.Diff(wantShape, sh.DenseShape); diff != "" {
				t.Fatalf("seed %d: shard %d dense shape mismatch (-want +got):\n%s", seed, i, diff)
			}
			if sh.Values.Dtype() != s.Values.Dtype() {
				t.Fatalf("seed %d: shard %d dtype %v, want %v", seed, i, sh.Values.Dtype(), s.Values.Dtype())
			}
			nnz += len(sh.Indices)
			if dense[i], err = sh.Dense(); err != nil {
				t.Fatalf("seed %d: shard %d Dense: %v", seed, i, err)
			}
		}
		if nnz != len(s.Indices) {
			t.Fatalf("seed %d: shards hold %d entries, input %d", seed, nnz, len(s.Indices))
		}
		got, err := sharding.Concat(dense)
		if err != nil {
			t.Fatalf("seed %d: Concat: %v", seed, err)
		}
		want, err := s.Dense()
		if err != nil {
			t.Fatalf("seed %d: Dense: %v", seed, err)
		}
		if diff := cmp.Diff(snapOf(want), snapOf(got)); diff != "" {
			t.Fatalf("seed %d (shape %v, n=%d): concat of densified shards != densified input (-want +got):\n%s",
				seed, s.DenseShape, n, diff)
		}
	}
}

// ---------------------------------------------------------------- examples

func ExampleSplit() {
	batch := tensor.New(tensor.WithShape(5, 2), tensor.WithBacking([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}))
	shards, err := sharding.Split(batch, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, s := range shards {
		fmt.Printf("shard %d: shape %v data %v\n", i, s.Shape(), s.Data())
	}

	// Shards are views of the batch.
	shards[1].Data().([]float32)[0] = 60
	fmt.Println("batch after writing shard 1:", batch.Data())

	joined, _ := sharding.Concat(shards)
	fmt.Println("joined:", joined.Shape(), joined.Data())

	_, err = sharding.Split(batch, 6)
	fmt.Println("error:", err)
	// Output:
	// shard 0: shape (3, 2) data [0 1 2 3 4 5]
	// shard 1: shape (2, 2) data [6 7 8 9]
	// batch after writing shard 1: [0 1 2 3 4 5 60 7 8 9]
	// joined: (5, 2) [0 1 2 3 4 5 60 7 8 9]
	// error: batch of 5 rows cannot be split into 6 shards
}

func ExampleSplitSparse() {
	// A [5 3] sparse tensor with entries in rows 0, 1 and 4.
	s := sharding.SparseCOO{
		Indices:    [][]int{{0, 1}, {1, 0}, {4, 2}},
		Values:     tensor.New(tensor.WithShape(3), tensor.WithBacking([]int64{10, 20, 30})),
		DenseShape: []int{5, 3},
	}
	shards, err := sharding.SplitSparse(s, 3) // rows {0 1} {2 3} {4}
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, sh := range shards {
		n := len(sh.Indices)
		var vals any = []int64{}
		if n > 0 {
			vals = sh.Values.Data()
		}
		fmt.Printf("shard %d: dense shape %v indices %v values %v\n", i, sh.DenseShape, sh.Indices, vals)
	}
	d, _ := shards[2].Dense()
	fmt.Println("shard 2 densified:", d.Data())
	// Output:
	// shard 0: dense shape [2 3] indices [[0 1] [1 0]] values [10 20]
	// shard 1: dense shape [2 3] indices [] values []
	// shard 2: dense shape [1 3] indices [[0 2]] values [30]
	// shard 2 densified: [0 0 30]
}

// TestSplitSparseAllocations: splitting a sparse feature costs a few
// allocations a shard, not some per entry (its indices share one array,
// its values are gathered without reflection), and a shard's index is a
// full slice: appending to one leaves the next alone.
func TestSplitSparseAllocations(t *testing.T) {
	const rows, nnz = 100, 1000
	idx := make([][]int, nnz)
	vals := make([]int64, nnz)
	for i := range idx {
		idx[i] = []int{(i * 7) % rows, i % 3}
		vals[i] = int64(i)
	}
	s := sharding.SparseCOO{Indices: idx, Values: tensor.New(tensor.WithShape(nnz), tensor.WithBacking(vals)), DenseShape: []int{rows, 3}}
	var parts []sharding.SparseCOO
	var err error
	allocs := testing.AllocsPerRun(3, func() { parts, err = sharding.SplitSparse(s, 2) })
	if err != nil {
		t.Fatal(err)
	}
	if allocs > 100 {
		t.Errorf("SplitSparse of %d entries into 2 shards: %v allocations, want at most 100", nnz, allocs)
	}
	first, second := parts[0].Indices[0], parts[0].Indices[1]
	want := slices.Clone(second)
	_ = append(first, -1)
	if !slices.Equal(second, want) {
		t.Errorf("appending to index 0 changed index 1 to %v, want %v", second, want)
	}
}
