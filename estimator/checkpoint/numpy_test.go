package checkpoint

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/testpython"
)

// numpyPython returns a Python interpreter that can import numpy; without
// one the test skips, or fails in CI.
func numpyPython(t *testing.T) string {
	t.Helper()
	return testpython.Find(t, "python3-numpy", "numpy")
}

const numpyLoadScript = `
import json, os, sys
import numpy as np
d = sys.argv[1]
with open(os.path.join(d, "manifest.json")) as f:
    m = json.load(f)
out = {}
for e in m["variables"]:
    a = np.load(os.path.join(d, e["file"]), allow_pickle=False)
    out[e["name"]] = {"dtype": a.dtype.str, "shape": list(a.shape), "values": a.ravel().tolist()}
json.dump(out, sys.stdout)
`

// TestNumpyLoadsCheckpoint checks numpy.load reads every file of a
// checkpoint with the saved dtype, shape and values.
func TestNumpyLoadsCheckpoint(t *testing.T) {
	py := numpyPython(t)
	path, err := Save(t.TempDir(), newStore(t, testVars, 3), 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", numpyLoadScript, path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("numpy: %v\n%s", err, stderr.String())
	}
	type loaded struct {
		Dtype  string          `json:"dtype"`
		Shape  []int           `json:"shape"`
		Values json.RawMessage `json:"values"`
	}
	var got map[string]loaded
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("numpy output %q: %v", out, err)
	}
	r, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Manifest().Variables {
		g, ok := got[e.Name]
		if !ok {
			t.Errorf("numpy did not load %q", e.Name)
			continue
		}
		if g.Dtype != e.Dtype || !cmp.Equal(g.Shape, e.Shape) {
			t.Errorf("%s: numpy sees dtype %s shape %v, want %s %v", e.Name, g.Dtype, g.Shape, e.Dtype, e.Shape)
		}
		want, err := r.Tensor(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		wantData, _ := numeric.Slice(want)
		// Decode numpy's values into the Go element type (JSON would want
		// base64 for []uint8, so those go through []int).
		var gotData any
		if _, isBytes := wantData.([]uint8); isBytes {
			var ints []int
			if err := json.Unmarshal(g.Values, &ints); err != nil {
				t.Fatal(err)
			}
			b := make([]uint8, len(ints))
			for i, v := range ints {
				b[i] = uint8(v)
			}
			gotData = b
		} else {
			ptr := newSlicePtr(want.Dtype())
			if err := json.Unmarshal(g.Values, ptr); err != nil {
				t.Fatalf("%s: %v", e.Name, err)
			}
			gotData = derefSlice(ptr)
		}
		if diff := cmp.Diff(wantData, gotData); diff != "" {
			t.Errorf("%s: numpy values (-want +got):\n%s", e.Name, diff)
		}
	}
}

func newSlicePtr(dt tensor.Dtype) any {
	switch dt {
	case tensor.Float32:
		return new([]float32)
	case tensor.Float64:
		return new([]float64)
	case tensor.Int64:
		return new([]int64)
	case tensor.Int:
		return new([]int)
	case tensor.Int32:
		return new([]int32)
	case tensor.Bool:
		return new([]bool)
	}
	panic("newSlicePtr: " + dt.String())
}

func derefSlice(p any) any {
	switch p := p.(type) {
	case *[]float32:
		return *p
	case *[]float64:
		return *p
	case *[]int64:
		return *p
	case *[]int:
		return *p
	case *[]int32:
		return *p
	case *[]bool:
		return *p
	}
	panic("derefSlice")
}

const numpySaveScript = `
import sys, os
import numpy as np
d = sys.argv[1]
np.save(os.path.join(d, "f4.npy"), np.arange(6, dtype=np.float32).reshape(2, 3) / 4)
np.save(os.path.join(d, "f8_scalar.npy"), np.float64(-2.5))
np.save(os.path.join(d, "i8.npy"), np.array([-(2**62), 0, 2**40], dtype=np.int64))
np.save(os.path.join(d, "i4.npy"), np.array([[1], [-2]], dtype=np.int32))
np.save(os.path.join(d, "b1.npy"), np.array([[True, False], [False, True]]))
np.save(os.path.join(d, "u1.npy"), np.array([0, 7, 255], dtype=np.uint8))
np.save(os.path.join(d, "big_endian.npy"), np.array([1.5, -3.0], dtype=">f8"))
np.save(os.path.join(d, "empty.npy"), np.zeros((0, 2), dtype=np.float32))
np.save(os.path.join(d, "fortran_1d.npy"), np.asfortranarray(np.array([1, 2], dtype=np.int64)))
with open(os.path.join(d, "v2.npy"), "wb") as f:
    np.lib.format.write_array(f, np.array([3.0, 4.0], dtype=np.float32), version=(2, 0))
`

// TestDecodeNumpyFiles checks the decoder reads files numpy.save wrote.
func TestDecodeNumpyFiles(t *testing.T) {
	py := numpyPython(t)
	dir := t.TempDir()
	if out, err := exec.Command(py, "-c", numpySaveScript, dir).CombinedOutput(); err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	tests := []struct {
		file  string
		dt    tensor.Dtype
		shape []int
		data  any
	}{
		{"f4.npy", tensor.Float32, []int{2, 3}, []float32{0, 0.25, 0.5, 0.75, 1, 1.25}},
		{"f8_scalar.npy", tensor.Float64, []int{}, []float64{-2.5}},
		{"i8.npy", tensor.Int64, []int{3}, []int64{-(1 << 62), 0, 1 << 40}},
		{"i4.npy", tensor.Int32, []int{2, 1}, []int32{1, -2}},
		{"b1.npy", tensor.Bool, []int{2, 2}, []bool{true, false, false, true}},
		{"u1.npy", tensor.Uint8, []int{3}, []uint8{0, 7, 255}},
		{"big_endian.npy", tensor.Float64, []int{2}, []float64{1.5, -3}},
		{"empty.npy", tensor.Float32, []int{0, 2}, []float32{}},
		{"fortran_1d.npy", tensor.Int64, []int{2}, []int64{1, 2}},
		{"v2.npy", tensor.Float32, []int{2}, []float32{3, 4}},
	}
	for _, tt := range tests {
		f, err := os.Open(filepath.Join(dir, tt.file))
		if err != nil {
			t.Fatal(err)
		}
		h, dt, data, err := decodeNPY(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", tt.file, err)
			continue
		}
		if dt != tt.dt || !cmp.Equal(h.Shape, tt.shape) {
			t.Errorf("%s: dtype %v shape %v, want %v %v", tt.file, dt, h.Shape, tt.dt, tt.shape)
		}
		if diff := cmp.Diff(tt.data, data); diff != "" {
			t.Errorf("%s: values (-want +got):\n%s", tt.file, diff)
		}
	}
}
