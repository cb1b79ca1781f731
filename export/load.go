package export

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// Signature is one servable function of an export: its method ("predict",
// "classify" or "regress"), and its inputs and outputs by name.
type Signature = exportdir.Signature

// TensorInfo describes one input or output of a signature: its dtype as
// TensorFlow names it ("float32", "float64", "int64", "int32", "bool",
// "uint8"; see estimator.DtypeByName) and its shape with -1 for the batch
// dimension.
type TensorInfo = exportdir.TensorInfo

var (
	// ErrBadInput is wrapped by Run's errors about the request's features:
	// a missing or unexpected input, a wrong dtype or shape. A
	// serving.Server answers them with 400 Bad Request.
	ErrBadInput = errors.New("bad input")
	// ErrUnknownSignature is wrapped by Run's error for a signature key the
	// export does not have.
	ErrUnknownSignature = errors.New("unknown signature")
	// ErrNoVersion is wrapped by LoadLatest's error when the base directory
	// holds no version.
	ErrNoVersion = errors.New("no export version")
	// ErrClosed is wrapped by Run's error after Close.
	ErrClosed = errors.New("predictor is closed")
)

// input is one signature input, parsed.
type input struct {
	dtype tensor.Dtype
	shape []int // per example: without the batch dimension
}

// Predictor computes the signatures of one export version with the model
// rebuilt in predict mode. Its methods are safe for concurrent use; batches
// are computed one at a time.
type Predictor struct {
	dir     string
	version int64
	step    int64
	sigs    map[string]Signature
	inputs  map[string]map[string]input // by signature, then input name
	// fromPredictions: the model has no export outputs, and the only
	// signature, model.DefaultServingSignature, serves its predictions.
	fromPredictions bool

	mu     sync.RWMutex // Run holds it shared, Close exclusively
	closed bool
	est    *estimator.Estimator
}

// LoadLatest loads the newest version under baseDir (the largest version
// number, see estimator.Versions). A base directory without versions, or
// one that does not exist, is an error wrapping ErrNoVersion.
func LoadLatest(baseDir string, m *replicate.Model) (*Predictor, error) {
	vs, err := estimator.Versions(baseDir)
	if err != nil {
		return nil, fmt.Errorf("export: load latest from %s: %w", baseDir, err)
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("export: load latest: %w in %s", ErrNoVersion, baseDir)
	}
	return Load(filepath.Join(baseDir, strconv.FormatInt(vs[len(vs)-1], 10)), m)
}

// Load loads the export version directory dir (as Estimator.Export wrote
// it) into m, rebuilt in predict mode:
//
//   - dir's name is its version, a positive integer;
//   - manifest.json must list every file of dir with its size and SHA-256,
//     and nothing else: a missing, extra, truncated or corrupted file is an
//     error naming it;
//   - signatures.json gives the signatures, their inputs and outputs;
//   - the model is built by one batch of zeros (one row per input), and
//     must make exactly the variables of the export (the global step
//     included), each with the export's shape and dtype, and export outputs
//     (or, for an export of predictions, predictions) with the signatures'
//     names, dtypes and shapes; a difference is an error naming the
//     variable or output;
//   - the export's variables are then loaded into the model.
//
// The model runs in a fresh Estimator without a model directory, on the
// devices of m's replication (one tower each; a batch is split along
// dimension 0 across them and the outputs concatenated in tower order).
func Load(dir string, m *replicate.Model) (p *Predictor, err error) {
	fail := func(err error) (*Predictor, error) { return nil, fmt.Errorf("export: load %s: %w", dir, err) }
	if m == nil {
		return fail(errors.New("nil model"))
	}
	version, err := versionOf(dir)
	if err != nil {
		return fail(err)
	}
	if err := verifyManifest(dir); err != nil {
		return fail(err)
	}
	sigs, inputs, err := readSignatures(dir)
	if err != nil {
		return fail(err)
	}
	vars, err := checkpoint.Read(filepath.Join(dir, exportdir.VariablesDir))
	if err != nil {
		return fail(err)
	}
	if vars.Step() != sigs.Step {
		return fail(fmt.Errorf("%s says global step %d, its variables were saved at step %d", exportdir.SignaturesFile, sigs.Step, vars.Step()))
	}
	est, err := estimator.New(m, estimator.RunConfig{LogEvery: -1})
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err != nil {
			est.Close()
		}
	}()
	p = &Predictor{dir: dir, version: version, step: sigs.Step, sigs: sigs.Signatures, inputs: inputs, est: est}
	if err := p.build(); err != nil {
		return fail(err)
	}
	if err := restore(est.Store(), vars); err != nil {
		return fail(err)
	}
	return p, nil
}

