// Package tfrecord is TFRecord's framing, shared by every reader and
// writer of TFRecord files in towerflow (TensorBoard event files in
// estimator/tfevents, tf.Example files in dataset): each record is its
// length (uint64, little endian), the masked CRC-32C of those 8 bytes
// (uint32), the data, and the masked CRC-32C of the data (uint32).
package tfrecord

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// castagnoli is the CRC-32C table TFRecord checksums use.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskDelta is added to a rotated CRC to mask it.
const maskDelta = 0xa282ead8

// MaskedCRC returns the masked CRC-32C of b, as TFRecord stores it: a CRC
// of data that holds CRCs would otherwise be easy to mistake.
func MaskedCRC(b []byte) uint32 {
	crc := crc32.Checksum(b, castagnoli)
	return (crc>>15 | crc<<17) + maskDelta
}

// HeaderSize is the length and its CRC; FooterSize the data's CRC.
const (
	HeaderSize = 12
	FooterSize = 4
)

// Overhead is the bytes a record takes beyond its data.
const Overhead = HeaderSize + FooterSize

// AppendRecord appends data framed as a TFRecord record to b.
func AppendRecord(b, data []byte) []byte {
	var header [HeaderSize]byte
	binary.LittleEndian.PutUint64(header[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(header[8:], MaskedCRC(header[:8]))
	b = append(b, header[:]...)
	b = append(b, data...)
	return binary.LittleEndian.AppendUint32(b, MaskedCRC(data))
}

// ErrCorrupt is wrapped by the errors of reading a record whose checksum
// does not match or whose length is implausible.
var ErrCorrupt = errors.New("corrupt record")

// ErrDataChecksum wraps ErrCorrupt: a record whose header was whole and
// whose data and footer were read in full, but whose data checksum does
// not match. The next record starts right after it, so a reader may skip
// it and go on; after any other ErrCorrupt where the next record starts
// is unknown.
var ErrDataChecksum = fmt.Errorf("%w: data checksum", ErrCorrupt)

// growStep is how much of a record is read at a time past the buffer's
// capacity: memory grows as the data arrives, never on a header's word.
const growStep = 1 << 16

// Read reads the next record from r into buf (reusing its memory) and
// returns the record's data, which aliases the returned buffer, and the
// buffer for the next call. A length past maxLen is ErrCorrupt (wrapped),
// and nothing of it is allocated; neither is any length beyond the data
// that r actually holds: the buffer grows as data is read. It returns
// io.EOF at a clean end of r (no byte of a new record), io.ErrUnexpectedEOF
// (wrapped) for a record cut short (a writer still writing, or killed
// mid-record), ErrCorrupt (wrapped) for a length checksum that does not
// match or a length past maxLen, and ErrDataChecksum (wrapped) for a data
// checksum that does not match.
func Read(r io.Reader, maxLen uint64, buf []byte) (data, next []byte, err error) {
	// The header is read into buf too: an array here would escape to the
	// heap through r, an allocation a record.
	if cap(buf) < HeaderSize {
		buf = make([]byte, 0, HeaderSize)
	}
	header := buf[:HeaderSize]
	if _, err := io.ReadFull(r, header); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, buf, fmt.Errorf("record header: %w", err)
		}
		return nil, buf, err
	}
	if got, want := binary.LittleEndian.Uint32(header[8:]), MaskedCRC(header[:8]); got != want {
		return nil, buf, fmt.Errorf("%w: length checksum %#08x, want %#08x", ErrCorrupt, got, want)
	}
	n := binary.LittleEndian.Uint64(header[:8])
	if n > maxLen || n > math.MaxInt-FooterSize {
		return nil, buf, fmt.Errorf("%w: length %d, more than the %d bytes a record may have", ErrCorrupt, n, maxLen)
	}
	need := int(n) + FooterSize
	buf = buf[:0]
	for len(buf) < need {
		chunk := need - len(buf)
		if len(buf)+chunk > cap(buf) {
			chunk = min(chunk, max(growStep, len(buf)))
			grown := make([]byte, len(buf), len(buf)+chunk)
			copy(grown, buf)
			buf = grown
		}
		k, err := io.ReadFull(r, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+k]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, buf, fmt.Errorf("record of %d bytes: %w", n, err)
		}
	}
	data, footer := buf[:n], buf[n:need]
	if got, want := binary.LittleEndian.Uint32(footer), MaskedCRC(data); got != want {
		return nil, buf, fmt.Errorf("%w %#08x, want %#08x", ErrDataChecksum, got, want)
	}
	return data, buf, nil
}
