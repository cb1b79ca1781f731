package dataset

import (
	"bufio"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/towerflow/towerflow/internal/tfrecord"
)

// Compression is how a TFRecord file is compressed, named as
// TensorFlow's compression_type: "" (none), "GZIP" or "ZLIB".
type Compression string

const (
	// NoCompression is a file of records as they are.
	NoCompression Compression = ""
	// GZIP is a gzip stream (RFC 1952) of the records, compress/gzip.
	GZIP Compression = "GZIP"
	// ZLIB is a zlib stream (RFC 1950) of the records, compress/zlib.
	ZLIB Compression = "ZLIB"
	// AutoCompression chooses by the file's name: ".gz" and ".gzip" are
	// GZIP, ".zz" and ".zlib" are ZLIB, any other name is NoCompression
	// (see CompressionOf). It is an option of files opened by name only.
	AutoCompression Compression = "AUTO"
)

// CompressionOf is the compression a file's name says: GZIP for a name
// ending ".gz" or ".gzip", ZLIB for ".zz" or ".zlib", else NoCompression.
func CompressionOf(path string) Compression {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".gz", ".gzip":
		return GZIP
	case ".zz", ".zlib":
		return ZLIB
	}
	return NoCompression
}

func (c Compression) check() error {
	switch c {
	case NoCompression, GZIP, ZLIB:
		return nil
	}
	return fmt.Errorf("compression %q: want \"\", %q or %q", string(c), GZIP, ZLIB)
}

// compressionLike is the compression whose header head (a file's first
// two bytes) starts as: gzip's magic number, or a zlib header (deflate,
// its check bits right); NoCompression where neither.
func compressionLike(head []byte) Compression {
	switch {
	case len(head) < 2:
		return NoCompression
	case head[0] == 0x1f && head[1] == 0x8b:
		return GZIP
	case head[0]&0x0f == 8 && head[0]>>4 <= 7 && (uint(head[0])<<8|uint(head[1]))%31 == 0:
		return ZLIB
	}
	return NoCompression
}

// ErrCorrupt is wrapped by the errors of reading a damaged record: a
// checksum that does not match, or a length past RecordOptions.MaxRecordBytes.
var ErrCorrupt = tfrecord.ErrCorrupt

// DefaultMaxRecordBytes bounds a record's length when
// RecordOptions.MaxRecordBytes is 0: a longer length is a damaged header.
const DefaultMaxRecordBytes = 256 << 20

// RecordOptions configures a RecordReader; the zero value (or nil) reads
// an uncompressed file, and a damaged record is an error.
type RecordOptions struct {
	// Compression is the file's compression. AutoCompression (for files
	// opened by name) chooses by the name's extension.
	Compression Compression
	// SkipDamaged skips damaged records, counting them (Skipped), rather
	// than stopping at the first with an error. A record whose data
	// checksum does not match is skipped and reading goes on with the next
	// one; where a record's length cannot be trusted — its checksum does
	// not match, or it is past MaxRecordBytes — the next record's start is
	// unknown, so the rest of the file counts as one damaged record and
	// the file ends there. A file cut short inside its last record (or a
	// compressed stream that is damaged) is an error still: it is a file
	// not wholly written, not a damaged record.
	SkipDamaged bool
	// MaxRecordBytes bounds a record's length; 0 is DefaultMaxRecordBytes.
	MaxRecordBytes int
}

// RecordReader reads the records of one TFRecord file, as a stream: it
// holds one record in memory at a time, never the file. Both checksums
// of every record are checked. A RecordReader is not safe for concurrent
// use.
type RecordReader struct {
	name    string
	r       io.Reader
	closer  io.Closer // the decompressor, if any
	max     uint64
	skip    bool
	buf     []byte
	record  int64 // the number of the next record, from 0
	offset  int64 // its byte offset in the (uncompressed) records
	skipped int
	err     error // sticky: the error every later Next returns
	dec     exampleDecoder
	head    *headReader // an uncompressed file's reader, which keeps its first bytes
}

// headReader is a reader that keeps the first two bytes read through it.
type headReader struct {
	r    io.Reader
	head [2]byte
	n    int
}

func (h *headReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if h.n < len(h.head) {
		h.n += copy(h.head[h.n:], p[:n])
	}
	return n, err
}