// versionOf returns the version a version directory's name gives.
func versionOf(dir string) (int64, error) {
	base := filepath.Base(filepath.Clean(dir))
	version, err := strconv.ParseInt(base, 10, 64)
	if err != nil || version <= 0 {
		return 0, fmt.Errorf("directory name %q is not a version number (a positive integer)", base)
	}
	return version, nil
}

// build runs one row of zeros for every input through the model, which
// builds the predict towers, and checks the outputs against the
// signatures.
func (p *Predictor) build() error {
	all := map[string]input{}
	for key, in := range p.inputs {
		for name, spec := range in {
			if prev, ok := all[name]; ok && (prev.dtype != spec.dtype || !slices.Equal(prev.shape, spec.shape)) {
				return fmt.Errorf("%s: input %q of signature %q has dtype %v shape %v, another signature gives it dtype %v shape %v",
					exportdir.SignaturesFile, name, key, spec.dtype, spec.shape, prev.dtype, prev.shape)
			}
			all[name] = spec
		}
	}
	zeros := estimator.Batch{Features: map[string]*tensor.Dense{}}
	for name, spec := range all {
		zeros.Features[name] = newZeros(spec, 1)
	}
	out, err := p.predict(context.Background(), zeros)
	if err != nil {
		return fmt.Errorf("build the model: %w", err)
	}
	return p.checkOutputs(out)
}

// restore checks the export's variables against those the model made and
// loads them into the store.
func restore(store *towers.Store, vars *checkpoint.Reader) error {
	values, err := checkVariables(store, vars)
	if err != nil {
		return err
	}
	for _, name := range vars.Names() {
		if err := store.Set(name, values[name]); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	return nil
}

// newZeros returns a batch of rows zero examples of spec.
func newZeros(spec input, rows int) *tensor.Dense {
	shape := append([]int{rows}, spec.shape...)
	n := 1
	for _, d := range shape {
		n *= d
	}
	return numeric.Over(shape, numeric.NewSlice(spec.dtype, n))
}

// verifyManifest checks dir against its manifest: every file listed exists
// with its size and SHA-256, and every file of dir is listed.
func verifyManifest(dir string) error {
	mpath := filepath.Join(dir, exportdir.ManifestFile)
	data, err := os.ReadFile(mpath)
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
		if err := verifyFile(filepath.Join(dir, filepath.FromSlash(rel)), listed[rel]); err != nil {
			return err
		}
	}
	return nil
}

func verifyFile(p string, want exportdir.File) error {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file %s is missing (the manifest lists it)", p)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("file %s is not a regular file", p)
	}
	if fi.Size() != want.Bytes {
		return fmt.Errorf("file %s has %d bytes, the manifest says %d", p, fi.Size(), want.Bytes)
	}
	sum, _, err := exportdir.Sum(f)
	if err != nil {
		return fmt.Errorf("file %s: %w", p, err)
	}
	if sum != want.SHA256 {
		return fmt.Errorf("file %s is corrupted: sha256 %s, the manifest says %s", p, sum, want.SHA256)
	}
	return nil
}

