package dataset

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/internal/tfrecord"
)

// FuzzRecordReader: reading any bytes as a TFRecord file, plain or
// compressed, strictly or skipping damaged records, never panics; an
// error wraps ErrCorrupt or io.ErrUnexpectedEOF (or, for a compressed
// stream, says what is wrong with it); the records read write back to a
// file that reads back the same; skipping reads every record strict
// reading reads, and more only past damage.
//
//	go test -run '^$' -fuzz '^FuzzRecordReader$' -fuzztime 60s -fuzzminimizetime 1s ./dataset
func FuzzRecordReader(f *testing.F) {
	var file []byte
	for _, ex := range pyExamples() {
		b, err := AppendExample(nil, ex)
		if err != nil {
			f.Fatal(err)
		}
		file = tfrecord.AppendRecord(file, b)
	}
	f.Add(file, uint8(0))
	f.Add(file[:len(file)-3], uint8(0))
	flipped := bytes.Clone(file)
	flipped[20] ^= 1
	f.Add(flipped, uint8(0))
	var huge [tfrecord.HeaderSize]byte
	binary.LittleEndian.PutUint64(huge[:8], DefaultMaxRecordBytes)
	binary.LittleEndian.PutUint32(huge[8:], tfrecord.MaskedCRC(huge[:8]))
	f.Add(huge[:], uint8(0))
	for _, c := range []Compression{GZIP, ZLIB} {
		var z bytes.Buffer
		w, err := NewRecordWriter(&z, "z", c)
		if err != nil {
			f.Fatal(err)
		}
		w.Write([]byte("one"))
		w.Write(nil)
		if err := w.Close(); err != nil {
			f.Fatal(err)
		}
		mode := uint8(2)
		if c == ZLIB {
			mode = 4
		}
		f.Add(z.Bytes(), mode)
	}
	f.Fuzz(func(t *testing.T, file []byte, mode uint8) {
		c := []Compression{NoCompression, GZIP, ZLIB}[int(mode>>1)%3]
		read := func(skip bool) ([]string, int, error) {
			r, err := NewRecordReader(bytes.NewReader(file), "f", &RecordOptions{Compression: c, SkipDamaged: skip, MaxRecordBytes: 1 << 20})
			if err != nil {
				if c == NoCompression {
					t.Fatalf("an uncompressed reader: %v", err)
				}
				return nil, 0, err
			}
			got, err := readAll(r)
			if err != nil && c == NoCompression && !errors.Is(err, ErrCorrupt) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor io.ErrUnexpectedEOF", err)
			}
			if skip && errors.Is(err, ErrCorrupt) {
				t.Fatalf("skipping damaged records: %v", err)
			}
			return got, r.Skipped(), err
		}
		strict, _, strictErr := read(false)
		skipped, n, _ := read(true)
		if strictErr == nil && (n != 0 || !cmp.Equal(strict, skipped, cmpopts.EquateEmpty())) {
			t.Fatalf("a whole file: strict %q, skipping %q (%d skipped)", strict, skipped, n)
		}
		if len(skipped) < len(strict) || !cmp.Equal(strict, skipped[:len(strict)], cmpopts.EquateEmpty()) {
			t.Fatalf("skipping read %q, strict %q: not a continuation", skipped, strict)
		}
		var again bytes.Buffer
		w, err := NewRecordWriter(&again, "again", c)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range skipped {
			w.Write([]byte(s))
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := NewRecordReader(&again, "again", &RecordOptions{Compression: c})
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(r)
		if err != nil || !cmp.Equal(skipped, got, cmpopts.EquateEmpty()) {
			t.Fatalf("written again and read: %q, %v; want %q", got, err, skipped)
		}
	})
}

// FuzzDecodeExample: decoding any bytes as a tf.Example never panics; an
// error wraps ErrMalformed; an Example decoded encodes to bytes that
// decode to it again, and encode to the same bytes (deterministic); a
// decoder decoding one example after another gives each values of its own.
//
//	go test -run '^$' -fuzz '^FuzzDecodeExample$' -fuzztime 60s -fuzzminimizetime 1s ./dataset
func FuzzDecodeExample(f *testing.F) {
	for _, ex := range pyExamples() {
		b, err := AppendExample(nil, ex)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(append(unknown(), example(entry("i", msg(nil, featureInt64List, []byte{0x08, 0x05, 0x08, 0x7f})))...)) // unpacked
	f.Fuzz(func(t *testing.T, data []byte) {
		ex, err := DecodeExample(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		b, err := AppendExample(nil, ex)
		if err != nil {
			t.Fatalf("encoding a decoded example: %v", err)
		}
		got, err := DecodeExample(b)
		if err != nil {
			t.Fatalf("decoding an encoded example: %v", err)
		}
		if diff := cmp.Diff(ex, got, cmp.Comparer(sameFloat)); diff != "" {
			t.Fatalf("encoded and decoded (-first +again):\n%s", diff)
		}
		again, err := AppendExample(nil, got)
		if err != nil || !bytes.Equal(b, again) {
			t.Fatalf("the same example encodes to other bytes (%v)", err)
		}
		// One decoder, as a RecordReader's, decoding the same bytes twice:
		// the second example is the first's equal, and appending to the
		// first's lists leaves it so.
		var d exampleDecoder
		first, err := d.decode(data)
		if err != nil {
			t.Fatal(err)
		}
		second, err := d.decode(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range first {
			_ = append(f.Int64s, 1)
			_ = append(f.Floats, 1)
			_ = append(f.Bytes, nil)
			for _, v := range f.Bytes {
				_ = append(v, 1)
			}
		}
		if diff := cmp.Diff(ex, second, cmp.Comparer(sameFloat)); diff != "" {
			t.Fatalf("decoded again by the same decoder (-first +again):\n%s", diff)
		}
	})
}
