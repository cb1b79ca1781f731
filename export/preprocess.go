package export

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/internal/fsutil"
	"github.com/towerflow/towerflow/internal/guard"
	"github.com/towerflow/towerflow/sharding"
)

// PreprocessorLoader rebuilds a preprocessor of one kind from the JSON
// its MarshalJSON wrote (estimator.Preprocessor): the dataset.Parser
// that serving runs raw records through.
type PreprocessorLoader func(config []byte) (dataset.Parser, error)

var preprocessors struct {
	sync.RWMutex
	m map[string]PreprocessorLoader
}

// RegisterPreprocessor makes the preprocessors of kind loadable: Load
// rebuilds an export's preprocessor of that kind with load. A package
// that defines a kind registers it in an init function, as database/sql
// drivers register themselves; the kinds of towerflow's own packages are
// "towerflow/NAME", registered by package github.com/towerflow/towerflow/NAME
// (package columns registers "towerflow/columns"). Registering a kind
// twice, an empty kind or a nil loader panics.
func RegisterPreprocessor(kind string, load func(config []byte) (dataset.Parser, error)) {
	if kind == "" {
		panic("export: RegisterPreprocessor: empty kind")
	}
	if load == nil {
		panic(fmt.Sprintf("export: RegisterPreprocessor %q: nil loader", kind))
	}
	preprocessors.Lock()
	defer preprocessors.Unlock()
	if _, dup := preprocessors.m[kind]; dup {
		panic(fmt.Sprintf("export: RegisterPreprocessor called twice for kind %q", kind))
	}
	if preprocessors.m == nil {
		preprocessors.m = map[string]PreprocessorLoader{}
	}
	preprocessors.m[kind] = load
}

// PreprocessorKinds returns the kinds registered, sorted.
func PreprocessorKinds() []string {
	preprocessors.RLock()
	defer preprocessors.RUnlock()
	return slices.Sorted(maps.Keys(preprocessors.m))
}

// LoadPreprocessor rebuilds the preprocessor an export version directory
// records (estimator.Preprocess), as Load does, without the model: what a
// program needs to make the model function again where that depends on
// it (a canned estimator takes its columns.Transformer, as in
// docs/serving.md), or to describe the raw features the export is served.
// It returns a nil Parser and "" when the export has none. The manifest
// is checked as Load checks it, but for the checksums of the files other
// than the preprocessor's (the variables are not read).
func LoadPreprocessor(dir string) (p dataset.Parser, kind string, err error) {
	fail := func(err error) (dataset.Parser, string, error) {
		return nil, "", fmt.Errorf("export: load the preprocessor of %s: %w", dir, err)
	}
	if _, err := versionOf(dir); err != nil {
		return fail(err)
	}
	if err := verifyManifestOf(dir, func(rel string) bool { return rel == exportdir.PreprocessorFile }); err != nil {
		return fail(err)
	}
	if p, kind, err = readPreprocessor(dir); err != nil {
		return fail(err)
	}
	return p, kind, nil
}

