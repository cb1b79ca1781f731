package checkpoint

// A small encoder and decoder of the NumPy .npy format, version 1.0 (and, to
// read files NumPy wrote, 2.0 and 3.0), as documented in
// numpy/lib/format.py: the magic "\x93NUMPY", a major and a minor version
// byte, a little-endian header length (uint16 in 1.0, uint32 later), an ASCII
// (UTF-8 in 3.0) Python dict literal such as
//
//	{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//
// padded with spaces and ending in '\n' so that the data starts at a multiple
// of 64 bytes, then the raw elements in C order.
//
// It is written here rather than imported because no pure-Go npy library is
// pinned in go.mod. github.com/sbinet/npyio (v0.6.0 on the Go proxy) would
// be the candidate, but the subset a checkpoint needs is a few hundred lines
// of the standard library, and the on-disk format of checkpoints should not
// change with a dependency upgrade.
//
// On little-endian hosts (all that Go and NumPy share in practice) the
// elements are copied as raw memory; elsewhere, and for big-endian files,
// they are converted in chunks with encoding/binary.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unsafe"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
)

var npyMagic = []byte("\x93NUMPY")

// npyAlign is the alignment of the data start that NumPy ≥ 1.14 writes.
const npyAlign = 64

// npyType ties a tensor dtype to its NumPy descr and element size.
type npyType struct {
	dtype tensor.Dtype
	descr string // little-endian (or byte-order free) descr, e.g. "<f4"
	size  int
}

// npyTypes lists the supported dtypes. Go's int is stored as '<i8' (NumPy's
// int on 64-bit Linux); reading '<i8' gives int64 unless the caller asks for
// int.
var npyTypes = []npyType{
	{tensor.Float32, "<f4", 4},
	{tensor.Float64, "<f8", 8},
	{tensor.Int64, "<i8", 8},
	{tensor.Int32, "<i4", 4},
	{tensor.Int16, "<i2", 2},
	{tensor.Int8, "|i1", 1},
	{tensor.Uint64, "<u8", 8},
	{tensor.Uint32, "<u4", 4},
	{tensor.Uint16, "<u2", 2},
	{tensor.Uint8, "|u1", 1},
	{tensor.Bool, "|b1", 1},
	{tensor.Int, "<i8", 8},
}

// npyTypeOf returns the npy description of dt.
func npyTypeOf(dt tensor.Dtype) (npyType, error) {
	for _, t := range npyTypes {
		if t.dtype == dt {
			return t, nil
		}
	}
	return npyType{}, fmt.Errorf("dtype %v has no .npy encoding here", dt)
}

// npyParseDescr returns the type and byte order of a descr such as "<f4",
// ">f8", "|b1" or "=i4" (native order is taken as little-endian, which every
// platform Go and NumPy share in practice is).
func npyParseDescr(descr string) (npyType, binary.ByteOrder, error) {
	if len(descr) < 2 {
		return npyType{}, nil, fmt.Errorf("unsupported descr %q", descr)
	}
	var order binary.ByteOrder = binary.LittleEndian
	switch descr[0] {
	case '<', '|', '=':
	case '>':
		order = binary.BigEndian
	default:
		return npyType{}, nil, fmt.Errorf("unsupported descr %q", descr)
	}
	for _, t := range npyTypes {
		if t.descr[1:] == descr[1:] {
			if t.size == 1 && descr[0] == '>' {
				order = binary.LittleEndian
			}
			return t, order, nil
		}
	}
	return npyType{}, nil, fmt.Errorf("unsupported descr %q", descr)
}

// npyHeader is the parsed header of a .npy file.
type npyHeader struct {
	Descr   string
	Fortran bool
	Shape   []int
	Len     int64 // bytes before the data: magic, version, length, dict
}

// size returns the number of elements the shape holds (1 for a scalar).
func (h npyHeader) size() (int64, error) { return shapeSize(h.Shape) }

func shapeSize(shape []int) (int64, error) {
	n, err := numeric.Elements(shape, 1)
	return int64(n), err
}

// npyHeaderBytes returns the complete header (magic to '\n') of a version
// 1.0 file.
func npyHeaderBytes(descr string, shape []int) ([]byte, error) {
	var dict strings.Builder
	fmt.Fprintf(&dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr)
	for i, d := range shape {
		if i > 0 {
			dict.WriteString(", ")
		}
		dict.WriteString(strconv.Itoa(d))
	}
	if len(shape) == 1 {
		dict.WriteString(",")
	}
	dict.WriteString("), }")
	pre := len(npyMagic) + 2 + 2
	total := pre + dict.Len() + 1 // + '\n'
	if r := total % npyAlign; r != 0 {
		total += npyAlign - r
	}
	hlen := total - pre
	if hlen > math.MaxUint16 {
		return nil, fmt.Errorf("npy header of %d bytes is too long for format 1.0", hlen)
	}
	out := make([]byte, 0, total)
	out = append(out, npyMagic...)
	out = append(out, 1, 0)
	out = binary.LittleEndian.AppendUint16(out, uint16(hlen))
	out = append(out, dict.String()...)
	for len(out) < total-1 {
		out = append(out, ' ')
	}
	return append(out, '\n'), nil
}

// npyChunk is how many bytes the encoder and decoder convert at a time.
const npyChunk = 1 << 16

// writeNPY writes data (a slice of dt's element type holding
// product(shape) elements, one for a scalar) as a .npy file to w.
func writeNPY(w io.Writer, dt tensor.Dtype, shape []int, data any) error {
	t, err := npyTypeOf(dt)
	if err != nil {
		return err
	}
	n, err := shapeSize(shape)
	if err != nil {
		return err
	}
	rv := reflect.ValueOf(data)
	if rv.Kind() != reflect.Slice || rv.Type().Elem() != dt.Type {
		return fmt.Errorf("data is %T, want []%v", data, dt)
	}
	if int64(rv.Len()) != n {
		return fmt.Errorf("data has %d elements, shape %v holds %d", rv.Len(), shape, n)
	}
	hdr, err := npyHeaderBytes(t.descr, shape)
	if err != nil {
		return err
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	if raw, ok := rawBytes(data); ok {
		_, err := w.Write(raw)
		return err
	}
	per := npyChunk / t.size
	buf := make([]byte, npyChunk)
	for i := 0; i < rv.Len(); i += per {
		j := min(i+per, rv.Len())
		var k int
		if ints, ok := data.([]int); ok {
			k = putInts(buf, ints[i:j])
		} else if k, err = binary.Encode(buf, binary.LittleEndian, rv.Slice(i, j).Interface()); err != nil {
			return err
		}
		if _, err := w.Write(buf[:k]); err != nil {
			return err
		}
	}
	return nil
}

// nativeLE reports whether the host is little-endian. There the memory of
// a slice of a supported type is its .npy data, and the codec copies bytes
// instead of converting element by element.
var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// rawBytes returns the memory of a slice as bytes when that is its .npy
// little-endian data.
func rawBytes(data any) ([]byte, bool) {
	if !nativeLE {
		return nil, false
	}
	switch s := data.(type) {
	case []float32:
		return asBytes(s), true
	case []float64:
		return asBytes(s), true
	case []int64:
		return asBytes(s), true
	case []int32:
		return asBytes(s), true
	case []int16:
		return asBytes(s), true
	case []int8:
		return asBytes(s), true
	case []uint64:
		return asBytes(s), true
	case []uint32:
		return asBytes(s), true
	case []uint16:
		return asBytes(s), true
	case []uint8:
		return s, true
	case []bool: // one byte, 0 or 1, as NumPy's bool
		return asBytes(s), true
	case []int:
		if strconv.IntSize == 64 {
			return asBytes(s), true
		}
	}
	return nil, false
}

func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

func putInts(buf []byte, src []int) int {
	for i, v := range src {
		binary.LittleEndian.PutUint64(buf[8*i:], uint64(int64(v)))
	}
	return 8 * len(src)
}

// errShortNPY is wrapped when a file ends before its header says it does.
var errShortNPY = errors.New("file is truncated")

// readNPYHeader reads and parses the header of a .npy file.
func readNPYHeader(r io.Reader) (npyHeader, error) {
	pre := make([]byte, len(npyMagic)+2)
	if _, err := io.ReadFull(r, pre); err != nil {
		return npyHeader{}, shortErr("npy magic", err)
	}
	if !bytes.Equal(pre[:len(npyMagic)], npyMagic) {
		return npyHeader{}, fmt.Errorf("not a .npy file (bad magic %q)", pre[:len(npyMagic)])
	}
	var hlen int64
	switch major := pre[len(npyMagic)]; major {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return npyHeader{}, shortErr("npy header length", err)
		}
		hlen = int64(binary.LittleEndian.Uint16(b[:]))
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return npyHeader{}, shortErr("npy header length", err)
		}
		hlen = int64(binary.LittleEndian.Uint32(b[:]))
		if hlen > 1<<20 {
			return npyHeader{}, fmt.Errorf("npy header length %d is implausible", hlen)
		}
	default:
		return npyHeader{}, fmt.Errorf("unsupported .npy format version %d.%d", major, pre[len(npyMagic)+1])
	}
	dict := make([]byte, hlen)
	if _, err := io.ReadFull(r, dict); err != nil {
		return npyHeader{}, shortErr("npy header", err)
	}
	h, err := parseNPYDict(string(dict))
	if err != nil {
		return npyHeader{}, fmt.Errorf("npy header %q: %w", strings.TrimSpace(string(dict)), err)
	}
	h.Len = int64(len(pre)) + int64(len(dict))
	if pre[len(npyMagic)] == 1 {
		h.Len += 2
	} else {
		h.Len += 4
	}
	return h, nil
}

func shortErr(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: reading %s", errShortNPY, what)
	}
	return fmt.Errorf("reading %s: %w", what, err)
}

// readNPYData reads the elements described by h from r into a new slice of
// element type dt, which must be the header's type (or int for '<i8'). It
// allocates the elements before reading them: the caller makes sure that r
// holds them (readFile checks the file's size against the manifest,
// decodeNPY reads the data first).
func readNPYData(r io.Reader, h npyHeader, dt tensor.Dtype) (any, error) {
	n, err := npyElements(h, dt)
	if err != nil {
		return nil, err
	}
	out := numeric.NewSlice(dt, int(n))
	if err := readNPYInto(r, h, dt, out); err != nil {
		return nil, err
	}
	return out, nil
}

// npyElements checks that h's elements can be read as dt and returns how
// many there are.
func npyElements(h npyHeader, dt tensor.Dtype) (int64, error) {
	t, _, err := npyParseDescr(h.Descr)
	if err != nil {
		return 0, err
	}
	if t.dtype != dt && !(dt == tensor.Int && t.dtype == tensor.Int64) {
		return 0, fmt.Errorf("file holds %s, want %v", h.Descr, dt)
	}
	if h.Fortran && len(h.Shape) > 1 {
		return 0, fmt.Errorf("fortran_order arrays are not supported")
	}
	n, err := h.size()
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt/int64(t.size) {
		return 0, fmt.Errorf("shape %v is too large", h.Shape)
	}
	return n, nil
}

// readNPYInto reads the elements described by h from r into out, an
// existing slice of element type dt holding exactly as many elements: the
// restore of a variable decodes straight into its backing. On little-endian
// hosts the file's bytes are read straight into out's memory; elsewhere, and
// for big-endian files, they are converted a chunk at a time. When it fails,
// out holds part of the data.
func readNPYInto(r io.Reader, h npyHeader, dt tensor.Dtype, out any) error {
	n, err := npyElements(h, dt)
	if err != nil {
		return err
	}
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Slice || rv.Type().Elem() != dt.Type || int64(rv.Len()) != n {
		return fmt.Errorf("cannot read %d elements of %v into %T of %d", n, dt, out, numeric.Len(out))
	}
	t, order, _ := npyParseDescr(h.Descr)
	if raw, ok := rawBytes(out); ok && order == binary.LittleEndian {
		if _, err := io.ReadFull(r, raw); err != nil {
			return shortErr(fmt.Sprintf("%d elements", n), err)
		}
		if dt == tensor.Bool {
			// Only 0 and 1 are valid Go bools; NumPy reads any non-zero
			// byte as True.
			for i, b := range raw {
				if b > 1 {
					raw[i] = 1
				}
			}
		}
		return nil
	}
	per := npyChunk / t.size
	buf := make([]byte, npyChunk)
	ints, isInt := out.([]int)
	for i := 0; i < int(n); i += per {
		j := min(i+per, int(n))
		b := buf[:(j-i)*t.size]
		if _, err := io.ReadFull(r, b); err != nil {
			return shortErr(fmt.Sprintf("elements %d to %d of %d", i, j, n), err)
		}
		if isInt {
			for k := range ints[i:j] {
				v := int64(order.Uint64(b[8*k:]))
				if int64(int(v)) != v {
					return fmt.Errorf("element %d = %d overflows int", i+k, v)
				}
				ints[i+k] = int(v)
			}
			continue
		}
		if _, err := binary.Decode(b, order, rv.Slice(i, j).Interface()); err != nil {
			return err
		}
	}
	return nil
}

// decodeNPY reads a whole .npy file: its header and elements, as a slice of
// the natural dtype of its descr. It reads the data before it allocates the
// elements, so a header that claims more than the file holds is an error,
// not an allocation of what it claims. Bytes after the data are ignored,
// as numpy.load ignores them.
func decodeNPY(r io.Reader) (npyHeader, tensor.Dtype, any, error) {
	br := bufio.NewReader(r)
	h, err := readNPYHeader(br)
	if err != nil {
		return h, tensor.Dtype{}, nil, err
	}
	t, _, err := npyParseDescr(h.Descr)
	if err != nil {
		return h, tensor.Dtype{}, nil, err
	}
	n, err := h.size()
	if err != nil {
		return h, tensor.Dtype{}, nil, err
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		return h, tensor.Dtype{}, nil, fmt.Errorf("reading the data: %w", err)
	}
	if n > int64(len(rest))/int64(t.size) {
		return h, tensor.Dtype{}, nil, fmt.Errorf("%w: shape %v of %s needs %d elements, the file holds %d bytes of data",
			errShortNPY, h.Shape, h.Descr, n, len(rest))
	}
	data, err := readNPYData(bytes.NewReader(rest), h, t.dtype)
	return h, t.dtype, data, err
}

// parseNPYDict parses the Python dict literal of a .npy header: string keys,
// and values that are strings, booleans, integers or tuples of integers.
func parseNPYDict(s string) (npyHeader, error) {
	p := &pyParser{s: s}
	var h npyHeader
	seen := map[string]bool{}
	p.space()
	if !p.eat('{') {
		return h, p.errorf("want '{'")
	}
	for {
		p.space()
		if p.eat('}') {
			break
		}
		key, err := p.str()
		if err != nil {
			return h, err
		}
		p.space()
		if !p.eat(':') {
			return h, p.errorf("want ':' after key %q", key)
		}
		p.space()
		switch key {
		case "descr":
			if h.Descr, err = p.str(); err != nil {
				return h, err
			}
		case "fortran_order":
			if h.Fortran, err = p.boolean(); err != nil {
				return h, err
			}
		case "shape":
			if h.Shape, err = p.tuple(); err != nil {
				return h, err
			}
		default:
			return h, p.errorf("unexpected key %q", key)
		}
		seen[key] = true
		p.space()
		if p.eat('}') {
			break
		}
		if !p.eat(',') {
			return h, p.errorf("want ',' or '}'")
		}
	}
	if p.space(); p.i != len(p.s) {
		return h, p.errorf("trailing text")
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return h, fmt.Errorf("missing key %q", k)
		}
	}
	return h, nil
}

type pyParser struct {
	s string
	i int
}

func (p *pyParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at offset %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *pyParser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str parses a quoted string without escapes (a descr or a key never has one).
func (p *pyParser) str() (string, error) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", p.errorf("want a quoted string")
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", p.errorf("unterminated string")
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.ContainsRune(v, '\\') {
		return "", p.errorf("escapes in strings are not supported")
	}
	p.i += end + 2
	return v, nil
}

func (p *pyParser) boolean() (bool, error) {
	switch {
	case strings.HasPrefix(p.s[p.i:], "True"):
		p.i += 4
		return true, nil
	case strings.HasPrefix(p.s[p.i:], "False"):
		p.i += 5
		return false, nil
	}
	return false, p.errorf("want True or False")
}

func (p *pyParser) tuple() ([]int, error) {
	if !p.eat('(') {
		return nil, p.errorf("want '('")
	}
	out := []int{}
	for {
		p.space()
		if p.eat(')') {
			return out, nil
		}
		start := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		if p.i < len(p.s) && p.s[p.i] == 'L' { // Python 2 long
			p.i++
		}
		d, err := strconv.Atoi(strings.TrimSuffix(p.s[start:p.i], "L"))
		if err != nil {
			p.i = start
			return nil, p.errorf("want a dimension")
		}
		out = append(out, d)
		p.space()
		if p.eat(')') {
			return out, nil
		}
		if !p.eat(',') {
			return nil, p.errorf("want ',' or ')' in shape")
		}
	}
}