// NewRecordReader reads the records of r, a TFRecord file named name (for
// errors), compressed as opts says (AutoCompression by name's extension).
// A compressed stream's header is read here, and an error if damaged.
func NewRecordReader(r io.Reader, name string, opts *RecordOptions) (*RecordReader, error) {
	var o RecordOptions
	if opts != nil {
		o = *opts
	}
	if o.Compression == AutoCompression {
		o.Compression = CompressionOf(name)
	}
	if err := o.Compression.check(); err != nil {
		return nil, fmt.Errorf("dataset: %s: %w", name, err)
	}
	if o.MaxRecordBytes < 0 {
		return nil, fmt.Errorf("dataset: %s: MaxRecordBytes %d is negative", name, o.MaxRecordBytes)
	}
	rr := &RecordReader{name: name, max: DefaultMaxRecordBytes, skip: o.SkipDamaged}
	if o.MaxRecordBytes > 0 {
		rr.max = uint64(o.MaxRecordBytes)
	}
	if _, ok := r.(io.ByteReader); !ok {
		r = bufio.NewReaderSize(r, 1<<16)
	}
	switch o.Compression {
	case GZIP:
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("dataset: %s: gzip: %w", name, err)
		}
		rr.r, rr.closer = z, z
	case ZLIB:
		z, err := zlib.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("dataset: %s: zlib: %w", name, err)
		}
		rr.r, rr.closer = z, z
	default:
		rr.head = &headReader{r: r}
		rr.r = rr.head
	}
	return rr, nil
}

// Next returns the next record's data, valid until the next call. It
// returns io.EOF after the last record. A damaged record is an error
// wrapping ErrCorrupt (unless SkipDamaged), a record cut short one
// wrapping io.ErrUnexpectedEOF; both name the file, the record's number
// (from 0) and its byte offset (in the uncompressed records), and every
// later call returns the same error.
func (r *RecordReader) Next() ([]byte, error) {
	for r.err == nil {
		data, buf, err := tfrecord.Read(r.r, r.max, r.buf)
		r.buf = buf
		switch {
		case err == nil:
			r.record++
			r.offset += int64(len(data)) + tfrecord.Overhead
			return data, nil
		case errors.Is(err, io.EOF):
			r.err = io.EOF
		case r.skip && errors.Is(err, tfrecord.ErrDataChecksum):
			r.skipped++
			r.record++
			r.offset += int64(len(buf)) + tfrecord.HeaderSize
		case r.skip && errors.Is(err, ErrCorrupt):
			r.skipped++
			r.err = io.EOF
		case r.record == 0 && r.head != nil && errors.Is(err, ErrCorrupt) && compressionLike(r.head.head[:r.head.n]) != NoCompression:
			c := compressionLike(r.head.head[:r.head.n])
			r.err = fmt.Errorf("dataset: %s: record 0 at byte 0: %w (the file starts as a %s stream does: read it with Compression %s, or AutoCompression and a name ending %s)",
				r.name, err, strings.ToLower(string(c)), c, map[Compression]string{GZIP: ".gz or .gzip", ZLIB: ".zz or .zlib"}[c])
		default:
			r.err = fmt.Errorf("dataset: %s: record %d at byte %d: %w", r.name, r.record, r.offset, err)
		}
	}
	return nil, r.err
}

// NextExample reads the next record and decodes it as a tf.train.Example
// (DecodeExample). It returns io.EOF after the last record; an error
// decoding names the file, the record's number and byte offset, and the
// feature where known, and wraps ErrMalformed; reading goes on with the
// next record.
func (r *RecordReader) NextExample() (Example, error) {
	data, err := r.Next()
	if err != nil {
		return nil, err
	}
	offset := r.offset - int64(len(data)) - tfrecord.Overhead
	ex, err := r.dec.decode(data)
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: record %d at byte %d: %w", r.name, r.record-1, offset, err)
	}
	return ex, nil
}

// Record is the number (from 0) of the record the next call to Next
// reads: after a successful Next, one past the record it returned.
func (r *RecordReader) Record() int64 { return r.record }

// Offset is the byte offset, in the uncompressed records, of the record
// the next call to Next reads.
func (r *RecordReader) Offset() int64 { return r.offset }

// Skipped is the number of damaged records skipped (SkipDamaged).
func (r *RecordReader) Skipped() int { return r.skipped }

// Name is the file's name, as errors give it.
func (r *RecordReader) Name() string { return r.name }

