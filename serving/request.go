package serving

// Request decoding: the body of a predict, classify or regress request
// turned into a signature and the tensors of its inputs.

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/sharding"
)

// runRequest is a decoded predict, classify or regress request.
type runRequest struct {
	sig      string // the signature's key
	features map[string]*tensor.Dense
	sparse   map[string]sharding.SparseCOO // the sparse inputs; nil without
	rows     int
	columnar bool // predict's "inputs" format, answered with "outputs"
}

// decodeRun reads a method's request body for version v: the signature
// it names and its features, at most maxRows rows. A version with a
// preprocessor takes raw features (rawRequest), which it preprocesses.
func decodeRun(ctx context.Context, body []byte, method string, v *servedVersion, maxRows int) (runRequest, error) {
	req, err := requestObject(body, v, maxRows)
	if err != nil {
		return runRequest{}, err
	}
	rr := runRequest{}
	if rr.sig, err = signatureName(req); err != nil {
		return runRequest{}, err
	}
	sig, ok := v.sigs[rr.sig]
	if !ok {
		return runRequest{}, badRequestf("Serving signature name: %q not found in signature def (the model has %q)", echo(rr.sig), slices.Sorted(maps.Keys(v.sigs)))
	}
	inputs := v.inputs[rr.sig]
	lim := limits{rows: maxRows, values: len(body)/2 + 1}
	switch {
	case method != "predict" && sig.Method != method:
		return runRequest{}, badRequestf("Expected %s signature method_name to be tensorflow/serving/%s. Was: tensorflow/serving/%s (signature %q)", method, method, sig.Method, echo(rr.sig))
	case v.raw != nil:
		rr.features, rr.sparse, rr.rows, rr.columnar, err = rawRequest(ctx, req, method, rr.sig, v.raw, lim)
	case method == "predict":
		rr.features, rr.sparse, rr.rows, rr.columnar, err = predictFeatures(req, inputs, lim)
	default:
		rr.features, rr.sparse, rr.rows, err = exampleFeatures(req, method, inputs, lim)
	}
	if err != nil {
		return runRequest{}, err
	}
	return rr, nil
}

// requestSlack is the JSON values a request may hold beside its
// examples: the request object, its signature name, a context, keys
// TensorFlow Serving ignores.
const requestSlack = 1 << 16

// maxRequestValues is the most JSON values a request for v of at most
// maxRows examples holds: maxRows of v's largest examples, and
// requestSlack.
func maxRequestValues(v *servedVersion, maxRows int) int {
	if maxRows > (math.MaxInt-requestSlack)/max(v.exampleValues, 1) {
		return math.MaxInt
	}
	return maxRows*v.exampleValues + requestSlack
}

// requestObject parses a request body for version v, of at most maxRows
// examples, which must be a JSON object.
func requestObject(body []byte, v *servedVersion, maxRows int) (map[string]any, error) {
	most := maxRequestValues(v, maxRows)
	tooMany := badRequestf("the request has more than %d JSON values, more than %d examples (the maximum batch size) of this model hold", most, maxRows)
	doc, err := parseJSON(body, most, tooMany)
	if err != nil {
		return nil, err
	}
	req, ok := doc.(map[string]any)
	if !ok {
		return nil, badRequestf("JSON Value: %s Is not object", jsonText(doc))
	}
	return req, nil
}

// signatureName returns the request's "signature_name", by default
// model.DefaultServingSignature.
func signatureName(req map[string]any) (string, error) {
	sn, ok := req["signature_name"]
	if !ok {
		return model.DefaultServingSignature, nil
	}
	str, ok := sn.(string)
	if !ok {
		return "", badRequestf("JSON Value: %s not formatted correctly. 'signature_name' key must be a string value.", jsonText(sn))
	}
	if str == "" {
		return model.DefaultServingSignature, nil
	}
	return str, nil
}

