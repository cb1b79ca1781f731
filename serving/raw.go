package serving

// Raw feature values: the requests of a version whose export has a
// preprocessor (estimator.Preprocess) carry raw features by name, which
// are turned into dataset.Examples and preprocessed into the signature's
// inputs.

import (
	"context"
	"encoding/base64"
	"maps"
	"math"
	"slices"
	"strconv"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/sharding"
)

// ExampleServable is a SparseServable that may take raw examples, as
// *export.Predictor does: a version whose Preprocessor reports one is
// served raw feature values by name (see the package documentation),
// which the server turns into dataset.Examples and runs through
// Preprocess before the signature.
type ExampleServable interface {
	SparseServable
	// Preprocessor returns the kind of the version's preprocessor, and
	// whether it has one.
	Preprocessor() (kind string, ok bool)
	// RawSpec describes the raw features the preprocessor reads, or is
	// nil when it does not say (see dataset.RawSpecer).
	RawSpec() map[string]dataset.FeatureSpec
	// Preprocess turns examples into a signature's inputs. Errors about
	// the examples wrap export.ErrBadInput.
	Preprocess(signature string, examples []dataset.Example) (map[string]*tensor.Dense, map[string]sharding.SparseCOO, error)
}

var _ ExampleServable = (*export.Predictor)(nil)

// rawInputs is the preprocessor of a version that has one.
type rawInputs struct {
	s    ExampleServable
	kind string
	spec map[string]dataset.FeatureSpec // nil when not described
}

// rawInputsOf returns s's preprocessor, nil when it has none.
func rawInputsOf(s Servable) *rawInputs {
	es, ok := s.(ExampleServable)
	if !ok {
		return nil
	}
	kind, ok := es.Preprocessor()
	if !ok {
		return nil
	}
	return &rawInputs{s: es, kind: kind, spec: es.RawSpec()}
}

// rawRequest reads the raw examples of a predict, classify or regress
// request and preprocesses them into the features of signature sig.
func rawRequest(ctx context.Context, req map[string]any, method, sig string, raw *rawInputs, lim limits) (features map[string]*tensor.Dense, sparse map[string]sharding.SparseCOO, rows int, columnar bool, err error) {
	var examples []dataset.Example
	switch method {
	case "predict":
		examples, columnar, err = rawPredictExamples(req, raw, lim)
	default:
		examples, err = rawTFExamples(req, method, raw, lim)
	}
	if err != nil {
		return nil, nil, 0, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, 0, false, err
	}
	features, sparse, err = raw.s.Preprocess(sig, examples)
	if err != nil {
		return nil, nil, 0, false, err
	}
	return features, sparse, len(examples), columnar, nil
}

// rawTFExamples reads the "context" and "examples" of a classify or
// regress request: tf.Example JSON, each feature a value or a list of
// values.
func rawTFExamples(req map[string]any, method string, raw *rawInputs, lim limits) ([]dataset.Example, error) {
	shared, list, err := exampleList(req, method)
	if err != nil {
		return nil, err
	}
	if err := lim.checkRows(len(list)); err != nil {
		return nil, err
	}
	var common dataset.Example
	if shared != nil {
		if common, err = raw.example(shared); err != nil {
			return nil, within(err, "'context': ")
		}
	}
	examples := make([]dataset.Example, len(list))
	for i, e := range list {
		obj, ok := e.(map[string]any)
		if !ok {
			return nil, badRequestf("example %d: Example must be JSON object but got JSON %s", i, jsonTypeName(e))
		}
		ex, err := raw.example(obj)
		if err != nil {
			return nil, within(err, "example %d: ", i)
		}
		for name, f := range common {
			if _, dup := ex[name]; dup {
				return nil, badRequestf("example %d: feature %q is in the context too: a feature of the context must not appear in examples", i, echo(name))
			}
			ex[name] = f
		}
		examples[i] = ex
	}
	return examples, nil
}

