package export

// The JSON side of the server: a small JSON parser that keeps numbers as
// written and accepts NaN, Infinity and -Infinity (as TensorFlow Serving
// does), the conversion of request values into tensors of a signature's
// dtypes and shapes, and the writing of tensors back as JSON.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gorgonia.org/tensor"
)

// jsonNumber is a number token as written in the request, or one of NaN,
// Infinity and -Infinity.
type jsonNumber string

// jsonMaxDepth bounds the nesting of a request document.
const jsonMaxDepth = 512

// parseJSON parses one JSON document into map[string]any, []any,
// jsonNumber, string, bool and nil values.
func parseJSON(data []byte) (any, error) {
	p := &jsonParser{data: data}
	p.skipSpace()
	if p.pos == len(p.data) {
		return nil, badRequestf("JSON Parse error: The document is empty")
	}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.fail("The document root must not be followed by other values")
	}
	return v, nil
}

type jsonParser struct {
	data []byte
	pos  int
}

func (p *jsonParser) fail(what string) error {
	return badRequestf("JSON Parse error: %s at offset: %d", what, p.pos)
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) literal(word string) bool {
	if bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *jsonParser) value(depth int) (any, error) {
	if depth > jsonMaxDepth {
		return nil, p.fail(fmt.Sprintf("Nesting deeper than %d", jsonMaxDepth))
	}
	p.skipSpace()
	if p.pos == len(p.data) {
		return nil, p.fail("Unexpected end of the document")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		if p.literal("-Infinity") {
			return jsonNumber("-Infinity"), nil
		}
		return p.number()
	case p.literal("true"):
		return true, nil
	case p.literal("false"):
		return false, nil
	case p.literal("null"):
		return nil, nil
	case p.literal("NaN"):
		return jsonNumber("NaN"), nil
	case p.literal("Infinity"):
		return jsonNumber("Infinity"), nil
	}
	return nil, p.fail("Invalid value")
}

func (p *jsonParser) object(depth int) (any, error) {
	p.pos++ // {
	obj := map[string]any{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return obj, nil
	}
	for {
		p.skipSpace()
		if p.pos == len(p.data) || p.data[p.pos] != '"' {
			return nil, p.fail("Missing a name for object member")
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos == len(p.data) || p.data[p.pos] != ':' {
			return nil, p.fail("Missing a colon after a name of object member")
		}
		p.pos++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		obj[key] = v
		p.skipSpace()
		if p.pos == len(p.data) {
			return nil, p.fail("Missing a comma or '}' after an object member")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return obj, nil
		default:
			return nil, p.fail("Missing a comma or '}' after an object member")
		}
	}
}

func (p *jsonParser) array(depth int) (any, error) {
	p.pos++ // [
	arr := []any{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return arr, nil
	}
	for {
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		p.skipSpace()
		if p.pos == len(p.data) {
			return nil, p.fail("Missing a comma or ']' after an array element")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return arr, nil
		default:
			return nil, p.fail("Missing a comma or ']' after an array element")
		}
	}
}

func (p *jsonParser) str() (string, error) {
	start := p.pos
	p.pos++ // opening quote
	simple := true
	for p.pos < len(p.data) {
		switch c := p.data[p.pos]; {
		case c == '"':
			p.pos++
			raw := p.data[start:p.pos]
			if simple {
				return string(raw[1 : len(raw)-1]), nil
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				p.pos = start
				return "", p.fail("Invalid string")
			}
			return s, nil
		case c == '\\':
			simple = false
			p.pos += 2
		case c < 0x20:
			return "", p.fail("Invalid encoding in string")
		default:
			if c >= 0x80 {
				simple = false // let encoding/json check the UTF-8
			}
			p.pos++
		}
	}
	return "", p.fail("Missing a closing quotation mark in string")
}

func (p *jsonParser) number() (any, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.data[p.pos] == '-' {
		p.pos++
	}
	intStart := p.pos
	if digits() == 0 {
		return nil, p.fail("Invalid value")
	}
	if p.data[intStart] == '0' && p.pos-intStart > 1 {
		p.pos = intStart
		return nil, p.fail("Invalid value (a number with a leading zero)")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.fail("Missing fraction part in number")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.fail("Missing exponent in number")
		}
	}
	return jsonNumber(p.data[start:p.pos]), nil
}