// readSignatures reads and checks signatures.json, and parses the inputs.
func readSignatures(dir string) (exportdir.Signatures, map[string]map[string]input, error) {
	spath := filepath.Join(dir, exportdir.SignaturesFile)
	var sigs exportdir.Signatures
	data, err := os.ReadFile(spath)
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
				if part.kind == "input" {
					inputs[key][name] = in
				}
			}
		}
	}
	return sigs, inputs, nil
}

func parseInfo(ti TensorInfo) (input, error) {
	dt, err := estimator.DtypeByName(ti.Dtype)
	if err != nil {
		return input{}, err
	}
	if len(ti.Shape) == 0 || ti.Shape[0] != -1 {
		return input{}, fmt.Errorf("shape %v: want -1, the batch dimension, first", ti.Shape)
	}
	for _, d := range ti.Shape[1:] {
		if d < 1 {
			return input{}, fmt.Errorf("shape %v: every dimension after the first must be positive", ti.Shape)
		}
	}
	return input{dtype: dt, shape: slices.Clone(ti.Shape[1:])}, nil
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
// export's, each with the same shape and dtype, and returns the export's
// values by name.
func checkVariables(store *towers.Store, vars *checkpoint.Reader) (map[string]*tensor.Dense, error) {
	values := map[string]*tensor.Dense{}
	for _, name := range vars.Names() {
		t, err := vars.Tensor(name)
		if err != nil {
			return nil, err
		}
		values[name] = t
	}
	var problems []string
	mdl := map[string]bool{}
	for _, v := range store.Variables() {
		mdl[v.Name()] = true
		t, ok := values[v.Name()]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("the model's variable %q (shape %v dtype %v) is missing from the export", v.Name(), []int(v.Shape()), v.Dtype()))
		case !t.Shape().Eq(v.Shape()) || t.Dtype() != v.Dtype():
			problems = append(problems, fmt.Sprintf("variable %q has shape %v dtype %v in the model but shape %v dtype %v in the export",
				v.Name(), []int(v.Shape()), v.Dtype(), []int(t.Shape()), t.Dtype()))
		}
	}
	for _, name := range vars.Names() {
		if !mdl[name] {
			problems = append(problems, fmt.Sprintf("the export's variable %q is not a variable of the model", name))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("the model does not match the export's variables: %s", strings.Join(problems, "; "))
	}
	return values, nil
}

// Dir returns the version directory.
func (p *Predictor) Dir() string { return p.dir }

// Version returns the export's version, the name of its directory.
func (p *Predictor) Version() int64 { return p.version }

// Step returns the global step the export was made at.
func (p *Predictor) Step() int64 { return p.step }

// Signatures returns a copy of the export's signatures by key.
func (p *Predictor) Signatures() map[string]Signature {
	out := make(map[string]Signature, len(p.sigs))
	for key, sig := range p.sigs {
		out[key] = Signature{Method: sig.Method, Inputs: cloneInfos(sig.Inputs), Outputs: cloneInfos(sig.Outputs)}
	}
	return out
}

func cloneInfos(m map[string]TensorInfo) map[string]TensorInfo {
	out := make(map[string]TensorInfo, len(m))
	for k, v := range m {
		out[k] = TensorInfo{Dtype: v.Dtype, Shape: slices.Clone(v.Shape)}
	}
	return out
}

