package numeric_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/wanterr"
)

func matrix(rows, cols int, vals ...float64) *tensor.Dense {
	return tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(vals))
}

func TestSlice(t *testing.T) {
	f64 := G.F64(2.5)
	f32 := G.F32(1.5)
	tests := []struct {
		name  string
		value func() G.Value
		want  any
	}{
		{"dense matrix", func() G.Value { return matrix(2, 2, 1, 2, 3, 4) }, []float64{1, 2, 3, 4}},
		{"dense vector int", func() G.Value { return tensor.New(tensor.WithBacking([]int64{7, 8, 9})) }, []int64{7, 8, 9}},
		{"dense one element", func() G.Value { return tensor.New(tensor.WithShape(1), tensor.WithBacking([]float32{3})) }, []float32{3}},
		{"dense scalar", func() G.Value { return tensor.New(tensor.FromScalar(4.5)) }, []float64{4.5}},
		{"dense bool scalar", func() G.Value { return tensor.New(tensor.FromScalar(true)) }, []bool{true}},
		{"empty dense", func() G.Value { return tensor.New(tensor.WithShape(0, 2), tensor.WithBacking([]float64{})) }, []float64{}},
		{"*G.F64", func() G.Value { return &f64 }, []float64{2.5}},
		{"*G.F32", func() G.Value { return &f32 }, []float32{1.5}},
		{"transposed view", func() G.Value {
			m := matrix(2, 3, 1, 2, 3, 4, 5, 6)
			if err := m.T(); err != nil {
				panic(err)
			}
			return m
		}, []float64{1, 4, 2, 5, 3, 6}},
		{"sliced view", func() G.Value {
			m := matrix(3, 2, 1, 2, 3, 4, 5, 6)
			v, err := m.Slice(G.S(1, 3))
			if err != nil {
				panic(err)
			}
			return v.(*tensor.Dense)
		}, []float64{3, 4, 5, 6}},
		{"column view (non-contiguous)", func() G.Value {
			m := matrix(3, 2, 1, 2, 3, 4, 5, 6)
			v, err := m.Slice(nil, G.S(1))
			if err != nil {
				panic(err)
			}
			return v.(*tensor.Dense)
		}, []float64{2, 4, 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := numeric.Slice(tc.value())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSliceSharesContiguousBacking(t *testing.T) {
	d := matrix(2, 2, 1, 2, 3, 4)
	s, err := numeric.Slice(d)
	if err != nil {
		t.Fatal(err)
	}
	s.([]float64)[0] = 9
	if got := d.Data().([]float64)[0]; got != 9 {
		t.Errorf("a contiguous tensor's Slice is a copy: tensor[0] = %v after writing 9", got)
	}
	// A view is materialized: writing the result leaves the source alone.
	m := matrix(2, 2, 1, 2, 3, 4)
	if err := m.T(); err != nil {
		t.Fatal(err)
	}
	v, err := numeric.Slice(m)
	if err != nil {
		t.Fatal(err)
	}
	v.([]float64)[1] = 9
	if diff := cmp.Diff([]float64{1, 2, 3, 4}, m.Data()); diff != "" {
		t.Errorf("writing a view's slice changed the source (-want +got):\n%s", diff)
	}
}

func TestSliceNil(t *testing.T) {
	if _, err := numeric.Slice(nil); err == nil {
		t.Error("Slice(nil): no error")
	}
}

func TestWeightedSum(t *testing.T) {
	// long crosses WeightedSum's chunks: element i of part k is k·i.
	long := func(k int) []float64 {
		s := make([]float64, 5000)
		for i := range s {
			s[i] = float64(k * i)
		}
		return s
	}
	longWant := long(0)
	for i := range longWant {
		longWant[i] = 1*float64(i) + 0.5*float64(2*i) // parts 1 and 2
	}
	tests := []struct {
		name    string
		dst     any
		parts   []any
		weights []float64
		want    any
		wantErr []string
	}{
		{"float64 unit weights", []float64{9, 9}, []any{[]float64{1, 2}, []float64{10, 20}}, []float64{1, 1}, []float64{11, 22}, nil},
		{"float64 weights", []float64{9, 9}, []any{[]float64{1, 2}, []float64{10, 20}}, []float64{0.5, 0.25}, []float64{3, 6}, nil},
		{"nil part skipped", []float64{9, 9}, []any{nil, []float64{10, 20}}, []float64{1, 0.5}, []float64{5, 10}, nil},
		{"all nil is zero", []float64{9, 9}, []any{nil, nil}, []float64{1, 1}, []float64{0, 0}, nil},
		{"float32", []float32{9}, []any{[]float32{0.5}, []float32{0.25}, []float32{4}}, []float64{1, 1, 0.5}, []float32{2.75}, nil},
		{"chunks", make([]float64, 5000), []any{nil, long(1), long(2)}, []float64{3, 1, 0.5}, longWant, nil},
		{"empty", []float64{}, []any{[]float64{}}, []float64{3}, []float64{}, nil},
		{"dtype mismatch", []float64{1, 2}, []any{[]float64{1, 2}, []float32{1, 2}}, []float64{1, 1}, []float64{1, 2}, []string{"part 1", "[]float32", "[]float64"}},
		{"length mismatch", []float64{1, 2}, []any{[]float64{1, 2, 3}}, []float64{1}, []float64{1, 2}, []string{"part 0", "3×", "2×"}},
		{"weights", []float64{1}, []any{[]float64{1}}, nil, []float64{1}, []string{"1 parts, 0 weights"}},
		{"not float", []int{1}, []any{[]int{1}}, []float64{1}, []int{1}, []string{"[]int", "not float32 or float64"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := numeric.WeightedSum(tc.dst, tc.parts, tc.weights)
			if tc.wantErr == nil && err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != nil {
				wanterr.Mentions(t, err, tc.wantErr...)
			}
			if diff := cmp.Diff(tc.want, tc.dst); diff != "" {
				t.Errorf("dst (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWeightedSumUnitWeightsArePlainSum: with weight 1 no multiply
// happens, so the result is bit-for-bit the float sum in part order.
func TestWeightedSumUnitWeightsArePlainSum(t *testing.T) {
	a, b, c := 0.1, 0.2, 0.3
	dst := []float64{0}
	if err := numeric.WeightedSum(dst, []any{[]float64{a}, []float64{b}, []float64{c}}, []float64{1, 1, 1}); err != nil {
		t.Fatal(err)
	}
	if dst[0] != (a+b)+c {
		t.Errorf("got %v, want %v", dst[0], (a+b)+c)
	}
}

func TestFloat64s(t *testing.T) {
	vec := func(backing any) G.Value { return tensor.New(tensor.WithBacking(backing)) }
	f64, f32 := G.F64(-1.25), G.F32(0.5)
	tests := []struct {
		name  string
		value G.Value
		want  []float64
	}{
		{"float64", vec([]float64{1.5, -2}), []float64{1.5, -2}},
		{"float32", vec([]float32{0.25, -3}), []float64{0.25, -3}},
		{"int", vec([]int{1, -2}), []float64{1, -2}},
		{"int64", vec([]int64{1 << 40, -2}), []float64{1 << 40, -2}},
		{"int32", vec([]int32{3, -4}), []float64{3, -4}},
		{"int16", vec([]int16{5, -6}), []float64{5, -6}},
		{"int8", vec([]int8{7, -8}), []float64{7, -8}},
		{"uint", vec([]uint{9}), []float64{9}},
		{"uint64", vec([]uint64{10}), []float64{10}},
		{"uint32", vec([]uint32{11}), []float64{11}},
		{"uint16", vec([]uint16{12}), []float64{12}},
		{"uint8", vec([]uint8{13, 255}), []float64{13, 255}},
		{"bool", vec([]bool{true, false, true}), []float64{1, 0, 1}},
		{"matrix row-major", matrix(2, 2, 1, 2, 3, 4), []float64{1, 2, 3, 4}},
		{"dense scalar int", tensor.New(tensor.FromScalar(int64(3))), []float64{3}},
		{"*G.F64", &f64, []float64{-1.25}},
		{"*G.F32", &f32, []float64{0.5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := numeric.Float64s(tc.value)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFloat64sCopies(t *testing.T) {
	backing := []float64{1, 2}
	got, err := numeric.Float64s(tensor.New(tensor.WithBacking(backing)))
	if err != nil {
		t.Fatal(err)
	}
	got[0] = 9
	if backing[0] != 1 {
		t.Error("Float64s returned the float64 backing, not a copy")
	}
}

func TestFloat64sErrors(t *testing.T) {
	for _, v := range []G.Value{nil, tensor.New(tensor.WithBacking([]string{"a"})), tensor.New(tensor.WithBacking([]complex128{1}))} {
		if got, err := numeric.Float64s(v); err == nil {
			t.Errorf("Float64s(%v) = %v, want an error", v, got)
		}
	}
}

func TestSetFloat64s(t *testing.T) {
	tests := []struct {
		name    string
		dst     any
		vals    []float64
		want    any
		wantErr []string
	}{
		{"float64", []float64{0, 0}, []float64{1.5, 2}, []float64{1.5, 2}, nil},
		{"float32 rounds", []float32{0}, []float64{0.1}, []float32{0.1}, nil},
		{"too many values", []float64{0}, []float64{1, 2}, []float64{0}, []string{"2 values", "1 elements"}},
		{"too few values float32", []float32{0, 0}, []float64{1}, []float32{0, 0}, []string{"1 values", "2 elements"}},
		{"int dst", []int{0}, []float64{1}, []int{0}, []string{"[]int", "not float32 or float64"}},
		{"bool dst", []bool{false}, []float64{1}, []bool{false}, []string{"[]bool"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := numeric.SetFloat64s(tc.dst, tc.vals)
			if tc.wantErr == nil && err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != nil {
				wanterr.Mentions(t, err, tc.wantErr...)
			}
			if diff := cmp.Diff(tc.want, tc.dst); diff != "" {
				t.Errorf("dst (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOverSharesMemory(t *testing.T) {
	backing := []float64{1, 2, 3, 4, 5, 6}
	a := numeric.Over(tensor.Shape{2, 3}, backing)
	b := numeric.Over(tensor.Shape{3, 2}, backing)
	if diff := cmp.Diff([]int{2, 3}, []int(a.Shape())); diff != "" {
		t.Errorf("shape (-want +got):\n%s", diff)
	}
	if err := a.SetAt(10.0, 1, 0); err != nil {
		t.Fatal(err)
	}
	if backing[3] != 10 {
		t.Errorf("writing through the header left the backing at %v", backing[3])
	}
	backing[5] = 60
	if got, _ := b.At(2, 1); got != 60.0 {
		t.Errorf("second header reads %v after writing the backing, want 60", got)
	}
	// Headers are distinct: reshaping one leaves the other alone.
	if err := a.Reshape(6); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{3, 2}, []int(b.Shape())); diff != "" {
		t.Errorf("reshaping one header changed the other (-want +got):\n%s", diff)
	}
	// The shape is cloned, not aliased.
	shape := tensor.Shape{2, 3}
	c := numeric.Over(shape, backing)
	shape[0] = 99
	if c.Shape()[0] != 2 {
		t.Errorf("Over aliases the caller's shape: %v", c.Shape())
	}
}

func TestOverScalar(t *testing.T) {
	backing := []float64{7}
	s := numeric.Over(tensor.Shape{}, backing)
	if !s.IsScalar() {
		t.Fatalf("rank-0 shape gave shape %v", s.Shape())
	}
	if got := s.Data(); got != 7.0 {
		t.Errorf("scalar reads %v, want 7", got)
	}
	backing[0] = 8
	if got := s.Data(); got != 8.0 {
		t.Errorf("scalar reads %v after writing the backing, want 8", got)
	}
}

func TestDenseCopies(t *testing.T) {
	src := matrix(2, 1, 1, 2)
	d, err := numeric.Dense(src)
	if err != nil {
		t.Fatal(err)
	}
	d.Data().([]float64)[0] = 9
	if diff := cmp.Diff([]float64{1, 2}, src.Data()); diff != "" {
		t.Errorf("Dense shares memory with its source (-want +got):\n%s", diff)
	}
	f := G.F64(3)
	s, err := numeric.Dense(&f)
	if err != nil {
		t.Fatal(err)
	}
	if !s.IsScalar() || s.Data() != 3.0 {
		t.Errorf("Dense(*G.F64) = shape %v data %v, want a scalar 3", s.Shape(), s.Data())
	}
}

func TestSliceHelpers(t *testing.T) {
	s := numeric.NewSlice(tensor.Float32, 3)
	if diff := cmp.Diff([]float32{0, 0, 0}, s); diff != "" {
		t.Errorf("NewSlice (-want +got):\n%s", diff)
	}
	if n := numeric.Len(s); n != 3 {
		t.Errorf("Len = %d", n)
	}
	src := []int64{1, 2, 3}
	c := numeric.Copy(src).([]int64)
	c[0] = 9
	if src[0] != 1 {
		t.Error("Copy shares memory")
	}
	dst := make([]int64, 3)
	if err := numeric.CopyInto(dst, src); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(src, dst); diff != "" {
		t.Errorf("CopyInto (-want +got):\n%s", diff)
	}
	for _, bad := range []any{make([]int64, 2), make([]int32, 3)} {
		if err := numeric.CopyInto(bad, src); err == nil {
			t.Errorf("CopyInto(%T len %d): no error", bad, numeric.Len(bad))
		}
	}
	numeric.Zero(dst)
	if diff := cmp.Diff([]int64{0, 0, 0}, dst); diff != "" {
		t.Errorf("Zero (-want +got):\n%s", diff)
	}
	for dt, want := range map[tensor.Dtype]bool{tensor.Float32: true, tensor.Float64: true, tensor.Int64: false, tensor.Bool: false} {
		if got := numeric.IsFloat(dt); got != want {
			t.Errorf("IsFloat(%v) = %v", dt, got)
		}
	}
}

// BenchmarkWeightedSum: two towers' gradients of the benchmark mlp's first
// layer (256×512 float32) into one sum.
func BenchmarkWeightedSum(b *testing.B) {
	const n = 256 * 512
	dst := make([]float32, n)
	parts := []any{make([]float32, n), make([]float32, n)}
	for i := range n {
		parts[0].([]float32)[i] = float32(i)
		parts[1].([]float32)[i] = float32(n - i)
	}
	b.SetBytes(3 * 4 * n)
	for b.Loop() {
		if err := numeric.WeightedSum(dst, parts, []float64{0.5, 0.5}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAxpyIsPlainGo: Axpy's assembly gives, bit for bit, a multiply then
// an add rounded each (the explicit conversion keeps Go from fusing them),
// for lengths that end inside and outside the kernels' unrolled blocks.
func TestAxpyIsPlainGo(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 7, 8, 15, 16, 17, 33, 1000} {
		for _, a := range []float64{1, -0.1, 0.37, 3} {
			x32, y32 := make([]float32, n), make([]float32, n)
			x64, y64 := make([]float64, n), make([]float64, n)
			for i := range n {
				x64[i], y64[i] = 1/float64(i+3), float64(i)*0.7-2
				x32[i], y32[i] = float32(x64[i]), float32(y64[i])
			}
			want32, want64 := slices.Clone(y32), slices.Clone(y64)
			for i := range n {
				want32[i] = want32[i] + float32(float32(a)*x32[i])
				want64[i] = want64[i] + float64(a*x64[i])
			}
			numeric.Axpy(float32(a), x32, y32)
			numeric.Axpy(a, x64, y64)
			if diff := cmp.Diff(want32, y32); diff != "" {
				t.Errorf("float32 n=%d a=%v (-want +got):\n%s", n, a, diff)
			}
			if diff := cmp.Diff(want64, y64); diff != "" {
				t.Errorf("float64 n=%d a=%v (-want +got):\n%s", n, a, diff)
			}
		}
	}
}

// TestFloats: Floats gives a contiguous dense tensor's own elements, with
// no copy and no allocation, and refuses anything else.
func TestFloats(t *testing.T) {
	f32 := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4}))
	f64 := tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{1, 2, 3}))
	view, err := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 2, 3, 4})).Slice(nil, tensor.S(1))
	if err != nil {
		t.Fatal(err)
	}
	ints := tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{1, 2}))
	for _, c := range []struct {
		name   string
		v      G.Value
		want32 []float32
		want64 []float64
	}{
		{"float32", f32, []float32{1, 2, 3, 4}, nil},
		{"float64", f64, nil, []float64{1, 2, 3}},
		{"view", view, nil, nil},
		{"ints", ints, nil, nil},
		{"scalar value", G.NewF64(2), nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s32, ok32 := numeric.Floats[float32](c.v)
			s64, ok64 := numeric.Floats[float64](c.v)
			if diff := cmp.Diff([]any{c.want32 != nil, c.want32, c.want64 != nil, c.want64}, []any{ok32, s32, ok64, s64}); diff != "" {
				t.Errorf("Floats (-want +got):\n%s", diff)
			}
			if ok32 {
				s32[0] = 9
				if got := c.v.Data().([]float32)[0]; got != 9 {
					t.Errorf("writing the slice did not write the tensor: %v", got)
				}
			}
			if allocs := testing.AllocsPerRun(10, func() { numeric.Floats[float32](c.v) }); allocs != 0 {
				t.Errorf("%v allocations", allocs)
			}
		})
	}
}

func TestElements(t *testing.T) {
	tests := []struct {
		name     string
		shape    []int
		elemSize int
		max      int
		want     int
		wantErr  string
	}{
		{name: "scalar", elemSize: 8, max: numeric.MaxBytes, want: 1},
		{name: "matrix", shape: []int{3, 4}, elemSize: 8, max: numeric.MaxBytes, want: 12},
		{name: "zero-sized", shape: []int{0, 1 << 62}, elemSize: 8, max: numeric.MaxBytes, want: 0},
		{name: "negative", shape: []int{2, -1}, elemSize: 8, max: numeric.MaxBytes, wantErr: "negative dimension"},
		{name: "elements overflow", shape: []int{1 << 32, 1 << 32}, elemSize: 1, max: numeric.MaxBytes, wantErr: "more than"},
		{name: "bytes over the bound", shape: []int{1 << 20}, elemSize: 8, max: 1 << 22, wantErr: "need more than 4194304 bytes"},
		{name: "bytes at the bound", shape: []int{1 << 19}, elemSize: 8, max: 1 << 22, want: 1 << 19},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := numeric.ElementsWithin(tc.shape, tc.elemSize, tc.max)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ElementsWithin = %d, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ElementsWithin = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
