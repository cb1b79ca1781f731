package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"
)

func TestNPYHeaderBytes(t *testing.T) {
	tests := []struct {
		descr string
		shape []int
		dict  string
	}{
		{"<f4", []int{}, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }"},
		{"<f8", []int{5}, "{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }"},
		{"|b1", []int{2, 3}, "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 3), }"},
		{"<i8", []int{2, 3, 4}, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3, 4), }"},
	}
	for _, tt := range tests {
		h, err := npyHeaderBytes(tt.descr, tt.shape)
		if err != nil {
			t.Fatalf("npyHeaderBytes(%q, %v): %v", tt.descr, tt.shape, err)
		}
		if len(h)%64 != 0 {
			t.Errorf("%v: header is %d bytes, not a multiple of 64", tt.shape, len(h))
		}
		if !bytes.HasPrefix(h, []byte("\x93NUMPY\x01\x00")) || h[len(h)-1] != '\n' {
			t.Errorf("%v: header %q lacks the magic, version or final newline", tt.shape, h)
		}
		if n := int(binary.LittleEndian.Uint16(h[8:10])); n != len(h)-10 {
			t.Errorf("%v: header length field %d, want %d", tt.shape, n, len(h)-10)
		}
		if got := strings.TrimRight(string(h[10:]), " \n"); got != tt.dict {
			t.Errorf("%v: dict %q, want %q", tt.shape, got, tt.dict)
		}
	}
}

func TestNPYRoundTrip(t *testing.T) {
	tests := []struct {
		dt    tensor.Dtype
		shape []int
		data  any
	}{
		{tensor.Float32, []int{}, []float32{1.5}},
		{tensor.Float32, []int{2, 3}, []float32{1, -2, 3.25, 4, 5e-30, -6e30}},
		{tensor.Float64, []int{3}, []float64{1e300, -0.5, 3}},
		{tensor.Int64, []int{2, 1, 2}, []int64{-1 << 62, 0, 7, 1<<63 - 1}},
		{tensor.Int32, []int{2}, []int32{-5, 1 << 30}},
		{tensor.Int, []int{3}, []int{-3, 0, 1 << 40}},
		{tensor.Bool, []int{4}, []bool{true, false, false, true}},
		{tensor.Uint8, []int{2, 2}, []uint8{0, 1, 254, 255}},
		{tensor.Int16, []int{1}, []int16{-300}},
		{tensor.Uint64, []int{1}, []uint64{1<<64 - 1}},
		{tensor.Float32, []int{0, 3}, []float32{}},
		// More elements than one conversion chunk.
		{tensor.Float64, []int{3, npyChunk/8 + 5}, seq[float64](3 * (npyChunk/8 + 5))},
	}
	// Both the raw-memory path of little-endian hosts and the portable
	// element-wise path.
	defer func(v bool) { nativeLE = v }(nativeLE)
	for _, raw := range []bool{nativeLE, false} {
		nativeLE = raw
		for _, tt := range tests {
			checkNPYRoundTrip(t, tt.dt, tt.shape, tt.data)
		}
	}
}

func checkNPYRoundTrip(t *testing.T, dt tensor.Dtype, shape []int, data any) {
	t.Helper()
	var buf bytes.Buffer
	if err := writeNPY(&buf, dt, shape, data); err != nil {
		t.Fatalf("writeNPY(%v %v): %v", dt, shape, err)
	}
	h, err := readNPYHeader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("%v %v: readNPYHeader: %v", dt, shape, err)
	}
	if !cmp.Equal(h.Shape, shape) {
		t.Errorf("%v %v: header shape %v", dt, shape, h.Shape)
	}
	size, _ := shapeSize(shape)
	tp, _ := npyTypeOf(dt)
	if want := h.Len + size*int64(tp.size); int64(buf.Len()) != want {
		t.Errorf("%v %v: file is %d bytes, want %d", dt, shape, buf.Len(), want)
	}
	got, err := readNPYData(bytes.NewReader(buf.Bytes()[h.Len:]), h, dt)
	if err != nil {
		t.Fatalf("%v %v: readNPYData: %v", dt, shape, err)
	}
	if diff := cmp.Diff(data, got); diff != "" {
		t.Errorf("%v %v (raw memory %v): round trip (-want +got):\n%s", dt, shape, nativeLE, diff)
	}
}

