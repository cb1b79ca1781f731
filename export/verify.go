package export

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/internal/fsutil"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/towers"
)

// verifyManifest checks dir against its manifest: every file listed exists
// with its size and SHA-256, and every file of dir is listed. Only regular
// files are opened (see fsutil.OpenRegular): a named pipe, a directory
// where a file belongs or a symbolic link out of dir is an error naming it.
func verifyManifest(dir string) error {
	return verifyManifestOf(dir, func(string) bool { return true })
}

// verifyManifestOf is verifyManifest with the checksums of the files hash
// says (by their paths in the manifest); every file's size is checked.
func verifyManifestOf(dir string, hash func(rel string) bool) error {
	mpath := filepath.Join(dir, exportdir.ManifestFile)
	data, err := fsutil.ReadRegularAtMost(dir, exportdir.ManifestFile, exportdir.MaxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("manifest %s is missing: not an export version directory", mpath)
	}
	if err != nil {
		return err
	}
	var m exportdir.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s: %w", mpath, err)
	}
	if m.Format != exportdir.Format {
		return fmt.Errorf("%s: format %q, want %q", mpath, m.Format, exportdir.Format)
	}
	listed := map[string]exportdir.File{}
	for _, f := range m.Files {
		if f.Path == "" || path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == ".." ||
			strings.HasPrefix(f.Path, "../") || strings.Contains(f.Path, `\`) || f.Path == exportdir.ManifestFile {
			return fmt.Errorf("%s: bad file path %q", mpath, f.Path)
		}
		if _, dup := listed[f.Path]; dup {
			return fmt.Errorf("%s: file %s is listed twice", mpath, f.Path)
		}
		listed[f.Path] = f
	}
	var extra []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == exportdir.ManifestFile {
			return nil
		}
		if _, ok := listed[rel]; !ok {
			extra = append(extra, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(extra) > 0 {
		return fmt.Errorf("file %s is not in the manifest %s", strings.Join(extra, ", "), mpath)
	}
	for _, rel := range slices.Sorted(maps.Keys(listed)) {
		if err := verifyFile(dir, rel, listed[rel], hash(rel)); err != nil {
			return err
		}
	}
	return nil
}

// verifyFile checks the file rel of dir against its manifest entry: its
// size, and its checksum when sum is set.
func verifyFile(dir, rel string, want exportdir.File, sum bool) error {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	f, fi, err := fsutil.OpenRegular(dir, rel)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file %s is missing (the manifest lists it)", p)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if fi.Size() != want.Bytes {
		return fmt.Errorf("file %s has %d bytes, the manifest says %d", p, fi.Size(), want.Bytes)
	}
	if !sum {
		return nil
	}
	got, _, err := exportdir.Sum(f)
	if err != nil {
		return fmt.Errorf("file %s: %w", p, err)
	}
	if got != want.SHA256 {
		return fmt.Errorf("file %s is corrupted: sha256 %s, the manifest says %s", p, got, want.SHA256)
	}
	return nil
}

// readSignatures reads and checks signatures.json, and parses the inputs.
func readSignatures(dir string) (exportdir.Signatures, map[string]map[string]input, error) {
	spath := filepath.Join(dir, exportdir.SignaturesFile)
	var sigs exportdir.Signatures
	data, err := fsutil.ReadRegularAtMost(dir, exportdir.SignaturesFile, exportdir.MaxSignaturesBytes)
	if err != nil {
		return sigs, nil, err
	}
	fail := func(format string, args ...any) (exportdir.Signatures, map[string]map[string]input, error) {
		return exportdir.Signatures{}, nil, fmt.Errorf("%s: %s", spath, fmt.Sprintf(format, args...))
	}
	if err := json.Unmarshal(data, &sigs); err != nil {
		return fail("%v", err)
	}
	if sigs.Format != exportdir.Format {
		return fail("format %q, want %q", sigs.Format, exportdir.Format)
	}
	if sigs.Step < 0 {
		return fail("negative global step %d", sigs.Step)
	}
	if len(sigs.Signatures) == 0 {
		return fail("no signatures")
	}
	inputs := map[string]map[string]input{}
	for _, key := range slices.Sorted(maps.Keys(sigs.Signatures)) {
		sig := sigs.Signatures[key]
		switch sig.Method {
		case "predict", "classify", "regress":
		default:
			return fail("signature %q: unknown method %q", key, sig.Method)
		}
		if len(sig.Inputs) == 0 {
			return fail("signature %q has no inputs", key)
		}
		inputs[key] = map[string]input{}
		for _, part := range []struct {
			kind string
			m    map[string]TensorInfo
		}{{"input", sig.Inputs}, {"output", sig.Outputs}} {
			for _, name := range slices.Sorted(maps.Keys(part.m)) {
				in, err := parseInfo(part.m[name])
				if err != nil {
					return fail("signature %q: %s %q: %v", key, part.kind, name, err)
				}
				if in.sparse && part.kind == "output" {
					return fail("signature %q: output %q is sparse: outputs are dense", key, name)
				}
				if part.kind == "input" {
					inputs[key][name] = in
				}
			}
		}
	}
	return sigs, inputs, nil
}

// parseInfo checks a signature's input or output and returns it as an
// input: dtype and per-example shape.
func parseInfo(ti TensorInfo) (input, error) {
	dt, err := estimator.DtypeByName(ti.Dtype)
	if err != nil {
		return input{}, err
	}
	if len(ti.Shape) == 0 || ti.Shape[0] != -1 {
		return input{}, fmt.Errorf("shape %v: want -1, the batch dimension, first", ti.Shape)
	}
	if slices.ContainsFunc(ti.Shape[1:], func(d int) bool { return d < 1 }) {
		return input{}, fmt.Errorf("shape %v: every dimension after the first must be positive", ti.Shape)
	}
	if _, err := numeric.ElementsWithin(ti.Shape[1:], int(dt.Size()), exportdir.MaxExampleBytes); err != nil {
		return input{}, fmt.Errorf("shape %v of %s: one example is too large: %w", ti.Shape, ti.Dtype, err)
	}
	if ti.Sparse && len(ti.Shape) != 2 {
		return input{}, fmt.Errorf("sparse, shape %v: want [-1, the most values per example]", ti.Shape)
	}
	return input{dtype: dt, shape: slices.Clone(ti.Shape[1:]), sparse: ti.Sparse}, nil
}

// checkOutputs checks the outputs of the model's first batch against the
// signatures: the same keys, output names, dtypes and shapes.
func (p *Predictor) checkOutputs(out estimator.BatchOutput) error {
	got := out.ExportOutputs
	if len(got) == 0 {
		p.fromPredictions = true
		got = map[string]map[string]*tensor.Dense{model.DefaultServingSignature: out.Predictions}
	}
	what := "export outputs"
	if p.fromPredictions {
		what = fmt.Sprintf("no export outputs, so signature %q serves its predictions", model.DefaultServingSignature)
	}
	for _, key := range slices.Sorted(maps.Keys(got)) {
		if _, ok := p.sigs[key]; !ok {
			return fmt.Errorf("the model has %s; signature %q is not in the export (it has %q)", what, key, slices.Sorted(maps.Keys(p.sigs)))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(p.sigs)) {
		outs, ok := got[key]
		if !ok {
			return fmt.Errorf("the export has signature %q, the model's %s do not (they have %q)", key, what, slices.Sorted(maps.Keys(got)))
		}
		sig := p.sigs[key]
		for _, name := range slices.Sorted(maps.Keys(outs)) {
			if _, ok := sig.Outputs[name]; !ok {
				return fmt.Errorf("signature %q: the model makes output %q, the export does not have it (it has %q)", key, name, slices.Sorted(maps.Keys(sig.Outputs)))
			}
		}
		for _, name := range slices.Sorted(maps.Keys(sig.Outputs)) {
			v, ok := outs[name]
			if !ok {
				return fmt.Errorf("signature %q: the export has output %q, the model does not make it (it makes %q)", key, name, slices.Sorted(maps.Keys(outs)))
			}
			want := sig.Outputs[name]
			dt, err := estimator.DtypeName(v.Dtype())
			if err != nil {
				dt = v.Dtype().String()
			}
			shape := append([]int{-1}, v.Shape()[1:]...)
			if dt != want.Dtype || !slices.Equal(shape, want.Shape) {
				return fmt.Errorf("signature %q: output %q: the model makes dtype %s shape %v, the export says dtype %s shape %v",
					key, name, dt, shape, want.Dtype, want.Shape)
			}
		}
	}
	return nil
}

// checkVariables checks that the model's variables, store, are exactly the
// export's, each with the same shape and dtype (a *checkpoint.MismatchError
// naming every difference, as a restore's), and returns the export's
// values by name.
func checkVariables(store *towers.Store, vars *checkpoint.Reader) (map[string]*tensor.Dense, error) {
	if err := vars.Compare(store.Variables(), func(checkpoint.Entry) bool { return true }); err != nil {
		return nil, err
	}
	values := map[string]*tensor.Dense{}
	for _, name := range vars.Names() {
		t, err := vars.Tensor(name)
		if err != nil {
			return nil, err
		}
		values[name] = t
	}
	return values, nil
}