// rawPredictExamples reads the examples of a predict request: "instances",
// an object of raw features by name per example, or "inputs", an object
// of each feature's values, one entry per example.
func rawPredictExamples(req map[string]any, raw *rawInputs, lim limits) ([]dataset.Example, bool, error) {
	instances, hasInstances := req["instances"]
	columns, hasInputs := req["inputs"]
	switch {
	case hasInstances && hasInputs:
		return nil, false, badRequestf("Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist")
	case hasInstances:
		list, ok := instances.([]any)
		if !ok {
			return nil, false, badRequestf("Expecting 'instances' to be a list, got %s", jsonText(instances))
		}
		if len(list) == 0 {
			return nil, false, badRequestf("No values in 'instances' array")
		}
		if err := lim.checkRows(len(list)); err != nil {
			return nil, false, err
		}
		examples := make([]dataset.Example, len(list))
		for i, inst := range list {
			obj, ok := inst.(map[string]any)
			if !ok {
				return nil, false, badRequestf("instance %d: want an object of raw feature values by name (the model preprocesses raw features), got %s", i, jsonText(inst))
			}
			ex, err := raw.example(obj)
			if err != nil {
				return nil, false, within(err, "instance %d: ", i)
			}
			examples[i] = ex
		}
		return examples, false, nil
	case hasInputs:
		obj, ok := columns.(map[string]any)
		if !ok {
			return nil, false, badRequestf("'inputs': want an object of raw features by name, each a list with one entry per example (the model preprocesses raw features), got %s", jsonText(columns))
		}
		rows, first := -1, ""
		var examples []dataset.Example
		for _, name := range slices.Sorted(maps.Keys(obj)) {
			list, ok := obj[name].([]any)
			if !ok {
				return nil, false, badRequestf("'inputs': feature %q: want a list with one entry per example, got %s", echo(name), jsonText(obj[name]))
			}
			if rows >= 0 && len(list) != rows {
				return nil, false, badRequestf("'inputs': feature %q has %d examples, feature %q has %d: every feature needs the same batch", echo(name), len(list), echo(first), rows)
			}
			if err := lim.checkRows(len(list)); err != nil {
				return nil, false, err
			}
			if rows < 0 {
				rows, first = len(list), name
				examples = make([]dataset.Example, rows)
				for i := range examples {
					examples[i] = dataset.Example{}
				}
			}
			for i, v := range list {
				f, err := raw.feature(name, v)
				if err != nil {
					return nil, false, within(err, "'inputs': example %d: feature %q: ", i, echo(name))
				}
				examples[i][name] = f
			}
		}
		if rows <= 0 {
			return nil, false, badRequestf("'inputs': no examples")
		}
		return examples, true, nil
	}
	return nil, false, badRequestf("Missing 'inputs' or 'instances' key")
}

// example turns an object of raw features by name into an Example.
func (r *rawInputs) example(obj map[string]any) (dataset.Example, error) {
	ex := make(dataset.Example, len(obj))
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		f, err := r.feature(name, obj[name])
		if err != nil {
			return nil, within(err, "feature %q: ", echo(name))
		}
		ex[name] = f
	}
	return ex, nil
}

// kindOf is the kind of list a feature spec's dtype is read from.
func kindOf(dt tensor.Dtype) dataset.Kind {
	switch dt {
	case tensor.Int64:
		return dataset.KindInt64
	case tensor.Float32, tensor.Float64:
		return dataset.KindFloat
	case tensor.String:
		return dataset.KindBytes
	}
	return dataset.KindNone
}

// feature turns a raw feature's JSON value, a value or a flat list of
// values, into a Feature: strings and {"b64": ...} objects are bytes, as
// tf.Example JSON writes them. A feature the preprocessor describes
// (RawSpec) is read as its kind: a number as a float for a float feature,
// as its text as written for a bytes one. Another is read as its values
// say: integers (and booleans, 0 and 1) an int64 list, numbers with a
// fraction or an exponent a float list.
func (r *rawInputs) feature(name string, v any) (dataset.Feature, error) {
	vals, ok := v.([]any)
	if !ok {
		vals = []any{v}
	}
	for j, x := range vals {
		switch x := x.(type) {
		case nil:
			return dataset.Feature{}, badRequestf("value %d is null, want a string or a number", j)
		case []any:
			return dataset.Feature{}, badRequestf("value %d is a list: want a value or a flat list of values", j)
		case map[string]any:
			if _, ok := x["b64"]; !ok || len(x) != 1 {
				return dataset.Feature{}, badRequestf("value %d is the object %s: the only object a value may be is {\"b64\": base64 bytes}", j, jsonText(x))
			}
		}
	}
	kind := dataset.KindNone
	s, described := r.spec[name]
	if described {
		kind = kindOf(s.Dtype)
	}
	if kind == dataset.KindNone {
		kind = inferKind(vals)
	}
	var f dataset.Feature
	switch kind {
	case dataset.KindBytes:
		f.Bytes = make([][]byte, len(vals))
		for j, x := range vals {
			b, err := rawBytes(x, described)
			if err != nil {
				return dataset.Feature{}, within(err, "value %d: ", j)
			}
			f.Bytes[j] = b
		}
	case dataset.KindFloat:
		f.Floats = make([]float32, len(vals))
		for j, x := range vals {
			if _, isBool := x.(bool); isBool {
				return dataset.Feature{}, badRequestf("value %d: %s is not a number (a float feature)", j, jsonText(x))
			}
			x, err := jsonFloat(x, 64)
			if err == nil && !math.IsInf(x, 0) && math.Abs(x) > math.MaxFloat32 {
				err = badRequestf("%g is beyond float32's range", x)
			}
			if err != nil {
				return dataset.Feature{}, within(err, "value %d (a float feature): ", j)
			}
			f.Floats[j] = float32(x)
		}
	case dataset.KindInt64:
		f.Int64s = make([]int64, len(vals))
		for j, x := range vals {
			i, err := jsonInt(x, 64, "int64", true)
			if err != nil {
				return dataset.Feature{}, within(err, "value %d (an int64 feature): ", j)
			}
			f.Int64s[j] = i
		}
	default: // an empty list of a feature not described
	}
	return f, nil
}