// Run computes the signature on a batch of features: every input of the
// signature, with the batch along dimension 0 (at least one row, the same
// in every input), the signature's dtype and per-example shape. A missing or
// unexpected input, a wrong dtype, shape or row count is an error wrapping
// ErrBadInput that names the input and what is expected; an unknown
// signature is an error wrapping ErrUnknownSignature. It returns the
// signature's outputs by name, with the batch along dimension 0; they are
// the caller's.
func (p *Predictor) Run(ctx context.Context, signature string, features map[string]*tensor.Dense) (map[string]*tensor.Dense, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return nil, fmt.Errorf("export: run %q: %w", signature, ErrClosed)
	}
	inputs, ok := p.inputs[signature]
	if !ok {
		return nil, fmt.Errorf("export: run: %w %q (the export has %q)", ErrUnknownSignature, signature, slices.Sorted(maps.Keys(p.inputs)))
	}
	if err := checkFeatures(inputs, features); err != nil {
		return nil, fmt.Errorf("export: run %q: %w", signature, err)
	}
	out, err := p.predict(ctx, estimator.Batch{Features: maps.Clone(features)})
	if err != nil {
		return nil, fmt.Errorf("export: run %q: %w", signature, err)
	}
	outs := out.ExportOutputs[signature]
	if p.fromPredictions {
		outs = out.Predictions
	}
	res := make(map[string]*tensor.Dense, len(p.sigs[signature].Outputs))
	for name := range p.sigs[signature].Outputs {
		v, ok := outs[name]
		if !ok {
			return nil, fmt.Errorf("export: run %q: the model made no output %q", signature, name)
		}
		res[name] = v
	}
	return res, nil
}

// checkFeatures checks a request's features against a signature's inputs.
func checkFeatures(inputs map[string]input, features map[string]*tensor.Dense) error {
	want := func(in input) string {
		return fmt.Sprintf("dtype %s shape %v", dtypeName(in.dtype), append([]int{-1}, in.shape...))
	}
	var missing, extra []string
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		if _, ok := features[name]; !ok {
			missing = append(missing, fmt.Sprintf("%q (%s)", name, want(inputs[name])))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(features)) {
		if _, ok := inputs[name]; !ok {
			extra = append(extra, fmt.Sprintf("%q", name))
		}
	}
	switch {
	case len(missing) > 0:
		return fmt.Errorf("%w: missing input %s", ErrBadInput, strings.Join(missing, ", "))
	case len(extra) > 0:
		return fmt.Errorf("%w: unexpected input %s (the signature takes %q)", ErrBadInput, strings.Join(extra, ", "), slices.Sorted(maps.Keys(inputs)))
	}
	rows, from := -1, ""
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		in, t := inputs[name], features[name]
		if t == nil {
			return fmt.Errorf("%w: input %q is nil, want %s", ErrBadInput, name, want(in))
		}
		if t.Dtype() != in.dtype {
			return fmt.Errorf("%w: input %q has dtype %s, want %s", ErrBadInput, name, dtypeName(t.Dtype()), want(in))
		}
		shape := t.Shape()
		if len(shape) != len(in.shape)+1 || !slices.Equal(shape[1:], in.shape) {
			return fmt.Errorf("%w: input %q has shape %v, want %s", ErrBadInput, name, []int(shape), want(in))
		}
		if shape[0] < 1 {
			return fmt.Errorf("%w: input %q has no rows, want %s with at least one row", ErrBadInput, name, want(in))
		}
		if rows >= 0 && shape[0] != rows {
			return fmt.Errorf("%w: input %q has %d rows, input %q has %d: every input needs the same batch", ErrBadInput, name, shape[0], from, rows)
		}
		rows, from = shape[0], name
	}
	return nil
}

func dtypeName(dt tensor.Dtype) string {
	if name, err := estimator.DtypeName(dt); err == nil {
		return name
	}
	return dt.String()
}

// predict runs one batch through the Estimator.
func (p *Predictor) predict(ctx context.Context, b estimator.Batch) (estimator.BatchOutput, error) {
	one := func(context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) { yield(b, nil) }
	}
	var res estimator.BatchOutput
	for out, err := range p.est.PredictBatches(ctx, one) {
		if err != nil {
			return estimator.BatchOutput{}, err
		}
		res = out
	}
	return res, nil
}

// Close releases the model's graphs. Run then fails with ErrClosed; Close
// waits for the runs in progress.
func (p *Predictor) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	return p.est.Close()
}
