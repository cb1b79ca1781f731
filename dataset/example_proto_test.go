package dataset

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestExampleRoundTrip: every example encodes and decodes back as it was,
// and the same example (whatever its map's order) to the same bytes.
func TestExampleRoundTrip(t *testing.T) {
	for i, ex := range pyExamples() {
		b, err := AppendExample(nil, ex)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeExample(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ex, got, cmp.Comparer(sameFloat)); diff != "" {
			t.Errorf("example %d (-want +got):\n%s", i, diff)
		}
		for range 5 {
			again, err := AppendExample(nil, got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, again) {
				t.Fatalf("example %d encodes to different bytes", i)
			}
		}
	}
}

// The wire format by hand, field by field, for what our encoder never
// writes but other writers may.
func tag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	return protowire.AppendTag(b, num, typ)
}
func msg(b []byte, num protowire.Number, m []byte) []byte {
	return protowire.AppendBytes(tag(b, num, protowire.BytesType), m)
}
func entry(name string, feature []byte) []byte {
	return msg(nil, featuresFeature, msg(msg(nil, mapKey, []byte(name)), mapValue, feature))
}
func example(entries ...[]byte) []byte { return msg(nil, exampleFeatures, bytes.Join(entries, nil)) }
func unknown() []byte {
	b := protowire.AppendVarint(tag(nil, 15, protowire.VarintType), 99)
	b = protowire.AppendFixed64(tag(b, 16, protowire.Fixed64Type), 1)
	b = msg(b, 17, []byte("unknown"))
	b = tag(b, 18, protowire.StartGroupType)
	b = protowire.AppendVarint(tag(b, 1, protowire.VarintType), 1)
	return tag(b, 18, protowire.EndGroupType)
}

// TestDecodeExampleWire: unpacked and packed numbers alike, unknown fields
// skipped, a known field under another wire type skipped (as protobuf's
// parsers do), repeated messages merged, of a oneof the last member set,
// a map key given twice its last entry.
func TestDecodeExampleWire(t *testing.T) {
	unpackedInts := tag(nil, listValue, protowire.VarintType)
	unpackedInts = protowire.AppendVarint(unpackedInts, uint64(5))
	unpackedInts = protowire.AppendVarint(tag(unpackedInts, listValue, protowire.VarintType), uint64(1<<64-3)) // -3
	packedInts := msg(nil, listValue, protowire.AppendVarint(protowire.AppendVarint(nil, 7), 8))
	unpackedFloats := protowire.AppendFixed32(tag(nil, listValue, protowire.Fixed32Type), math.Float32bits(1.5))
	packedFloats := msg(nil, listValue, protowire.AppendFixed32(nil, math.Float32bits(2.5)))
	tests := []struct {
		name string
		data []byte
		want Example
	}{
		{"nothing", nil, Example{}},
		{"unpacked int64s, then packed", example(entry("i", msg(nil, featureInt64List, append(bytes.Clone(unpackedInts), packedInts...)))),
			Example{"i": {Int64s: []int64{5, -3, 7, 8}}}},
		{"unpacked floats, then packed", example(entry("f", msg(nil, featureFloatList, append(bytes.Clone(unpackedFloats), packedFloats...)))),
			Example{"f": {Floats: []float32{1.5, 2.5}}}},
		{"unknown fields everywhere", append(unknown(), example(append(unknown(), entry("b", append(unknown(), msg(nil, featureBytesList, append(unknown(), msg(nil, listValue, []byte("v"))...))...))...))...),
			Example{"b": {Bytes: [][]byte{[]byte("v")}}}},
		{"a known field under another wire type", example(entry("i", msg(nil, featureInt64List, append(protowire.AppendFixed32(tag(nil, listValue, protowire.Fixed32Type), 1), packedInts...)))),
			Example{"i": {Int64s: []int64{7, 8}}}},
		{"a list given twice merges", example(entry("i", append(msg(nil, featureInt64List, packedInts), msg(nil, featureInt64List, unpackedInts)...))),
			Example{"i": {Int64s: []int64{7, 8, 5, -3}}}},
		{"the oneof's last member wins", example(entry("x", append(msg(nil, featureInt64List, packedInts), msg(nil, featureFloatList, packedFloats)...))),
			Example{"x": {Floats: []float32{2.5}}}},
		{"a key given twice: its last entry", example(entry("k", msg(nil, featureInt64List, packedInts)), entry("k", msg(nil, featureFloatList, packedFloats))),
			Example{"k": {Floats: []float32{2.5}}}},
		{"features given twice merge", append(example(entry("a", msg(nil, featureInt64List, nil))), example(entry("b", nil))...),
			Example{"a": {Int64s: []int64{}}, "b": {}}},
		{"an entry with no key nor value", example(msg(nil, featuresFeature, nil)), Example{"": {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeExample(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeExampleMalformed: bytes that are not an Example are an error
// wrapping ErrMalformed that names the feature where one is known.
func TestDecodeExampleMalformed(t *testing.T) {
	ints := msg(nil, listValue, []byte{0x80}) // a varint cut short inside a packed run
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"a tag cut short", []byte{0x80}, "malformed"},
		{"a length past the end", []byte{0x0a, 0x05, 0x00}, "field 1"},
		{"a packed varint cut short", example(entry("ids", msg(nil, featureInt64List, ints))), `feature "ids": malformed tf.Example: int64_list value`},
		{"packed floats not a multiple of 4", example(entry("x", msg(nil, featureFloatList, msg(nil, listValue, []byte{1, 2, 3})))), `feature "x": malformed tf.Example: float_list value`},
		{"a name that is not UTF-8", example(entry("\xff", nil)), "not UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeExample(tt.data)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one wrapping ErrMalformed that says %q", err, tt.want)
			}
		})
	}
}

// TestAppendExampleErrors: what no tf.Example can hold is an error naming
// the feature.
func TestAppendExampleErrors(t *testing.T) {
	for _, tt := range []struct {
		ex   Example
		want string
	}{
		{Example{"two": {Int64s: []int64{1}, Floats: []float32{1}}}, `feature "two": feature sets 2 value lists`},
		{Example{"\xfe": {}}, `feature name "\xfe" is not UTF-8`},
	} {
		if _, err := AppendExample(nil, tt.ex); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("AppendExample(%v): %v, want an error saying %q", tt.ex, err, tt.want)
		}
	}
}