// predictFeatures reads a predict request's features, in row
// ("instances") or columnar ("inputs") format.
func predictFeatures(req map[string]any, inputs map[string]inputSpec, lim limits) (features map[string]*tensor.Dense, sparse map[string]sharding.SparseCOO, rows int, columnar bool, err error) {
	instances, hasInstances := req["instances"]
	columns, hasInputs := req["inputs"]
	switch {
	case hasInstances && hasInputs:
		return nil, nil, 0, false, badRequestf("Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist")
	case hasInstances:
		features, sparse, rows, err = rowFeatures(instances, inputs, lim)
		return features, sparse, rows, false, err
	case hasInputs:
		features, sparse, rows, err = columnFeatures(columns, inputs, lim)
		return features, sparse, rows, true, err
	}
	return nil, nil, 0, false, badRequestf("Missing 'inputs' or 'instances' key")
}

func isObject(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

// checkNames checks that an object names exactly the inputs.
func checkNames(obj map[string]any, inputs map[string]inputSpec, where string) error {
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		if _, ok := obj[name]; !ok {
			return badRequestf("%smissing input %q (the signature takes %q)", where, name, slices.Sorted(maps.Keys(inputs)))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		if _, ok := inputs[name]; !ok {
			return badRequestf("%sunknown input %q (the signature takes %q)", where, echo(name), slices.Sorted(maps.Keys(inputs)))
		}
	}
	return nil
}

// limits bound what a request decodes.
type limits struct {
	rows int // the most examples (Config.MaxBatchSize)
	// values is the most values the request body can hold: each takes
	// at least two bytes (a digit and a comma).
	values int
}

// checkRows checks a request's examples against the limit before they
// are decoded.
func (l limits) checkRows(rows int) error {
	if rows > l.rows {
		return badRequestf("the request has %d examples, more than the maximum batch size %d", rows, l.rows)
	}
	return nil
}

// columnSize is the room a column of rows examples of shape needs, at most
// most values (what the request body can hold).
func columnSize(rows int, shape []int, most int) int {
	n := rows
	for _, d := range shape {
		if n > most/max(d, 1) {
			return most
		}
		n *= d
	}
	return min(n, most)
}

// columns gathers a request's values: a column for every dense input, a
// bag for every sparse one.
type columns struct {
	dense map[string]column
	bags  map[string]*bag
}

// newColumns makes an empty column or bag for every input, with room for
// rows examples, at most most values each.
func newColumns(inputs map[string]inputSpec, rows, most int) (columns, error) {
	cols := columns{dense: map[string]column{}, bags: map[string]*bag{}}
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		in := inputs[name]
		if in.sparse {
			b, err := newBag(in, rows, most)
			if err != nil {
				return columns{}, err
			}
			cols.bags[name] = b
			continue
		}
		col, err := newColumn(in.dtype, columnSize(rows, in.shape, most))
		if err != nil {
			return columns{}, err
		}
		cols.dense[name] = col
	}
	return cols, nil
}

// features turns the columns of rows examples into the features, dense
// and sparse (nil without sparse inputs).
func (cols columns) features(inputs map[string]inputSpec, rows int) (map[string]*tensor.Dense, map[string]sharding.SparseCOO) {
	features := map[string]*tensor.Dense{}
	var sparse map[string]sharding.SparseCOO
	for name, in := range inputs {
		if in.sparse {
			if sparse == nil {
				sparse = map[string]sharding.SparseCOO{}
			}
			sparse[name] = cols.bags[name].sparse(rows)
			continue
		}
		features[name] = cols.dense[name].dense(append([]int{rows}, in.shape...))
	}
	return features, sparse
}

// appendExample appends input name's value v for example i: nested lists
// of its shape for a dense input, a list of values for a sparse one.
func (cols columns) appendExample(name string, in inputSpec, i int, v any) error {
	if in.sparse {
		return cols.bags[name].add(i, v, false, false)
	}
	return appendNested(cols.dense[name], v, in.shape, 0)
}

func describe(name string, in inputSpec) string {
	if in.sparse {
		return fmt.Sprintf("input %q (%s, sparse, at most %d values per example): ", name, in.dtype, in.shape[0])
	}
	return fmt.Sprintf("input %q (%s, shape %v): ", name, in.dtype, append([]int{-1}, in.shape...))
}

