package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/towers"
)

// The fuzz targets of the package: the .npy decoder, and Read of a
// checkpoint one of whose files the input replaces. Run one with
//
//	go test -run '^$' -fuzz '^FuzzDecodeNPY$' -fuzztime 60s -fuzzminimizetime 1s ./estimator/checkpoint
//
// (A short minimization leaves more of the time to fuzzing: an input that
// widens coverage is otherwise minimized for up to a minute.)
//
// Inputs that once crashed are among the seeds (f.Add); a crash the fuzzer
// finds lands in testdata/fuzz/<target> and is committed with its fix.

// npyOf returns the .npy encoding of data.
func npyOf(tb testing.TB, dt tensor.Dtype, shape []int, data any) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := writeNPY(&b, dt, shape, data); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// rawNPY returns a version 1.0 .npy file of the header dict (padded as
// NumPy pads it) and data.
func rawNPY(dict string, data []byte) []byte {
	hlen := len(dict) + 1
	if r := (10 + hlen) % npyAlign; r != 0 {
		hlen += npyAlign - r
	}
	out := append([]byte("\x93NUMPY\x01\x00"), byte(hlen), byte(hlen>>8))
	out = append(out, dict...)
	for len(out) < 10+hlen-1 {
		out = append(out, ' ')
	}
	return append(append(out, '\n'), data...)
}

// FuzzDecodeNPY: decoding any bytes gives an error or an array that holds
// as many elements as its shape says, and encodes and decodes again to the
// same bytes; it never panics and never allocates more than the input
// holds.
func FuzzDecodeNPY(f *testing.F) {
	for i, d := range testVars {
		f.Add(npyOf(f, d.dt, d.shape, values(d.dt, size(d.shape), int64(i))))
	}
	f.Add(npyOf(f, tensor.Int16, []int{0, 3}, []int16{}))
	// Version 2.0, big-endian, Fortran order, a Python 2 long, bools that
	// are not 0 or 1, shapes too large for memory or for int64, a header
	// length past the end.
	v1 := npyOf(f, tensor.Float32, []int{2}, []float32{1.5, -2})
	f.Add(append(append([]byte("\x93NUMPY\x02\x00"), byte(len(v1)-10), 0, 0, 0), v1[10:]...))
	f.Add(rawNPY("{'descr': '>i4', 'fortran_order': False, 'shape': (2L,), }", []byte{0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe}))
	f.Add(rawNPY("{'descr': '<f8', 'fortran_order': True, 'shape': (1, 1), }", []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}))
	f.Add(rawNPY("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", []byte{0, 1, 7}))
	f.Add(rawNPY("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", []byte{0, 0, 0x80, 0x3f}))
	f.Add(rawNPY("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", nil))
	f.Add([]byte("\x93NUMPY\x03\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, file []byte) {
		h, dt, data, err := decodeNPY(bytes.NewReader(file))
		if err != nil {
			return
		}
		n, err := h.size()
		if err != nil {
			t.Fatalf("decoded shape %v: %v", h.Shape, err)
		}
		if got := numeric.Len(data); int64(got) != n {
			t.Fatalf("shape %v holds %d elements, decoded %d", h.Shape, n, got)
		}
		again := npyOf(t, dt, h.Shape, data)
		h2, dt2, data2, err := decodeNPY(bytes.NewReader(again))
		if err != nil {
			t.Fatalf("decoding the re-encoding: %v", err)
		}
		if !slices.Equal(h2.Shape, h.Shape) || dt2 != dt {
			t.Fatalf("re-encoding decodes to %v %v, want %v %v", dt2, h2.Shape, dt, h.Shape)
		}
		if third := npyOf(t, dt2, h2.Shape, data2); !bytes.Equal(third, again) {
			t.Fatalf("encoding is not stable:\n%q\n%q", again, third)
		}
	})
}

// fuzzCheckpoint is a saved model directory the Read fuzz target mutates:
// the pointer file and the files of its one checkpoint.
type fuzzCheckpoint struct {
	files map[string][]byte // by path relative to the model directory
	names []string          // sorted keys of files
}

func newFuzzCheckpoint(f *testing.F) fuzzCheckpoint {
	dir := f.TempDir()
	if _, err := Save(dir, newStore(f, testVars, 1), 7, 0); err != nil {
		f.Fatal(err)
	}
	c := fuzzCheckpoint{files: map[string][]byte{}}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		c.files[rel], c.names = b, append(c.names, rel)
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	slices.Sort(c.names)
	return c
}

// write writes the checkpoint into dir with the file number which (modulo
// their number) replaced by content. With fix, the manifest then vouches
// for the new content — its entry's size and SHA-256 for a variable file,
// its own checksum for the manifest — as a buggy writer would, so that the
// content reaches the decoder and the checks behind the checksums.
func (c fuzzCheckpoint) write(t *testing.T, dir string, which uint8, content []byte, fix bool) {
	files := map[string][]byte{}
	for k, v := range c.files {
		files[k] = v
	}
	target := c.names[int(which)%len(c.names)]
	files[target] = content
	mpath := filepath.Join(Name(7), ManifestFile)
	if fix {
		var mf manifestFile
		if err := json.Unmarshal(files[mpath], &mf); err == nil {
			for i, e := range mf.Variables {
				if filepath.Join(Name(7), e.File) == target {
					mf.Variables[i].SHA256, mf.Variables[i].Bytes = sha256Hex(content), int64(len(content))
				}
			}
			if sum, err := mf.Manifest.checksum(); err == nil {
				mf.Checksum = sum
				if b, err := json.Marshal(mf); err == nil {
					files[mpath] = b
				}
			}
		}
	}
	for _, name := range c.names {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzRead: Read of a checkpoint, and of its model directory, with any
// content in one of its files (and the manifest vouching for it or not)
// gives an error or a reader whose every variable reads, and which restores
// into a new store or says why not; it never panics.
func FuzzRead(f *testing.F) {
	c := newFuzzCheckpoint(f)
	for i, name := range c.names {
		b := c.files[name]
		f.Add(uint8(i), b, false)
		f.Add(uint8(i), b, true)
		if len(b) > 0 {
			flipped := slices.Clone(b)
			flipped[len(b)/2] ^= 0x20
			f.Add(uint8(i), flipped, true)
			f.Add(uint8(i), b[:len(b)/2], true)
		}
	}
	for _, name := range []string{"0000-dense~w.npy", "0007-ids.npy", "0008-mask.npy"} {
		i := slices.Index(c.names, filepath.Join(Name(7), name))
		if i < 0 {
			f.Fatalf("no file %s among %q", name, c.names)
		}
		f.Add(uint8(i), []byte("\x93NUMPY\x01\x00\x3c\x00{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693953,), }\n\x00\x00\x00\x00\x00\x00\xf0\x3f"), true)
	}
	f.Fuzz(func(t *testing.T, which uint8, content []byte, fix bool) {
		dir := t.TempDir()
		c.write(t, dir, which, content, fix)
		for _, path := range []string{filepath.Join(dir, Name(7)), dir} {
			r, err := Read(path)
			if err != nil {
				continue
			}
			for _, name := range r.Names() {
				if _, err := r.Tensor(name); err != nil {
					t.Fatalf("Read(%s) verified the checkpoint, Tensor(%q): %v", path, name, err)
				}
			}
			// A verified checkpoint may still not suit a store (a
			// name the store refuses): an error, never a panic.
			r.Restore(towers.NewStore(towers.StoreConfig{}))
		}
	})
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