// TestNextExampleNamesTheRecord: a record that is not an Example is an
// error naming the file, the record, its offset and the feature; the
// records after it still read.
func TestNextExampleNamesTheRecord(t *testing.T) {
	var file bytes.Buffer
	w, err := NewRecordWriter(&file, "mem", NoCompression)
	if err != nil {
		t.Fatal(err)
	}
	good := Example{"n": {Int64s: []int64{1}}}
	w.WriteExample(good)
	w.Write(example(entry("ids", msg(nil, featureInt64List, msg(nil, listValue, []byte{0x80})))))
	w.WriteExample(good)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewRecordReader(&file, "data.tfrecord", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ex, err := r.NextExample(); err != nil || !cmp.Equal(ex, good) {
		t.Fatalf("record 0: %v, %v", ex, err)
	}
	_, err = r.NextExample()
	if want := `dataset: data.tfrecord: record 1 at byte 30: feature "ids": malformed`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("record 1: error %v, want one starting %q", err, want)
	}
	if ex, err := r.NextExample(); err != nil || !cmp.Equal(ex, good) {
		t.Errorf("record 2: %v, %v", ex, err)
	}
	if _, err := r.NextExample(); err != io.EOF {
		t.Errorf("after the last record: %v, want io.EOF", err)
	}
}

// TestDecodedValuesAreTheirOwn: the examples a reader decodes one after
// another share no values: appending to, or writing, one's lists leaves
// the others' as they were.
func TestDecodedValuesAreTheirOwn(t *testing.T) {
	var file bytes.Buffer
	w, err := NewRecordWriter(&file, "mem", NoCompression)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(i int) Example {
		return Example{
			"a": {Int64s: []int64{int64(i), int64(i)}},
			"b": {Floats: []float32{float32(i)}},
			"c": {Bytes: [][]byte{[]byte{byte(i)}, []byte("xy")}},
		}
	}
	for i := range 3 {
		if err := w.WriteExample(mk(i)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	r, err := NewRecordReader(&file, "mem", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []Example
	for range 3 {
		ex, err := r.NextExample()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ex)
	}
	for _, ex := range got[:2] {
		_ = append(ex["a"].Int64s, 99)
		_ = append(ex["b"].Floats, 99)
		_ = append(ex["c"].Bytes, []byte("z"))
		_ = append(ex["c"].Bytes[1], 'z')
	}
	got[0]["a"].Int64s[1] = 42 // writes only example 0
	want := []Example{mk(0), mk(1), mk(2)}
	want[0]["a"].Int64s[1] = 42
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
