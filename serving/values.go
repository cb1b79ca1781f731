package serving

// Request values to tensors: the conversion of JSON values into columns of
// a signature's dtypes, checked against its per-example shapes.

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gorgonia.org/tensor"
)

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
	// booleans as 0/1 for integer dtypes and 0/1 as booleans (tf.Example
	// features carry booleans as int64). A float dtype refuses booleans
	// either way, as TensorFlow Serving refuses them for a float input.
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

// newColumn returns an empty column for a signature dtype, with room for
// size values.
func newColumn(dtype string, size int) (column, error) {
	switch dtype {
	case "float32":
		return &typedColumn[float32]{vals: make([]float32, 0, size), conv: func(v any, _ bool) (float32, error) {
			f, err := jsonFloat(v, 32)
			return float32(f), err
		}}, nil
	case "float64":
		return &typedColumn[float64]{vals: make([]float64, 0, size), conv: func(v any, _ bool) (float64, error) { return jsonFloat(v, 64) }}, nil
	case "int64":
		return &typedColumn[int64]{vals: make([]int64, 0, size), conv: func(v any, lenient bool) (int64, error) { return jsonInt(v, 64, "int64", lenient) }}, nil
	case "int32":
		return &typedColumn[int32]{vals: make([]int32, 0, size), conv: func(v any, lenient bool) (int32, error) {
			i, err := jsonInt(v, 32, "int32", lenient)
			return int32(i), err
		}}, nil
	case "uint8":
		return &typedColumn[uint8]{vals: make([]uint8, 0, size), conv: func(v any, lenient bool) (uint8, error) {
			if b, ok := v.(bool); ok && lenient {
				return boolByte(b), nil
			}
			n, ok := v.(jsonNumber)
			if !ok || !isIntLiteral(n) {
				return 0, typeError(v, "uint8")
			}
			u, err := strconv.ParseUint(string(n), 10, 8)
			if err != nil {
				return 0, badRequestf("JSON Value: %s does not fit in uint8", echo(string(n)))
			}
			return uint8(u), nil
		}}, nil
	case "bool":
		return &typedColumn[bool]{vals: make([]bool, 0, size), conv: func(v any, lenient bool) (bool, error) {
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
// its largest value. Booleans are refused.
func jsonFloat(v any, bits int) (float64, error) {
	name := "float64"
	if bits == 32 {
		name = "float32"
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
	lossy := func() error {
		return badRequestf("Cannot convert JSON value: %s to %s without loss of precision.", echo(string(n)), name)
	}
	maxInt := int64(1)<<24 - 1
	if bits == 64 {
		maxInt = int64(1)<<53 - 1
	}
	if isIntLiteral(n) {
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || i > maxInt || i < -maxInt {
			return 0, lossy()
		}
		return float64(i), nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || (bits == 32 && math.Abs(f) > math.MaxFloat32) {
		return 0, lossy()
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
		return 0, badRequestf("JSON Value: %s does not fit in %s", echo(string(n)), name)
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