// Close releases the decompressor, if any; it does not close the
// io.Reader the RecordReader reads (see RecordFile).
func (r *RecordReader) Close() error {
	if r.closer != nil {
		return r.closer.Close()
	}
	return nil
}

// RecordFile is a RecordReader of a file it opened: Close closes both.
type RecordFile struct {
	*RecordReader
	f *os.File
}

// OpenRecords opens the TFRecord file at path to read its records.
func OpenRecords(path string, opts *RecordOptions) (*RecordFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	r, err := NewRecordReader(f, path, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &RecordFile{RecordReader: r, f: f}, nil
}

// Close closes the reader and the file.
func (f *RecordFile) Close() error {
	err := f.RecordReader.Close()
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// RecordWriter writes records to a TFRecord stream, compressed or not.
// Records are buffered: Close (or Flush) writes them. A RecordWriter is
// not safe for concurrent use.
type RecordWriter struct {
	name string
	buf  *bufio.Writer
	z    interface {
		io.WriteCloser
		Flush() error
	}
	rec []byte
	err error
}

// NewRecordWriter writes records to w, compressed as c (not
// AutoCompression); name names w in errors.
func NewRecordWriter(w io.Writer, name string, c Compression) (*RecordWriter, error) {
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("dataset: %s: %w", name, err)
	}
	rw := &RecordWriter{name: name}
	switch c {
	case GZIP:
		z := gzip.NewWriter(w)
		rw.z, rw.buf = z, bufio.NewWriterSize(z, 1<<16)
	case ZLIB:
		z := zlib.NewWriter(w)
		rw.z, rw.buf = z, bufio.NewWriterSize(z, 1<<16)
	default:
		rw.buf = bufio.NewWriterSize(w, 1<<16)
	}
	return rw, nil
}

// Write appends one record holding data.
func (w *RecordWriter) Write(data []byte) error {
	if w.err != nil {
		return w.err
	}
	w.rec = tfrecord.AppendRecord(w.rec[:0], data)
	if _, err := w.buf.Write(w.rec); err != nil {
		w.err = fmt.Errorf("dataset: write %s: %w", w.name, err)
	}
	return w.err
}

// WriteExample appends one record holding ex as a tf.train.Example.
func (w *RecordWriter) WriteExample(ex Example) error {
	if w.err != nil {
		return w.err
	}
	data, err := AppendExample(nil, ex)
	if err != nil {
		return fmt.Errorf("dataset: write %s: %w", w.name, err)
	}
	return w.Write(data)
}

// Flush writes the buffered records through (and the compressor's
// pending output) to the underlying writer.
func (w *RecordWriter) Flush() error {
	if w.err != nil {
		return w.err
	}
	err := w.buf.Flush()
	if err == nil && w.z != nil {
		err = w.z.Flush()
	}
	if err != nil {
		w.err = fmt.Errorf("dataset: write %s: %w", w.name, err)
	}
	return w.err
}

// Close flushes the records and ends the compressed stream, if any; it
// does not close the io.Writer written to. Later writes are errors.
func (w *RecordWriter) Close() error {
	if w.err != nil {
		return w.err
	}
	err := w.buf.Flush()
	if err == nil && w.z != nil {
		err = w.z.Close()
	}
	if err != nil {
		w.err = fmt.Errorf("dataset: write %s: %w", w.name, err)
		return w.err
	}
	w.err = fmt.Errorf("dataset: write %s: %w", w.name, fs.ErrClosed)
	return nil
}

// RecordFileWriter is a RecordWriter to a file it created: Close closes both.
type RecordFileWriter struct {
	*RecordWriter
	f *os.File
}

// CreateRecords creates a new TFRecord file at path, compressed as
// c (AutoCompression: by path's extension). An existing file is an
// error: it is never overwritten.
func CreateRecords(path string, c Compression) (*RecordFileWriter, error) {
	if c == AutoCompression {
		c = CompressionOf(path)
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("dataset: %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	w, err := NewRecordWriter(f, path, c)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &RecordFileWriter{RecordWriter: w, f: f}, nil
}

// Close writes the records, ends the compressed stream and closes the
// file; the first error met, if any.
func (w *RecordFileWriter) Close() error {
	err := w.RecordWriter.Close()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("dataset: close %s: %w", w.name, cerr)
	}
	return err
}
