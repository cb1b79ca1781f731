package estimator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/internal/fsutil"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// FeatureSpec describes one feature of a serving request: its dtype and
// the shape of one example (without the batch dimension).
//
// A sparse feature (Sparse) is a variable-length list of values per
// example, such as a bag of ids for layers.EmbeddingLookupSparse or their
// weights: Shape is one dimension, the most values an example may have
// ([8]: 0 to 8 ids). The model function gets it as a sharding.SparseCOO
// of dense shape [batch, Shape[0]] whose entry j of row r has index [r, j]
// (Scope.SparseFeature), as an input function would give it; a request
// with more values in an example is refused. Signatures record it as
// sparse (TensorInfo.Sparse), and export.Predictor and package serving
// take it as such.
type FeatureSpec struct {
	Dtype  tensor.Dtype
	Shape  []int
	Sparse bool
}

// ServingInput describes the features a served request carries, by name:
// what TensorFlow's serving_input_receiver_fn said.
type ServingInput map[string]FeatureSpec

// ExportOption adjusts Export.
type ExportOption func(*exportOptions)

type exportOptions struct {
	keep      int
	untrained bool
	pre       Preprocessor
}

// KeepVersions keeps the newest n versions in the base directory after
// writing (0, the default, keeps all).
func KeepVersions(n int) ExportOption { return func(o *exportOptions) { o.keep = n } }

// AllowUntrained exports the variables as they are even when nothing was
// trained or restored (see Export): for a model whose initial values are
// what it serves, such as constants in a test.
func AllowUntrained() ExportOption { return func(o *exportOptions) { o.untrained = true } }

// Export restores the latest checkpoint of the model directory and writes
// a new version directory under baseDir (version = the largest existing
// plus one) holding the serving signatures, the variables the model uses
// in predict mode, and a manifest with checksums. The version is written
// under a temporary name and renamed, so a half-written export is never
// seen. Without export outputs in the Spec, the default signature serves
// every prediction. It returns the version directory. Export needs trained
// variables: a checkpoint of the model directory, one RestoreCheckpoint
// loaded, or (without a model directory) steps trained by this
// Estimator; else it is an error wrapping ErrNotTrained, warm start or
// not, unless the option AllowUntrained is given.
func (e *Estimator) Export(ctx context.Context, baseDir string, inputs ServingInput, opts ...ExportOption) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.checkOpen("export"); err != nil {
		return "", err
	}
	var o exportOptions
	for _, opt := range opts {
		opt(&o)
	}
	if len(inputs) == 0 {
		return "", fmt.Errorf("export: no serving inputs")
	}
	if e.rank != 0 {
		return "", fmt.Errorf("export: this is process rank %d of %d; rank 0 alone exports (it holds the same variables)", e.rank, e.procs)
	}
	files := map[string][]byte{}
	if o.pre != nil {
		data, err := preprocessorFile(o.pre)
		if err != nil {
			return "", fmt.Errorf("export: %w", err)
		}
		files[exportdir.PreprocessorFile] = data
	}
	if err := e.restoreForExport(o.untrained); err != nil {
		return "", fmt.Errorf("export: %w", err)
	}
	batch, sigInputs, err := zeroExample(inputs)
	if err != nil {
		return "", fmt.Errorf("export: %w", err)
	}
	// One example of zeros builds the predict towers and tells the
	// outputs' dtypes and shapes.
	out, err := e.eng.PredictStep(ctx, batch)
	if err != nil {
		return "", fmt.Errorf("export: %w", err)
	}
	exportOutputs, varNames, _ := e.eng.PredictSpec()
	sigs, err := signatures(e.eng.Step(), sigInputs, exportOutputs, out)
	if err != nil {
		return "", fmt.Errorf("export: %w", err)
	}
	used, err := e.usedVariables(varNames)
	if err != nil {
		return "", fmt.Errorf("export: %w", err)
	}
	dir, err := writeVersion(baseDir, sigs, used, files)
	if err != nil {
		return "", fmt.Errorf("export: %w", err)
	}
	if o.keep > 0 {
		if err := pruneVersions(baseDir, o.keep); err != nil {
			return dir, fmt.Errorf("export: %w", err)
		}
	}
	e.log.Info("exported", "dir", dir, "global_step", sigs.Step)
	return dir, nil
}

