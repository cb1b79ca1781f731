package tfevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
)

// TestReadRecordAllocatesAsDataComes: a record header that announces the
// longest record there may be, and no data, costs no allocation of that
// length: the record is cut short, and said so.
func TestReadRecordAllocatesAsDataComes(t *testing.T) {
	var header [headerSize]byte
	binary.LittleEndian.PutUint64(header[:8], maxRecord)
	binary.LittleEndian.PutUint32(header[8:], maskedCRC(header[:8]))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readEvents(bytes.NewReader(header[:]), "f")
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error %v, want one wrapping io.ErrUnexpectedEOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("reading a 12-byte file allocated %d bytes", got)
	}
}
