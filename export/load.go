package export

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

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
//   - dir's name is its version, a positive integer in canonical decimal
//     (exportdir.ParseVersion: "7", not "07" or "+7");
//   - manifest.json must list every file of dir with its size and SHA-256,
//     and nothing else: a missing, extra, truncated or corrupted file is an
//     error naming it; only regular files are opened, so a named pipe, a
//     directory where a file belongs or a symbolic link out of dir is one
//     too;
//   - signatures.json gives the signatures, their inputs and outputs; one
//     example of an input or output may take at most 1 GiB; an input may
//     be sparse (TensorInfo.Sparse: shape [-1, the most values per
//     example]), an output may not, and an input two signatures share has
//     the same dtype, shape and kind in both;
//   - the model is built by one batch of zeros (one row per input; a
//     sparse input's row has no values), and
//     must make exactly the variables of the export (the global step
//     included), each with the export's shape and dtype, and export outputs
//     (or, for an export of predictions, predictions) with the signatures'
//     names, dtypes and shapes; a difference is an error naming the
//     variable or output;
//   - the export's variables are then loaded into the model.
//   - assets.extra/towerflow_preprocessor.json, when the export has it
//     (estimator.Preprocess), is loaded by the loader registered for its
//     kind (RegisterPreprocessor): an unregistered kind is an error naming
//     it and the package to import, a malformed file one naming the file;
//     Preprocess and PredictExamples then take raw examples.
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
	parser, preKind, err := readPreprocessor(dir)
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
	p = &Predictor{dir: dir, version: version, step: sigs.Step, sigs: sigs.Signatures, inputs: inputs, est: est, parser: parser, preKind: preKind}
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
	version, ok := exportdir.ParseVersion(base)
	if !ok {
		return 0, fmt.Errorf("directory name %q is not a version number (a positive integer in canonical decimal, without leading zeros or sign)", base)
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
			if prev, ok := all[name]; ok && (prev.dtype != spec.dtype || !slices.Equal(prev.shape, spec.shape) || prev.sparse != spec.sparse) {
				return fmt.Errorf("%s: input %q of signature %q is %s, another signature gives it as %s",
					exportdir.SignaturesFile, name, key, spec, prev)
			}
			all[name] = spec
		}
	}
	zeros := estimator.Batch{Features: map[string]*tensor.Dense{}, Sparse: map[string]sharding.SparseCOO{}}
	for name, spec := range all {
		if spec.sparse {
			zeros.Sparse[name] = sharding.SparseCOO{Indices: [][]int{}, Values: numeric.Over([]int{0}, numeric.NewSlice(spec.dtype, 0)), DenseShape: append([]int{1}, spec.shape...)}
			continue
		}
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