// restoreForExport restores the latest checkpoint and, unless untrained,
// checks that the variables are trained ones: restored from a checkpoint,
// or, without a model directory, trained by this Estimator.
func (e *Estimator) restoreForExport(untrained bool) error {
	if untrained {
		return e.restoreLatest()
	}
	if err := e.restoreTrained(false); err != nil {
		return err
	}
	if e.cfg.ModelDir == "" && e.ckpt == "" && e.eng.Step() == 0 {
		return fmt.Errorf("%w: no model directory, no checkpoint restored and no step trained: the variables would be their initial values (AllowUntrained exports them)", ErrNotTrained)
	}
	return nil
}

// zeroExample returns a batch of one example of zeros of the serving
// inputs, and the inputs as signatures describe them.
func zeroExample(inputs ServingInput) (Batch, map[string]exportdir.TensorInfo, error) {
	batch := Batch{Features: map[string]*tensor.Dense{}}
	sigInputs := map[string]exportdir.TensorInfo{}
	for name, fs := range inputs {
		if fs.Dtype.Type == nil {
			return Batch{}, nil, fmt.Errorf("serving input %q has no dtype", name)
		}
		dt, err := DtypeName(fs.Dtype)
		if err != nil {
			return Batch{}, nil, fmt.Errorf("serving input %q: %w", name, err)
		}
		shape := append([]int{1}, fs.Shape...)
		if slices.ContainsFunc(fs.Shape, func(d int) bool { return d < 1 }) {
			return Batch{}, nil, fmt.Errorf("serving input %q has shape %v: every dimension must be positive", name, fs.Shape)
		}
		// The limit loading the export applies: one example it cannot
		// load is neither allocated here nor written.
		n, err := numeric.ElementsWithin(fs.Shape, int(fs.Dtype.Size()), exportdir.MaxExampleBytes)
		if err != nil {
			return Batch{}, nil, fmt.Errorf("serving input %q of %v: one example is too large: %w", name, fs.Dtype, err)
		}
		sigInputs[name] = exportdir.TensorInfo{Dtype: dt, Shape: append([]int{-1}, fs.Shape...), Sparse: fs.Sparse}
		if fs.Sparse {
			if len(fs.Shape) != 1 {
				return Batch{}, nil, fmt.Errorf("sparse serving input %q has shape %v: want one dimension, the most values per example", name, fs.Shape)
			}
			// An example without values: the model's lookups give zeros.
			if batch.Sparse == nil {
				batch.Sparse = map[string]sharding.SparseCOO{}
			}
			batch.Sparse[name] = sharding.SparseCOO{Indices: [][]int{}, Values: numeric.Over([]int{0}, numeric.NewSlice(fs.Dtype, 0)), DenseShape: shape}
			continue
		}
		batch.Features[name] = numeric.Over(shape, numeric.NewSlice(fs.Dtype, n))
	}
	return batch, sigInputs, nil
}

// signatures describes the export's signatures: the model's export outputs,
// or without any the default signature serving every prediction, each with
// the serving inputs and its outputs' dtypes and shapes as out has them.
func signatures(step int64, inputs map[string]exportdir.TensorInfo, exportOutputs map[string]model.ExportOutput, out BatchOutput) (exportdir.Signatures, error) {
	sigs := exportdir.Signatures{Format: exportdir.Format, Step: step, Signatures: map[string]exportdir.Signature{}}
	outs := out.ExportOutputs
	if len(exportOutputs) == 0 {
		outs = map[string]map[string]*tensor.Dense{model.DefaultServingSignature: out.Predictions}
		sigs.Signatures[model.DefaultServingSignature] = exportdir.Signature{Method: "predict"}
	}
	for key, out := range exportOutputs {
		sigs.Signatures[key] = exportdir.Signature{Method: out.Method(), ClassNames: classNames(out)}
	}
	for key, sig := range sigs.Signatures {
		sig.Inputs, sig.Outputs = inputs, map[string]exportdir.TensorInfo{}
		for name, v := range outs[key] {
			dt, err := DtypeName(v.Dtype())
			if err != nil {
				return exportdir.Signatures{}, fmt.Errorf("output %q of signature %q: %w", name, key, err)
			}
			sig.Outputs[name] = exportdir.TensorInfo{Dtype: dt, Shape: append([]int{-1}, v.Shape()[1:]...)}
		}
		if err := exportdir.CheckClassNames(sig); err != nil {
			return exportdir.Signatures{}, fmt.Errorf("signature %q: %w", key, err)
		}
		sigs.Signatures[key] = sig
	}
	return sigs, nil
}