// rowFeatures reads the "instances" of a predict request.
func rowFeatures(instances any, inputs map[string]inputSpec, lim limits) (map[string]*tensor.Dense, map[string]sharding.SparseCOO, int, error) {
	list, ok := instances.([]any)
	if !ok {
		return nil, nil, 0, badRequestf("Expecting 'instances' to be a list, got %s", jsonText(instances))
	}
	if len(list) == 0 {
		return nil, nil, 0, badRequestf("No values in 'instances' array")
	}
	if err := lim.checkRows(len(list)); err != nil {
		return nil, nil, 0, err
	}
	names := slices.Sorted(maps.Keys(inputs))
	objects := isObject(list[0])
	if !objects && len(names) > 1 {
		return nil, nil, 0, badRequestf("'instances' is a plain list, but the signature takes several inputs %q: each instance must be an object with one entry per input", names)
	}
	cols, err := newColumns(inputs, len(list), lim.values)
	if err != nil {
		return nil, nil, 0, err
	}
	for i, inst := range list {
		if err := addInstance(cols, i, inst, objects, inputs, names); err != nil {
			return nil, nil, 0, err
		}
	}
	features, sparse := cols.features(inputs, len(list))
	return features, sparse, len(list), nil
}

// addInstance appends instance i to the columns: an object naming every
// input when objects, else the value of the one input.
func addInstance(cols columns, i int, inst any, objects bool, inputs map[string]inputSpec, names []string) error {
	if !objects {
		if isObject(inst) {
			return badRequestf("Expecting value/list but got object at item %d of 'instances'", i)
		}
		if err := cols.appendExample(names[0], inputs[names[0]], i, inst); err != nil {
			return within(err, "instance %d: %s", i, describe(names[0], inputs[names[0]]))
		}
		return nil
	}
	obj, ok := inst.(map[string]any)
	if !ok {
		return badRequestf("Expecting object but got %s at item %d of 'instances'", jsonTypeName(inst), i)
	}
	if err := checkNames(obj, inputs, fmt.Sprintf("instance %d: ", i)); err != nil {
		return err
	}
	for _, name := range names {
		if err := cols.appendExample(name, inputs[name], i, obj[name]); err != nil {
			return within(err, "instance %d: %s", i, describe(name, inputs[name]))
		}
	}
	return nil
}

// columnFeatures reads the "inputs" of a predict request.
func columnFeatures(columns any, inputs map[string]inputSpec, lim limits) (map[string]*tensor.Dense, map[string]sharding.SparseCOO, int, error) {
	names := slices.Sorted(maps.Keys(inputs))
	values, err := columnValues(columns, inputs, names)
	if err != nil {
		return nil, nil, 0, err
	}
	rows, first := -1, ""
	features := map[string]*tensor.Dense{}
	var sparse map[string]sharding.SparseCOO
	for _, name := range names {
		in := inputs[name]
		list, ok := values[name].([]any)
		if !ok {
			return nil, nil, 0, badRequestf("%swant a list with one entry per example, got %s", describe(name, in), jsonText(values[name]))
		}
		if len(list) == 0 {
			return nil, nil, 0, badRequestf("%sthe batch is empty", describe(name, in))
		}
		if rows >= 0 && len(list) != rows {
			return nil, nil, 0, badRequestf("input %q has %d examples, input %q has %d: every input needs the same batch", name, len(list), first, rows)
		}
		if err := lim.checkRows(len(list)); err != nil {
			return nil, nil, 0, err
		}
		rows, first = len(list), name
		if in.sparse {
			b, err := newBag(in, rows, lim.values)
			if err != nil {
				return nil, nil, 0, err
			}
			for i, v := range list {
				if err := b.add(i, v, false, false); err != nil {
					return nil, nil, 0, within(err, "%sexample %d: ", describe(name, in), i)
				}
			}
			if sparse == nil {
				sparse = map[string]sharding.SparseCOO{}
			}
			sparse[name] = b.sparse(rows)
			continue
		}
		col, err := newColumn(in.dtype, columnSize(rows, in.shape, lim.values))
		if err != nil {
			return nil, nil, 0, err
		}
		shape := append([]int{rows}, in.shape...)
		if err := appendNested(col, list, shape, 0); err != nil {
			return nil, nil, 0, within(err, "%s", describe(name, in))
		}
		features[name] = col.dense(shape)
	}
	return features, sparse, rows, nil
}