// jsonTypeName names the JSON type of a parsed value, as TensorFlow Serving
// does in its errors.
func jsonTypeName(v any) string {
	switch v := v.(type) {
	case nil:
		return "Null"
	case bool:
		if v {
			return "True"
		}
		return "False"
	case map[string]any:
		return "Object"
	case []any:
		return "Array"
	case string:
		return "String"
	case jsonNumber:
		return "Number"
	}
	return fmt.Sprintf("%T", v)
}

// jsonText writes a parsed value back as compact JSON for an error
// message, cut after about 100 bytes.
func jsonText(v any) string {
	var b strings.Builder
	writeText(&b, v)
	if s := b.String(); len(s) > 100 {
		return s[:100] + "..."
	}
	return b.String()
}

func writeText(b *strings.Builder, v any) {
	if b.Len() > 100 {
		return
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case jsonNumber:
		b.WriteString(string(v))
	case string:
		q, _ := json.Marshal(v)
		b.Write(q)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeText(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		b.WriteByte('{')
		for i, k := range slices.Sorted(maps.Keys(v)) {
			if i > 0 {
				b.WriteByte(',')
			}
			q, _ := json.Marshal(k)
			b.Write(q)
			b.WriteByte(':')
			writeText(b, v[k])
		}
		b.WriteByte('}')
	}
}

// ---- request values to tensors ----

// servedDtypes maps the signature dtype names to tensor dtypes and
// TensorFlow's DataType names.
var servedDtypes = map[string]struct {
	dt tensor.Dtype
	tf string
}{
	"float32": {tensor.Float32, "DT_FLOAT"},
	"float64": {tensor.Float64, "DT_DOUBLE"},
	"int64":   {tensor.Int64, "DT_INT64"},
	"int32":   {tensor.Int32, "DT_INT32"},
	"bool":    {tensor.Bool, "DT_BOOL"},
	"uint8":   {tensor.Uint8, "DT_UINT8"},
}

// column gathers the values of one input, converted to its dtype.
type column interface {
	// add converts one JSON scalar and appends it; lenient also takes
	// booleans as 0/1 and 0/1 as booleans (tf.Example features carry
	// booleans as int64).
	add(v any, lenient bool) error
	dense(shape []int) *tensor.Dense
}

type typedColumn[T any] struct {
	vals []T
	conv func(v any, lenient bool) (T, error)
}

func (c *typedColumn[T]) add(v any, lenient bool) error {
	x, err := c.conv(v, lenient)
	if err != nil {
		return err
	}
	c.vals = append(c.vals, x)
	return nil
}

func (c *typedColumn[T]) dense(shape []int) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(c.vals))
}

