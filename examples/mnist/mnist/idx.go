package mnist

// The IDX file format of MNIST (http://yann.lecun.com/exdb/mnist/): a
// big-endian header, then unsigned bytes.
//
//	images: magic 0x00000803, count, rows, cols, then count×rows×cols pixels
//	labels: magic 0x00000801, count, then count labels
//
// Pixels are row-major, 0 the background and 255 full ink. Either file may
// be gzipped, as the data set is distributed.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
)

// The magic numbers of IDX files of unsigned bytes: 3 dimensions for
// images, 1 for labels.
const (
	ImagesMagic = 0x00000803
	LabelsMagic = 0x00000801
)

// Classes is the number of digit classes; labels are 0 to Classes−1.
const Classes = 10

// maxBytes bounds the pixels a header may announce (16 GiB, some 280 times
// MNIST's training images), so that a damaged header is an error rather
// than an attempt to read without end.
const maxBytes = 1 << 34

// DecodeImages reads an IDX images file (plain or gzipped) from r: the
// image size and the pixels of every image, count×rows×cols bytes. name
// names the file in errors, which also say which image is damaged.
func DecodeImages(r io.Reader, name string) (rows, cols int, pixels []byte, err error) {
	var h [4]uint32
	body, err := header(r, name, "images", ImagesMagic, h[:])
	if err != nil {
		return 0, 0, nil, err
	}
	n, r64, c64 := uint64(h[1]), uint64(h[2]), uint64(h[3])
	if r64 == 0 || c64 == 0 {
		return 0, 0, nil, fmt.Errorf("%s: images of %d×%d pixels: want at least one row and one column", name, r64, c64)
	}
	// Neither an image nor all of them may pass maxBytes (nor overflow).
	hiSize, size := bits.Mul64(r64, c64)
	hiTotal, total := bits.Mul64(n, size)
	if hiSize != 0 || hiTotal != 0 || size > maxBytes || total > maxBytes {
		return 0, 0, nil, fmt.Errorf("%s: the header announces %d images of %d×%d pixels, more than %d bytes: a damaged header?", name, n, r64, c64, uint64(maxBytes))
	}
	if pixels, err = records(body, name, "image", int64(n), int64(size)); err != nil {
		return 0, 0, nil, err
	}
	return int(r64), int(c64), pixels, nil
}

// DecodeLabels reads an IDX labels file (plain or gzipped) from r and
// checks that every label is a digit. name names the file in errors, which
// also say which label is damaged.
func DecodeLabels(r io.Reader, name string) ([]byte, error) {
	var h [2]uint32
	body, err := header(r, name, "labels", LabelsMagic, h[:])
	if err != nil {
		return nil, err
	}
	labels, err := records(body, name, "label", int64(h[1]), 1)
	if err != nil {
		return nil, err
	}
	for i, l := range labels {
		if l >= Classes {
			return nil, fmt.Errorf("%s: label %d of %d is %d, want 0 to %d", name, i, len(labels), l, Classes-1)
		}
	}
	return labels, nil
}

// header reads the header of an IDX file, len(h) big-endian uint32s, from
// r, gunzipping r if it is gzipped, checks the magic number h[0] and
// returns the reader of the rest of the file.
func header(r io.Reader, name, kind string, magic uint32, h []uint32) (io.Reader, error) {
	br := bufio.NewReader(r)
	if head, _ := br.Peek(2); bytes.Equal(head, []byte{0x1f, 0x8b}) {
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip header: %w", name, err)
		}
		z.Multistream(false)
		r = z
	} else {
		r = br
	}
	buf := make([]byte, 4*len(h))
	if n, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("%s: the IDX header ends after %d of its %d bytes: %w", name, n, len(buf), truncated(err))
	}
	for i := range h {
		h[i] = binary.BigEndian.Uint32(buf[4*i:])
	}
	if h[0] != magic {
		hint := ""
		switch h[0] {
		case ImagesMagic:
			hint = " (an images file)"
		case LabelsMagic:
			hint = " (a labels file)"
		}
		return nil, fmt.Errorf("%s: magic number 0x%08x%s, want 0x%08x for an IDX file of %s", name, h[0], hint, magic, kind)
	}
	return r, nil
}

// records reads n records of size bytes from r, and checks that the file
// ends there.
func records(r io.Reader, name, record string, n, size int64) ([]byte, error) {
	var buf bytes.Buffer
	// Grow as the data comes rather than as the header says, up to 64 MiB
	// at once: a header is no reason to allocate.
	buf.Grow(int(min(n*size, 1<<26)))
	got, err := io.CopyN(&buf, r, n*size)
	if err != nil {
		i := got / size
		return nil, fmt.Errorf("%s: %s %d of %d: the file ends after %d of its %d bytes: %w", name, record, i, n, got-i*size, size, truncated(err))
	}
	var one [1]byte
	switch extra, err := r.Read(one[:]); {
	case extra > 0:
		return nil, fmt.Errorf("%s: more data after the %d %ss the header announces", name, n, record)
	case err != io.EOF && err != nil:
		return nil, fmt.Errorf("%s: after the last %s: %w", name, record, truncated(err))
	}
	return buf.Bytes(), nil
}

// errTruncated is wrapped by the errors of files that end early.
var errTruncated = errors.New("truncated")

// truncated turns the end of a file into errTruncated, and leaves other
// errors (of the disk, of gzip) as they are.
func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errTruncated
	}
	return err
}

// EncodeImages writes pixels, images of rows×cols bytes, as an IDX images
// file.
func EncodeImages(w io.Writer, rows, cols int, pixels []byte) error {
	if rows < 1 || cols < 1 || len(pixels)%(rows*cols) != 0 {
		return fmt.Errorf("encode images: %d pixels are no whole number of %d×%d images", len(pixels), rows, cols)
	}
	return encode(w, pixels, ImagesMagic, len(pixels)/(rows*cols), rows, cols)
}

// EncodeLabels writes labels as an IDX labels file.
func EncodeLabels(w io.Writer, labels []byte) error {
	return encode(w, labels, LabelsMagic, len(labels))
}

func encode(w io.Writer, data []byte, h ...int) error {
	buf := make([]byte, 4*len(h))
	for i, v := range h {
		if uint64(v) > 1<<32-1 {
			return fmt.Errorf("encode IDX: header field %d does not fit 32 bits", v)
		}
		binary.BigEndian.PutUint32(buf[4*i:], uint32(v))
	}
	if _, err := w.Write(buf); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}

// writeFile writes a file with encode, gzipped when path ends in ".gz".
func writeFile(path string, encode func(io.Writer) error) error {
	var buf bytes.Buffer
	if strings.HasSuffix(path, ".gz") {
		z := gzip.NewWriter(&buf)
		z.Name = strings.TrimSuffix(filepath.Base(path), ".gz")
		if err := encode(z); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := z.Close(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	} else if err := encode(&buf); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