// readPreprocessor reads and loads dir's preprocessor: nil and "" when
// the export has none.
func readPreprocessor(dir string) (dataset.Parser, string, error) {
	path := filepath.Join(dir, filepath.FromSlash(exportdir.PreprocessorFile))
	data, err := fsutil.ReadRegularAtMost(dir, exportdir.PreprocessorFile, exportdir.MaxPreprocessorBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	var pre exportdir.Preprocessor
	if err := json.Unmarshal(data, &pre); err != nil {
		return nil, "", fmt.Errorf("preprocessor %s: %w", path, err)
	}
	if pre.Kind == "" || len(pre.Config) == 0 {
		return nil, "", fmt.Errorf("preprocessor %s: want an object with a \"kind\" and a \"config\"", path)
	}
	preprocessors.RLock()
	load, ok := preprocessors.m[pre.Kind]
	preprocessors.RUnlock()
	if !ok {
		return nil, "", fmt.Errorf("preprocessor %s: kind %q is not registered: %s", path, pre.Kind, importHint(pre.Kind))
	}
	var parser dataset.Parser
	err = guard.Call(fmt.Sprintf("preprocessor loader of kind %q", pre.Kind), "load", func() (err error) {
		parser, err = load(pre.Config)
		return err
	})
	if err == nil && parser == nil {
		err = errors.New("the loader returned no parser")
	}
	if err != nil {
		return nil, "", fmt.Errorf("preprocessor %s of kind %q: %w", path, pre.Kind, err)
	}
	return parser, pre.Kind, nil
}

// importHint says which package to import for an unregistered kind.
func importHint(kind string) string {
	if name, ok := strings.CutPrefix(kind, "towerflow/"); ok && name != "" && !strings.ContainsAny(name, " \"") {
		return fmt.Sprintf("its package must be imported, as import _ \"github.com/towerflow/towerflow/%s\"", name)
	}
	return fmt.Sprintf("the package that defines it must be imported (it registers the kind with export.RegisterPreprocessor in an init function; registered: %q)", PreprocessorKinds())
}

// Preprocessor returns the kind of the export's preprocessor
// (estimator.Preprocess), and whether it has one.
func (p *Predictor) Preprocessor() (kind string, ok bool) {
	return p.preKind, p.parser != nil
}

// RawSpec describes the raw features the export's preprocessor reads
// (dataset.RawSpecer), or is nil when it has none or does not say.
func (p *Predictor) RawSpec() map[string]dataset.FeatureSpec {
	if rs, ok := p.parser.(dataset.RawSpecer); ok {
		return maps.Clone(rs.RawSpec())
	}
	return nil
}

// Preprocess runs raw examples through the export's preprocessor and
// returns the signature's inputs it makes, dense and sparse (nil without
// sparse inputs), ready for RunSparse. A sparse input is given the
// signature's most values per example as its dense shape's width; an
// example with more is an error of the request (which a
// dataset.BoundedParser, told these widths, may find before it makes the
// values). Labels and features the signature does not take are left out.
//
// An error of the preprocessor about the examples (a *dataset.ParseError
// names the example and the feature), no examples, or an example with
// too many values wraps ErrBadInput; an unknown signature wraps
// ErrUnknownSignature; an export without a preprocessor, a panic of the
// preprocessor (dataset.ErrParser) or an input it does not make is an
// error of the export.
func (p *Predictor) Preprocess(signature string, examples []dataset.Example) (map[string]*tensor.Dense, map[string]sharding.SparseCOO, error) {
	fail := func(err error) (map[string]*tensor.Dense, map[string]sharding.SparseCOO, error) {
		return nil, nil, fmt.Errorf("export: preprocess for %q: %w", signature, err)
	}
	if p.parser == nil {
		return fail(errors.New("the export has no preprocessor: its signatures take the model's tensors (Run)"))
	}
	inputs, ok := p.inputs[signature]
	if !ok {
		return fail(fmt.Errorf("%w %q (the export has %q)", ErrUnknownSignature, signature, slices.Sorted(maps.Keys(p.inputs))))
	}
	if len(examples) == 0 {
		return fail(fmt.Errorf("%w: no examples", ErrBadInput))
	}
	most := map[string]int{}
	for name, in := range inputs {
		if in.sparse {
			most[name] = in.shape[0]
		}
	}
	b, err := dataset.ParseGuardedBounded(p.parser, examples, most)
	switch {
	case errors.Is(err, dataset.ErrParser):
		return fail(fmt.Errorf("preprocessor %q: %w", p.preKind, err))
	case err != nil:
		return fail(fmt.Errorf("%w: %w", ErrBadInput, err))
	}
	features := map[string]*tensor.Dense{}
	var sparse map[string]sharding.SparseCOO
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		in := inputs[name]
		t, dense := b.Features[name]
		s, sp := b.Sparse[name]
		switch {
		case dense && in.sparse:
			return fail(fmt.Errorf("preprocessor %q made input %q dense, the signature takes it %s", p.preKind, name, in))
		case sp && !in.sparse:
			return fail(fmt.Errorf("preprocessor %q made input %q sparse, the signature takes it as %s", p.preKind, name, in))
		case dense:
			features[name] = t
		case sp && len(s.DenseShape) == 2:
			if s.DenseShape[1] > in.shape[0] {
				return fail(tooManyValues(name, s, in.shape[0]))
			}
			s.DenseShape = []int{s.DenseShape[0], in.shape[0]}
			fallthrough
		case sp: // a dense shape RunSparse refuses, naming it
			if sparse == nil {
				sparse = map[string]sharding.SparseCOO{}
			}
			sparse[name] = s
		default:
			return fail(fmt.Errorf("preprocessor %q made no input %q (%s), which the signature takes", p.preKind, name, in))
		}
	}
	return features, sparse, nil
}

// tooManyValues is the error of a sparse input with an example of more
// values than the most the signature takes.
func tooManyValues(name string, s sharding.SparseCOO, most int) error {
	counts := map[int]int{}
	for _, idx := range s.Indices {
		if len(idx) == 2 && idx[1] >= most {
			counts[idx[0]] = max(counts[idx[0]], idx[1]+1)
		}
	}
	if len(counts) == 0 {
		return fmt.Errorf("%w: input %q has dense shape %v: the signature takes at most %d values per example", ErrBadInput, name, s.DenseShape, most)
	}
	row := slices.Min(slices.Collect(maps.Keys(counts)))
	return fmt.Errorf("%w: example %d: input %q has %d values, the signature takes at most %d", ErrBadInput, row, name, counts[row], most)
}

// PredictExamples runs raw examples through the export's preprocessor
// (Preprocess) and then the signature (RunSparse): what serving does
// with a request of raw feature values.
func (p *Predictor) PredictExamples(ctx context.Context, signature string, examples []dataset.Example) (map[string]*tensor.Dense, error) {
	features, sparse, err := p.Preprocess(signature, examples)
	if err != nil {
		return nil, err
	}
	return p.RunSparse(ctx, signature, features, sparse)
}