// newColumn returns an empty column for a signature dtype.
func newColumn(dtype string) (column, error) {
	switch dtype {
	case "float32":
		return &typedColumn[float32]{conv: func(v any, lenient bool) (float32, error) {
			f, err := jsonFloat(v, 32, lenient)
			return float32(f), err
		}}, nil
	case "float64":
		return &typedColumn[float64]{conv: func(v any, lenient bool) (float64, error) { return jsonFloat(v, 64, lenient) }}, nil
	case "int64":
		return &typedColumn[int64]{conv: func(v any, lenient bool) (int64, error) { return jsonInt(v, 64, "int64", lenient) }}, nil
	case "int32":
		return &typedColumn[int32]{conv: func(v any, lenient bool) (int32, error) {
			i, err := jsonInt(v, 32, "int32", lenient)
			return int32(i), err
		}}, nil
	case "uint8":
		return &typedColumn[uint8]{conv: func(v any, lenient bool) (uint8, error) {
			if b, ok := v.(bool); ok && lenient {
				return boolByte(b), nil
			}
			n, ok := v.(jsonNumber)
			if !ok || !isIntLiteral(n) {
				return 0, typeError(v, "uint8")
			}
			u, err := strconv.ParseUint(string(n), 10, 8)
			if err != nil {
				return 0, badRequestf("JSON Value: %s does not fit in uint8", n)
			}
			return uint8(u), nil
		}}, nil
	case "bool":
		return &typedColumn[bool]{conv: func(v any, lenient bool) (bool, error) {
			switch v := v.(type) {
			case bool:
				return v, nil
			case jsonNumber:
				if lenient && (v == "0" || v == "1") {
					return v == "1", nil
				}
			}
			return false, typeError(v, "bool")
		}}, nil
	}
	return nil, fmt.Errorf("dtype %q cannot be served", dtype)
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func typeError(v any, dtype string) error {
	return badRequestf("JSON Value: %s Type: %s is not of expected type: %s", jsonText(v), jsonTypeName(v), dtype)
}

func isIntLiteral(n jsonNumber) bool {
	return n != "NaN" && n != "Infinity" && n != "-Infinity" && !strings.ContainsAny(string(n), ".eE")
}

// jsonFloat converts a number to a float of bits bits, refusing what the
// float cannot hold: integers beyond its exact range, magnitudes beyond
// its largest value.
func jsonFloat(v any, bits int, lenient bool) (float64, error) {
	name := fmt.Sprintf("float%d", bits)
	if b, ok := v.(bool); ok && lenient {
		return float64(boolByte(b)), nil
	}
	n, ok := v.(jsonNumber)
	if !ok {
		return 0, typeError(v, name)
	}
	switch n {
	case "NaN":
		return math.NaN(), nil
	case "Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	}
	lossy := badRequestf("Cannot convert JSON value: %s to %s without loss of precision.", n, name)
	maxInt := int64(1)<<24 - 1
	if bits == 64 {
		maxInt = int64(1)<<53 - 1
	}
	if isIntLiteral(n) {
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || i > maxInt || i < -maxInt {
			return 0, lossy
		}
		return float64(i), nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || (bits == 32 && math.Abs(f) > math.MaxFloat32) {
		return 0, lossy
	}
	return f, nil
}

// jsonInt converts an integer number to an int of bits bits.
func jsonInt(v any, bits int, name string, lenient bool) (int64, error) {
	if b, ok := v.(bool); ok && lenient {
		return int64(boolByte(b)), nil
	}
	n, ok := v.(jsonNumber)
	if !ok || !isIntLiteral(n) {
		return 0, typeError(v, name)
	}
	i, err := strconv.ParseInt(string(n), 10, bits)
	if err != nil {
		return 0, badRequestf("JSON Value: %s does not fit in %s", n, name)
	}
	return i, nil
}

// appendNested appends v, a scalar or nested lists of scalars, to col,
// checking that v has exactly shape want (from depth level on).
func appendNested(col column, v any, want []int, level int) error {
	arr, isList := v.([]any)
	if level == len(want) {
		if isList {
			return badRequestf("found a list at depth %d, want a single value there (the shape is %v)", level, want)
		}
		if _, isObj := v.(map[string]any); isObj {
			return badRequestf("found an object at depth %d, want a single value there: %s", level, jsonText(v))
		}
		return col.add(v, false)
	}
	if !isList {
		return badRequestf("found %s at depth %d, want a list of %d (the shape is %v)", jsonText(v), level, want[level], want)
	}
	if len(arr) != want[level] {
		return badRequestf("found a list of %d at depth %d, want %d (the shape is %v; nested lists must be rectangular)", len(arr), level, want[level], want)
	}
	for _, e := range arr {
		if err := appendNested(col, e, want, level+1); err != nil {
			return err
		}
	}
	return nil
}

// ---- tensors to JSON ----

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

func numElements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// jsonOut builds a response document.
type jsonOut struct{ bytes.Buffer }

func (w *jsonOut) key(k string) {
	q, _ := json.Marshal(k)
	w.Write(q)
	w.WriteByte(':')
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

// nested writes the values data[off:off+numElements(shape)] as nested
// lists of shape (a scalar for an empty shape).
func (w *jsonOut) nested(data any, shape []int, off int) {
	if len(shape) == 0 {
		w.scalar(data, off)
		return
	}
	inner := numElements(shape[1:])
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
