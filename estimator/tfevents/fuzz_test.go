package tfevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzReadEvents: reading any bytes as an event file gives events, and at
// most one error, which wraps io.ErrUnexpectedEOF, ErrCorrupt or
// errMalformed; the events read (before an error too) are what the
// writer's encoding of them reads back as. It never panics, and allocates
// no more than the bytes there are. Seeds are a file the Writer writes.
//
//	go test -run '^$' -fuzz '^FuzzReadEvents$' -fuzztime 60s -fuzzminimizetime 1s ./estimator/tfevents
func FuzzReadEvents(f *testing.F) {
	w, err := Create(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	if err := w.WriteScalars(7, Scalar{Tag: "loss", Value: 0.25}, Scalar{Tag: "accuracy", Value: math.Inf(1)}); err != nil {
		f.Fatal(err)
	}
	if err := w.WriteSession(8, SessionStart); err != nil {
		f.Fatal(err)
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	file, err := os.ReadFile(w.Path())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(file)
	f.Add(file[:len(file)-3])
	flipped := bytes.Clone(file)
	flipped[len(file)-6] ^= 1
	f.Add(flipped)
	// A record header that announces 1 GiB and no data.
	var huge [headerSize]byte
	binary.LittleEndian.PutUint64(huge[:8], maxRecord)
	binary.LittleEndian.PutUint32(huge[8:], maskedCRC(huge[:8]))
	f.Add(huge[:])
	f.Fuzz(func(t *testing.T, file []byte) {
		events, err := readEvents(bytes.NewReader(file), "f")
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, errMalformed) {
			t.Fatalf("error %v wraps none of the package's", err)
		}
		var again []byte
		for _, e := range events {
			rec := appendEvent(nil, e)
			again = appendRecord(again, rec)
		}
		got, err := readEvents(bytes.NewReader(again), "again")
		if err != nil {
			t.Fatalf("reading the events written again: %v", err)
		}
		if diff := cmp.Diff(events, got, cmpopts.EquateNaNs(), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("events written and read again (-first +again):\n%s", diff)
		}
	})
}
