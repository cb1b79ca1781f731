package export_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// FuzzLoad: Load of an export version one of whose files the input
// replaces — with the version's manifest vouching for the new content or
// not — gives an error or a Predictor that runs every signature on a batch
// of zeros; it never panics. Run it with
//
//	go test -run '^$' -fuzz '^FuzzLoad$' -fuzztime 60s -fuzzminimizetime 1s ./export
//
// Inputs that once crashed are among the seeds (f.Add); a crash the fuzzer
// finds lands in testdata/fuzz/FuzzLoad and is committed with its fix.
func FuzzLoad(f *testing.F) {
	_, src := exportLinreg(f)
	files := map[string][]byte{}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	names := slices.Sorted(maps.Keys(files))
	for i, name := range names {
		b := files[name]
		f.Add(uint8(i), b, false)
		f.Add(uint8(i), b, true)
		f.Add(uint8(i), b[:len(b)/2], true)
	}
	sigs := slices.Index(names, exportdir.SignaturesFile)
	for _, shape := range []string{"[-1, 1099511627776, 1099511627776]", "[-1, 4611686018427387904, 4, 2]", "[-1]", "[-1, 2]", "[]"} {
		f.Add(uint8(sigs), []byte(`{"format": "towerflow-export-v1", "global_step": 5, "signatures": {"serving_default": {"method": "regress",
"inputs": {"x": {"dtype": "float64", "shape": `+shape+`}}, "outputs": {"outputs": {"dtype": "float64", "shape": [-1, 1]}}}}}`), true)
		f.Add(uint8(sigs), []byte(`{"format": "towerflow-export-v1", "global_step": 5, "signatures": {"serving_default": {"method": "regress",
"inputs": {"x": {"dtype": "float64", "shape": `+shape+`, "sparse": true}}, "outputs": {"outputs": {"dtype": "float64", "shape": [-1, 1], "sparse": true}}}}}`), true)
		f.Add(uint8(sigs), []byte(`{"format": "towerflow-export-v1", "global_step": 5, "signatures": {"serving_default": {"method": "regress",
"inputs": {"x": {"dtype": "float64", "shape": `+shape+`, "sparse": true}}, "outputs": {"outputs": {"dtype": "float64", "shape": [-1, 1]}}}}}`), true)
	}
	// x sparse: linreg's model reads it densified, and Run takes it sparse.
	f.Add(uint8(sigs), []byte(`{"format": "towerflow-export-v1", "global_step": 5, "signatures": {"serving_default": {"method": "regress",
"inputs": {"x": {"dtype": "float64", "shape": [-1, 1], "sparse": true}}, "outputs": {"outputs": {"dtype": "float64", "shape": [-1, 1]}}}}}`), true)
	linear := replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})
	f.Fuzz(func(t *testing.T, which uint8, content []byte, fix bool) {
		dir := filepath.Join(t.TempDir(), "1")
		target := names[int(which)%len(names)]
		for _, name := range names {
			b := files[name]
			if name == target {
				b = content
			}
			if name == exportdir.ManifestFile && fix && target != name {
				b = vouch(b, target, content)
			}
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if target == exportdir.SignaturesFile && fix && hugeExample(content) {
			t.Skip("an example of more than 64Ki elements: slow to build, not wrong")
		}
		p, err := export.Load(dir, linear)
		if err != nil {
			return
		}
		defer p.Close()
		for key, sig := range p.Signatures() {
			features := map[string]*tensor.Dense{}
			sparse := map[string]sharding.SparseCOO{}
			for name, info := range sig.Inputs {
				dt, err := estimator.DtypeByName(info.Dtype)
				if err != nil {
					t.Fatalf("Load accepted signature %q: input %q: %v", key, name, err)
				}
				shape := append([]int{2}, info.Shape[1:]...)
				if info.Sparse {
					// Two examples, the second with one value.
					sparse[name] = sharding.SparseCOO{Indices: [][]int{{1, 0}}, Values: numeric.Over([]int{1}, numeric.NewSlice(dt, 1)), DenseShape: shape}
					continue
				}
				n := 1
				for _, d := range shape {
					n *= d
				}
				features[name] = numeric.Over(shape, numeric.NewSlice(dt, n))
			}
			if _, err := p.RunSparse(context.Background(), key, features, sparse); err != nil {
				t.Fatalf("Load accepted signature %q, Run on zeros: %v", key, err)
			}
		}
	})
}

// hugeExample reports whether signatures.json content declares an input or
// output of which one example has more than 64Ki elements but fits the
// 1 GiB Load allows: Load would build the model on it, correctly and
// slowly (seconds per exec). Larger ones must fail at once.
func hugeExample(content []byte) bool {
	var sigs exportdir.Signatures
	if json.Unmarshal(content, &sigs) != nil {
		return false
	}
	for _, sig := range sigs.Signatures {
		for _, infos := range []map[string]export.TensorInfo{sig.Inputs, sig.Outputs} {
			for _, info := range infos {
				n := 1.0
				for i, d := range info.Shape {
					if i > 0 {
						n *= float64(d)
					}
				}
				if n > 1<<16 && n*8 <= 1<<30 {
					return true
				}
			}
		}
	}
	return false
}

// vouch returns the version manifest manifest with the entry of file name
// recording content's size and SHA-256, as a buggy writer would; a
// manifest that does not parse stays as it is.
func vouch(manifest []byte, name string, content []byte) []byte {
	var m exportdir.Manifest
	if err := json.Unmarshal(manifest, &m); err != nil {
		return manifest
	}
	sum, n, _ := exportdir.Sum(bytes.NewReader(content))
	for i := range m.Files {
		if m.Files[i].Path == name {
			m.Files[i].SHA256, m.Files[i].Bytes = sum, n
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return manifest
	}
	return b
}
