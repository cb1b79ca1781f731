package tfevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestMaskedCRC: CRC32C's check value (of "123456789", 0xe3069283) masked
// by hand: rotated right by 15 bits, plus 0xa282ead8.
func TestMaskedCRC(t *testing.T) {
	if got, want := maskedCRC([]byte("123456789")), uint32(0xc78ab0e5); got != want {
		t.Errorf("maskedCRC = %#08x, want %#08x", got, want)
	}
}

// record frames data, as a file holds it.
func record(data []byte) []byte { return appendRecord(nil, data) }

// TestReadFileDamage: the events before the damage, and an error saying
// what it is.
func TestReadFileDamage(t *testing.T) {
	good := appendEvent(nil, Event{Step: 1, Scalars: []Scalar{{"loss", 1}}})
	first := []Event{{Step: 1, Scalars: []Scalar{{"loss", 1}}}}
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 1
		return b
	}
	huge := binary.LittleEndian.AppendUint64(nil, 1<<40)
	huge = binary.LittleEndian.AppendUint32(huge, maskedCRC(huge))
	wrongType := protowire.AppendVarint(protowire.AppendTag(nil, eventWallTime, protowire.VarintType), 5)
	tests := []struct {
		name string
		file []byte
		want []Event
		is   error
	}{
		{"whole", append(record(good), record(good)...), append(first, first...), nil},
		{"empty file", nil, nil, nil},
		{"cut in the header", append(record(good), record(good)[:5]...), first, io.ErrUnexpectedEOF},
		{"cut in the data", append(record(good), record(good)[:15]...), first, io.ErrUnexpectedEOF},
		{"cut before the data checksum", append(record(good), record(good)[:len(record(good))-1]...), first, io.ErrUnexpectedEOF},
		{"length checksum", append(record(good), flip(record(good), 9)...), first, ErrCorrupt},
		{"length", append(record(good), flip(record(good), 0)...), first, ErrCorrupt},
		{"data", append(record(good), flip(record(good), 13)...), first, ErrCorrupt},
		{"data checksum", append(record(good), flip(record(good), len(record(good))-1)...), first, ErrCorrupt},
		{"huge length", append(record(good), huge...), first, ErrCorrupt},
		{"not a protocol buffer", append(record(good), record([]byte{0xff, 0xff, 0xff})...), first, errMalformed},
		{"known field, wrong wire type", append(record(good), record(wrongType)...), first, errMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FilePrefix+"x")
			if err := os.WriteFile(path, tt.file, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadFile(path)
			if !errors.Is(err, tt.is) || (err == nil) != (tt.is == nil) {
				t.Errorf("error %v, want one wrapping %v", err, tt.is)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseSkipsUnknownFields: fields this package does not write (a graph,
// a histogram value) are skipped, as protocol buffers allow.
func TestParseSkipsUnknownFields(t *testing.T) {
	var histo []byte
	histo = protowire.AppendTag(histo, valueTag, protowire.BytesType)
	histo = protowire.AppendString(histo, "weights")
	histo = protowire.AppendTag(histo, 5, protowire.BytesType)
	histo = protowire.AppendBytes(histo, []byte{1, 2, 3})
	var summary []byte
	summary = protowire.AppendTag(summary, summaryValue, protowire.BytesType)
	summary = protowire.AppendBytes(summary, histo)
	summary = protowire.AppendTag(summary, summaryValue, protowire.BytesType)
	summary = protowire.AppendBytes(summary, appendValue(nil, Scalar{"loss", 2}))
	var b []byte
	b = protowire.AppendTag(b, eventStep, protowire.VarintType)
	b = protowire.AppendVarint(b, 3)
	b = protowire.AppendTag(b, 4, protowire.BytesType) // graph_def
	b = protowire.AppendBytes(b, []byte("graph"))
	b = protowire.AppendTag(b, eventSummary, protowire.BytesType)
	b = protowire.AppendBytes(b, summary)
	got, err := parseEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Event{Step: 3, Scalars: []Scalar{{"loss", 2}}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