// inferKind is the kind of list a feature's values make, as tf.Example
// JSON: strings and bytes a bytes list; integers and booleans an int64
// list; numbers with a fraction or an exponent (NaN, Infinity) a float
// list. Mixed strings and numbers are read as bytes, which rawBytes
// refuses for the numbers; no values, KindNone.
func inferKind(vals []any) dataset.Kind {
	kind := dataset.KindNone
	for _, x := range vals {
		switch x := x.(type) {
		case string, map[string]any:
			return dataset.KindBytes
		case bool:
			if kind == dataset.KindNone {
				kind = dataset.KindInt64
			}
		case jsonNumber:
			if !isIntLiteral(x) {
				kind = dataset.KindFloat
			} else if kind == dataset.KindNone {
				kind = dataset.KindInt64
			}
		}
	}
	return kind
}

// rawBytes is a bytes value: a string, {"b64": base64} or, for a
// feature described as bytes, a number's text as written.
func rawBytes(x any, described bool) ([]byte, error) {
	switch x := x.(type) {
	case string:
		return []byte(x), nil
	case map[string]any:
		s, ok := x["b64"].(string)
		if !ok {
			return nil, badRequestf("\"b64\" holds %s, want a base64 string", jsonText(x["b64"]))
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			if b, err2 := base64.URLEncoding.DecodeString(s); err2 == nil {
				return b, nil
			}
			return nil, badRequestf("\"b64\" is not base64: %v", err)
		}
		return b, nil
	case jsonNumber:
		if described {
			return []byte(x), nil
		}
		return nil, badRequestf("%s is a number among strings: a feature's values are all strings or all numbers", jsonText(x))
	}
	return nil, badRequestf("%s is not a string (a bytes feature)", jsonText(x))
}

// tensorInfos describes the raw features the preprocessor reads (labels
// left out) as metadata describes inputs: TensorFlow's DataType of the
// tf.Example list (DT_STRING, DT_FLOAT, DT_INT64) and the shape with -1
// for the batch; a variable-length feature is sparse, of shape [-1, -1].
// Without a description, there are none.
func (r *rawInputs) tensorInfos() map[string]tfTensorInfo {
	out := map[string]tfTensorInfo{}
	for name, s := range r.spec {
		if s.Label {
			continue
		}
		dt := map[dataset.Kind]string{dataset.KindBytes: "DT_STRING", dataset.KindFloat: "DT_FLOAT", dataset.KindInt64: "DT_INT64"}[kindOf(s.Dtype)]
		if dt == "" {
			dt = "DT_INVALID"
		}
		dims := []tfDim{{Size: "-1"}}
		if s.VarLen {
			dims = append(dims, tfDim{Size: "-1"})
		}
		for _, d := range s.Shape {
			dims = append(dims, tfDim{Size: strconv.Itoa(d)})
		}
		info := tfTensorInfo{Dtype: dt, TensorShape: tfTensorShape{Dim: dims}, Name: name}
		if s.VarLen {
			info.Name, info.CooSparse = "", &tfCooSparse{ValuesTensorName: name + "/values", IndicesTensorName: name + "/indices", DenseShapeTensorName: name + "/dense_shape"}
		}
		out[name] = info
	}
	return out
}
