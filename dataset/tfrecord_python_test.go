package dataset

import (
	"bytes"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/testpython"
)

// pyScript writes and reads TFRecord files of tf.Examples with Python's
// protobuf runtime, sharing no code with this package.
//
//go:embed testdata/tfexample.py
var pyScript string

// pyFeature is a Feature as the script reads and writes it: floats as
// float32 bit patterns and bytes in hex, so that JSON carries them exactly.
type pyFeature struct {
	Kind   string   `json:"kind"`
	Int64s []int64  `json:"int64s,omitempty"`
	Floats []uint32 `json:"floats,omitempty"`
	Bytes  []string `json:"bytes,omitempty"`
}

type pyRecord struct {
	Features map[string]pyFeature `json:"features"`
	Bytes    string               `json:"bytes,omitempty"`
}

func toPy(ex Example) pyRecord {
	r := pyRecord{Features: map[string]pyFeature{}}
	for name, f := range ex {
		p := pyFeature{Kind: f.Kind().String(), Int64s: f.Int64s}
		for _, v := range f.Floats {
			p.Floats = append(p.Floats, math.Float32bits(v))
		}
		for _, v := range f.Bytes {
			p.Bytes = append(p.Bytes, hex.EncodeToString(v))
		}
		r.Features[name] = p
	}
	return r
}

func fromPy(t *testing.T, r pyRecord) Example {
	t.Helper()
	ex := Example{}
	for name, p := range r.Features {
		var f Feature
		switch p.Kind {
		case "int64":
			f.Int64s = append([]int64{}, p.Int64s...)
		case "float":
			f.Floats = []float32{}
			for _, v := range p.Floats {
				f.Floats = append(f.Floats, math.Float32frombits(v))
			}
		case "bytes":
			f.Bytes = [][]byte{}
			for _, h := range p.Bytes {
				b, err := hex.DecodeString(h)
				if err != nil {
					t.Fatal(err)
				}
				f.Bytes = append(f.Bytes, b)
			}
		}
		ex[name] = f
	}
	return ex
}

// pyExamples are examples that reach every part of the encoding: each
// kind, empty lists, a feature with no list, negative and extreme
// integers, non-finite floats, empty and non-UTF-8 byte strings, a
// feature name that is empty and one that is not ASCII, and an example
// with no features.
func pyExamples() []Example {
	return []Example{
		{
			"age":    {Int64s: []int64{42}},
			"ids":    {Int64s: []int64{-1, 0, 1, math.MinInt64, math.MaxInt64, 1 << 40}},
			"score":  {Floats: []float32{0.5, -3.25, 1e-40, float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32}},
			"nan":    {Floats: []float32{math.Float32frombits(0x7fc00000)}},
			"words":  {Bytes: [][]byte{[]byte("hello"), {}, {0xff, 0x00, 0xfe}}},
			"":       {Int64s: []int64{7}},
			"größe":  {Floats: []float32{1.75}},
			"empty":  {Int64s: []int64{}},
			"emptyf": {Floats: []float32{}},
			"emptyb": {Bytes: [][]byte{}},
			"none":   {},
		},
		{},
		{"age": {Int64s: []int64{7}}, "words": {Bytes: [][]byte{bytes.Repeat([]byte("x"), 300)}}},
	}
}

// runPy runs the script with args, stdin as its input, and returns its
// output.
func runPy(t *testing.T, python string, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(python, append([]string{"-c", testpython.WithTFRecord(pyScript)}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python %v: %v: %s", args, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out
}

var compressions = []struct {
	name string
	c    Compression
	ext  string
}{
	{"plain", NoCompression, ".tfrecord"},
	{"gzip", GZIP, ".tfrecord.gz"},
	{"zlib", ZLIB, ".tfrecord.zz"},
}

// TestPythonWritesWeRead: TFRecord files Python's protobuf and its own
// framing wrote, plain and compressed, read back as the examples given.
func TestPythonWritesWeRead(t *testing.T) {
	python := testpython.Find(t, "python3-protobuf", "google.protobuf")
	want := pyExamples()
	var in []pyRecord
	for _, ex := range want {
		in = append(in, toPy(ex))
	}
	js, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range compressions {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "py"+c.ext)
			runPy(t, python, js, "write", path, string(c.c))
			r, err := OpenRecords(path, &RecordOptions{Compression: AutoCompression})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var got []Example
			for {
				ex, err := r.NextExample()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ex)
			}
			if diff := cmp.Diff(want, got, cmp.Comparer(sameFloat)); diff != "" {
				t.Errorf("examples Python wrote, as read (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWeWritePythonReads: files this package writes, plain and
// compressed, parse in Python as the examples written; and each record's
// bytes are protobuf's deterministic serialization of what it parsed.
func TestWeWritePythonReads(t *testing.T) {
	python := testpython.Find(t, "python3-protobuf", "google.protobuf")
	examples := pyExamples()
	for _, c := range compressions {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "go"+c.ext)
			w, err := CreateRecords(path, c.c)
			if err != nil {
				t.Fatal(err)
			}
			var records []string
			for _, ex := range examples {
				if err := w.WriteExample(ex); err != nil {
					t.Fatal(err)
				}
				b, err := AppendExample(nil, ex)
				if err != nil {
					t.Fatal(err)
				}
				records = append(records, hex.EncodeToString(b))
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var got []pyRecord
			if err := json.Unmarshal(runPy(t, python, nil, "read", path, string(c.c)), &got); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(examples) {
				t.Fatalf("Python read %d records, want %d", len(got), len(examples))
			}
			for i, r := range got {
				if diff := cmp.Diff(examples[i], fromPy(t, r), cmp.Comparer(sameFloat)); diff != "" {
					t.Errorf("record %d as Python parsed it (-want +got):\n%s", i, diff)
				}
				if r.Bytes != records[i] {
					t.Errorf("record %d: our encoding\n%s\nPython's deterministic serialization\n%s", i, records[i], r.Bytes)
				}
			}
		})
	}
}

// sameFloat: equal bits, so NaNs compare and -0 differs from 0.
func sameFloat(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }
