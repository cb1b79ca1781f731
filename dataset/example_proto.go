package dataset

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of tensorflow/core/example/example.proto and feature.proto.
const (
	exampleFeatures  = 1 // Example.features: Features
	featuresFeature  = 1 // Features.feature: map<string, Feature>
	mapKey           = 1 // a map entry's key
	mapValue         = 2 // a map entry's value
	featureBytesList = 1 // Feature.bytes_list: BytesList (oneof kind)
	featureFloatList = 2 // Feature.float_list: FloatList
	featureInt64List = 3 // Feature.int64_list: Int64List
	listValue        = 1 // BytesList/FloatList/Int64List.value
)

// ErrMalformed is wrapped by the errors of decoding bytes that are not a
// tf.train.Example.
var ErrMalformed = errors.New("malformed tf.Example")

// AppendExample appends ex encoded as a tf.train.Example protocol buffer
// to b. The encoding is deterministic: features in name order, numbers
// packed, as protobuf's deterministic serialization writes them. A feature
// that sets more than one list, or a name that is not UTF-8, is an error
// naming it.
func AppendExample(b []byte, ex Example) ([]byte, error) {
	names := make([]string, 0, len(ex))
	for name, f := range ex {
		if err := f.Validate(); err != nil {
			return b, fmt.Errorf("feature %q: %w", name, err)
		}
		if !utf8.ValidString(name) {
			return b, fmt.Errorf("feature name %q is not UTF-8, as a protobuf string must be", name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	size := 0
	for _, name := range names {
		size += protowire.SizeTag(featuresFeature) + protowire.SizeBytes(entrySize(name, ex[name]))
	}
	b = protowire.AppendTag(b, exampleFeatures, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	for _, name := range names {
		f := ex[name]
		b = protowire.AppendTag(b, featuresFeature, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(entrySize(name, f)))
		b = protowire.AppendTag(b, mapKey, protowire.BytesType)
		b = protowire.AppendString(b, name)
		b = protowire.AppendTag(b, mapValue, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(featureSize(f)))
		b = appendFeature(b, f)
	}
	return b, nil
}

// entrySize is the size of a Features.feature map entry's message.
func entrySize(name string, f Feature) int {
	return protowire.SizeTag(mapKey) + protowire.SizeBytes(len(name)) +
		protowire.SizeTag(mapValue) + protowire.SizeBytes(featureSize(f))
}

// listSize is the size of the list message of f, which sets one.
func listSize(f Feature) int {
	switch f.Kind() {
	case KindInt64:
		n := 0
		for _, v := range f.Int64s {
			n += protowire.SizeVarint(uint64(v))
		}
		return packedSize(n)
	case KindFloat:
		return packedSize(4 * len(f.Floats))
	case KindBytes:
		n := 0
		for _, v := range f.Bytes {
			n += protowire.SizeTag(listValue) + protowire.SizeBytes(len(v))
		}
		return n
	}
	return 0
}

// packedSize is the size of a packed field of n bytes of values; none is
// no field.
func packedSize(n int) int {
	if n == 0 {
		return 0
	}
	return protowire.SizeTag(listValue) + protowire.SizeBytes(n)
}

// featureSize is the size of f's Feature message.
func featureSize(f Feature) int {
	if f.Kind() == KindNone {
		return 0
	}
	return protowire.SizeTag(featureInt64List) + protowire.SizeBytes(listSize(f))
}

func appendFeature(b []byte, f Feature) []byte {
	switch f.Kind() {
	case KindInt64:
		b = protowire.AppendTag(b, featureInt64List, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(listSize(f)))
		if len(f.Int64s) > 0 {
			n := 0
			for _, v := range f.Int64s {
				n += protowire.SizeVarint(uint64(v))
			}
			b = protowire.AppendTag(b, listValue, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(n))
			for _, v := range f.Int64s {
				b = protowire.AppendVarint(b, uint64(v))
			}
		}
	case KindFloat:
		b = protowire.AppendTag(b, featureFloatList, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(listSize(f)))
		if len(f.Floats) > 0 {
			b = protowire.AppendTag(b, listValue, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(4*len(f.Floats)))
			for _, v := range f.Floats {
				b = protowire.AppendFixed32(b, math.Float32bits(v))
			}
		}
	case KindBytes:
		b = protowire.AppendTag(b, featureBytesList, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(listSize(f)))
		for _, v := range f.Bytes {
			b = protowire.AppendTag(b, listValue, protowire.BytesType)
			b = protowire.AppendBytes(b, v)
		}
	}
	return b
}

// DecodeExample decodes a tf.train.Example protocol buffer as protobuf's
// parsers do: packed and unpacked numbers alike; fields it does not know
// (or under a wire type other than their own) skipped; a message field
// given twice merged (a map key given twice: the last entry); of a
// Feature's lists, the last one set. A list set but empty is a non-nil
// empty slice. The values share no memory with data. An error wraps
// ErrMalformed and names the feature, where known.
func DecodeExample(data []byte) (Example, error) {
	var d exampleDecoder
	return d.decode(data)
}

// exampleDecoder decodes Examples one after another, sharing work between
// them: feature names interned, and values copied into arenas, slices of
// which (capped at their length, so that an append to one copies it) the
// Examples hold.
type exampleDecoder struct {
	names  map[string]string // interned feature names
	size   int               // the features of the last example, a size hint
	ints   []int64           // the free parts of the arenas
	floats []float32
	lists  [][]byte
	raw    []byte
}

// arenaSize is an arena's values, when one is made.
const arenaSize = 512

// maxNames bounds the interned names: a file of ever new names costs no
// more than this.
const maxNames = 1 << 12

func (d *exampleDecoder) decode(data []byte) (Example, error) {
	ex := make(Example, d.size)
	err := walk(data, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != exampleFeatures || typ != protowire.BytesType {
			return nil
		}
		return walk(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			if num != featuresFeature || typ != protowire.BytesType {
				return nil
			}
			return d.entry(ex, v)
		})
	})
	if err != nil {
		return nil, err
	}
	d.size = len(ex)
	return ex, nil
}

// name is v as a string, interned.
func (d *exampleDecoder) name(v []byte) string {
	if s, ok := d.names[string(v)]; ok {
		return s
	}
	s := string(v)
	if d.names == nil {
		d.names = map[string]string{}
	}
	if len(d.names) < maxNames {
		d.names[s] = s
	}
	return s
}

// entry decodes one entry of Features.feature into ex.
func (d *exampleDecoder) entry(ex Example, entry []byte) error {
	var name []byte
	var value [2][]byte // the value's first occurrences (more are rare)
	var more [][]byte
	nv := 0
	err := walk(entry, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case mapKey:
			if !utf8.Valid(v) {
				return fmt.Errorf("%w: feature name %q is not UTF-8", ErrMalformed, v)
			}
			name = v
		case mapValue:
			if nv < len(value) {
				value[nv] = v
			} else {
				more = append(more, v)
			}
			nv++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("a feature's map entry: %w", err)
	}
	var f Feature
	for _, v := range append(value[:min(nv, len(value))], more...) {
		if err := d.feature(&f, v); err != nil {
			return fmt.Errorf("feature %q: %w", name, err)
		}
	}
	ex[d.name(name)] = f
	return nil
}

// feature merges a Feature message into f.
func (d *exampleDecoder) feature(f *Feature, msg []byte) error {
	return walk(msg, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		var k Kind
		switch num {
		case featureBytesList:
			k = KindBytes
		case featureFloatList:
			k = KindFloat
		case featureInt64List:
			k = KindInt64
		default:
			return nil
		}
		if f.Kind() != k { // another member of the oneof: it replaces the one set
			*f = Feature{}
		}
		switch k {
		case KindBytes:
			return d.bytesList(f, v)
		case KindFloat:
			vals := f.Floats
			if vals == nil {
				if cap(d.floats) == 0 {
					d.floats = make([]float32, 0, arenaSize)
				}
				vals = d.floats[:0]
			}
			err := walkList(v, protowire.Fixed32Type, func(b []byte) (int, error) {
				x, n := protowire.ConsumeFixed32(b)
				if n < 0 {
					return 0, fmt.Errorf("%w: float_list value: %v", ErrMalformed, protowire.ParseError(n))
				}
				vals = append(vals, math.Float32frombits(x))
				return n, nil
			})
			f.Floats, d.floats = vals[:len(vals):len(vals)], vals[len(vals):]
			return err
		default:
			vals := f.Int64s
			if vals == nil {
				if cap(d.ints) == 0 {
					d.ints = make([]int64, 0, arenaSize)
				}
				vals = d.ints[:0]
			}
			err := walkList(v, protowire.VarintType, func(b []byte) (int, error) {
				x, n := protowire.ConsumeVarint(b)
				if n < 0 {
					return 0, fmt.Errorf("%w: int64_list value: %v", ErrMalformed, protowire.ParseError(n))
				}
				vals = append(vals, int64(x))
				return n, nil
			})
			f.Int64s, d.ints = vals[:len(vals):len(vals)], vals[len(vals):]
			return err
		}
	})
}

// bytesList merges a BytesList message into f, its values copied into
// the arena.
func (d *exampleDecoder) bytesList(f *Feature, msg []byte) error {
	vals := f.Bytes
	if vals == nil {
		if cap(d.lists) == 0 {
			d.lists = make([][]byte, 0, arenaSize/8)
		}
		vals = d.lists[:0]
	}
	err := walk(msg, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != listValue || typ != protowire.BytesType {
			return nil
		}
		if len(v) == 0 {
			vals = append(vals, []byte{}) // an empty value is empty, not nil, whatever the arena holds
			return nil
		}
		if cap(d.raw) < len(v) {
			d.raw = make([]byte, 0, max(len(v), 8*arenaSize))
		}
		c := append(d.raw[:0], v...)
		d.raw = c[len(v):len(v)]
		vals = append(vals, c[:len(v):len(v)])
		return nil
	})
	f.Bytes, d.lists = vals[:len(vals):len(vals)], vals[len(vals):]
	return err
}

// walkList reads a FloatList or Int64List message: its values field
// packed (one length-delimited run of values) or not (one value a
// field, of wire type typ), consumed one by one by consume.
func walkList(msg []byte, typ protowire.Type, consume func([]byte) (int, error)) error {
	for len(msg) > 0 {
		num, t, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
		}
		msg = msg[n:]
		if num == listValue && t == typ {
			m, err := consume(msg)
			if err != nil {
				return err
			}
			msg = msg[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, t, msg)
		if m < 0 {
			return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(m))
		}
		if num == listValue && t == protowire.BytesType { // packed
			packed, _ := protowire.ConsumeBytes(msg)
			for len(packed) > 0 {
				k, err := consume(packed)
				if err != nil {
					return err
				}
				packed = packed[k:]
			}
		}
		msg = msg[m:]
	}
	return nil
}

// walk calls fn with each field of msg: its number, wire type, and for a
// length-delimited field its bytes (else nil). Groups and other fields
// are skipped whole.
func walk(msg []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
		}
		msg = msg[n:]
		var v []byte
		var m int
		if typ == protowire.BytesType {
			v, m = protowire.ConsumeBytes(msg)
		} else {
			m = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if m < 0 {
			return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(m))
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		msg = msg[m:]
	}
	return nil
}