// classNames returns the class names of a classification output, nil for
// any other.
func classNames(out model.ExportOutput) []string {
	switch c := out.(type) {
	case model.ClassificationOutput:
		return slices.Clone(c.ClassNames)
	case *model.ClassificationOutput:
		if c != nil {
			return slices.Clone(c.ClassNames)
		}
	}
	return nil
}

// usedVariables copies the variables predict mode uses, and the global
// step, into a store of their own.
func (e *Estimator) usedVariables(names []string) (*towers.Store, error) {
	used := towers.NewStore(towers.StoreConfig{})
	for _, name := range append([]string{model.GlobalStepName}, names...) {
		v, err := e.store().Lookup(name)
		if err != nil {
			return nil, err
		}
		val := numeric.Over(v.Shape(), numeric.Copy(v.Data()))
		if _, _, err := used.GetOrCreate(towers.VarSpec{Name: name, Dtype: v.Dtype(), Shape: v.Shape(), Init: towers.Values(val), Trainable: v.Trainable()}); err != nil {
			return nil, err
		}
	}
	return used, nil
}

// DtypeName returns TensorFlow's name for dt, as signatures carry it.
func DtypeName(dt tensor.Dtype) (string, error) {
	for name, d := range dtypesByName {
		if d == dt {
			return name, nil
		}
	}
	return "", fmt.Errorf("dtype %v cannot be served", dt)
}

// DtypeByName returns the dtype TensorFlow calls name.
func DtypeByName(name string) (tensor.Dtype, error) {
	if d, ok := dtypesByName[name]; ok {
		return d, nil
	}
	return tensor.Dtype{}, fmt.Errorf("unknown dtype %q (known: %v)", name, slices.Sorted(maps.Keys(dtypesByName)))
}

var dtypesByName = map[string]tensor.Dtype{
	"float32": tensor.Float32, "float64": tensor.Float64, "int64": tensor.Int64,
	"int32": tensor.Int32, "bool": tensor.Bool, "uint8": tensor.Uint8,
}

// Versions returns the version directories of baseDir, ascending: those
// named by a positive integer in canonical decimal (exportdir.ParseVersion:
// "7", not "07" or "+7"); other names are not versions.
func Versions(baseDir string) ([]int64, error) {
	vs, _, err := exportdir.ScanVersions(baseDir)
	return vs, err
}

// writeVersion writes a new version: sigs, the variables of store, and
// files (by slash-separated path in the version).
func writeVersion(baseDir string, sigs exportdir.Signatures, store *towers.Store, files map[string][]byte) (string, error) {
	if err := os.MkdirAll(baseDir, 0o755); err != nil {
		return "", err
	}
	vs, err := Versions(baseDir)
	if err != nil {
		return "", err
	}
	version := int64(1)
	if len(vs) > 0 {
		version = vs[len(vs)-1] + 1
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(baseDir, fmt.Sprintf(".tmp-%d-%s", version, hex.EncodeToString(rnd[:])))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // after a successful rename there is nothing left
	if _, err := checkpoint.Save(filepath.Join(tmp, exportdir.VariablesDir), store, sigs.Step, 0); err != nil {
		return "", err
	}
	if err := writeJSON(filepath.Join(tmp, exportdir.SignaturesFile), sigs); err != nil {
		return "", err
	}
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(tmp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		if err := fsutil.WriteFileSync(path, files[rel]); err != nil {
			return "", err
		}
		if err := fsutil.SyncDir(filepath.Dir(path)); err != nil {
			return "", err
		}
	}
	m := exportdir.Manifest{Format: exportdir.Format}
	err = filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(tmp, path)
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sum, n, err := exportdir.Sum(f)
		if err != nil {
			return err
		}
		m.Files = append(m.Files, exportdir.File{Path: filepath.ToSlash(rel), SHA256: sum, Bytes: n})
		return nil
	})
	if err != nil {
		return "", err
	}
	if err := writeJSON(filepath.Join(tmp, exportdir.ManifestFile), m); err != nil {
		return "", err
	}
	if err := fsutil.SyncDir(tmp); err != nil {
		return "", err
	}
	dir := filepath.Join(baseDir, strconv.FormatInt(version, 10))
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, fsutil.SyncDir(baseDir)
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileSync(path, append(data, '\n'))
}

func pruneVersions(baseDir string, keep int) error {
	vs, err := Versions(baseDir)
	if err != nil {
		return err
	}
	for len(vs) > keep {
		if err := os.RemoveAll(filepath.Join(baseDir, strconv.FormatInt(vs[0], 10))); err != nil {
			return err
		}
		vs = vs[1:]
	}
	return nil
}