// columnValues returns the batch of each input in "inputs": an object
// naming every input, or the batch of the one input.
func columnValues(columns any, inputs map[string]inputSpec, names []string) (map[string]any, error) {
	if obj, ok := columns.(map[string]any); ok {
		if err := checkNames(obj, inputs, "'inputs': "); err != nil {
			return nil, err
		}
		return obj, nil
	}
	if len(names) > 1 {
		return nil, badRequestf("'inputs' is a plain value/list, but the signature takes several inputs %q: 'inputs' must be an object with one entry per input", names)
	}
	return map[string]any{names[0]: columns}, nil
}

// exampleFeatures reads the "context" and "examples" of a classify or
// regress request: each feature a value or flat list holding one
// example's values in row-major order.
func exampleFeatures(req map[string]any, method string, inputs map[string]inputSpec, lim limits) (map[string]*tensor.Dense, map[string]sharding.SparseCOO, int, error) {
	shared, examples, err := exampleList(req, method)
	if err != nil {
		return nil, nil, 0, err
	}
	if err := lim.checkRows(len(examples)); err != nil {
		return nil, nil, 0, err
	}
	names := slices.Sorted(maps.Keys(inputs))
	cols, err := newColumns(inputs, len(examples), lim.values)
	if err != nil {
		return nil, nil, 0, err
	}
	for i, e := range examples {
		obj, ok := e.(map[string]any)
		if !ok {
			return nil, nil, 0, badRequestf("example %d: Example must be JSON object but got JSON %s", i, jsonTypeName(e))
		}
		for _, name := range names {
			if err := addFeature(cols, i, name, inputs[name], obj, shared); err != nil {
				return nil, nil, 0, err
			}
		}
	}
	features, sparse := cols.features(inputs, len(examples))
	return features, sparse, len(examples), nil
}

// exampleList returns the "context" (nil without one) and the "examples"
// of a classify or regress request.
func exampleList(req map[string]any, method string) (shared map[string]any, examples []any, err error) {
	if c, ok := req["context"]; ok {
		obj, ok := c.(map[string]any)
		if !ok {
			return nil, nil, badRequestf("'context': Example must be JSON object but got JSON %s", jsonTypeName(c))
		}
		shared = obj
	}
	ex, ok := req["examples"]
	if !ok {
		return nil, nil, badRequestf("When method is %s, key 'examples' is expected and was not found", method)
	}
	examples, ok = ex.([]any)
	if !ok {
		return nil, nil, badRequestf("Expecting 'examples' value to be an list/array, got %s", jsonText(ex))
	}
	if len(examples) == 0 {
		return nil, nil, badRequestf("'examples' value is an empty array")
	}
	return shared, examples, nil
}

// addFeature appends feature name of example i, from the example or the
// context, to its column: a sparse input's value list may have any length
// up to its most values per example (a bag; tf.Example's variable-length
// feature), a dense input's exactly its shape's values.
func addFeature(cols columns, i int, name string, in inputSpec, example, shared map[string]any) error {
	val, inExample := example[name]
	cval, inContext := shared[name]
	switch {
	case inExample && inContext:
		return badRequestf("example %d: feature %q is in the context too: a feature of the context must not appear in examples", i, name)
	case inContext:
		val = cval
	case !inExample:
		return badRequestf("example %d: Feature: %s (data type: %s) is required but could not be found.", i, name, in.dtype)
	}
	if in.sparse {
		if err := cols.bags[name].add(i, val, true, true); err != nil {
			return within(err, "example %d: feature %q: ", i, name)
		}
		return nil
	}
	col := cols.dense[name]
	vals, ok := val.([]any)
	if !ok {
		vals = []any{val}
	}
	if want := tensor.Shape(in.shape).TotalSize(); len(vals) != want {
		return badRequestf("example %d: feature %q has %d values, want %d (shape %v, row-major)", i, name, len(vals), want, in.shape)
	}
	for _, x := range vals {
		if _, isList := x.([]any); isList || isObject(x) || x == nil {
			return badRequestf("example %d: Feature: %s has element with unexpected JSON type: %s", i, name, jsonTypeName(x))
		}
		if err := col.add(x, true); err != nil {
			return within(err, "example %d: feature %q: ", i, name)
		}
	}
	return nil
}