func seq[T int64 | float64 | float32](n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = T(i)
	}
	return out
}

func TestParseNPYDict(t *testing.T) {
	tests := []struct {
		in      string
		want    npyHeader
		wantErr string
	}{
		{in: "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }      \n",
			want: npyHeader{Descr: "<f4", Shape: []int{2, 3}}},
		{in: "{'fortran_order': True, 'shape': (7,), 'descr': '>f8'}",
			want: npyHeader{Descr: ">f8", Fortran: true, Shape: []int{7}}},
		{in: `{"descr": "|b1", "fortran_order": False, "shape": ()}`,
			want: npyHeader{Descr: "|b1", Shape: []int{}}},
		{in: "{'descr': '<i8', 'fortran_order': False, 'shape': (3L, 4L), }",
			want: npyHeader{Descr: "<i8", Shape: []int{3, 4}}},
		{in: "{'descr': '<f4', 'fortran_order': False}", wantErr: `missing key "shape"`},
		{in: "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", wantErr: "want a dimension"},
		{in: "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (), }", wantErr: "want True or False"},
		{in: "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}", wantErr: `unexpected key "extra"`},
		{in: "{'descr': '<f4' 'fortran_order': False}", wantErr: "want ',' or '}'"},
		{in: "{'descr': '<f4', 'fortran_order': False, 'shape': ()} x", wantErr: "trailing text"},
		{in: "'descr'", wantErr: "want '{'"},
	}
	for _, tt := range tests {
		got, err := parseNPYDict(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseNPYDict(%q) = %v, want error containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseNPYDict(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseNPYDict(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestNPYErrors(t *testing.T) {
	var good bytes.Buffer
	if err := writeNPY(&good, tensor.Float32, []int{4}, []float32{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	g := good.Bytes()
	tests := []struct {
		name    string
		file    []byte
		wantErr string
		short   bool
	}{
		{"empty", nil, "truncated", true},
		{"bad magic", append([]byte("\x93NUMPX"), g[6:]...), "bad magic", false},
		{"version 9", append(append([]byte{}, g[:6]...), append([]byte{9, 0}, g[8:]...)...), "version 9.0", false},
		{"cut in header", g[:30], "truncated", true},
		{"cut in data", g[:len(g)-1], "truncated", true},
		{"unknown descr", bytes.Replace(g, []byte("<f4"), []byte("<c8"), 1), `unsupported descr "<c8"`, false},
	}
	for _, tt := range tests {
		_, _, _, err := decodeNPY(bytes.NewReader(tt.file))
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: decodeNPY = %v, want error containing %q", tt.name, err, tt.wantErr)
		}
		if tt.short != errors.Is(err, errShortNPY) {
			t.Errorf("%s: errors.Is(%v, errShortNPY) = %v, want %v", tt.name, err, !tt.short, tt.short)
		}
	}
	if err := writeNPY(&bytes.Buffer{}, tensor.Float32, []int{3}, []float32{1, 2}); err == nil {
		t.Error("writeNPY of 2 elements for shape (3,) succeeded")
	}
	if err := writeNPY(&bytes.Buffer{}, tensor.Float32, []int{2}, []float64{1, 2}); err == nil {
		t.Error("writeNPY of []float64 as float32 succeeded")
	}
	if err := writeNPY(&bytes.Buffer{}, tensor.Complex64, []int{1}, []complex64{1}); err == nil {
		t.Error("writeNPY of complex64 succeeded")
	}
}

func TestNPYBoolBytes(t *testing.T) {
	// NumPy reads any non-zero byte of a bool array as True.
	hdr, err := npyHeaderBytes("|b1", []int{3})
	if err != nil {
		t.Fatal(err)
	}
	_, _, data, err := decodeNPY(bytes.NewReader(append(hdr, 0, 1, 7)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]bool{false, true, true}, data); diff != "" {
		t.Errorf("bools (-want +got):\n%s", diff)
	}
}
