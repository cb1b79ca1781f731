package serving

// Response encoding: a signature's outputs written as predict's
// "predictions" or "outputs", classify's or regress's "results", in the
// JSON TensorFlow Serving writes; and error bodies.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gorgonia.org/tensor"
)

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
}

func errorBody(msg string) []byte {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return b
}

// encodeRun writes the outputs of a method's request of rows examples;
// columnar answers predict's "inputs" format, classNames are the labels of
// classify's classes.
func encodeRun(method string, columnar bool, outs map[string]*tensor.Dense, rows int, classNames []string) ([]byte, error) {
	if err := checkOutputs(outs, rows); err != nil {
		return nil, err
	}
	var out jsonOut
	var err error
	switch {
	case method == "classify":
		err = writeClassify(&out, outs, rows, classNames)
	case method == "regress":
		err = writeRegress(&out, outs, rows)
	case columnar:
		writeColumns(&out, outs)
	default:
		writeRows(&out, outs, rows)
	}
	if err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// checkOutputs checks that every output has the batch's rows along
// dimension 0.
func checkOutputs(outs map[string]*tensor.Dense, rows int) error {
	if len(outs) == 0 {
		return errors.New("the servable returned no outputs")
	}
	for _, name := range slices.Sorted(maps.Keys(outs)) {
		t := outs[name]
		if t == nil {
			return fmt.Errorf("output %q is nil", name)
		}
		if shape := t.Shape(); len(shape) == 0 || shape[0] != rows {
			return fmt.Errorf("output %q has shape %v, want %d rows along dimension 0", name, []int(shape), rows)
		}
	}
	return nil
}

// writeRows writes {"predictions": [...]}: per example, the one output's
// value, or an object of every output's value.
func writeRows(w *jsonOut, outs map[string]*tensor.Dense, rows int) {
	names := slices.Sorted(maps.Keys(outs))
	type col struct {
		data  any
		shape []int
		size  int
	}
	cols := make([]col, len(names))
	for i, name := range names {
		data, shape := tensorData(outs[name])
		cols[i] = col{data, shape[1:], tensor.Shape(shape[1:]).TotalSize()}
	}
	w.WriteString(`{"predictions":[`)
	for r := range rows {
		if r > 0 {
			w.WriteByte(',')
		}
		w.byName(names, func(i int) { w.nested(cols[i].data, cols[i].shape, r*cols[i].size) })
	}
	w.WriteString("]}")
}

// writeColumns writes {"outputs": ...}: the one output's batch, or an
// object of every output's batch.
func writeColumns(w *jsonOut, outs map[string]*tensor.Dense) {
	names := slices.Sorted(maps.Keys(outs))
	w.WriteString(`{"outputs":`)
	w.byName(names, func(i int) {
		data, shape := tensorData(outs[names[i]])
		w.nested(data, shape, 0)
	})
	w.WriteByte('}')
}

// classifyOutputs is what classify answers from: the "scores" and
// "classes" outputs (either may be absent), with k classes per example.
type classifyOutputs struct {
	scores, classes any // flat typed slices; nil when absent
	scoreBits       int // 32 for float32 scores, else 64
	k               int
}

// readClassify reads and checks the classify outputs.
func readClassify(outs map[string]*tensor.Dense) (classifyOutputs, error) {
	scores, hasScores := outs["scores"]
	classes, hasClasses := outs["classes"]
	if !hasScores && !hasClasses {
		return classifyOutputs{}, fmt.Errorf("the classify signature has neither a \"scores\" nor a \"classes\" output (it has %q)", slices.Sorted(maps.Keys(outs)))
	}
	c := classifyOutputs{scoreBits: 64, k: -1}
	if hasScores {
		var err error
		if c.scores, c.k, err = classData("scores", scores); err != nil {
			return classifyOutputs{}, err
		}
		if _, ok := floatAt(c.scores, 0); !ok && scores.Shape().TotalSize() > 0 {
			return classifyOutputs{}, fmt.Errorf("classify output \"scores\" has dtype %v, want a number", scores.Dtype())
		}
		if scores.Dtype() == tensor.Float32 {
			c.scoreBits = 32
		}
	}
	if hasClasses {
		data, k, err := classData("classes", classes)
		if err != nil {
			return classifyOutputs{}, err
		}
		if c.k >= 0 && k != c.k {
			return classifyOutputs{}, fmt.Errorf("classify outputs \"scores\" and \"classes\" have %d and %d classes", c.k, k)
		}
		c.classes, c.k = data, k
	}
	return c, nil
}

// classData returns the values of a scores or classes output of shape
// [rows] or [rows, k], and k (1 for [rows]).
func classData(name string, t *tensor.Dense) (data any, k int, err error) {
	data, shape := tensorData(t)
	switch len(shape) {
	case 1:
		return data, 1, nil
	case 2:
		return data, shape[1], nil
	}
	return nil, 0, fmt.Errorf("classify output %q has shape %v, want [batch] or [batch, classes]", name, shape)
}

// writeClassify writes {"results": [[[label, score], ...], ...]}: labels
// from the "classes" output, named by classNames when given; else the
// class names of the "scores" columns, or "" without any (as TensorFlow
// Serving answers); scores 0 without a "scores" output.
func writeClassify(w *jsonOut, outs map[string]*tensor.Dense, rows int, classNames []string) error {
	c, err := readClassify(outs)
	if err != nil {
		return err
	}
	labelOf, err := c.labeler(classNames)
	if err != nil {
		return err
	}
	w.WriteString(`{"results":[`)
	for r := range rows {
		if r > 0 {
			w.WriteByte(',')
		}
		w.WriteByte('[')
		for j := range c.k {
			if j > 0 {
				w.WriteByte(',')
			}
			lbl, err := labelOf(r, j)
			if err != nil {
				return err
			}
			q, _ := json.Marshal(lbl)
			w.WriteByte('[')
			w.Write(q)
			w.WriteByte(',')
			score := 0.0
			if c.scores != nil {
				score, _ = floatAt(c.scores, r*c.k+j)
			}
			w.float(score, c.scoreBits)
			w.WriteByte(']')
		}
		w.WriteByte(']')
	}
	w.WriteString("]}")
	return nil
}

// labeler returns the label of example r's class j.
func (c classifyOutputs) labeler(classNames []string) (func(r, j int) (string, error), error) {
	switch {
	case c.classes != nil && len(classNames) > 0:
		return func(r, j int) (string, error) {
			i, ok := intAt(c.classes, r*c.k+j)
			if !ok {
				return "", fmt.Errorf("classify output \"classes\" holds %v, not class indexes into the %d class names", reflect.TypeOf(c.classes).Elem(), len(classNames))
			}
			if i < 0 || i >= int64(len(classNames)) {
				return "", fmt.Errorf("classify output \"classes\" holds class %d, outside the %d class names", i, len(classNames))
			}
			return classNames[i], nil
		}, nil
	case c.classes != nil:
		return func(r, j int) (string, error) { return label(c.classes, r*c.k+j), nil }, nil
	case len(classNames) > 0:
		if len(classNames) != c.k {
			return nil, fmt.Errorf("%d class names for %d classes", len(classNames), c.k)
		}
		return func(_, j int) (string, error) { return classNames[j], nil }, nil
	}
	return func(int, int) (string, error) { return "", nil }, nil
}

// intAt returns element i of an integer flat slice.
func intAt(data any, i int) (int64, bool) {
	switch d := data.(type) {
	case []int64:
		return d[i], true
	case []int32:
		return int64(d[i]), true
	case []int:
		return int64(d[i]), true
	case []uint8:
		return int64(d[i]), true
	}
	return 0, false
}

// writeRegress writes {"results": [value, ...]} from the "outputs" output
// (or the only output), of shape [rows] or [rows, 1].
func writeRegress(w *jsonOut, outs map[string]*tensor.Dense, rows int) error {
	t, ok := outs["outputs"]
	if !ok && len(outs) == 1 {
		for _, only := range outs {
			t = only
		}
	}
	if t == nil {
		return fmt.Errorf("the regress signature has no \"outputs\" output (it has %q)", slices.Sorted(maps.Keys(outs)))
	}
	data, shape := tensorData(t)
	if len(shape) > 2 || (len(shape) == 2 && shape[1] != 1) {
		return fmt.Errorf("regress output has shape %v, want [batch] or [batch, 1]", shape)
	}
	bits := 64
	if t.Dtype() == tensor.Float32 {
		bits = 32
	}
	w.WriteString(`{"results":[`)
	for r := range rows {
		if r > 0 {
			w.WriteByte(',')
		}
		f, ok := floatAt(data, r)
		if !ok {
			return fmt.Errorf("regress output has dtype %v, want a number", t.Dtype())
		}
		w.float(f, bits)
	}
	w.WriteString("]}")
	return nil
}

// tensorData returns the values of t as a flat typed slice in row-major
// order, and its shape.
func tensorData(t *tensor.Dense) (any, []int) {
	if t.IsMaterializable() {
		if m, ok := t.Materialize().(*tensor.Dense); ok {
			t = m
		}
	}
	shape := slices.Clone([]int(t.Shape()))
	data := t.Data()
	if rv := reflect.ValueOf(data); rv.Kind() != reflect.Slice {
		s := reflect.MakeSlice(reflect.SliceOf(rv.Type()), 1, 1)
		s.Index(0).Set(rv)
		data, shape = s.Interface(), nil
	}
	return data, shape
}

// jsonOut builds a response document.
type jsonOut struct{ bytes.Buffer }

func (w *jsonOut) key(k string) {
	q, _ := json.Marshal(k)
	w.Write(q)
	w.WriteByte(':')
}

// byName writes the value of one output (value(0)) when names has one
// name, else an object of each name's value (value(i) for names[i]).
func (w *jsonOut) byName(names []string, value func(i int)) {
	if len(names) == 1 {
		value(0)
		return
	}
	w.WriteByte('{')
	for i, name := range names {
		if i > 0 {
			w.WriteByte(',')
		}
		w.key(name)
		value(i)
	}
	w.WriteByte('}')
}

// float writes a float the way TensorFlow Serving does: the shortest
// representation that reads back the same, ".0" after whole numbers, and
// the tokens NaN, Infinity and -Infinity.
func (w *jsonOut) float(f float64, bits int) {
	switch {
	case math.IsNaN(f):
		w.WriteString("NaN")
	case math.IsInf(f, 1):
		w.WriteString("Infinity")
	case math.IsInf(f, -1):
		w.WriteString("-Infinity")
	default:
		s := strconv.FormatFloat(f, 'g', -1, bits)
		w.WriteString(s)
		if !strings.ContainsAny(s, ".e") {
			w.WriteString(".0")
		}
	}
}

// scalar writes element i of a flat typed slice.
func (w *jsonOut) scalar(data any, i int) {
	switch d := data.(type) {
	case []float32:
		w.float(float64(d[i]), 32)
	case []float64:
		w.float(d[i], 64)
	case []int64:
		w.WriteString(strconv.FormatInt(d[i], 10))
	case []int32:
		w.WriteString(strconv.FormatInt(int64(d[i]), 10))
	case []int:
		w.WriteString(strconv.Itoa(d[i]))
	case []uint8:
		w.WriteString(strconv.Itoa(int(d[i])))
	case []bool:
		w.WriteString(strconv.FormatBool(d[i]))
	default:
		b, err := json.Marshal(reflect.ValueOf(data).Index(i).Interface())
		if err != nil {
			b, _ = json.Marshal(fmt.Sprint(reflect.ValueOf(data).Index(i).Interface()))
		}
		w.Write(b)
	}
}

// nested writes the values of shape that start at data[off] as nested
// lists of shape (a scalar for an empty shape).
func (w *jsonOut) nested(data any, shape []int, off int) {
	if len(shape) == 0 {
		w.scalar(data, off)
		return
	}
	inner := tensor.Shape(shape[1:]).TotalSize()
	w.WriteByte('[')
	for i := range shape[0] {
		if i > 0 {
			w.WriteByte(',')
		}
		w.nested(data, shape[1:], off+i*inner)
	}
	w.WriteByte(']')
}

// label formats element i of a classes tensor as a class label.
func label(data any, i int) string {
	switch d := data.(type) {
	case []float32:
		return strconv.FormatFloat(float64(d[i]), 'g', -1, 32)
	case []float64:
		return strconv.FormatFloat(d[i], 'g', -1, 64)
	}
	return fmt.Sprint(reflect.ValueOf(data).Index(i).Interface())
}

// floatAt returns element i of a numeric flat slice as a float64.
func floatAt(data any, i int) (float64, bool) {
	switch d := data.(type) {
	case []float32:
		return float64(d[i]), true
	case []float64:
		return d[i], true
	case []int64:
		return float64(d[i]), true
	case []int32:
		return float64(d[i]), true
	case []int:
		return float64(d[i]), true
	case []uint8:
		return float64(d[i]), true
	}
	return 0, false
}
