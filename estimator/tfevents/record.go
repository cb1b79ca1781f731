package tfevents

import (
	"io"

	"github.com/towerflow/towerflow/internal/tfrecord"
)

// maskedCRC returns the masked CRC32C of b, as TFRecord stores it.
func maskedCRC(b []byte) uint32 { return tfrecord.MaskedCRC(b) }

// headerSize is the length and its CRC.
const headerSize = tfrecord.HeaderSize

// appendRecord appends data framed as a TFRecord record to b.
func appendRecord(b, data []byte) []byte { return tfrecord.AppendRecord(b, data) }

// ErrCorrupt is wrapped by the errors of reading a record whose checksum
// does not match or whose length is implausible.
var ErrCorrupt = tfrecord.ErrCorrupt

// maxRecord bounds a record's length; an Event of scalars is a few hundred
// bytes, and a length past this is a damaged header.
const maxRecord = 1 << 30

// readRecord reads the next record's data from r. It returns io.EOF at a
// clean end of r, io.ErrUnexpectedEOF (wrapped) for a record cut short (a
// writer still writing, or killed mid-record) and ErrCorrupt (wrapped)
// for a checksum that does not match.
func readRecord(r io.Reader) ([]byte, error) {
	data, _, err := tfrecord.Read(r, maxRecord, nil)
	return data, err
}
