package tfrecord

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMaskedCRC: CRC-32C's check value (of "123456789", 0xe3069283)
// masked by hand: rotated right by 15 bits, plus 0xa282ead8.
func TestMaskedCRC(t *testing.T) {
	if got, want := MaskedCRC([]byte("123456789")), uint32(0xc78ab0e5); got != want {
		t.Errorf("MaskedCRC = %#08x, want %#08x", got, want)
	}
}

// TestRead: whole records read back; each kind of damage is the error
// that says what it is, and a bad data checksum (only) is ErrDataChecksum,
// after which the next record reads.
func TestRead(t *testing.T) {
	rec := AppendRecord(nil, []byte("hello, records"))
	flip := func(i int) []byte {
		b := bytes.Clone(rec)
		b[i] ^= 1
		return b
	}
	huge := binary.LittleEndian.AppendUint64(nil, 1<<20+1)
	huge = binary.LittleEndian.AppendUint32(huge, MaskedCRC(huge))
	tests := []struct {
		name     string
		file     []byte
		want     []string // records read before the error
		is       error
		dataOnly bool // the error is ErrDataChecksum
	}{
		{"two records", append(bytes.Clone(rec), AppendRecord(nil, nil)...), []string{"hello, records", ""}, io.EOF, false},
		{"empty", nil, nil, io.EOF, false},
		{"cut in the header", append(bytes.Clone(rec), rec[:5]...), []string{"hello, records"}, io.ErrUnexpectedEOF, false},
		{"cut in the data", append(bytes.Clone(rec), rec[:15]...), []string{"hello, records"}, io.ErrUnexpectedEOF, false},
		{"length checksum", flip(9), nil, ErrCorrupt, false},
		{"length", flip(0), nil, ErrCorrupt, false},
		{"length past the bound", huge, nil, ErrCorrupt, false},
		{"data", append(flip(13), rec...), nil, ErrDataChecksum, true},
		{"data checksum", append(flip(len(rec)-1), rec...), nil, ErrDataChecksum, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bytes.NewReader(tt.file)
			var got []string
			var buf []byte
			var err error
			for {
				var data []byte
				data, buf, err = Read(r, 1<<20, buf)
				if err != nil {
					break
				}
				got = append(got, string(data))
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %v, want one wrapping %v", err, tt.is)
			}
			if errors.Is(err, ErrDataChecksum) != tt.dataOnly {
				t.Errorf("error %v: ErrDataChecksum %v, want %v", err, !tt.dataOnly, tt.dataOnly)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if tt.dataOnly {
				data, _, err := Read(r, 1<<20, buf)
				if err != nil || string(data) != "hello, records" {
					t.Errorf("after a bad data checksum: %q, %v; want the next record", data, err)
				}
			}
		})
	}
}

// TestReadAllocatesAsDataComes: a header that announces a record of 1 GiB,
// and 100 bytes of it, costs no allocation of that length; a buffer
// passed back in is reused for records that fit it.
func TestReadAllocatesAsDataComes(t *testing.T) {
	var header [HeaderSize]byte
	binary.LittleEndian.PutUint64(header[:8], 1<<30)
	binary.LittleEndian.PutUint32(header[8:], MaskedCRC(header[:8]))
	file := append(header[:], make([]byte, 100)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := Read(bytes.NewReader(file), 1<<30, nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error %v, want one wrapping io.ErrUnexpectedEOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("reading a 112-byte file allocated %d bytes", got)
	}

	var recs []byte
	for range 100 {
		recs = AppendRecord(recs, make([]byte, 1000))
	}
	r := bytes.NewReader(recs)
	buf := make([]byte, 0, 2000)
	// The average over 10 runs, in whole allocations: a Read that
	// allocates makes at least one a run, where a single allocation by
	// something else in the process during the runs does not count.
	allocs := testing.AllocsPerRun(10, func() {
		r.Reset(recs)
		for {
			var err error
			if _, buf, err = Read(r, 1<<20, buf); err != nil {
				if err != io.EOF {
					t.Fatal(err)
				}
				return
			}
		}
	})
	if allocs > 0 {
		t.Errorf("reading 100 records into a buffer that holds them allocated %v times", allocs)
	}
}
