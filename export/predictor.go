package export

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/sharding"
)

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
	// parser is the export's preprocessor, of kind preKind; nil without.
	parser  dataset.Parser
	preKind string

	mu     sync.RWMutex // Run holds it shared, Close exclusively
	closed bool
	est    *estimator.Estimator
}

// input is one signature input, parsed.
type input struct {
	dtype  tensor.Dtype
	shape  []int // per example: without the batch dimension
	sparse bool  // a list of at most shape[0] values per example
}

// String describes the input as errors name what is expected.
func (in input) String() string {
	if in.sparse {
		return fmt.Sprintf("sparse, dtype %s dense shape %v (at most %d values per example)", dtypeName(in.dtype), append([]int{-1}, in.shape...), in.shape[0])
	}
	return fmt.Sprintf("dtype %s shape %v", dtypeName(in.dtype), append([]int{-1}, in.shape...))
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
		out[key] = Signature{Method: sig.Method, Inputs: cloneInfos(sig.Inputs), Outputs: cloneInfos(sig.Outputs), ClassNames: slices.Clone(sig.ClassNames)}
	}
	return out
}

func cloneInfos(m map[string]TensorInfo) map[string]TensorInfo {
	out := make(map[string]TensorInfo, len(m))
	for k, v := range m {
		out[k] = TensorInfo{Dtype: v.Dtype, Shape: slices.Clone(v.Shape), Sparse: v.Sparse}
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
	return p.RunSparse(ctx, signature, features, nil)
}

// RunSparse is Run for a signature with sparse inputs (TensorInfo.Sparse):
// they are in sparse, the others in features. A sparse input of rows
// examples is a valid sharding.SparseCOO of the input's dtype and dense
// shape [rows, the most values per example] (an example may have none). An
// id a lookup finds out of its table's range, or weights that do not
// match their ids (layers.ErrLookupInput), is an error of the request,
// which wraps ErrBadInput too and names the input, the row and the id.
func (p *Predictor) RunSparse(ctx context.Context, signature string, features map[string]*tensor.Dense, sparse map[string]sharding.SparseCOO) (map[string]*tensor.Dense, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return nil, fmt.Errorf("export: run %q: %w", signature, ErrClosed)
	}
	inputs, ok := p.inputs[signature]
	if !ok {
		return nil, fmt.Errorf("export: run: %w %q (the export has %q)", ErrUnknownSignature, signature, slices.Sorted(maps.Keys(p.inputs)))
	}
	if err := checkFeatures(inputs, features, sparse); err != nil {
		return nil, fmt.Errorf("export: run %q: %w", signature, err)
	}
	out, err := p.predict(ctx, estimator.Batch{Features: maps.Clone(features), Sparse: maps.Clone(sparse)})
	if errors.Is(err, layers.ErrLookupInput) {
		return nil, fmt.Errorf("export: run %q: %w: %w", signature, ErrBadInput, err)
	}
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

// checkFeatures checks a request's features, dense and sparse, against a
// signature's inputs.
func checkFeatures(inputs map[string]input, features map[string]*tensor.Dense, sparse map[string]sharding.SparseCOO) error {
	want := func(in input) string { return in.String() }
	var missing, extra []string
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		_, dense := features[name]
		_, sp := sparse[name]
		switch in := inputs[name]; {
		case in.sparse && dense:
			return fmt.Errorf("%w: input %q is dense, want %s", ErrBadInput, name, want(in))
		case !in.sparse && sp:
			return fmt.Errorf("%w: input %q is sparse, want %s", ErrBadInput, name, want(in))
		case !dense && !sp:
			missing = append(missing, fmt.Sprintf("%q (%s)", name, want(in)))
		}
	}
	for _, name := range slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(features)), slices.Collect(maps.Keys(sparse))...))) {
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
		if in.sparse {
			s := sparse[name]
			if err := s.Validate(); err != nil {
				return fmt.Errorf("%w: input %q: %w", ErrBadInput, name, err)
			}
			if s.Values.Dtype() != in.dtype {
				return fmt.Errorf("%w: input %q has dtype %s, want %s", ErrBadInput, name, dtypeName(s.Values.Dtype()), want(in))
			}
			if len(s.DenseShape) != len(in.shape)+1 || !slices.Equal(s.DenseShape[1:], in.shape) {
				return fmt.Errorf("%w: input %q has dense shape %v, want %s", ErrBadInput, name, s.DenseShape, want(in))
			}
			if s.DenseShape[0] < 1 {
				return fmt.Errorf("%w: input %q has no rows, want %s with at least one row", ErrBadInput, name, want(in))
			}
			if rows >= 0 && s.DenseShape[0] != rows {
				return fmt.Errorf("%w: input %q has %d rows, input %q has %d: every input needs the same batch", ErrBadInput, name, s.DenseShape[0], from, rows)
			}
			rows, from = s.DenseShape[0], name
			continue
		}
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
