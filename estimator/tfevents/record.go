package tfevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// castagnoli is the CRC32C table TFRecord checksums use.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskDelta is added to a rotated CRC to mask it.
const maskDelta = 0xa282ead8

// maskedCRC returns the masked CRC32C of b, as TFRecord stores it: a CRC
// of data that holds CRCs would otherwise be easy to mistake.
func maskedCRC(b []byte) uint32 {
	crc := crc32.Checksum(b, castagnoli)
	return (crc>>15 | crc<<17) + maskDelta
}

// headerSize is the length and its CRC; footerSize the data's CRC.
const (
	headerSize = 12
	footerSize = 4
)

// appendRecord appends data framed as a TFRecord record to b.
func appendRecord(b, data []byte) []byte {
	var header [headerSize]byte
	binary.LittleEndian.PutUint64(header[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(header[8:], maskedCRC(header[:8]))
	b = append(b, header[:]...)
	b = append(b, data...)
	return binary.LittleEndian.AppendUint32(b, maskedCRC(data))
}

// ErrCorrupt is wrapped by the errors of reading a record whose checksum
// does not match or whose length is implausible.
var ErrCorrupt = errors.New("corrupt record")

// maxRecord bounds a record's length; an Event of scalars is a few hundred
// bytes, and a length past this is a damaged header.
const maxRecord = 1 << 30

// readRecord reads the next record's data from r. It returns io.EOF at a
// clean end of r, io.ErrUnexpectedEOF (wrapped) for a record cut short (a
// writer still writing, or killed mid-record) and ErrCorrupt (wrapped)
// for a checksum that does not match.
func readRecord(r io.Reader) ([]byte, error) {
	var header [headerSize]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("record header: %w", err)
		}
		return nil, err
	}
	if got, want := binary.LittleEndian.Uint32(header[8:]), maskedCRC(header[:8]); got != want {
		return nil, fmt.Errorf("%w: length checksum %#08x, want %#08x", ErrCorrupt, got, want)
	}
	n := binary.LittleEndian.Uint64(header[:8])
	if n > maxRecord {
		return nil, fmt.Errorf("%w: length %d", ErrCorrupt, n)
	}
	// Grow as the data comes, not as the header says: a damaged length
	// is no reason to allocate.
	var buf bytes.Buffer
	buf.Grow(int(min(n+footerSize, 1<<16)))
	if _, err := io.CopyN(&buf, r, int64(n+footerSize)); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("record of %d bytes: %w", n, err)
	}
	data, footer := buf.Bytes()[:n], buf.Bytes()[n:]
	if got, want := binary.LittleEndian.Uint32(footer), maskedCRC(data); got != want {
		return nil, fmt.Errorf("%w: data checksum %#08x, want %#08x", ErrCorrupt, got, want)
	}
	return data, nil
}
